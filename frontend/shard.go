package frontend

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/pump"
	"github.com/qsplice/qsplice/splice/wire"
)

// A front-end with -workers N runs N shards (issue 7): each is a
// goroutine with its own AF_PACKET socket, a member of one fanout group
// (link.FanoutPorts), its own engine (splice.FrontEnd, configured as
// shard i of N: splice/shard.go says how the back-end's replies come
// back to the shard that handed the connection off) and its own
// poller. The packet path of a shard touches nothing another shard
// touches.
//
// The controller is global: one scheduler, one back-end table. Whichever
// shard has something for it (engine events, control datagrams, a due
// timer) runs it under ctrlMu, and the controller reaches the engines
// through shardedEngine, which locks the engine that owns the flow. The
// lock order is always ctrlMu, then one engine's mu; a shard's pass takes
// its own mu alone while it feeds frames in, once per batch, and gives
// it up before it takes ctrlMu. So an engine lock is only ever contended
// by the controller acting on one of that shard's flows: per request,
// not per frame.
//
// Time: each engine and the controller keep the latest time they were
// given (shard.last, Daemon.ctrlLast) and take the later of it and the
// clock when they are entered, under their lock, so neither ever sees
// time go backwards, whichever goroutine calls.

// shard is one worker's engine and I/O.
type shard struct {
	d    *Daemon
	idx  int
	link link.Link
	// rawLink is the device under any capture wrapper.
	rawLink link.Link
	poller  *link.Poller

	mu     sync.Mutex // guards engine, last and sleepUntil
	engine *splice.FrontEnd
	last   splice.Time
	// sleepUntil is when the shard's loop, asleep in its poller, wakes on
	// its own; 0 while it is awake (it computes its sleep again before
	// the next wait). The controller, changing this engine from another
	// shard, wakes the loop only if the engine's deadline moved before
	// it (shardedEngine.on): a wake-up is an eventfd write, an epoll
	// return and an empty pass, once per handoff step otherwise.
	sleepUntil splice.Time

	// The pass's buffers; only the shard's goroutine touches them.
	out     controller.Output
	rxBatch [][]byte       // frames of one pass, for the engine
	rxVNet  []wire.VNetHdr // their virtio-net headers (checksum verdicts)
	inBatch []*pump.Frame  // their buffers, released after the pass's writes
	txBatch [][]byte       // frames of out being written together
	// splicesAfter: out holds Splices sent with their SYN, which go after
	// the pass's frames through the control socket (Daemon.sendDatagrams).
	splicesAfter bool
	// lctl holds the pass's Splices sent as frames on the link
	// (linkcontrol.go): ahead of the engine's frames, and behind them.
	lctl linkControl
	rb   *link.Batch // a BatchLink's frames of one pass
	// arp (shard 0, when the links hide the answered SYNs) is the socket
	// ARP comes in on, arpBatch its frames of one pass (synhide.go).
	arp      *link.AFPacket
	arpBatch *link.Batch
	// sendInWait: the pass's frames are queued on ringLink and go out in
	// the next wait's io_uring_enter (loop.go, Config.RingWait).
	sendInWait bool
	ringLink   *link.AFPacket
	// scratch holds the segments of the pass's super-frames (GRO'd
	// client data) cut to MTU size for the engine.
	scratch []byte
	// mod decides the receive-moderation holds (moderate.go); pkt is
	// its classifier's scratch.
	mod       rxModerator
	pkt       wire.Packet
	batchFull bool // the last read filled rb: frames may be waiting
	// The pass's received frames for mod: pure ACKs, other frames, and
	// the pure ACKs the engine found advertising a narrow window
	// (splice.NarrowWindow), which a hold would slow down.
	rxAcks, rxOther, rxNarrow int
	// passes and holds count the loop's turns and, among them, those
	// that began with a moderation hold (status reads them from shard
	// 0's goroutine).
	passes, holds atomic.Uint64

	// Counters the shard's goroutine writes; status() reads them from
	// shard 0's goroutine, hence under mu.
	vnetRefused, txErrors, drops uint64
	// frames is the pump of a link that is not a BatchLink (shard 0 of a
	// one-shard daemon only).
	frames *pump.Pump
	// bl is link as a BatchLink, nil if it is not one.
	bl link.BatchLink

	// Gathering (gather.go). adopted: the shards shard 0's loop serves
	// besides its own; wakeP: the poller of the loop serving this shard
	// now; resume: shard 0's loop hands the shard back;
	// ownSend, ownRing: the shard's own sendInWait and ringLink while
	// shard 0's stand in for them; busy: the nanoseconds the shard's own
	// loop spent between the end of a wait and the end of its pass.
	adopted []*shard
	mods    []*rxModerator // own and adopted's moderators, while adopted is not empty
	wakeP   atomic.Pointer[link.Poller]
	resume  chan struct{}
	ownSend bool
	ownRing *link.AFPacket
	busy    atomic.Int64
}

// stamp is the engine's time for an entry at clock time now: never
// earlier than a time it was given before. Called with mu held.
func (s *shard) stamp(now splice.Time) splice.Time {
	s.last = max(s.last, now)
	return s.last
}

// sleep is when the shard's loop must wake on its own, at the latest:
// the engine's deadline or the controller's, whichever is first. Any
// shard runs the controller's due timers (shard.pass), so the shard
// that moved the controller's deadline earlier is always one that is
// about to compute its sleep again, and no other needs waking for it.
// The answer is published as sleepUntil, under the same lock as the
// engine changes it is compared with.
func (s *shard) sleep() splice.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sleepUntil = min(s.engine.NextDeadline(), splice.Time(s.d.ctrlDeadline.Load()))
	if s.idx == 0 && s.d.syna != nil {
		s.sleepUntil = min(s.sleepUntil, s.d.syna.due) // its keys (synanswer.go)
	}
	return s.sleepUntil
}

// pass is one turn of a shard's loop: the frames read go to the engine
// and its due timers run; if that produced events, or control datagrams
// wait (control, shard 0), or the controller's timers are due (shard 0),
// the controller runs; then everything produced goes out, the control
// datagrams first (Daemon.runController), then one batched write of
// frames on the shard's link.
func (s *shard) pass(control bool) {
	d := s.d
	s.out.Reset()
	s.mu.Lock()
	s.sleepUntil = 0 // awake: changes to the engine need no wake-up now
	now := s.stamp(d.clock())
	narrow := s.engine.NarrowAcks()
	for i, f := range s.rxBatch {
		s.engine.InputVNet(f, s.rxVNet[i], now, &s.out.Engine)
	}
	s.rxNarrow = int(s.engine.NarrowAcks() - narrow)
	if s.engine.NextDeadline() <= now {
		s.engine.Tick(now, &s.out.Engine)
	}
	s.mu.Unlock()
	if s.idx == 0 && d.syna != nil {
		d.syna.maintain(now)
	}
	fromLink := len(s.out.Engine.Control) > 0
	if len(s.out.Engine.Events) > 0 || control || fromLink || d.ctrlDue(now) {
		d.runController(s, func(cnow splice.Time) {
			d.ctrl.HandleEvents(cnow, &s.out)
			if fromLink {
				d.linkControl(cnow, &s.out)
			}
			if control {
				d.readControl(cnow, &s.out)
			}
		})
	}
	s.flushFrames()
}

// flushFrames writes the frames of the pass's output, then the Splices
// that go after them, and logs its records.
func (s *shard) flushFrames() {
	s.txBatch = append(s.txBatch[:0], s.lctl.ahead...)
	for _, f := range s.out.Engine.Frames {
		if f.Data != nil { // nil: taken back (splice.Output)
			s.txBatch = append(s.txBatch, f.Data)
		}
	}
	s.txBatch = append(s.txBatch, s.lctl.after...)
	s.lctl.reset()
	if len(s.txBatch) > 0 {
		var n int
		var err error
		if s.sendInWait {
			n, err = s.ringLink.QueueBatch(s.txBatch, nil)
		} else {
			n, err = link.WriteFrames(s.link, s.txBatch)
		}
		if err != nil {
			s.writeFailed(len(s.txBatch)-n, err)
		}
		clear(s.txBatch)
	}
	if s.splicesAfter {
		// The Splices sent with their SYN go after it (sendDatagrams),
		// so the frames cannot wait for the next wait.
		if s.sendInWait {
			if err := s.ringLink.FlushQueued(); err != nil {
				s.writeFailed(1, err)
			}
		}
		s.d.ctrlMu.Lock()
		s.d.sendDatagrams(s, true)
		s.d.ctrlMu.Unlock()
		s.splicesAfter = false
	}
	for _, r := range s.out.Logs {
		s.d.log.Log(context.Background(), r.Level, r.Msg, r.Args...)
	}
}

// writeFailed counts and logs frames the link refused.
func (s *shard) writeFailed(frames int, err error) {
	s.txErrors += uint64(frames)
	if s.txErrors < 10 || s.txErrors%1000 == 0 {
		s.d.log.Warn("link write failed", "shard", s.idx, "err", err, "count", s.txErrors)
	}
}

// readBatch reads the frames waiting on a BatchLink into the pass. A GRO'd
// super-frame is cut into MTU-sized segments first (wire.SegmentTCP4),
// because the engine validates and rewrites ordinary segments only. The
// client's side carries requests and ACKs, so this is rare and cheap.
// Each frame's virtio-net header goes with it (rxVNet): the engine
// completes a partial checksum itself, and the kernel's DATA_VALID, or
// DATA_VALID for the segments cut here (right by construction), spares it
// verifying the TCP checksum again (splice/ingress.go).
func (s *shard) readBatch(bl link.BatchLink) error {
	n, err := bl.ReadBatch(s.rb)
	if err != nil {
		return fmt.Errorf("frontend: link %s: %w", bl.Name(), err)
	}
	s.batchFull = n == len(s.rb.Bufs)
	used, acks := 0, 0
	for i := 0; i < n; i++ {
		f, h := s.rb.Frame(i), s.rb.VNet[i]
		if !h.IsGSO() && isPureACK(f, &s.pkt) {
			acks++
		}
		if !h.IsGSO() {
			s.rxBatch, s.rxVNet = append(s.rxBatch, f), append(s.rxVNet, h)
			continue
		}
		_, size, err := wire.SegmentTCP4Len(f, h)
		if err == nil && used+size > len(s.scratch) {
			err = errScratchFull
		}
		if err == nil {
			s.rxBatch, err = wire.SegmentTCP4(f, h, s.scratch[used:used+size], s.rxBatch)
		}
		if err != nil {
			s.mu.Lock()
			s.vnetRefused++
			s.mu.Unlock()
			if s.vnetRefused < 10 || s.vnetRefused%1000 == 0 {
				s.d.log.Warn("frame with a virtio-net header dropped", "err", err, "len", len(f), "gso_type", h.GSOType, "count", s.vnetRefused)
			}
			continue
		}
		used += size
		for len(s.rxVNet) < len(s.rxBatch) {
			s.rxVNet = append(s.rxVNet, wire.VNetHdr{Flags: wire.VNetFlagDataValid})
		}
	}
	s.rxAcks += acks
	s.rxOther += n - acks
	return nil
}

// takePumped takes what the pump has read into the pass (the fallback for
// links that are not a BatchLink).
func (s *shard) takePumped() error {
	for len(s.inBatch) < maxDrain {
		select {
		case f, ok := <-s.frames.C:
			if !ok {
				return fmt.Errorf("frontend: link %s: %w", s.link.Name(), s.frames.Err())
			}
			s.inBatch = append(s.inBatch, f)
			s.rxBatch, s.rxVNet = append(s.rxBatch, f.Data), append(s.rxVNet, wire.VNetHdr{})
		default:
			return nil
		}
	}
	if len(s.frames.C) > 0 {
		s.poller.Wake() // more than one pass's worth: come back at once
	}
	return nil
}

// releasePass empties the pass's inputs once its writes are done.
func (s *shard) releasePass() {
	clear(s.rxBatch)
	s.rxBatch, s.rxVNet = s.rxBatch[:0], s.rxVNet[:0]
	for i, f := range s.inBatch {
		f.Release()
		s.inBatch[i] = nil
	}
	s.inBatch = s.inBatch[:0]
}

// kernelDrops accumulates the socket's drop counter (the kernel resets it
// on every read). Called with mu held.
func (s *shard) kernelDrops() uint64 {
	if kd, ok := s.rawLink.(interface{ KernelDrops() (uint64, error) }); ok {
		if n, err := kd.KernelDrops(); err == nil {
			s.drops += n
		}
	}
	return s.drops
}

// shardedEngine is the controller's view of the shards' engines
// (controller.Engine): each call goes to the engine that owns the flow,
// under that engine's lock, at the later of the controller's time and
// the engine's own. It is used under ctrlMu only; touched records the
// shards whose engine it moved to a deadline before the one their loop
// sleeps until, so that they compute it again (Daemon.runController
// wakes them).
type shardedEngine struct {
	shards  []*shard
	touched []bool
}

var _ controller.Engine = (*shardedEngine)(nil)

// on runs f on the engine that owns id.
func (e *shardedEngine) on(id splice.FlowID, now splice.Time, f func(eng *splice.FrontEnd, now splice.Time) error) error {
	i := splice.FlowShard(id, len(e.shards))
	s := e.shards[i]
	s.mu.Lock()
	err := f(s.engine, s.stamp(now))
	if s.engine.NextDeadline() < s.sleepUntil {
		e.touched[i] = true
	}
	s.mu.Unlock()
	return err
}

func (e *shardedEngine) Dispatch(id splice.FlowID, b splice.Backend, now splice.Time, out *splice.Output) error {
	return e.on(id, now, func(eng *splice.FrontEnd, now splice.Time) error { return eng.Dispatch(id, b, now, out) })
}

func (e *shardedEngine) DispatchCarrying(id splice.FlowID, b splice.Backend, now splice.Time, out *splice.Output) error {
	return e.on(id, now, func(eng *splice.FrontEnd, now splice.Time) error { return eng.DispatchCarrying(id, b, now, out) })
}

func (e *shardedEngine) Reject(id splice.FlowID, status int, reason string, retryAfter time.Duration, now splice.Time, out *splice.Output) error {
	return e.on(id, now, func(eng *splice.FrontEnd, now splice.Time) error {
		return eng.Reject(id, status, reason, retryAfter, now, out)
	})
}

func (e *shardedEngine) RejectFollowUp(id splice.FlowID, status int, reason string, retryAfter time.Duration, now splice.Time, out *splice.Output) error {
	return e.on(id, now, func(eng *splice.FrontEnd, now splice.Time) error {
		return eng.RejectFollowUp(id, status, reason, retryAfter, now, out)
	})
}

func (e *shardedEngine) HoldSplice(id splice.FlowID, now splice.Time) error {
	return e.on(id, now, func(eng *splice.FrontEnd, now splice.Time) error { return eng.HoldSplice(id, now) })
}

func (e *shardedEngine) SpliceAcked(id splice.FlowID, now splice.Time, out *splice.Output) error {
	return e.on(id, now, func(eng *splice.FrontEnd, now splice.Time) error { return eng.SpliceAcked(id, now, out) })
}

func (e *shardedEngine) Admit(id splice.FlowID, now splice.Time, out *splice.Output) error {
	return e.on(id, now, func(eng *splice.FrontEnd, now splice.Time) error { return eng.Admit(id, now, out) })
}

func (e *shardedEngine) Abort(id splice.FlowID, now splice.Time, out *splice.Output) error {
	return e.on(id, now, func(eng *splice.FrontEnd, now splice.Time) error { return eng.Abort(id, now, out) })
}

func (e *shardedEngine) ResponseEnded(id splice.FlowID, re splice.ResponseEnd, now splice.Time, out *splice.Output) error {
	return e.on(id, now, func(eng *splice.FrontEnd, now splice.Time) error {
		return eng.ResponseEnded(id, re, now, out)
	})
}

// RedispatchRefused (controller.Redispatcher).
func (e *shardedEngine) RedispatchRefused(id splice.FlowID, carry bool, now splice.Time, out *splice.Output) error {
	return e.on(id, now, func(eng *splice.FrontEnd, now splice.Time) error { return eng.RedispatchRefused(id, carry, now, out) })
}

// DropPool (controller.PoolDropper): every shard keeps a pool of its own.
func (e *shardedEngine) DropPool(backend uint32, now splice.Time, out *splice.Output) int {
	n := 0
	for i, s := range e.shards {
		s.mu.Lock()
		n += s.engine.DropPool(backend, s.stamp(now), out)
		if s.engine.NextDeadline() < s.sleepUntil {
			e.touched[i] = true
		}
		s.mu.Unlock()
	}
	return n
}

// ClientAckedAt (controller.ClientProgress): when the flow's client last
// acknowledged new bytes, asked of a silent back-end's flows only. A
// query: the shard is not marked touched.
func (e *shardedEngine) ClientAckedAt(id splice.FlowID) (splice.Time, bool) {
	s := e.shards[splice.FlowShard(id, len(e.shards))]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.engine.ClientAckedAt(id)
}

// LiveTimeline (controller.LiveTimelines): what the flow's engine saw so
// far, asked when the front-end stops.
func (e *shardedEngine) LiveTimeline(id splice.FlowID) (splice.FlowTimeline, uint64, bool) {
	s := e.shards[splice.FlowShard(id, len(e.shards))]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.engine.LiveTimeline(id)
}

// Rewrite (controller.Rewriter): serve the flow's request from a content
// tree (issue 10).
func (e *shardedEngine) Rewrite(id splice.FlowID, path []byte) error {
	return e.on(id, 0, func(eng *splice.FrontEnd, _ splice.Time) error { return eng.Rewrite(id, path) })
}
