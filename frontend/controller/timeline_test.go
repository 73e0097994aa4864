package controller

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/timeline"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// TestTimelineRecordHasEveryStepAtItsExactTime feeds the controller one
// connection's events and messages at hand-picked times, a Splice resend
// included, and checks the record it emits when the connection closes:
// the engine's steps from EvClosed, the controller's own, and the shim's
// placed one estimated one-way delay (half the Splice round trip, from
// the Splice's last sending) after the request left.
func TestTimelineRecordHasEveryStepAtItsExactTime(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "a", Reservation: 100})
	cfg.Timelines = true
	cfg.SpliceRetry = 10 * time.Millisecond
	h := newHarness(t, cfg)
	h.register(1, 4, 1, t0)
	client := netip.MustParseAddrPort("198.18.0.10:40000")

	h.eng.flows[5] = &fakeFlow{state: "queued"}
	h.event(splice.Event{Kind: splice.EvRequest, Flow: 5,
		Request: &splice.RequestInfo{Method: "GET", Host: "a.example", Path: "/x", Port: 80, Client: client, HeadLen: 40}}, t0+3*ms)
	h.wantCalls("dispatch 5 b1")
	h.connected(5, t0+5*ms)
	h.tick(t0 + 15*ms) // the Splice again: the round trip counts from here
	h.spliceAck(5, t0+19*ms)
	h.wantCalls("splice-acked 5")
	h.control(&proto.Feedback{BackendID: 1, RequestID: h.c.requestID(5), ServiceTime: 30 * time.Millisecond,
		FirstByte: 10 * time.Millisecond, ResponseBytes: 5000}, t0+60*ms)
	if len(h.out.Timelines) != 0 {
		t.Fatalf("a timeline before the connection closed: %+v", h.out.Timelines)
	}
	var et splice.FlowTimeline
	et.At = [splice.NumFlowSteps]splice.Time{t0, t0 + 1*ms, t0 + 3*ms, t0 + 3*ms, t0 + 5*ms, t0 + 19*ms, t0 + 70*ms}
	et.Have, et.SYNs, et.RequestBytes = 1<<splice.NumFlowSteps-1, 2, 40
	et.C2SYNs, et.RequestResends = 3, 1
	et.Retx[0] = splice.RetxMark{At: t0 + 2*ms, Kind: splice.RetxClientData}
	et.Retx[1] = splice.RetxMark{At: t0 + 40*ms, Kind: splice.RetxClientSACK}
	et.NumRetx = 2
	h.eng.flows[5].state = "closed"
	out := h.event(splice.Event{Kind: splice.EvClosed, Flow: 5, Backend: 1, Reason: splice.CloseFIN, Bytes: 77, Timeline: et}, t0+1070*ms)
	if len(out.Timelines) != 1 {
		t.Fatalf("%d timelines at the close, want 1", len(out.Timelines))
	}
	r := out.Timelines[0]
	want := map[timeline.Step]splice.Time{
		timeline.SYN:          t0,
		timeline.CookieACK:    t0 + 1*ms,
		timeline.HeadComplete: t0 + 3*ms,
		timeline.Queued:       t0 + 3*ms,
		timeline.Admitted:     t0 + 3*ms,
		timeline.C2SYN:        t0 + 3*ms,
		timeline.C2SYNACK:     t0 + 5*ms,
		timeline.SpliceSent:   t0 + 5*ms,
		timeline.SpliceAck:    t0 + 19*ms,
		timeline.RequestSent:  t0 + 19*ms,
		timeline.FirstByte:    t0 + 19*ms + 2*ms + 10*ms, // one-way delay (19-15)/2
		timeline.LastByte:     t0 + 19*ms + 2*ms + 30*ms,
		timeline.Feedback:     t0 + 60*ms,
		timeline.Close:        t0 + 70*ms,
	}
	for s := range timeline.NumSteps {
		got, ok := r.Get(s)
		if !ok || splice.Time(got) != want[s] {
			t.Errorf("%v at %v (%v), want %v", s, time.Duration(got)-time.Duration(t0), ok, time.Duration(want[s]-t0))
		}
	}
	if r.Flow != 5 || r.Backend != 1 || r.Customer != "a" || r.Client != client || r.Path != "/x" || r.Method != "GET" ||
		r.Reason != "fin" || r.Requests != 1 || r.SYNs != 2 || r.HeadBytes != 40 || r.RequestBytes != 40 ||
		r.ResponseBytes != 5000 || r.ForwardedBytes != 77 || r.ShimUncertainty != 2*time.Millisecond ||
		r.C2SYNs != 3 || r.SpliceSends != 2 || r.RequestResends != 1 {
		t.Errorf("record %+v", r)
	}
	// The engine's retransmissions and the controller's Splice resend,
	// in time order.
	wantRetx := []timeline.Retx{{At: int64(t0 + 2*ms), Kind: "client_data"}, {At: int64(t0 + 15*ms), Kind: "splice"},
		{At: int64(t0 + 40*ms), Kind: "client_sack"}}
	if got := r.Retransmissions(); !slices.Equal(got, wantRetx) || r.NumRetx != 3 {
		t.Errorf("retransmissions %v (%d), want %v", got, r.NumRetx, wantRetx)
	}
	if err := r.CheckOrder(); err != nil {
		t.Error(err)
	}
}

// TestShimTimesFollowTheEnginesRequestSent: on a sharded front-end the
// flow's engine may stamp the request's sending later than the
// controller's clock when it handed the request over (the engine takes
// the later of the clock and its own last time); the shim's first and
// last byte, measured from the request's arrival, are then placed from
// the engine's stamp, never before it (seen in a 200-connection lab run:
// first_byte 0.3 ms before request_sent).
func TestShimTimesFollowTheEnginesRequestSent(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "a", Reservation: 100})
	cfg.Timelines = true
	h := newHarness(t, cfg)
	h.register(1, 4, 1, t0)
	h.eng.flows[5] = &fakeFlow{state: "queued"}
	h.event(splice.Event{Kind: splice.EvRequest, Flow: 5, Request: &splice.RequestInfo{Method: "GET", Host: "a.example",
		Path: "/x", Port: 80, Client: netip.MustParseAddrPort("198.18.0.10:40000"), HeadLen: 40}}, t0+3*ms)
	h.connected(5, t0+5*ms)
	h.spliceAck(5, t0+9*ms) // round trip 4 ms: one way 2 ms
	h.control(&proto.Feedback{BackendID: 1, RequestID: h.c.requestID(5), ServiceTime: 30 * time.Millisecond,
		FirstByte: 10 * time.Millisecond, ResponseBytes: 5000}, t0+60*ms)
	var et splice.FlowTimeline
	et.At[splice.StepRequestSent] = t0 + 9*ms + 300*splice.Time(time.Microsecond) // the engine ran 0.3 ms ahead
	et.At[splice.StepClose] = t0 + 70*ms
	et.Have = 1<<splice.StepRequestSent | 1<<splice.StepClose
	h.eng.flows[5].state = "closed"
	out := h.event(splice.Event{Kind: splice.EvClosed, Flow: 5, Backend: 1, Reason: splice.CloseFIN, Timeline: et}, t0+1070*ms)
	if len(out.Timelines) != 1 {
		t.Fatalf("%d timelines at the close, want 1", len(out.Timelines))
	}
	r := out.Timelines[0]
	sent := t0 + 9*ms + 300*splice.Time(time.Microsecond)
	for s, want := range map[timeline.Step]splice.Time{
		timeline.RequestSent: sent,
		timeline.FirstByte:   sent + 2*ms + 10*ms,
		timeline.LastByte:    sent + 2*ms + 30*ms,
	} {
		if got, ok := r.Get(s); !ok || splice.Time(got) != want {
			t.Errorf("%v at %v (%v), want %v", s, time.Duration(got)-time.Duration(t0), ok, time.Duration(want-t0))
		}
	}
	if err := r.CheckOrder(); err != nil {
		t.Error(err)
	}
}

// TestShimTimesEndByTheFeedback: the shim's times are an estimate (half
// the Splice round trip one way); when it puts the last byte after the
// Feedback that reported it, the interval moves back so that it ends
// there, its length kept (seen in a 200-connection lab run: a last byte
// 0.17 ms after the Feedback).
func TestShimTimesEndByTheFeedback(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "a", Reservation: 100})
	cfg.Timelines = true
	h := newHarness(t, cfg)
	h.register(1, 4, 1, t0)
	h.eng.flows[5] = &fakeFlow{state: "queued"}
	h.event(splice.Event{Kind: splice.EvRequest, Flow: 5, Request: &splice.RequestInfo{Method: "GET", Host: "a.example",
		Path: "/x", Port: 80, Client: netip.MustParseAddrPort("198.18.0.10:40000"), HeadLen: 40}}, t0+3*ms)
	h.connected(5, t0+5*ms)
	h.spliceAck(5, t0+9*ms) // round trip 4 ms: one way 2 ms, last byte estimated at 9+2+30 = 41 ms
	feedback := t0 + 40*ms + 500*splice.Time(time.Microsecond)
	h.control(&proto.Feedback{BackendID: 1, RequestID: h.c.requestID(5), ServiceTime: 30 * time.Millisecond,
		FirstByte: 10 * time.Millisecond, ResponseBytes: 5000}, feedback)
	var et splice.FlowTimeline
	et.At[splice.StepRequestSent], et.At[splice.StepClose] = t0+9*ms, t0+70*ms
	et.Have = 1<<splice.StepRequestSent | 1<<splice.StepClose
	h.eng.flows[5].state = "closed"
	out := h.event(splice.Event{Kind: splice.EvClosed, Flow: 5, Backend: 1, Reason: splice.CloseFIN, Timeline: et}, t0+1070*ms)
	if len(out.Timelines) != 1 {
		t.Fatalf("%d timelines at the close, want 1", len(out.Timelines))
	}
	r := out.Timelines[0]
	for s, want := range map[timeline.Step]splice.Time{
		timeline.FirstByte: feedback - 20*ms,
		timeline.LastByte:  feedback,
	} {
		if got, ok := r.Get(s); !ok || splice.Time(got) != want {
			t.Errorf("%v at %v (%v), want %v", s, time.Duration(got)-time.Duration(t0), ok, time.Duration(want-t0))
		}
	}
	if err := r.CheckOrder(); err != nil {
		t.Error(err)
	}
}

// TestTimelineOfAConnectionClosedBeforeItsFeedback: with the kernel's
// echoes the client can have its response and close before the shim has
// reported it, and the engine's close reach the controller before the
// Feedback (CI's lab timeline test saw a record without its response).
// The record waits for the Feedback and goes out with it, the response
// in it; a connection whose Feedback never comes gets its record when
// the wait ends.
func TestTimelineOfAConnectionClosedBeforeItsFeedback(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "a", Reservation: 100})
	cfg.Timelines = true
	h := newHarness(t, cfg)
	h.register(1, 4, 1, t0)
	for f := splice.FlowID(5); f <= 6; f++ {
		h.eng.flows[f] = &fakeFlow{state: "queued"}
		h.event(splice.Event{Kind: splice.EvRequest, Flow: f, Request: &splice.RequestInfo{Method: "GET", Host: "a.example",
			Path: "/x", Port: 80, Client: netip.MustParseAddrPort("198.18.0.10:40000"), HeadLen: 40}}, t0+3*ms)
		h.connected(f, t0+5*ms)
		h.spliceAck(f, t0+9*ms) // one way 2 ms: the request reached the shim at 11 ms
		var et splice.FlowTimeline
		et.At[splice.StepRequestSent], et.At[splice.StepClose] = t0+9*ms, t0+30*ms
		et.Have = 1<<splice.StepRequestSent | 1<<splice.StepClose
		h.eng.flows[f].state = "closed"
		if out := h.event(splice.Event{Kind: splice.EvClosed, Flow: f, Backend: 1, Reason: splice.CloseFIN, Timeline: et}, t0+30*ms); len(out.Timelines) != 0 {
			t.Fatalf("flow %d: a record at the close, before the Feedback: %+v", f, out.Timelines)
		}
	}
	out := h.control(&proto.Feedback{BackendID: 1, RequestID: h.c.requestID(5), ServiceTime: 15 * time.Millisecond,
		FirstByte: 10 * time.Millisecond, ResponseBytes: 5000}, t0+31*ms)
	if len(out.Timelines) != 1 {
		t.Fatalf("%d records with flow 5's late Feedback, want 1", len(out.Timelines))
	}
	r := out.Timelines[0]
	for s, want := range map[timeline.Step]splice.Time{
		timeline.FirstByte: t0 + 21*ms,
		timeline.LastByte:  t0 + 26*ms,
		timeline.Feedback:  t0 + 31*ms,
		timeline.Close:     t0 + 30*ms,
	} {
		if got, ok := r.Get(s); !ok || splice.Time(got) != want {
			t.Errorf("%v at %v (%v), want %v", s, time.Duration(got)-time.Duration(t0), ok, time.Duration(want-t0))
		}
	}
	if r.Flow != 5 || r.Reason != "fin" || r.ResponseBytes != 5000 {
		t.Errorf("flow %d, reason %q, %d response bytes; want 5, fin, 5000", r.Flow, r.Reason, r.ResponseBytes)
	}
	if err := r.CheckOrder(); err != nil {
		t.Error(err)
	}
	if out := h.tick(t0 + 30*ms + splice.Time(lateFeedbackWait) - 1); len(out.Timelines) != 0 {
		t.Fatalf("flow 6's record before its wait ended: %+v", out.Timelines)
	}
	out = h.tick(t0 + 30*ms + splice.Time(lateFeedbackWait))
	if len(out.Timelines) != 1 || out.Timelines[0].Flow != 6 {
		t.Fatalf("records at the wait's end %+v, want flow 6's", out.Timelines)
	}
	if _, ok := out.Timelines[0].Get(timeline.Feedback); ok {
		t.Errorf("flow 6 has a Feedback it never got")
	}
}

// TestTimelinesOffEmitsNothing: without Config.Timelines the controller
// keeps and emits no timeline.
func TestTimelinesOffEmitsNothing(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "a", Reservation: 100}))
	h.register(1, 4, 1, t0)
	h.request(5, "a.example", t0)
	h.spliced(5, t0+ms)
	if out := h.closed(5, splice.CloseFIN, t0+2*ms); len(out.Timelines) != 0 {
		t.Errorf("%d timelines with Timelines off", len(out.Timelines))
	}
}

// TestTimelinesAllocateNothingPerConnection is the connection-per-request
// cycle of alloc_test.go with timelines on in the engine (its SYN table)
// and the controller: still no allocation per connection, and the
// connections that end afterwards come out with records from the SYN to
// the close. (Their order is not checked: the fake shim claims a service
// time longer than the time it took to send its Feedback.)
func TestTimelinesAllocateNothingPerConnection(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 10000})
	cfg.Timelines = true
	ecfg := splice.FrontEndConfig{MAC: cycleFEMAC, VIPs: []netip.Addr{cycleVIP.Addr()}, Ports: []uint16{80},
		HandoffAddr: cycleHandoff.Addr(), Linger: 20 * time.Millisecond, Timelines: true}
	eng, err := splice.NewFrontEnd(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &cycleRig{t: t, eng: eng, now: t0}
	if r.ctrl, err = New(cfg, eng, r.now); err != nil {
		t.Fatal(err)
	}
	r.control(&proto.Register{BackendID: 1, IP: backendIP(1), MAC: [6]byte{2, 0, 0, 0, 0, 0x21},
		ControlPort: 7401, WebPorts: []uint16{80}, Capacity: 16, Incarnation: 1})
	for i := range 50 {
		r.cycle(i)
	}
	i := 50
	allocs := testing.AllocsPerRun(300, func() { r.cycle(i); i++ })
	if allocs != 0 {
		t.Errorf("%v allocations per connection with timelines on", allocs)
	}
	if r.failed != 0 {
		t.Fatalf("%d cycles failed", r.failed)
	}
	r.now += splice.Time(time.Second)
	r.out.Reset()
	r.timers()
	if len(r.out.Timelines) == 0 {
		t.Fatal("no timeline from the connections that ended")
	}
	for _, rec := range r.out.Timelines {
		for _, s := range []timeline.Step{timeline.SYN, timeline.SpliceAck, timeline.LastByte, timeline.Feedback, timeline.Close} {
			if _, ok := rec.Get(s); !ok {
				t.Errorf("flow %d: no %v step", rec.Flow, s)
			}
		}
	}
}

// TestTimelineOfAFollowUpRequest: a keep-alive follow-up gets a record of
// its own when its Feedback comes (request 2: head to feedback, the
// shim's times placed with the connection's Splice round trip), and the
// connection's record, at its close, counts every request.
func TestTimelineOfAFollowUpRequest(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "a", Reservation: 100})
	cfg.Timelines = true
	h := newHarness(t, cfg)
	h.register(1, 4, 1, t0)
	h.requestOn(5, 80, "a.example", "/first", t0)
	h.connected(5, t0+1*ms)
	h.spliceAck(5, t0+3*ms) // round trip 2 ms: one way 1 ms, uncertainty 1 ms
	h.eng.takeCalls()
	if out := h.feedback(5, 4*time.Millisecond, t0+9*ms); len(out.Timelines) != 0 {
		t.Fatalf("the first request's record before the close: %+v", out.Timelines)
	}
	f := h.eng.flows[5]
	f.waiting = true
	h.event(splice.Event{Kind: splice.EvRequest, Flow: 5, Backend: 1, FollowUp: true,
		Request: &splice.RequestInfo{Method: "GET", Host: "a.example", Path: "/second", Port: 80, HeadLen: 30}}, t0+20*ms)
	h.wantCalls("admit 5")
	out := h.control(&proto.Feedback{BackendID: 1, RequestID: h.c.requestID(5), ServiceTime: 7 * time.Millisecond,
		FirstByte: 5 * time.Millisecond, ResponseBytes: 900}, t0+30*ms)
	if len(out.Timelines) != 1 {
		t.Fatalf("%d records at the follow-up's Feedback, want 1", len(out.Timelines))
	}
	r := out.Timelines[0]
	want := map[timeline.Step]splice.Time{
		timeline.HeadComplete: t0 + 20*ms,
		timeline.Queued:       t0 + 20*ms,
		timeline.Admitted:     t0 + 20*ms,
		timeline.RequestSent:  t0 + 20*ms,
		timeline.FirstByte:    t0 + 20*ms + 1*ms + 5*ms,
		timeline.LastByte:     t0 + 20*ms + 1*ms + 7*ms,
		timeline.Feedback:     t0 + 30*ms,
	}
	for s := range timeline.NumSteps {
		got, ok := r.Get(s)
		if w, wanted := want[s]; ok != wanted || ok && splice.Time(got) != w {
			t.Errorf("%v at %v (%v), want %v (%v)", s, time.Duration(got)-time.Duration(t0), ok, time.Duration(w-t0), wanted)
		}
	}
	if r.Flow != 5 || r.Request != 2 || r.Path != "/second" || r.HeadBytes != 30 || r.ResponseBytes != 900 ||
		r.Backend != 1 || r.ShimUncertainty != time.Millisecond {
		t.Errorf("follow-up record %+v", r)
	}
	if err := r.CheckOrder(); err != nil {
		t.Error(err)
	}
	out = h.closed(5, splice.CloseFIN, t0+40*ms)
	if len(out.Timelines) != 1 || out.Timelines[0].Request != 1 || out.Timelines[0].Requests != 2 || out.Timelines[0].Path != "/first" {
		t.Fatalf("connection record %+v", out.Timelines)
	}
}
