package controller

import (
	"cmp"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

// backend is what the controller knows of one back-end.
type backend struct {
	id          uint32
	ip          netip.Addr
	mac         wire.MAC
	ctl         netip.AddrPort
	ports       []uint16
	capacity    int
	incarnation uint64

	alive     bool
	lastSeen  splice.Time // last sign of life: lastHeard, or its clients' progress (liveness.go)
	lastHeard splice.Time // last keepalive, Feedback, SpliceAck or Register
	probing   bool        // a probe went out at probeSent and no answer came yet
	probeSent splice.Time
	deaths    uint64

	overCount    int    // keepalives in a row reporting fewer requests than we count
	reconciled   uint64 // slots released by reconcile
	reported     int    // concurrency the back-end last reported
	peakReported int    // highest concurrency its shim reported

	sent int // requests on C2 to it, not yet reported done: its slots in use
	// promised counts requests dispatched to go early whose Splice is
	// not sent yet (flowRec.promised): slots spoken for.
	promised int
	ready    []readyConn // handed off ahead, waiting for a slot, oldest first (slots.go)
	parked   []parkedReq // follow-ups the scheduler released, waiting for a slot

	dispatched, closed, served uint64
	followUps                  uint64 // keep-alive requests admitted to it
	heldHandoffs               uint64 // handoffs that had to wait ready
	responseBytes              uint64
	forwardedBytes             uint64
	serviceTotal               time.Duration
	// What a slot costs beyond the service time: the handoff (dispatch to
	// the shim's SpliceAck) and the whole slot time of served requests.
	handoffs              uint64
	handoffTotal          time.Duration
	slotsTimed            uint64
	slotTotal, slotExcess time.Duration
	// The same three times as histograms, for /metrics (issue 12): the
	// means above say nothing of the tail. One bucket search and three
	// adds per observation, no allocation.
	handoffTimes, slotTimes, serviceTimes Histogram
}

// capacity is what a back-end may run at once: its registered figure,
// bounded by the configured cap.
func (c *Controller) capacity(be *backend) int {
	if c.cfg.ConcurrencyCap > 0 && c.cfg.ConcurrencyCap < be.capacity {
		return c.cfg.ConcurrencyCap
	}
	return be.capacity
}

// dispatchLimit is how many requests the dispatcher may place on be at
// once, sent or still being handed off.
func (c *Controller) dispatchLimit(be *backend) int {
	n := c.capacity(be)
	if n < 1 {
		return 0 // draining
	}
	return n + c.cfg.HandoffAhead
}

// syncDispatcher tells the dispatcher be's limit and ports.
func (c *Controller) syncDispatcher(be *backend) {
	c.disp.AddBackend(sched.BackendID(be.id), c.dispatchLimit(be), be.ports)
}

// seen records a sign of life from be, which also answers a probe.
func (c *Controller) seen(be *backend, now splice.Time) {
	be.lastSeen, be.lastHeard = now, now
	be.probing = false
}

func (c *Controller) register(r *proto.Register, now splice.Time, out *Output) {
	be := c.backends[r.BackendID]
	isNew := be == nil
	if isNew {
		be = &backend{id: r.BackendID}
		c.backends[r.BackendID] = be
		i, _ := slices.BinarySearchFunc(c.order, be.id, func(b *backend, id uint32) int { return cmp.Compare(b.id, id) })
		c.order = slices.Insert(c.order, i, be)
	}
	restarted := !isNew && be.incarnation != r.Incarnation
	if restarted {
		// Its shim lost the splices it held: the connections through it
		// can no longer be translated.
		if n := c.resetFlows(be, now, out); n > 0 {
			c.log(out, slog.LevelWarn, "back-end restarted: its connections were reset", "backend", be.id, "connections_reset", n)
		}
		// And the C2s kept for it: a Splice reusing one would be
		// refused, and its client's connection lost.
		if pd, ok := c.eng.(PoolDropper); ok {
			if n := pd.DropPool(be.id, now, &out.Engine); n > 0 {
				c.log(out, slog.LevelInfo, "back-end restarted: the handoff connections pooled for it were reset", "backend", be.id, "pooled_reset", n)
			}
		}
	}
	// The message is the caller's (a daemon's Codec reuses it): keep a
	// copy of the ports, not the slice.
	be.ip, be.mac, be.ports, be.capacity = r.IP, r.MAC, slices.Clone(r.WebPorts), int(r.Capacity)
	be.ctl = netip.AddrPortFrom(r.IP, r.ControlPort)
	be.incarnation = r.Incarnation
	be.alive = true
	c.seen(be, now)
	c.syncDispatcher(be)
	c.disp.SetAlive(sched.BackendID(be.id), true)
	if isNew || restarted {
		c.log(out, slog.LevelInfo, "back-end registered", "backend", r.BackendID, "ip", r.IP, "mac", wire.MAC(r.MAC).String(),
			"ports", be.ports, "capacity", r.Capacity)
	}
	out.send(be.ctl, &proto.RegisterAck{BackendID: r.BackendID, Incarnation: r.Incarnation, KeepaliveInterval: c.cfg.KeepaliveInterval})
	c.updateSlots(now)
	c.fillSlots(be, now, out)
	c.dispatch(now, out)
}

func (c *Controller) keepalive(m *proto.Keepalive, now splice.Time, out *Output) {
	be := c.backends[m.BackendID]
	if be == nil || be.incarnation != m.Incarnation {
		return // a shim we do not know: without an echo it registers again
	}
	// The echo tells the shim we still know it; a shim that stops
	// hearing echoes (say, the front-end restarted) registers again.
	out.send(be.ctl, &proto.Keepalive{BackendID: be.id, Incarnation: be.incarnation, Seq: m.Seq})
	c.seen(be, now)
	be.reported = int(m.Concurrency)
	be.peakReported = max(be.peakReported, be.reported)
	c.reconcile(be, be.reported, now, out)
	if !be.alive {
		be.alive = true
		c.disp.SetAlive(sched.BackendID(be.id), true)
		c.log(out, slog.LevelInfo, "back-end alive again", "backend", be.id)
		c.updateSlots(now)
		c.dispatch(now, out)
	}
}

func (c *Controller) feedback(m *proto.Feedback, now splice.Time, out *Output) {
	if be := c.backends[m.BackendID]; be != nil {
		be.served++
		be.responseBytes += m.ResponseBytes
		be.serviceTotal += m.ServiceTime
		be.serviceTimes.Observe(m.ServiceTime)
		be.reported = int(m.Concurrency)
		be.peakReported = max(be.peakReported, be.reported)
		c.seen(be, now)
	}
	flow, _ := c.flowOf(m.RequestID) // bound checked the prefix
	rec := c.flows[flow]
	if rec != nil && rec.splice != nil && (rec.splice.msg.Flags&proto.SpliceImplicitAck != 0 || rec.splice.msg.Reuse.Early) {
		// The Feedback overtook the SYN-ACK that stands for this
		// Splice's ack (splice.EvSpliceTaken): the two reach the
		// front-end's shards by different ways (the SYN-ACK by its
		// flow's, the datagram by shard 0's). The shim measured the
		// response, so it had the Splice installed.
		rec.implicitAck = true
		c.spliceAnswered(rec, true, m.BackendID, "", now, now, out)
	}
	c.tlFeedback(rec, m, now, out)
	c.noteSize(rec, m.ResponseBytes)
	c.feedbackCompleted(m.ResponseBytes, now)
	c.served(rec, m.ServiceTime, now, out)
	if rec == nil {
		c.lateFeedback(flow, m, now, out) // the flow closed first
	}
	// Where the response ended lets a refused follow-up on the same
	// connection be answered in its stream; a flow already gone or not
	// spliced has no use for it.
	_ = c.eng.ResponseEnded(flow, splice.ResponseEnd{Seq: m.ResponseEnd, CloseSent: m.CloseSent, FINSent: m.FINSent}, now, &out.Engine)
}

// nextCheck is when checkBackends next has something to do for be.
func (be *backend) nextCheck(iv time.Duration) splice.Time {
	switch {
	case !be.alive:
		return splice.Never
	case be.probing:
		return be.probeSent.Add(iv/2) + 1
	}
	return be.lastSeen.Add(iv*5/4) + 1
}

// checkBackends declares back-ends dead. A back-end that has been silent
// for 1.25 keepalive intervals (no keepalive, feedback or ack, and no
// client of its connections acknowledging new bytes: liveness.go) is
// probed once; if the probe is not answered within half an interval it
// is dead: at most 1.75 intervals after its last sign of life, inside
// the two the design allows.
func (c *Controller) checkBackends(now splice.Time, out *Output) {
	iv := c.cfg.KeepaliveInterval
	for _, be := range c.order {
		if be.alive && (be.probing && now.Sub(be.probeSent) > iv/2 || !be.probing && now.Sub(be.lastSeen) > iv*5/4) {
			c.progressSeen(be) // its clients' ACKs may say it is serving
		}
		switch {
		case !be.alive:
		case !be.probing && now.Sub(be.lastSeen) > iv*5/4:
			be.probing, be.probeSent = true, now
			out.send(be.ctl, &proto.Keepalive{BackendID: be.id, Incarnation: be.incarnation, Seq: 0})
		case be.probing && now.Sub(be.probeSent) > iv/2:
			c.backendDead(be, now, out)
		}
	}
}

// backendDead stops dispatching to be and resets every connection
// spliced to it (design trap 13): their clients see a RST, not a hang,
// and the requests in service there are refunded.
func (c *Controller) backendDead(be *backend, now splice.Time, out *Output) {
	be.alive = false
	be.probing = false
	be.deaths++
	c.disp.SetAlive(sched.BackendID(be.id), false)
	n := c.resetFlows(be, now, out)
	c.log(out, slog.LevelWarn, "back-end dead: no keepalive and no answer to a probe", "backend", be.id,
		"silent", now.Sub(be.lastSeen), "connections_reset", n)
	c.updateSlots(now)
}

// resetFlows aborts every connection dispatched to be, in flow order,
// refunding what it had in service or parked there; it returns how many.
func (c *Controller) resetFlows(be *backend, now splice.Time, out *Output) int {
	var recs []*flowRec
	for _, rec := range c.flows {
		if rec.be == be {
			recs = append(recs, rec)
		}
	}
	slices.SortFunc(recs, func(a, b *flowRec) int { return cmp.Compare(a.id, b.id) })
	for _, p := range be.parked {
		c.refund(p.req.Customer, p.credited) // charged by the scheduler, never run
	}
	be.parked, be.ready = nil, nil
	for _, rec := range recs {
		for _, r := range rec.serving {
			c.refund(r.customer, r.credited)
			c.release(be, r, now)
		}
		rec.serving = nil
		rec.splice, rec.ready = nil, false
		if rec.waiting == waitParked {
			rec.waiting = notWaiting
		}
		c.abort(rec.id, now, out)
	}
	return len(recs)
}
