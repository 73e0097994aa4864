package experiment

import (
	"fmt"
	"math"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/sim"
)

// The feedback experiment (issue 10, simulated; feedback_lab.go runs it
// live): the front-end's
// controller with a feedback listener in tools/sim's cluster, three
// priority classes offering their weights' shares of a load that steps
// from Low to High times the capacity at Up and back at Down. It records
// every period the queue length of each class against target_q, its
// proQoS against its target share, the quality it was served, and the
// content adaptation's U and G.

// FeedbackConfig is one run of the feedback experiment;
// DefaultFeedbackConfig documents every value.
type FeedbackConfig struct {
	// Backends x Slots requests at once, each taking an exponential
	// Service at full quality and returning Bytes.
	Backends, Slots int
	Service         time.Duration
	Bytes           uint64
	// Distribution of the service times: sim.Exponential (the zero
	// value) or sim.Constant, as the lab's test server serves.
	Distribution sim.Distribution
	// Classes and their weights; each offers its weight's share of the
	// load.
	Classes []string
	Weights []float64
	// Low and High are the offered loads in units of capacity; the load
	// is High from Up to Down and Low otherwise, until End.
	Low, High     float64
	Up, Down, End time.Duration
	Trees         int     // content trees M; 1: no content adaptation
	TargetUtil    float64 // U*
	Seed          uint64
	Policy        sched.FeedbackConfig // the policy's other settings (zero: defaults)
	// Stalls are times the front-end's process does not run (sim.Stall),
	// as on a loaded machine.
	Stalls []sim.Stall
}

// DefaultFeedbackConfig is the lab cluster of the published experiments
// (5 back-ends x 5 slots at 20 ms: 1250 req/s), gold 3, silver 2,
// bronze 1, a step from 0.5 to 2 times the capacity from 10 s to 40 s,
// 60 s in all, three content trees with the utilization calibrated on
// bandwidth (b = 1 / (capacity x 64 KiB)), U* = 0.85.
func DefaultFeedbackConfig() FeedbackConfig {
	return FeedbackConfig{
		Backends: 5, Slots: 5, Service: 20 * time.Millisecond, Bytes: 64 << 10,
		Classes: []string{"gold", "silver", "bronze"}, Weights: []float64{3, 2, 1},
		Low: 0.5, High: 2, Up: 10 * time.Second, Down: 40 * time.Second, End: 60 * time.Second,
		Trees: 3, TargetUtil: sched.DefaultFeedbackUtilization, Seed: 1,
	}
}

// Capacity is the request rate the cluster serves at full quality.
func (c FeedbackConfig) Capacity() float64 {
	return float64(c.Backends*c.Slots) / c.Service.Seconds()
}

func (c FeedbackConfig) validate() error {
	switch {
	case c.Backends < 1 || c.Slots < 1 || c.Service <= 0:
		return fmt.Errorf("experiment: Backends, Slots and Service must be > 0")
	case len(c.Classes) == 0 || len(c.Classes) != len(c.Weights):
		return fmt.Errorf("experiment: need as many Weights as Classes, at least one")
	case !(c.Low >= 0) || !(c.High >= 0):
		return fmt.Errorf("experiment: Low and High must be >= 0")
	case !(0 <= c.Up && c.Up <= c.Down && c.Down <= c.End) || c.End <= 0:
		return fmt.Errorf("experiment: need 0 <= Up <= Down <= End, End > 0")
	case c.Trees < 1:
		return fmt.Errorf("experiment: Trees must be >= 1")
	}
	return nil
}

// FeedbackPoint is the state at the end of one period.
type FeedbackPoint struct {
	TSeconds float64 `json:"t_s"`
	Load     float64 `json:"offered_load"` // x capacity
	U        float64 `json:"utilization"`
	G        float64 `json:"g"`
	// Completions and Bytes are the front-end's counts of completions
	// and response bytes reported so far (FeedbackStatus), from which
	// the summary measures U over whole seconds.
	Completions uint64               `json:"completions"`
	Bytes       uint64               `json:"response_bytes"`
	Classes     []FeedbackClassPoint `json:"classes"`
}

// FeedbackClassPoint is one class at one FeedbackPoint.
type FeedbackClassPoint struct {
	Name string `json:"name"`
	// Queued is the admitted queue when the point was sampled, at the
	// sampler's phase of the policy's period; PeriodEndQ is the loop's
	// q(t) at the end of the policy period that ended nearest the
	// point's time (see fillPeriodEnds), noPeriodEnd (-1) when no
	// sample showed it.
	Queued     int `json:"queued"`
	PeriodEndQ int `json:"period_end_q"`
	// PeriodIn and PeriodOut are that period's in and out (admitted,
	// and served or expired): its q(t) is the one before plus In minus
	// Out.
	PeriodIn    int     `json:"period_in"`
	PeriodOut   int     `json:"period_out"`
	Reserve     int     `json:"reserve"`
	TargetQueue int     `json:"target_queue"`
	ProQoS      float64 `json:"pro_qos"`
	Share       float64 `json:"target_share"`
	// Quality is the mean tree/M of the requests dispatched during the
	// period (NaN when none were: JSON null, CSV empty).
	Quality float64 `json:"-"`
	// QualityJSON is Quality for JSON, which has no NaN.
	QualityJSON *float64 `json:"quality"`
	Dispatched  uint64   `json:"dispatched"`
	Refused     uint64   `json:"refused"` // by the loop and by tree 0, so far
}

// FeedbackSummary is what the run measured against issue 10's "Done
// means".
type FeedbackSummary struct {
	// ServedFraction is each class's share of its requests served during
	// the overload's second half; RatioToLast divides them by the last
	// class's (3:2:1 is the target).
	ServedFraction []float64 `json:"served_fraction"`
	RatioToLast    []float64 `json:"ratio_to_last"`
	// WithinTarget is each class's fraction of the periods of the
	// overload's second half that ended within 20% of target_q: the
	// loop's q(t) at the period's end (PeriodEndQ), over the
	// PeriodEndsJudged periods whose end a sample showed.
	// WithinTargetSampled is the same over the queue as sampled
	// (Queued), at the sampler's phase of the period.
	WithinTarget        []float64 `json:"within_20pct_of_target_q"`
	PeriodEndsJudged    []int     `json:"period_ends_judged"`
	WithinTargetSampled []float64 `json:"within_20pct_of_target_q_sampled"`
	// USeconds is U over each second of the run: a*R + b*W from the
	// completions and bytes reported during that second (a window of
	// 1 s; one period's U is too noisy to judge by itself).
	USeconds []float64 `json:"u_per_second"`
	// USettle is how long after the step up U (per second) entered
	// U* +/- 0.05 to stay there until the step down (-1: never);
	// USettleTolerant how long until it stayed within U* +/- 0.10 with
	// at least 80% of the seconds within U* +/- 0.05 (see
	// settleTolerant); GRecover how long after the step down G was back
	// at M.
	USettleSeconds         float64 `json:"u_settle_s"`
	USettleTolerantSeconds float64 `json:"u_settle_tolerant_s"`
	GRecoverSeconds        float64 `json:"g_recover_s"`
	// From 10 s after the step up to the step down: the mean of
	// USeconds, its largest distance from U*, and the fraction of its
	// seconds within U* +/- 0.05.
	USteadyMean      float64 `json:"u_steady_mean"`
	USteadyWorst     float64 `json:"u_steady_worst"`
	USteadyInBand    float64 `json:"u_steady_in_band"`
	QueueTimeouts    int     `json:"queue_timeouts"`
	OverloadRefusals int     `json:"overload_refusals"`
}

// FeedbackResult is a run's time series and summary.
type FeedbackResult struct {
	CapacityRPS float64 `json:"capacity_rps"`
	Trees       int     `json:"trees"`
	// A and B are the calibration U = A*R + B*W the front-end ran with.
	A       float64         `json:"a"`
	B       float64         `json:"b"`
	Series  []FeedbackPoint `json:"series"`
	Summary FeedbackSummary `json:"summary"`
}

// RunFeedback simulates cfg. The same cfg gives the same result.
func RunFeedback(cfg FeedbackConfig) (FeedbackResult, error) {
	if err := cfg.validate(); err != nil {
		return FeedbackResult{}, err
	}
	capacity := cfg.Capacity()
	var total float64
	for _, w := range cfg.Weights {
		total += w
	}
	pol := cfg.Policy
	pol.Classes = nil
	for i, name := range cfg.Classes {
		pol.Classes = append(pol.Classes, sched.FeedbackClass{Name: name, Weight: cfg.Weights[i], Hosts: []string{name + ".example"}})
	}
	pol.Trees = cfg.Trees
	pol.Utilization = cfg.TargetUtil
	if cfg.Trees > 1 && pol.A == 0 && pol.B == 0 {
		pol.B = 1 / (capacity * float64(cfg.Bytes)) // calibrated on bandwidth
	}
	period := pol.Period
	if period == 0 {
		period = sched.DefaultFeedbackPeriod
	}
	scfg := sim.Config{
		Seed: cfg.Seed, Duration: cfg.End, Backends: cfg.Backends, Capacity: cfg.Slots, Trees: cfg.Trees,
		SampleEvery: period, Stalls: cfg.Stalls,
		Scheduler: controller.Config{
			Listeners: []controller.Listener{{Port: sim.Port, Policy: "feedback"}},
			Feedback:  controller.FeedbackConfig{Policy: pol},
		},
	}
	for i, name := range cfg.Classes {
		share := cfg.Weights[i] / total
		scfg.Customers = append(scfg.Customers, sim.Customer{
			Name: name, Host: name + ".example", Service: cfg.Service, Distribution: cfg.Distribution, Bytes: cfg.Bytes,
			Rate:  cfg.Low * capacity * share,
			Steps: []sim.RateStep{{At: cfg.Up, Rate: cfg.High * capacity * share}, {At: cfg.Down, Rate: cfg.Low * capacity * share}},
		})
	}
	res, err := sim.Run(scfg)
	if err != nil {
		return FeedbackResult{}, err
	}
	out := FeedbackResult{CapacityRPS: capacity, Trees: cfg.Trees, A: pol.A, B: pol.B}
	var prev *controller.FeedbackStatus
	var obs []statusObs
	for _, s := range res.Samples {
		obs = append(obs, statusObs{at: s.At, f: s.Feedback})
		f := s.Feedback
		load := cfg.Low
		if s.At > cfg.Up && s.At <= cfg.Down {
			load = cfg.High
		}
		pt := FeedbackPoint{TSeconds: s.At.Seconds(), Load: load, U: f.U, G: f.G, Completions: f.Completions, Bytes: f.Bytes}
		for i, c := range f.Classes {
			cp := FeedbackClassPoint{Name: c.Name, Queued: c.Queued, Reserve: c.Reserve, TargetQueue: c.TargetQueue,
				ProQoS: c.ProQoS, Share: c.Share, Dispatched: c.Dispatched, Refused: c.Refused + c.Overload,
				Quality: math.NaN()}
			var n, sum float64
			for k, count := range c.Trees {
				if prev != nil {
					count -= prev.Classes[i].Trees[k]
				}
				n += float64(count)
				sum += float64(count) * float64(k) / float64(cfg.Trees)
			}
			if n > 0 {
				q := sum / n
				cp.Quality, cp.QualityJSON = q, &q
			}
			pt.Classes = append(pt.Classes, cp)
		}
		out.Series = append(out.Series, pt)
		prev = f
	}
	fillPeriodEnds(out.Series, obs, period)
	out.Summary = summarizeFeedback(cfg, out.Series, period, pol.A, pol.B)
	for _, c := range res.Customers {
		out.Summary.QueueTimeouts += c.Rejected.Timeout
		out.Summary.OverloadRefusals += c.Rejected.Overload
	}
	return out, nil
}

func summarizeFeedback(cfg FeedbackConfig, series []FeedbackPoint, period time.Duration, a, b float64) FeedbackSummary {
	var s FeedbackSummary
	at := func(t time.Duration) int { return min(max(int(t/period)-1, 0), len(series)-1) }
	mid, down := at(cfg.Up+(cfg.Down-cfg.Up)/2), at(cfg.Down)
	n := len(cfg.Classes)
	s.ServedFraction, s.RatioToLast, s.WithinTarget = make([]float64, n), make([]float64, n), make([]float64, n)
	s.PeriodEndsJudged, s.WithinTargetSampled = make([]int, n), make([]float64, n)
	for i := range n {
		a, b := series[mid].Classes[i], series[down].Classes[i]
		d := float64(b.Dispatched - a.Dispatched)
		if d+float64(b.Refused-a.Refused) > 0 {
			s.ServedFraction[i] = d / (d + float64(b.Refused-a.Refused))
		}
		s.WithinTarget[i], s.PeriodEndsJudged[i] = withinTarget(series, i, mid, down,
			func(c FeedbackClassPoint) int { return c.PeriodEndQ })
		s.WithinTargetSampled[i], _ = withinTarget(series, i, mid, down, func(c FeedbackClassPoint) int { return c.Queued })
	}
	for i := range n {
		if last := s.ServedFraction[n-1]; last > 0 {
			s.RatioToLast[i] = s.ServedFraction[i] / last
		}
	}
	s.USeconds = uPerSecond(series, period, a, b)
	first, last := int(cfg.Up/time.Second), min(int(cfg.Down/time.Second), len(s.USeconds))
	s.USettleSeconds, s.USettleTolerantSeconds = -1, -1
	if first < last {
		during := s.USeconds[first:last]
		if k := settleStrict(during, cfg.TargetUtil); k >= 0 {
			s.USettleSeconds = float64(k)
		}
		if k := settleTolerant(during, cfg.TargetUtil); k >= 0 {
			s.USettleTolerantSeconds = float64(k)
		}
	}
	if steady := first + 10; steady < last {
		var in int
		for _, u := range s.USeconds[steady:last] {
			s.USteadyMean += u / float64(last-steady)
			s.USteadyWorst = max(s.USteadyWorst, math.Abs(u-cfg.TargetUtil))
			if math.Abs(u-cfg.TargetUtil) <= uBand {
				in++
			}
		}
		s.USteadyInBand = float64(in) / float64(last-steady)
	}
	s.GRecoverSeconds = -1
	for k := down + 1; k < len(series); k++ {
		if series[k].G >= float64(cfg.Trees) {
			s.GRecoverSeconds = series[k].TSeconds - cfg.Down.Seconds()
			break
		}
	}
	return s
}

// The band U must settle in (issue 10: U* +/- 0.05), and the wider one
// the tolerant criterion keeps every second within.
const (
	uBand     = 0.05
	uWideBand = 0.10
)

// uPerSecond is U over each whole second of the series: a*R + b*W from
// the completions and bytes counted between the points at the second's
// start and end. The counters make it exact whatever the samples in
// between (a live sampler misses some), and a period's U is too noisy to
// judge alone: at the lab's 250 req/s a 100 ms period sees some 20
// completions.
func uPerSecond(series []FeedbackPoint, period time.Duration, a, b float64) []float64 {
	perSec := int(time.Second / period)
	var out []float64
	var n0, b0 uint64
	for j := perSec - 1; j < len(series); j += perSec {
		p := series[j]
		out = append(out, a*float64(p.Completions-n0)+b*float64(p.Bytes-b0))
		n0, b0 = p.Completions, p.Bytes
	}
	return out
}

// settleStrict is the first second k of us from which every second is
// within target +/- uBand: "settles and stays there" read strictly. -1
// when even the last second is not.
func settleStrict(us []float64, target float64) int {
	k := len(us)
	for k > 0 && math.Abs(us[k-1]-target) <= uBand {
		k--
	}
	if k == len(us) {
		return -1
	}
	return k
}

// settleTolerant is the first second k of us from which every second is
// within target +/- uWideBand and at least 80% of them within target
// +/- uBand; -1 when there is none. It was the criterion a measurement
// at the lab's rates could be held to while G moved once a period:
// Poisson arrivals at 500 req/s vary by 4.5% per second, and that
// controller left U's per-second values 0.025-0.03 (rms) around U*, so
// about one second in fifteen left +/- 0.05 by chance, while a second
// beyond +/- 0.10 (over three times that) means the loop lost control,
// as it did when a stall sent G to M. With G moved at every dispatch
// (0.010-0.016 rms in the model, 0.013 live) the strict reading holds
// (TestFeedbackLabRateSettlesStrictly).
func settleTolerant(us []float64, target float64) int {
	best := -1
	in, n := 0, 0
	for k := len(us) - 1; k >= 0; k-- {
		d := math.Abs(us[k] - target)
		if d > uWideBand {
			break
		}
		n++
		if d <= uBand {
			in++
		}
		if 5*in >= 4*n {
			best = k
		}
	}
	return best
}
