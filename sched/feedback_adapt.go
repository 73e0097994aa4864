package sched

import (
	"math"
	"net/netip"
)

// contentAdaptor is the content-adaptation loop: a load monitor, the
// utilization controller and the adaptor that turns its output G into a
// content tree per client.
//
// Each period the monitor computes the utilization
//
//	U = A*R + B*W
//
// from the completion rate R (req/s) and the delivered bandwidth W
// (response bytes/s) the back-ends reported (proto.Feedback), with A and
// B from a calibration run (1 = A*Rmax + B*Wmax). The controller moves
//
//	G = clamp(G + k*(U* - U), 0, M)
//
// and the adaptor serves a client tree I+1 when the hash of its address
// N (in [0, 1)) is below F and tree I otherwise, where I and F are G's
// integer and fractional parts: the same client sees the same quality as
// long as G does not move past its N.
//
// # Periods nobody watched
//
// The monitor counts a completion when the front-end reads its report,
// so a period during which the front-end did not run at all (its
// process stalled: a loaded machine, a long garbage collection) shows
// no completions, and the one after it all of them at once. Taken as
// they come, the first reads U = 0 and pushes G up by k*U* per period,
// where the clamp at M keeps only part of it, and the burst then pulls G
// down without the matching part: on the shared 2-core lab a stall of
// 300 ms sent G from 1.2 to 3 and U through 1.0 for a second, which put
// whole seconds outside 0.85 +/- 0.05. So a period in which Feedback
// was not called at all (unobserved) does not step G, and neither does
// the period in which it is called again: that one's U, measured over
// it and the unobserved ones (as the status shows it), holds the
// backlog of reports and the back-ends' idle time while nobody
// dispatched, neither of which G caused. (Stepping it by k times the
// periods it spans would keep the sum of k*(U* - U) exact, but in the
// simulator, tools/sim's Stall, that idle time alone still sent G to M
// at most stalls.) A cluster that is simply idle is still called every
// period while G < M (NextExpiry), so its periods are observed and G
// climbs back as before.
type contentAdaptor struct {
	m               int
	a, b, target, k float64
	g, u            float64
	served, bytes   uint64 // current period
	lastR, lastW    float64
	enabled         bool
	// carried is how many unobserved periods the current one's
	// measurement spans besides itself.
	carried int
	// Every completion and byte counted so far, for measuring U over
	// any interval from outside.
	totalServed, totalBytes uint64
}

func newContentAdaptor(m int, a, b, target, k float64) contentAdaptor {
	return contentAdaptor{m: m, a: a, b: b, target: target, k: k, g: float64(m), enabled: a > 0 || b > 0}
}

// utilization is the load monitor's U = a*r + b*w.
func utilization(a, b, r, w float64) float64 { return a*r + b*w }

// nextG is one step of the utilization controller.
func nextG(g, k, target, u float64, m int) float64 {
	return min(max(g+k*(target-u), 0), float64(m))
}

// chooseTree is the adaptor: the tree served at G to a client hashing to
// n in [0, 1). 0 means refuse.
func chooseTree(g float64, m int, n float64) int {
	i := math.Floor(g)
	tree := int(i)
	if n < g-i {
		tree++
	}
	return min(max(tree, 0), m)
}

// clientHash maps a client address to [0, 1), uniformly and always the
// same for the same address: FNV-1a over its 16-byte form (IPv4 mapped),
// then the 64-bit finaliser of MurmurHash3 so that neighbouring
// addresses land far apart, then the top 53 bits as a fraction.
func clientHash(a netip.Addr) float64 {
	b := a.Unmap().As16()
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return float64(h>>11) / (1 << 53)
}

// tree is the tree for a client now.
func (c *contentAdaptor) tree(client netip.Addr) int {
	if !c.enabled || c.g >= float64(c.m) {
		return c.m
	}
	return chooseTree(c.g, c.m, clientHash(client))
}

// completed counts a response the back-ends reported done.
func (c *contentAdaptor) completed(bytes uint64) {
	c.served++
	c.bytes += bytes
	c.totalServed++
	c.totalBytes += bytes
}

// endPeriod closes a period of the given length in seconds; observed
// says whether Feedback was called during it (see contentAdaptor).
func (c *contentAdaptor) endPeriod(seconds float64, observed bool) {
	if !observed {
		c.carried++
		return
	}
	span := float64(1 + c.carried)
	stalled := c.carried > 0
	c.lastR, c.lastW = float64(c.served)/(seconds*span), float64(c.bytes)/(seconds*span)
	c.served, c.bytes, c.carried = 0, 0, 0
	if !c.enabled {
		return
	}
	c.u = utilization(c.a, c.b, c.lastR, c.lastW)
	if !stalled {
		c.g = nextG(c.g, c.k, c.target, c.u, c.m)
	}
}
