package controller

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// Reload changes customers, caps and the handoffs ahead live; a
// configuration the scheduler refuses changes nothing; what needs a
// restart is logged and kept.
func TestReload(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	h := newHarness(t, cfg)
	h.register(1, 4, 1, t0)
	for f := splice.FlowID(1); f <= 3; f++ {
		h.request(f, "A.example", t0)
	}
	h.wantCalls("dispatch 1 b1", "dispatch 2 b1", "dispatch 3 b1")

	// A lower concurrency cap holds new requests back.
	next := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 200}, sched.CustomerSpec{Name: "B", Reservation: 50})
	next.ConcurrencyCap = 2
	h.out.Reset()
	if err := h.c.Reload(next, t0+sec, &h.out); err != nil {
		t.Fatal(err)
	}
	if len(h.out.Logs) != 0 {
		t.Errorf("live changes logged %v", h.out.Logs)
	}
	h.request(4, "B.example", t0+sec)
	h.wantCalls()
	if a, b := h.customer("A", t0+sec), h.customer("B", t0+sec); a.Reservation != 200 || b.Reservation != 50 || b.Queued != 1 {
		t.Fatalf("after the reload: A %+v, B %+v", a, b)
	}
	// Handoffs ahead let it go at once.
	next.HandoffAhead = 2
	h.out.Reset()
	if err := h.c.Reload(next, t0+2*sec, &h.out); err != nil {
		t.Fatal(err)
	}
	h.wantCalls("dispatch 4 b1")

	// Refused: nothing changes.
	bad := next
	bad.Credit.Customers = []sched.CustomerSpec{{Name: "A", Reservation: -1}}
	h.out.Reset()
	if err := h.c.Reload(bad, t0+3*sec, &h.out); err == nil {
		t.Fatal("a negative reservation was accepted")
	}
	if a := h.customer("A", t0+3*sec); a.Reservation != 200 {
		t.Errorf("refused reload changed A: %+v", a)
	}
	// Listener and timing changes need a restart.
	restart := next
	restart.Listeners = []Listener{{Port: 80, Policy: "fifo"}}
	restart.SlotWait = time.Minute
	h.out.Reset()
	if err := h.c.Reload(restart, t0+4*sec, &h.out); err != nil {
		t.Fatal(err)
	}
	if !hasLog(&h.out, "listener policies") || !hasLog(&h.out, "slot wait") {
		t.Errorf("restart-only changes not reported: %v", h.out.Logs)
	}
	if h.c.cfg.SlotWait != 5*time.Second || h.c.byPort[80].name != "credit" {
		t.Errorf("restart-only changes applied: slot wait %v, port 80 %s", h.c.cfg.SlotWait, h.c.byPort[80].name)
	}
	// The queue timeout is live too, for the queue's head as well.
	next.Credit.QueueTimeout = 50 * time.Millisecond
	h.out.Reset()
	if err := h.c.Reload(next, t0+5*sec, &h.out); err != nil {
		t.Fatal(err)
	}
	if q := h.c.byPort[80]; q.timeout != 50*time.Millisecond {
		t.Errorf("credit head timeout %v after the reload", q.timeout)
	}
}
