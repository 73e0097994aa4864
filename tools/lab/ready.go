package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"
)

const (
	readyPoll    = 50 * time.Millisecond // between readiness attempts
	readyAttempt = time.Second           // bound on one attempt
	tailLines    = 20                    // log lines quoted in errors
)

// readyCheck is one readiness condition: it succeeds once the thing is
// usable. owner is the process whose log explains a failure.
type readyCheck struct {
	what  string
	owner string
	check func(ctx context.Context) error
}

// waitReady retries every check until all pass. It fails as soon as one of
// the watched processes dies, quoting that process's log, or at the
// configured timeout, quoting the log of the check's owner.
func (l *Lab) waitReady(parent context.Context, watch []procSpec, checks []*readyCheck) error {
	ctx, cancel := context.WithTimeout(parent, l.cfg.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for _, rc := range checks {
		var lastErr error
		for {
			if err := l.checkAlive(watch); err != nil {
				return err
			}
			actx, acancel := context.WithTimeout(ctx, readyAttempt)
			lastErr = rc.check(actx)
			acancel()
			if lastErr == nil {
				break
			}
			select {
			case <-ctx.Done():
				// A process that died during the last attempt explains more
				// than the timeout does.
				if err := l.checkAlive(watch); err != nil {
					return err
				}
				if err := parent.Err(); err != nil {
					return fmt.Errorf("lab: waiting for %s: %w", rc.what, err)
				}
				return fmt.Errorf("lab: %s not ready after %v: %v\nlast lines of its log (logs/%s.log):\n%s",
					rc.what, l.cfg.ReadyTimeout, lastErr, rc.owner, l.logTail(rc.owner, tailLines))
			case <-tick.C:
			}
		}
	}
	return nil
}

// checkAlive returns an error naming the first watched process that is
// not running.
func (l *Lab) checkAlive(watch []procSpec) error {
	for _, p := range watch {
		if s := l.status(p); !s.alive {
			return fmt.Errorf("lab: %s %s\nlast lines of its log (logs/%s.log):\n%s",
				p.name, s.detail, p.name, l.logTail(p.name, tailLines))
		}
	}
	return nil
}

// webCheck succeeds when back-end k accepts TCP on port, dialled from
// inside its own namespace to its tap0 address.
func (l *Lab) webCheck(k, port int, owner string) *readyCheck {
	addr := net.JoinHostPort(l.BackendAddr(k).String(), strconv.Itoa(port))
	return &readyCheck{
		what:  fmt.Sprintf("%s (%s in %s)", owner, addr, l.NS(backendHost(k))),
		owner: owner,
		check: func(ctx context.Context) error {
			conn, err := dialIn(ctx, l.NS(backendHost(k)), "tcp4", addr)
			if err != nil {
				return err
			}
			return conn.Close()
		},
	}
}

// FrontendStatus is the part of the front-end's /status document the lab
// relies on.
type FrontendStatus struct {
	Backends []struct {
		ID     int    `json:"id"`
		Alive  bool   `json:"alive"`
		Deaths uint64 `json:"deaths"`
	} `json:"backends"`
	Raw json.RawMessage `json:"-"` // the whole document
}

// FetchFrontendStatus gets AdminURL/status from the first client host.
func (l *Lab) FetchFrontendStatus(ctx context.Context) (*FrontendStatus, error) {
	client := l.HTTPClient(clientHost(1))
	defer client.CloseIdleConnections()
	var st FrontendStatus
	body, err := GetJSON(ctx, client, AdminURL+"/status", &st)
	if err != nil {
		return nil, err
	}
	st.Raw = body
	return &st, nil
}

// aliveBackends returns the ids the front-end reports alive.
func (s *FrontendStatus) aliveBackends() map[int]bool {
	alive := make(map[int]bool)
	for _, b := range s.Backends {
		if b.Alive {
			alive[b.ID] = true
		}
	}
	return alive
}

// frontendCheck succeeds when the front-end reports the given back-ends
// alive (all of them when ids is empty).
func (l *Lab) frontendCheck(ids ...int) *readyCheck {
	if len(ids) == 0 {
		for k := 1; k <= l.cfg.Backends; k++ {
			ids = append(ids, k)
		}
	}
	return &readyCheck{
		what:  fmt.Sprintf("front-end (%s/status reporting back-ends %v alive)", AdminURL, ids),
		owner: frontendName,
		check: func(ctx context.Context) error {
			st, err := l.FetchFrontendStatus(ctx)
			if err != nil {
				return err
			}
			alive := st.aliveBackends()
			for _, id := range ids {
				if !alive[id] {
					return fmt.Errorf("back-end %d not alive in %s", id, st.Raw)
				}
			}
			return nil
		},
	}
}

// shimRegisteredCheck succeeds when back-end k's shim reports, on its own
// /status, that the front-end acknowledged its registration. For a shim
// that was restarted this is what counts: the front-end may still call
// the back-end alive on the old shim's keepalives, and the new shim's
// registration resets the connections the old one carried.
func (l *Lab) shimRegisteredCheck(k int) *readyCheck {
	url := fmt.Sprintf("http://%s/status", netip.AddrPortFrom(l.BackendAddr(k), BackendAdminPort))
	return &readyCheck{
		what:  fmt.Sprintf("back-end shim %d (%s reporting registered)", k, url),
		owner: backendName(k),
		check: func(ctx context.Context) error {
			client := l.HTTPClient(clientHost(1))
			defer client.CloseIdleConnections()
			var st struct {
				Registered bool `json:"registered"`
			}
			if _, err := GetJSON(ctx, client, url, &st); err != nil {
				return err
			}
			if !st.Registered {
				return fmt.Errorf("back-end %d's shim is not registered yet", k)
			}
			return nil
		},
	}
}
