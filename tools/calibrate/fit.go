// Package calibrate measures what the feedback policy's load monitor
// needs (issue 10, content adaptation): the front-end estimates the
// cluster's utilization as U = a*R + b*W from the request rate R (req/s)
// and the delivered bandwidth W (bytes/s) of each period, and a and b
// come from here.
//
// For each of several object sizes, Run raises the request rate step by
// step until errors appear (or the latency runs away: the queue grows),
// and keeps the largest rate served cleanly, Rmax, with its bandwidth
// Wmax. At that point the cluster is fully used, so each size gives one
// equation 1 = a*Rmax + b*Wmax; Fit solves them in the least-squares
// sense with a, b >= 0. Small objects pin down a (the per-request cost),
// large ones b (the per-byte cost).
//
// cmd/qsplice-calibrate runs it from a client host (in the lab: the
// client namespace) and prints the two numbers as the feedback section's
// keys, or writes them into a configuration file (RewriteConfig).
package calibrate

import (
	"errors"
	"fmt"
	"math"
)

// Point is one size's saturation point: Rmax requests/s delivering Wmax
// bytes/s.
type Point struct {
	Size int64   `json:"size"`
	RMax float64 `json:"rmax_per_s"`
	WMax float64 `json:"wmax_bytes_per_s"`
}

// Fit returns the a, b >= 0 that minimise the sum over points of
// (a*RMax + b*WMax - 1)^2. With points that cannot tell a and b apart
// (one size, or sizes in proportion to the rates) it fails.
func Fit(points []Point) (a, b float64, err error) {
	var rr, rw, ww, r, w float64
	for _, p := range points {
		if !(p.RMax > 0) || !(p.WMax >= 0) || math.IsInf(p.RMax, 0) || math.IsInf(p.WMax, 0) {
			return 0, 0, fmt.Errorf("calibrate: size %d: Rmax %v, Wmax %v are not a saturation point", p.Size, p.RMax, p.WMax)
		}
		rr += p.RMax * p.RMax
		rw += p.RMax * p.WMax
		ww += p.WMax * p.WMax
		r += p.RMax
		w += p.WMax
	}
	if len(points) < 2 {
		return 0, 0, errors.New("calibrate: need the saturation points of at least two sizes")
	}
	// Normal equations [rr rw; rw ww] [a b] = [r w].
	det := rr*ww - rw*rw
	if det > 1e-9*rr*ww {
		a, b = (r*ww-w*rw)/det, (w*rr-r*rw)/det
		if a >= 0 && b >= 0 {
			return a, b, nil
		}
	} else if ww == 0 {
		return 0, 0, errors.New("calibrate: no bytes delivered at any size: b cannot be measured")
	} else {
		return 0, 0, errors.New("calibrate: the sizes' points are in proportion: a and b cannot be told apart (use sizes further apart)")
	}
	// The unconstrained optimum has a negative cost: the best
	// non-negative fit lies on an axis, a alone or b alone.
	aOnly, bOnly := r/rr, w/ww
	if residual(points, aOnly, 0) <= residual(points, 0, bOnly) {
		return aOnly, 0, nil
	}
	return 0, bOnly, nil
}

func residual(points []Point, a, b float64) float64 {
	var s float64
	for _, p := range points {
		d := a*p.RMax + b*p.WMax - 1
		s += d * d
	}
	return s
}
