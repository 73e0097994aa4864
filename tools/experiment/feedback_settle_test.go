package experiment

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/sim"
)

// labRateConfig is the live experiment's cluster in the simulator: 5
// back-ends x 5 slots at 100 ms (250 req/s), 16 KiB objects in 3 trees,
// a period of 100 ms, target_q 20 and the gain 4, the step to 2x from 5 s
// to 35 s. Its service times are exponential where the test server's
// are fixed, so its U is the noisier of the two.
func labRateConfig(seed uint64) FeedbackConfig {
	cfg := DefaultFeedbackConfig()
	cfg.Service, cfg.Bytes = 100*time.Millisecond, 16<<10
	cfg.Policy.Period, cfg.Policy.TargetQueue = labFeedbackPeriod, labFeedbackTargetQueue
	cfg.Policy.Gain = labFeedbackGain
	cfg.Up, cfg.Down, cfg.End = 5*time.Second, 35*time.Second, 40*time.Second
	cfg.Seed = seed
	return cfg
}

// What "U settles within 10 s at 0.85 +/- 0.05 and stays there" means
// here: U over each whole second (a window of 1 s: the completions and
// bytes reported in it) from the step up to the step down; settled at
// second k when every second from k on is within 0.85 +/- 0.10 and at
// least 80% of them within 0.85 +/- 0.05 (settleTolerant), with the
// model's exponential service times. The strict reading (every second in
// +/- 0.05, logged) held in about half these runs while G moved once a
// period; moved at every dispatch it holds in all four here, and
// TestFeedbackLabRateSettlesStrictly asserts it with the lab's constant
// service times.
func TestFeedbackLabRateSettles(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		res, err := RunFeedback(labRateConfig(seed))
		if err != nil {
			t.Fatal(err)
		}
		s := res.Summary
		t.Logf("seed %d: settled %v s after the step (strictly: %v s); from 10 s on: mean %.3f, worst second %.3f off, "+
			"%.0f%% in the band; G back at M %.1f s after the step down; U per second %.2f",
			seed, s.USettleTolerantSeconds, s.USettleSeconds, s.USteadyMean, s.USteadyWorst, 100*s.USteadyInBand,
			s.GRecoverSeconds, s.USeconds)
		if s.USettleTolerantSeconds < 0 || s.USettleTolerantSeconds > 10 {
			t.Errorf("seed %d: U settled %v s after the step up, want within 10 s", seed, s.USettleTolerantSeconds)
		}
		if d := s.USteadyMean - 0.85; d < -0.01 || d > 0.01 {
			t.Errorf("seed %d: mean U %.3f from 10 s after the step, want 0.85 +/- 0.01", seed, s.USteadyMean)
		}
		if s.GRecoverSeconds < 0 || s.GRecoverSeconds > 10 {
			t.Errorf("seed %d: G back at M %v s after the step down, want within 10 s", seed, s.GRecoverSeconds)
		}
		if s.QueueTimeouts != 0 {
			t.Errorf("seed %d: %d queue timeouts", seed, s.QueueTimeouts)
		}
	}
}

// The same cluster with the front-end's process stalled for 300 ms now
// and then (every 8 s on average), as on the shared lab machine: the
// back-ends idle while nobody dispatches, and the reports of what they
// finished arrive in a burst when the stall ends. The periods of the
// stall and the one that ends it do not step G (sched's contentAdaptor),
// so G stays below M through the overload (at most 1.8-2.5 here); taken
// one by one they read U near 0 and sent G to M (3.00) in seeds 3 and 4,
// and whole seconds of full quality then overloaded the cluster.
func TestFeedbackLabRateStallsDoNotWindGUp(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		cfg := labRateConfig(seed)
		rng := rand.New(rand.NewPCG(seed, 99))
		for at := time.Duration(0); ; {
			at += time.Duration(rng.ExpFloat64() * float64(8*time.Second))
			if at+300*time.Millisecond > cfg.End {
				break
			}
			cfg.Stalls = append(cfg.Stalls, sim.Stall{At: at, For: 300 * time.Millisecond})
			at += 300 * time.Millisecond
		}
		res, err := RunFeedback(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var gMax float64
		for _, p := range res.Series {
			if p.TSeconds > (cfg.Up+10*time.Second).Seconds() && p.TSeconds <= cfg.Down.Seconds() {
				gMax = max(gMax, p.G)
			}
		}
		t.Logf("seed %d: %d stalls; G at most %.2f from 10 s after the step up; U per second %.2f", seed, len(cfg.Stalls), gMax,
			res.Summary.USeconds)
		if gMax >= 2.9 {
			t.Errorf("seed %d: G reached %.2f during the overload, want it kept from M (it settles near 1.3)", seed, gMax)
		}
		if s := res.Summary; s.QueueTimeouts != 0 || s.GRecoverSeconds < 0 || s.GRecoverSeconds > 10 {
			t.Errorf("seed %d: %d queue timeouts, G back at M %v s after the step down", seed, s.QueueTimeouts, s.GRecoverSeconds)
		}
	}
}

// While the content adaptor, not the loops, absorbs the overload (the
// lab-rate step to 2x with 3 trees: queues short, hardly anything
// refused by the loop), proQoS still tracks the weights 3:2:1: the lower
// classes take the degradation first (sched's Feedback.planQuality).
// With one G for every class it stayed near 1/3 each.
func TestFeedbackProQoSTracksSharesWhileDegrading(t *testing.T) {
	for seed := uint64(1); seed <= 2; seed++ {
		cfg := labRateConfig(seed)
		res, err := RunFeedback(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var pro [3]float64
		var n int
		var quality [3]float64
		var qn [3]int
		for _, p := range res.Series {
			if p.TSeconds <= (cfg.Up+10*time.Second).Seconds() || p.TSeconds > cfg.Down.Seconds() {
				continue
			}
			n++
			for i, c := range p.Classes {
				pro[i] += c.ProQoS
				if !math.IsNaN(c.Quality) {
					quality[i] += c.Quality
					qn[i]++
				}
			}
		}
		for i := range pro {
			pro[i] /= float64(n)
			quality[i] /= float64(max(qn[i], 1))
		}
		s := res.Summary
		t.Logf("seed %d: proQoS %.3f %.3f %.3f (ratios %.2f : %.2f : 1), quality served %.2f %.2f %.2f; U mean %.3f, %d refused at the door",
			seed, pro[0], pro[1], pro[2], pro[0]/pro[2], pro[1]/pro[2], quality[0], quality[1], quality[2], s.USteadyMean, s.OverloadRefusals)
		if r := pro[0] / pro[2]; math.Abs(r-3)/3 > 0.1 {
			t.Errorf("seed %d: gold/bronze proQoS %.2f, want 3 +/- 10%%", seed, r)
		}
		if r := pro[1] / pro[2]; math.Abs(r-2)/2 > 0.1 {
			t.Errorf("seed %d: silver/bronze proQoS %.2f, want 2 +/- 10%%", seed, r)
		}
		if d := s.USteadyMean - 0.85; d < -0.01 || d > 0.01 {
			t.Errorf("seed %d: mean U %.3f, want 0.85 +/- 0.01", seed, s.USteadyMean)
		}
	}
}
