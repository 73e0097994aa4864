package loadgen

import (
	"time"

	"github.com/qsplice/qsplice/tools/session"
)

// SessionResult is what a session run came to, ready for encoding/json.
// It covers the sessions that arrived after the warm-up, and every
// request they sent, whenever it was sent.
type SessionResult struct {
	Target    string    `json:"target"`
	Start     time.Time `json:"start"`
	Mode      string    `json:"mode"` // "markov" or "wsesslog"
	WarmupS   float64   `json:"warmup_s"`
	DurationS float64   `json:"duration_s"`
	MeasuredS float64   `json:"measured_s"`
	// DrainS is how long the run went on after the measured window to
	// let the measured sessions end (at most SessionConfig.Drain).
	DrainS       float64 `json:"drain_s"`
	SessionRate  float64 `json:"session_rate"` // arrivals per second
	ThinkMeanS   float64 `json:"think_mean_s"`
	TimeoutMeanS float64 `json:"timeout_mean_s"` // mean patience per request
	Retries      int     `json:"retries"`
	AbandonProb  float64 `json:"abandon_prob"`
	// LeaveOnRefusal: a 503 ended its session at once (refused=leave).
	LeaveOnRefusal bool   `json:"leave_on_refusal"`
	Seed           uint64 `json:"seed"`
	Interrupted    bool   `json:"interrupted"`

	Sessions SessionCounts `json:"sessions"`
	// Classes are the page classes, in session.Stage order, then "other"
	// (replayed paths that are none of the shop's pages).
	Classes []ClassResult `json:"classes"`
	Total   ClassResult   `json:"total"`
}

// SessionCounts accounts for every session that arrived in the measured
// window: Arrived = Started + NotStarted and Started = Completed +
// Abandoned + Unfinished.
type SessionCounts struct {
	Started    int64 `json:"started"`
	NotStarted int64 `json:"not_started"` // MaxSessions were alive
	Completed  int64 `json:"completed"`   // reached the exit
	Abandoned  int64 `json:"abandoned"`   // the client gave up after a failed page
	Unfinished int64 `json:"unfinished"`  // still going when the run ended
}

// ClassResult counts one page class's requests: Requested = Completed +
// TimedOut + Refused + Other + Errors. NotGenerated counts, apart from
// those, the requests for the class that sessions which left early
// (abandoned after a failed page) would still have sent: the Markov walk
// of each is continued without sending from the page it left on until
// Exit (a replayed session's remaining requests). Requested plus
// NotGenerated is every request the ended sessions would have made, the
// simulator's (tools/experiment) definition of the experiment's total.
type ClassResult struct {
	Name      string `json:"name"`
	Requested int64  `json:"requested"`
	Completed int64  `json:"completed"` // 2xx within the client's patience
	TimedOut  int64  `json:"timed_out"` // patience ran out: the client closed the connection
	Refused   int64  `json:"refused"`   // 503
	Other     int64  `json:"other"`     // any other status
	Errors    int64  `json:"errors"`    // refused or reset connections and the like
	// NotGenerated are requests never sent: their session had left.
	NotGenerated int64 `json:"not_generated"`
	// Latency is send to last byte over completed requests.
	Latency LatencySummary `json:"latency"`
}

func (t *classTally) result(name string) ClassResult {
	return ClassResult{
		Name: name, Requested: t.requested, Completed: t.completed, TimedOut: t.timedOut,
		Refused: t.refused, Other: t.other, Errors: t.errors, NotGenerated: t.notGenerated,
		Latency: t.latency.Summary(),
	}
}

func (t *classTally) add(o *classTally) {
	t.requested += o.requested
	t.completed += o.completed
	t.timedOut += o.timedOut
	t.refused += o.refused
	t.other += o.other
	t.errors += o.errors
	t.notGenerated += o.notGenerated
	t.latency.Merge(&o.latency)
}

// result builds the run's result once every session has ended.
func (r *sessionRunner) result(stoppedAt time.Duration, interrupted bool) *SessionResult {
	end := r.cfg.Warmup + r.cfg.Duration
	m := r.cfg.Sessions.Model
	res := &SessionResult{
		Target: r.cfg.Target, Start: r.start, Mode: "markov",
		WarmupS: r.cfg.Warmup.Seconds(), DurationS: r.cfg.Duration.Seconds(),
		MeasuredS:   max(min(stoppedAt, end)-r.cfg.Warmup, 0).Seconds(),
		DrainS:      max(stoppedAt-end, 0).Seconds(),
		SessionRate: r.cfg.Sessions.Rate, ThinkMeanS: m.ThinkMean.Seconds(), TimeoutMeanS: m.TimeoutMean.Seconds(),
		Retries: m.Retries, AbandonProb: m.AbandonProb, LeaveOnRefusal: r.cfg.Sessions.LeaveOnRefusal,
		Seed: r.cfg.Seed, Interrupted: interrupted,
	}
	if len(r.cfg.Log) > 0 {
		res.Mode = "wsesslog"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Sessions = r.sessions
	names := make([]string, 0, session.NumPages+1)
	for p := range session.NumPages {
		names = append(names, session.Stage(p).String())
	}
	var total classTally
	for _, name := range append(names, "other") {
		t := r.classes[name]
		if t == nil {
			if name == "other" {
				continue
			}
			t = &classTally{}
		}
		total.add(t)
		res.Classes = append(res.Classes, t.result(name))
	}
	res.Total = total.result("total")
	return res
}
