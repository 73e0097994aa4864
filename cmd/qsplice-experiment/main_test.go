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

// Lab times not given are the model's defaults times the time scale;
// given ones are taken as they are.
func TestLabDefaultsScale(t *testing.T) {
	o, err := parseFlags([]string{"-lab", "-out", "x", "-timescale", "0.5"}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if o.warmup != 30*time.Second || o.duration != 60*time.Second || o.drain != 30*time.Second ||
		!slices.Equal(o.loads, []float64{0.7, 1.4}) || len(o.policies) != 3 {
		t.Fatalf("options %+v", o)
	}
	o, err = parseFlags([]string{"-lab", "-out", "x", "-timescale", "0.5", "-warmup", "5s", "-duration", "7s", "-drain", "0s"}, new(bytes.Buffer))
	if err != nil || o.warmup != 5*time.Second || o.duration != 7*time.Second || o.drain != 0 {
		t.Fatalf("options %+v, %v", o, err)
	}
	if o, err = parseFlags([]string{"-out", "x"}, new(bytes.Buffer)); err != nil || o.duration != 600*time.Second || len(o.loads) != 21 {
		t.Fatalf("simulation defaults %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"-lab"}, {"-out", "x", "-timescale", "0"}, {"-out", "x", "-policies", "x"}, {"-out", "x", "extra"}} {
		if _, err := parseFlags(bad, new(bytes.Buffer)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The simulation still writes its files and table.
func TestSimulationRun(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-out", dir, "-loads", "1.4", "-duration", "120s"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "offered load 1.40") {
		t.Errorf("no table:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "results.csv")); err != nil {
		t.Error(err)
	}
}
