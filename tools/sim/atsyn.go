package sim

import (
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
)

// The Splice sent with C2's SYN (issue 7; Config.ClassicSplice off, the
// daemon's default), as splice/fe_atsyn.go and splice/shim_atsyn.go do it.
//
// The engine reports EvSplice inside Dispatch, so the controller sends the
// Splice at dispatch; at the SYN-ACK it reports nothing more. The shim
// keeps the Splice until the back-end's SYN-ACK crosses it, installs it
// then and acknowledges it in the same pass that forwards the SYN-ACK, so
// the SpliceAck and the SYN-ACK travel to the front-end together. The
// controller may therefore take the SpliceAck (SpliceAcked, or HoldSplice
// when the back-end has no slot) while the engine is still connecting,
// and an early request (controller.Config.EarlyRequest) has it call
// SpliceAcked in the same pass as the Splice, at dispatch. The engine
// remembers either call and does it when C2 comes up, as the stand-in
// does here (c2Up).
//
// The timing, from dispatch at D, with H = HandoffDelay and c =
// ControlDelay: the SYN-ACK reaches the front-end at D + H, having
// crossed the shim one trip earlier, at D + H - c (synAckAtShim). The
// Splice reaches the shim at D + c. The shim acknowledges at the later of
// the two, and the SpliceAck arrives c after that: at D + max(H, 2c).
// The request then goes at D + max(H, 2c), where the classic order sends
// it at D + H + 2c: the at-SYN order saves min(H, 2c). An early request
// the Splice carries (DispatchCarrying) leaves the shim when it has both,
// at D + max(c, H - c): a trip sooner again when H >= 2c, as
// splice/shim_carry.go has it; with Config.FastOpen it goes in the SYN,
// at D + c, whatever H (splice/shim_fastopen.go). When both reach
// the front-end at the same instant the SYN-ACK is taken first, as the
// daemon's pass hands the engine the link's frames before it reads the
// control socket (frontend/shard.go); the stand-in takes either order.

// synAckAtShim is when the back-end's SYN-ACK to a handoff dispatched at
// now crosses its shim: one trip (ControlDelay) before it reaches the
// front-end at now + HandoffDelay, and not before the dispatch when
// HandoffDelay is shorter than a trip.
func (r *run) synAckAtShim(now int64) int64 {
	return now + max(0, r.cfg.HandoffDelay.Nanoseconds()-r.cfg.ControlDelay.Nanoseconds())
}

// spliceWithSYN reports flow id's Splice at dispatch, when it goes with
// the SYN: not in the classic order, nor for a rewritten request (the
// engine sends those after the SYN-ACK, when the rewritten length is
// fixed).
func (r *run) spliceWithSYN(id splice.FlowID, f *simFlow, out *splice.Output) {
	if r.cfg.ClassicSplice || f.rewritten {
		return
	}
	f.atSYN = true
	out.Events = append(out.Events, splice.Event{Kind: splice.EvSplice, Flow: id, Backend: f.backend,
		Splice: proto.Splice{RequestID: uint64(id), Flags: proto.SpliceAtSYN}})
}

// c2Up is flow id's handoff connection coming up (the SYN-ACK reaching
// the front-end): in the classic order the engine reports it and the
// Splice goes now; with the Splice sent with the SYN, the engine does
// what the controller asked while it was connecting.
func (r *run) c2Up(id splice.FlowID) {
	f := r.flow(id)
	if f.state != flowConnecting {
		return // reset meanwhile
	}
	if !f.atSYN {
		f.state = flowSpliceWait
		r.event(splice.Event{Kind: splice.EvSplice, Flow: id, Backend: f.backend,
			Splice: proto.Splice{RequestID: uint64(id)}})
		return
	}
	if until := r.stalledUntil(r.now); until != r.now {
		// The engine runs in the stalled process too: it sees the
		// SYN-ACK when the stall ends, after what the stall held back.
		r.schedule(event{at: until, kind: handoffUp, flow: id})
		return
	}
	f.state = flowSpliceWait
	switch {
	case f.goWhenUp:
		f.goWhenUp = false
		r.sendRequest(id, f, r.now)
	case f.holdWhenUp:
		f.holdWhenUp = false
		f.state = flowHeld
	}
}

// spliceAckAt is when the SpliceAck to a Splice of flow id that leaves
// the front-end at now reaches it again: the shim answers when it has the
// Splice and the back-end's SYN-ACK has crossed it. In the classic order
// the SYN-ACK crossed before the Splice left, so this is the control
// round trip; a Splice sent with the SYN may wait for the SYN-ACK.
func (r *run) spliceAckAt(id splice.FlowID, now int64) int64 {
	trip := r.cfg.ControlDelay.Nanoseconds()
	return max(now+trip, r.flow(id).synAckAt) + trip
}
