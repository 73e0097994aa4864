package controller

import (
	"slices"
	"time"

	"github.com/qsplice/qsplice/frontend/timeline"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
)

// Handoff timelines (issue 11). With Config.Timelines the controller
// keeps, per connection, the times of the steps it sees itself (queued,
// admitted, Splice sent, SpliceAck, Feedback), places the shim's two
// (first and last response byte) on its own clock, adds the engine's
// steps from the connection's EvClosed, and puts the record in
// Output.Timelines when the connection ends. The package doc of
// frontend/timeline says what each step is and how the clocks relate.

// flowTimeline is what a flowRec holds for its timeline.
type flowTimeline struct {
	rec timeline.Record
	// spliceLast is the Splice's latest sending: the round trip to the
	// SpliceAck is measured from it (a resend's ack is the likelier).
	spliceLast splice.Time
	// reqSent is when the first request went on C2 (SpliceAcked), which
	// the shim's times are measured from, one one-way delay later.
	reqSent     splice.Time
	haveReqSent bool
	// oneWay is the estimated one-way delay to the shim: half the Splice
	// round trip.
	oneWay    time.Duration
	haveRTT   bool
	responded bool // the first Feedback was taken
	flushed   bool // its record went out at the stop (FlushTimelines)
	served    int  // follow-ups whose record went out
	// follow are the keep-alive follow-ups queued and not reported
	// served yet, oldest first.
	follow []followUpTimeline
}

// followUpTimeline is what a follow-up request's record needs until its
// Feedback comes. Its head was complete when the engine reported it,
// which the controller learns in the same pass: head_complete is the
// controller's time of the EvRequest, as queued is.
type followUpTimeline struct {
	method, path, customer string
	head                   int
	queued, admitted       splice.Time
	haveAdmitted           bool
}

// tlQueued notes a request the scheduler took: the first one's details
// and queueing time, and one more request on the connection.
func (c *Controller) tlQueued(rec *flowRec, ev splice.Event, cust string, now splice.Time) {
	if !c.cfg.Timelines {
		return
	}
	tl := &rec.tl.rec
	tl.Requests++
	if tl.Requests > 1 {
		// A follow-up: one waits at a time (the engine reports the next
		// only once this one is admitted or refused), so any not admitted
		// is one that was refused.
		ft := &rec.tl
		ft.follow = slices.DeleteFunc(ft.follow, func(f followUpTimeline) bool { return !f.haveAdmitted })
		f := followUpTimeline{customer: cust, queued: now}
		if r := ev.Request; r != nil {
			f.method, f.path, f.head = r.Method, r.Path, r.HeadLen
		}
		ft.follow = append(ft.follow, f)
		return
	}
	tl.Flow = uint64(ev.Flow)
	tl.Customer = cust
	if r := ev.Request; r != nil {
		tl.Client, tl.Port, tl.Method, tl.Path, tl.HeadBytes = r.Client, r.Port, r.Method, r.Path, r.HeadLen
	}
	tl.Set(timeline.Queued, int64(now))
}

// tlSet stamps a step the controller sees itself.
func (c *Controller) tlSet(rec *flowRec, s timeline.Step, now splice.Time) {
	if c.cfg.Timelines {
		rec.tl.rec.Set(s, int64(now))
	}
}

// tlSpliceSent notes a sending of the Splice (the first is the step).
func (c *Controller) tlSpliceSent(rec *flowRec, now splice.Time) {
	if c.cfg.Timelines {
		rec.tl.rec.Set(timeline.SpliceSent, int64(now))
		rec.tl.rec.SpliceSends++
		if rec.tl.rec.SpliceSends > 1 {
			rec.tl.rec.AddRetx("splice", int64(now))
		}
		rec.tl.spliceLast = now
	}
}

// tlSpliceAck stamps the SpliceAck and measures the round trip.
func (c *Controller) tlSpliceAck(rec *flowRec, now splice.Time) {
	if !c.cfg.Timelines || rec.tl.haveRTT {
		return
	}
	rtt := now.Sub(rec.tl.spliceLast)
	rec.tl.rec.Set(timeline.SpliceAck, int64(now))
	rec.tl.oneWay, rec.tl.haveRTT = rtt/2, true
	rec.tl.rec.ShimUncertainty = rtt - rtt/2 // the one-way delay is in [0, rtt]
}

// tlRequestSent notes when the first request went to the back-end.
func (c *Controller) tlRequestSent(rec *flowRec, now splice.Time) {
	if c.cfg.Timelines && !rec.tl.haveReqSent {
		rec.tl.reqSent, rec.tl.haveReqSent = now, true
	}
}

// tlAdmitted notes the admission of the waiting follow-up, which Admit
// sent at once.
func (c *Controller) tlAdmitted(rec *flowRec, now splice.Time) {
	if !c.cfg.Timelines {
		return
	}
	for i := range rec.tl.follow {
		if f := &rec.tl.follow[i]; !f.haveAdmitted {
			f.admitted, f.haveAdmitted = now, true
			return
		}
	}
}

// tlFeedback takes a Feedback: the first response's completes the
// connection's record (its arrival, its size, and the shim's times
// placed on our clock one estimated one-way delay after the request
// left); a follow-up's ends that request, whose record goes out now.
func (c *Controller) tlFeedback(rec *flowRec, m *proto.Feedback, now splice.Time, out *Output) {
	if !c.cfg.Timelines || rec == nil {
		return
	}
	ft := &rec.tl
	if ft.responded {
		c.tlFollowUpServed(rec, m, now, out)
		return
	}
	ft.responded = true
	ft.rec.Set(timeline.Feedback, int64(now))
	ft.rec.ResponseBytes = m.ResponseBytes
	if ft.haveReqSent {
		ft.placeShim(&ft.rec, ft.reqSent, m)
	}
}

// placeShim sets r's first and last response byte: the shim measured
// them from the request's arrival, one estimated one-way delay after it
// was sent.
func (ft *flowTimeline) placeShim(r *timeline.Record, sent splice.Time, m *proto.Feedback) {
	if !ft.haveRTT {
		return
	}
	arrival := sent.Add(ft.oneWay)
	if m.FirstByte > 0 {
		r.Set(timeline.FirstByte, int64(arrival.Add(m.FirstByte)))
	}
	r.Set(timeline.LastByte, int64(arrival.Add(m.ServiceTime)))
}

// tlFollowUpServed puts out the record of the oldest follow-up admitted
// on rec: the steps a request on a spliced connection has (no handshake,
// no C2, no Splice), numbered by its place on the connection.
func (c *Controller) tlFollowUpServed(rec *flowRec, m *proto.Feedback, now splice.Time, out *Output) {
	ft := &rec.tl
	i := slices.IndexFunc(ft.follow, func(f followUpTimeline) bool { return f.haveAdmitted })
	if i < 0 {
		return
	}
	f := ft.follow[i]
	ft.follow = slices.Delete(ft.follow, 0, i+1)
	ft.served++
	r := timeline.Record{
		Flow: uint64(rec.id), Client: ft.rec.Client, Port: ft.rec.Port, Customer: f.customer,
		Method: f.method, Path: f.path, Request: 1 + ft.served, HeadBytes: f.head,
		ResponseBytes: m.ResponseBytes, ShimUncertainty: ft.rec.ShimUncertainty,
	}
	if rec.be != nil {
		r.Backend = rec.be.id
	}
	r.Set(timeline.HeadComplete, int64(f.queued))
	r.Set(timeline.Queued, int64(f.queued))
	r.Set(timeline.Admitted, int64(f.admitted))
	r.Set(timeline.RequestSent, int64(f.admitted))
	ft.placeShim(&r, f.admitted, m)
	r.Set(timeline.Feedback, int64(now))
	out.Timelines = append(out.Timelines, r)
}

// tlClosed completes rec's timeline with the engine's steps and hands it
// out.
func (c *Controller) tlClosed(rec *flowRec, ev splice.Event, out *Output) {
	if !c.cfg.Timelines || rec.tl.flushed {
		return
	}
	out.Timelines = append(out.Timelines, c.tlRecord(rec, ev.Reason.String(), ev.Bytes, &ev.Timeline))
}

// tlRecord is rec's record: the controller's steps and the engine's et.
func (c *Controller) tlRecord(rec *flowRec, reason string, forwarded uint64, et *splice.FlowTimeline) timeline.Record {
	tl := rec.tl.rec
	if tl.Flow == 0 {
		tl.Flow = uint64(rec.id)
	}
	if rec.be != nil {
		tl.Backend = rec.be.id
	}
	tl.Request = 1
	tl.Reason = reason
	tl.ForwardedBytes = forwarded
	tl.SYNs, tl.C2SYNs, tl.RequestResends = int(et.SYNs), int(et.C2SYNs), int(et.RequestResends)
	tl.RequestBytes = uint64(et.RequestBytes)
	tl.Carried, tl.Reused = et.Carried, et.Reused
	for _, m := range et.Marks() {
		tl.AddRetx(m.Kind.String(), int64(m.At))
	}
	tl.NumRetx += int(et.NumRetx) - len(et.Marks()) // the engine's beyond those it kept
	for s, step := range engineSteps {
		if t, ok := et.Get(splice.FlowStep(s)); ok {
			tl.Set(step, int64(t))
		}
	}
	fitShimTimes(&tl, &rec.tl, et)
	return tl
}

// fitShimTimes keeps the shim's first and last byte, which placeShim
// estimated (from the controller's clock when it handed the request over
// and half the Splice round trip), inside what the record's own steps
// make possible: after the request left (the engine's RequestSent) and
// no later than the Feedback that reported them. On a sharded front-end
// a flow's engine can be ahead of the controller's clock (each takes the
// later of the clock and its own last time: frontend/shard.go), so the
// estimate first moves with the engine's stamp, the time the shim
// measured from; then the interval is pulled back before the Feedback if
// it passes it, and cut at both ends if the two do not leave it room.
func fitShimTimes(tl *timeline.Record, ft *flowTimeline, et *splice.FlowTimeline) {
	first, okFirst := tl.Get(timeline.FirstByte)
	last, okLast := tl.Get(timeline.LastByte)
	if !okLast {
		return
	}
	if !okFirst {
		first = last
	}
	if sent, ok := et.Get(splice.StepRequestSent); ok && ft.haveReqSent && sent > ft.reqSent {
		first, last = first+int64(sent-ft.reqSent), last+int64(sent-ft.reqSent)
	}
	if fb, ok := tl.Get(timeline.Feedback); ok && last > fb {
		first, last = first-(last-fb), fb
	}
	if sent, ok := tl.Get(timeline.RequestSent); ok && first < sent {
		first = min(sent, last)
	}
	tl.At[timeline.LastByte] = last
	if okFirst {
		tl.At[timeline.FirstByte] = first
	}
}

// engineSteps maps the engine's steps to the record's.
var engineSteps = [splice.NumFlowSteps]timeline.Step{
	splice.StepSYN:          timeline.SYN,
	splice.StepCookieACK:    timeline.CookieACK,
	splice.StepHeadComplete: timeline.HeadComplete,
	splice.StepC2SYN:        timeline.C2SYN,
	splice.StepC2SYNACK:     timeline.C2SYNACK,
	splice.StepRequestSent:  timeline.RequestSent,
	splice.StepClose:        timeline.Close,
}
