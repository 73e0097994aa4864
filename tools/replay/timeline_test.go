package replay

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/qsplice/qsplice/frontend/timeline"
)

// TestReplayTimelinesOfTheCommittedCapture replays the committed capture
// with timelines on: every client connection that was handed off comes
// out with a record holding every step from the SYN to the close, in
// order, and the engine's output is the same bytes as without timelines
// (they observe, they do not steer).
func TestReplayTimelinesOfTheCommittedCapture(t *testing.T) {
	in, err := os.ReadFile(goldenInput)
	if err != nil {
		t.Fatal(err)
	}
	var tl bytes.Buffer
	out, sum := replay(t, Config{Timeline: &tl}, in)
	plain, _ := replay(t, Config{}, in)
	if !bytes.Equal(out, plain) {
		t.Error("the engine's output changed with timelines on")
	}
	recs, err := timeline.Read(&tl)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || uint64(len(recs)) < sum.HandoffsDone {
		t.Fatalf("%d timelines for %d handoffs", len(recs), sum.HandoffsDone)
	}
	all := make([]timeline.Step, timeline.NumSteps)
	for s := range all {
		all[s] = timeline.Step(s)
	}
	for _, r := range recs {
		if err := r.CheckOrder(); err != nil {
			t.Error(err)
		}
		if r.Backend == 0 {
			continue // answered by the front-end itself
		}
		if got := r.Steps(); !slices.Equal(got, all) {
			t.Errorf("flow %d has steps %v, want all of %v", r.Flow, got, all)
		}
		if fb, lb := r.At[timeline.FirstByte], r.At[timeline.LastByte]; fb <= r.At[timeline.SpliceAck] || lb != fb {
			t.Errorf("flow %d: first byte %d, last %d, SpliceAck %d", r.Flow, fb, lb, r.At[timeline.SpliceAck])
		}
	}
}
