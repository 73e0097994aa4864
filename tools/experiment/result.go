package experiment

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/qsplice/qsplice/tools/session"
)

// Outcomes counts what became of every request the counted sessions
// would have made. Each attempt sent (first tries and retries alike) is
// exactly one of Completed, TimedOut or Dropped; NotGenerated counts the
// pages that sessions ended by abandonment or a drop would still have
// asked for.
type Outcomes struct {
	Completed    int `json:"completed"`     // answered while the client still waited
	TimedOut     int `json:"timed_out"`     // the client gave up first
	Dropped      int `json:"dropped"`       // refused by a full queue
	NotGenerated int `json:"not_generated"` // never sent: the session had ended
}

// Total is every request the sessions would have generated.
func (o Outcomes) Total() int { return o.Completed + o.TimedOut + o.Dropped + o.NotGenerated }

// Result is what one run measured. Counts cover the sessions that arrived
// in [Warmup, Duration), followed to their end.
type Result struct {
	Policy      string  `json:"policy"`
	Load        float64 `json:"load"`
	OfferedRPS  float64 `json:"offered_rps"`
	CapacityRPS float64 `json:"capacity_rps"`
	Sessions    int     `json:"sessions"`

	Requests        Outcomes `json:"requests"`
	CompletedPct    float64  `json:"completed_pct"`
	TimedOutPct     float64  `json:"timed_out_pct"`
	DroppedPct      float64  `json:"dropped_pct"`
	NotGeneratedPct float64  `json:"not_generated_pct"`
	// Retries counts the attempts that repeated a timed-out page.
	Retries int `json:"retries"`
	// Wasted counts attempts a back-end finished after the client had
	// given up on them (they are also in TimedOut).
	Wasted int `json:"wasted"`
	// ThroughputRPS is attempts completed in time per second of the
	// window [Warmup, Duration), whichever session sent them.
	ThroughputRPS float64 `json:"throughput_rps"`
	// MeanRTSeconds and CCDF are over every attempt the back-ends
	// served, in time or not: the response time the front-end logs,
	// from arrival to the end of service.
	MeanRTSeconds float64     `json:"mean_rt_s"`
	CCDF          []CCDFPoint `json:"rt_ccdf"`
	// PerClass counts Completed by page class, indexed by session.Stage
	// (in JSON, an object keyed by class name).
	PerClass [session.NumPages]int `json:"-"`
	// LIFOFraction is the share of utilization intervals in the window
	// after which browsing queues were served LIFO.
	LIFOFraction float64 `json:"lifo_fraction"`

	sortedRT []int64
}

// MarshalJSON writes the result with PerClass keyed by class name.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result // without this method
	perClass := make(map[string]int, session.NumPages)
	for j, n := range r.PerClass {
		perClass[session.Stage(j).String()] = n
	}
	return json.Marshal(struct {
		plain
		PerClass map[string]int `json:"completed_per_class"`
	}{plain(r), perClass})
}

// CCDFPoint is P(response time > T).
type CCDFPoint struct {
	TSeconds float64 `json:"t_s"`
	P        float64 `json:"p"`
}

// The CCDF grid stored in results: fine where response times below
// capacity lie (a fraction of a second), coarser in the overload tail,
// short enough to keep the JSON readable.
const (
	ccdfFineStep = 50 * time.Millisecond
	ccdfFineMax  = 2 * time.Second
	ccdfStep     = 250 * time.Millisecond
	ccdfMax      = 40 * time.Second
)

// ProbRTAbove returns the share of served attempts whose response time
// exceeded t.
func (r Result) ProbRTAbove(t time.Duration) float64 {
	return probAbove(r.sortedRT, int64(t))
}

func probAbove(sorted []int64, t int64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := sort.Search(len(sorted), func(i int) bool { return sorted[i] > t })
	return float64(len(sorted)-i) / float64(len(sorted))
}

// ccdfGrid samples P(RT > t) every ccdfFineStep up to ccdfFineMax, then
// every ccdfStep up to ccdfMax, stopping after the first zero.
func ccdfGrid(sorted []int64) []CCDFPoint {
	var out []CCDFPoint
	step := ccdfFineStep
	for t := time.Duration(0); t <= ccdfMax; t += step {
		if t >= ccdfFineMax {
			step = ccdfStep
		}
		p := probAbove(sorted, int64(t))
		out = append(out, CCDFPoint{TSeconds: t.Seconds(), P: p})
		if p == 0 {
			break
		}
	}
	return out
}
