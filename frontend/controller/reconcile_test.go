package controller

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// Three requests counted in service on a back-end whose shim reports
// one, and a young one. Young requests are never touched; old excess ones
// are released only after the reports have said so for several keepalives
// in a row, oldest first.
func TestReconcileReleasesSlotsTheBackendNoLongerServes(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	cfg.KeepaliveInterval = time.Hour
	h := newHarness(t, cfg)
	h.register(1, 5, 1, t0)
	start := t0 + 10*sec
	for i, age := range []time.Duration{10 * time.Second, 8 * time.Second, 6 * time.Second, time.Second} {
		at := start.Add(-age)
		flow := splice.FlowID(i + 1)
		h.request(flow, "A.example", at)
		h.spliced(flow, at)
	}
	if got := h.backend(1).Active; got != 4 {
		t.Fatalf("Active = %d", got)
	}
	keepalive := func() *Output {
		return h.control(&proto.Keepalive{BackendID: 1, Incarnation: 1, Concurrency: 1}, start)
	}
	// The shim reports 1 in service: of the three old requests, two are
	// not being served any more. Nothing happens before the third report.
	for round := 1; round < reconcileRounds; round++ {
		keepalive()
		if got := h.backend(1).Active; got != 4 {
			t.Fatalf("released slots after %d report(s): Active = %d", round, got)
		}
	}
	out := keepalive()
	if b := h.backend(1); b.Active != 2 || b.Reconciled != 2 || b.InService != 2 || !hasLog(out, "released back-end slots") {
		t.Fatalf("after %d reports: %+v; want 2 active, 2 reconciled", reconcileRounds, b)
	}
	if len(h.c.flows[1].serving) != 0 || len(h.c.flows[2].serving) != 0 || len(h.c.flows[4].serving) != 1 {
		t.Error("released other requests than the two oldest")
	}
	// A late Feedback for a released request changes nothing.
	h.feedback(1, 20*time.Millisecond, start)
	if got := h.backend(1).Active; got != 2 {
		t.Errorf("late Feedback: Active = %d", got)
	}
	// Agreement resets the count of rounds.
	keepalive()
	if be := h.c.backends[1]; be.overCount != 0 {
		t.Errorf("overCount %d after an agreeing report", be.overCount)
	}
}

// Feedback for a response larger than the normal-size range counts
// against the customer whose request it answered; one inside the range
// does not.
func TestResponsesOutsideTheNormalSizeAreCounted(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}, sched.CustomerSpec{Name: "B", Reservation: 100})
	cfg.NormalSize = NormalSize{Min: 0, Max: 16 << 10}
	h := newHarness(t, cfg)
	h.register(3, 5, 1, t0)
	h.request(1, "A.example", t0)
	h.request(2, "B.example", t0)
	h.spliced(1, t0)
	h.spliced(2, t0)
	h.control(&proto.Feedback{BackendID: 3, RequestID: 1, ServiceTime: 20 * time.Millisecond, ResponseBytes: 64 << 20}, t0+sec)
	h.control(&proto.Feedback{BackendID: 3, RequestID: 2, ServiceTime: 20 * time.Millisecond, ResponseBytes: 1 << 10}, t0+sec)
	if a, b := h.customer("A", t0+sec).OutsideNormal, h.customer("B", t0+sec).OutsideNormal; a != 1 || b != 0 {
		t.Fatalf("outside normal size: A %d, B %d; want 1 and 0", a, b)
	}
	if got := h.backend(3).Active; got != 0 {
		t.Errorf("Active = %d after both Feedbacks", got)
	}
}
