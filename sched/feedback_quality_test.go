package sched

import (
	"net/netip"
	"testing"
)

// The classes' shares of the degradation, by hand: shares 0.5, 1/3, 1/6
// (weights 3:2:1), proQoS 0.4, 0.3, 0.3, QualityGain 0.1, dispatches in
// the period 30, 20, 10, M 3 and G 2:
//
//	gold:   1 * (1 - 0.1 * (0.5 - 0.4) / 0.5)     = 0.98
//	silver: 1 * (1 - 0.1 * (1/3 - 0.3) / (1/3))   = 0.99
//	bronze: 1 * (1 - 0.1 * (1/6 - 0.3) / (1/6))   = 1.08
//	weighted mean (30*0.98 + 20*0.99 + 10*1.08) / 60 = 1: unchanged
//	G_i = 3 - (3 - 2) * d_i: 2.02, 2.01, 1.92
//
// A client hashing to N above 0.92 is served tree 2 by gold (2.02: tree
// 3 only below 0.02) and tree 1 by bronze (1.92: tree 2 only below
// 0.92). At G = M
// everyone gets M whatever d; with QualityGain < 0 the d stay 1.
func TestFeedbackPlanQuality(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Trees: 3, A: 0.01})
	// Logs of 100 entries giving proQoS 0.4, 0.3, 0.3 (sums 120, 90, 90
	// in trees).
	for i, sum := range []int{120, 90, 90} {
		for range sum / 3 {
			p.logs[i].add(3)
		}
	}
	p.served = []int{30, 20, 10}
	p.adapt.g = 2
	p.planQuality()
	for i, want := range []float64{0.98, 0.99, 1.08} {
		if !near(p.degrade[i], want) {
			t.Errorf("d[%d] = %v, want %v", i, p.degrade[i], want)
		}
	}
	for i, want := range []float64{2.02, 2.01, 1.92} {
		if got := p.classG(i); !near(got, want) {
			t.Errorf("G[%d] = %v, want %v", i, got, want)
		}
	}
	if st := p.Snapshot(); !near(st[2].G, 1.92) {
		t.Errorf("Snapshot G of bronze %v, want 1.92", st[2].G)
	}
	var hi netip.Addr
	for b := 1; b < 255; b++ {
		a := netip.AddrFrom4([4]byte{198, 18, 1, byte(b)})
		if n := clientHash(a); n > 0.92 {
			hi = a
			break
		}
	}
	if !hi.IsValid() {
		t.Fatal("no address hashing above 0.92 in 198.18.1.0/24")
	}
	if g, b := p.treeFor(0, hi), p.treeFor(2, hi); g != 2 || b != 1 {
		t.Errorf("client hashing to %.3f: gold tree %d, bronze tree %d; want 2 and 1", clientHash(hi), g, b)
	}
	p.adapt.g = 3
	if p.treeFor(2, hi) != 3 || p.classG(2) != 3 {
		t.Errorf("at G = M: bronze tree %d, G %v; want full quality", p.treeFor(2, hi), p.classG(2))
	}
	u := newFeedbackT(t, FeedbackConfig{Trees: 3, A: 0.01, QualityGain: -1})
	u.logs = p.logs
	u.served = []int{30, 20, 10}
	u.adapt.g = 2
	u.planQuality()
	if u.degrade[0] != 1 || u.degrade[2] != 1 {
		t.Errorf("uniform quality: d %v, want all 1", u.degrade)
	}
}
