package sched

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The actuator gives target_in to the tiers in order, with History 1:
// target_in 30 (in 20, q 10 against target_q 20: 20 + 10 + 0), predicted
// arrivals 5 transactional, 40 of known sessions, 20 new:
//
//	transactional: 30 / 5          -> 1
//	known session: (30 - 5) / 40   =  0.625
//	new session:   (30 - 45) / 20  -> 0
func TestFeedbackPassProbabilityTiers(t *testing.T) {
	l := newQueueLoop(1, -0.75, 20, 1)
	l.in = 20
	l.arrived = [fbTiers]int{5, 40, 20}
	l.endPeriod(10)
	if !near(l.targetIn, 30) {
		t.Fatalf("target_in %v, want 30", l.targetIn)
	}
	if l.p[tierTransactional] != 1 || !near(l.p[tierSession], 0.625) || l.p[tierNew] != 0 {
		t.Errorf("p = %v, want [1 0.625 0]", l.p)
	}
	if tierOf(&Request{Session: true, Transactional: true}) != tierTransactional || tierOf(&Request{Session: true}) != tierSession ||
		tierOf(&Request{}) != tierNew {
		t.Error("tierOf")
	}
}

// A known session's request that falls due in reserve takes the place of
// the newest admitted new-session request, which is refused instead.
// One class, target_q 1, History 1, RefusePeriods 1:
//
//	0:    new 1..6 pass (p 1) and are admitted.
//	T:    q 6, e -5: target_in 1 - 5 -> 0, every p 0.
//	T+1:  new 10, session 11, transactional 12 go to their reserves.
//	T+2:  new 7 and 8 are admitted (the test sets p 1 for new sessions).
//	2T:   target_in 0 - 7 + 3.75 -> 0: no top-up.
//	2T+1: all three fall due: 10 is refused; 11 takes 8's place and 12
//	      takes 7's (both still within their own RefusePeriods): refused
//	      10, 8, 7. The queue serves 1..6 before 11 and 12: they came
//	      first and have waited RefusePeriods (see sessionFirst).
func TestFeedbackDueSessionDisplacesAdmittedNewSession(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Period: fbPeriod, Classes: []FeedbackClass{{Name: "a", Weight: 1}},
		TargetQueue: 1, History: 1, RefusePeriods: 1, QueueTimeout: time.Hour,
		draw: scripted(t, 0, 0, 0, 0, 0, 0, .5, .5, .5, .5, .5)})
	for id := RequestID(1); id <= 6; id++ {
		p.Enqueue(Request{ID: id, Customer: "a"}, 0)
	}
	p.advance(fbT)
	p.Enqueue(Request{ID: 10, Customer: "a"}, fbT+1)
	p.Enqueue(Request{ID: 11, Customer: "a", Session: true}, fbT+1)
	p.Enqueue(Request{ID: 12, Customer: "a", Session: true, Transactional: true}, fbT+1)
	if st := p.Snapshot()[0]; st.Reserve != 3 || st.PassTransactional != 0 {
		t.Fatalf("reserve %d, p %v %v %v; want all three in reserve at p 0", st.Reserve, st.PassTransactional, st.PassSession, st.PassProbability)
	}
	p.classes[0].loop.p[tierNew] = 1
	p.Enqueue(Request{ID: 7, Customer: "a"}, fbT+2)
	p.Enqueue(Request{ID: 8, Customer: "a"}, fbT+2)
	var refused []RequestID
	p.ExpireWhy(2*fbT+1, func(r Request, why FeedbackDrop) {
		if why != DropRefused {
			t.Errorf("%d dropped for %v", r.ID, why)
		}
		refused = append(refused, r.ID)
	})
	if want := []RequestID{10, 8, 7}; !equalIDs(refused, want) {
		t.Errorf("refused %v, want %v", refused, want)
	}
	var served []RequestID
	for {
		r, ok := p.Next(2*fbT + 1)
		if !ok {
			break
		}
		served = append(served, r.ID)
	}
	if want := []RequestID{1, 2, 3, 4, 5, 6, 11, 12}; !equalIDs(served, want) {
		t.Errorf("served %v, want %v", served, want)
	}
	if st := p.Snapshot()[0]; st.Displaced != 2 || st.Refused != 3 {
		t.Errorf("displaced %d refused %d, want 2 and 3", st.Displaced, st.Refused)
	}
}

// When no new-session request is admitted, a known session's request
// that falls due is refused only after the lower tiers' reserve requests,
// which are refused before their own time; a transactional one after
// every other tier's. One class, target_q 1, History 1, RefusePeriods 1:
//
//	0:    session 1..6 pass (p 1) and are admitted.
//	T:    q 6: target_in 0, every p 0.
//	T+1:  session 11 to reserve; T+2: new 10; T+3: transactional 12.
//	2T+1: 11 falls due, no new session is admitted: 10 (due at 2T+2) is
//	      refused, then 11.
//	2T+3: 12 falls due with nothing below it waiting: refused.
func TestFeedbackDueSessionRefusedAfterLowerTiers(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Period: fbPeriod, Classes: []FeedbackClass{{Name: "a", Weight: 1}},
		TargetQueue: 1, History: 1, RefusePeriods: 1, QueueTimeout: time.Hour,
		draw: scripted(t, 0, 0, 0, 0, 0, 0, .5, .5, .5)})
	for id := RequestID(1); id <= 6; id++ {
		p.Enqueue(Request{ID: id, Customer: "a", Session: true}, 0)
	}
	p.advance(fbT)
	p.Enqueue(Request{ID: 11, Customer: "a", Session: true}, fbT+1)
	p.Enqueue(Request{ID: 10, Customer: "a"}, fbT+2)
	p.Enqueue(Request{ID: 12, Customer: "a", Session: true, Transactional: true}, fbT+3)
	type refusal struct {
		id RequestID
		at int64
	}
	var got []refusal
	for _, now := range []int64{2*fbT + 1, 2*fbT + 2, 2*fbT + 3} {
		p.ExpireWhy(now, func(r Request, _ FeedbackDrop) { got = append(got, refusal{r.ID, now}) })
	}
	want := []refusal{{10, 2*fbT + 1}, {11, 2*fbT + 1}, {12, 2*fbT + 3}}
	if len(got) != len(want) {
		t.Fatalf("refused %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("refusal %d: %v, want %v", i, got[i], want[i])
		}
	}
	if st := p.Snapshot()[0]; st.Queued != 6 || st.Reserve != 0 || st.Displaced != 0 {
		t.Errorf("after: %+v", st)
	}
}

func equalIDs(a, b []RequestID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The known sessions alone bring 1.5 times the capacity (75% of 600
// req/s against 300 served; 5% of the requests transactional, 20% new):
// the loop cannot leave every known-session request unrefused without
// the queue growing until its requests time out. With the tiers it
// holds the queue near target_q, no request reaches the queue timeout,
// every refusal comes within RefusePeriods periods of the arrival, the
// new sessions take every refusal they can (none is served once the
// overload holds), the transactional requests are all served, and the
// known sessions get what is left: (300 - 30) / 450 = 60% of theirs.
func TestFeedbackModelKnownSessionsBeyondCapacity(t *testing.T) {
	const capacity, offered = 300.0, 600.0
	p := newFeedbackT(t, FeedbackConfig{Seed: 4, QueueTimeout: 2 * time.Second, Period: modelPeriod, TargetQueue: modelTarget,
		Classes: []FeedbackClass{{Name: "shop", Weight: 1}}})
	rng := rand.New(rand.NewPCG(13, 13))
	type info struct {
		kind    fbTier
		at      int64
		counted bool
	}
	reqs := map[RequestID]info{}
	var arrived, served, refused [fbTiers]int
	var worst int64
	var qSum, qN, qIn int
	serveAcc := 0.0
	id := RequestID(0)
	warm := int64(5 * time.Second)
	lastPeriod := int64(0)
	for now := int64(0); now < int64(40*time.Second); now += int64(time.Millisecond) {
		if rng.Float64() < offered/1000 {
			id++
			r := Request{ID: id, Customer: "shop"}
			switch u := rng.Float64(); {
			case u < 0.05:
				r.Session, r.Transactional = true, true
			case u < 0.80:
				r.Session = true
			}
			in := info{kind: tierOf(&r), at: now, counted: now >= warm}
			reqs[id] = in
			if in.counted {
				arrived[in.kind]++
			}
			if err := p.Enqueue(r, now); err != nil {
				t.Fatal(err)
			}
		}
		p.ExpireWhy(now, func(r Request, why FeedbackDrop) {
			if why != DropRefused {
				t.Fatalf("request %d dropped for %v at %v", r.ID, why, time.Duration(now))
			}
			in := reqs[r.ID]
			worst = max(worst, now-in.at)
			if in.counted {
				refused[in.kind]++
			}
		})
		for serveAcc += capacity / 1000; serveAcc >= 1; serveAcc-- {
			r, ok := p.Next(now)
			if !ok {
				serveAcc = min(serveAcc, 1)
				break
			}
			if in := reqs[r.ID]; in.counted {
				served[in.kind]++
			}
		}
		if pe := p.period; pe != lastPeriod && now >= warm {
			lastPeriod = pe
			q := p.Snapshot()[0].Queued
			qSum += q
			qN++
			if q >= modelTarget*8/10 && q <= modelTarget*12/10 {
				qIn++
			}
		}
	}
	frac := func(k fbTier) float64 { return float64(served[k]) / float64(arrived[k]) }
	t.Logf("after 5 s: transactional %d/%d served, known %d/%d (%.3f), new %d/%d; refused %d %d %d; "+
		"slowest refusal %v; mean queue %.1f, %d of %d periods within 20%% of target_q",
		served[0], arrived[0], served[1], arrived[1], frac(tierSession), served[2], arrived[2],
		refused[0], refused[1], refused[2], time.Duration(worst), float64(qSum)/float64(qN), qIn, qN)
	if refused[tierTransactional] != 0 || frac(tierTransactional) < 0.99 {
		t.Errorf("transactional: %d refused, %.3f served, want none refused", refused[0], frac(tierTransactional))
	}
	if f := frac(tierSession); f < 0.55 || f > 0.65 {
		t.Errorf("known sessions served %.3f, want what the capacity leaves them, 0.60 +/- 0.05", f)
	}
	if served[tierNew] > arrived[tierNew]/100 {
		t.Errorf("%d of %d new-session requests served while known sessions were refused", served[tierNew], arrived[tierNew])
	}
	if limit := int64(DefaultFeedbackRefusePeriods) * int64(modelPeriod); worst > limit {
		t.Errorf("a refusal came %v after the arrival, more than %d periods", time.Duration(worst), DefaultFeedbackRefusePeriods)
	}
	if mean := float64(qSum) / float64(qN); mean < 0.8*modelTarget || mean > 1.2*modelTarget {
		t.Errorf("mean queue %.1f, want target_q %d +/- 20%%", mean, modelTarget)
	}
}

// A period during which the policy was not called at all (the front-end
// stalled) does not step G, nor does the one that ends the stall, whose
// U is measured over both. a 0.01 s/req (U = R/100), M 3, k 1, G set to
// 1.5, period T = 100 ms:
//
//	period 0 (calls at 1): 10 completions: R 100, U 1, G 1.5 - 0.15 = 1.35
//	periods 1, 2: no call.
//	period 3 (call at 3T+1): 30 completions reported at once. At 3T+1 G
//	  is still 1.35 (taken one by one, periods 1 and 2 would read U 0 and
//	  have sent G to 3, full quality for everyone just as the backlog
//	  lands).
//	at 4T: periods 1-3 measured together: R 30/0.3 s = 100, U 1, G
//	  still 1.35.
//	at 5T: period 4 with 5 completions: R 50, U 0.5, G 1.35 + 0.35 = 1.7.
func TestFeedbackUnobservedPeriodsMergeIntoTheNext(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Period: fbPeriod, Trees: 3, A: 0.01})
	p.Completed(0, 0)
	p.adapt.served--
	p.adapt.g = 1.5
	for range 10 {
		p.Completed(0, 1)
	}
	for range 30 {
		p.Completed(0, 3*fbT+1)
	}
	if a := p.Adaptation(); !near(a.G, 1.35) || !near(a.U, 1) || !near(a.R, 100) {
		t.Fatalf("after the stall: %+v, want G 1.35 U 1 R 100", a)
	}
	p.advance(4 * fbT)
	if a := p.Adaptation(); !near(a.G, 1.35) || !near(a.U, 1) || !near(a.R, 100) {
		t.Errorf("after the period that ended it: %+v, want G 1.35 U 1 R 100", a)
	}
	for range 5 {
		p.Completed(0, 4*fbT+1)
	}
	p.advance(5 * fbT)
	if a := p.Adaptation(); !near(a.G, 1.7) || !near(a.U, 0.5) {
		t.Errorf("a period later: %+v, want G 1.7 U 0.5", a)
	}
}
