package controller

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// FeedbackConfig configures the feedback listener policy (issue 10):
// sched.Feedback and the sched.FeedbackClassifier that sorts its
// requests into classes and recognises sessions. The classifier's
// Classes are Policy's; its own are ignored.
type FeedbackConfig struct {
	Policy     sched.FeedbackConfig
	Classifier sched.FeedbackClassifierConfig
}

// feedbackControl is the one Feedback policy that every feedback listener
// shares (its classes and content adaptation are cluster-wide), with its
// classifier and, per class and tree, the requests dispatched.
type feedbackControl struct {
	policy     *sched.Feedback
	classifier *sched.FeedbackClassifier
	trees      map[string][]uint64 // class -> dispatched per tree 0..M
	m          int

	// Request rewriting (rewrite.go): the tree path template, and how
	// many requests were sent rewritten or could not be.
	treePath                 string
	rewritten, rewriteFailed uint64
}

func newFeedbackControl(cfg FeedbackConfig) (*feedbackControl, error) {
	p, err := sched.NewFeedback(cfg.Policy)
	if err != nil {
		return nil, err
	}
	ccfg := cfg.Classifier
	ccfg.Classes = cfg.Policy.Classes
	cl, err := sched.NewFeedbackClassifier(ccfg)
	if err != nil {
		return nil, err
	}
	m := max(cfg.Policy.Trees, 1)
	treePath := cfg.Policy.TreePath
	if treePath == "" {
		treePath = sched.DefaultFeedbackTreePath
	}
	return &feedbackControl{policy: p, classifier: cl, trees: map[string][]uint64{}, m: m, treePath: treePath}, nil
}

// feedbackQueue returns the feedback listeners' queue, making it on first
// use.
func (qs *queues) feedbackQueue(cfg *Config, timeout int64) (*queueSet, error) {
	if timeout > 0 {
		return nil, fmt.Errorf("feedback listeners share the feedback queue timeout, not one of their own")
	}
	if qs.feedback != nil {
		for _, q := range qs.list {
			if q.feedback != nil {
				return q, nil
			}
		}
	}
	fc, err := newFeedbackControl(cfg.Feedback)
	if err != nil {
		return nil, err
	}
	qs.feedback = fc
	timeoutOf := cfg.Feedback.Policy.QueueTimeout
	if timeoutOf <= 0 {
		timeoutOf = sched.DefaultFeedbackQueueTimeout
	}
	q := &queueSet{name: "feedback", policy: fc.policy, feedback: fc.policy, timeout: timeoutOf}
	qs.list = append(qs.list, q)
	return q, nil
}

// feedbackRequest classifies a request for the feedback policy: its
// class, whether it belongs to a known session and whether that session
// is in a transactional stage.
func (c *Controller) feedbackRequest(req *sched.Request, r *splice.RequestInfo, now splice.Time) {
	req.Client = r.Client.Addr()
	c.fb.classifier.Classify(req, r.Cookie, int64(now))
}

// feedbackDispatched counts the tree a feedback request was dispatched
// with (sched.Request.Tree, chosen by the content adaptor: what the
// request rewriting of issue 10 will serve).
func (c *Controller) feedbackDispatched(r sched.Request) {
	fc := c.fb
	if fc == nil || r.Tree == 0 {
		return
	}
	t := fc.trees[r.Customer]
	if t == nil {
		t = make([]uint64, fc.m+1)
		fc.trees[r.Customer] = t
	}
	if int(r.Tree) < len(t) {
		t[r.Tree]++
	}
}

// feedbackCompleted feeds the content adaptor's load monitor with a
// response a back-end reported done, whatever its listener: the
// utilization is the cluster's.
func (c *Controller) feedbackCompleted(responseBytes uint64, now splice.Time) {
	if c.fb != nil {
		c.fb.policy.Completed(responseBytes, int64(now))
	}
}

// feedbackExpire answers the requests the feedback policy gave up on: 503
// with Retry-After for those its loop refused ("overload-refused"), as
// for a queue timeout otherwise.
func (c *Controller) feedbackExpire(q *queueSet, now splice.Time, out *Output) {
	q.feedback.ExpireWhy(int64(now), func(r sched.Request, why sched.FeedbackDrop) {
		reason := "queue-timeout"
		if why == sched.DropRefused {
			reason = "overload-refused"
		}
		c.giveUp(r, reason, now, out)
	})
}

// giveUp answers a request its policy dropped while it waited, with 503
// and the reason; a request whose client left is only counted.
func (c *Controller) giveUp(r sched.Request, reason string, now splice.Time, out *Output) {
	flow := splice.FlowID(r.ID)
	rec := c.flows[flow]
	if rec == nil || rec.waiting != waitQueued {
		c.stats(r.Customer).abandoned++
		return
	}
	rec.waiting = notWaiting
	c.reject(flow, rec.followUp, r.Customer, reason, 503, now, out)
	if c.logs(slog.LevelDebug) {
		c.log(out, slog.LevelDebug, "feedback gave up", "flow", flow, "class", r.Customer, "reason", reason)
	}
}

// FeedbackStatus is the feedback policy's state in Status.
type FeedbackStatus struct {
	// Content adaptation: U and the G it set, the completion rate R
	// (req/s) and bandwidth W (bytes/s) of the last period, the number
	// of trees M; Adapting is false while a and b are 0.
	Adapting bool    `json:"adapting"`
	Trees    int     `json:"trees"`
	U        float64 `json:"utilization"`
	G        float64 `json:"g"`
	R        float64 `json:"completion_rate"`
	W        float64 `json:"bandwidth"`
	// Completions and Bytes count every completion reported so far and
	// its response bytes, so that U can be measured over any interval.
	Completions uint64 `json:"completions"`
	Bytes       uint64 `json:"response_bytes"`
	// Rewritten counts the requests sent to a back-end with their path
	// rewritten to a tree below M; RewriteFailed those the engine could
	// not rewrite, which were served at full quality.
	Rewritten     uint64 `json:"rewritten"`
	RewriteFailed uint64 `json:"rewrite_failed"`
	// Sessions is the number of sessions remembered.
	Sessions int `json:"sessions"`
	// Period is the index of the loop's period in progress (0 from the
	// policy's first call) and PeriodElapsed how long ago it began: with
	// the classes' PeriodEnds a reader places every period's end in
	// time, period k having ended (Period - 1 - k) periods before the
	// start of Period. PeriodElapsed may exceed PeriodLength while the
	// policy was not called since (it closes periods lazily); all 0
	// before its first call.
	Period        int64                 `json:"period"`
	PeriodElapsed time.Duration         `json:"period_elapsed_ns"`
	PeriodLength  time.Duration         `json:"period_ns"`
	Classes       []FeedbackClassStatus `json:"classes"`
}

// FeedbackClassStatus is one feedback class in FeedbackStatus.
type FeedbackClassStatus struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
	Share  float64 `json:"target_share"`
	// Queued is q, the admitted queue the loop holds at TargetQueue;
	// Reserve the requests the actuator held back.
	Queued          int     `json:"queued"`
	Reserve         int     `json:"reserve"`
	TargetQueue     int     `json:"target_queue"`
	TargetIn        float64 `json:"target_in"`
	PassProbability float64 `json:"pass_probability"`
	// PassSession and PassTransactional are p for known sessions and
	// transactional stages: below 1 only when they alone exceed
	// target_in.
	PassSession       float64 `json:"pass_session"`
	PassTransactional float64 `json:"pass_transactional"`
	LastIn            int     `json:"last_in"`
	LastOut           int     `json:"last_out"`
	// PeriodEndQ is the loop's q(t), the admitted queue at the end of
	// the last complete period (Queued is the queue now, at whatever
	// phase of the period); PeriodEnds holds q(t) of the last periods,
	// up to 64, oldest first, so that issue 10's "queue within 20% of
	// target_q" can be judged on every period by a reader that comes
	// by less often than once a period.
	PeriodEndQ int                 `json:"period_end_q"`
	PeriodEnds []FeedbackPeriodEnd `json:"period_ends"`
	AbsQoS     float64             `json:"abs_qos"`
	ProQoS     float64             `json:"pro_qos"`
	// G is the content adaptor's G for this class (lower classes are
	// degraded first so that proQoS keeps the shares).
	G          float64 `json:"g"`
	Arrived    uint64  `json:"arrived"`
	Dispatched uint64  `json:"dispatched"`
	Refused    uint64  `json:"refused"`
	Overload   uint64  `json:"overload"`
	Full       uint64  `json:"full"`
	Expired    uint64  `json:"expired"`
	// Displaced counts known-session requests due for refusal that were
	// admitted in place of a new session's (refused instead).
	Displaced uint64 `json:"displaced"`
	// Trees counts the requests dispatched per content tree, index 0..M
	// (0 unused: tree 0 is a refusal).
	Trees []uint64 `json:"trees"`
}

// FeedbackPeriodEnd is one class's q(t) at the end of period Period,
// with the in and out of the loop's step (sched.FeedbackPeriodEnd).
type FeedbackPeriodEnd struct {
	Period int64 `json:"period"`
	Q      int   `json:"q"`
	In     int   `json:"in"`
	Out    int   `json:"out"`
}

func (c *Controller) feedbackStatus(now splice.Time) *FeedbackStatus {
	fc := c.fb
	if fc == nil {
		return nil
	}
	a := fc.policy.Adaptation()
	st := &FeedbackStatus{Adapting: a.Enabled, Trees: a.Trees, U: a.U, G: a.G, R: a.R, W: a.W,
		Completions: a.Completions, Bytes: a.Bytes,
		Rewritten: fc.rewritten, RewriteFailed: fc.rewriteFailed, Sessions: fc.classifier.Sessions()}
	if k, start, ok := fc.policy.CurrentPeriod(); ok {
		st.Period, st.PeriodElapsed = k, time.Duration(int64(now)-start)
		st.PeriodLength = time.Duration(fc.policy.Period())
	}
	for _, cs := range fc.policy.Snapshot() {
		trees := append([]uint64(nil), fc.trees[cs.Name]...)
		if trees == nil {
			trees = make([]uint64, fc.m+1)
		}
		ends := make([]FeedbackPeriodEnd, len(cs.PeriodEnds))
		for i, e := range cs.PeriodEnds {
			ends[i] = FeedbackPeriodEnd{Period: e.Period, Q: e.Q, In: e.In, Out: e.Out}
		}
		st.Classes = append(st.Classes, FeedbackClassStatus{
			Name: cs.Name, Weight: cs.Weight, Share: cs.Share, Queued: cs.Queued, Reserve: cs.Reserve,
			TargetQueue: cs.TargetQueue, TargetIn: cs.TargetIn, PassProbability: cs.PassProbability,
			PassSession: cs.PassSession, PassTransactional: cs.PassTransactional, Displaced: cs.Displaced,
			LastIn: cs.LastIn, LastOut: cs.LastOut, PeriodEndQ: cs.PeriodEndQ, PeriodEnds: ends, AbsQoS: cs.AbsQoS, ProQoS: cs.ProQoS, G: cs.G,
			Arrived: cs.Arrived, Dispatched: cs.Dispatched, Refused: cs.Refused, Overload: cs.Overload,
			Full: cs.Full, Expired: cs.Expired, Trees: trees,
		})
	}
	return st
}

// RequestTree is the content tree the feedback policy chose for flow's
// newest request in service (1..M, M full quality); false when flow has
// none in service or its policy is not feedback. Below M the request was
// sent with its path rewritten to that tree (rewrite.go), unless the
// engine could not, and then it reads M; the simulator (tools/sim) reads
// it to scale the request's cost.
func (c *Controller) RequestTree(flow splice.FlowID) (uint8, bool) {
	rec := c.flows[flow]
	if rec == nil || len(rec.serving) == 0 {
		return 0, false
	}
	t := rec.serving[len(rec.serving)-1].tree
	return t, t > 0
}
