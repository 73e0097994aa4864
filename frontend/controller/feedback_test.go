package controller

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// feedbackTestConfig is a feedback listener on port 80: gold by Host,
// silver by path, bronze the rest; sessions by cookie "sid".
func feedbackTestConfig() Config {
	return Config{
		Ports: []uint16{80}, Listeners: []Listener{{Port: 80, Policy: "feedback"}}, KeepaliveInterval: time.Hour,
		Feedback: FeedbackConfig{
			// Gain 1: the tests' G values are worked by hand with k = 1.
			Policy: sched.FeedbackConfig{Period: 100 * time.Millisecond, TargetQueue: 20, Gain: 1, Classes: []sched.FeedbackClass{
				{Name: "gold", Weight: 3, Hosts: []string{"gold.example"}},
				{Name: "silver", Weight: 2, Paths: []string{"/api*"}},
				{Name: "bronze", Weight: 1},
			}},
			Classifier: sched.FeedbackClassifierConfig{SessionCookie: "sid", TransactionalPaths: []string{"/checkout"}},
		},
	}
}

// feedbackRequest has the engine report flow's request with a cookie
// and a client address.
func (h *harness) feedbackRequest(flow splice.FlowID, host, path, cookie string, now splice.Time) *Output {
	h.eng.flows[flow] = &fakeFlow{state: "queued"}
	return h.event(splice.Event{Kind: splice.EvRequest, Flow: flow, Request: &splice.RequestInfo{
		Method: "GET", Host: host, Path: path, Cookie: cookie, Port: 80,
		Client: netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(flow)}), 40000),
	}}, now)
}

func (h *harness) feedbackClass(name string) FeedbackClassStatus {
	h.t.Helper()
	st := h.c.Status(h.c.now).Feedback
	if st == nil {
		h.t.Fatal("no feedback section in the status")
	}
	for _, c := range st.Classes {
		if c.Name == name {
			return c
		}
	}
	h.t.Fatalf("no feedback class %q", name)
	return FeedbackClassStatus{}
}

// Requests on a feedback listener are classified by the feedback rules,
// queued by the feedback policy and dispatched to back-ends with the
// content tree it chose; a known session goes before new ones of its
// class.
func TestFeedbackListenerDispatches(t *testing.T) {
	h := newHarness(t, feedbackTestConfig())
	if len(h.c.queues) != 1 || h.c.queues[0].feedback == nil || h.c.fb == nil {
		t.Fatalf("queues %+v: want the one feedback queue", h.c.queues)
	}
	h.register(1, 1, 1, t0)
	h.feedbackRequest(1, "gold.example", "/", "sid=s1", t0+ms)
	h.wantCalls("dispatch 1 b1")
	h.spliced(1, t0+ms)
	h.eng.takeCalls()
	// The back-end is full: three wait. s1 is a known session now.
	h.feedbackRequest(2, "shop.example", "/", "", t0+2*ms)            // bronze, new
	h.feedbackRequest(3, "shop.example", "/", "a=1; sid=s1", t0+3*ms) // bronze, known session
	h.feedbackRequest(4, "shop.example", "/api/x", "", t0+4*ms)       // silver
	h.wantCalls()
	for _, c := range []struct {
		name   string
		queued int
	}{{"gold", 0}, {"silver", 1}, {"bronze", 2}} {
		if got := h.customer(c.name, t0+4*ms); got.Queued != c.queued || got.Offered == 0 {
			t.Errorf("%s: queued %d offered %d, want %d queued", c.name, got.Queued, got.Offered, c.queued)
		}
	}
	// Each slot freed goes to the next: silver (larger share) first, then
	// bronze's known session before its new one.
	var order []string
	for i, flow := range []splice.FlowID{1, 4, 3} {
		now := t0 + splice.Time(10+i)*ms
		h.feedback(flow, 5*time.Millisecond, now)
		calls := h.eng.takeCalls()
		order = append(order, calls...)
		for id, f := range h.eng.flows {
			if f.state == "connecting" {
				h.spliced(id, now)
				h.eng.takeCalls()
			}
		}
	}
	if want := []string{"dispatch 4 b1", "dispatch 3 b1", "dispatch 2 b1"}; !slices.Equal(order, want) {
		t.Errorf("dispatch order %q, want %q", order, want)
	}
	if g := h.feedbackClass("gold"); g.Dispatched != 1 || g.Trees[1] != 1 {
		t.Errorf("gold: %+v, want one request dispatched from tree 1 (M = 1)", g)
	}
	if tree, ok := h.c.RequestTree(2); !ok || tree != 1 {
		t.Errorf("RequestTree(2) = %d %v, want tree 1", tree, ok)
	}
	if _, ok := h.c.RequestTree(99); ok {
		t.Error("RequestTree of an unknown flow")
	}
}

// The loop refuses a request it kept in reserve for refuse_periods
// periods with an explicit 503 and Retry-After at once, counted as
// overload-refused: the client never waits for a timeout.
func TestFeedbackRefusalIs503WithRetryAfter(t *testing.T) {
	cfg := feedbackTestConfig()
	cfg.Feedback.Policy.TargetQueue, cfg.Feedback.Policy.History, cfg.Feedback.Policy.RefusePeriods = 2, 1, 2
	h := newHarness(t, cfg)
	eng := &retryEngine{fakeEngine: h.eng}
	h.c.eng = eng
	// No back-end: nothing is served. Period 0 (from t0): four pass at
	// p 1, q 4 over target 2: target_in = min(4, 2) - 2 = 0 and p 0.
	for flow := splice.FlowID(1); flow <= 4; flow++ {
		h.feedbackRequest(flow, "", "/", "", t0)
	}
	h.tick(t0 + 100*ms)
	if b := h.feedbackClass("bronze"); b.PassProbability != 0 || b.Queued != 4 || b.TargetQueue != 2 {
		t.Fatalf("after period 0: %+v", b)
	}
	h.feedbackRequest(5, "", "/", "", t0+150*ms) // into reserve
	if b := h.feedbackClass("bronze"); b.Reserve != 1 {
		t.Fatalf("reserve %d, want 1", b.Reserve)
	}
	h.wantCalls()
	// Tick whenever the controller asks to be woken.
	for due := h.c.NextDeadline(); due <= t0+350*ms; due = h.c.NextDeadline() {
		h.tick(due)
		if calls := h.eng.takeCalls(); len(calls) > 0 {
			if !slices.Equal(calls, []string{"reject 5 503"}) || due != t0+350*ms {
				t.Fatalf("at %v: calls %q, want request 5 refused at 350ms", time.Duration(due-t0), calls)
			}
			break
		}
	}
	if len(eng.retry) != 1 || eng.retry[0] != time.Second {
		t.Errorf("Retry-After %v, want 1s", eng.retry)
	}
	if got := h.c.stats("bronze").rejected["overload-refused"]; got != 1 {
		t.Errorf("overload-refused %d, want 1", got)
	}
	if b := h.feedbackClass("bronze"); b.Refused != 1 || b.Reserve != 0 || b.ProQoS != 0 {
		t.Errorf("after the refusal: %+v", b)
	}
}

// The status shows, per class, q, target_q, target_in, p and proQoS,
// and the content adaptation's U and G, from the back-ends' Feedback.
func TestFeedbackStatusShowsLoopAndAdaptation(t *testing.T) {
	cfg := feedbackTestConfig()
	cfg.Feedback.Policy.Trees, cfg.Feedback.Policy.A = 3, 0.1
	h := newHarness(t, cfg)
	h.register(1, 4, 1, t0)
	h.feedbackRequest(1, "gold.example", "/", "", t0)
	h.feedbackRequest(2, "shop.example", "/", "", t0)
	h.spliced(1, t0)
	h.spliced(2, t0)
	h.feedback(1, time.Millisecond, t0+10*ms)
	// One completion in the 100 ms period: R = 10/s, U = 0.1 x 10 = 1,
	// G = 3 + 1 x (0.85 - 1) = 2.85.
	h.tick(t0 + 100*ms)
	st := h.c.Status(t0 + 100*ms).Feedback
	if !st.Adapting || st.Trees != 3 || st.U != 1 || st.G != 2.85 || st.R != 10 {
		t.Errorf("adaptation %+v, want U 1, G 2.85, R 10", *st)
	}
	g := h.feedbackClass("gold")
	if g.TargetQueue != 20 || g.Share != 0.5 || g.ProQoS != 0.5 || g.Trees[3] != 1 || g.LastOut != 1 {
		t.Errorf("gold %+v: want target_q 20, share 0.5, proQoS 0.5 (one of two full-quality requests), tree 3 once", g)
	}
	if b := h.feedbackClass("bronze"); b.ProQoS != 0.5 || b.PassProbability != 1 {
		t.Errorf("bronze %+v", b)
	}
}

// A feedback listener may not have a queue timeout of its own, and a bad
// feedback configuration stops New.
func TestFeedbackConfigRefused(t *testing.T) {
	cfg := feedbackTestConfig()
	cfg.Listeners[0].QueueTimeout = time.Second
	if _, err := New(cfg, newFakeEngine(), t0); err == nil {
		t.Error("a feedback listener with its own queue timeout was accepted")
	}
	cfg = feedbackTestConfig()
	cfg.Feedback.Policy.Q1 = 0.5
	if _, err := New(cfg, newFakeEngine(), t0); err == nil {
		t.Error("an unstable loop was accepted")
	}
	cfg = feedbackTestConfig()
	cfg.Feedback.Classifier.Fallback = "platinum"
	if _, err := New(cfg, newFakeEngine(), t0); err == nil {
		t.Error("an unknown fallback class was accepted")
	}
}

// The connection-per-request cycle of alloc_test.go through a feedback
// listener (class "A" by Host, sessions on): classification, the loop,
// the merge, the adaptor and the Feedback to the load monitor allocate
// nothing per request.
func TestFeedbackConnectionPerRequestAllocatesNothing(t *testing.T) {
	cfg := Config{Ports: []uint16{80}, Listeners: []Listener{{Port: 80, Policy: "feedback"}},
		Feedback: FeedbackConfig{
			Policy: sched.FeedbackConfig{Trees: 3, B: 1e-9, Classes: []sched.FeedbackClass{
				{Name: "A", Weight: 2, Hosts: []string{"a.example"}}, {Name: "other", Weight: 1}}},
			Classifier: sched.FeedbackClassifierConfig{SessionCookie: "sid"},
		}}
	r := newCycleRigWith(t, cfg)
	testConnectionPerRequestAllocatesNothing(t, r)
	if c := r.ctrl.Status(r.now).Feedback.Classes[0]; c.Dispatched < 800 || c.Trees[3] != c.Dispatched {
		t.Errorf("class A after the cycles: %+v, want every request through the feedback policy, at full quality", c)
	}
}

// The status passes the loop's period-end queue through: q(t) of each
// period that ended, with its index, apart from the queue now, and the
// period in progress with how long ago it began, so that a reader can
// place every period's end in time. No back-end: the requests wait.
//
//	t0          2 gold requests queued; period 0 begins
//	t0+100 ms   period 0 ends with q 2 (in 2, out 0)
//	t0+120 ms   a third: the queue now 3, q(t) still 2
//	t0+250 ms   status: period 1 ended at t0+200 ms with q 3 (in 1;
//	            closed by the tick), period 2 began 50 ms ago
func TestFeedbackStatusShowsPeriodEndQueue(t *testing.T) {
	h := newHarness(t, feedbackTestConfig())
	h.feedbackRequest(1, "gold.example", "/", "", t0)
	h.feedbackRequest(2, "gold.example", "/", "", t0)
	h.tick(t0 + 100*ms)
	h.feedbackRequest(3, "gold.example", "/", "", t0+120*ms)
	g := h.feedbackClass("gold")
	if g.Queued != 3 || g.PeriodEndQ != 2 || !slices.Equal(g.PeriodEnds, []FeedbackPeriodEnd{{0, 2, 2, 0}}) {
		t.Fatalf("within period 1: queued %d, q(t) %d, ends %v; want 3, 2, [{0 2 2 0}]", g.Queued, g.PeriodEndQ, g.PeriodEnds)
	}
	h.tick(t0 + 250*ms)
	st := h.c.Status(t0 + 250*ms).Feedback
	if st.Period != 2 || st.PeriodElapsed != 50*time.Millisecond || st.PeriodLength != 100*time.Millisecond {
		t.Errorf("period %d, began %v ago, length %v; want 2, 50ms, 100ms", st.Period, st.PeriodElapsed, st.PeriodLength)
	}
	g = h.feedbackClass("gold")
	if want := []FeedbackPeriodEnd{{0, 2, 2, 0}, {1, 3, 1, 0}}; g.PeriodEndQ != 3 || !slices.Equal(g.PeriodEnds, want) {
		t.Errorf("after period 1: q(t) %d, ends %v; want 3, %v", g.PeriodEndQ, g.PeriodEnds, want)
	}
	if s := h.feedbackClass("silver"); !slices.Equal(s.PeriodEnds, []FeedbackPeriodEnd{{0, 0, 0, 0}, {1, 0, 0, 0}}) {
		t.Errorf("silver, nothing queued: ends %v, want q 0 at both", s.PeriodEnds)
	}
}
