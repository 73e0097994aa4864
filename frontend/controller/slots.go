package controller

import (
	"log/slog"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// Back-end slots, and handoffs set up ahead of them.
//
// A back-end runs at most capacity requests at once (its concurrency
// cap): a request holds a slot from the moment it is sent on C2 until the
// shim's Feedback says its response is over. Setting the handoff up (C2
// handshake, Splice round trip to the shim) takes a few milliseconds, more
// on a loaded host. Inside the slot that time would leave the server idle
// on every request: at 20 ms of service and 3-10 ms of handoff, 15-30% of
// the cluster. So the dispatcher may start up to HandoffAhead handoffs per
// back-end beyond its capacity. Once the shim has confirmed a splice the
// request goes at once if a slot is free; otherwise the connection waits
// ready (the engine holds C2 and the request: HoldSplice) and takes the
// next slot that frees, before follow-ups and new dispatches; after
// SlotWait the client gets a 503 instead (Engine.Reject). The scheduler
// still decides the order at dispatch time; the ahead handoffs only hide
// the set-up.
//
// Early request (issue 7). Waiting for the SpliceAck costs every new
// connection a round trip to the shim and a wake-up of each daemon before
// the request may go: about a third of the first byte's delay over a
// direct connection. A safe request (safeMethod) whose back-end has a
// slot free goes on C2 in the same pass as its Splice: the daemon sends
// the control datagram first, and on its way to the shim's socket it
// crosses the shim's wire and TAP ahead of the request's segment, so the
// shim reads it before the server can answer. Should it come late, the
// shim still counts the request from its arrival and drops the replies
// until then (splice/shim_early.go); the server sends them again. Should
// the shim refuse the Splice, or never confirm it, the connection is
// reset: the server saw a request that changes nothing there.
// Config.EarlyRequest turns this on; off, every first request waits for
// the SpliceAck. Measured in the lab it moved the first byte by less
// than the run-to-run noise (docs/results.md), so it is not the default.

// readyConn is a connection handed off ahead and confirmed by the shim,
// waiting for a slot since a given time.
type readyConn struct {
	flow  splice.FlowID
	since splice.Time
}

// parkedReq is a follow-up released by the scheduler, waiting for a slot
// on its connection's back-end.
type parkedReq struct {
	flow     splice.FlowID
	req      sched.Request
	credited bool
}

// hasRoom: a request could be sent to be right now without overtaking
// the connections already waiting for a slot there.
func (c *Controller) hasRoom(be *backend) bool {
	return be.alive && be.sent+be.promised < c.capacity(be) && len(be.ready) == 0
}

// unpromise gives back the slot rec's dispatch spoke for, if it did.
func (c *Controller) unpromise(rec *flowRec, be *backend) {
	if rec.promised {
		rec.promised = false
		be.promised--
	}
}

// spliceConfirmed runs when the shim acknowledged rec's Splice.
func (c *Controller) spliceConfirmed(rec *flowRec, now splice.Time, out *Output) {
	be := rec.be
	if c.hasRoom(be) {
		c.sendFirstRequest(rec, now, out)
		return
	}
	if err := c.eng.HoldSplice(rec.id, now); err != nil {
		if c.logs(slog.LevelDebug) {
			c.log(out, slog.LevelDebug, "splice ack for a flow that moved on", "flow", rec.id, "err", err)
		}
		return
	}
	be.ready = append(be.ready, readyConn{flow: rec.id, since: now})
	rec.ready = true
	be.heldHandoffs++
}

// sendFirstRequest lets the engine send the request it accepted.
func (c *Controller) sendFirstRequest(rec *flowRec, now splice.Time, out *Output) {
	if err := c.eng.SpliceAcked(rec.id, now, &out.Engine); err != nil {
		if c.logs(slog.LevelDebug) {
			c.log(out, slog.LevelDebug, "splice ack for a flow that moved on", "flow", rec.id, "err", err)
		}
		return
	}
	c.markSent(rec, now)
	c.tlRequestSent(rec, now)
}

// fillSlots hands be's free slots to the connections waiting ready, then
// to follow-up requests parked for it.
func (c *Controller) fillSlots(be *backend, now splice.Time, out *Output) {
	for be.alive && be.sent < c.capacity(be) && len(be.ready) > 0 {
		rec := c.flows[popFront(&be.ready).flow]
		rec.ready = false
		c.sendFirstRequest(rec, now, out)
	}
	for len(be.parked) > 0 && c.hasRoom(be) {
		p := popFront(&be.parked)
		rec := c.flows[p.flow]
		rec.waiting = notWaiting
		c.admit(rec, p.req, p.credited, now, out)
	}
}

// slotWaits refuses the connections that waited ready longer than
// SlotWait: nothing reached the server, so the client may retry.
func (c *Controller) slotWaits(now splice.Time, out *Output) {
	for _, be := range c.order {
		for len(be.ready) > 0 && now >= be.ready[0].since.Add(c.cfg.SlotWait) {
			rec := c.flows[popFront(&be.ready).flow]
			rec.ready = false
			cust := ""
			if len(rec.serving) > 0 {
				cust = rec.serving[0].customer
			}
			c.stats(cust).rejected["slot-wait"]++
			c.log(out, slog.LevelInfo, "request rejected", "flow", rec.id, "customer", cust, "reason", "slot-wait", "status", 503)
			if c.eng.Reject(rec.id, 503, "no back-end slot became free in time", c.cfg.RetryAfter, now, &out.Engine) != nil {
				// The engine no longer holds it ready: reset it, or if
				// the engine forgot it, forget it too.
				if err := c.eng.Abort(rec.id, now, &out.Engine); err != nil {
					c.closed(splice.Event{Kind: splice.EvClosed, Flow: rec.id, Reason: splice.CloseAborted}, now, out)
				}
			}
		}
	}
}

// Splice messages and their acknowledgement.

// pendingSplice is a Splice sent to a shim and not acknowledged yet.
type pendingSplice struct {
	msg   proto.Splice
	due   splice.Time // when to send it again
	tries int
}

// spliceTimers are the resend times of the pending Splices, earliest
// first: every wait is SpliceRetry long and time does not go back, so
// appending keeps the order. An entry whose flow's pending Splice has
// another due time (acknowledged, resent, closed) is stale and skipped.
type spliceTimers struct {
	list []spliceTimer
	head int
}

type spliceTimer struct {
	flow splice.FlowID
	due  splice.Time
}

func (t *spliceTimers) push(flow splice.FlowID, due splice.Time) {
	if t.head > 64 && t.head*2 > len(t.list) {
		t.list = t.list[:copy(t.list, t.list[t.head:])]
		t.head = 0
	}
	t.list = append(t.list, spliceTimer{flow, due})
}

// pop removes and returns the earliest live timer due at now, if any.
func (t *spliceTimers) pop(c *Controller, now splice.Time) (*flowRec, bool) {
	for t.head < len(t.list) {
		e := t.list[t.head]
		rec := c.flows[e.flow]
		if rec != nil && rec.splice != nil && rec.splice.due == e.due {
			if e.due > now {
				return nil, false
			}
			t.head++
			return rec, true
		}
		t.head++ // stale
	}
	return nil, false
}

// next is the earliest live due time, dropping stale entries before it.
func (t *spliceTimers) next(c *Controller) splice.Time {
	for t.head < len(t.list) {
		e := t.list[t.head]
		if rec := c.flows[e.flow]; rec != nil && rec.splice != nil && rec.splice.due == e.due {
			return e.due
		}
		t.head++
	}
	return splice.Never
}

func (c *Controller) sendSplice(ev splice.Event, now splice.Time, out *Output) {
	rec := c.flows[ev.Flow]
	if rec != nil && rec.be != nil {
		c.unpromise(rec, rec.be) // sent early below, or after all not
	}
	if rec == nil || rec.be == nil || rec.be.id != ev.Backend {
		c.abort(ev.Flow, now, out)
		return
	}
	rec.pending = pendingSplice{msg: ev.Splice, due: now.Add(c.cfg.SpliceRetry), tries: 1}
	p := &rec.pending
	p.msg.RequestID, p.msg.BackendID = c.requestID(rec.id), rec.be.id
	// A request its Splice carries is on its way once the shim has the
	// Splice: it takes its slot now, whatever changed since Dispatch. On
	// a pooled C2 the request follows the Splice marked for the shim to
	// hold until it has it, and the server's ACK of it stands for the
	// SpliceAck (proto.SpliceReuse.Early, splice/fe_pool.go).
	early := p.msg.Flags&proto.SpliceRequest != 0 || c.goesEarly(rec, rec.be) || c.slotHeld(rec)
	p.msg.Reuse.Early = early && p.msg.Reuse.On
	rec.splice = p
	c.splices.push(rec.id, p.due)
	out.sendSplice(rec.be, &p.msg)
	c.tlSpliceSent(rec, now)
	if early {
		rec.early = true
		c.sendFirstRequest(rec, now, out)
	}
}

// goesEarly reports whether rec's first request goes with its Splice
// (Config.EarlyRequest): a safe request whose back-end has a slot free.
func (c *Controller) goesEarly(rec *flowRec, be *backend) bool {
	return rec.safe && c.cfg.EarlyRequest && c.hasRoom(be)
}

// resendSplices repeats Splice messages whose ack has not come: UDP may
// lose them. After SpliceTries sends the controller stops; a late ack is
// still taken, and the engine gives up on its own deadline.
func (c *Controller) resendSplices(now splice.Time, out *Output) {
	for {
		rec, ok := c.splices.pop(c, now)
		if !ok {
			return
		}
		p := rec.splice
		if p.tries >= c.cfg.SpliceTries {
			p.due = splice.Never
			if rec.early {
				// Its request went: without the Splice the shim does
				// not translate the response, the client would wait
				// for nothing.
				c.log(out, slog.LevelWarn, "splice never confirmed after an early request; resetting", "flow", rec.id, "backend", rec.be.id)
				c.abort(rec.id, now, out)
			}
			continue
		}
		p.tries++
		p.due = now.Add(c.cfg.SpliceRetry)
		// A resend does not carry the request again: the shim keeps it
		// from the first by RequestID, and the flow's buffer it points
		// to is the engine's.
		p.msg.Flags &^= proto.SpliceRequest | proto.SpliceImplicitAck
		p.msg.Request = nil
		c.splices.push(rec.id, p.due)
		out.sendSplice(rec.be, &p.msg)
		c.tlSpliceSent(rec, now)
	}
}

func (c *Controller) spliceAck(m *proto.SpliceAck, now splice.Time, out *Output) {
	if be := c.backends[m.BackendID]; be != nil {
		c.seen(be, now)
	}
	flow, _ := c.flowOf(m.RequestID) // bound checked the prefix
	rec := c.flows[flow]
	if rec != nil && rec.splice == nil && rec.implicitAck && !m.OK {
		// The SYN-ACK acknowledged the Splice, then the shim refused to
		// install it (proto.SpliceImplicitAck): the refusal stands.
		rec.implicitAck = false
		c.spliceRefused(rec, m.BackendID, m.Reason, false, now, out)
		return
	}
	c.spliceAnswered(rec, m.OK, m.BackendID, m.Reason, now, now, out)
}

// spliceTaken takes the back-end's SYN-ACK that acknowledged the request
// the shim put in C2's SYN for the SpliceAck of a Splice sent with
// proto.SpliceImplicitAck, which the shim does not send.
func (c *Controller) spliceTaken(ev splice.Event, now splice.Time, out *Output) {
	rec := c.flows[ev.Flow]
	if rec == nil || rec.be == nil || rec.be.id != ev.Backend {
		return
	}
	if rec.splice != nil {
		rec.implicitAck = true
	}
	at := now
	if ev.At > 0 && ev.At < now {
		at = ev.At // the SYN-ACK's time, which the event may come after
	}
	c.spliceAnswered(rec, true, ev.Backend, "", at, now, out)
}

// spliceRefused aborts rec, whose Splice the shim refused; but a Splice
// that reused a pooled C2 the shim did not find idle (reuse) is tried
// again once, on a new C2: the request was not served there
// (splice/fe_pool_refused.go). One that already has its slot goes with
// its new Splice (sendSplice).
func (c *Controller) spliceRefused(rec *flowRec, backend uint32, reason string, reuse bool, now splice.Time, out *Output) {
	if rd, ok := c.eng.(Redispatcher); ok && reuse && !rec.redispatched && rec.be != nil && rec.be.alive {
		rec.redispatched = true
		carry := c.slotHeld(rec) || c.goesEarly(rec, rec.be)
		if err := rd.RedispatchRefused(rec.id, carry, now, &out.Engine); err == nil {
			c.log(out, slog.LevelInfo, "shim refused a pooled handoff connection: the request goes on a new one",
				"flow", rec.id, "backend", backend, "reason", reason)
			return
		}
	}
	c.log(out, slog.LevelWarn, "shim refused splice", "flow", rec.id, "backend", backend, "reason", reason)
	c.abort(rec.id, now, out)
}

// slotHeld reports whether rec's first request already counts against
// its back-end's slots: it went early, with a Splice that was refused.
func (c *Controller) slotHeld(rec *flowRec) bool {
	return len(rec.serving) > 0 && rec.serving[0].sent
}

// spliceAnswered handles the shim's answer to rec's Splice: its
// SpliceAck, or the SYN-ACK that stood for one (spliceTaken), which came
// at ackAt.
func (c *Controller) spliceAnswered(rec *flowRec, ok bool, backend uint32, reason string, ackAt, now splice.Time, out *Output) {
	if rec == nil || rec.splice == nil {
		return // a duplicate ack of a resent Splice, or a flow gone
	}
	reuse := rec.splice.msg.Reuse.On
	rec.splice = nil
	c.tlSpliceAck(rec, ackAt)
	if len(rec.serving) > 0 {
		handoff := ackAt.Sub(rec.serving[0].dispatched)
		rec.be.handoffs++
		rec.be.handoffTotal += handoff
		rec.be.handoffTimes.Observe(handoff)
	}
	if !ok {
		c.spliceRefused(rec, backend, reason, reuse, now, out)
		return
	}
	if rec.early {
		return // its request went with the Splice
	}
	c.spliceConfirmed(rec, now, out)
}

// popFront removes and returns the first element of a short queue,
// keeping its storage: slicing from the front would make every append
// after allocate, one per handoff set up ahead.
func popFront[T any](q *[]T) T {
	s := *q
	v := s[0]
	n := copy(s, s[1:])
	var zero T
	s[n] = zero
	*q = s[:n]
	return v
}
