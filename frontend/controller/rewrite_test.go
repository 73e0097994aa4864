package controller

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice"
)

// degradedHarness is a feedback listener with M = 3 whose content
// adaptor has moved G to 1.85 (one completion in a 100 ms period, R = 10,
// U = 0.2 x 10 = 2, G = 3 + 0.85 - 2): every request now gets tree 1 or 2.
func degradedHarness(t *testing.T) *harness {
	cfg := feedbackTestConfig()
	cfg.Feedback.Policy.Trees, cfg.Feedback.Policy.A = 3, 0.2
	cfg.Feedback.Policy.TreePath = "/t{tree}{path}"
	h := newHarness(t, cfg)
	h.register(1, 8, 1, t0)
	h.feedbackRequest(1, "gold.example", "/", "", t0)
	h.wantCalls("dispatch 1 b1") // tree 3: sent as it came
	h.spliced(1, t0)
	h.feedback(1, time.Millisecond, t0+10*ms)
	h.tick(t0 + 100*ms)
	if st := h.c.Status(t0 + 100*ms).Feedback; st.G != 1.85 {
		t.Fatalf("G %v, want 1.85", st.G)
	}
	h.eng.takeCalls()
	return h
}

// TestDegradedTreeRewritesTheRequestPath: a request the feedback policy
// serves from tree k < M is rewritten to the tree's path before it goes
// to its back-end, first requests before Dispatch and follow-ups before
// Admit; RequestTree reports the tree served; the status counts them.
func TestDegradedTreeRewritesTheRequestPath(t *testing.T) {
	h := degradedHarness(t)
	now := t0 + 101*ms
	h.feedbackRequest(2, "shop.example", "/img/a.jpg", "", now)
	tree, ok := h.c.RequestTree(2)
	if !ok || tree < 1 || tree > 2 {
		t.Fatalf("RequestTree(2) = %d %v, want tree 1 or 2", tree, ok)
	}
	h.wantCalls(fmt.Sprintf("rewrite 2 /t%d/img/a.jpg", tree), "dispatch 2 b1")
	h.spliced(2, now)
	h.eng.takeCalls()

	// A follow-up on the same connection is rewritten before Admit.
	f := h.eng.flows[2]
	f.waiting = true
	h.event(splice.Event{Kind: splice.EvRequest, Flow: 2, Backend: f.backend, FollowUp: true,
		Request: &splice.RequestInfo{Method: "GET", Host: "shop.example", Path: "/img/b.png", Port: 80,
			Client: netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 0, 2}), 40000)}}, now+ms)
	calls := h.eng.takeCalls()
	tree, _ = h.c.RequestTree(2)
	if want := []string{fmt.Sprintf("rewrite 2 /t%d/img/b.png", tree), "admit 2"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %q, want %q", calls, want)
	}
	if st := h.c.Status(now).Feedback; st.Rewritten != 2 || st.RewriteFailed != 0 {
		t.Errorf("Rewritten %d, RewriteFailed %d, want 2, 0", st.Rewritten, st.RewriteFailed)
	}
}

// TestRequestTheEngineCannotRewriteIsServedAtFullQuality: when the engine
// refuses the rewrite, the request still goes, as sent, and counts as
// served from tree M.
func TestRequestTheEngineCannotRewriteIsServedAtFullQuality(t *testing.T) {
	h := degradedHarness(t)
	h.eng.failRewrite = splice.ErrRewriteBusy
	now := t0 + 101*ms
	h.feedbackRequest(2, "shop.example", "/img/a.jpg", "", now)
	calls := h.eng.takeCalls()
	if len(calls) != 2 || !strings.HasPrefix(calls[0], "rewrite 2 /t") || calls[1] != "dispatch 2 b1" {
		t.Fatalf("calls %q", calls)
	}
	if tree, ok := h.c.RequestTree(2); !ok || tree != 3 {
		t.Errorf("RequestTree(2) = %d %v, want 3 (served as sent)", tree, ok)
	}
	if st := h.c.Status(now).Feedback; st.Rewritten != 0 || st.RewriteFailed != 1 {
		t.Errorf("Rewritten %d, RewriteFailed %d, want 0, 1", st.Rewritten, st.RewriteFailed)
	}
}
