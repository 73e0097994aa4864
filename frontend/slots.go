package frontend

import (
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
// ready (splice.FrontEnd.HoldSplice) and takes the next slot that frees,
// before follow-ups and new dispatches. The scheduler still decides the
// order at dispatch time; the ahead handoffs only hide the set-up.

// dispatchLimit is how many requests the dispatcher may place on bs at
// once, sent or still being handed off.
func (d *Daemon) dispatchLimit(bs *backendState) int {
	c := d.capacity(bs)
	if c < 1 {
		return 0 // draining
	}
	return c + d.cfg.HandoffAhead
}

// syncDispatcher tells the dispatcher bs's limit and ports.
func (d *Daemon) syncDispatcher(bs *backendState) {
	d.disp.AddBackend(sched.BackendID(bs.id), d.dispatchLimit(bs), bs.ports)
}

// hasRoom: a request could be sent to b right now without overtaking the
// connections already waiting for a slot there.
func (d *Daemon) hasRoom(b uint32) bool {
	bs := d.backends[b]
	return bs != nil && bs.alive && bs.sent < d.capacity(bs) && len(bs.ready) == 0
}

// spliceConfirmed runs when the shim acknowledged flow's Splice.
func (d *Daemon) spliceConfirmed(flow splice.FlowID, now splice.Time) {
	b, ok := d.dispatched[flow]
	bs := d.backends[b]
	if !ok || bs == nil {
		d.log.Debug("splice ack for a flow that moved on", "flow", flow)
		return
	}
	if bs.sent < d.capacity(bs) && len(bs.ready) == 0 {
		d.sendFirstRequest(flow, bs, now)
		return
	}
	if err := d.engine.HoldSplice(flow, now); err != nil {
		d.log.Debug("splice ack for a flow that moved on", "flow", flow, "err", err)
		return
	}
	bs.ready = append(bs.ready, flow)
	bs.heldHandoffs++
}

// sendFirstRequest lets the engine send the request it accepted.
func (d *Daemon) sendFirstRequest(flow splice.FlowID, bs *backendState, now splice.Time) {
	if err := d.engine.SpliceAcked(flow, now, &d.out); err != nil {
		d.log.Debug("splice ack for a flow that moved on", "flow", flow, "err", err)
		return
	}
	d.markSent(flow, bs, now)
}

// markSent records that flow's oldest unsent request went to bs: it holds
// a slot from now on.
func (d *Daemon) markSent(flow splice.FlowID, bs *backendState, now splice.Time) {
	s, ok := d.inService[flow]
	if !ok {
		return
	}
	for i := range s.reqs {
		if !s.reqs[i].sent {
			s.reqs[i].sent = true
			s.reqs[i].sentAt = now
			bs.sent++
			d.slotStart(int64(now))
			return
		}
	}
}

// releaseReq accounts for r leaving back-end b (served, refunded or
// reconciled away).
func (d *Daemon) releaseReq(b uint32, r servingReq, now splice.Time) {
	d.disp.Done(sched.BackendID(b))
	if !r.sent {
		return
	}
	d.slotDone(int64(now))
	if bs := d.backends[b]; bs != nil && bs.sent > 0 {
		bs.sent--
	}
}

// fillSlots hands bs's free slots to the connections waiting ready, then
// to follow-up requests parked for it.
func (d *Daemon) fillSlots(bs *backendState, now splice.Time) {
	for bs.alive && bs.sent < d.capacity(bs) && len(bs.ready) > 0 {
		flow := bs.ready[0]
		bs.ready = bs.ready[1:]
		if _, ok := d.inService[flow]; !ok {
			continue // the client left while it waited
		}
		d.sendFirstRequest(flow, bs, now)
	}
	for len(d.parked[bs.id]) > 0 && d.hasRoom(bs.id) {
		p := d.parked[bs.id][0]
		d.parked[bs.id] = d.parked[bs.id][1:]
		d.admit(p.flow, bs.id, p.req, now)
	}
}
