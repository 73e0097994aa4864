package experiment

import (
	"slices"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
)

// fillPeriodEnds by hand: a series of 10 points (t = 0.1 .. 1.0 s), the
// policy's periods beginning at its first call at 30 ms, so period j
// ends at 130 + 100j ms, nearest point j. Three samples at phases of
// their own, slower than the period, the last one while the policy had
// not yet closed the period that ended before it (it closes them
// lazily), give each of periods 0-7 to its own point; points 8 and 9,
// whose ends no sample showed, stay unread. Of the 8 period ends q(t) =
// 10 16 20 24 25 30 18 21, five lie within 20% of target_q 20.
func TestFeedbackPeriodEndsFromSlowSamples(t *testing.T) {
	const period = 100 * time.Millisecond
	ends := []int{10, 16, 20, 24, 25, 30, 18, 21}
	sample := func(at time.Duration, inProgress int64, elapsed time.Duration) statusObs {
		cl := controller.FeedbackClassStatus{Name: "gold", TargetQueue: 20}
		for j := range inProgress {
			cl.PeriodEnds = append(cl.PeriodEnds, controller.FeedbackPeriodEnd{Period: j, Q: ends[j], In: 10 + int(j), Out: 20 + int(j)})
		}
		return statusObs{at: at, f: &controller.FeedbackStatus{Period: inProgress, PeriodElapsed: elapsed,
			PeriodLength: period, Classes: []controller.FeedbackClassStatus{cl}}}
	}
	series := make([]FeedbackPoint, 10)
	for k := range series {
		series[k] = FeedbackPoint{TSeconds: float64(k+1) / 10,
			Classes: []FeedbackClassPoint{{Name: "gold", TargetQueue: 20, Queued: 20}}}
	}
	obs := []statusObs{
		{at: 40 * time.Millisecond, f: &controller.FeedbackStatus{PeriodLength: period, Classes: []controller.FeedbackClassStatus{{}}}},
		sample(250*time.Millisecond, 2, 20*time.Millisecond),
		{}, // missed
		sample(720*time.Millisecond, 6, 90*time.Millisecond),
		sample(1000*time.Millisecond, 8, 170*time.Millisecond), // period 8 ended at 930 ms, not closed yet
	}
	fillPeriodEnds(series, obs, period)
	var got []int
	for _, p := range series {
		got = append(got, p.Classes[0].PeriodEndQ)
	}
	if want := append(slices.Clone(ends), noPeriodEnd, noPeriodEnd); !slices.Equal(got, want) {
		t.Fatalf("period-end q per point %v, want %v", got, want)
	}
	if c := series[3].Classes[0]; c.PeriodIn != 13 || c.PeriodOut != 23 {
		t.Errorf("point 3: in %d, out %d; want period 3's 13 and 23", c.PeriodIn, c.PeriodOut)
	}
	if w, n := withinTarget(series, 0, -1, 9, func(c FeedbackClassPoint) int { return c.PeriodEndQ }); w != 5.0/8 || n != 8 {
		t.Errorf("within 20%%: %v of %d period ends, want 5/8 of 8", w, n)
	}
	if w, n := withinTarget(series, 0, -1, 9, func(c FeedbackClassPoint) int { return c.Queued }); w != 1 || n != 10 {
		t.Errorf("sampled queue within 20%%: %v of %d, want all 10", w, n)
	}
	// The policy's first call 80 ms in: period j ends at 180 + 100j ms,
	// nearest point j+1; point 0 has no period end.
	late := []statusObs{sample(450*time.Millisecond, 3, 70*time.Millisecond)}
	fillPeriodEnds(series, late, period)
	if got := []int{series[0].Classes[0].PeriodEndQ, series[1].Classes[0].PeriodEndQ, series[3].Classes[0].PeriodEndQ,
		series[4].Classes[0].PeriodEndQ}; !slices.Equal(got, []int{noPeriodEnd, 10, 20, noPeriodEnd}) {
		t.Errorf("first call at 80 ms: points 0, 1, 3, 4 read %v, want [-1 10 20 -1]", got)
	}
}
