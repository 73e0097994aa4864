package timeline

import (
	"bytes"
	"image/color"
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
	recs[8].AddRetx("client_sack", recs[8].At[tl.Feedback])
	recs[8].AddRetx("client_sack", recs[8].At[tl.Feedback]+1)
	recs[9].AddRetx("syn", recs[9].At[tl.SYN]+1)
	recs[10].AtStop = true
	s := Summarize(recs)
	if s.Records != 100 || s.AtStop != 1 || s.OutOfOrder != 1 || !strings.Contains(s.FirstErr, "flow 4") {
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
		"retransmissions: syn 1, c2 syn 1, splice 1, request 1",
		"retransmissions seen: 3 on 2 connections (listed: client_sack 2, syn 1)"} {
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

// TestWaterfallDrawsRetransmissions: a connection's retransmissions
// appear in its waterfall in their kind's colour, which a connection
// without any lacks.
func TestWaterfallDrawsRetransmissions(t *testing.T) {
	dir := t.TempDir()
	r, _ := Find(seedRecords(), 7)
	without := filepath.Join(dir, "without.png")
	if err := Waterfall(r, without); err != nil {
		t.Fatal(err)
	}
	r.AddRetx("client_sack", r.At[tl.FirstByte]+int64(time.Millisecond))
	with := filepath.Join(dir, "with.png")
	if err := Waterfall(r, with); err != nil {
		t.Fatal(err)
	}
	sack := retxStyles["client_sack"].color
	if n := pixelsOf(t, without, sack); n != 0 {
		t.Errorf("%d pixels of client_sack's colour without a retransmission", n)
	}
	if n := pixelsOf(t, with, sack); n < 10 {
		t.Errorf("%d pixels of client_sack's colour with one retransmission", n)
	}
}

// pixelsOf counts the pixels of colour c in a PNG.
func pixelsOf(t *testing.T, file string, c color.RGBA) int {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(bl>>8) == c.B {
				n++
			}
		}
	}
	return n
}
