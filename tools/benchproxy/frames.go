package benchproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/qsplice/qsplice/backend"
	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/tools/lab"
)

// frameCosts counts the front-end's and the shim's syscalls and
// allocations during a bulk load against the VIP. Without perf the costs
// carry the reason instead.
func (r *run) frameCosts(ctx context.Context, l *lab.Lab, t target, fePid, shimPid int) (_ []*FrameCost, err error) {
	fe := &FrameCost{Process: RoleFrontend}
	shim := &FrameCost{Process: RoleShim}
	costs := []*FrameCost{fe, shim}
	if _, err := exec.LookPath("perf"); err != nil {
		for _, c := range costs {
			c.Error = "perf is not installed (Debian package linux-perf)"
		}
		return costs, nil
	}
	probes := &perfProbes{group: "qsbp" + r.id}
	defer func() { err = errors.Join(err, probes.remove()) }()
	type daemon struct {
		cost   *FrameCost
		pid    int
		frames func(context.Context, *lab.Lab) (uint64, error)
		events []string
	}
	daemons := []*daemon{{cost: fe, pid: fePid, frames: frontendFrames}, {cost: shim, pid: shimPid, frames: shimFrames}}
	for _, d := range daemons {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", d.pid))
		if err != nil {
			return nil, err
		}
		ev, err := probes.addMalloc(d.cost.Process+"_malloc", exe)
		if err != nil {
			d.cost.Error = err.Error()
			continue
		}
		d.events = []string{syscallEvent, ev}
	}
	// First the daemons at rest: what they spend with no load at all
	// (timers, keepalives) is not a cost per frame, and the notes say how
	// much of the loaded count it explains.
	var wg sync.WaitGroup
	for _, d := range daemons {
		if d.events == nil {
			continue
		}
		wg.Go(func() {
			counts, began, ended, err := perfCount(ctx, r.dir, "idle", d.pid, d.events, idleWindow)
			if err != nil {
				d.cost.Error = err.Error()
				return
			}
			secs := ended.Sub(began).Seconds()
			d.cost.IdleSyscallsPerSec = float64(counts[d.events[0]]) / secs
			d.cost.IdleMallocsPerSec = float64(counts[d.events[1]]) / secs
		})
	}
	wg.Wait()
	const warmup = time.Second
	load := wrkRun{ns: t.ns, url: t.url(r.o.BulkSize), conns: r.o.BulkConns, script: r.script,
		duration: r.o.FrameWindow + warmup + 2*time.Second}
	wait, err := load.start(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case <-time.After(warmup):
	case <-ctx.Done():
	}
	for _, d := range daemons {
		if d.events == nil || d.cost.Error != "" {
			continue
		}
		wg.Go(func() {
			// The daemon's frame counters are read outside the counted
			// window (a /status request allocates and makes syscalls of
			// its own), and the frames scaled to the window's share of
			// the time between the two readings: the load is steady.
			f0, t0, err := readFrames(ctx, l, d.frames)
			if err != nil {
				d.cost.Error = err.Error()
				return
			}
			counts, began, ended, err := perfCount(ctx, r.dir, "load", d.pid, d.events, r.o.FrameWindow)
			if err != nil {
				d.cost.Error = err.Error()
				return
			}
			f1, t1, err := readFrames(ctx, l, d.frames)
			if err != nil {
				d.cost.Error = err.Error()
				return
			}
			d.cost.Seconds = ended.Sub(began).Seconds()
			d.cost.FramesRead, d.cost.SpanSeconds = f1-f0, t1.Sub(t0).Seconds()
			d.cost.Frames = scaleFrames(f1-f0, t1.Sub(t0), ended.Sub(began))
			d.cost.Syscalls = counts[d.events[0]]
			d.cost.Mallocs = counts[d.events[1]]
			d.cost.derive()
			if d.cost.Frames == 0 {
				d.cost.Error = "no frames moved during the window"
			}
		})
	}
	wg.Wait()
	if _, err := wait(); err != nil {
		return nil, err
	}
	return costs, nil
}

// idleWindow is how long the daemons are counted at rest.
const idleWindow = time.Second

// readFrames reads a daemon's frame counter and when it was read: the
// middle of the request.
func readFrames(ctx context.Context, l *lab.Lab, frames func(context.Context, *lab.Lab) (uint64, error)) (uint64, time.Time, error) {
	start := time.Now()
	n, err := frames(ctx, l)
	end := time.Now()
	return n, start.Add(end.Sub(start) / 2), err
}

// scaleFrames estimates the frames moved in a window from those moved
// over a longer span that contains it, at a steady rate.
func scaleFrames(frames uint64, span, window time.Duration) uint64 {
	if span <= 0 || window >= span {
		return frames
	}
	return uint64(float64(frames) * float64(window) / float64(span))
}

// frontendFrames returns the frames the front-end has read and written.
func frontendFrames(ctx context.Context, l *lab.Lab) (uint64, error) {
	raw, err := l.FetchFrontendStatus(ctx)
	if err != nil {
		return 0, fmt.Errorf("front-end /status: %w", err)
	}
	var st frontend.Status
	if err := json.Unmarshal(raw.Raw, &st); err != nil {
		return 0, fmt.Errorf("front-end /status: %w", err)
	}
	return st.LinkStat.RxFrames + st.LinkStat.TxFrames, nil
}

// shimFrames returns the frames the shim has read and written on the
// wire and on its TAP.
func shimFrames(ctx context.Context, l *lab.Lab) (uint64, error) {
	client := l.HTTPClient("c1")
	defer client.CloseIdleConnections()
	url := fmt.Sprintf("http://%s:%d/status", l.BackendAddr(1), lab.BackendAdminPort)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("shim /status: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("shim /status: %s", resp.Status)
	}
	var st backend.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("shim /status: %w", err)
	}
	return st.Wire.RxFrames + st.Wire.TxFrames + st.TAP.RxFrames + st.TAP.TxFrames, nil
}
