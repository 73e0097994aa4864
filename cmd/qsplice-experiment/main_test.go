package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/experiment"
)

func TestParseLoads(t *testing.T) {
	got, err := parseLoads("0.5:0.8:0.1")
	if err != nil || !slices.Equal(got, []float64{0.5, 0.6, 0.7, 0.8}) {
		t.Fatalf("range: %v, %v", got, err)
	}
	if got, err = parseLoads("0.7, 1.4"); err != nil || !slices.Equal(got, []float64{0.7, 1.4}) {
		t.Fatalf("list: %v, %v", got, err)
	}
	for _, bad := range []string{"1:2", "2:1:0.1", "0.7,x", "0", "-1,1"} {
		if _, err := parseLoads(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParsePolicies(t *testing.T) {
	got, err := parsePolicies("lifo-pri,single-fifo")
	if err != nil || !slices.Equal(got, []sched.Mode{sched.ModeLifoPri, sched.ModeSingleFIFO}) {
		t.Fatalf("%v, %v", got, err)
	}
	if _, err := parsePolicies("lifo-pri,credit"); err == nil {
		t.Error("credit accepted")
	}
}

// Lab times not given are the preset's times the time scale; given ones
// are taken as they are.
func TestLabDefaultsScale(t *testing.T) {
	labWindows := func(args []string, p experiment.Preset) (w, d, dr time.Duration) {
		t.Helper()
		o, err := parseFlags(args, new(bytes.Buffer))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := o.labConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.TimeScale != o.timescale || !slices.Equal(cfg.Loads, []float64{0.7, 1.4}) || len(cfg.Policies) != 3 {
			t.Fatalf("lab config %+v", cfg)
		}
		return cfg.Warmup, cfg.Duration, cfg.Drain
	}
	half := []string{"-lab", "-out", "x", "-timescale", "0.5"}
	if w, d, dr := labWindows(half, experiment.PresetShop); w != 30*time.Second || d != 60*time.Second || dr != 30*time.Second {
		t.Errorf("shop at half time: %v %v %v", w, d, dr)
	}
	if w, d, dr := labWindows(half, experiment.PresetRetry); w != 90*time.Second || d != 300*time.Second || dr != 120*time.Second {
		t.Errorf("retry at half time: %v %v %v", w, d, dr)
	}
	given := append(half, "-warmup", "5s", "-duration", "7s", "-drain", "0s")
	if w, d, dr := labWindows(given, experiment.PresetRetry); w != 5*time.Second || d != 7*time.Second || dr != 0 {
		t.Errorf("given times: %v %v %v", w, d, dr)
	}
	for _, bad := range [][]string{{"-lab"}, {"-out", "x", "-timescale", "0"}, {"-out", "x", "-policies", "x"}, {"-out", "x", "extra"},
		{"-out", "x", "-duration", "0s"}} {
		if _, err := parseFlags(bad, new(bytes.Buffer)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// -model picks presets: all when simulating, shop in the lab unless
// asked, and a wrong name is refused with the choices named.
func TestModelFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []experiment.Preset
	}{
		{[]string{"-out", "x"}, []experiment.Preset{experiment.PresetShop, experiment.PresetRetry}},
		{[]string{"-out", "x", "-model", "all"}, []experiment.Preset{experiment.PresetShop, experiment.PresetRetry}},
		{[]string{"-out", "x", "-model", "retry"}, []experiment.Preset{experiment.PresetRetry}},
		{[]string{"-out", "x", "-lab"}, []experiment.Preset{experiment.PresetShop}},
		{[]string{"-out", "x", "-lab", "-model", "retry"}, []experiment.Preset{experiment.PresetRetry}},
	} {
		o, err := parseFlags(c.args, new(bytes.Buffer))
		if err != nil || !slices.Equal(o.models, c.want) {
			t.Errorf("%q: models %v, %v; want %v", c.args, o.models, err, c.want)
		}
	}
	_, err := parseFlags([]string{"-out", "x", "-model", "shopping"}, new(bytes.Buffer))
	if err == nil {
		t.Fatal("-model shopping accepted")
	}
	for _, want := range []string{`"shopping"`, "shop", "retry", "all"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	o, err := parseFlags([]string{"-out", "x", "-model", "retry"}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := o.simConfig(experiment.PresetRetry); err != nil || cfg.SlotsPerBackend != 1 || cfg.Duration != 4500*time.Second {
		t.Errorf("retry simulation %+v, %v: want the preset's cluster and window", cfg, err)
	}
}

// One preset writes into -out; all write one subdirectory each and
// print one labelled table each.
func TestSimulationRun(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-out", dir, "-model", "shop", "-loads", "1.4", "-duration", "120s"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "offered load 1.40") || !strings.Contains(out.String(), "== model shop:") {
		t.Errorf("no table:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "results.csv")); err != nil {
		t.Error(err)
	}

	dir = t.TempDir()
	out.Reset()
	if err := run(context.Background(), []string{"-out", dir, "-loads", "1.4", "-duration", "400s"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, p := range experiment.Presets() {
		if !strings.Contains(out.String(), "== model "+string(p)+":") {
			t.Errorf("no table for %s:\n%s", p, out.String())
		}
		for _, name := range []string{"results.csv", "results.json", "per_class_1.40.png"} {
			if _, err := os.Stat(filepath.Join(dir, string(p), name)); err != nil {
				t.Error(err)
			}
		}
	}
	if strings.Count(out.String(), "offered load 1.40") != 2 {
		t.Errorf("want two tables:\n%s", out.String())
	}
	// A window that ends inside the retry preset's 180 s warm-up is an error.
	if err := run(context.Background(), []string{"-out", t.TempDir(), "-model", "retry", "-loads", "1.4", "-duration", "120s"}, new(bytes.Buffer)); err == nil {
		t.Error("-duration 120s accepted for the retry preset")
	}
}
