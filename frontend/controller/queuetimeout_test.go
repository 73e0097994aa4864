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
	for _, policy := range []string{"fifo", "credit", "lifo-pri", "eight-fifo", "single-fifo"} {
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
