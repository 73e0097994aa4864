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

// TestReplayTimelinesOfAConnectionTheCaptureCuts: a capture that ends
// before its connection closes (no FIN) still gives that connection's
// record, marked at_stop, with the steps up to the response and no close
// reason, as the daemon writes at its stop.
func TestReplayTimelinesOfAConnectionTheCaptureCuts(t *testing.T) {
	b := newCaptureBuilder(t)
	const isn, orig = uint32(0x10000000), uint32(0x50000000)
	b.seg(10, client1, vip, isn, 0, fSYN, synOpts(1460, 7, true, false, 0, 0), nil)
	b.seg(110, vip, client1, orig, isn+1, fSYN|fACK, synOpts(1460, 7, true, false, 0, 0), nil)
	b.seg(200, client1, vip, isn+1, orig+1, fACK, nil, nil)
	get := []byte("GET /cut HTTP/1.1\r\nHost: www.example.com\r\n\r\n")
	b.seg(300, client1, vip, isn+1, orig+1, fACK|fPSH, nil, get)
	b.seg(1800, vip, client1, orig+1, isn+1+uint32(len(get)), fACK|fPSH, nil, []byte("answer"))
	var tl bytes.Buffer
	replay(t, Config{Timeline: &tl}, b.buf.Bytes())
	recs, err := timeline.Read(&tl)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("%d records, want the cut connection's: %+v", len(recs), recs)
	}
	r := recs[0]
	if !r.AtStop || r.Reason != "" || r.Path != "/cut" || r.Request != 1 {
		t.Errorf("record %+v, want at_stop, no reason, /cut", r)
	}
	if err := r.CheckOrder(); err != nil {
		t.Error(err)
	}
	for _, s := range []timeline.Step{timeline.SYN, timeline.HeadComplete, timeline.SpliceAck, timeline.RequestSent} {
		if r.Have&(1<<s) == 0 {
			t.Errorf("no %v step in %v", s, r.Steps())
		}
	}
}
