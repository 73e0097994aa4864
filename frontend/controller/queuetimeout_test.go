package controller

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// retryEngine records the Retry-After of each Reject.
type retryEngine struct {
	*fakeEngine
	retry []time.Duration
}

func (e *retryEngine) Reject(id splice.FlowID, status int, reason string, retryAfter time.Duration, now splice.Time, out *splice.Output) error {
	e.retry = append(e.retry, retryAfter)
	return e.fakeEngine.Reject(id, status, reason, retryAfter, now, out)
}

// A request queued where no back-end ever has room is answered 503 with
// Retry-After once it has waited its queue's timeout, whatever the
// listener's policy: none holds it until the engine's idle timeout
// (15 minutes) any more. The default timeout is 10 s.
func TestAdversarialQueuedRequestTimesOutWith503OnEveryPolicy(t *testing.T) {
	for _, policy := range []string{"fifo", "credit", "lifo-pri", "eight-fifo", "single-fifo", "feedback"} {
		t.Run(policy, func(t *testing.T) {
			cfg := Config{Ports: []uint16{80}, Listeners: []Listener{{Port: 80, Policy: policy}}}
			if policy == "credit" {
				cfg.Credit = sched.CreditConfig{Customers: []sched.CustomerSpec{{Name: "A", Reservation: 10}}, Default: "A"}
			}
			h := newHarness(t, cfg)
			eng := &retryEngine{fakeEngine: h.eng}
			h.c.eng = eng
			h.request(1, "A.example", t0)
			h.wantCalls()
			timeout := splice.Time(10 * time.Second)
			h.tick(t0 + timeout)
			h.wantCalls()
			due := h.c.NextDeadline()
			if due > t0+timeout+1 {
				t.Fatalf("next deadline %v after the request's timeout", time.Duration(due-t0))
			}
			h.tick(due)
			h.wantCalls("reject 1 503")
			if len(eng.retry) != 1 || eng.retry[0] != time.Second {
				t.Errorf("Retry-After %v, want 1s", eng.retry)
			}
		})
	}
}

// A fifo or class-based listener may set its own queue timeout: its
// requests get queues of their own. Credit listeners share the credit
// scheduler's timeout and may not.
func TestListenerQueueTimeouts(t *testing.T) {
	for _, policy := range []string{"fifo", "lifo-pri"} {
		t.Run(policy, func(t *testing.T) {
			cfg := Config{Ports: []uint16{80, 81}, Listeners: []Listener{
				{Port: 80, Policy: policy}, {Port: 81, Policy: policy, QueueTimeout: 2 * time.Second}}}
			h := newHarness(t, cfg)
			h.requestOn(1, 80, "a", "/", t0)
			h.requestOn(2, 81, "a", "/", t0)
			h.tick(t0 + splice.Time(2*time.Second) + 1)
			h.wantCalls("reject 2 503")
			h.tick(t0 + splice.Time(10*time.Second) + 1)
			h.wantCalls("reject 1 503")
		})
	}
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 10})
	cfg.Listeners[0].QueueTimeout = 3 * time.Second
	_, err := New(cfg, newFakeEngine(), t0)
	if err == nil {
		t.Fatal("credit listener with a queue timeout of its own accepted")
	}
	t.Log(err)
}

// After a flood of requests that then closed, the flow table is rebuilt
// for what is left and the spare records follow it down.
func TestFlowTableShrinksAfterAFlood(t *testing.T) {
	h := newHarness(t, Config{Ports: []uint16{80}, QueueCapacity: 30_000})
	const flood = 20_000
	for id := splice.FlowID(1); id <= flood; id++ {
		h.request(id, "a", t0)
	}
	if len(h.c.flows) != flood {
		t.Fatalf("%d flows tracked", len(h.c.flows))
	}
	for id := splice.FlowID(1); id < flood; id++ {
		delete(h.eng.flows, id)
		h.event(splice.Event{Kind: splice.EvClosed, Flow: id, Reason: splice.CloseRST}, t0+1)
	}
	if len(h.c.flows) != 1 || h.c.flowsPeak >= shrinkMinPeak || len(h.c.spareRecs) > 2*minSpareRecs {
		t.Errorf("after the flood: %d flows, peak %d, %d spare records", len(h.c.flows), h.c.flowsPeak, len(h.c.spareRecs))
	}
}

// sourceCappedEngine refuses dispatches: the client's address holds its
// limit of handoff ports.
type sourceCappedEngine struct{ *fakeEngine }

func (e *sourceCappedEngine) Dispatch(id splice.FlowID, b splice.Backend, now splice.Time, out *splice.Output) error {
	e.call("dispatch %d b%d", id, b.ID)
	return splice.ErrSourcePorts
}

// A request whose client holds its address's limit of handoff ports is
// answered 503 at once, not left to wait for the engine's timeouts.
func TestSourcePortLimitIsAnswered503AtOnce(t *testing.T) {
	h := newHarness(t, Config{Ports: []uint16{80}})
	h.c.eng = &sourceCappedEngine{h.eng}
	h.register(1, 5, 1, t0)
	h.request(1, "a", t0+1)
	h.wantCalls("dispatch 1 b1", "reject 1 503")
}
