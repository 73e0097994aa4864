package sched

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The models run at 300 req/s, a fifth of the lab's, with a period and
// target_q to match: 30 requests a period, a target of 20.
const (
	modelPeriod = 100 * time.Millisecond
	modelTarget = 20
)

// fbSim is a simulated overload of the Feedback policy: Poisson arrivals
// per class at fixed rates (which may change at given times), one server
// that takes a request with Next at a fixed rate, 1 ms steps.
type fbSim struct {
	p        *Feedback
	rng      *rand.Rand
	capacity float64 // req/s served
	classes  []string
	rates    func(now int64) []float64 // req/s per class at now
	// Measured.
	periods       [][]FeedbackClassState // Snapshot at each period end
	refusalDelays []int64
	served        [][]int // per class, per second
	id            RequestID
}

func (s *fbSim) run(t *testing.T, duration time.Duration) {
	t.Helper()
	const step = int64(time.Millisecond)
	s.served = make([][]int, len(s.classes))
	for i := range s.served {
		s.served[i] = make([]int, int(duration/time.Second)+1)
	}
	serveAcc := 0.0
	lastPeriod := int64(0)
	for now := int64(0); now < int64(duration); now += step {
		for i, rate := range s.rates(now) {
			// Bernoulli per ms approximates Poisson at these rates.
			if s.rng.Float64() < rate/1000 {
				s.id++
				err := s.p.Enqueue(Request{ID: s.id, Customer: s.classes[i], Arrival: now}, now)
				if err != nil {
					t.Fatalf("Enqueue: %v (queues too small for the test)", err)
				}
			}
		}
		s.p.ExpireWhy(now, func(r Request, why FeedbackDrop) {
			if why != DropRefused {
				t.Fatalf("request dropped for %v: only the loop's refusals expected", why)
			}
			s.refusalDelays = append(s.refusalDelays, now-r.Arrival)
		})
		for serveAcc += s.capacity / 1000; serveAcc >= 1; serveAcc-- {
			r, ok := s.p.Next(now)
			if !ok {
				serveAcc = min(serveAcc, 1) // an idle server banks nothing
				break
			}
			i := slices.Index(s.classes, r.Customer)
			s.served[i][now/int64(time.Second)]++
		}
		if pe := s.p.period; pe != lastPeriod {
			lastPeriod = pe
			s.periods = append(s.periods, s.p.Snapshot())
		}
	}
}

// Three classes weighted 3:2:1 each offer twice their share of the
// capacity (300, 200 and 100 req/s against 300 req/s served). After the
// transient the FPD merge holds proQoS at the weights' 3:2:1 within 10%,
// no class starves, each admitted queue stays near target_q, and every
// request the loop refuses is refused within RefusePeriods periods of its
// arrival.
func TestFeedbackModelProportionalDifferentiation(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Seed: 1, QueueTimeout: time.Hour, Period: modelPeriod, TargetQueue: modelTarget})
	checkModel(t, p, true)
}

// The published per-request merge rule in the same overload, kept as a
// baseline: refusals still come in time, but the merge lurches between
// classes (see Feedback's Merge), so the queues swing, the shares miss
// and the smallest class starves for whole seconds. Only the refusal
// bound is checked; the numbers are logged for comparison.
func TestFeedbackModelPerRequestMerge(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Seed: 1, QueueTimeout: time.Hour, Merge: MergePerRequest, Period: modelPeriod, TargetQueue: modelTarget})
	checkModel(t, p, false)
}

func checkModel(t *testing.T, p *Feedback, strict bool) {
	s := &fbSim{
		p: p, rng: rand.New(rand.NewPCG(7, 7)), capacity: 300, classes: []string{"gold", "silver", "bronze"},
		rates: func(int64) []float64 { return []float64{300, 200, 100} },
	}
	const duration = 60 * time.Second
	s.run(t, duration)
	transient := 100 // periods: 10 s
	steady := s.periods[transient:]
	// proQoS, averaged over the steady state.
	var pro [3]float64
	var qSum [3]float64
	var qIn [3]int
	target := float64(modelTarget)
	for _, snap := range steady {
		for i, c := range snap {
			pro[i] += c.ProQoS / float64(len(steady))
			qSum[i] += float64(c.Queued)
			if math.Abs(float64(c.Queued)-target) <= 0.2*target {
				qIn[i]++
			}
		}
	}
	t.Logf("proQoS gold %.3f silver %.3f bronze %.3f (target 0.500 0.333 0.167); ratios %.2f : %.2f : 1",
		pro[0], pro[1], pro[2], pro[0]/pro[2], pro[1]/pro[2])
	// proQoS in the long run: each class's served fraction of its
	// requests (every tree is M here) over the steady state, normalised.
	first, last := s.periods[transient], s.periods[len(s.periods)-1]
	var frac [3]float64
	for i := range frac {
		d := float64(last[i].Dispatched - first[i].Dispatched)
		frac[i] = d / (d + float64(last[i].Refused-first[i].Refused))
	}
	t.Logf("served fractions gold %.3f silver %.3f bronze %.3f: ratios %.2f : %.2f : 1",
		frac[0], frac[1], frac[2], frac[0]/frac[2], frac[1]/frac[2])
	if !strict {
		pro = frac // only logged
	}
	if r := frac[0] / frac[2]; strict && math.Abs(r-3)/3 > 0.10 {
		t.Errorf("gold/bronze served fraction %.2f, want 3 +/- 10%%", r)
	}
	if r := frac[1] / frac[2]; strict && math.Abs(r-2)/2 > 0.10 {
		t.Errorf("silver/bronze served fraction %.2f, want 2 +/- 10%%", r)
	}
	if r := pro[0] / pro[2]; strict && math.Abs(r-3)/3 > 0.10 {
		t.Errorf("gold/bronze proQoS %.2f, want 3 +/- 10%%", r)
	}
	if r := pro[1] / pro[2]; strict && math.Abs(r-2)/2 > 0.10 {
		t.Errorf("silver/bronze proQoS %.2f, want 2 +/- 10%%", r)
	}
	for i, name := range s.classes {
		mean := qSum[i] / float64(len(steady))
		t.Logf("%s: mean queue %.1f (target %v), %d%% of periods within +/-20%%", name, mean, target, 100*qIn[i]/len(steady))
		if strict && math.Abs(mean-target) > 0.2*target {
			t.Errorf("%s: mean queue %.1f, want %v +/- 20%%", name, mean, target)
		}
		// Issue 10: within +/- 20% of target_q after the transient. The
		// published one-sided actuator ended 92% (gold), 97% and 99% of
		// these periods in the band, the actuator capped at target_in
		// (queueLoop.full) 100% in each class.
		if strict && qIn[i] < len(steady)*97/100 {
			t.Errorf("%s: %d of %d periods ended within 20%% of target_q, want 97%%", name, qIn[i], len(steady))
		}
		for sec := transient / 10; sec < int(duration/time.Second); sec++ {
			if strict && s.served[i][sec] == 0 {
				t.Errorf("%s starved in second %d", name, sec)
			}
		}
	}
	if len(s.refusalDelays) == 0 {
		t.Fatal("nothing refused under 2x overload")
	}
	limit := int64(DefaultFeedbackRefusePeriods) * int64(modelPeriod)
	worst := slices.Max(s.refusalDelays)
	t.Logf("%d refused, the slowest %v after its arrival (limit %v)", len(s.refusalDelays), time.Duration(worst), time.Duration(limit))
	if worst > limit {
		t.Errorf("a request was refused %v after its arrival, more than %d periods", time.Duration(worst), DefaultFeedbackRefusePeriods)
	}
}

// The step response of one class's loop with the default gains: the
// load steps from half the capacity to twice it at 10 s and back at
// 30 s. Under half load nothing is refused and the queue stays short;
// after the step up the queue reaches target_q within a second and
// stays within 20% of it (97% of the periods); after the step down the
// refusals stop within RefusePeriods periods.
func TestFeedbackStepResponse(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Seed: 3, QueueTimeout: time.Hour, Period: modelPeriod, TargetQueue: modelTarget,
		Classes: []FeedbackClass{{Name: "a", Weight: 1}}})
	up, down := int64(10*time.Second), int64(30*time.Second)
	s := &fbSim{p: p, rng: rand.New(rand.NewPCG(5, 5)), capacity: 300, classes: []string{"a"},
		rates: func(now int64) []float64 {
			if now >= up && now < down {
				return []float64{600}
			}
			return []float64{150}
		}}
	s.run(t, 40*time.Second)
	per := int64(modelPeriod)
	target := float64(modelTarget)
	within := func(q int) bool { return math.Abs(float64(q)-target) <= 0.2*target }
	// Periods are numbered from the first call at 0: snapshot k is taken
	// at the end of period k, (k+1) x T.
	at := func(ns int64) int { return int(ns/per) - 1 }
	if st := s.periods[at(up)][0]; st.Refused != 0 || st.Queued > 5 {
		t.Errorf("under half load: %d refused, queue %d", st.Refused, st.Queued)
	}
	settle := -1
	for k := at(up); k < at(down); k++ {
		if within(s.periods[k][0].Queued) {
			settle = k - at(up)
			break
		}
	}
	ok := 0
	steady := s.periods[at(up)+10 : at(down)]
	for _, snap := range steady {
		if within(snap[0].Queued) {
			ok++
		}
	}
	t.Logf("queue within 20%% of target_q %d periods after the step up; afterwards %d of %d periods within", settle, ok, len(steady))
	if settle < 0 || settle > 10 {
		t.Errorf("queue reached the target band %d periods after the step, want within 10", settle)
	}
	// 167 of 190 with the published one-sided actuator, 190 with the cap
	// at target_in (queueLoop.full).
	if ok < len(steady)*97/100 {
		t.Errorf("%d of %d periods within 20%% of target_q after the transient, want 97%%", ok, len(steady))
	}
	refusedAtDown := s.periods[at(down)+DefaultFeedbackRefusePeriods+1][0].Refused
	if end := s.periods[len(s.periods)-1][0].Refused; end != refusedAtDown {
		t.Errorf("%d refusals after the step down settled", end-refusedAtDown)
	}
}

// Under twice the capacity, where 40% of the requests belong to known
// sessions (a tenth of those in a transactional stage), the session
// requests are all served and the new sessions take every refusal.
func TestFeedbackModelSessionsCompleteUnderOverload(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Seed: 2, QueueTimeout: time.Hour, Period: modelPeriod, TargetQueue: modelTarget,
		Classes: []FeedbackClass{{Name: "shop", Weight: 1}}})
	rng := rand.New(rand.NewPCG(11, 11))
	const capacity, offered = 300.0, 600.0
	kind := map[RequestID]int{}     // 0 new, 1 session, 2 transactional
	counted := map[RequestID]bool{} // arrived after the 5 s warm-up
	var arrived, served, refused [3]int
	serveAcc := 0.0
	id := RequestID(0)
	for now := int64(0); now < int64(40*time.Second); now += int64(time.Millisecond) {
		if rng.Float64() < offered/1000 {
			id++
			r := Request{ID: id, Customer: "shop"}
			k := 0
			if u := rng.Float64(); u < 0.04 {
				k, r.Session, r.Transactional = 2, true, true
			} else if u < 0.4 {
				k, r.Session = 1, true
			}
			kind[id], counted[id] = k, now >= int64(5*time.Second)
			if counted[id] {
				arrived[k]++
			}
			if err := p.Enqueue(r, now); err != nil {
				t.Fatal(err)
			}
		}
		p.ExpireWhy(now, func(r Request, _ FeedbackDrop) { refused[kind[r.ID]]++ })
		for serveAcc += capacity / 1000; serveAcc >= 1; serveAcc-- {
			r, ok := p.Next(now)
			if !ok {
				serveAcc = min(serveAcc, 1)
				break
			}
			if counted[r.ID] {
				served[kind[r.ID]]++
			}
		}
	}
	t.Logf("after the 5 s warm-up: new %d arrived, %d served; session %d arrived, %d served; transactional %d arrived, %d served; "+
		"refused in all: new %d, session %d, transactional %d",
		arrived[0], served[0], arrived[1], served[1], arrived[2], served[2], refused[0], refused[1], refused[2])
	if refused[1] != 0 || refused[2] != 0 {
		t.Errorf("%d session and %d transactional requests refused, want none", refused[1], refused[2])
	}
	// The last requests to arrive may still wait when the run stops.
	if total := arrived[1] + arrived[2]; float64(served[1]+served[2]) < 0.95*float64(total) {
		t.Errorf("sessions: %d served of %d arrived after the warm-up, want >= 95%%", served[1]+served[2], total)
	}
	if refused[0] == 0 {
		t.Error("no new session was refused at twice the capacity")
	}
}
