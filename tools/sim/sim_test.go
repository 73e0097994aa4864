package sim_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/sim"
)

func run(t *testing.T, cfg sim.Config) sim.Result {
	t.Helper()
	res, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Below capacity with steady arrivals and constant service nobody ever
// waits: every response takes exactly the service time, and the work
// done is rate x service.
func TestRunUnderloadedHasNoQueueing(t *testing.T) {
	res := run(t, sim.Config{
		Seed: 3, Duration: 10 * time.Second, Warmup: time.Second, Backends: 2, Capacity: 3,
		Customers: []sim.Customer{
			{Name: "a", Rate: 100, Arrivals: sim.Steady, Service: 20 * time.Millisecond, Distribution: sim.Constant, Reservation: 50},
			{Name: "b", Rate: 40, Arrivals: sim.Steady, Service: 30 * time.Millisecond, Distribution: sim.Constant},
		},
		Scheduler: controller.Config{QueueCapacity: 100},
	})
	for _, c := range res.Customers {
		want := map[string]time.Duration{"a": 20 * time.Millisecond, "b": 30 * time.Millisecond}[c.Name]
		if c.P50 != want || c.P99 != want || c.MeanResponse != want {
			t.Errorf("%s: response mean %v p50 %v p99 %v, want all %v", c.Name, c.MeanResponse, c.P50, c.P99, want)
		}
		if c.Rejected.Total() != 0 || c.Admitted != c.Offered {
			t.Errorf("%s: %+v: nothing should be refused", c.Name, c)
		}
	}
	a, b := res.Customers[0], res.Customers[1]
	if a.Offered < 899 || a.Offered > 901 || a.Served < 899 || a.Served > 901 {
		t.Errorf("a: offered %d served %d in 9 s at 100/s, want 900", a.Offered, a.Served)
	}
	if a.Attainment < 0.999 || b.Attainment != 0 {
		t.Errorf("attainment a %v (served everything, more than reserved) b %v (no reservation)", a.Attainment, b.Attainment)
	}
	// 100 x 20 ms + 40 x 30 ms = 3.2 slots busy of 6.
	if u := res.Utilization; u < 0.53 || u > 0.54 {
		t.Errorf("utilization %.3f, want 3.2/6", u)
	}
}

// The FIFO baseline, with A flooding at ten times its reservation and the
// others offering theirs: one queue fills with A's requests and everyone
// is served in proportion to what they offer, so the others get a
// fraction of their reservations (the credit policy keeps them whole in
// TestFloodingCustomerCannotTakeReservations).
func TestRunFIFOLetsAFloodStarveOthers(t *testing.T) {
	var customers []sim.Customer
	for i, c := range published {
		rate := c.reservation
		if i == 0 {
			rate *= 10
		}
		customers = append(customers, sim.Customer{Name: c.name, Rate: rate, Service: typical, Reservation: c.reservation})
	}
	res := run(t, sim.Config{Seed: 1, Duration: 11 * time.Second, Warmup: time.Second,
		Backends: 5, Capacity: 5, Customers: customers, Scheduler: controller.Config{QueueCapacity: 1000}})
	t.Log("\n" + table(res))
	if res.Utilization < 0.98 {
		t.Errorf("utilization %.3f in overload", res.Utilization)
	}
	for _, c := range res.Customers[1:] {
		if c.Attainment > 0.5 || c.Rejected.QueueFull == 0 {
			t.Errorf("%s under FIFO: attainment %.3f, %d refused; want below 0.5 with refusals",
				c.Name, c.Attainment, c.Rejected.QueueFull)
		}
	}
}

// Each way of refusing a request is counted under its own reason.
func TestRunCountsRejectionsByReason(t *testing.T) {
	scheduler := creditScheduler(sched.CreditConfig{
		Customers: []sched.CustomerSpec{
			{Name: "capped", Reservation: 10, Cap: 20},
			{Name: "small", Reservation: 10, QueueCap: 5},
			{Name: "greedy", Reservation: 10, QueueCap: 100000},
		},
		QueueTimeout: 500 * time.Millisecond,
	})
	customers := []sim.Customer{
		{Name: "capped", Rate: 40, Service: typical, Distribution: sim.Constant},
		{Name: "small", Rate: 400, Service: typical, Distribution: sim.Constant},
		{Name: "greedy", Rate: 400, Service: typical, Distribution: sim.Constant},
		{Name: "stranger", Rate: 10, Service: typical, Distribution: sim.Constant},
	}
	res := run(t, sim.Config{Seed: 9, Duration: 5 * time.Second, Backends: 1, Capacity: 2,
		Customers: customers, Scheduler: scheduler})
	t.Log("\n" + table(res))
	want := map[string]func(sim.Rejections) int{
		"capped":   func(r sim.Rejections) int { return r.OverCap },
		"small":    func(r sim.Rejections) int { return r.QueueFull },
		"greedy":   func(r sim.Rejections) int { return r.Timeout },
		"stranger": func(r sim.Rejections) int { return r.Unknown },
	}
	for _, c := range res.Customers {
		if want[c.Name](c.Rejected) == 0 || want[c.Name](c.Rejected) != c.Rejected.Total() {
			t.Errorf("%s: rejections %+v, want them all under its own reason", c.Name, c.Rejected)
		}
		if c.Offered != c.Admitted+c.Rejected.Total()-c.Rejected.Timeout {
			t.Errorf("%s: offered %d != admitted %d + refused at the door", c.Name, c.Offered, c.Admitted)
		}
	}
	// Expire runs before every dispatch, so nothing starts after waiting
	// more than the timeout: no response takes longer than 500 + 20 ms.
	for _, c := range res.Customers {
		if c.P99 > 520*time.Millisecond {
			t.Errorf("%s's p99 %v: served after waiting past the 500 ms timeout", c.Name, c.P99)
		}
	}
}

// A run is a pure function of its Config, in either order of the Splice
// and the handshake; the order changes the result when control messages
// take time.
func TestRunDeterministic(t *testing.T) {
	cfg := func(seed uint64, classic bool) sim.Config {
		return sim.Config{Seed: seed, Duration: 5 * time.Second, Warmup: time.Second, Backends: 2, Capacity: 4,
			Customers: []sim.Customer{{Name: "a", Rate: 500, Service: typical}, {Name: "b", Rate: 300, Service: 30 * time.Millisecond}},
			Scheduler: creditScheduler(sched.CreditConfig{Customers: []sched.CustomerSpec{
				{Name: "a", Reservation: 300}, {Name: "b", Reservation: 100, Weight: 2},
			}}),
			HandoffDelay: 2 * time.Millisecond, ControlDelay: 100 * time.Microsecond, ClassicSplice: classic}
	}
	var byOrder [2]sim.Result
	for i, classic := range []bool{false, true} {
		first, second := run(t, cfg(5, classic)), run(t, cfg(5, classic))
		if !reflect.DeepEqual(first, second) {
			t.Fatalf("classic %v: same seed, different results:\n%+v\n%+v", classic, first, second)
		}
		if other := run(t, cfg(6, classic)); reflect.DeepEqual(first, other) {
			t.Fatalf("classic %v: a different seed gave exactly the same result: the seed is not used", classic)
		}
		byOrder[i] = first
	}
	if reflect.DeepEqual(byOrder[0], byOrder[1]) {
		t.Fatal("the Splice with the SYN and the classic order gave the same result: ClassicSplice is not used")
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	good := sim.Config{Duration: time.Second, Backends: 1, Capacity: 1, Scheduler: controller.Config{QueueCapacity: 1}}
	for _, tc := range []struct {
		change func(*sim.Config)
		want   string
	}{
		{func(c *sim.Config) { c.Scheduler.Listeners = []controller.Listener{{Port: sim.Port, Policy: "lifo"}} }, "Scheduler"},
		{func(c *sim.Config) { c.HandoffDelay = -1 }, "HandoffDelay"},
		{func(c *sim.Config) { c.Duration = 0 }, "Duration"},
		{func(c *sim.Config) { c.Warmup = time.Second }, "Warmup"},
		{func(c *sim.Config) { c.Capacity = 0 }, "Capacity"},
		{func(c *sim.Config) { c.Customers = []sim.Customer{{Name: "x", Rate: -1}} }, "Customers[0]"},
	} {
		cfg := good
		tc.change(&cfg)
		if _, err := sim.Run(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one about %s", err, tc.want)
		}
	}
	if _, err := sim.Run(good); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
}
