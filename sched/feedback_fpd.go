package sched

// qosLog is a class's response-level log for the FPD merge: the quality
// of its last k requests, each recorded as the content tree it was
// served from (M for full quality, 1..M-1 degraded, 0 refused), so that
// the value of an entry is tree/M. absQoS is the running sum of the
// values; it is kept in whole trees (sum of the entries) so that it
// never drifts however many requests pass.
type qosLog struct {
	trees []uint8 // ring of the last k entries
	n, at int
	sum   int // sum of trees in the ring
}

func newQoSLog(k int) qosLog { return qosLog{trees: make([]uint8, k)} }

// add records one request served from tree (0: refused).
func (l *qosLog) add(tree int) {
	if l.n == len(l.trees) {
		l.sum -= int(l.trees[l.at])
	} else {
		l.n++
	}
	l.trees[l.at] = uint8(tree)
	l.sum += tree
	l.at = (l.at + 1) % len(l.trees)
}

// absQoS is the sum of the log's values, tree/M each.
func (l *qosLog) absQoS(m int) float64 { return float64(l.sum) / float64(m) }

// proQoS returns each class's absQoS divided by their sum, into out (one
// per log); all 0 while no class has any quality logged.
func proQoS(logs []qosLog, m int, out []float64) {
	var total float64
	for i := range logs {
		out[i] = logs[i].absQoS(m)
		total += out[i]
	}
	for i := range out {
		if total > 0 {
			out[i] /= total
		} else {
			out[i] = 0
		}
	}
}

// fpdPick is the merge step: among the classes with ok(i), the one whose
// proQoS is furthest below its target share (share - proQoS largest);
// ties go to the larger share, then to the class listed first. -1 when
// no class is ok.
func fpdPick(shares, pro []float64, ok func(int) bool) int {
	best := -1
	var bestGap float64
	for i := range shares {
		if !ok(i) {
			continue
		}
		gap := shares[i] - pro[i]
		if best < 0 || gap > bestGap || gap == bestGap && shares[i] > shares[best] {
			best, bestGap = i, gap
		}
	}
	return best
}
