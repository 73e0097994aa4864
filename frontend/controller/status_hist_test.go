package controller

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/sched"
)

// bucketOf is the index of the histogram bucket holding exactly one
// value, -1 if h holds none or several.
func bucketOf(h *Histogram) int {
	at := -1
	for i, n := range h.Counts {
		if n > 1 || (n == 1 && at >= 0) {
			return -1
		}
		if n == 1 {
			at = i
		}
	}
	return at
}

// The handoff, slot and service times of each back-end reach the status
// as histograms (issue 12: /metrics had means only), and the service
// times as their exact sum, not mean x served.
func TestBackendTimesAsHistograms(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.method = "POST" // its request goes at the ack
	h.register(1, 1, 7, t0)
	h.request(1, "A.example", t0+ms)
	h.connected(1, t0+2*ms)
	h.spliceAck(1, t0+3*ms)                      // handoff: dispatch at +1 ms to the ack, 2 ms
	h.feedback(1, 20*time.Millisecond, t0+25*ms) // slot: C2 at +3 ms to +25 ms, 22 ms
	b := h.backend(1)
	for _, c := range []struct {
		name   string
		h      *Histogram
		bucket int // index into HistogramBounds
		sum    float64
	}{
		{"handoff", &b.Handoff, 1, 0.002}, // le 0.002
		{"slot", &b.Slot, 5, 0.022},       // le 0.05
		{"service", &b.Service, 4, 0.02},  // le 0.02
	} {
		if got := bucketOf(c.h); got != c.bucket || c.h.N != 1 || c.h.Sum < c.sum-1e-9 || c.h.Sum > c.sum+1e-9 {
			t.Errorf("%s histogram %+v: want one value in bucket %d (le %g), sum %g", c.name, *c.h, c.bucket,
				HistogramBounds[c.bucket], c.sum)
		}
	}
	if b.ServiceSeconds != 0.02 {
		t.Errorf("service seconds %g, want 0.02", b.ServiceSeconds)
	}
}
