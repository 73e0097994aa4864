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
type contentAdaptor struct {
	m               int
	a, b, target, k float64
	g, u            float64
	served, bytes   uint64 // current period
	lastR, lastW    float64
	enabled         bool
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
}

// endPeriod closes a period of the given length in seconds.
func (c *contentAdaptor) endPeriod(seconds float64) {
	c.lastR, c.lastW = float64(c.served)/seconds, float64(c.bytes)/seconds
	c.served, c.bytes = 0, 0
	if !c.enabled {
		return
	}
	c.u = utilization(c.a, c.b, c.lastR, c.lastW)
	c.g = nextG(c.g, c.k, c.target, c.u, c.m)
}
