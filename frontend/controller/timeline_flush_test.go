package controller

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/timeline"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// liveEngine is the fake engine with LiveTimelines: what it saw so far of
// each flow not closed.
type liveEngine struct {
	*fakeEngine
	live map[splice.FlowID]splice.FlowTimeline
}

func (e *liveEngine) LiveTimeline(id splice.FlowID) (splice.FlowTimeline, uint64, bool) {
	tl, ok := e.live[id]
	return tl, 33, ok
}

// TestFlushTimelinesWritesTheConnectionsStillHeld: at the stop, every
// connection the controller still holds gets its record, in flow order,
// marked AtStop, with the engine's steps so far and the controller's;
// one closed and waiting for its request's Feedback (latefeedback.go)
// gets its closed record, one whose record went out at its close none,
// and one flushed writes no second record when it closes afterwards.
func TestFlushTimelinesWritesTheConnectionsStillHeld(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "a", Reservation: 100})
	cfg.Timelines = true
	eng := &liveEngine{fakeEngine: newFakeEngine(), live: map[splice.FlowID]splice.FlowTimeline{}}
	c, err := New(cfg, eng, t0)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, c: c, eng: eng.fakeEngine}
	h.register(1, 4, 1, t0)
	for f := splice.FlowID(5); f <= 7; f++ {
		h.request(f, "a.example", t0+ms*splice.Time(f))
		h.spliced(f, t0+10*ms)
		var et splice.FlowTimeline
		et.At[splice.StepSYN], et.At[splice.StepCookieACK] = t0, t0+ms
		et.Have = 1<<splice.StepSYN | 1<<splice.StepCookieACK
		eng.live[f] = et
	}
	h.control(&proto.Feedback{BackendID: 1, RequestID: h.c.requestID(6), ServiceTime: 5 * time.Millisecond, ResponseBytes: 100}, t0+20*ms)
	h.eng.flows[7].state = "closed"
	if out := h.event(splice.Event{Kind: splice.EvClosed, Flow: 7, Backend: 1, Reason: splice.CloseFIN, Timeline: eng.live[7]}, t0+30*ms); len(out.Timelines) != 0 {
		t.Fatalf("%d records at flow 7's close, before its request's Feedback", len(out.Timelines))
	}
	delete(eng.live, 7)
	// Flow 8 closes after its Feedback: its record goes out at the close.
	h.request(8, "a.example", t0+8*ms)
	h.spliced(8, t0+10*ms)
	h.control(&proto.Feedback{BackendID: 1, RequestID: h.c.requestID(8), ServiceTime: 5 * time.Millisecond, ResponseBytes: 100}, t0+20*ms)
	h.eng.flows[8].state = "closed"
	if out := h.event(splice.Event{Kind: splice.EvClosed, Flow: 8, Backend: 1, Reason: splice.CloseFIN}, t0+30*ms); len(out.Timelines) != 1 {
		t.Fatalf("%d records at flow 8's close, after its Feedback", len(out.Timelines))
	}

	h.out.Reset()
	h.c.FlushTimelines(t0+40*ms, &h.out)
	recs := h.out.Timelines
	if len(recs) != 3 || recs[0].Flow != 5 || recs[1].Flow != 6 || recs[2].Flow != 7 {
		t.Fatalf("flushed %+v, want flows 5, 6 and 7", recs)
	}
	if r := recs[2]; r.AtStop || r.Reason != "fin" {
		t.Errorf("flow 7, closed, flushed as at_stop %v, reason %q", r.AtStop, r.Reason)
	}
	recs = recs[:2]
	for _, r := range recs {
		if !r.AtStop || r.Reason != "" || r.Backend != 1 || r.ForwardedBytes != 33 || r.Request != 1 {
			t.Errorf("flow %d: at_stop %v, reason %q, back-end %d, forwarded %d, request %d", r.Flow, r.AtStop, r.Reason, r.Backend, r.ForwardedBytes, r.Request)
		}
		for _, s := range []timeline.Step{timeline.SYN, timeline.CookieACK, timeline.Queued, timeline.Admitted, timeline.SpliceSent, timeline.SpliceAck} {
			if _, ok := r.Get(s); !ok {
				t.Errorf("flow %d: no %v", r.Flow, s)
			}
		}
		if err := r.CheckOrder(); err != nil {
			t.Error(err)
		}
	}
	if _, ok := recs[1].Get(timeline.Feedback); !ok || recs[1].ResponseBytes != 100 {
		t.Errorf("flow 6 lacks its Feedback: %+v", recs[1])
	}
	h.eng.flows[5].state = "closed"
	if out := h.event(splice.Event{Kind: splice.EvClosed, Flow: 5, Backend: 1, Reason: splice.CloseFIN}, t0+50*ms); len(out.Timelines) != 0 {
		t.Errorf("a flushed connection wrote a second record at its close: %+v", out.Timelines)
	}
	h.out.Reset()
	if h.c.FlushTimelines(t0+60*ms, &h.out); len(h.out.Timelines) != 0 {
		t.Errorf("a second flush wrote %d records", len(h.out.Timelines))
	}
}
