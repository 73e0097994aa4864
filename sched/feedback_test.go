package sched

import (
	"errors"
	"hash/fnv"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"
)

const (
	fbPeriod = 100 * time.Millisecond
	fbT      = int64(fbPeriod)
)

// scripted returns draws in order, failing the test when they run out.
func scripted(t *testing.T, draws ...float64) func() float64 {
	return func() float64 {
		t.Helper()
		if len(draws) == 0 {
			t.Fatal("the actuator drew more numbers than scripted")
		}
		d := draws[0]
		draws = draws[1:]
		return d
	}
}

// newFeedbackT makes a Feedback policy for a test. The tests' numbers
// worked by hand take G's gain k as 1, the default before it became 4:
// a config without a Gain gets 1.
func newFeedbackT(t *testing.T, cfg FeedbackConfig) *Feedback {
	t.Helper()
	if cfg.Gain == 0 {
		cfg.Gain = 1
	}
	p, err := NewFeedback(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The control law by hand, default gains Q0 = 1, Q1 = -0.75:
//
//	in 30, q 25 (e = 20-25 = -5), e(t-T) = 2:  30 - 5 - 1.5 = 23.5
//	in 0, q 30 (e = -10), e(t-T) = 0:          0 - 10 = -10, clamped to 0
func TestFeedbackPIStep(t *testing.T) {
	if got := piStep(30, -5, 2, 1, -0.75); !near(got, 23.5) {
		t.Errorf("piStep = %v, want 23.5", got)
	}
	if got := piStep(0, -10, 0, 1, -0.75); got != 0 {
		t.Errorf("piStep = %v, want 0 (never negative)", got)
	}
	// Two periods of a loop with target_q 20, as endPeriod runs them, in
	// taken as min(admitted, target_in) (initially 20):
	//	1: in 10, out 0  -> q 10, e 10, e(t-T) 0:   target_in 10 + 10 + 0      = 20
	//	2: in 20, out 15 -> q 15, e 5,  e(t-T) 10:  target_in 20 + 5 - 7.5     = 17.5
	//	3: in 25, out 25 -> q 15, e 5,  e(t-T) 5:   target_in 17.5 + 5 - 3.75  = 18.75
	//	   (the 7.5 admitted beyond the target are not built in)
	l := newQueueLoop(1, -0.75, 20, 2)
	if l.targetIn != 20 || l.p != [fbTiers]float64{1, 1, 1} {
		t.Fatalf("initial target_in %v p %v, want 20 (fill to the target) and 1", l.targetIn, l.p)
	}
	l.in = 10
	l.endPeriod(10)
	if l.targetIn != 20 {
		t.Fatalf("period 1: target_in %v, want 20", l.targetIn)
	}
	l.in, l.out = 20, 15
	l.endPeriod(15)
	if !near(l.targetIn, 17.5) || l.lastIn != 20 || l.lastOut != 15 || l.lastE != 5 {
		t.Fatalf("period 2: target_in %v last in %d out %d e %d, want 17.5 20 15 5", l.targetIn, l.lastIn, l.lastOut, l.lastE)
	}
	l.in, l.out = 25, 25
	l.endPeriod(15)
	if !near(l.targetIn, 18.75) {
		t.Fatalf("period 3: target_in %v, want 18.75", l.targetIn)
	}
}

// p = (target_in - predicted exempt) / predicted gated, in [0, 1]. With
// History 2, gated arrivals 40 then 60 (mean 50) and exempt 0 then 10
// (mean 5), target_in 17.5 after the periods of TestFeedbackPIStep:
// p = (17.5 - 5) / 50 = 0.25.
func TestFeedbackPassProbability(t *testing.T) {
	if got := passProbability(17.5, 5, 50); !near(got, 0.25) {
		t.Errorf("p = %v, want 0.25", got)
	}
	for _, c := range []struct{ in, x, g, want float64 }{
		{10, 0, 0, 1},  // no gated arrivals seen: pass everything
		{10, 20, 5, 0}, // exempt arrivals take it all
		{50, 0, 10, 1}, // more room than arrivals
	} {
		if got := passProbability(c.in, c.x, c.g); got != c.want {
			t.Errorf("passProbability(%v, %v, %v) = %v, want %v", c.in, c.x, c.g, got, c.want)
		}
	}
	l := newQueueLoop(1, -0.75, 20, 2)
	l.arrived[tierNew], l.in = 40, 10
	l.endPeriod(10) // target_in 20
	l.arrived[tierNew], l.arrived[tierSession], l.in, l.out = 60, 10, 20, 15
	l.endPeriod(15) // target_in 17.5
	if !near(l.p[tierNew], 0.25) || l.p[tierSession] != 1 || l.p[tierTransactional] != 1 {
		t.Errorf("loop p = %v, want 1 1 0.25", l.p)
	}
	if l.arrive(tierNew, 0.25) || !l.arrive(tierNew, 0.24) || !l.arrive(tierSession, 0.99) {
		t.Error("arrive: new passes iff u < p, a known session at p 1")
	}
}

// The actuator and the reserve queue, one class with target_q 4 and
// History 1, scripted draws. Initially target_in = Q0 * 4 = 4, p = 1.
// The step uses in(t) = min(admitted, target_in), and while p < 1 a
// period admits at most target_in (queueLoop.full): a request that
// passes its draw after that waits in the reserve.
//
//	period 0: 6 arrive, all pass (p 1: no cap). End: 6 >= 4, no top-up;
//	          q 6, e -2: target_in = min(6, 4) - 2 + 0 = 2; p = 2/6.
//	period 1: 4 served (q 2); 6 arrive (ids 7-12), draws .1 .9 .5 .7 .3 .2:
//	          7 and 11 pass (below 1/3), 8, 9, 10 go to reserve, and so
//	          does 12 (.2 passes, but 7 and 11 made target_in 2). End:
//	          in 2, no top-up; q 4, e 0: target_in = min(2, 2) + 0 + 1.5 =
//	          3.5; p = 3.5/6.
//	period 2: 4 served (5, 6, 7, 11: q 0), nothing arrives. End: target_in
//	          rounds to 4, in 0: 8, 9, 10, 12 are topped up, oldest first;
//	          q 4, e 0: target_in = min(4, 3.5) + 0 + 0 = 3.5; no gated
//	          arrivals, room left: p 1.
//
// The published actuator (no cap) admitted 12 in period 1 too, q 5 at
// its end and 4.25 for target_in two periods on.
func TestFeedbackReserveQueueTopUp(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Period: fbPeriod,
		Classes: []FeedbackClass{{Name: "a", Weight: 1}}, TargetQueue: 4, History: 1, RefusePeriods: 5,
		draw: scripted(t, 0, 0, 0, 0, 0, 0, .1, .9, .5, .7, .3, .2),
	})
	id := RequestID(0)
	enq := func(n int, now int64) {
		for range n {
			id++
			if err := p.Enqueue(Request{ID: id, Customer: "a"}, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	serve := func(n int, now int64) []RequestID {
		var ids []RequestID
		for range n {
			r, ok := p.Next(now)
			if !ok {
				t.Fatalf("nothing to serve at %d", now)
			}
			ids = append(ids, r.ID)
		}
		return ids
	}
	enq(6, 0)
	p.advance(fbT)
	st := p.Snapshot()[0]
	if st.Queued != 6 || st.TargetIn != 2 || !near(st.PassProbability, 2.0/6) {
		t.Fatalf("after period 0: %+v", st)
	}
	serve(4, fbT+1)
	enq(6, fbT+2)
	if st := p.Snapshot()[0]; st.Queued != 4 || st.Reserve != 4 {
		t.Fatalf("period 1: queued %d reserve %d, want 4 and 4", st.Queued, st.Reserve)
	}
	p.advance(2 * fbT)
	if st := p.Snapshot()[0]; !near(st.TargetIn, 3.5) || !near(st.PassProbability, 3.5/6) || st.Reserve != 4 || st.LastIn != 2 {
		t.Fatalf("after period 1: %+v", st)
	}
	if got := serve(4, 2*fbT+1); got[0] != 5 || got[1] != 6 || got[2] != 7 || got[3] != 11 {
		t.Errorf("period 2 served %v, want [5 6 7 11]: the passed 7 and 11 last", got)
	}
	p.advance(3 * fbT)
	st = p.Snapshot()[0]
	if st.Queued != 4 || st.Reserve != 0 || st.LastIn != 4 || !near(st.TargetIn, 3.5) || st.PassProbability != 1 {
		t.Fatalf("after period 2: %+v", st)
	}
	if got := serve(4, 3*fbT); got[0] != 8 || got[1] != 9 || got[2] != 10 || got[3] != 12 {
		t.Errorf("topped-up requests served %v, want [8 9 10 12]", got)
	}
}

// The cap of a rationing period by hand: target_in 3.4 (rounded: 3),
// p_new 0.5. Draws below p pass until the period admitted 3 of any tier;
// then a new session's request waits in the reserve even with a draw of
// 0, while a known session's passes at its p of 1. With p_new 1 (the
// loop expects fewer arrivals than target_in) nothing is capped.
func TestFeedbackActuatorAdmitsAtMostTargetIn(t *testing.T) {
	l := newQueueLoop(1, -0.75, 20, 1)
	l.targetIn, l.p = 3.4, [fbTiers]float64{1, 1, 0.5}
	if l.arrive(tierNew, 0.5) || !l.arrive(tierNew, 0.49) {
		t.Fatal("below the cap a new session passes iff u < p")
	}
	l.in = 2 // 2 admitted: room for one more
	if !l.arrive(tierNew, 0) {
		t.Error("in 2 < round(3.4): a draw of 0 should pass")
	}
	l.in = 3
	if l.arrive(tierNew, 0) {
		t.Error("in 3 = round(3.4): a new session passed beyond target_in")
	}
	if !l.arrive(tierSession, 0.99) || !l.arrive(tierTransactional, 0.99) {
		t.Error("the cap held back a known session")
	}
	l.p[tierNew] = 1
	l.in = 10
	if !l.arrive(tierNew, 0.99) {
		t.Error("p 1: a new session was capped")
	}
	if l.arrived != [fbTiers]int{1, 1, 5} {
		t.Errorf("arrivals counted %v, want [1 1 5]: capped ones count too", l.arrived)
	}
}

// A request the actuator keeps in reserve at the end of RefusePeriods
// consecutive periods is handed to Expire as refused, within that many
// periods of its arrival, and logged as quality 0.
func TestFeedbackRefusesAfterPeriods(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Period: fbPeriod,
		Classes: []FeedbackClass{{Name: "a", Weight: 1}}, TargetQueue: 1, History: 1, RefusePeriods: 2,
		QueueTimeout: time.Hour,
	})
	// Period 0: 10 pass (p 1); q 10, e -9: target_in 10 - 9 = 1, p 0.1.
	for i := range 10 {
		p.Enqueue(Request{ID: RequestID(i), Customer: "a"}, 0)
	}
	p.advance(fbT)
	// Period 1: serve nothing. Of 20 arrivals a few pass at p 0.1 (in),
	// the rest wait in reserve; the queue grows to 10 + in, so target_in
	// for period 2 is in + (1 - 10 - in) + 6.75 = -2.25 -> 0: no top-up.
	for i := range 20 {
		p.Enqueue(Request{ID: RequestID(100 + i), Customer: "a", Arrival: fbT + 1}, fbT+1)
	}
	reserve := p.Snapshot()[0].Reserve
	if reserve == 0 {
		t.Fatal("no request went to the reserve queue at p 0.1")
	}
	var refused []RequestID
	collect := func(r Request, why FeedbackDrop) {
		if why != DropRefused {
			t.Errorf("request %d dropped for %v, want DropRefused", r.ID, why)
		}
		refused = append(refused, r.ID)
	}
	p.ExpireWhy(2*fbT, collect) // end of period 1: one period in reserve
	if len(refused) != 0 {
		t.Fatalf("refused after one period: %v", refused)
	}
	if at, ok := p.NextExpiry(); !ok || at != 3*fbT {
		t.Fatalf("NextExpiry = %d %v, want the end of period 2", at, ok)
	}
	p.ExpireWhy(3*fbT, collect) // end of period 2: target_in 0, no top-up
	if len(refused) != 0 {
		t.Fatalf("refused before two full periods: %v", refused)
	}
	// Due two periods after their arrival at T+1, after the second
	// period end they missed.
	if at, ok := p.NextExpiry(); !ok || at != 3*fbT+1 {
		t.Fatalf("NextExpiry = %d %v, want 3T+1", at, ok)
	}
	p.ExpireWhy(3*fbT+1, collect)
	if len(refused) != reserve {
		t.Fatalf("%d refused after two periods, want all %d in reserve", len(refused), reserve)
	}
	st := p.Snapshot()[0]
	if st.Refused != uint64(reserve) || st.Reserve != 0 || p.Len() != st.Queued {
		t.Errorf("after refusals: %+v, Len %d", st, p.Len())
	}
	if p.logs[0].sum != 0 || p.logs[0].n != reserve {
		t.Errorf("log: %d entries summing %d, want %d zeros", p.logs[0].n, p.logs[0].sum, reserve)
	}
}

// The response-level log with M = 4 trees and k = 4 entries:
//
//	a logs trees 4 2 0 4: absQoS (4+2+0+4)/4 = 2.5
//	a logs 0 more, pushing out the first 4: (2+0+4+0)/4 = 1.5
//	b logs 4 4 4 4: absQoS 4
//	proQoS a = 1.5/5.5 = 0.2727..., b = 4/5.5 = 0.7272...
//
// With equal shares 0.5 the merge picks a (0.5 - 0.27 > 0.5 - 0.73);
// with shares 0.2 and 0.8, a is above its share and b is picked.
func TestFeedbackQoSLogAndProQoS(t *testing.T) {
	logs := []qosLog{newQoSLog(4), newQoSLog(4)}
	for _, tree := range []int{4, 2, 0, 4} {
		logs[0].add(tree)
	}
	if got := logs[0].absQoS(4); got != 2.5 {
		t.Fatalf("absQoS %v, want 2.5", got)
	}
	logs[0].add(0)
	if got := logs[0].absQoS(4); got != 1.5 {
		t.Fatalf("absQoS after wrapping %v, want 1.5", got)
	}
	for range 4 {
		logs[1].add(4)
	}
	pro := make([]float64, 2)
	proQoS(logs, 4, pro)
	if !near(pro[0], 1.5/5.5) || !near(pro[1], 4/5.5) {
		t.Fatalf("proQoS %v, want [0.2727 0.7273]", pro)
	}
	all := func(int) bool { return true }
	if got := fpdPick([]float64{0.5, 0.5}, pro, all); got != 0 {
		t.Errorf("equal shares: picked %d, want 0", got)
	}
	if got := fpdPick([]float64{0.2, 0.8}, pro, all); got != 1 {
		t.Errorf("shares 0.2/0.8: picked %d, want 1", got)
	}
	if got := fpdPick([]float64{0.2, 0.8}, pro, func(i int) bool { return i == 0 }); got != 0 {
		t.Errorf("only class 0 waiting: picked %d", got)
	}
	// Nothing logged yet: all proQoS 0, the larger share first.
	proQoS([]qosLog{newQoSLog(2), newQoSLog(2)}, 1, pro)
	if pro[0] != 0 || pro[1] != 0 || fpdPick([]float64{1.0 / 3, 2.0 / 3}, pro, all) != 1 {
		t.Errorf("empty logs: proQoS %v", pro)
	}
}

// The classes' shares of the degradation by hand (planQuality), a and b
// at 1:1, M = 3, G = 1.5, QualityGain 0.1: a's log holds two responses
// from tree 3, b's two refusals, so proQoS is 1 and 0; the period
// dispatched 4 of a's requests and none of b's.
//
//	d_a = 1 x (1 - 0.1 x (0.5 - 1)/0.5) = 1.1
//	d_b = 1 x (1 - 0.1 x (0.5 - 0)/0.5) = 0.9
//	scaled by dispatches 4 / (4 x 1.1): d_a = 1, d_b = 0.9/1.1
//
// b, refused entirely, is degraded less. Before, a class whose proQoS
// was 0 kept its d as if its log were empty (d_b 1/1.1): live, bronze
// refused at the door through its whole log stayed there 10 s after
// the step up.
func TestFeedbackQualityShareOfAClassRefusedEntirely(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Classes: []FeedbackClass{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}},
		Trees: 3, B: 1e-9})
	p.adapt.g = 1.5
	p.logs[0].add(3)
	p.logs[0].add(3)
	p.logs[1].add(0)
	p.logs[1].add(0)
	p.served[0] = 4
	p.planQuality()
	if !near(p.degrade[0], 1) || !near(p.degrade[1], 0.9/1.1) {
		t.Errorf("degradation shares %v, want 1 and %v", p.degrade, 0.9/1.1)
	}
}

// The planned merge's weights by hand, classes a and b at 1:1 (shares
// 0.5), MergeGain 0.1, one tree: a's log holds 3 full-quality entries,
// b's 1, so proQoS is 0.75 and 0.25.
//
//	no period contended: the weights stay 0.5 0.5
//	contended:           a 0.5 x (1 + 0.1 x (0.5 - 0.75)/0.5) = 0.475
//	                     b 0.5 x (1 + 0.1 x (0.5 - 0.25)/0.5) = 0.525
//	from 0.99 and 0.01:  a 0.99 x 0.95 = 0.9405, b 0.01 x 1.05 = 0.0105,
//	                     raised to the floor 0.5/4 = 0.125; normalised
//	                     by 1.0655: 0.88269 and 0.11732
//
// A period is contended when plannedPick chose among two classes or
// more; picking the only class waiting does not count.
func TestFeedbackMergeWeightsMoveOnlyWhenContended(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Classes: []FeedbackClass{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}}})
	for range 3 {
		p.logs[0].add(1)
	}
	p.logs[1].add(1)
	p.served[0], p.served[1] = 4, 2
	p.plannedPick(func(i int) bool { return i == 1 })
	if p.contended {
		t.Fatal("picking the only class waiting counted as contended")
	}
	p.planWeights()
	if p.weights[0] != 0.5 || p.weights[1] != 0.5 || p.served[0] != 0 || p.served[1] != 0 {
		t.Fatalf("uncontended period: weights %v served %v, want 0.5 0.5 and 0 0", p.weights, p.served)
	}
	if got := p.plannedPick(func(int) bool { return true }); got != 0 || !p.contended {
		t.Fatalf("pick %d contended %v, want a (tie to the first) and contended", got, p.contended)
	}
	p.planWeights()
	if !near(p.weights[0], 0.475) || !near(p.weights[1], 0.525) || p.contended {
		t.Fatalf("contended period: weights %v contended %v, want 0.475 0.525 and reset", p.weights, p.contended)
	}
	p.weights[0], p.weights[1] = 0.99, 0.01
	p.contended = true
	p.planWeights()
	if math.Abs(p.weights[0]-0.9405/1.0655) > 1e-12 || math.Abs(p.weights[1]-0.125/1.0655) > 1e-12 {
		t.Errorf("floor: weights %v, want %v %v", p.weights, 0.9405/1.0655, 0.125/1.0655)
	}
}

// G = clamp(G + k(U* - U), 0, M), U = aR + bW, by hand with U* = 0.85, M 3:
//
//	a 1/1000 s/req, b 1e-8 s/byte, R 500 req/s, W 3e7 bytes/s: U = 0.5 + 0.3 = 0.8
//	G 2.9, k 1, U 0.5:  2.9 + 0.35 = 3.25 -> 3 (clamped to M)
//	G 0.1, k 1, U 1.2:  0.1 - 0.35 = -0.25 -> 0
//	G 2,   k 2, U 0.95: 2 - 0.2 = 1.8
func TestFeedbackUtilizationAndGClamp(t *testing.T) {
	if u := utilization(1.0/1000, 1e-8, 500, 3e7); !near(u, 0.8) {
		t.Errorf("U = %v, want 0.8", u)
	}
	for _, c := range []struct{ g, k, u, want float64 }{{2.9, 1, 0.5, 3}, {0.1, 1, 1.2, 0}, {2, 2, 0.95, 1.8}} {
		if got := nextG(c.g, c.k, 0.85, c.u, 3); !near(got, c.want) {
			t.Errorf("nextG(%v, k %v, U %v) = %v, want %v", c.g, c.k, c.u, got, c.want)
		}
	}
	// Through the policy: 100 completions of 10 000 bytes in a 100 ms
	// period are R 1000/s and W 1e7 B/s; a 5e-4, b 5e-8: U = 0.5 + 0.5 = 1,
	// so G = 3 + 1*(0.85 - 1) = 2.85.
	p := newFeedbackT(t, FeedbackConfig{Period: fbPeriod, Trees: 3, A: 5e-4, B: 5e-8})
	p.Completed(0, 0) // starts the clock
	p.adapt.served--  // that one was only the start
	for range 100 {
		p.Completed(10_000, 1)
	}
	p.advance(fbT)
	a := p.Adaptation()
	if !a.Enabled || !near(a.R, 1000) || !near(a.W, 1e7) || !near(a.U, 1) || !near(a.G, 2.85) {
		t.Errorf("adaptation %+v, want R 1000 W 1e7 U 1 G 2.85", a)
	}
}

// The adaptor at G = I + F serves tree I+1 to the clients hashing below
// F and tree I to the others:
//
//	G 1.25: N 0.2 -> tree 2, N 0.3 -> tree 1
//	G 3 (= M): tree 3 for everyone
//	G 0.4: N 0.5 -> tree 0 (refuse), N 0.1 -> tree 1
func TestFeedbackIPHashSplit(t *testing.T) {
	for _, c := range []struct {
		g, n float64
		want int
	}{{1.25, 0.2, 2}, {1.25, 0.3, 1}, {3, 0.99, 3}, {0.4, 0.5, 0}, {0.4, 0.1, 1}} {
		if got := chooseTree(c.g, 3, c.n); got != c.want {
			t.Errorf("chooseTree(G %v, N %v) = %d, want %d", c.g, c.n, got, c.want)
		}
	}
	// clientHash against a reference: the standard library's FNV-1a of
	// the 16-byte address, the MurmurHash3 finaliser, 53 bits.
	ref := func(a netip.Addr) float64 {
		h := fnv.New64a()
		b := a.As16()
		h.Write(b[:])
		x := h.Sum64()
		x ^= x >> 33
		x *= 0xff51afd7ed558ccd
		x ^= x >> 33
		x *= 0xc4ceb9fe1a85ec53
		x ^= x >> 33
		return float64(x>>11) / (1 << 53)
	}
	a := netip.MustParseAddr("198.18.0.1")
	if got, want := clientHash(a), ref(a); got != want {
		t.Fatalf("clientHash(%v) = %v, want %v", a, got, want)
	}
	if clientHash(netip.MustParseAddr("::ffff:198.18.0.1")) != clientHash(a) {
		t.Error("a v4-mapped address hashes differently from the IPv4 one")
	}
	// At G 1.25 a quarter of the clients get tree 2, each always the same.
	adapt := newContentAdaptor(3, 1, 0, 0.85, 1, fbT)
	adapt.g = 1.25
	upper := 0
	const n = 1 << 14
	for i := range n {
		c := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
		tree := adapt.tree(c)
		if tree != 1 && tree != 2 || adapt.tree(c) != tree {
			t.Fatalf("client %v: tree %d, then %d", c, tree, adapt.tree(c))
		}
		if tree == 2 {
			upper++
		}
	}
	if frac := float64(upper) / n; math.Abs(frac-0.25) > 0.02 {
		t.Errorf("%.3f of the clients got tree 2 at G 1.25, want 0.25 +/- 0.02", frac)
	}
}

// Under content adaptation with G below 1, a new-session request whose
// client hashes to tree 0 is refused at once with ErrOverload; a request
// of a known session is admitted and served from tree 1.
func TestFeedbackTreeZeroRefusesNewSessionsOnly(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Period: fbPeriod, Trees: 2, A: 1, Classes: []FeedbackClass{{Name: "a", Weight: 1}}})
	p.adapt.g = 0 // every client gets tree 0
	c := netip.MustParseAddr("198.18.0.9")
	if err := p.Enqueue(Request{ID: 1, Customer: "a", Client: c}, 0); !errors.Is(err, ErrOverload) {
		t.Fatalf("new session at G 0: %v, want ErrOverload", err)
	}
	if err := p.Enqueue(Request{ID: 2, Customer: "a", Client: c, Session: true}, 0); err != nil {
		t.Fatalf("known session at G 0: %v", err)
	}
	r, ok := p.Next(0)
	if !ok || r.ID != 2 || r.Tree != 1 {
		t.Fatalf("Next = %+v %v, want request 2 from tree 1", r, ok)
	}
	if st := p.Snapshot()[0]; st.Overload != 1 || st.Dispatched != 1 {
		t.Errorf("counts %+v", st)
	}
	p.adapt.g = 2
	p.Enqueue(Request{ID: 3, Customer: "a", Client: c}, 0)
	if r, _ := p.Next(0); r.Tree != 2 {
		t.Errorf("at G = M the request got tree %d, want 2", r.Tree)
	}
}

// Known-session and transactional requests pass the actuator while they
// fit in target_in, whatever p the new sessions get, and go before
// new-session requests of their class.
func TestFeedbackSessionsGoFirst(t *testing.T) {
	draws := make([]float64, 30) // period 0: all pass at p 1
	draws = append(draws, 0.5, 0.99, 0.99)
	p := newFeedbackT(t, FeedbackConfig{Period: fbPeriod, Classes: []FeedbackClass{{Name: "a", Weight: 1}}, TargetQueue: 20, History: 2,
		draw: scripted(t, draws...)})
	for i := range 30 {
		p.Enqueue(Request{ID: RequestID(i), Customer: "a"}, 0)
	}
	// Period 0: 30 admitted, q 30, e -10: target_in min(30, 20) - 10 =
	// 10; 30 new arrivals predicted: p 10/30; none of known sessions:
	// their p is 1.
	p.advance(fbT)
	if st := p.Snapshot()[0]; !near(st.PassProbability, 1.0/3) || st.PassSession != 1 || st.PassTransactional != 1 {
		t.Fatalf("p = %v %v %v, want 1/3 for new sessions, 1 for the others", st.PassProbability, st.PassSession, st.PassTransactional)
	}
	now := fbT + 1
	p.Enqueue(Request{ID: 20, Customer: "a"}, now)                      // draw 0.5: reserve
	p.Enqueue(Request{ID: 21, Customer: "a", Session: true}, now)       // 0.99 < 1: passes
	p.Enqueue(Request{ID: 22, Customer: "a", Transactional: true}, now) // the same
	if st := p.Snapshot()[0]; st.Reserve != 1 || st.Queued != 32 {
		t.Fatalf("queued %d reserve %d, want 32 and the new session in reserve", st.Queued, st.Reserve)
	}
	var got []RequestID
	for range 3 {
		r, _ := p.Next(now)
		got = append(got, r.ID)
	}
	if got[0] != 21 || got[1] != 22 || got[2] != 0 {
		t.Errorf("served %v, want the session requests 21 22 before the new ones", got)
	}
}

// With every admitted queue empty, Next takes a reserve request rather
// than let a back-end idle.
func TestFeedbackNextTakesReserveWhenIdle(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Period: fbPeriod, Classes: []FeedbackClass{{Name: "a", Weight: 1}}, draw: func() float64 { return 0.999 }})
	p.classes[0].loop.p[tierNew] = 0.5
	p.Enqueue(Request{ID: 7, Customer: "a"}, 0)
	if st := p.Snapshot()[0]; st.Reserve != 1 {
		t.Fatalf("reserve %d, want 1", st.Reserve)
	}
	if r, ok := p.Next(1); !ok || r.ID != 7 || p.Len() != 0 {
		t.Fatalf("Next = %+v %v, Len %d", r, ok, p.Len())
	}
}

func TestFeedbackQueueTimeoutAndErrors(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{QueueTimeout: time.Second, Classes: []FeedbackClass{{Name: "a", Weight: 1, QueueCap: 1}}})
	if err := p.Enqueue(Request{Customer: "nope"}, 0); !errors.Is(err, ErrUnknownCustomer) {
		t.Errorf("unknown class: %v", err)
	}
	p.Enqueue(Request{ID: 1, Customer: "a"}, 0)
	if err := p.Enqueue(Request{ID: 2, Customer: "a"}, 0); !errors.Is(err, ErrQueueFull) {
		t.Errorf("full queue: %v", err)
	}
	var dropped []FeedbackDrop
	p.ExpireWhy(int64(time.Second), func(r Request, why FeedbackDrop) { dropped = append(dropped, why) })
	if len(dropped) != 0 {
		t.Fatal("expired at exactly the timeout")
	}
	p.ExpireWhy(int64(time.Second)+1, func(r Request, why FeedbackDrop) { dropped = append(dropped, why) })
	if len(dropped) != 1 || dropped[0] != DropTimeout || p.Len() != 0 {
		t.Errorf("dropped %v, Len %d", dropped, p.Len())
	}
	// Idle, at full quality: no wake-ups needed.
	if _, ok := p.NextExpiry(); ok {
		t.Error("an idle policy asks to be woken")
	}
}

func TestFeedbackConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  FeedbackConfig
		want string
	}{
		{FeedbackConfig{Classes: []FeedbackClass{}}, "Classes"},
		{FeedbackConfig{Classes: []FeedbackClass{{Name: "a"}}}, "Classes[0].Weight"},
		{FeedbackConfig{Classes: []FeedbackClass{{Name: "a", Weight: 1}, {Name: "a", Weight: 1}}}, "Classes[1].Name"},
		{FeedbackConfig{Q1: 0.5}, "Q1"},
		{FeedbackConfig{Q1: -2.5}, "Q1"},
		{FeedbackConfig{Q0: -1, Q1: -0.5}, "Q0"},
		{FeedbackConfig{Q0: 5, Q1: -0.5}, "Q0"},
		{FeedbackConfig{Period: time.Microsecond}, "Period"},
		{FeedbackConfig{Trees: 256}, "Trees"},
		{FeedbackConfig{A: math.NaN()}, "A, B"},
		{FeedbackConfig{Utilization: 1.5}, "Utilization"},
		{FeedbackConfig{RefusePeriods: -1}, "RefusePeriods"},
		{FeedbackConfig{MergeGain: 2}, "MergeGain"},
		{FeedbackConfig{Merge: 9}, "Merge"},
	} {
		_, err := NewFeedback(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %s", c.cfg, err, c.want)
		}
	}
}

// In steady state (queues grown, periods ending, refusals and content
// adaptation running) Enqueue, Next, Completed and Expire allocate
// nothing; the run proves it went through periods, refusals and
// dispatches.
func TestFeedbackDoesNotAllocate(t *testing.T) {
	for _, merge := range []MergeMode{MergePlanned, MergePerRequest} {
		t.Run(merge.String(), func(t *testing.T) { testFeedbackDoesNotAllocate(t, merge) })
	}
}

func testFeedbackDoesNotAllocate(t *testing.T, merge MergeMode) {
	p := newFeedbackT(t, FeedbackConfig{Period: fbPeriod, Trees: 3, A: 0.0004, TargetQueue: 5, Merge: merge,
		Classes: []FeedbackClass{{Name: "a", Weight: 2}, {Name: "b", Weight: 1}}})
	now := int64(0)
	r := Request{Client: netip.MustParseAddr("198.18.0.7")}
	drops := 0
	step := func() {
		now += int64(time.Millisecond)
		for _, c := range [...]string{"a", "b", "a"} {
			r.Customer = c
			_ = p.Enqueue(r, now)
		}
		p.Next(now)
		p.Next(now)
		p.Completed(1000, now)
		p.ExpireWhy(now, func(Request, FeedbackDrop) { drops++ })
	}
	for range 2000 { // grow every ring to its steady size
		step()
	}
	before, dispatched := drops, p.Snapshot()[0].Dispatched
	if allocs := testing.AllocsPerRun(1000, step); allocs != 0 {
		t.Fatalf("%v allocations per round", allocs)
	}
	if drops == before || p.Snapshot()[0].Dispatched == dispatched || p.period < 20 {
		t.Fatalf("the measured rounds did not refuse (%d), dispatch or end periods (%d)", drops-before, p.period)
	}
}
