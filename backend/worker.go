package backend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qsplice/qsplice/internal/rxmod"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// Poller tokens of a worker's descriptors.
const (
	tokWire uint32 = iota
	tokTAP
	tokControl
)

const (
	// batchFrames bounds the frames one ReadBatch takes from a link: the
	// loop writes their output before it reads again, so a batch is what
	// one pass holds (32 super-frames are 2 MiB per link).
	batchFrames = 32
	// handoffBufs is how many frames a worker can have in flight to the
	// other workers at once (see handOver); more are dropped. Two whole
	// TAP batches: the owner returns the buffers only once it has
	// written the pass's output, and while the shards are gathered that
	// is after the loop has read this shard's batch. With 16, a batch
	// of short connections' frames (half of them another worker's when
	// the TAP is steered by the kernel's flow table) overran them, and
	// each dropped SYN-ACK or reply cost its connection a retransmission
	// timeout, 0.2 to 1.2 s (docs/results.md, twentieth session). Each
	// buffer is made on its first use, so an idle pool costs nothing.
	handoffBufs = 2 * batchFrames
	// plainTAPBufs is how many frames the plain TAP's reader can have in
	// flight to the workers before it waits for one to come back.
	plainTAPBufs = 256
	// maxControlPerPass bounds the control datagrams one pass reads.
	maxControlPerPass = 64
	// passFrames is the output a pass starts with room for: a batch from
	// each link, every buffer the plain TAP's reader can have in flight
	// and the control datagrams sent on the wire. The slices would grow
	// to it anyway, an allocation each time a pass is busier than all
	// before.
	passFrames = 2*batchFrames + plainTAPBufs + wireControlFrames
)

// yieldEvery is how often a busy loop passes through the Go scheduler.
// A goroutine that never does is, after 10 ms, one the runtime's sysmon
// treats as running too long: each time it then finds the loop's P in a
// system call (epoll_wait, sendmmsg) it takes the P away, and the loop
// must win a P back when the call returns. Measured under bulk load,
// sysmon then woke 2000-4000 times a second (a nanosleep each) and the
// retakes added futex wake-ups; a Gosched every few milliseconds resets
// the runtime's count. It is not free: the loop's goroutine is locked to
// its thread, so a Gosched hands the thread's P to another thread and
// back, four futex calls or so between them. Once receive moderation had
// removed most other system calls these were a third of the shim's under
// bulk load with a Gosched every 5 ms; every 8 ms, still under sysmon's
// 10, made 30% fewer (docs/results.md); every 50 ms brought sysmon back.
const yieldEvery = 8 * time.Millisecond

// A worker is one packet loop on its own locked OS thread: it owns an
// engine shard, its wire socket (a member of the wire's fanout group),
// on the offload path its own TAP queue, and an epoll Poller that waits
// for all of them and for the engine's next deadline. Worker 0 also owns
// the control socket and the Agent.
//
// One pass: wait; read every ready link with one ReadBatch each and feed
// every frame to the shard; run the shard's due timers; write its output
// with one WriteBatch per link; hand its events to the agent. Nothing on
// that path allocates or takes a lock another flow's worker takes.
//
// Workers talk to each other only through mailboxes (post), for what is
// not per frame: a Splice to install, its result, a finished response's
// event, a /status request; and for the rare frame that reached the wrong
// worker (handOver).
type worker struct {
	d      *Daemon
	id     int
	shim   *splice.Shim
	out    splice.Output
	poller *link.Poller
	ready  [8]uint32
	wire   *link.AFPacket
	tap    link.BatchLink // nil on the plain path (Daemon.plainTAP)
	// tapRing is tap when it is a UringTAP: the pass ends with its
	// Submit (see flush).
	tapRing *link.UringTAP
	wb, tb  *link.Batch

	// The pass's output, split per link.
	wireFrames, tapFrames [][]byte
	wireHdrs, tapHdrs     []wire.VNetHdr

	mu     sync.Mutex
	box    []mail // posted to this worker, under mu
	spare  []mail // the loop's copy of the box, swapped under mu
	asleep atomic.Bool
	free   chan *handoff // buffers for frames this worker hands to others
	held   []*handoff    // handed-over frames the pass's output may alias

	active      atomic.Int64 // the shard's requests in service, published
	lastActive  int
	busy        bool // frames read since the last drop check
	nextDropChk splice.Time
	drops       atomic.Uint64
	txErrors    atomic.Uint64
	handoffs    atomic.Uint64
	handoffLost atomic.Uint64
	fastErrors  atomic.Uint64 // fast-path map updates that failed (fastpath.go)
	fastBatch   link.FastPathBatch

	nextYield splice.Time // see yieldEvery

	// Receive moderation (issue 7, moderate.go): the policy, this pass's
	// counts for it, and what the next wait needs to know.
	mod      rxmod.Moderator
	rx       rxCounts
	pkt      wire.Packet // the counts' scratch
	tapFull  bool        // the pass's TAP read filled its batch: frames are left
	holdOff  bool        // the last hold gathered nothing: the stream stopped
	wireHeld bool        // the wire has a receive ring: holds leave it out
	// wireInHolds: the wire's frames may be queued for the next wait,
	// which sends them in its io_uring_enter (sendWireInHolds);
	// wireToHold: this pass's are (writeWire).
	wireInHolds, wireToHold bool
	// holdUntil is when a hold that a control datagram or mail ended
	// early was to end: the next wait resumes it (see wait).
	holdUntil splice.Time
	passes    atomic.Uint64
	holds     atomic.Uint64

	// Gathering (gather.go). loop is the worker whose loop serves this
	// shard now (itself, or worker 0's while gathered); loopCPU is the
	// CPU time, in nanoseconds, this worker's thread has used since its
	// loop began (cpuBase), as last read (nextCPURead: see readCPU);
	// resume brings a parked shard back to its own loop. txWire is the
	// socket the shard's wire frames leave by, worker 0's while
	// adopted, when wireInHolds too is worker 0's (ownInHolds keeps
	// the shard's own).
	loop        atomic.Pointer[worker]
	tid         atomic.Int32 // the loop's thread, for /status
	loopCPU     atomic.Int64
	cpuBase     int64
	nextCPURead splice.Time
	resume      chan struct{}
	txWire      *link.AFPacket
	ownInHolds  bool
	// Worker 0 while gathered: the shards it serves besides its own,
	// and the moderators of all of them, which decide its holds
	// together (rxmod.Joint).
	adopted []*worker
	mods    []*rxmod.Moderator

	// Worker 0 only: the agent, and the Codec and buffer of the control
	// socket (Daemon.ctl).
	agent   *Agent
	aout    AgentOutput
	codec   *proto.Codec
	sendBuf []byte
	// ctlOut are the control datagrams sent straight on the wire
	// (wirecontrol.go).
	ctlOut wireControlOut
}

// handoff is a frame passed from the goroutine that read it to the
// worker that owns its flow, in a buffer that goes back to home after.
type handoff struct {
	buf  []byte
	n    int
	vnet wire.VNetHdr
	home chan *handoff
}

type mailKind uint8

const (
	mailFrame     mailKind = iota + 1 // frame: a TAP frame of this shard's flow
	mailInstall                       // splice: install it in this shard
	mailInstalled                     // splice, err: a shard's answer (to worker 0)
	mailEvent                         // ev: another shard's event (to worker 0)
	mailStatus                        // status: report the shard
	mailResetIdle                     // reset the shard's idle C2s: a new front-end started
)

type mail struct {
	kind   mailKind
	frame  *handoff
	splice proto.Splice // a copy: the agent's output is reused
	// req holds the request a mailInstall's Splice carries: its Request
	// points into the datagram it was decoded from, read again by then.
	req    [proto.MaxSpliceRequest]byte
	err    error
	ev     splice.Event
	status chan<- shardStatus
}

func (d *Daemon) newWorker(id, wireBuf int) (*worker, error) {
	scfg := splice.ShimConfig{HostIP: d.cfg.Addr, Linger: d.cfg.Linger,
		IdleTimeout: d.cfg.IdleTimeout, ResponseQuiet: d.cfg.ResponseQuiet, WebPorts: d.cfg.WebPorts,
		// A held Splice must still find its handshake when it is installed.
		HandshakeWindow: splice.DefaultHandshakeWindow + d.cfg.SpliceDelay,
		FastOpen:        d.cfg.FastOpen, HandoffAddrs: d.cfg.HandoffAddrs,
		KernelFastPath: d.fast != nil, KernelEcho: d.fast != nil && d.cfg.ReplyFastPath == FastPathEcho,
		KernelSYNs: d.synFast != nil,
		// Every shard addresses the frames it makes for the kernel
		// (splice.Shim.ResetIdle) to it.
		HostMAC: d.mac}
	if id == 0 {
		// The agent's shard takes the control datagrams off the wire
		// (wireControl); the fanout sends every UDP frame to member 0.
		scfg.ControlPort = d.cfg.ControlPort
	}
	shim, err := splice.NewShim(scfg)
	if err != nil {
		return nil, err
	}
	p, err := link.NewPoller()
	if err != nil {
		return nil, err
	}
	w := &worker{d: d, id: id, shim: shim, poller: p, wire: d.wires[id],
		wb: link.NewBatch(batchFrames, wireBuf), free: make(chan *handoff, handoffBufs)}
	w.loop.Store(w)
	w.txWire = w.wire
	w.out.Frames = make([]splice.OutFrame, 0, passFrames)
	w.out.Control = make([]splice.ControlDatagram, 0, batchFrames)
	w.wireFrames, w.tapFrames = make([][]byte, 0, passFrames), make([][]byte, 0, passFrames)
	w.wireHdrs, w.tapHdrs = make([]wire.VNetHdr, 0, passFrames), make([]wire.VNetHdr, 0, passFrames)
	// A receive-moderation hold lets the wire's frames wait too, at most
	// the hold, as the TAP's do: with a receive ring the loop reads the
	// wire after every hold, which costs no system call (AddHeld); with
	// recvmmsg the hold in io_uring reports the wire when it ends rather
	// than ending for it (link.Poller.AddLate).
	addWire := p.AddLate
	if _, ring := w.wire.RxRing(); ring {
		addWire, w.wireHeld = p.AddHeld, true
	}
	if err := addWire(w.wire.FD(), tokWire); err != nil {
		p.Close()
		return nil, err
	}
	if d.taps != nil {
		w.tap = d.tapLinks[id]
		w.tb = link.NewBatch(batchFrames, link.MaxFrame)
		if u, ok := w.tap.(*link.UringTAP); ok {
			// It lends its own buffers (link.UringTAP.ReadBatch).
			w.tapRing, w.tb = u, link.NewBatch(batchFrames, 64)
		}
		// The one descriptor a receive-moderation hold does not watch.
		w.mod = rxmod.New(shimModeration(d.cfg.RxHold))
		if err := p.AddHeld(w.tap.FD(), tokTAP); err != nil {
			p.Close()
			return nil, err
		}
		if len(d.taps) > 1 {
			for range handoffBufs {
				w.free <- &handoff{home: w.free} // buf: on first use (handOver)
			}
		}
	}
	if id == 0 {
		w.agent = d.agent
	}
	return w, nil
}

// post hands m to the loop serving w. The lock is held for an append;
// the Wake (a write to an eventfd) only when that loop sleeps or is about
// to: run sets asleep before it looks at the boxes of the shards it
// serves for the last time, so either it sees m or this sees asleep. A
// shard changes loops only between the parking loop's store of loop and
// the gathering loop's next wait, which it precedes by a wake-up.
func (w *worker) post(m mail) {
	w.mu.Lock()
	w.box = append(w.box, m)
	w.mu.Unlock()
	if l := w.loop.Load(); l.asleep.Load() {
		l.poller.Wake()
	}
}

func (w *worker) mailWaiting() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.box) > 0
}

// run is the loop; it returns nil when the daemon stops.
func (w *worker) run() error {
	// One thread per worker: epoll_wait blocks the thread, and the
	// shard's data stays in that core's cache.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	w.tid.Store(int32(unix.Gettid()))
	d := w.d
	if d.gather != nil {
		w.readCPU(d.now()) // the thread's CPU time so far is not the loop's
	}
	if w.tapRing != nil {
		// The first reads, submitted from this thread: a read that
		// waits for a frame runs later in its submitter's thread.
		if err := w.tapRing.Submit(); err != nil {
			return fmt.Errorf("backend: worker %d: %w", w.id, err)
		}
		if w.mod.Config().MaxHold > 0 {
			// Holds wait in io_uring_enter, where the TAP's reads do
			// not interrupt them (link/poller_uring.go).
			if err := w.poller.HoldInRing(); err != nil && w.id == 0 {
				d.log.Warn("receive moderation holds in epoll_pwait2: each TAP frame will interrupt them", "err", err)
			} else if err == nil {
				w.sendWireInHolds()
			}
		}
	}
	for !d.stopping.Load() {
		if w.id != 0 && d.gather != nil && d.gather.Want() {
			if err := w.park(); err != nil {
				return err
			}
			continue
		}
		timeout := w.timeout()
		w.asleep.Store(true)
		if w.mailWaiting() {
			timeout = 0
		}
		n, held, err := w.wait(timeout)
		w.asleep.Store(false)
		if err != nil {
			return fmt.Errorf("backend: worker %d: %w", w.id, err)
		}
		now := d.now()
		if now >= w.nextYield {
			// See yieldEvery.
			runtime.Gosched()
			w.nextYield = now.Add(yieldEvery)
		}
		// A hold does not report the TAP (nor the wire read through a
		// ring): read it anyway, it is what the hold waited for.
		control := false
		wireReady, tapReady := held && w.wireHeld, held
		gatheredWire, gatheredTAP := false, held
		for _, tok := range w.ready[:n] {
			switch tok {
			case tokControl:
				control = true
			case tokWire:
				wireReady = true
			case tokTAP:
				tapReady = true
			case tokGatherWire:
				gatheredWire = true
			case tokGatherTAP:
				gatheredTAP = true
			}
		}
		err = w.pass(now, control, wireReady, tapReady, held)
		for _, o := range w.adopted {
			if err != nil {
				break
			}
			err = o.pass(now, false, gatheredWire || held && o.wireHeld, gatheredTAP, held)
		}
		if err != nil {
			if d.stopping.Load() {
				return nil
			}
			return fmt.Errorf("backend: worker %d: %w", w.id, err)
		}
		if g := d.gather; g != nil {
			if w.id == 0 {
				if err := w.gatherStep(now); err != nil {
					return err
				}
			} else if now >= w.nextCPURead {
				w.readCPU(now)
			}
		}
	}
	return nil
}

// pass serves the shard once, on the loop that serves it now: the
// control socket (worker 0) and mail first, then the wire, whose control
// datagrams go to the agent as they are read (wireControl), then the
// TAP: a Splice must be in place before this pass reads the server's
// replies from the TAP (a request may come with its Splice, and the
// reply right after it: splice/shim_early.go). Then the shard's timers,
// its output, the agent's timers. held: the wait before it was a hold
// that ran its time.
func (w *worker) pass(now splice.Time, control, wireReady, tapReady, held bool) error {
	d := w.d
	w.out.Reset()
	w.passes.Add(1)
	if control {
		w.readControl(now)
	}
	w.readMail(now)
	var err error
	if wireReady {
		err = w.readWire(now)
	}
	if err == nil && tapReady {
		steady := w.rx.steady
		err = w.readTAP(now)
		w.holdOff = held && w.rx.steady == steady
	}
	if err != nil {
		return err
	}
	if w.shim.NextDeadline() <= now {
		w.shim.Tick(now, &w.out)
	}
	if w.agent != nil {
		// A SpliceAck queued by this pass goes before its frames:
		// the front-end waits on it to send the request, while a
		// write on the TAP runs the kernel's TCP stack inside the
		// call (the C2 handshake's ACK usually arrives with the
		// Splice). What the frames' events queue goes at the end.
		w.flushControl()
	}
	w.flush(now)
	if w.agent != nil && w.agent.NextDeadline() <= now {
		w.aout.Reset()
		w.agent.SetConcurrency(d.concurrency())
		w.agent.Tick(now, &w.aout)
		w.carryOut(now)
	}
	if w.agent != nil {
		w.flushControl()
		if len(w.wireFrames) > 0 {
			w.writeWire() // what the events and the agent's timers sent on the wire
		}
	}
	w.checkDrops(now)
	w.mod.Observe(now, w.rx.steady, w.rx.urgent)
	if w.rx.narrow > 0 {
		w.mod.Quiet(now)
	}
	w.rx = rxCounts{}
	return nil
}

// wait sleeps until the worker's loop has work: normally until a link or
// the control socket is readable, a Wake or the timeout; under a steady
// stream of bulk super-frames from the TAP for a short hold first
// (moderate.go), which only a control datagram, a Wake (mail, the daemon
// stopping) or the timeout ends early: the wire's frames wait for it too
// (newWorker). held reports a hold that ran its time: the TAP, and the
// wire when it has a receive ring, are then to be read although no token
// says so. A hold ended early is resumed after the pass that serves what
// ended it (holdUntil), so that the batch it gathers is not cut short;
// the frames still wait no longer than one hold, and not at all once an
// urgent frame came (the policy then says no hold).
func (w *worker) wait(timeout time.Duration) (n int, held bool, err error) {
	resume := w.holdUntil
	w.holdUntil = 0
	// No hold when something is due now, when the last pass left frames
	// in the TAP (a backlog would grow one batch per hold), or after a
	// hold that gathered nothing.
	if timeout != 0 && w.mayHold() {
		now := w.d.now()
		until := splice.Time(0)
		if hold := w.hold(now); hold > 0 {
			until = now.Add(hold)
			if resume > now {
				until = resume
			}
		}
		if until > now {
			hold := until.Sub(now)
			if timeout > 0 {
				hold = min(hold, timeout)
			}
			w.holds.Add(1)
			n, err = w.poller.Hold(hold, w.ready[:])
			if err == nil && n > 0 && w.d.now() < until-splice.Time(minHoldRest) {
				w.holdUntil = until
				return n, false, nil
			}
			return n, true, err
		}
	}
	n, err = w.poller.Wait(timeout, w.ready[:])
	return n, false, err
}

// timeout is how long the loop may sleep: until the shard's or the
// agent's next deadline, and after traffic until the next drop check. No
// fixed ticker: an idle worker sleeps until something is due.
func (w *worker) timeout() time.Duration {
	next := w.deadline()
	for _, o := range w.adopted {
		next = min(next, o.deadline())
	}
	if next == splice.Never {
		return -1
	}
	return max(next.Sub(w.d.now()), 0)
}

// deadline is the shard's next: its engine's, the agent's, the next drop
// check after traffic.
func (w *worker) deadline() splice.Time {
	next := w.shim.NextDeadline()
	if w.agent != nil {
		next = min(next, w.agent.NextDeadline())
	}
	if w.busy {
		next = min(next, w.nextDropChk)
	}
	return next
}

func (w *worker) readWire(now splice.Time) error {
	n, err := w.wire.ReadBatch(w.wb)
	if n > 0 {
		w.busy = true
	}
	for i := range n {
		f := w.wb.Frame(i)
		w.rx.fromWire(f, &w.pkt)
		if c := w.d.capture; c != nil {
			c.record(f, link.Inbound)
		}
		w.inputWire(f, w.wb.VNet[i], now)
	}
	return err
}

// readTAP feeds the shard the frames of its TAP queue. With the steering
// program attached (Daemon.tapSteering "ports", link.OffloadTAP.SteerByPorts)
// the kernel sends every frame to the queue of the worker that owns its
// connection, the member of the wire's fanout group, and none lands
// elsewhere. Without it the tun driver's flow table picks the queue: the
// one a flow's frames were last written on, which is the owner's, but
// only for a flow it has learnt (after the write that carried its first
// frame returned, so not the SYN-ACK to that frame), still remembers (3 s
// after the last frame written) and had room for (4096 flows): under
// short connections most flows follow the kernel's own hash, and with
// two workers half the frames land on the wrong one. Installing each
// Splice in every shard would keep such replies translated, but a reply
// and its request would then be seen by different shards, and the
// service time and the Active count (the front-end's slot accounting)
// would be wrong; so a frame of a flow another worker owns is handed over
// to it instead (handOver), a copy and a wake-up each.
func (w *worker) readTAP(now splice.Time) error {
	n, err := w.tap.ReadBatch(w.tb)
	if n > 0 {
		w.busy = true
	}
	w.tapFull = n >= batchFrames
	nw := len(w.d.workers)
	for i := range n {
		f := w.tb.Frame(i)
		w.rx.fromHost(f, &w.pkt)
		if nw > 1 {
			if k := link.FanoutShard(f, nw); k != w.id {
				w.handOver(k, f, w.tb.VNet[i])
				continue
			}
		}
		w.shim.InputVNet(splice.PortHost, f, w.tb.VNet[i], now, &w.out)
	}
	return err
}

// handOver passes a host frame to worker k, which owns its flow. With no
// buffer free (k is far behind) the frame is dropped and TCP resends it.
func (w *worker) handOver(k int, f []byte, vh wire.VNetHdr) {
	var h *handoff
	select {
	case h = <-w.free:
	default:
		w.handoffLost.Add(1)
		return
	}
	if h.buf == nil {
		h.buf = make([]byte, link.MaxFrame) // once per buffer (handoffBufs)
	}
	if len(f) > len(h.buf) {
		w.free <- h
		w.handoffLost.Add(1)
		return
	}
	h.n, h.vnet = copy(h.buf, f), vh
	w.handoffs.Add(1)
	w.d.workers[k].post(mail{kind: mailFrame, frame: h})
}

// readMail handles what other goroutines posted.
func (w *worker) readMail(now splice.Time) {
	w.mu.Lock()
	w.box, w.spare = w.spare[:0], w.box
	w.mu.Unlock()
	for i := range w.spare {
		m := &w.spare[i]
		switch m.kind {
		case mailFrame:
			h := m.frame
			w.held = append(w.held, h)
			w.rx.fromHost(h.buf[:h.n], &w.pkt)
			w.shim.InputVNet(splice.PortHost, h.buf[:h.n], h.vnet, now, &w.out)
		case mailInstall:
			if n := len(m.splice.Request); n > 0 {
				m.splice.Request = m.req[:n]
			}
			err := w.shim.AddSplice(&m.splice, now)
			m.splice.Request = nil
			w.d.workers[0].post(mail{kind: mailInstalled, splice: m.splice, err: err})
		case mailInstalled:
			w.aout.Reset()
			w.agent.Installed(&m.splice, m.err, &w.aout)
			w.carryOut(now)
		case mailEvent:
			w.aout.Reset()
			w.agent.SetConcurrency(w.d.concurrency())
			w.agent.Event(m.ev, now, &w.aout)
			w.carryOut(now)
		case mailStatus:
			m.status <- w.status()
		case mailResetIdle:
			w.resetIdle(now)
		}
		*m = mail{}
	}
}

// flush writes the pass's output, one batch per link, then hands the
// engine's events to the agent. Output frames may alias the read batches
// and the handed-over frames, which are reused only after this.
func (w *worker) flush(now splice.Time) {
	if w.d.fast != nil {
		w.shim.TakeFastPaths(&w.out)
	}
	// The Feedbacks of the responses that ended go ahead of the pass's
	// frames, which carry those responses' last bytes: the client's
	// kernel acknowledges them inside the very write that delivers them
	// (a bridge, a veth), and a Feedback behind them reached the
	// front-end after that ACK, which it then forwarded by itself, C2
	// not being poolable yet. Ahead, the front-end has the Feedback
	// first, pools C2 on the ACK and leaves it to the next request to
	// carry (splice/fe_pool.go, oweAck). The other events stay behind:
	// a SpliceAck travels with its SYN-ACK (splice/shim_atsyn.go).
	if w.agent != nil {
		w.passEvents(now, true)
		w.flushControl()
	}
	for _, f := range w.out.Frames {
		if f.Port == splice.PortHost {
			w.tapFrames = append(w.tapFrames, f.Data)
			w.tapHdrs = append(w.tapHdrs, f.VNet)
		} else {
			w.wireFrames = append(w.wireFrames, f.Data)
			w.wireHdrs = append(w.wireHdrs, f.VNet)
		}
	}
	// A pass that hands replies to the kernel sends its own first: the
	// kernel's must not overtake them (fastpath.go). A connection's
	// first Put has none in the pass, and goes before.
	after := 0
	if len(w.out.FastPaths) > 0 {
		after = w.applyFastPaths(true)
	}
	w.wireToHold = w.wireInHolds && after == 0 && w.loop.Load().holdLikely(now)
	w.writeWire()
	if after > 0 {
		w.applyFastPaths(false)
	}
	if len(w.tapFrames) > 0 {
		if w.tap != nil {
			w.writeAll(w.tap, w.tapFrames, w.tapHdrs)
		} else {
			// The water TAP takes one frame per write(2); frames on the
			// plain path carry no vnet header (both links deliver whole,
			// checksummed frames), so there is nothing to finish.
			for _, f := range w.tapFrames {
				if err := w.d.plainTAP.WriteFrame(f); err != nil {
					w.writeFailed(w.d.plainTAP, err)
				}
			}
		}
	}
	if w.tapRing != nil {
		// The TAP's read, if it ended for want of buffers and no TAP
		// write took it along: without it the device could be left
		// unread while the loop sleeps. No system call otherwise.
		if err := w.tapRing.Submit(); err != nil && !w.d.stopping.Load() {
			w.writeFailed(w.tapRing, err)
		}
	}
	clear(w.tapFrames) // drop the references to buffers about to be reused
	w.tapFrames, w.tapHdrs = w.tapFrames[:0], w.tapHdrs[:0]
	for i, h := range w.held {
		h.home <- h
		w.held[i] = nil
	}
	w.held = w.held[:0]
	w.publishActive()
	w.passEvents(now, false)
}

// sendWireInHolds makes the holds send the wire frames of the pass
// before them in their io_uring_enter (link.Poller.SendWith): under bulk
// load nearly every pass ends in a hold, which then costs one system
// call where the wire's sendmmsg and the hold made two. A wait in epoll
// sends them with sendmmsg first. Not with a transmit ring, which has a
// send of its own.
func (w *worker) sendWireInHolds() {
	if _, ring := w.wire.TxRing(); ring {
		return
	}
	if err := w.poller.SendWith(w.wire); err != nil {
		if w.id == 0 {
			w.d.log.Info("the wire's frames go with sendmmsg before each hold", "reason", err)
		}
		return
	}
	w.wireInHolds = true
}

// holdLikely says whether the loop will likely hold after this pass (the
// conditions of wait, with what the passes before this one showed).
func (w *worker) holdLikely(now splice.Time) bool {
	return w.mayHold() && w.hold(now) > 0
}

// mayHold says whether the loop may hold before its next pass (see
// wait): not on the plain path, nor when a shard it serves left frames in
// its TAP, nor after a hold that gathered nothing on any of them.
func (w *worker) mayHold() bool {
	if w.tap == nil {
		return false
	}
	full, off := w.tapFull, w.holdOff
	for _, o := range w.adopted {
		full, off = full || o.tapFull, off && o.holdOff
	}
	return !full && !off
}

// hold is the moderation's hold for the loop: its shard's, or while
// gathered that of all the shards it serves together.
func (w *worker) hold(now splice.Time) time.Duration {
	if len(w.mods) > 0 {
		return rxmod.Joint(now, w.mods)
	}
	return w.mod.Hold(now)
}

// writeWire writes the pass's wire frames in one batch, the control
// datagrams queued for the wire first, and frees their buffers. When the
// loop will likely hold next (wireToHold, a bulk stream) they are queued
// for the hold instead (sendWireInHolds); otherwise they go now, ahead of
// the TAP's writes, which run the back-end kernel's TCP stack inside the
// call (queued behind them, short connections lost 5-10% of their
// rate). Never queued either: a batch that holds a control datagram (a SpliceAck the front-end
// waits on goes before the pass's TAP writes, and the control frames'
// buffers are reused by the pass's next write) or a frame another worker
// handed over (it goes back to that worker at the end of this pass).
func (w *worker) writeWire() {
	if w.wireInHolds {
		if err, failed := w.txWire.TakeSendError(); failed > 0 {
			for range failed {
				w.writeFailed(w.txWire, err)
			}
		}
	}
	if len(w.wireFrames) > 0 {
		if w.wireToHold && len(w.held) == 0 && w.ctlOut.used == 0 {
			// The wire's frames may alias the TAP ring's slots, which go
			// back to the kernel at the next read, after the wait.
			if n, err := w.txWire.QueueBatch(w.wireFrames, w.wireHdrs); err != nil {
				// Written at once and refused: skip that frame, as writeAll.
				w.writeFailed(w.txWire, err)
				skip := min(n+1, len(w.wireFrames))
				w.writeAll(w.txWire, w.wireFrames[skip:], w.wireHdrs[skip:])
			}
		} else {
			if w.wireInHolds {
				// What an earlier write of this pass queued goes first.
				if err := w.txWire.FlushQueued(); err != nil {
					w.writeFailed(w.txWire, err)
				}
			}
			w.writeAll(w.txWire, w.wireFrames, w.wireHdrs)
		}
		if c := w.d.capture; c != nil {
			for _, f := range w.wireFrames {
				c.record(f, link.Outbound)
			}
		}
	}
	w.wireWritten()
}

// wireWritten forgets the wire frames once written: they alias the read
// batches and the control frames' buffers, which are reused after this.
func (w *worker) wireWritten() {
	clear(w.wireFrames)
	w.wireFrames, w.wireHdrs = w.wireFrames[:0], w.wireHdrs[:0]
	w.ctlOut.used = 0
}

// passEvents hands the pass's engine events to the agent: worker 0's
// directly, those of responses that ended (feedbacks) or the others; the
// other workers' all at once (feedbacks false), through worker 0's
// mailbox.
func (w *worker) passEvents(now splice.Time, feedbacks bool) {
	for _, ev := range w.out.Events {
		if w.agent == nil {
			if !feedbacks {
				w.d.workers[0].post(mail{kind: mailEvent, ev: ev})
			}
			continue
		}
		if (ev.Kind == splice.EvResponseDone) != feedbacks {
			continue
		}
		w.aout.Reset()
		w.agent.SetConcurrency(w.d.concurrency())
		w.agent.Event(ev, now, &w.aout)
		w.carryOut(now)
	}
}

// writeAll writes frames on l; a frame the link refuses is counted and
// skipped, and the rest still go. If the link's device is not
// transmitting (link.ErrNoRoom, after the link's bounded wait) the rest
// are dropped and counted too: waiting on for each would keep the loop
// from its other links and its keepalives, and TCP resends them.
func (w *worker) writeAll(l link.BatchLink, frames [][]byte, hdrs []wire.VNetHdr) {
	for len(frames) > 0 {
		n, err := l.WriteBatch(frames, hdrs)
		if err == nil {
			return
		}
		if errors.Is(err, link.ErrNoRoom) {
			w.writesFailed(l, err, len(frames)-max(n, 0))
			return
		}
		w.writeFailed(l, err)
		skip := min(n+1, len(frames))
		frames, hdrs = frames[skip:], hdrs[skip:]
	}
}

func (w *worker) writeFailed(l link.Link, err error) { w.writesFailed(l, err, 1) }

// writesFailed counts frames a link refused or dropped, and logs the
// first few failures and then one in a thousand frames.
func (w *worker) writesFailed(l link.Link, err error, frames int) {
	after := w.txErrors.Add(uint64(frames))
	before := after - uint64(frames)
	if before < 10 || before/1000 != after/1000 {
		w.d.log.Warn("write failed", "worker", w.id, "link", l.Name(), "err", err, "frames", frames, "count", after)
	}
}

// publishActive makes the shard's count of requests in service visible
// to worker 0 (Keepalive and Feedback carry the sum) and keeps the peak.
// It touches shared atomics only when a request started or ended.
func (w *worker) publishActive() {
	a := w.shim.Active()
	if a == w.lastActive {
		return
	}
	w.lastActive = a
	w.active.Store(int64(a))
	total := int64(w.d.concurrency())
	for {
		p := w.d.peak.Load()
		if total <= p || w.d.peak.CompareAndSwap(p, total) {
			return
		}
	}
}

// checkDrops reads the wire socket's kernel drop counter, at most once a
// second, and only after traffic: drops happen under load.
func (w *worker) checkDrops(now splice.Time) {
	if !w.busy || now < w.nextDropChk {
		return
	}
	w.busy = false
	w.nextDropChk = now.Add(time.Second)
	if n, err := w.wire.KernelDrops(); err == nil && n > 0 {
		total := w.drops.Add(n)
		w.d.log.Warn("wire socket dropped frames (loop fell behind)", "worker", w.id, "new", n, "total", total)
	}
}

// carryOut does what the agent asked for in w.aout: resets the idle C2s
// of every shard, installs splices in their shards (each acknowledged
// once it is in place, here or when its worker reports back), sends
// control messages, writes log lines.
func (w *worker) carryOut(now splice.Time) {
	if w.aout.ResetIdle {
		for _, o := range w.d.workers {
			if o == w {
				w.resetIdle(now)
			} else {
				o.post(mail{kind: mailResetIdle})
			}
		}
	}
	for i := 0; i < len(w.aout.Install); i++ { // Installed appends to Send and Logs only
		m := &w.aout.Install[i]
		if k := shardOf(m, len(w.d.workers)); k != w.id {
			ml := mail{kind: mailInstall, splice: *m}
			copy(ml.req[:], m.Request)
			w.d.workers[k].post(ml)
			continue
		}
		w.agent.Installed(m, w.shim.AddSplice(m, now), &w.aout)
	}
	for _, m := range w.aout.Send {
		w.send(m, now)
	}
	for _, r := range w.aout.Logs {
		w.d.log.LogAttrs(context.Background(), r.Level, r.Msg, r.Attrs...)
	}
}

// resetIdle resets the idle C2s of w's shard (splice.Shim.ResetIdle);
// the RSTs leave with the pass's frames.
func (w *worker) resetIdle(now splice.Time) {
	if n := w.shim.ResetIdle(now, &w.out); n > 0 {
		w.d.log.Info("idle handoff connections reset for the new front-end", "shard", w.id, "connections", n)
	}
}

// Worker 0 reads the control socket in its own loop: the socket's
// descriptor sits in the worker's Poller next to the links, and one
// recvmmsg(2) reads what is waiting when the Poller says readable
// (link.ControlSocket). The alternative, a reader goroutine handing
// datagrams over a channel and waking the loop, costs a goroutine switch
// and an eventfd write per message and puts a second owner between the
// socket and the agent; here a Splice is installed and acknowledged in
// the same pass that read it, and there is no goroutine to stop. What the
// agent sends during a pass is queued and goes out with one sendmmsg(2)
// before the pass's frames (a SpliceAck), and one at its end (what the
// frames' events and the agent's timers queued).

// attachControl gives worker 0 the control socket.
func (w *worker) attachControl(conn *net.UDPConn) error {
	s, err := link.NewControlSocket(conn, link.ControlConfig{MaxDatagram: proto.MaxDatagram, Batch: maxControlPerPass})
	if err != nil {
		return err
	}
	if err := w.poller.Add(s.FD(), tokControl); err != nil {
		s.Close()
		return err
	}
	codec, err := proto.NewBackEndCodec(w.d.cfg.ID, w.d.cfg.Key, w.d.incarnation)
	if err != nil {
		return err
	}
	w.d.ctl, w.codec = s, codec
	if c := w.d.capture; c != nil {
		c.recordControl(s) // a .pcapng capture takes the datagrams too
	}
	w.sendBuf = make([]byte, 0, proto.MaxDatagram)
	w.ctlOut = newWireControlOut()
	return nil
}

func (w *worker) readControl(now splice.Time) {
	n, err := w.d.ctl.Recv()
	if err != nil {
		if !w.d.stopping.Load() {
			w.d.log.Debug("control receive", "err", err)
		}
		return
	}
	w.rx.urgent += n
	for i := range n {
		b, from, err := w.d.ctl.Datagram(i)
		w.control(b, from, nil, err, now)
	}
}

// send encodes m and queues it for the front-end (worker 0 only): on the
// wire when it can go there (queueWireControl), else on the control
// socket. The pass's flushControl sends it.
func (w *worker) send(m proto.Message, now splice.Time) {
	b, err := w.codec.Append(w.sendBuf[:0], m)
	if err == nil {
		if m.Type() != proto.TypeRegister && w.queueWireControl(b, now) {
			return
		}
		w.ctlOut.socket++
		err = w.d.ctl.Queue(b, w.d.cfg.Frontend)
	}
	if err != nil {
		w.d.log.Error("encode control message", "type", m.Type().String(), "err", err)
	}
}

// flushControl sends the control datagrams the pass queued on the
// socket, and puts those for the wire at the end of the pass's wire
// frames: ahead of the engine's frames when flush follows, or written at
// the end of the pass (run).
func (w *worker) flushControl() {
	if failed, err := w.d.ctl.Flush(); failed > 0 || err != nil {
		w.d.log.Debug("control send failed", "datagrams", failed, "err", err)
	}
	for _, f := range w.ctlOut.frames {
		w.wireFrames = append(w.wireFrames, f)
		w.wireHdrs = append(w.wireHdrs, wire.VNetHdr{}) // complete checksums, one datagram
	}
	clear(w.ctlOut.frames)
	w.ctlOut.frames = w.ctlOut.frames[:0]
}

// readPlainTAP reads the water TAP on the plain path, which has no
// descriptor a Poller could watch and no queues, and hands each frame to
// the worker whose fanout shard owns its flow.
func (d *Daemon) readPlainTAP() error {
	ifi, err := net.InterfaceByName(d.cfg.TAP)
	size := 2048
	if err == nil {
		size = max(size, ifi.MTU+18)
	}
	free := make(chan *handoff, plainTAPBufs)
	for range plainTAPBufs {
		free <- &handoff{buf: make([]byte, size), home: free}
	}
	n := len(d.workers)
	for {
		var h *handoff
		select {
		case h = <-free:
		case <-d.done:
			return nil
		}
		m, err := d.plainTAP.ReadFrame(h.buf)
		if err != nil {
			return fmt.Errorf("backend: %s: %w", d.plainTAP.Name(), err)
		}
		h.n, h.vnet = m, wire.VNetHdr{}
		d.workers[link.FanoutShard(h.buf[:m], n)].post(mail{kind: mailFrame, frame: h})
	}
}
