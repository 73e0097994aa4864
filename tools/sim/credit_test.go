package sim_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/sim"
)

// The published scenario (docs/architecture.md §6): four customers with
// reservations of 500, 100, 400 and 150 req/s on 5 back-ends x 5
// concurrent requests of 20 ms typical service time, that is 1250 req/s,
// of which 1150 are reserved and 100 spare.
var published = []struct {
	name        string
	reservation float64
}{{"A", 500}, {"B", 100}, {"C", 400}, {"D", 150}}

const (
	typical  = 20 * time.Millisecond
	capacity = 1250.0 // req/s at the typical service time
	spare    = capacity - 1150
)

type scenario struct {
	seed    uint64
	weights [4]float64
	offer   [4]float64       // multiple of the reservation offered
	service [4]time.Duration // mean service time
	dist    sim.Distribution
}

func defaultScenario() scenario {
	return scenario{
		seed:    1,
		weights: [4]float64{1, 1, 1, 1},
		offer:   [4]float64{2, 2, 2, 2},
		service: [4]time.Duration{typical, typical, typical, typical},
		dist:    sim.Exponential,
	}
}

// runScenario simulates 30 s of measured load after 1 s of warm-up.
func runScenario(t *testing.T, sc scenario) sim.Result {
	t.Helper()
	var specs []sched.CustomerSpec
	var customers []sim.Customer
	for i, c := range published {
		specs = append(specs, sched.CustomerSpec{Name: c.name, Reservation: c.reservation, Weight: sc.weights[i]})
		customers = append(customers, sim.Customer{
			Name: c.name, Rate: sc.offer[i] * c.reservation, Arrivals: sim.Poisson,
			Service: sc.service[i], Distribution: sc.dist, Reservation: c.reservation,
		})
	}
	res, err := sim.Run(sim.Config{
		Seed: sc.seed, Duration: 31 * time.Second, Warmup: time.Second,
		Backends: 5, Capacity: 5, Customers: customers,
		Scheduler: creditScheduler(sched.CreditConfig{Customers: specs, TypicalService: typical}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + table(res))
	return res
}

// creditScheduler is the front-end's configuration for one credit
// listener on sim.Port.
func creditScheduler(cc sched.CreditConfig) controller.Config {
	return controller.Config{Listeners: []controller.Listener{{Port: sim.Port, Policy: "credit"}}, Credit: cc}
}

func table(res sim.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-4s %8s %8s %8s %7s %6s %6s %9s %9s %9s\n",
		"cust", "offered", "served/s", "reserved", "attain", "full", "t/o", "mean", "p50", "p99")
	for _, c := range res.Customers {
		fmt.Fprintf(&b, "%-4s %8.1f %8.1f %8.0f %7.3f %6d %6d %9v %9v %9v\n",
			c.Name, c.OfferedRate, c.ServedRate, c.Reservation, c.Attainment,
			c.Rejected.QueueFull, c.Rejected.Timeout,
			c.MeanResponse.Round(time.Millisecond), c.P50.Round(time.Millisecond), c.P99.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "utilization %.3f", res.Utilization)
	return b.String()
}

func requireAttainment(t *testing.T, res sim.Result, names string) {
	t.Helper()
	for _, c := range res.Customers {
		if strings.Contains(names, c.Name) && c.Attainment < 0.97 {
			t.Errorf("%s: served %.1f req/s, attainment %.3f < 0.97", c.Name, c.ServedRate, c.Attainment)
		}
	}
}

// spareShares returns each customer's part of the spare capacity used:
// the work it was served beyond its reservation, over the total of that.
// Work is counted in normal-sized requests (back-end time over the typical
// service time), the unit reservations and the spare are measured in;
// counting requests instead would add the luck of the service-time draws:
// with exponential service, A's 15,000 reserved requests already vary by
// about 1% (5 req/s) in number for the same work, a fifth of a 25 req/s
// share.
func spareShares(res sim.Result) []float64 {
	var total float64
	extra := make([]float64, len(res.Customers))
	for i, c := range res.Customers {
		extra[i] = c.Work/typical.Seconds() - c.Reservation
		total += extra[i]
	}
	for i := range extra {
		extra[i] /= total
	}
	return extra
}

func TestPublishedScenarioReservations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dist    sim.Distribution
		weights [4]float64
	}{
		{"exponential/weights=1,1,1,1", sim.Exponential, [4]float64{1, 1, 1, 1}},
		{"constant/weights=1,1,1,1", sim.Constant, [4]float64{1, 1, 1, 1}},
		{"exponential/weights=3,1,1,1", sim.Exponential, [4]float64{3, 1, 1, 1}},
		{"constant/weights=3,1,1,1", sim.Constant, [4]float64{3, 1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := defaultScenario()
			sc.dist, sc.weights = tc.dist, tc.weights
			res := runScenario(t, sc)
			requireAttainment(t, res, "ABCD")
			var sumWeights float64
			for _, w := range tc.weights {
				sumWeights += w
			}
			// Tolerance: over seeds 1-20 the shares (in work) never
			// strayed more than 0.0044 from the weights; 0.02 is four times
			// that, yet tells 3:1 (A at 0.50) from 2:1 (0.40) or 4:1
			// (0.57) at a glance.
			shares := spareShares(res)
			t.Logf("spare shares %.3f", shares)
			for i, c := range res.Customers {
				want := tc.weights[i] / sumWeights
				if math.Abs(shares[i]-want) > 0.02 {
					t.Errorf("%s: %.3f of the spare capacity, want %.3f +- 0.02", c.Name, shares[i], want)
				}
			}
		})
	}
}

// C's requests take 40 ms: each costs C two credits, so its 400 credits a
// second buy about 200 requests (plus its share of the spare, which it
// also pays double for); the others keep their reservations.
func TestPublishedScenarioSlowCustomerChargedDouble(t *testing.T) {
	for _, dist := range []sim.Distribution{sim.Exponential, sim.Constant} {
		sc := defaultScenario()
		sc.dist = dist
		sc.service[2] = 2 * typical
		res := runScenario(t, sc)
		requireAttainment(t, res, "ABD")
		c := res.Customers[2]
		if c.ServedRate < 180 || c.ServedRate > 220 {
			t.Errorf("C served %.1f req/s at 40 ms each, want 200 +- 10%%", c.ServedRate)
		}
	}
}

// One customer flooding at ten times its reservation cannot take what the
// others reserved: they offer exactly their reservations and get them.
func TestFloodingCustomerCannotTakeReservations(t *testing.T) {
	for flooder := range published {
		sc := defaultScenario()
		sc.offer = [4]float64{1, 1, 1, 1}
		sc.offer[flooder] = 10
		t.Run("flooder="+published[flooder].name, func(t *testing.T) {
			res := runScenario(t, sc)
			others := strings.ReplaceAll("ABCD", published[flooder].name, "")
			requireAttainment(t, res, others)
		})
	}
}

// The published scenario at the live lab's scale and costs, as
// TestGuaranteedRatesUnderFlood (tools/e2e) runs it: rates x 0.3, the
// test server's 66.7 ms taking 68.1 ms at the back-end, the Feedback 1 ms
// on its way, handoffs set up 2 ahead, a 300 ms queue timeout; B floods
// at 10x its reservation while the others offer 1.5x. The front-end's
// controller keeps every reservation, and the spare capacity (25 slots
// of 69.1 ms serve 362 req/s against 345 reserved) goes to the customers
// in equal shares, so the small ones gain the most. The README
// puts this next to the live lab's figures.
func TestPublishedScenarioAtLabScale(t *testing.T) {
	const scale = 0.3
	var specs []sched.CustomerSpec
	var customers []sim.Customer
	for _, c := range published {
		offer := 1.5
		if c.name == "B" {
			offer = 10
		}
		specs = append(specs, sched.CustomerSpec{Name: c.name, Reservation: scale * c.reservation})
		customers = append(customers, sim.Customer{Name: c.name, Rate: offer * scale * c.reservation,
			Service: 68100 * time.Microsecond, Distribution: sim.Constant, Reservation: scale * c.reservation})
	}
	sc := creditScheduler(sched.CreditConfig{Customers: specs, TypicalService: 66667 * time.Microsecond, // typical / scale
		QueueTimeout: 300 * time.Millisecond})
	sc.HandoffAhead = 2
	res, err := sim.Run(sim.Config{Seed: 1, Duration: 10 * time.Second, Warmup: 2 * time.Second, Backends: 5, Capacity: 5,
		Customers: customers, Scheduler: sc, HandoffDelay: 500 * time.Microsecond, ControlDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + table(res))
	requireAttainment(t, res, "ABCD")
	if res.Utilization < 0.97 {
		t.Errorf("utilization %.3f: the handoffs ahead should keep the slots busy", res.Utilization)
	}
	// Equal shares of about 22 req/s of spare: B (30 reserved) and D (45)
	// gain a larger fraction than A (150) and C (120).
	a, b, c, d := res.Customers[0], res.Customers[1], res.Customers[2], res.Customers[3]
	if !(b.Attainment > d.Attainment && d.Attainment > c.Attainment && c.Attainment > a.Attainment) {
		t.Errorf("attainments A %.3f B %.3f C %.3f D %.3f: want B > D > C > A", a.Attainment, b.Attainment, c.Attainment, d.Attainment)
	}
}
