package loadgen

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"time"
)

// Defaults used where a Config field is zero.
const (
	DefaultTimeout     = 2 * time.Second
	DefaultMaxInFlight = 4000
)

// Config describes one run. Zero Timeout and MaxInFlight take the defaults
// above; everything else must be set.
type Config struct {
	// Target is the base URL requests go to, e.g. http://198.18.0.100:8080.
	// Each stream's Path is appended to it.
	Target  string
	Streams []Stream

	// Warmup runs first and is sent but left out of the results; Duration
	// is the measured window after it. A request belongs to the phase its
	// intended send time falls in.
	Warmup   time.Duration
	Duration time.Duration

	// Timeout bounds each request from the moment it is released: any wait
	// for a pooled connection, the connect, the send and the whole answer,
	// as a real client's timer would.
	Timeout time.Duration

	// MaxInFlight bounds the requests outstanding across all streams. A
	// request due while the bound is reached is not sent and counts as
	// not-sent; it keeps its place (intended time) in the offered load.
	MaxInFlight int

	// ConnsPerStream is the size of each stream's keep-alive connection
	// pool; requests beyond it wait for a connection, and that wait counts
	// in their latency. 0 opens a new connection per request.
	ConnsPerStream int

	// Seed makes the Poisson schedules reproducible.
	Seed uint64

	// Steps multiply every stream's rate by a factor that changes at the
	// given offsets from the start (steps.go); nil: constant rates.
	Steps []LoadStep
	// SessionCookie names the cookie of a stream's sessions (Stream.
	// Sessions); "" means DefaultSessionCookie.
	SessionCookie string
	// Sources are local addresses the connections of every stream use
	// in turn (sources.go); nil: the kernel's choice.
	Sources []netip.Addr
}

// DefaultSessionCookie is the feedback policy's usual session cookie.
const DefaultSessionCookie = "sid"

// withDefaults returns c with zero fields defaulted, or why it cannot run.
// checkTarget accepts http://host[:port] with nothing after it; noPath
// says where the paths come from instead.
func checkTarget(target, noPath string) error {
	u, err := url.Parse(target)
	switch {
	case err != nil:
		return fmt.Errorf("target: %v", err)
	case u.Scheme != "http" || u.Host == "":
		return fmt.Errorf("target %q: want http://host[:port]", target)
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("target %q: %s", target, noPath)
	}
	return nil
}

func (c Config) withDefaults() (Config, error) {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.SessionCookie == "" {
		c.SessionCookie = DefaultSessionCookie
	}
	if err := checkSteps(c.Steps); err != nil {
		return c, err
	}
	if !validCookieName(c.SessionCookie) {
		return c, fmt.Errorf("session cookie name %q is not a cookie name", c.SessionCookie)
	}
	switch err := checkTarget(c.Target, "give the path in each stream, not in the target"); {
	case err != nil:
		return c, err
	case len(c.Streams) == 0:
		return c, errors.New("no streams")
	case c.Duration <= 0:
		return c, errors.New("duration must be positive")
	case c.Warmup < 0:
		return c, errors.New("warmup must not be negative")
	case c.Timeout < 0:
		return c, errors.New("timeout must not be negative")
	case c.MaxInFlight < 0:
		return c, errors.New("max in-flight must not be negative")
	case c.ConnsPerStream < 0:
		return c, errors.New("connections per stream must not be negative")
	}
	names := map[string]bool{}
	for _, st := range c.Streams {
		if err := st.validate(); err != nil {
			return c, fmt.Errorf("stream %q: %v", st.Name, err)
		}
		if names[st.Name] {
			return c, fmt.Errorf("stream name %q used twice", st.Name)
		}
		names[st.Name] = true
	}
	return c, nil
}
