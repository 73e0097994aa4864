package experiment

import (
	"math"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
)

// Issue 10's queue criterion is judged on the loop's own q(t), the
// admitted queue at each of the policy's period ends, which the status
// keeps for the last 64 periods (controller.FeedbackClassStatus's
// PeriodEnds). A sample of the queue "now" lands at the reader's phase
// of the period, where the queue swings by what the dispatch bursts
// take out: live, where each run samples at its own phase, gold read
// 57-100% of its samples within 20% of target_q in 12 runs while the
// model, sampling right at the period's end, read 100%. Both now read
// the period ends themselves, so they are judged alike.

// statusObs is one status sample: the feedback state and when, since
// the run's start, it was taken (for a live sample, the middle of its
// request).
type statusObs struct {
	at time.Duration
	f  *controller.FeedbackStatus
}

// noPeriodEnd marks a point no period end was read for.
const noPeriodEnd = -1

// fillPeriodEnds sets each series point's PeriodEndQ: point k, the state
// at (k+1) x period of the run, gets q(t) of the policy's period that
// ended nearest that time. The policy's periods are as long as the
// series' but begin at its first call, at any phase; the first sample
// that shows a period end fixes which policy period goes with which
// point (from the status's period in progress and how long ago it
// began), and every period end any sample shows then goes to its own
// point, exactly once, however often the samples came. A point no
// sample showed the end of (more than 64 periods between two samples,
// or before the policy's first period ended) keeps noPeriodEnd.
func fillPeriodEnds(series []FeedbackPoint, obs []statusObs, period time.Duration) {
	byK := make(map[int64]int, len(series)) // point k -> index in series
	for i := range series {
		for c := range series[i].Classes {
			series[i].Classes[c].PeriodEndQ = noPeriodEnd
		}
		byK[int64(math.Round(series[i].TSeconds/period.Seconds()))-1] = i
	}
	var offset int64 // policy period - point k
	anchored := false
	for _, o := range obs {
		if o.f == nil || o.f.PeriodLength != period {
			continue
		}
		if !anchored && len(o.f.Classes) > 0 && len(o.f.Classes[0].PeriodEnds) > 0 {
			// The period before the one in progress ended when that
			// one began.
			end := o.at - o.f.PeriodElapsed
			k := int64(math.Round(float64(end)/float64(period))) - 1
			offset, anchored = o.f.Period-1-k, true
		}
		if !anchored {
			continue
		}
		for c, cl := range o.f.Classes {
			for _, e := range cl.PeriodEnds {
				if i, ok := byK[e.Period-offset]; ok && c < len(series[i].Classes) {
					p := &series[i].Classes[c]
					p.PeriodEndQ, p.PeriodIn, p.PeriodOut = e.Q, e.In, e.Out
				}
			}
		}
	}
}

// withinTarget is the share of the points of (from, to] whose value v
// (skipped when negative: not read) lies within 20% of target_q, and
// how many were judged.
func withinTarget(series []FeedbackPoint, class, from, to int, v func(FeedbackClassPoint) int) (float64, int) {
	within, judged := 0, 0
	for k := from + 1; k <= to; k++ {
		c := series[k].Classes[class]
		q := v(c)
		if q < 0 {
			continue
		}
		judged++
		if math.Abs(float64(q-c.TargetQueue)) <= 0.2*float64(c.TargetQueue) {
			within++
		}
	}
	return float64(within) / float64(max(judged, 1)), judged
}
