package backend

import (
	"fmt"
	"sync"
	"time"

	"github.com/qsplice/qsplice/internal/gather"
	"github.com/qsplice/qsplice/splice"
	"golang.org/x/sys/unix"
)

// Gathering: worker 0's loop serves every shard while one core is
// enough (issue 7; the policy is internal/gather's, the front-end's
// shards do the same in frontend/gather.go).
//
// Each worker has a loop of its own on its own thread, so that a shim
// with more traffic than one core can take uses them all. While the
// traffic fits in one core, the other loops only cost: each wakes for
// its own queue's frames and yields to the Go scheduler every few
// milliseconds (yieldEvery: a locked thread's yield is four or five
// futex calls), and each receive-moderation hold gathers half the
// super-frames one loop's would. Measured on the 2-core development
// machine (docs/results.md) with -workers 1 against 2: under bulk load
// 0.06 system calls per frame against 0.12, with one connection per
// request 45-56 us of the shim's CPU per request against 84-90 (CPU per
// GB moved with the machine more than with the workers).
//
// So worker 0's loop measures how busy the loops are (the CPU time their
// threads used, system time included: the kernel work a TAP write or a
// wire send does inside the call is the shim's too) and, while that
// stays under Below of one core over a window, gathers: the other
// workers hand their shards over and park, and worker 0's loop serves
// them all. Once it is busy for more than Above of the window, it hands
// them back. A shard keeps its engine, its wire socket (a member of the
// fanout group, which still steers its flows to it), its TAP queue, its
// mailbox; worker 0's poller watches the adopted sockets and queues
// through two epoll instances (the wire's like its own wire, the TAP's
// like its own TAP), and an adopted shard's wire frames leave by worker
// 0's socket, with worker 0's hold when it holds.
//
// Two things move with a shard. The frames queued for its loop's next
// wait leave before the handover, so no flow is reordered. And the TAP
// queue's multishot read: it runs as task work of the thread that
// armed it (link.UringTAP), which the kernel would wake for every frame
// while another thread serves the queue; so the loop that lets a shard
// go disarms the read (link.UringTAP.Disarm) and the loop that takes it
// arms it again from its own thread.

// DefaultGather is the shim's default policy (-gather): gather under
// half a core, spread only once worker 0's thread uses 0.95 of one. The
// front-end spreads at 0.8 of its loops' wall time; the shim's measure is
// CPU time, and under the bench's bulk load (8 connections of 10 MiB
// objects, 1.5 GB/s) the gathered worker's thread used 0.72 of a core on
// average with 100 ms windows up to 0.9 while it still waited between
// passes: at 0.8 it spread in one full run of two and stayed spread, at
// twice the system calls per frame (docs/results.md). A loop that
// cannot keep up runs all the time, near 1.
var DefaultGather = gather.Config{Below: 0.5, Above: 0.95, Window: gather.Default.Window}

// Poller tokens of the epoll instances watching the gathered shards'
// wire sockets and TAP queues.
const (
	tokGatherWire = tokControl + 1 + iota
	tokGatherTAP
)

// disarmLimit bounds the wait for the kernel to end a TAP read that is
// moving to another thread.
const disarmLimit = time.Second

// gathering is the daemon's side of it, all but want, handed and the
// counters touched by worker 0's loop only.
type gathering struct {
	*gather.Handover[*worker]
	// stop ends every park when the daemon stops.
	stop     chan struct{}
	stopOnce sync.Once
	// wireEp and tapEp watch the wire sockets and the TAP queues of the
	// shards gathered (tokGatherWire, tokGatherTAP).
	wireEp, tapEp int
}

// startGathering sets gathering up for a shim of more than one worker on
// the offload path; otherwise the workers run without.
func (d *Daemon) startGathering() error {
	if !d.cfg.Gather.On() || len(d.workers) < 2 || d.taps == nil {
		return nil
	}
	g := &gathering{Handover: gather.NewHandover[*worker](d.cfg.Gather, d.now(), len(d.workers)),
		stop: make(chan struct{}), wireEp: -1, tapEp: -1}
	var err error
	if g.wireEp, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err == nil {
		g.tapEp, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	}
	if err != nil {
		g.close()
		return fmt.Errorf("backend: gathering: epoll_create1: %w", err)
	}
	w0 := d.workers[0]
	// The adopted wires as worker 0's own (newWorker): read after every
	// hold with a receive ring, else reported when a hold ends.
	addWire := w0.poller.AddLate
	if w0.wireHeld {
		addWire = w0.poller.AddHeld
	}
	if err := addWire(g.wireEp, tokGatherWire); err != nil {
		g.close()
		return fmt.Errorf("backend: gathering: %w", err)
	}
	if err := w0.poller.AddHeld(g.tapEp, tokGatherTAP); err != nil {
		g.close()
		return fmt.Errorf("backend: gathering: %w", err)
	}
	for _, w := range d.workers[1:] {
		w.resume = make(chan struct{}, 1)
	}
	d.gather = g
	return nil
}

// close releases the epoll instances, once the loops have ended.
func (g *gathering) close() {
	for _, fd := range []int{g.wireEp, g.tapEp} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// park hands w's shard over to worker 0's loop and waits until it comes
// back or the daemon stops. Called by w's loop before a wait, when the
// loops gather.
func (w *worker) park() error {
	g, w0 := w.d.gather, w.d.workers[0]
	if w.wireInHolds {
		// What the last pass queued for this loop's next wait leaves
		// now, ahead of anything worker 0's loop sends for the shard.
		if err := w.wire.FlushQueued(); err != nil {
			w.writeFailed(w.wire, err)
		}
	}
	if w.tapRing != nil {
		w.disarm(w, "handing the shard over")
	}
	w.loop.Store(w0)
	g.Hand(w)
	w0.poller.Wake()
	select {
	case <-w.resume:
	case <-g.stop:
		return nil
	}
	w.loop.Store(w)
	if w.tapRing != nil {
		// The read again from this thread (gather.go's header).
		if err := w.tapRing.Submit(); err != nil {
			return fmt.Errorf("backend: worker %d: taking the shard back: %w", w.id, err)
		}
	}
	return nil
}

// disarm ends o's TAP read, armed by this loop's thread, so that another
// thread can arm it (gather.go's header). Should the kernel not report
// its end in time, the read stays with this thread: the frames are still
// read, at the cost of a wake-up of this thread for each, and the loop
// goes on.
func (w *worker) disarm(o *worker, why string) {
	if err := o.tapRing.Disarm(disarmLimit); err != nil {
		w.d.log.Warn("TAP read not moved to another thread: this one will be woken for its frames",
			"worker", w.id, "shard", o.id, "while", why, "err", err)
	}
}

// readCPU reads the CPU time the worker's thread has used (a system
// call: clock_gettime of a thread's CPU clock is not in the vDSO), for
// worker 0's policy, and says when to read it next: worker 0 once a
// window, when the policy decides; the others four times a window, so
// that what worker 0 sums is at most a quarter of a window old. The
// wall time a pass takes is no measure here: on a machine whose cores
// the shim shares with the web server and the clients, a pass waits for
// a core as long as it runs, and measured so the loops took turns
// gathering and spreading under a load one core carried.
func (w *worker) readCPU(now splice.Time) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return
	}
	cpu := ts.Nano()
	if w.nextCPURead == 0 {
		w.cpuBase = cpu // the thread may have run other goroutines before the loop locked it
	}
	w.loopCPU.Store(cpu - w.cpuBase)
	w.nextCPURead = now.Add(max(w.d.cfg.Gather.Window/4, time.Millisecond))
}

// gatherStep runs at the end of each of worker 0's passes: once a window
// it takes the loops' CPU time, asks the policy, and gathers or spreads;
// every pass it adopts the shards handed over and gives them back when
// the policy spread.
func (w *worker) gatherStep(now splice.Time) error {
	g := w.d.gather
	want := g.Want()
	if g.Due(now) {
		w.readCPU(now)
		var busy time.Duration
		for _, o := range w.d.workers {
			busy += time.Duration(o.loopCPU.Load())
		}
		var gathering bool
		if want, gathering = g.Decide(now, busy); gathering {
			for _, o := range w.d.workers[1:] {
				o.poller.Wake() // to see it before its next wait
			}
		}
	}
	for o, ok := g.Take(); ok; o, ok = g.Take() {
		if err := w.adopt(o); err != nil {
			return err
		}
	}
	if !want && len(w.adopted) > 0 {
		return w.giveBack()
	}
	return nil
}

// adopt makes worker 0's loop serve o's shard: its socket and queue join
// the gathering's epoll instances, its TAP read is armed from this
// thread, its wire frames leave by worker 0's socket.
func (w *worker) adopt(o *worker) error {
	g := w.d.gather
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(o.id)}
	if err := unix.EpollCtl(g.wireEp, unix.EPOLL_CTL_ADD, o.wire.FD(), &ev); err != nil {
		return fmt.Errorf("backend: gathering worker %d's wire: %w", o.id, err)
	}
	if err := unix.EpollCtl(g.tapEp, unix.EPOLL_CTL_ADD, o.tap.FD(), &ev); err != nil {
		return fmt.Errorf("backend: gathering worker %d's TAP queue: %w", o.id, err)
	}
	if o.tapRing != nil {
		if err := o.tapRing.Submit(); err != nil {
			return fmt.Errorf("backend: gathering worker %d: %w", o.id, err)
		}
	}
	o.ownInHolds = o.wireInHolds
	o.txWire, o.wireInHolds = w.wire, w.wireInHolds
	if len(w.adopted) == 0 {
		w.mods = append(w.mods[:0], &w.mod)
	}
	w.adopted = append(w.adopted, o)
	w.mods = append(w.mods, &o.mod)
	return nil
}

// giveBack hands every gathered shard back to its own loop, after the
// frames queued for worker 0's next wait (theirs among them) have left
// and their TAP reads are disarmed here.
func (w *worker) giveBack() error {
	g := w.d.gather
	if w.wireInHolds {
		if err := w.wire.FlushQueued(); err != nil {
			w.writeFailed(w.wire, err)
		}
	}
	for _, o := range w.adopted {
		if err := unix.EpollCtl(g.wireEp, unix.EPOLL_CTL_DEL, o.wire.FD(), nil); err != nil {
			return fmt.Errorf("backend: spreading worker %d's wire: %w", o.id, err)
		}
		if err := unix.EpollCtl(g.tapEp, unix.EPOLL_CTL_DEL, o.tap.FD(), nil); err != nil {
			return fmt.Errorf("backend: spreading worker %d's TAP queue: %w", o.id, err)
		}
		if o.tapRing != nil {
			w.disarm(o, "spreading")
		}
		o.txWire, o.wireInHolds = o.wire, o.ownInHolds
		o.resume <- struct{}{}
	}
	clear(w.adopted)
	w.adopted = w.adopted[:0]
	clear(w.mods)
	w.mods = w.mods[:0]
	return nil
}
