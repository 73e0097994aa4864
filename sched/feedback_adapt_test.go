package sched

import (
	"net/netip"
	"testing"
)

// G moves with every dispatch, by hand: M 3, a 0, b 1e-6 s/byte,
// responses of 1000 bytes per tree (0.001 U x s per tree), U* 0.85, k 1,
// T 100 ms.
//
//	periods 0-4, G 2.5 at the start: in each 10 dispatches from tree 3
//	  and 10 completions of 3000 bytes (0.003 each: U 0.3). The cost is
//	  not known yet (costWarmup 5), so G takes the per-period step at
//	  each end: 2.5 + 0.85 - 0.3 = 3.05, clamped to 3; time and
//	  dispatches move nothing during a period. After period 4 the
//	  averages hold 1000 bytes per tree: a dispatch from tree 1 costs
//	  0.001.
//	G set to 1.5; 20 dispatches from tree 1, 5 from tree 2: each costs
//	  k * 0.001 * tree / 0.1 = 0.01 per tree: 1.5 - 0.2 - 0.1 = 1.2.
//	  A completion now moves nothing: 1.2.
//	T/2 later: credit 0.5 * 0.85: 1.625.
//	a call T+1 after that (a stall): no credit, 1.625; a dispatch from
//	  tree 1: 1.615.
//	G 0.005, a dispatch from tree 1: 0 (clamped); G 2.999, 1 ms later
//	(credit 0.0085): 3 (clamped).
func TestFeedbackGMovesWithEachDispatch(t *testing.T) {
	c := newContentAdaptor(3, 0, 1e-6, 0.85, 1, fbT)
	c.elapse(0)
	c.g = 2.5
	for period := range int64(costWarmup) {
		for range 10 {
			c.dispatched(3)
			c.completed(3000)
		}
		c.elapse(period*fbT + fbT/2)
		if _, ok := c.dispatchCost(1); ok || period == 0 && c.g != 2.5 {
			t.Fatalf("period %d: cost known %v, G %v; want unknown, and 2.5 until period 0 ends", period, ok, c.g)
		}
		c.endPeriod(0.1, true)
		c.elapse((period + 1) * fbT)
	}
	if cost, ok := c.dispatchCost(1); !ok || !near(cost, 0.001) || c.g != 3 || !near(c.u, 0.3) {
		t.Fatalf("after %d periods: cost of tree 1 %v %v, G %v, U %v; want 0.001, 3 (clamped), 0.3", costWarmup, cost, ok, c.g, c.u)
	}
	const at = costWarmup * fbT
	c.g = 1.5
	for range 20 {
		c.dispatched(1)
	}
	for range 5 {
		c.dispatched(2)
	}
	c.completed(1000)
	if !near(c.g, 1.2) {
		t.Errorf("G %v after 20 dispatches from tree 1 and 5 from tree 2, want 1.2", c.g)
	}
	c.elapse(at + fbT/2)
	if !near(c.g, 1.625) {
		t.Errorf("G %v after half a period, want 1.625", c.g)
	}
	c.elapse(at + fbT/2 + fbT + 1)
	if !near(c.g, 1.625) {
		t.Errorf("G %v after a call more than a period later, want 1.625 (no credit)", c.g)
	}
	c.dispatched(1)
	if !near(c.g, 1.615) {
		t.Errorf("G %v after a dispatch from tree 1, want 1.615", c.g)
	}
	c.g = 0.005
	c.dispatched(1)
	if c.g != 0 {
		t.Errorf("G %v below 0, want clamped to 0", c.g)
	}
	c.g = 2.999
	c.elapse(at + fbT/2 + fbT + 1 + fbT/100)
	if c.g != 3 {
		t.Errorf("G %v above M, want clamped to 3", c.g)
	}
}

// Through the policy: Next charges G with the tree it serves the
// request from. a 0.001 s per request, b 1e-6 s per byte, 1000 bytes per
// tree learnt (averages 2000 bytes, 2 trees, warm), k 1, T 100 ms, G 2 (tree 2
// for everyone): cost 0.001 + 1e-6 * 1000 * 2 = 0.003, G 2 - 0.003/0.1 =
// 1.97. Enqueue charges nothing.
func TestFeedbackNextChargesTheTreeServed(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Period: fbPeriod, Trees: 3, A: 1e-3, B: 1e-6, Classes: []FeedbackClass{{Name: "a", Weight: 1}}})
	p.adapt.avgBytes, p.adapt.avgServed, p.adapt.avgTrees, p.adapt.learnt = 2000, 1, 2, costWarmup
	p.adapt.g = 2
	if err := p.Enqueue(Request{ID: 1, Customer: "a", Client: netip.MustParseAddr("198.18.0.9")}, 0); err != nil {
		t.Fatal(err)
	}
	if p.adapt.g != 2 {
		t.Fatalf("G %v after Enqueue, want 2", p.adapt.g)
	}
	r, ok := p.Next(0)
	if !ok || r.Tree != 2 || !near(p.Adaptation().G, 1.97) {
		t.Errorf("Next = tree %d %v, G %v; want tree 2, G 1.97", r.Tree, ok, p.Adaptation().G)
	}
}

// The averages the cost is learnt from decay alike in periods without
// traffic, so an idle spell leaves it as it was: 2000 bytes over 2
// trees, then 20 empty periods: a dispatch from tree 1 still costs
// 1e-6 * 1000.
func TestFeedbackDispatchCostSurvivesIdlePeriods(t *testing.T) {
	c := newContentAdaptor(3, 0, 1e-6, 0.85, 1, fbT)
	c.avgBytes, c.avgServed, c.avgTrees, c.learnt = 2000, 1, 2, costWarmup
	for range 20 {
		c.endPeriod(0.1, true)
	}
	if cost, ok := c.dispatchCost(1); !ok || !near(cost, 0.001) {
		t.Errorf("cost of tree 1 %v %v after 20 idle periods, want 0.001", cost, ok)
	}
}

// With GStepPerPeriod (g_step: period) G keeps the published law: the
// dispatches of a learnt cost move it not at all, the period's U does,
// by k*(U* - U).
func TestFeedbackGStepPerPeriodIgnoresDispatches(t *testing.T) {
	c := newContentAdaptor(3, 0, 1e-6, 0.85, 1, fbT)
	c.perPeriod = true
	c.elapse(0)
	for period := range int64(2 * costWarmup) {
		for range 10 {
			c.dispatched(3)
			c.completed(3000)
		}
		c.endPeriod(0.1, true)
		c.elapse((period + 1) * fbT)
	}
	if _, ok := c.dispatchCost(1); ok {
		t.Fatal("a dispatch cost is known: G would move with dispatches")
	}
	c.g = 2
	for range 50 {
		c.dispatched(1)
	}
	c.elapse(2*costWarmup*fbT + fbT/2)
	if c.g != 2 {
		t.Fatalf("G %v after 50 dispatches and half a period, want 2", c.g)
	}
	for range 10 {
		c.completed(10000) // U = 1e-6 * 100000 B / 0.1 s = 1.0
	}
	c.endPeriod(0.1, true)
	if !near(c.u, 1) || !near(c.g, 2+(0.85-1)) {
		t.Fatalf("after the period: U %v, G %v; want 1 and 1.85", c.u, c.g)
	}
}
