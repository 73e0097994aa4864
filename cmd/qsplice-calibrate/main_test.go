package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qsplice/qsplice/tools/testserver"
)

func TestFlags(t *testing.T) {
	o, err := parseFlags([]string{"-target", "http://x:8080", "-sizes", "1K, 64K", "-start", "10"}, &bytes.Buffer{})
	if err != nil || len(o.cfg.Sizes) != 2 || o.cfg.Sizes[1] != 64<<10 || o.cfg.Start != 10 {
		t.Fatalf("%+v, %v", o, err)
	}
	for _, bad := range [][]string{{}, {"-target", "http://x", "-sizes", "1Q"}, {"-target", "http://x", "extra"}} {
		if _, err := parseFlags(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A short calibration against a test server whose capacity is its
// concurrency over its service time prints the snippet and writes a and
// b into the file. The rates stay low: the test measures the plumbing,
// not the machine.
func TestCalibrateWritesTheFile(t *testing.T) {
	srv := httptest.NewServer(testserver.NewHandler(testserver.Config{ID: 1}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "fe.yaml")
	os.WriteFile(file, []byte("# mine\nfeedback:\n  content:\n    trees: 3\n    a: 0   # to measure\n    b: 0\n"), 0o644)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-target", srv.URL, "-sizes", "0,256K", "-start", "20", "-max-rate", "30",
		"-factor", "1.5", "-step", "200ms", "-pause", "1ms", "-write", file}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "feedback:\n  content:\n    a: ") {
		t.Errorf("stdout %q", stdout.String())
	}
	b, _ := os.ReadFile(file)
	if !strings.HasPrefix(string(b), "# mine\nfeedback:\n  content:\n    trees: 3\n    a: ") || strings.Contains(string(b), "a: 0   #") ||
		!strings.Contains(string(b), "# to measure") {
		t.Errorf("file now\n%s", b)
	}
}

// A calibration prints a [k/N] line as each step starts; -quiet none,
// and still the results.
func TestProgressLinesAndQuiet(t *testing.T) {
	srv := httptest.NewServer(testserver.NewHandler(testserver.Config{ID: 1}))
	t.Cleanup(srv.Close)
	args := []string{"-target", srv.URL, "-sizes", "0,1K", "-start", "20", "-max-rate", "30",
		"-factor", "1.5", "-step", "100ms", "-pause", "1ms"}
	for _, quiet := range []bool{false, true} {
		var stdout, stderr bytes.Buffer
		a := args
		if quiet {
			a = append(a[:len(a):len(a)], "-quiet")
		}
		if err := run(context.Background(), a, &stdout, &stderr); err != nil {
			t.Fatalf("quiet=%v: %v\n%s", quiet, err, stderr.String())
		}
		// Two sizes, each climbing 20 then 30 req/s unless 20 fails.
		hasFirst := strings.Contains(stderr.String(), "calibration [1/4] size 0 at 20.0 req/s\n")
		hasSteps := strings.Contains(stderr.String(), "req/s offered")
		if hasFirst == quiet || hasSteps == quiet {
			t.Errorf("quiet=%v: progress line %v, step lines %v in\n%s", quiet, hasFirst, hasSteps, stderr.String())
		}
		if !strings.Contains(stderr.String(), "Rmax") || !strings.HasPrefix(stdout.String(), "feedback:") {
			t.Errorf("quiet=%v: no results:\n%s\n%s", quiet, stderr.String(), stdout.String())
		}
	}
}
