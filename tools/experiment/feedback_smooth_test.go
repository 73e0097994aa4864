package experiment

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/sim"
)

// labRateSeedTable runs labRateConfig with the given service-time
// distribution for each seed, and returns the summaries and a table of
// them: U's strict and tolerant settle after the step up, and over the
// steady seconds (10 s after the step up to the step down) its mean, the
// share within U* +/- 0.05, the worst second's distance from U* and the
// rms distance.
func labRateSeedTable(t *testing.T, dist sim.Distribution, seeds []uint64) ([]FeedbackSummary, string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%4s %7s %9s %6s %8s %6s %6s\n", "seed", "strict", "tolerant", "mean", "in-band", "worst", "rms")
	out := make([]FeedbackSummary, 0, len(seeds))
	for _, seed := range seeds {
		cfg := labRateConfig(seed)
		cfg.Distribution = dist
		res, err := RunFeedback(cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := res.Summary
		out = append(out, s)
		fmt.Fprintf(&b, "%4d %6.0fs %8.0fs %6.3f %7.0f%% %6.3f %6.3f\n", seed, s.USettleSeconds, s.USettleTolerantSeconds,
			s.USteadyMean, 100*s.USteadyInBand, s.USteadyWorst, steadyRMS(s, cfg))
	}
	return out, b.String()
}

// steadyRMS is the rms distance of U's steady seconds from U*.
func steadyRMS(s FeedbackSummary, cfg FeedbackConfig) float64 {
	first := int((cfg.Up + 10*time.Second) / time.Second)
	last := min(int(cfg.Down/time.Second), len(s.USeconds))
	var sum float64
	for _, u := range s.USeconds[first:last] {
		sum += (u - cfg.TargetUtil) * (u - cfg.TargetUtil)
	}
	return math.Sqrt(sum / float64(max(last-first, 1)))
}

// Issue 10's "U settles within 10 s at 0.85 +/- 0.05 and stays there",
// read strictly: every second from at most 10 s after the step up to the
// step down within the band, in every one of ten seeds of the lab-rate
// model with the lab's constant service times (the test server's). G
// moved once a period on the completions reported left U per second
// 0.023-0.031 rms around U* and settled strictly within 10 s in 1 of
// these 10 seeds (7-29 s, once never); moved at every dispatch by the
// cost it commits (sched's contentAdaptor, gain 4), every seed settles
// within 1 s, 0.009-0.017 rms. The table with exponential service
// times, noisier than the lab, is logged too: there 3 of these 10 seeds
// keep one second beyond the band (0.051-0.059 off; see contentAdaptor).
func TestFeedbackLabRateSettlesStrictly(t *testing.T) {
	seeds := []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	sums, table := labRateSeedTable(t, sim.Constant, seeds)
	t.Logf("constant service times (the lab's):\n%s", table)
	for i, s := range sums {
		if s.USettleSeconds < 0 || s.USettleSeconds > 10 {
			t.Errorf("seed %d: U settled strictly %v s after the step up, want within 10 s (-1: never)", seeds[i], s.USettleSeconds)
		}
		if d := s.USteadyMean - 0.85; math.Abs(d) > 0.01 {
			t.Errorf("seed %d: mean U %.3f from 10 s after the step, want 0.85 +/- 0.01", seeds[i], s.USteadyMean)
		}
		if s.QueueTimeouts != 0 {
			t.Errorf("seed %d: %d queue timeouts", seeds[i], s.QueueTimeouts)
		}
	}
	_, table = labRateSeedTable(t, sim.Exponential, seeds)
	t.Logf("exponential service times:\n%s", table)
}

// The same with a calibration that charges per request too (U = a*R +
// b*W, as qsplice-calibrate writes it): a cost 30% or 60% per request,
// the rest per byte. The per-request part of a dispatch's cost is a
// itself, only the bytes per tree are learnt, so U settles as fast as
// with b alone (0-1 s here). Learning the cost per tree as a whole took
// 4-9 s, as the average followed the trees' mix after the step.
func TestFeedbackLabRateSettlesStrictlyWithPerRequestCost(t *testing.T) {
	for _, share := range []float64{0.3, 0.6} {
		for seed := uint64(0); seed < 4; seed++ {
			cfg := labRateConfig(seed)
			cfg.Distribution = sim.Constant
			capacity := cfg.Capacity()
			cfg.Policy.A, cfg.Policy.B = share/capacity, (1-share)/(capacity*float64(cfg.Bytes))
			res, err := RunFeedback(cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := res.Summary
			t.Logf("a's share %.1f, seed %d: strict settle %v s, tolerant %v s; mean %.3f, worst second %.3f off, rms %.3f",
				share, seed, s.USettleSeconds, s.USettleTolerantSeconds, s.USteadyMean, s.USteadyWorst, steadyRMS(s, cfg))
			if s.USettleSeconds < 0 || s.USettleSeconds > 10 || math.Abs(s.USteadyMean-0.85) > 0.01 {
				t.Errorf("a's share %.1f, seed %d: U settled strictly %v s after the step up, mean %.3f; want within 10 s, 0.85 +/- 0.01",
					share, seed, s.USettleSeconds, s.USteadyMean)
			}
		}
	}
}
