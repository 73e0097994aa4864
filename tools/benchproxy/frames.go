package benchproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/qsplice/qsplice/backend"
	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/tools/lab"
)

// frameCounter counts the front-end's and the shim's syscalls and heap
// allocations with perf: at rest, before any load (no flows, no
// lingering connections), and under bulk load against the VIP, divided
// by the frames each daemon moved.
type frameCounter struct {
	r       *run
	lab     *lab.Lab
	daemons []*countedDaemon
}

type countedDaemon struct {
	cost   *FrameCost
	pid    int
	frames func(context.Context, *lab.Lab) (uint64, error)
	loops  func(context.Context, *lab.Lab) (*Loops, error)
	events []string // nil: not counted (cost.Error says why)
}

// newFrameCounter defines the uprobes; they are removed when the run
// ends. Without perf every cost carries the reason instead.
func (r *run) newFrameCounter(l *lab.Lab, fePid, shimPid int) (*frameCounter, error) {
	fc := &frameCounter{r: r, lab: l, daemons: []*countedDaemon{
		{cost: &FrameCost{Process: RoleFrontend}, pid: fePid, frames: frontendFrames, loops: frontendLoops},
		{cost: &FrameCost{Process: RoleShim}, pid: shimPid, frames: shimFrames, loops: shimLoops},
	}}
	if _, err := exec.LookPath("perf"); err != nil {
		for _, d := range fc.daemons {
			d.cost.Error = errNoPerf.Error()
		}
		return fc, nil
	}
	probes := &perfProbes{group: "qsbp" + r.id}
	r.cleanups = append(r.cleanups, probes.remove)
	for _, d := range fc.daemons {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", d.pid))
		if err != nil {
			return nil, err
		}
		// The kernel refuses an event name another group already has
		// (EEXIST, perf's exit status 239), so the name carries the run's
		// id as the group does: two runs on one machine no longer collide.
		ev, err := probes.addMalloc(d.cost.Process+"_malloc_"+r.id, exe)
		if err != nil {
			d.cost.Error = err.Error()
			continue
		}
		d.events = []string{syscallEvent, ev}
	}
	return fc, nil
}

func (fc *frameCounter) costs() []*FrameCost {
	var costs []*FrameCost
	for _, d := range fc.daemons {
		costs = append(costs, d.cost)
	}
	return costs
}

// each runs f for every daemon still counted, concurrently; an error
// marks that daemon's cost.
func (fc *frameCounter) each(f func(d *countedDaemon) error) {
	var wg sync.WaitGroup
	for _, d := range fc.daemons {
		if d.events == nil || d.cost.Error != "" {
			continue
		}
		wg.Go(func() {
			if err := f(d); err != nil {
				d.cost.Error = err.Error()
			}
		})
	}
	wg.Wait()
}

// atRest counts the daemons with no load: timers and keepalives, which
// are not a cost per frame; the notes say how much of the loaded count
// they explain.
func (fc *frameCounter) atRest(ctx context.Context) {
	fc.each(func(d *countedDaemon) error {
		counts, began, ended, err := perfCount(ctx, fc.r.dir, "rest", d.pid, d.events, idleWindow)
		if err != nil {
			return err
		}
		secs := ended.Sub(began).Seconds()
		d.cost.IdleSyscallsPerSec = float64(counts[d.events[0]]) / secs
		d.cost.IdleMallocsPerSec = float64(counts[d.events[1]]) / secs
		return nil
	})
}

// settleTimeout bounds settle: the daemons' linger (5 s) and a margin.
const settleTimeout = 15 * time.Second

// settle waits until the front-end has no flow and the shim no entry
// left from the earlier phases (tens of thousands of short connections
// lingering 5 s): their expiry is not the bulk load's cost, and counted
// with it it made the front-end wake for one linger deadline after
// another (0.05-0.1 system calls per frame more). It returns how long
// that took and whether it happened within settleTimeout.
func (fc *frameCounter) settle(ctx context.Context) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < settleTimeout {
		if fc.drained(ctx) {
			return time.Since(start), true
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return time.Since(start), false
		}
	}
	return time.Since(start), false
}

// drained reports whether neither daemon holds a connection.
func (fc *frameCounter) drained(ctx context.Context) bool {
	raw, err := fc.lab.FetchFrontendStatus(ctx)
	if err != nil {
		return false
	}
	var fe frontend.Status
	if json.Unmarshal(raw.Raw, &fe) != nil || fe.Engine.Flows != 0 {
		return false
	}
	client := fc.lab.HTTPClient("c1")
	defer client.CloseIdleConnections()
	var shim backend.Status
	url := fmt.Sprintf("http://%s:%d/status", fc.lab.BackendAddr(1), lab.BackendAdminPort)
	if _, err := lab.GetJSON(ctx, client, url, &shim); err != nil {
		return false
	}
	return shim.Entries == 0
}

// underLoad counts the daemons during a bulk load against the VIP, once
// the earlier phases' connections are gone (settle).
func (fc *frameCounter) underLoad(ctx context.Context, t target) error {
	o := fc.r.o
	settled, ok := fc.settle(ctx)
	for _, d := range fc.daemons {
		d.cost.SettleSeconds = settled.Seconds()
	}
	if !ok {
		fc.r.progress("  connections of the earlier phases still there after %v: counting with them", settled.Round(time.Millisecond))
	}
	const warmup = time.Second
	load := wrkRun{ns: t.ns, url: t.url(o.BulkSize), conns: o.BulkConns, script: fc.r.script,
		duration: o.FrameWindow + warmup + 2*time.Second}
	wait, err := load.start(ctx)
	if err != nil {
		return err
	}
	select {
	case <-time.After(warmup):
	case <-ctx.Done():
	}
	fc.each(func(d *countedDaemon) error {
		// The daemon's frame counters are read outside the counted
		// window (a /status request allocates and makes syscalls of its
		// own), and the frames scaled to the window's share of the time
		// between the two readings: the load is steady.
		f0, t0, err := readFrames(ctx, fc.lab, d.frames)
		if err != nil {
			return err
		}
		loops0, lerr := d.loops(ctx, fc.lab)
		counts, began, ended, err := perfCount(ctx, fc.r.dir, "load", d.pid, d.events, o.FrameWindow)
		if err != nil {
			return err
		}
		f1, t1, err := readFrames(ctx, fc.lab, d.frames)
		if err != nil {
			return err
		}
		c := d.cost
		if loops1, err := d.loops(ctx, fc.lab); err == nil && lerr == nil {
			c.Loops = loops1.since(loops0)
		}
		c.Seconds = ended.Sub(began).Seconds()
		c.FramesRead, c.SpanSeconds = f1-f0, t1.Sub(t0).Seconds()
		c.Frames = scaleFrames(f1-f0, t1.Sub(t0), ended.Sub(began))
		c.Syscalls, c.Mallocs = counts[d.events[0]], counts[d.events[1]]
		c.derive()
		if c.Frames == 0 {
			return errors.New("no frames moved during the window")
		}
		return nil
	})
	_, err = wait()
	return err
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
	st, err := frontendStatus(ctx, l)
	if err != nil {
		return 0, err
	}
	return st.LinkStat.RxFrames + st.LinkStat.TxFrames, nil
}

// frontendStatus reads the front-end's /status.
func frontendStatus(ctx context.Context, l *lab.Lab) (*frontend.Status, error) {
	raw, err := l.FetchFrontendStatus(ctx)
	if err != nil {
		return nil, fmt.Errorf("front-end /status: %w", err)
	}
	var st frontend.Status
	if err := json.Unmarshal(raw.Raw, &st); err != nil {
		return nil, fmt.Errorf("front-end /status: %w", err)
	}
	return &st, nil
}

// frontendLoops reads the front-end's gathering counters off its /status.
func frontendLoops(ctx context.Context, l *lab.Lab) (*Loops, error) {
	st, err := frontendStatus(ctx, l)
	if err != nil {
		return nil, err
	}
	return &Loops{Shards: st.Workers, Gathers: st.Gathers, Spreads: st.Spreads, GatheredAtEnd: st.Gathered}, nil
}

// shimLoops reads the shim's gathering counters off its /status.
func shimLoops(ctx context.Context, l *lab.Lab) (*Loops, error) {
	st, err := shimStatus(ctx, l)
	if err != nil {
		return nil, err
	}
	return &Loops{Shards: len(st.Workers), Gathers: st.Gathers, Spreads: st.Spreads, GatheredAtEnd: st.Gathered}, nil
}

// since is what changed from before to l: the changes during a load,
// the state at its end.
func (l *Loops) since(before *Loops) *Loops {
	return &Loops{Shards: l.Shards, Gathers: l.Gathers - before.Gathers, Spreads: l.Spreads - before.Spreads,
		GatheredAtEnd: l.GatheredAtEnd}
}

// shimFrames returns the frames the shim has read and written on the
// wire and on its TAP, counting each reply its kernel fast path sent
// (backend -reply-fastpath) in the middle of a response twice, as the
// read from the TAP and the write to the wire it stands for, and each
// echo once more (its read is counted already): the figure is system
// calls per frame moved on the shim's path, those moved with none
// included.
func shimFrames(ctx context.Context, l *lab.Lab) (uint64, error) {
	st, err := shimStatus(ctx, l)
	if err != nil {
		return 0, err
	}
	return st.Wire.RxFrames + st.Wire.TxFrames + st.TAP.RxFrames + st.TAP.TxFrames + 2*st.FastPath.Frames + st.FastPath.Echoed, nil
}

// shimFirstReplies reads the shim's count of responses and of those whose
// first reply the kernel echoed off its /status.
func shimFirstReplies(ctx context.Context, l *lab.Lab) (FirstReplies, error) {
	st, err := shimStatus(ctx, l)
	if err != nil {
		return FirstReplies{}, err
	}
	return FirstReplies{Responses: st.Shim.Responses, Echoed: st.Shim.ResponsesFirstEchoed}, nil
}

// shimStatus reads the shim's /status, from the client's namespace.
func shimStatus(ctx context.Context, l *lab.Lab) (*backend.Status, error) {
	client := l.HTTPClient("c1")
	defer client.CloseIdleConnections()
	url := fmt.Sprintf("http://%s:%d/status", l.BackendAddr(1), lab.BackendAdminPort)
	var st backend.Status
	if _, err := lab.GetJSON(ctx, client, url, &st); err != nil {
		return nil, fmt.Errorf("shim: %w", err)
	}
	return &st, nil
}
