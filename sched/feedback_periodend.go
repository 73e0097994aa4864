package sched

// Issue 10's "queue length per priority stays within +/- 20% of
// target_q after the transient" is a statement about the loop's q(t),
// the admitted queue at each period's end (queueLoop). A sampler that
// reads the queue now and then sees it at its own phase of the period,
// where it swings by what the dispatch bursts take out; so the policy
// keeps, per class, the q(t) of the last periodEndRingSize periods with
// each period's index, and a reader that comes by less often than once a
// period still gets every period exactly, as long as it comes at least
// once every periodEndRingSize periods (6.4 s at the lab's 100 ms).

// periodEndRingSize is how many period ends each class keeps.
const periodEndRingSize = 64

// FeedbackPeriodEnd is one class's queue at the end of one period: the
// loop's q(t) after the period's top-up, the value its PI step ran on,
// and the in and out of its step, so that q(t) = q(t-T) + In - Out says
// why a period ended where it did. Period counts the policy's periods
// from 0, the one that began at its first call; period k ends (k+1) x
// Period after that call (see Feedback.CurrentPeriod).
type FeedbackPeriodEnd struct {
	Period  int64
	Q       int
	In, Out int
}

// periodEndRing keeps the last periodEndRingSize period ends of one
// class, in a fixed array: recording one allocates nothing.
type periodEndRing struct {
	ends [periodEndRingSize]FeedbackPeriodEnd
	n    int // entries held
	next int // where the next entry goes
}

func (r *periodEndRing) add(e FeedbackPeriodEnd) {
	r.ends[r.next] = e
	r.next = (r.next + 1) % periodEndRingSize
	r.n = min(r.n+1, periodEndRingSize)
}

// appendTo appends the entries held to dst, oldest first.
func (r *periodEndRing) appendTo(dst []FeedbackPeriodEnd) []FeedbackPeriodEnd {
	start := (r.next - r.n + periodEndRingSize) % periodEndRingSize
	for i := range r.n {
		dst = append(dst, r.ends[(start+i)%periodEndRingSize])
	}
	return dst
}

// CurrentPeriod returns the index of the period in progress and when it
// began (the policy's time, ns); false before the first call. The
// periods run lazily, at the first call after they ended, so at a now
// later than start + Period the one reported has ended already and the
// next calls will close it: period k ends at start + (k - index + 1) x
// Period whatever the calls.
func (p *Feedback) CurrentPeriod() (index, start int64, ok bool) {
	if !p.started {
		return 0, 0, false
	}
	return p.period, p.periodEnd - int64(p.cfg.Period), true
}
