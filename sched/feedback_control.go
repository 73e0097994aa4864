package sched

import "math"

// queueLoop is one class's queue-length controller and its actuator, the
// published loop. Every period T:
//
//	q(t)         = q(t-T) + in(t) - out(t)
//	e(t)         = target_q - q(t)
//	target_in    = in(t) + Q0*e(t) + Q1*e(t-T)      (for the next period)
//
// where in counts the requests admitted into the class's queue during
// the period (passed by the actuator, taken from the reserve queue, or
// exempt from it) and out those handed out by Next or expired. q is
// simply the queue's length at the period's end, which is what the
// recursion adds up to.
//
// The actuator predicts the next period's arrivals as the mean of the
// last History periods', separately for exempt requests (those of known
// sessions, which always pass) and gated ones (new sessions), and passes
// each gated request with probability
//
//	p = (target_in - predicted exempt) / predicted gated,   clamped to [0, 1]
//
// (1 while no gated arrivals were seen and target_in leaves room). The Feedback policy puts the
// requests it does not pass in the class's reserve queue and, at the end
// of the period, tops the queue up from it when fewer than target_in were
// admitted (topUp).
//
// The in of the step is min(admitted, target_in): what the loop asked
// for and got. Taking the admissions as they happened keeps a period
// whose arrivals fell short of the target from winding the loop up; not
// counting admissions beyond the target matters as much, because they
// are one-sided (a period whose draws came out low is topped up to
// target_in from the reserve, one whose draws came out high is not cut
// back), and built into the next target they would hold the queue
// about 4 x the excess above target_q: 30 instead of 20 in the
// single-class model, where the step as written leaves it at 19.2 with
// 85% of the periods within 20% of target_q.
type queueLoop struct {
	q0, q1  float64
	targetQ float64

	ePrev    float64 // e(t-T)
	targetIn float64 // for the current period
	p        float64 // pass probability of gated arrivals, current period

	in, out            int // admitted and removed, current period
	gated, exempt      int // arrivals, current period
	histGated, histExm []int
	histN, histAt      int

	// The last completed period, for status.
	lastQ, lastE, lastIn, lastOut int
}

func newQueueLoop(q0, q1 float64, targetQ, history int) queueLoop {
	return queueLoop{
		q0: q0, q1: q1, targetQ: float64(targetQ),
		// As if a period had just ended with an empty queue and nothing
		// admitted: fill the queue to its target.
		targetIn:  max(q0*float64(targetQ), 0),
		p:         1,
		histGated: make([]int, history),
		histExm:   make([]int, history),
	}
}

// piStep is the loop's control law: the number of requests to admit in
// the next period, given this period's in and the errors e(t), e(t-T).
// It is never negative: a queue above its target is drained by admitting
// nothing.
func piStep(in, e, ePrev, q0, q1 float64) float64 {
	return max(in+q0*e+q1*ePrev, 0)
}

// passProbability is the actuator's p for a period: the part of
// targetIn that the predicted exempt arrivals leave, spread over the
// predicted gated arrivals.
func passProbability(targetIn, predExempt, predGated float64) float64 {
	room := targetIn - predExempt
	switch {
	case room <= 0:
		return 0
	case predGated <= 0:
		return 1
	}
	return min(room/predGated, 1)
}

// arrive counts an arrival and says whether it passes: exempt ones
// always do, gated ones when the draw u (uniform in [0, 1)) is below p.
// A passed request is not yet counted as admitted (see admit): the queue
// may still be full.
func (l *queueLoop) arrive(exempt bool, u float64) bool {
	if exempt {
		l.exempt++
		return true
	}
	l.gated++
	return u < l.p
}

// topUp is how many requests to take from a reserve queue of reserve
// requests at the end of the period: what target_in still lacks.
func (l *queueLoop) topUp(reserve int) int {
	want := int(math.Round(l.targetIn)) - l.in
	return min(max(want, 0), reserve)
}

// endPeriod closes the period with the queue at length q and prepares
// the next one: the PI step, the arrival history and p.
func (l *queueLoop) endPeriod(q int) {
	e := l.targetQ - float64(q)
	l.targetIn = piStep(min(float64(l.in), l.targetIn), e, l.ePrev, l.q0, l.q1)
	l.ePrev = e
	l.histGated[l.histAt], l.histExm[l.histAt] = l.gated, l.exempt
	l.histAt = (l.histAt + 1) % len(l.histGated)
	l.histN = min(l.histN+1, len(l.histGated))
	var g, x int
	for i := range l.histN {
		g += l.histGated[i]
		x += l.histExm[i]
	}
	n := float64(max(l.histN, 1))
	l.p = passProbability(l.targetIn, float64(x)/n, float64(g)/n)
	l.lastQ, l.lastE, l.lastIn, l.lastOut = q, int(math.Round(e)), l.in, l.out
	l.in, l.out, l.gated, l.exempt = 0, 0, 0, 0
}
