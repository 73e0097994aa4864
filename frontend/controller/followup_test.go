package controller

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// A keep-alive follow-up is scheduled like a first request and admitted
// to its connection's back-end when a slot is free there.
func TestFollowUpAdmitted(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.register(1, 2, 1, t0)
	h.request(1, "A.example", t0)
	h.spliced(1, t0+ms)
	h.eng.takeCalls()
	h.followUp(1, "A.example", t0+2*ms)
	h.wantCalls("admit 1")
	if b := h.backend(1); b.FollowUps != 1 || b.InService != 2 || b.Active != 2 {
		t.Fatalf("after the follow-up: %+v", b)
	}
	// Responses come back in order: the first Feedback ends the first.
	h.feedback(1, 20*time.Millisecond, t0+30*ms)
	h.feedback(1, 20*time.Millisecond, t0+50*ms)
	if a, b := h.customer("A", t0+50*ms), h.backend(1); a.Admitted != 2 || a.Served != 2 || b.InService != 0 {
		t.Errorf("after both Feedbacks: customer %+v, back-end %+v", a, b)
	}
}

// A follow-up released by the scheduler while its own back-end is full
// (another one has room) is parked and admitted when a slot frees there.
func TestFollowUpParkedUntilASlotFrees(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.register(1, 1, 1, t0)
	h.register(2, 1, 1, t0)
	h.request(1, "A.example", t0)
	h.spliced(1, t0+ms)
	h.wantCalls("dispatch 1 b1", "splice-acked 1")
	h.followUp(1, "A.example", t0+2*ms)
	h.wantCalls()
	if b := h.backend(1); b.Parked != 1 {
		t.Fatalf("follow-up not parked: %+v", b)
	}
	h.feedback(1, 20*time.Millisecond, t0+25*ms)
	h.wantCalls("admit 1")
	if b := h.backend(1); b.Parked != 0 || b.InService != 1 {
		t.Fatalf("after the slot freed: %+v", b)
	}
	// Parked again; this time the client leaves: the parked follow-up is
	// refunded, the one in service is not (it reached the back-end).
	h.followUp(1, "A.example", t0+30*ms)
	h.wantCalls()
	h.closed(1, splice.CloseRST, t0+70*ms)
	h.wantCalls()
	if a, b := h.customer("A", t0+70*ms), h.backend(1); a.Refunded != 1 || b.Parked != 0 || b.Active != 0 {
		t.Errorf("after the client left: customer %+v, back-end %+v", a, b)
	}
}

// With every back-end full, a follow-up waits in its queue like a new
// request, and goes to its back-end when a slot frees.
func TestFollowUpWaitsForRoom(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.register(1, 1, 1, t0)
	h.request(1, "A.example", t0)
	h.spliced(1, t0+ms)
	h.eng.takeCalls()
	h.followUp(1, "A.example", t0+2*ms)
	h.wantCalls()
	if st := h.c.Status(t0 + 2*ms); st.Queue != 1 || st.Backends[0].Parked != 0 {
		t.Fatalf("queue %d, back-end %+v: want the follow-up queued", st.Queue, st.Backends[0])
	}
	h.feedback(1, 20*time.Millisecond, t0+25*ms)
	h.wantCalls("admit 1")
}

// A follow-up the scheduler refuses is answered in its stream; if the
// engine can no longer do that, the connection is reset.
func TestFollowUpRefused(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100},
		sched.CustomerSpec{Name: "B", Cap: 1}))
	h.register(1, 5, 1, t0)
	h.request(1, "B.example", t0)
	h.spliced(1, t0+ms)
	h.eng.takeCalls()
	h.followUp(1, "B.example", t0+2*ms) // over B's cap of 1 a second
	h.wantCalls("reject-follow-up 1 429")
	if f := h.eng.flows[1]; f.refused != 429 {
		t.Fatalf("follow-up refused with %d", f.refused)
	}
	h.request(2, "B.example", t0+2*sec)
	h.spliced(2, t0+2*sec)
	h.eng.takeCalls()
	h.eng.flows[2].waiting = true // seen by the engine...
	h.event(splice.Event{Kind: splice.EvRequest, Flow: 2, Backend: 1, FollowUp: true,
		Request: &splice.RequestInfo{Host: "B.example", Port: 80}}, t0+2*sec)
	h.wantCalls("reject-follow-up 2 429")
	h.eng.flows[2].waiting = true
	h.eng.flows[2].state = "answered" // ...but the connection moved on
	h.event(splice.Event{Kind: splice.EvRequest, Flow: 2, Backend: 1, FollowUp: true,
		Request: &splice.RequestInfo{Host: "B.example", Port: 80}}, t0+2*sec)
	h.wantCalls("reject-follow-up 2 429", "abort 2")
	if b := h.customer("B", t0+2*sec); b.Rejected["over-cap"] != 3 {
		t.Errorf("rejections %v", b.Rejected)
	}
}

// A follow-up that waits in the queue past the timeout is refused in its
// stream; one the engine no longer holds when admitted is refunded.
func TestFollowUpTimesOutOrVanishes(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	cfg.Credit.QueueTimeout = 100 * time.Millisecond
	h := newHarness(t, cfg)
	h.register(1, 1, 1, t0)
	h.request(1, "A.example", t0)
	h.spliced(1, t0)
	h.request(2, "A.example", t0) // waits for room
	h.eng.takeCalls()
	h.followUp(1, "A.example", t0+ms) // queued behind 2
	h.tick(t0 + 102*ms)
	h.wantCalls("reject 2 503", "reject-follow-up 1 503")
	// Admit fails: the client reset the connection meanwhile.
	h.eng.failAdmit = true
	h.feedback(1, 20*time.Millisecond, t0+110*ms)
	h.followUp(1, "A.example", t0+120*ms)
	h.wantCalls("admit 1")
	if a := h.customer("A", t0+120*ms); a.Abandoned != 1 || a.Refunded != 1 {
		t.Errorf("after a failed admit: %+v", a)
	}
}
