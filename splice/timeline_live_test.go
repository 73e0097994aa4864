package splice

import "testing"

// TestLiveTimelineOfAnOpenFlow: a spliced flow not closed yet has its
// timeline so far (up to the request on C2, no close) and the bytes
// forwarded; an unknown flow has none.
func TestLiveTimelineOfAnOpenFlow(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	tl, _, ok := sc.h.fe.LiveTimeline(sc.id)
	if !ok {
		t.Fatal("no live timeline of a spliced flow")
	}
	for _, s := range []FlowStep{StepCookieACK, StepHeadComplete, StepC2SYN, StepC2SYNACK, StepRequestSent} {
		if _, ok := tl.Get(s); !ok {
			t.Errorf("live timeline lacks %v", s)
		}
	}
	if _, ok := tl.Get(StepClose); ok {
		t.Error("an open flow's timeline has a close")
	}
	if _, _, ok := sc.h.fe.LiveTimeline(sc.id + 1000); ok {
		t.Error("a live timeline of an unknown flow")
	}
}
