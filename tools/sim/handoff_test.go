package sim_test

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/tools/sim"
)

// A handoff that takes 5 ms (4 ms to connect, the Splice round trip
// after it: the classic order) inside a 20 ms request's slot leaves the
// server idle a fifth of the time; set up ahead of the slot (as the
// daemon does with handoff_ahead) only the Feedback's trip back to the
// front-end is left, 0.5 ms of each 20.5 ms slot. The simulated cluster
// measures what the controller does with these delays. The requests are
// GETs: with EarlyRequest they go with their Splice
// (frontend/controller/slots.go), which takes the Splice's round trip out
// of a slot too, the rest of the handoff not. With the Splice sent with
// the SYN (the daemon's default) its round trip hides behind the 4 ms of
// the handshake already, and an early request, which the Splice then
// carries, takes the SYN-ACK's last trip out too.
func TestHandoffsAheadHideTheHandoffDelay(t *testing.T) {
	runWith := func(ahead int, early, classic bool) sim.Result {
		sc := controller.Config{QueueCapacity: 1000, HandoffAhead: ahead, EarlyRequest: early}
		return run(t, sim.Config{Seed: 4, Duration: 6 * time.Second, Warmup: time.Second, Backends: 2, Capacity: 4,
			Customers: []sim.Customer{{Name: "a", Rate: 600, Service: 20 * time.Millisecond, Distribution: sim.Constant}},
			Scheduler: sc, HandoffDelay: 4 * time.Millisecond, ControlDelay: 500 * time.Microsecond, ClassicSplice: classic})
	}
	inside, ahead := runWith(0, false, true), runWith(2, false, true)
	// Inside the slot: 20 ms of work per 25 ms of slot, 400 slot-s/s x 0.8.
	if u := inside.Utilization; u < 0.78 || u > 0.81 {
		t.Errorf("handoffs inside the slot: utilization %.3f, want 0.8", u)
	}
	if u := ahead.Utilization; u < 0.97 || u > 0.98 {
		t.Errorf("handoffs ahead: utilization %.3f, want 20/20.5", u)
	}
	if a, b := inside.Customers[0].ServedRate, ahead.Customers[0].ServedRate; b < 1.2*a {
		t.Errorf("served %.0f/s inside the slot and %.0f/s ahead, want a quarter more", a, b)
	}
	// Early requests inside the slot: 20 ms of work per 24.5 ms of slot
	// (the Splice's round trip of 1 ms gone: 4 ms to connect, the work,
	// the Feedback's 0.5 ms); ahead, nothing more to hide.
	early, earlyAhead := runWith(0, true, true), runWith(2, true, true)
	if u := early.Utilization; u < 0.805 || u > 0.825 || u <= inside.Utilization {
		t.Errorf("early requests inside the slot: utilization %.3f, want 20/24.5 (with the ack first %.3f)", u, inside.Utilization)
	}
	if u := earlyAhead.Utilization; u < 0.97 || u > 0.98 {
		t.Errorf("early requests, handoffs ahead: utilization %.3f, want 20/20.5", u)
	}
	// The Splice with the SYN: 20 ms of work per 24.5 ms of slot (4 ms
	// to connect, the round trip inside them). An early request then
	// travels in the Splice and the shim sends it as the SYN-ACK crosses
	// it, a trip before the SYN-ACK reaches the front-end: 20 per 24.
	atSYN, atSYNEarly := runWith(0, false, false), runWith(0, true, false)
	if u := atSYN.Utilization; u < 0.805 || u > 0.825 || u <= inside.Utilization {
		t.Errorf("the Splice with the SYN inside the slot: utilization %.3f, want 20/24.5 (the classic order %.3f)", u, inside.Utilization)
	}
	if u := atSYNEarly.Utilization; u < 0.826 || u > 0.84 {
		t.Errorf("early requests carried in the Splice inside the slot: utilization %.3f, want 20/24", u)
	}
}

// A lifo-pri listener classifies the simulated requests by path, as the
// front-end does: under overload the transaction class is served first.
func TestLifoPriListenerInTheSimulator(t *testing.T) {
	sc := controller.Config{Listeners: []controller.Listener{{Port: sim.Port, Policy: "lifo-pri"}},
		Lifo: controller.LifoConfig{Interval: 100 * time.Millisecond, QueueTimeout: time.Second}}
	res := run(t, sim.Config{Seed: 2, Duration: 6 * time.Second, Warmup: time.Second, Backends: 2, Capacity: 2,
		Customers: []sim.Customer{
			{Name: "browse", Rate: 300, Service: 20 * time.Millisecond, Path: "/browse"},
			{Name: "pay", Rate: 100, Service: 20 * time.Millisecond, Path: "/payment"},
		},
		Scheduler: sc})
	t.Log("\n" + table(res))
	browse, pay := res.Customers[0], res.Customers[1]
	if pay.ServedRate < 0.97*pay.OfferedRate || pay.Rejected.Total() > 0 {
		t.Errorf("payments served %.1f/s of %.1f/s, %d refused: transactions go first", pay.ServedRate, pay.OfferedRate, pay.Rejected.Total())
	}
	if browse.Rejected.QueueFull+browse.Rejected.Timeout == 0 {
		t.Errorf("browsing at 1.5x capacity was never refused: %+v", browse.Rejected)
	}
}
