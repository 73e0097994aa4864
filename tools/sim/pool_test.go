package sim_test

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/tools/sim"
)

// pooledRun is the unloaded run of atsyn_test.go (steady arrivals far
// below capacity, constant service) with pooled handoff connections, the
// pool shaped by mod.
func pooledRun(t *testing.T, handoff, control time.Duration, early bool, mod func(*sim.Config)) sim.Result {
	t.Helper()
	cfg := sim.Config{Seed: 7, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond, Backends: 2, Capacity: 4,
		Customers:    []sim.Customer{{Name: "a", Rate: 50, Arrivals: sim.Steady, Service: atSYNService, Distribution: sim.Constant}},
		Scheduler:    controller.Config{QueueCapacity: 100, EarlyRequest: early},
		HandoffDelay: handoff, ControlDelay: control, PoolC2: true}
	if mod != nil {
		mod(&cfg)
	}
	return run(t, cfg)
}

// On a pooled C2 there is no handshake: from dispatch to the request
// going out is the Splice's round trip, whatever HandoffDelay, and
// nothing at all for an early request, which leaves with its Splice.
// Every request after the first to each back-end finds a pooled C2: the
// one before it ended 25 ms into the 40 ms between two requests to it.
func TestPooledC2TakesTheHandshakeOutOfTheHandoff(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct{ handoff, control time.Duration }{
		{4 * ms, 500 * time.Microsecond},
		{ms, 2 * ms},
		{3 * ms, 0},
	} {
		for _, early := range []bool{false, true} {
			res := pooledRun(t, tc.handoff, tc.control, early, nil)
			want := 2 * tc.control
			if early {
				want = 0
			}
			if got := sameHandoff(t, res); got != want {
				t.Errorf("handoff %v, control %v, early %v: %v from dispatch to the request on a pooled C2, want %v",
					tc.handoff, tc.control, early, got, want)
			}
			if h, served := res.Handoffs, res.Customers[0].Served; h.New != 0 || h.Reused < served {
				t.Errorf("handoff %v, control %v, early %v: %+v handoffs for %d served: want every one reused",
					tc.handoff, tc.control, early, h, served)
			}
		}
	}
}

// A C2 idle for PoolIdle is dropped: with 40 ms between two requests to a
// back-end and a pool that keeps a C2 for 5 ms, every handoff has its
// handshake again, timed as without a pool (the Splice with the SYN: the
// longer of the handshake and the Splice's round trip).
func TestPooledC2sExpireAfterPoolIdle(t *testing.T) {
	res := pooledRun(t, 4*time.Millisecond, 500*time.Microsecond, false, func(c *sim.Config) { c.PoolIdle = 5 * time.Millisecond })
	if got := sameHandoff(t, res); got != 4*time.Millisecond {
		t.Errorf("%v from dispatch to the request with every pooled C2 expired, want the handshake's 4ms", got)
	}
	if h := res.Handoffs; h.Reused != 0 || h.New != res.Customers[0].Admitted {
		t.Errorf("%+v handoffs for %d admitted: want every one new", h, res.Customers[0].Admitted)
	}
}

// The pool keeps at most PoolPerBackend C2s a back-end: with two or so
// requests at a time on each back-end and room for one C2, some
// handoffs open a new connection; with the default room, next to none.
func TestPoolKeepsAtMostPoolPerBackend(t *testing.T) {
	load := func(c *sim.Config) {
		c.Customers[0].Rate, c.Customers[0].Arrivals = 200, sim.Poisson
		c.Scheduler.QueueCapacity = 1000
	}
	one := pooledRun(t, 4*time.Millisecond, 500*time.Microsecond, false, func(c *sim.Config) { load(c); c.PoolPerBackend = 1 })
	many := pooledRun(t, 4*time.Millisecond, 500*time.Microsecond, false, load)
	t.Logf("room for one: %+v; for 64: %+v", one.Handoffs, many.Handoffs)
	for _, r := range []sim.Result{one, many} {
		if h, adm := r.Handoffs, r.Customers[0].Admitted; h.New+h.Reused < adm-10 || h.New+h.Reused > adm+10 {
			t.Errorf("%+v handoffs for %d admitted: every admitted request is dispatched once", h, adm)
		}
	}
	if one.Handoffs.New < one.Handoffs.Reused/10 || one.Handoffs.Reused == 0 {
		t.Errorf("room for one C2: %+v handoffs, want many new ones and some reused", one.Handoffs)
	}
	if many.Handoffs.New > one.Handoffs.New/10 {
		t.Errorf("room for 64 C2s: %d new handoffs, room for one: %d: want a tenth at most", many.Handoffs.New, one.Handoffs.New)
	}
	if one.Customers[0].MeanResponse <= many.Customers[0].MeanResponse {
		t.Errorf("mean response %v with room for one C2, %v with room for 64: fewer handshakes should show",
			one.Customers[0].MeanResponse, many.Customers[0].MeanResponse)
	}
}

func TestPoolConfigIsChecked(t *testing.T) {
	for _, mod := range []func(*sim.Config){
		func(c *sim.Config) { c.PoolPerBackend = -1 },
		func(c *sim.Config) { c.PoolIdle = -time.Second },
	} {
		cfg := sim.Config{Duration: time.Second, Backends: 1, Capacity: 1, PoolC2: true}
		mod(&cfg)
		if _, err := sim.Run(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}
