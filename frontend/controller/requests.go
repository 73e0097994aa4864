package controller

import (
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/qsplice/qsplice/frontend/timeline"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// flowRec is everything the controller knows of one client connection,
// from its first request until the engine reports it closed.
type flowRec struct {
	id splice.FlowID
	be *backend // where it was dispatched; nil before
	// serving are its requests dispatched or admitted and not reported
	// done, oldest first (responses come back in request order).
	serving []servingReq
	// waiting says where its next request is: in a queue (whose policy
	// holds it; followUp says it came on the spliced connection) or
	// parked for a slot on be.
	waiting  waitState
	followUp bool
	// splice is the Splice message awaiting its SpliceAck (pending);
	// nil when none.
	splice  *pendingSplice
	pending pendingSplice
	// implicitAck: the back-end's SYN-ACK acknowledged its Splice
	// (splice.EvSpliceTaken); a refusal may still come as a SpliceAck.
	implicitAck bool
	// ready: handed off ahead and confirmed, in be.ready waiting for a
	// slot.
	ready bool
	// safe: its first request's method is safe (RFC 9110 section 9.2.1),
	// so it may go before the shim confirmed its Splice; early: it did.
	safe, early bool
	// promised: dispatched to go early (DispatchCarrying), its Splice not
	// sent yet: it counts against its back-end's slots (backend.promised).
	promised bool
	// redispatched: the shim refused the pooled C2 its Splice reused,
	// and the flow went on a new C2 (spliceRefused); once only.
	redispatched bool

	// Handoff timeline (issue 11, timeline.go).
	tl flowTimeline
}

type waitState uint8

const (
	notWaiting waitState = iota
	waitQueued
	waitParked
)

// servingReq is one request in service on a flow's back-end.
type servingReq struct {
	customer   string
	credited   bool // charged by the credit scheduler
	arrival    splice.Time
	dispatched splice.Time
	sent       bool        // on C2 to the back-end: holds one of its slots
	sentAt     splice.Time // when it was sent
	// tree is the content tree the feedback policy chose (1..M); 0 for
	// the other policies.
	tree uint8
}

// customer names the credit customer of a Host header.
func (c *Controller) customer(host string) string {
	if c.cfg.Classify != nil {
		return c.cfg.Classify(host)
	}
	if c.cfg.Credit.Default != "" {
		return c.cfg.Credit.Default
	}
	return "default"
}

// request classifies and queues a parsed request, or answers it at once
// when its queue refuses it.
func (c *Controller) request(ev splice.Event, now splice.Time, out *Output) {
	r := ev.Request
	rec := c.flows[ev.Flow]
	if ev.FollowUp && (rec == nil || rec.be == nil) {
		// A follow-up on a connection this controller never dispatched
		// (say, it was reset meanwhile): it has nowhere to go.
		c.log(out, slog.LevelWarn, "follow-up on a connection the controller does not know; resetting it", "flow", ev.Flow)
		c.abort(ev.Flow, now, out)
		return
	}
	q := c.byPort[r.Port]
	var cust string
	switch {
	case q == nil:
		c.reject(ev.Flow, ev.FollowUp, c.customer(r.Host), "no-listener", 503, now, out)
		return
	case q.lifo != nil:
		cust = c.lifo.class(r.Path) // LifoPri queues by class name
	case q.feedback == nil:
		cust = c.customer(r.Host)
	}
	req := sched.Request{ID: sched.RequestID(ev.Flow), Customer: cust, Host: r.Host, Path: r.Path, Port: r.Port, Arrival: int64(now)}
	if q.feedback != nil {
		c.feedbackRequest(&req, r, now) // by its class, session and stage
		cust = req.Customer
	}
	cs := c.stats(cust)
	cs.offered++
	err := q.policy.Enqueue(req, int64(now))
	if err != nil {
		reason, status := "queue-full", 503
		switch {
		case errors.Is(err, sched.ErrOverCap):
			reason, status = "over-cap", 429
		case errors.Is(err, sched.ErrOverload):
			reason = "overload"
		case errors.Is(err, sched.ErrUnknownCustomer):
			reason = "unknown-customer"
		}
		c.reject(ev.Flow, ev.FollowUp, cust, reason, status, now, out)
		return
	}
	if rec == nil {
		rec = c.newRec(ev.Flow)
		c.flows[ev.Flow] = rec
		c.flowsPeak = max(c.flowsPeak, len(c.flows))
	}
	rec.waiting, rec.followUp = waitQueued, ev.FollowUp
	if !ev.FollowUp {
		rec.safe = safeMethod(r.Method)
	}
	c.tlQueued(rec, ev, cust, now)
	if c.logs(slog.LevelDebug) {
		c.log(out, slog.LevelDebug, "request", "flow", ev.Flow, "client", r.Client, "method", r.Method, "host", r.Host,
			"path", r.Path, "customer", cust, "follow_up", ev.FollowUp)
	}
	c.dispatch(now, out)
}

// reject answers a request the scheduler will not run. A follow-up on a
// spliced connection is answered inside its stream once the back-end's
// previous response has ended (splice.FrontEnd.RejectFollowUp); should
// the engine no longer hold it as waiting, the connection is reset.
func (c *Controller) reject(flow splice.FlowID, followUp bool, cust, reason string, status int, now splice.Time, out *Output) {
	c.stats(cust).rejected[reason]++
	if c.logs(slog.LevelInfo) {
		c.log(out, slog.LevelInfo, "request rejected", "flow", flow, "customer", cust, "reason", reason, "status", status, "follow_up", followUp)
	}
	var retry time.Duration
	if status == 503 {
		retry = c.cfg.RetryAfter
	}
	if followUp {
		if err := c.eng.RejectFollowUp(flow, status, reason, retry, now, &out.Engine); err != nil {
			c.abort(flow, now, out)
		}
		return
	}
	if err := c.eng.Reject(flow, status, reason, retry, now, &out.Engine); err != nil && c.logs(slog.LevelDebug) {
		c.log(out, slog.LevelDebug, "rejected request already gone", "flow", flow, "err", err)
	}
}

// abort resets a flow on both sides. A flow the engine no longer holds
// needs nothing more.
func (c *Controller) abort(flow splice.FlowID, now splice.Time, out *Output) {
	if err := c.eng.Abort(flow, now, &out.Engine); err != nil && c.logs(slog.LevelDebug) {
		c.log(out, slog.LevelDebug, "abort of a flow already gone", "flow", flow, "err", err)
	}
}

// expire answers requests that waited past their queue's timeout.
func (c *Controller) expire(now splice.Time, out *Output) {
	timedOut := func(r sched.Request) { c.timedOut(r, now, out) }
	for _, q := range c.queues {
		if q.hasHead && q.timeout > 0 && now.Sub(splice.Time(q.head.Arrival)) > q.timeout {
			// The oldest: the policy handed it out first, and charged it.
			q.hasHead = false
			c.refund(q.head.Customer, q.credit)
			timedOut(q.head)
		}
		if q.feedback != nil {
			c.feedbackExpire(q, now, out)
		} else if e, ok := q.policy.(expirer); ok {
			e.Expire(int64(now), timedOut)
		}
	}
}

func (c *Controller) timedOut(r sched.Request, now splice.Time, out *Output) {
	flow := splice.FlowID(r.ID)
	rec := c.flows[flow]
	if rec == nil || rec.waiting != waitQueued {
		c.stats(r.Customer).abandoned++ // its client left while it waited
		return
	}
	rec.waiting = notWaiting
	c.reject(flow, rec.followUp, r.Customer, "queue-timeout", 503, now, out)
}

// dispatch hands queued requests to back-ends while some have room,
// taking the policies in turn.
func (c *Controller) dispatch(now splice.Time, out *Output) {
	for progress := true; progress; {
		progress = false
		for _, q := range c.queues {
			if c.dispatchOne(q, now, out) {
				progress = true
			}
		}
	}
}

// dispatchOne moves the head of q on, if it can; it reports whether a
// request left the queue.
func (c *Controller) dispatchOne(q *queueSet, now splice.Time, out *Output) bool {
	if !q.hasHead {
		if !c.mayDispatch(q) {
			return false
		}
		r, ok := q.policy.Next(int64(now))
		if !ok {
			return false
		}
		if q.feedback != nil {
			c.feedbackDispatched(r)
		}
		q.head, q.hasHead = r, true
	}
	r := q.head
	flow := splice.FlowID(r.ID)
	rec := c.flows[flow]
	if rec == nil || rec.waiting != waitQueued {
		q.hasHead = false
		c.abandon(r, q.credit, "client left while queued", out)
		return true
	}
	if rec.followUp {
		q.hasHead = false
		rec.waiting = notWaiting
		if c.hasRoom(rec.be) {
			c.admit(rec, r, q.credit, now, out)
		} else {
			rec.waiting = waitParked
			rec.be.parked = append(rec.be.parked, parkedReq{flow: flow, req: r, credited: q.credit})
		}
		return true
	}
	id, ok := c.disp.Pick(r.Port)
	if !ok {
		return false
	}
	q.hasHead = false
	rec.waiting = notWaiting
	be := c.backends[uint32(id)]
	r.Tree = c.rewriteForTree(flow, r, out)
	dest := splice.Backend{ID: be.id, IP: be.ip, MAC: be.mac, Port: r.Port}
	var err error
	if c.goesEarly(rec, be) {
		// The Splice may carry the request (sendSplice sends it early):
		// its slot is spoken for from now.
		rec.promised = true
		be.promised++
		err = c.eng.DispatchCarrying(flow, dest, now, &out.Engine)
	} else {
		err = c.eng.Dispatch(flow, dest, now, &out.Engine)
	}
	if err != nil {
		c.unpromise(rec, be)
		c.abandon(r, q.credit, err.Error(), out)
		if !errors.Is(err, splice.ErrNoFlow) && !errors.Is(err, splice.ErrFlowState) {
			// The flow still waits, but cannot be handed off (no free
			// handoff port): better a 503 now than the idle timeout.
			c.reject(flow, false, r.Customer, "dispatch-failed", 503, now, out)
		}
		return true
	}
	rec.be = be
	c.tlSet(rec, timeline.Admitted, now)
	be.dispatched++
	c.startServing(rec, r, q.credit, now)
	return true
}

// mayDispatch: some live back-end has room for a request on one of q's
// ports. Checked before Next, so that the scheduler decides as late as
// it can: a request taken out early is ordered, and charged, before it
// can run. A follow-up waits for the same room, since it takes a place on
// its back-end as a new request would.
func (c *Controller) mayDispatch(q *queueSet) bool {
	for _, p := range q.ports {
		if _, ok := c.disp.Pick(p); ok {
			return true
		}
	}
	return false
}

// abandon drops a request the scheduler released that cannot run: its
// charge, if any, goes back.
func (c *Controller) abandon(r sched.Request, credited bool, why string, out *Output) {
	c.stats(r.Customer).abandoned++
	c.refund(r.Customer, credited)
	if c.logs(slog.LevelDebug) {
		c.log(out, slog.LevelDebug, "request dropped", "flow", r.ID, "customer", r.Customer, "why", why)
	}
}

// typicalService is what a request costing exactly one credit takes.
func (c *Controller) typicalService() time.Duration {
	if t := c.cfg.Credit.TypicalService; t > 0 {
		return t
	}
	return sched.DefaultTypicalService
}

// refund gives back a credit request's charge.
func (c *Controller) refund(customer string, credited bool) {
	if !credited || c.credit == nil {
		return
	}
	c.credit.Refund(customer)
	c.stats(customer).refunded++
	c.refunds++
}

// admit lets a follow-up request through to its connection's back-end.
func (c *Controller) admit(rec *flowRec, r sched.Request, credited bool, now splice.Time, out *Output) {
	r.Tree = c.rewriteForTree(rec.id, r, out)
	if err := c.eng.Admit(rec.id, now, &out.Engine); err != nil {
		c.abandon(r, credited, err.Error(), out)
		return
	}
	rec.be.followUps++
	c.startServing(rec, r, credited, now)
	c.markSent(rec, now) // Admit sent it
	c.tlAdmitted(rec, now)
}

func (c *Controller) startServing(rec *flowRec, r sched.Request, credited bool, now splice.Time) {
	rec.serving = append(rec.serving, servingReq{customer: r.Customer, credited: credited, tree: r.Tree,
		arrival: splice.Time(r.Arrival), dispatched: now})
	c.disp.Start(sched.BackendID(rec.be.id))
	cs := c.stats(r.Customer)
	cs.admitted++
	cs.wait.Observe(now.Sub(splice.Time(r.Arrival)))
}

// markSent records that rec's oldest unsent request went to its back-end:
// it holds a slot from now on.
func (c *Controller) markSent(rec *flowRec, now splice.Time) {
	for i := range rec.serving {
		if s := &rec.serving[i]; !s.sent {
			s.sent, s.sentAt = true, now
			rec.be.sent++
			c.slotStart(now)
			return
		}
	}
}

// release accounts for r leaving back-end be (served, refunded, closed
// or reconciled away).
func (c *Controller) release(be *backend, r servingReq, now splice.Time) {
	c.disp.Done(sched.BackendID(be.id))
	if r.sent {
		c.slotDone(now)
		be.sent = max(be.sent-1, 0)
	}
}

// served frees the slot of the oldest request on rec, which its back-end
// reported served in service, correcting the customer's charge.
func (c *Controller) served(rec *flowRec, service time.Duration, now splice.Time, out *Output) {
	if rec == nil || len(rec.serving) == 0 {
		return // already released: closed or reconciled
	}
	r := popFront(&rec.serving)
	c.chargeServed(r, service)
	be := rec.be
	if r.sent {
		slot := now.Sub(r.sentAt)
		be.slotsTimed++
		be.slotTotal += slot
		be.slotTimes.Observe(slot)
		be.slotExcess += slot - service
	}
	c.release(be, r, now)
	c.fillSlots(be, now, out)
	c.dispatch(now, out)
}

// chargeServed charges r's customer what r cost its back-end (service,
// as measured there) and counts it served: on its Feedback, before the
// close (served) or after it (lateFeedback).
func (c *Controller) chargeServed(r servingReq, service time.Duration) {
	if r.credited && c.credit != nil {
		c.credit.Complete(r.customer, service)
	}
	cs := c.stats(r.customer)
	cs.served++
	cs.response.Observe(r.dispatched.Sub(r.arrival) + service)
}

// closed forgets a flow the engine closed, undoing everything the
// controller holds for it. A request that never reached its back-end is
// refunded; one that did, and whose Feedback did not come first, waits
// for it a while (latefeedback.go), then is charged as one normal
// request.
func (c *Controller) closed(ev splice.Event, now splice.Time, out *Output) {
	rec := c.flows[ev.Flow]
	if c.logs(slog.LevelDebug) {
		c.log(out, slog.LevelDebug, "closed", "flow", ev.Flow, "reason", ev.Reason.String(), "backend", ev.Backend)
	}
	if rec == nil {
		return // never queued, or a second report (a failed handoff, then the answer)
	}
	delete(c.flows, ev.Flow)
	c.shrinkFlows()
	be := rec.be
	if be == nil {
		c.tlClosed(rec, ev, out)
		c.keepRec(rec)
		return // its request, if queued, is dropped when it comes out
	}
	c.unpromise(rec, be)
	be.closed++
	be.forwardedBytes += ev.Bytes
	if rec.waiting == waitParked {
		i := slices.IndexFunc(be.parked, func(p parkedReq) bool { return p.flow == rec.id })
		c.refund(be.parked[i].req.Customer, be.parked[i].credited)
		be.parked = slices.Delete(be.parked, i, i+1)
	}
	if rec.ready {
		be.ready = slices.DeleteFunc(be.ready, func(r readyConn) bool { return r.flow == rec.id })
	}
	// Requests that reached the back-end stay on the record, unreported,
	// for a Feedback that may still come (latefeedback.go); their slots
	// are free now.
	unreported := 0
	for _, r := range rec.serving {
		if r.sent {
			rec.serving[unreported] = r
			unreported++
		} else {
			c.refund(r.customer, r.credited)
		}
		c.release(be, r, now)
	}
	rec.serving = rec.serving[:unreported]
	c.fillSlots(be, now, out)
	c.dispatch(now, out)
	if unreported > 0 {
		c.awaitLateFeedback(rec, ev, now, out)
		return
	}
	c.tlClosed(rec, ev, out)
	c.keepRec(rec)
}

// Spare flow records: a connection per request would otherwise allocate
// one (and its serving list) each time. A record comes back seconds after
// it was taken (when the engine reports the flow closed, after its
// linger), so the spares follow the load: as many as the flows tracked,
// at least minSpareRecs and at most maxSpareRecs.
const (
	minSpareRecs = 256
	maxSpareRecs = 16384
)

// newRec returns an empty record for flow id, a spare one if any.
func (c *Controller) newRec(id splice.FlowID) *flowRec {
	n := len(c.spareRecs)
	if n == 0 {
		return &flowRec{id: id}
	}
	rec := c.spareRecs[n-1]
	c.spareRecs[n-1] = nil
	c.spareRecs = c.spareRecs[:n-1]
	rec.id = id
	return rec
}

// keepRec keeps the record of a flow that is gone for a later one.
// Nothing may refer to it any more: c.flows no longer does, and every
// other structure names flows by id.
func (c *Controller) keepRec(rec *flowRec) {
	clear(rec.serving)
	*rec = flowRec{serving: rec.serving[:0], tl: flowTimeline{follow: rec.tl.follow[:0]}}
	lim := min(maxSpareRecs, max(minSpareRecs, len(c.flows)))
	if len(c.spareRecs) < lim {
		c.spareRecs = append(c.spareRecs, rec)
	}
	if len(c.spareRecs) > 2*lim { // the flows went down: so do the spares
		c.spareRecs = append([]*flowRec(nil), c.spareRecs[:lim]...)
	}
}

// A map's buckets are never freed by deleting: after a flood of requests
// the flow table is rebuilt for what is left once that is less than
// 1/shrinkSlack of its peak (and the peak was at least shrinkMinPeak),
// at an amortised O(1) per close.
const (
	shrinkMinPeak = 4096
	shrinkSlack   = 8
)

// shrinkFlows rebuilds c.flows smaller after a peak.
func (c *Controller) shrinkFlows() {
	if c.flowsPeak < shrinkMinPeak || len(c.flows) >= c.flowsPeak/shrinkSlack {
		return
	}
	m := make(map[splice.FlowID]*flowRec, len(c.flows))
	for id, rec := range c.flows {
		m[id] = rec
	}
	c.flows, c.flowsPeak = m, len(m)
}

// safeMethod reports whether a request with this method changes nothing
// on the server (RFC 9110 section 9.2.1): one the controller may send
// before its Splice is confirmed, since should the shim refuse the
// Splice the client's connection is reset after the server saw the
// request, and a client may only retry what is safe to repeat (the rule
// TLS 1.3 applies to early data).
func safeMethod(m string) bool {
	switch m {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		return true
	}
	return false
}
