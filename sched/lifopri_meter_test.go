package sched

import (
	"math"
	"testing"
	"time"
)

func wantUtilization(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-12 {
		t.Fatalf("%s: utilization %v, want %v", what, got, want)
	}
}

// Two back-ends x C = 2 is 4 slots; intervals of 100 ms give 400 slot-ms
// of capacity each.
func TestUtilizationMeterStartDone(t *testing.T) {
	m := NewUtilizationMeter(4, 0)
	m.Start(0)
	m.Start(0)
	m.Done(50 * ms)  // busy 50 ms
	m.Start(60 * ms) // busy 60..100 here, 100..130 in the next interval
	// 100 (still busy) + 50 + 40 = 190 of 400.
	wantUtilization(t, "first interval", m.Interval(100*ms), 190.0/400)
	if m.InUse() != 2 {
		t.Fatalf("InUse %d, want 2", m.InUse())
	}
	m.Done(130 * ms)
	m.Done(200 * ms)
	// 30 + 100 of 400.
	wantUtilization(t, "second interval", m.Interval(200*ms), 130.0/400)
	wantUtilization(t, "idle interval", m.Interval(300*ms), 0)
	m.Done(300 * ms) // unmatched: ignored
	for range 4 {
		m.Start(300 * ms)
	}
	wantUtilization(t, "every slot busy", m.Interval(400*ms), 1)
	wantUtilization(t, "zero-length interval", m.Interval(400*ms), 0)
}

// A back-end that joins halfway through an interval adds capacity only
// for the half it was there.
func TestUtilizationMeterSlotsChange(t *testing.T) {
	m := NewUtilizationMeter(2, 0)
	m.Start(0)
	m.Start(0)
	m.SetSlots(4, 50*ms)
	// Busy 2 x 100 = 200 slot-ms of 2 x 50 + 4 x 50 = 300.
	wantUtilization(t, "join", m.Interval(100*ms), 200.0/300)
	m.SetSlots(0, 100*ms)
	wantUtilization(t, "no capacity", m.Interval(200*ms), 0)
}

func TestUtilizationMeterBusyReports(t *testing.T) {
	m := NewUtilizationMeter(25, 0) // the published 5 back-ends x 5
	for range 100 {
		m.Busy(20 * time.Millisecond) // 100 requests of 20 ms in 100 ms
	}
	m.Busy(-time.Second) // ignored
	wantUtilization(t, "reported", m.Interval(100*ms), 2000.0/2500)
	wantUtilization(t, "reports are per interval", m.Interval(200*ms), 0)
}

// The meter drives the policy: a saturated interval turns browsing LIFO,
// a quiet one turns it back.
func TestUtilizationMeterDrivesLifoPri(t *testing.T) {
	p := newLifoPriT(t, LifoPriConfig{})
	m := NewUtilizationMeter(1, 0)
	m.Start(0)
	p.SetUtilization(m.Interval(100*ms), 100*ms)
	if !p.LIFO() {
		t.Fatal("a fully busy interval left browsing FIFO")
	}
	m.Done(180 * ms)
	p.SetUtilization(m.Interval(200*ms), 200*ms) // 0.8 < 0.85
	if p.LIFO() {
		t.Fatal("an 80% interval left browsing LIFO")
	}
}
