package sim

import (
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
)

// The stand-in for the packet engine: it keeps each flow's state, carries
// out the controller's calls as the engine would, fails them where the
// engine would, and counts the answers the front-end gives itself.

type flowState uint8

const (
	flowQueued     flowState = iota // request head complete, waiting for Dispatch
	flowConnecting                  // dispatched: the handoff connection is being set up
	flowSpliceWait                  // handoff up, Splice sent, waiting for SpliceAcked
	flowHeld                        // confirmed, waiting ready for a slot (HoldSplice)
	flowSent                        // the request is on its back-end
	flowServed                      // the back-end is done with it
	flowClosed                      // answered by the front-end or reset
)

// simFlow is one simulated client connection with its one request.
type simFlow struct {
	customer      int32
	arrival       int64
	state         flowState
	backend       uint32
	service       int64  // drawn when the request is sent
	bytes         uint64 // of its response, reported in Feedback
	refusedAtDoor bool   // refused on arrival (queue full, over cap, unknown)

	// The Splice sent with the SYN (atsyn.go).
	atSYN      bool  // its Splice went with C2's SYN
	rewritten  bool  // its path is rewritten to a content tree: the Splice waits for the SYN-ACK
	synAckAt   int64 // when the back-end's SYN-ACK crosses the shim
	goWhenUp   bool  // SpliceAcked came while connecting: the request goes when C2 is up
	holdWhenUp bool  // HoldSplice came while connecting: it waits ready once C2 is up
	carried    bool  // its Splice carries the request (DispatchCarrying)
	reused     bool  // it went on a pooled C2 (pool.go)
}

func (r *run) flow(id splice.FlowID) *simFlow { return &r.flows[id-1] }

// frontEnd is the run seen as the controller's Engine.
type frontEnd run

var (
	_ controller.Engine   = (*frontEnd)(nil)
	_ controller.Rewriter = (*frontEnd)(nil) // the engine rewrites, so it sends the Splice classic (atsyn.go)
)

func (e *frontEnd) run() *run { return (*run)(e) }

// lookup returns flow id if it is in one of the states, else the error
// the engine gives.
func (e *frontEnd) lookup(id splice.FlowID, states ...flowState) (*simFlow, error) {
	if id < 1 || int(id) > len(e.flows) {
		return nil, splice.ErrNoFlow
	}
	f := e.run().flow(id)
	for _, s := range states {
		if f.state == s {
			return f, nil
		}
	}
	return nil, splice.ErrFlowState
}

func (e *frontEnd) Dispatch(id splice.FlowID, b splice.Backend, now splice.Time, out *splice.Output) error {
	f, err := e.lookup(id, flowQueued)
	if err != nil {
		return err
	}
	f.state, f.backend = flowConnecting, b.ID
	r := e.run()
	defer r.countHandoff(f)
	if !f.rewritten && r.takePooled(b.ID) {
		r.reuseSplice(id, f, out)
		return nil
	}
	f.synAckAt = r.synAckAtShim(int64(now))
	r.schedule(event{at: int64(now) + e.cfg.HandoffDelay.Nanoseconds(), kind: handoffUp, flow: id})
	r.spliceWithSYN(id, f, out)
	return nil
}

// DispatchCarrying is Dispatch whose Splice, when it goes with the SYN,
// carries the request, as the engine's does (atsyn.go).
func (e *frontEnd) DispatchCarrying(id splice.FlowID, b splice.Backend, now splice.Time, out *splice.Output) error {
	if err := e.Dispatch(id, b, now, out); err != nil {
		return err
	}
	if f := e.run().flow(id); f.atSYN {
		f.carried = true
		ev := &out.Events[len(out.Events)-1]
		ev.Splice.Flags |= proto.SpliceRequest
	}
	return nil
}

// Rewrite is the engine's call to serve a request from a content tree
// (controller.Rewriter): the simulator models the tree's cost itself
// (scaleByTree), so it only notes that the request is rewritten, which
// keeps its Splice from going with the SYN, as in the engine.
func (e *frontEnd) Rewrite(id splice.FlowID, path []byte) error {
	f, err := e.lookup(id, flowQueued)
	if err != nil {
		return err
	}
	f.rewritten = true
	return nil
}

func (e *frontEnd) Reject(id splice.FlowID, status int, reason string, retryAfter time.Duration, now splice.Time, out *splice.Output) error {
	f, err := e.lookup(id, flowQueued, flowHeld)
	if err != nil {
		return err
	}
	held := f.state == flowHeld
	f.state = flowClosed
	r := e.run()
	door := reason == "queue-full" || reason == "over-cap" || reason == "unknown-customer"
	f.refusedAtDoor = door
	if r.inWindow(int64(now)) {
		rej := &r.stats[f.customer].Rejected
		switch reason {
		case "queue-full":
			rej.QueueFull++
		case "over-cap":
			rej.OverCap++
		case "unknown-customer":
			rej.Unknown++
		case "queue-timeout":
			rej.Timeout++
		case "overload", "overload-refused":
			rej.Overload++
		default:
			rej.Other++
		}
	}
	// The answer goes out and the connection closes; a held one has its
	// handoff connection reset first.
	ev := splice.Event{Kind: splice.EvClosed, Flow: id, Reason: splice.CloseAnswered}
	if held {
		ev.Backend = f.backend
	}
	out.Events = append(out.Events, ev)
	return nil
}

func (e *frontEnd) RejectFollowUp(id splice.FlowID, status int, reason string, retryAfter time.Duration, now splice.Time, out *splice.Output) error {
	return splice.ErrNotWaiting // simulated clients send one request per connection
}

func (e *frontEnd) HoldSplice(id splice.FlowID, now splice.Time) error {
	if f, err := e.lookup(id, flowConnecting); err == nil && f.atSYN {
		f.holdWhenUp = true // the SpliceAck came before the SYN-ACK
		return nil
	}
	f, err := e.lookup(id, flowSpliceWait)
	if err != nil {
		return err
	}
	f.state = flowHeld
	return nil
}

func (e *frontEnd) SpliceAcked(id splice.FlowID, now splice.Time, out *splice.Output) error {
	if f, err := e.lookup(id, flowConnecting); err == nil && f.atSYN {
		if f.carried {
			// The shim sends it once it has both the Splice and the
			// back-end's SYN-ACK (atsyn.go).
			r := e.run()
			at := max(int64(now)+r.cfg.ControlDelay.Nanoseconds(), f.synAckAt)
			if r.cfg.FastOpen {
				at = int64(now) + r.cfg.ControlDelay.Nanoseconds() // in the SYN
			}
			r.schedule(event{at: at, kind: carriedSent, flow: id})
			return nil
		}
		f.goWhenUp, f.holdWhenUp = true, false // sent once C2 is up
		return nil
	}
	f, err := e.lookup(id, flowSpliceWait, flowHeld)
	if err != nil {
		return err
	}
	e.run().sendRequest(id, f, int64(now))
	return nil
}

// sendRequest puts flow id's request on its back-end at now.
func (r *run) sendRequest(id splice.FlowID, f *simFlow, now int64) {
	f.state = flowSent
	f.service = r.serviceTime(f.customer)
	f.bytes = r.cfg.Customers[f.customer].Bytes
	r.scaleByTree(id, f)
	r.inServ[f.backend-1]++
	r.schedule(event{at: now + f.service, kind: served, flow: id})
}

func (e *frontEnd) Admit(id splice.FlowID, now splice.Time, out *splice.Output) error {
	return splice.ErrNotWaiting
}

func (e *frontEnd) Abort(id splice.FlowID, now splice.Time, out *splice.Output) error {
	f, err := e.lookup(id, flowQueued, flowConnecting, flowSpliceWait, flowHeld, flowSent)
	if err != nil {
		return err
	}
	if f.state == flowSent {
		e.inServ[f.backend-1]--
	}
	f.state = flowClosed
	out.Events = append(out.Events, splice.Event{Kind: splice.EvClosed, Flow: id, Backend: f.backend, Reason: splice.CloseAborted})
	return nil
}

func (e *frontEnd) ResponseEnded(id splice.FlowID, re splice.ResponseEnd, now splice.Time, out *splice.Output) error {
	return nil
}
