package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tl "github.com/qsplice/qsplice/frontend/timeline"
)

// TestRunSummarisesPlotsAndChecks: the command prints the summary, draws
// the waterfall of the connection asked for and the CDFs, and with
// -check fails on a record out of order.
func TestRunSummarisesPlotsAndChecks(t *testing.T) {
	dir := t.TempDir()
	var lines []byte
	for i := uint64(1); i <= 3; i++ {
		r := tl.Record{Flow: i, Backend: 1}
		for s := range tl.NumSteps {
			r.Set(s, int64(i)*1e9+int64(s)*1e6)
		}
		if i == 3 {
			r.At[tl.Queued] = r.At[tl.SYN] - 1 // out of order
		}
		if i == 2 {
			r.AddRetx("client_sack", int64(i)*1e9+12_500_000)
		}
		lines = r.AppendJSON(lines)
	}
	file := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(file, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(dir, "wf.png")
	var out, errOut bytes.Buffer
	if err := run([]string{"-conn", "2", "-waterfall", wf, "-cdf", filepath.Join(dir, "cdf"), file}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	for _, want := range []string{"records 3 (0 of connections still held at the stop), out of order 1", "c2_synack            3", "wrote " + wf, "wrote 13 CDFs",
		"retransmissions seen: 1 on 1 connections (listed: client_sack 1)", "flow 2: 1 retransmissions seen:", "12.500 ms  client_sack"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(wf); err != nil {
		t.Error(err)
	}
	if err := run([]string{"-check", file}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "1 of 3 records out of order") {
		t.Errorf("-check: %v", err)
	}
	if err := run([]string{"-conn", "9", "-waterfall", wf, file}, &out, &errOut); err == nil {
		t.Error("a waterfall of a connection that is not there")
	}
}
