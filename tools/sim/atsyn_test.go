package sim_test

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/tools/sim"
)

const atSYNService = 20 * time.Millisecond

// unloadedHandoff runs one customer far below capacity with steady
// arrivals and constant service, so that nothing ever waits: every
// request's response time is its handoff plus the service time. It
// returns that handoff (dispatch to the request sent, which is the
// arrival to it too), failing unless every request saw the same one.
func unloadedHandoff(t *testing.T, handoff, control time.Duration, classic, early bool) time.Duration {
	t.Helper()
	return unloadedHandoffFO(t, handoff, control, classic, early, false)
}

func unloadedHandoffFO(t *testing.T, handoff, control time.Duration, classic, early, fastOpen bool) time.Duration {
	t.Helper()
	res := run(t, sim.Config{Seed: 7, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond, Backends: 2, Capacity: 4,
		Customers:    []sim.Customer{{Name: "a", Rate: 50, Arrivals: sim.Steady, Service: atSYNService, Distribution: sim.Constant}},
		Scheduler:    controller.Config{QueueCapacity: 100, EarlyRequest: early},
		HandoffDelay: handoff, ControlDelay: control, ClassicSplice: classic, FastOpen: fastOpen})
	return sameHandoff(t, res)
}

// sameHandoff returns the one handoff time (dispatch, which is arrival
// in these runs, to the request sent) every request of res saw, failing
// if they differ or something was refused.
func sameHandoff(t *testing.T, res sim.Result) time.Duration {
	t.Helper()
	c := res.Customers[0]
	if c.Served < 120 || c.Rejected.Total() > 0 {
		t.Fatalf("served %d, refused %+v: want about 125 served, none refused", c.Served, c.Rejected)
	}
	if c.P50 != c.P99 || c.MeanResponse != c.P50 {
		t.Fatalf("response times vary (mean %v p50 %v p99 %v): something waited, or the handoffs differed", c.MeanResponse, c.P50, c.P99)
	}
	return c.P50 - atSYNService
}

// With the Splice sent with the SYN its round trip to the shim overlaps
// the handshake: from dispatch to the request going out takes the longer
// of the two, HandoffDelay or 2 x ControlDelay, where the classic order
// adds them. The saving is the shorter of the two.
func TestSpliceWithSYNSavesTheOverlapOfHandshakeAndRoundTrip(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct{ handoff, control time.Duration }{
		{4 * ms, 500 * time.Microsecond}, // a LAN: the round trip hides in the handshake
		{ms, 2 * ms},                     // a slow control path
		{2 * ms, ms},                     // both the same
		{0, ms},                          // a handshake at once
		{3 * ms, 0},                      // control at once
	} {
		classic := unloadedHandoff(t, tc.handoff, tc.control, true, false)
		atSYN := unloadedHandoff(t, tc.handoff, tc.control, false, false)
		if want := tc.handoff + 2*tc.control; classic != want {
			t.Errorf("handoff %v, control %v: classic order takes %v from dispatch to the request, want %v",
				tc.handoff, tc.control, classic, want)
		}
		if saved, want := classic-atSYN, min(tc.handoff, 2*tc.control); saved != want {
			t.Errorf("handoff %v, control %v: the Splice with the SYN saves %v (%v -> %v), want min(handoff, 2 x control) = %v",
				tc.handoff, tc.control, saved, classic, atSYN, want)
		}
	}
}

// The shim acknowledges a Splice sent with the SYN when it has both the
// Splice and the back-end's SYN-ACK, so the request waits for whichever
// reaches the front-end last: the SpliceAck after the control round trip
// when that is longer than the handshake, else the SYN-ACK, with which
// the SpliceAck then arrives.
func TestSpliceWithSYNWaitsForTheLongerOfRoundTripAndHandshake(t *testing.T) {
	ms := time.Millisecond
	if got, want := unloadedHandoff(t, ms, 3*ms, false, false), 6*ms; got != want {
		t.Errorf("a 1 ms handshake and 3 ms control trips: the request went %v after dispatch, want the round trip %v", got, want)
	}
	if got, want := unloadedHandoff(t, 5*ms, ms, false, false), 5*ms; got != want {
		t.Errorf("a 5 ms handshake and 1 ms control trips: the request went %v after dispatch, want the handshake %v", got, want)
	}
}

// An early request (controller.Config.EarlyRequest) goes with the Splice
// sent with the SYN, which carries it: the shim sends it when it has both
// the Splice (a trip after dispatch) and the back-end's SYN-ACK (a trip
// before that reaches the front-end), at max(c, H - c), whatever the
// front-end hears when.
func TestEarlyRequestWithTheSpliceAtSYNGoesFromTheShim(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct{ handoff, control time.Duration }{{4 * ms, ms}, {ms, 3 * ms}, {2 * ms, ms}} {
		want := max(tc.control, tc.handoff-tc.control)
		if got := unloadedHandoff(t, tc.handoff, tc.control, false, true); got != want {
			t.Errorf("handoff %v, control %v: an early request went %v after dispatch, want max(control, handoff - control) = %v",
				tc.handoff, tc.control, got, want)
		}
	}
}

// With Fast Open the carried request goes in the SYN: it reaches the
// back-end as the Splice reaches the shim, one control trip after
// dispatch, however long the handshake takes.
func TestCarriedRequestInTheSYNGoesOneTripAfterDispatch(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct{ handoff, control time.Duration }{{4 * ms, ms}, {ms, 3 * ms}, {2 * ms, ms}} {
		if got := unloadedHandoffFO(t, tc.handoff, tc.control, false, true, true); got != tc.control {
			t.Errorf("handoff %v, control %v: a request in the SYN went %v after dispatch, want the control trip %v",
				tc.handoff, tc.control, got, tc.control)
		}
	}
}
