package frontend

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// TestReconcileReleasesSlotsTheBackendNoLongerServes: three requests
// counted in service on a back-end whose shim reports one. Young requests
// are never touched; old excess ones are released only after the report
// has said so for several keepalives in a row, oldest first.
func TestReconcileReleasesSlotsTheBackendNoLongerServes(t *testing.T) {
	d := newQueueDaemon(t, Config{Ports: []uint16{80}}, 0)
	bs := &backendState{id: 7, alive: true, capacity: 5}
	d.backends[7] = bs
	d.disp.AddBackend(7, 5, nil)
	start := splice.Time(100 * time.Second)
	for i, age := range []time.Duration{10 * time.Second, 8 * time.Second, 6 * time.Second, time.Second} {
		flow := splice.FlowID(i + 1)
		d.dispatched[flow] = 7
		d.startServing(flow, 7, sched.Request{Customer: "c", Arrival: int64(start.Add(-age))}, start.Add(-age))
		d.markSent(flow, bs, start.Add(-age))
	}
	if got := d.disp.Active(7); got != 4 {
		t.Fatalf("Active = %d", got)
	}
	// The shim reports 1 in service: of the three old requests, two are
	// not being served any more. Nothing happens before the third report.
	for round := 1; round < reconcileRounds; round++ {
		d.reconcile(bs, 1, start)
		if got := d.disp.Active(7); got != 4 {
			t.Fatalf("released slots after %d report(s): Active = %d", round, got)
		}
	}
	d.reconcile(bs, 1, start)
	if got := d.disp.Active(7); got != 2 || bs.reconciled != 2 {
		t.Fatalf("after %d reports: Active = %d, reconciled %d; want 2 and 2", reconcileRounds, got, bs.reconciled)
	}
	if _, ok := d.inService[1]; ok {
		t.Error("the oldest request is still counted")
	}
	if _, ok := d.inService[2]; ok {
		t.Error("the second oldest request is still counted")
	}
	if _, ok := d.inService[4]; !ok {
		t.Error("the young request was released")
	}
	// A late Feedback for a released request changes nothing.
	d.requestDone(1, false, 20*time.Millisecond, start)
	if got := d.disp.Active(7); got != 2 {
		t.Errorf("late Feedback: Active = %d", got)
	}
	// Agreement resets the count of rounds.
	d.reconcile(bs, 1, start)
	if bs.overCount != 0 {
		t.Errorf("overCount %d after an agreeing report", bs.overCount)
	}
}
