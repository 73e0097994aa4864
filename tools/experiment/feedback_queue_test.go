package experiment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/sim"
)

// queueStats is one class's queue over the periods WithinTarget judges
// (the overload's second half): the mean of q(t) at the period ends
// and its rms distance from target_q.
func queueStats(res FeedbackResult, cfg FeedbackConfig, class int) (mean, rms float64) {
	period := cfg.Policy.Period
	at := func(t time.Duration) int { return min(max(int(t/period)-1, 0), len(res.Series)-1) }
	mid, down := at(cfg.Up+(cfg.Down-cfg.Up)/2), at(cfg.Down)
	n := 0.0
	for k := mid + 1; k <= down; k++ {
		c := res.Series[k].Classes[class]
		if c.PeriodEndQ == noPeriodEnd {
			continue
		}
		d := float64(c.PeriodEndQ - c.TargetQueue)
		mean += float64(c.PeriodEndQ)
		rms += d * d
		n++
	}
	n = max(n, 1)
	return mean / n, math.Sqrt(rms / n)
}

// labQueueRun is one seed of labQueueTable.
type labQueueRun struct {
	seed      uint64
	summary   FeedbackSummary
	mean, rms []float64 // per class
}

// labQueueTable runs the lab-rate model without content adaptation
// (trees 1: the loops bind, as live with -trees 1) with the lab's
// constant service times, changed by vary when not nil, for each seed,
// and tables per class the share of the periods of the overload's second
// half whose q(t) at the period's end is within 20% of target_q, the
// mean of q(t) and its rms distance from target_q, and the share of
// the samples (at the sampler's phase of the period) within 20%; then
// the served ratios and the queue timeouts.
func labQueueTable(t *testing.T, seeds []uint64, vary func(*FeedbackConfig)) ([]labQueueRun, string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%4s  %-26s  %-26s  %-26s  %s\n", "seed", "gold  in20% mean rms smpl", "silver", "bronze", "ratios  timeouts")
	var out []labQueueRun
	for _, seed := range seeds {
		cfg := labRateConfig(seed)
		cfg.Trees = 1
		cfg.Distribution = sim.Constant
		if vary != nil {
			vary(&cfg)
		}
		res, err := RunFeedback(cfg)
		if err != nil {
			t.Fatal(err)
		}
		run := labQueueRun{seed: seed, summary: res.Summary}
		fmt.Fprintf(&b, "%4d ", seed)
		for i := range cfg.Classes {
			mean, rms := queueStats(res, cfg, i)
			run.mean, run.rms = append(run.mean, mean), append(run.rms, rms)
			fmt.Fprintf(&b, "  %5.0f%% %5.1f %5.1f %5.0f%%  ", 100*res.Summary.WithinTarget[i], mean, rms,
				100*res.Summary.WithinTargetSampled[i])
		}
		fmt.Fprintf(&b, "  %.2f:%.2f:1  %d\n", res.Summary.RatioToLast[0], res.Summary.RatioToLast[1], res.Summary.QueueTimeouts)
		out = append(out, run)
	}
	return out, b.String()
}

// withStalls adds stalls of the front-end's process of 50 ms, every 2 s
// on average, as the live run's periods with half the dispatches show.
func withStalls(cfg *FeedbackConfig) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 99))
	for at := time.Duration(0); ; {
		at += time.Duration(rng.ExpFloat64() * float64(2*time.Second))
		if at+50*time.Millisecond > cfg.End {
			return
		}
		cfg.Stalls = append(cfg.Stalls, sim.Stall{At: at, For: 50 * time.Millisecond})
		at += 50 * time.Millisecond
	}
}

// Issue 10's "queue length per priority stays within +/- 20% of target_q
// after the transient", in the lab-rate model with adaptation off: 3
// classes 3:2:1, each offered twice its share of 250 req/s, target_q 20,
// a period of 100 ms, seeds 0-9, judged on the loop's q(t) at each
// period's end (fillPeriodEnds). The published one-sided actuator (a
// period's shortfall topped up from the reserve, its excess kept) left
// gold, the class with the most requests, 90-95% of the periods in the
// band (rms 2.7-3.2 around target_q), silver 96-98%, and with stalls
// gold 86-93%; capped at target_in while it rations (sched's
// queueLoop.full) every class holds 100% (rms 0.4-0.9), 97-100% with
// stalls. The served ratios stay within 10% of 3:2:1, nothing times
// out. The table with exponential service times (gold 71-85%: the
// outflow itself varies there) is logged only.
//
// The samples of the queue "now" (column smpl) agree with the period
// ends while the samples come right after them, as the simulator's do.
// Taken 50 ms from the period's end, as a live sampler may, they do
// not: with the lab's constant service of exactly one period the
// back-ends' slots keep their phase, the dispatches come in a burst of
// some 40 ms each period, and the queue swings within the period by
// what the burst takes out, gold within 20% in 33-85% of the samples
// while q(t) holds 100% of the period ends. The criterion is judged on
// the period ends there too (see queueLoop for what would hold the
// queue at every phase).
func TestFeedbackLabRateQueuesHoldTarget(t *testing.T) {
	seeds := []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	check := func(name string, runs []labQueueRun, minWithin, maxRMS float64) {
		t.Helper()
		for _, r := range runs {
			s := r.summary
			for i, w := range s.WithinTarget {
				if w < minWithin || r.rms[i] > maxRMS {
					t.Errorf("%s, seed %d, class %d: %.0f%% of the periods within 20%% of target_q, rms %.1f; want >= %.0f%%, rms <= %.1f",
						name, r.seed, i, 100*w, r.rms[i], 100*minWithin, maxRMS)
				}
			}
			if q := s.RatioToLast; math.Abs(q[0]-3)/3 > 0.1 || math.Abs(q[1]-2)/2 > 0.1 {
				t.Errorf("%s, seed %d: served ratios %.2f:%.2f:1, want 3:2:1 within 10%%", name, r.seed, q[0], q[1])
			}
			if s.QueueTimeouts != 0 {
				t.Errorf("%s, seed %d: %d queue timeouts", name, r.seed, s.QueueTimeouts)
			}
		}
	}
	runs, table := labQueueTable(t, seeds, nil)
	t.Logf("constant service times (the lab's):\n%s", table)
	check("constant", runs, 0.97, 1.5)
	runs, table = labQueueTable(t, seeds, withStalls)
	t.Logf("with 50 ms stalls every 2 s:\n%s", table)
	check("stalls", runs, 0.90, 2.5)
	_, table = labQueueTable(t, seeds, func(c *FeedbackConfig) { c.Distribution = sim.Exponential })
	t.Logf("exponential service times:\n%s", table)
	runs, table = labQueueTable(t, seeds, func(c *FeedbackConfig) { c.Stalls = []sim.Stall{{At: 0, For: 50 * time.Millisecond}} })
	t.Logf("sampled in mid-period (the front-end's first 50 ms stalled, so its periods end 50 ms after the samples):\n%s", table)
	check("mid-period samples", runs, 0.97, 1.5)
}

// longestUnserved is the longest run of consecutive periods in which
// class i had admitted requests queued and none was dispatched.
func longestUnserved(res FeedbackResult, i int) int {
	longest, run := 0, 0
	for k := 1; k < len(res.Series); k++ {
		c, prev := res.Series[k].Classes[i], res.Series[k-1].Classes[i]
		if c.Dispatched == prev.Dispatched && c.Queued > 0 {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// longestAllRefused is the longest run of consecutive periods in which
// class i's response-level log held only refusals (proQoS 0 while
// another class's is not).
func longestAllRefused(res FeedbackResult, i int) int {
	longest, run := 0, 0
	for _, p := range res.Series {
		if p.Classes[i].ProQoS == 0 && p.Classes[(i+1)%len(p.Classes)].ProQoS > 0 {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// Issue 10's "no class starves", at the step up itself: in the lab-rate
// model (adaptation off and on, constant service, seeds 0-9) no class
// with requests queued goes more than 5 periods (0.5 s) without a
// dispatch. Through the half load before the step the planned merge's
// weights wound up on proQoS gaps it could not close (every class served
// all it asked), bronze's to its floor of share/20, and after the step
// bronze got nothing for 71-87 periods (seeds 0-4, adaptation off),
// its slowest live responses 9.5-9.8 s; the weights now move only in
// periods the merge chose between classes, floored at share/4
// (sched's Feedback.planWeights): 0 periods. With adaptation on no
// class's log holds only refusals (everything refused at the door) for
// more than 20 periods: a class at proQoS 0 kept its share of the
// degradation, and bronze stayed refused for 12-81 periods (live 5-10
// s); now it is degraded less like any class below its share (sched's
// Feedback.planQuality): 3-17.
func TestFeedbackLabRateNoClassStarvesAfterStep(t *testing.T) {
	for _, trees := range []int{1, 3} {
		for seed := range uint64(10) {
			cfg := labRateConfig(seed)
			cfg.Trees = trees
			cfg.Distribution = sim.Constant
			res, err := RunFeedback(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var runs, refusedRuns []int
			for i := range cfg.Classes {
				runs = append(runs, longestUnserved(res, i))
				refusedRuns = append(refusedRuns, longestAllRefused(res, i))
				if runs[i] > 5 {
					t.Errorf("trees %d, seed %d: %s had requests queued and none dispatched for %d periods",
						trees, seed, cfg.Classes[i], runs[i])
				}
				if refusedRuns[i] > 20 {
					t.Errorf("trees %d, seed %d: %s's log held only refusals for %d periods", trees, seed, cfg.Classes[i], refusedRuns[i])
				}
			}
			t.Logf("trees %d, seed %d: longest runs of periods queued and unserved %v, of only refusals logged %v",
				trees, seed, runs, refusedRuns)
		}
	}
}
