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
		if r.Backend == 0 || r.Request != 1 {
			continue // answered by the front-end itself, or a follow-up
		}
		if got := r.Steps(); !slices.Equal(got, all) {
			t.Errorf("flow %d has steps %v, want all of %v", r.Flow, got, all)
		}
		if fb, lb := r.At[timeline.FirstByte], r.At[timeline.LastByte]; fb <= r.At[timeline.SpliceAck] || lb != fb {
			t.Errorf("flow %d: first byte %d, last %d, SpliceAck %d", r.Flow, fb, lb, r.At[timeline.SpliceAck])
		}
	}
}

// TestReplayTimelinesOfAKeepAliveConnection: a connection with three
// GETs gives the connection's record (request 1, all steps, 3 requests)
// and one record for each follow-up (requests 2 and 3, head to
// feedback), each in order.
func TestReplayTimelinesOfAKeepAliveConnection(t *testing.T) {
	capture, _ := keepAliveClient(t)
	var tl bytes.Buffer
	replay(t, Config{Timeline: &tl}, capture)
	recs, err := timeline.Read(&tl)
	if err != nil {
		t.Fatal(err)
	}
	byRequest := map[int]timeline.Record{}
	for _, r := range recs {
		if err := r.CheckOrder(); err != nil {
			t.Error(err)
		}
		byRequest[r.Request] = r
	}
	if len(recs) != 3 || len(byRequest) != 3 {
		t.Fatalf("%d records (%v), want one per request", len(recs), byRequest)
	}
	if first := byRequest[1]; first.Requests != 3 || first.Path != "/one" || len(first.Steps()) != int(timeline.NumSteps) {
		t.Errorf("request 1: %+v", first)
	}
	want := []timeline.Step{timeline.HeadComplete, timeline.Queued, timeline.Admitted, timeline.RequestSent,
		timeline.FirstByte, timeline.LastByte, timeline.Feedback}
	for i, path := range map[int]string{2: "/two", 3: "/three"} {
		r := byRequest[i]
		if r.Path != path || !slices.Equal(r.Steps(), want) || r.Flow != byRequest[1].Flow {
			t.Errorf("request %d: path %q steps %v flow %d", i, r.Path, r.Steps(), r.Flow)
		}
	}
}
