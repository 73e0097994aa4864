package experiment

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/frontend/conf"
	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/tools/loadgen"
)

// The live run's front-end configuration loads and gives the feedback
// listener the classes, weights, trees and calibration of the run.
func TestFeedbackLabFrontendYAML(t *testing.T) {
	cfg := DefaultFeedbackLabConfig()
	cfg.Sessions = 10
	dir := t.TempDir()
	path := filepath.Join(dir, "fe.yaml")
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte("00112233445566778899aabbccddeeff0123456789abcdef102132435465768798a9bacbdcedfe0f\n"[:64]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(cfg.FrontendYAML(dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := conf.Load(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, cfg.FrontendYAML(dir))
	}
	fc, err := frontend.FromFile(f)
	if err != nil {
		t.Fatal(err)
	}
	p := fc.Feedback.Policy
	if p.Trees != 3 || p.A != 0 || math.Abs(p.B-1/(250.0*16384)) > 1e-15 || p.Period != labFeedbackPeriod ||
		p.TargetQueue != labFeedbackTargetQueue || p.Gain != labFeedbackGain || len(p.Classes) != 3 || p.Classes[0].Weight != 3 ||
		!slices.Equal(p.Classes[2].Hosts, []string{"bronze.example"}) || fc.Feedback.Classifier.SessionCookie != "sid" {
		t.Errorf("policy from the lab's file: %+v, classifier %+v", p, fc.Feedback.Classifier)
	}
}

// The step load and the streams: 0.5x, 2x from Up, 0.5x from Down; each
// class its weight's share of the capacity; qsplice-load reads them back.
func TestFeedbackLabLoad(t *testing.T) {
	cfg := DefaultFeedbackLabConfig()
	cfg.BinDir = "/bin"
	want := []loadgen.LoadStep{{At: 0, Factor: 0.5}, {At: 10 * time.Second, Factor: 2}, {At: 40 * time.Second, Factor: 0.5}}
	if got := cfg.Steps(); !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	cfg.Down = cfg.End
	if got := cfg.Steps(); len(got) != 2 {
		t.Errorf("a step down at the end: %v", got)
	}
	rates := map[string]float64{}
	args := cfg.loadArgs("/tmp/x.json")
	for i, a := range args {
		if a != "-stream" {
			continue
		}
		st, err := loadgen.ParseStream(args[i+1])
		if err != nil {
			t.Fatal(err)
		}
		rates[st.Name] = st.Rate
		if st.Host != st.Name+".example" || st.Path != "/data/16K" {
			t.Errorf("stream %+v", st)
		}
	}
	if math.Abs(rates["gold"]-125) > 1e-9 || math.Abs(rates["silver"]-250.0/3) > 1e-9 || math.Abs(rates["bronze"]-250.0/6) > 1e-9 {
		t.Errorf("rates %v, want 125, 83.3, 41.7", rates)
	}
	if i := slices.Index(args, "-steps"); i < 0 || !strings.HasPrefix(args[i+1], "0.5@0s,2@10s") {
		t.Errorf("args %v", args)
	}
}

// feedbackSeries: a missed sample repeats the one before; the quality of
// a period is the mean tree/M of the requests dispatched in it.
func TestFeedbackLabSeries(t *testing.T) {
	cfg := DefaultFeedbackLabConfig()
	cfg.Up, cfg.Down, cfg.End = 200*time.Millisecond, 300*time.Millisecond, 400*time.Millisecond
	cfg.Classes, cfg.Weights = []string{"gold"}, []float64{1}
	st := func(u float64, trees ...uint64) *controller.FeedbackStatus {
		return &controller.FeedbackStatus{Trees: 3, U: u, G: 3, Classes: []controller.FeedbackClassStatus{
			{Name: "gold", TargetQueue: 20, Trees: trees}}}
	}
	res := feedbackSeries(cfg, []statusObs{{f: st(0.5, 0, 0, 0, 10)}, {}, {f: st(0.9, 0, 5, 5, 20)}, {f: st(0.8, 0, 5, 5, 20)}})
	if len(res.Series) != 4 {
		t.Fatalf("%d points", len(res.Series))
	}
	s := res.Series
	if s[0].Classes[0].Quality != 1 || !math.IsNaN(s[1].Classes[0].Quality) || s[1].U != 0.5 {
		t.Errorf("first points %+v %+v", s[0], s[1])
	}
	// 5 of tree 1, 5 of tree 2, 10 of tree 3: (5/3 + 10/3 + 10) / 20.
	if q := s[2].Classes[0].Quality; math.Abs(q-0.75) > 1e-12 {
		t.Errorf("quality %v, want 0.75", q)
	}
	if s[2].Load != 2 || s[3].Load != 0.5 || s[0].Load != 0.5 {
		t.Errorf("loads %v %v %v", s[0].Load, s[2].Load, s[3].Load)
	}
}
