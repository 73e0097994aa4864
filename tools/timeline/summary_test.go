package timeline

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tl "github.com/qsplice/qsplice/frontend/timeline"
)

// seedRecords are 100 connections: connection i (1..100) has step s at
// s ms + s*i µs after its SYN, so every percentile is known exactly, and
// connection 100 lacks the queued step.
func seedRecords() []tl.Record {
	var recs []tl.Record
	for i := 1; i <= 100; i++ {
		r := tl.Record{Flow: uint64(i), Backend: 1, ShimUncertainty: time.Duration(i) * time.Microsecond}
		syn := int64(i) * int64(time.Second)
		for s := range tl.NumSteps {
			if i == 100 && s == tl.Queued {
				continue
			}
			r.Set(s, syn+int64(s)*int64(time.Millisecond)+int64(s)*int64(i)*int64(time.Microsecond))
		}
		recs = append(recs, r)
	}
	return recs
}

func TestSummarizeSeedRecords(t *testing.T) {
	recs := seedRecords()
	recs[3].At[tl.Feedback] = recs[3].At[tl.RequestSent] // out of order
	recs[5].SYNs, recs[6].C2SYNs, recs[6].SpliceSends, recs[7].RequestResends = 2, 2, 3, 1
	s := Summarize(recs)
	if s.Records != 100 || s.OutOfOrder != 1 || !strings.Contains(s.FirstErr, "flow 4") {
		t.Errorf("records %d, out of order %d (%s)", s.Records, s.OutOfOrder, s.FirstErr)
	}
	if s.SYNRetries != 1 || s.C2SYNRetries != 1 || s.SpliceResent != 1 || s.RequestResent != 1 {
		t.Errorf("retransmissions: %d %d %d %d, want 1 each", s.SYNRetries, s.C2SYNRetries, s.SpliceResent, s.RequestResent)
	}
	if s.MaxShimUncertainty != 100*time.Microsecond {
		t.Errorf("max uncertainty %v", s.MaxShimUncertainty)
	}
	us := time.Microsecond
	c := s.Steps[tl.C2SYN] // step 5: 5 ms + 5i µs
	if want := (Percentiles{N: 100, P50: 5*time.Millisecond + 250*us, P90: 5*time.Millisecond + 450*us, P99: 5*time.Millisecond + 495*us}); c.FromSYN != want {
		t.Errorf("c2_syn from syn %+v, want %+v", c.FromSYN, want)
	}
	if want := (Percentiles{N: 100, P50: time.Millisecond + 50*us, P90: time.Millisecond + 90*us, P99: time.Millisecond + 99*us}); c.Gap != want || c.Prev != tl.Admitted {
		t.Errorf("admitted -> c2_syn %+v (prev %v), want %+v", c.Gap, c.Prev, want)
	}
	// Connection 100 has no queued step: 99 of each, and no gap across it.
	if q, a := s.Steps[tl.Queued], s.Steps[tl.Admitted]; q.FromSYN.N != 99 || q.Gap.N != 99 || a.Gap.N != 99 || a.FromSYN.N != 100 {
		t.Errorf("queued n %d/%d, admitted n %d/%d", q.FromSYN.N, q.Gap.N, a.FromSYN.N, a.Gap.N)
	}
	if syn := s.Steps[tl.SYN]; syn.FromSYN.P99 != 0 || syn.Gap.N != 0 {
		t.Errorf("syn %+v", syn)
	}
	var out bytes.Buffer
	if err := s.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"c2_syn             100      5.250      5.450      5.495", "admitted -> c2_syn",
		"retransmissions: syn 1, c2 syn 1, splice 1, request 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// TestPlotsAreWritten: the waterfall of one connection and a CDF per
// step come out as PNG files.
func TestPlotsAreWritten(t *testing.T) {
	dir := t.TempDir()
	recs := seedRecords()
	r, ok := Find(recs, 7)
	if !ok {
		t.Fatal("flow 7 not found")
	}
	wf := filepath.Join(dir, "waterfall.png")
	if err := Waterfall(r, wf); err != nil {
		t.Fatal(err)
	}
	files, err := CDFs(recs, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != int(tl.NumSteps)-1 { // every step but the SYN itself
		t.Errorf("%d CDFs, want %d", len(files), tl.NumSteps-1)
	}
	for _, f := range append(files, wf) {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil || img.Bounds().Dx() < 100 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, ok := Find(recs, 1000); ok {
		t.Error("found a flow that is not there")
	}
}
