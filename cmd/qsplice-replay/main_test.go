package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qsplice/qsplice/tools/replay"
)

const (
	goldenInput = "../../tools/replay/testdata/three-clients.pcap"
	goldenHash  = "../../tools/replay/testdata/three-clients.golden"
)

// TestDefaultsMatchTheLibrary replays the golden capture with no flags but
// -in/-out: the output must be the library's golden output, so the
// command's flag defaults are Config's defaults.
func TestDefaultsMatchTheLibrary(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.pcap")
	var stdout bytes.Buffer
	if err := run([]string{"-in", goldenInput, "-out", out, "-json"}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	var sum replay.Summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("-json output: %v\n%s", err, stdout.String())
	}
	if sum.Requests != 1 || sum.Answers["400"] != 1 || sum.Answers["408"] != 1 {
		t.Errorf("summary: requests %d, answers %v; want 1 request, one 400, one 408", sum.Requests, sum.Answers)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(goldenHash)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(got)
	if hex.EncodeToString(h[:]) != strings.TrimSpace(string(want)) {
		t.Error("the command's output with default flags differs from the library's golden output")
	}
}

func TestTextSummary(t *testing.T) {
	var stdout bytes.Buffer
	if err := run([]string{"-in", goldenInput, "-out", filepath.Join(t.TempDir(), "o.pcap")}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"requests     1\n", "answers      400: 1, 408: 1\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestFlagErrors(t *testing.T) {
	var stderr bytes.Buffer
	if err := run([]string{"-h"}, io.Discard, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(stderr.String(), "-recompute-checksums") || !strings.Contains(stderr.String(), "SACK") {
		t.Errorf("-h does not explain the flags and the rewriting:\n%s", stderr.String())
	}
	for _, args := range [][]string{
		{"-out", "x.pcap"},
		{"-in", goldenInput, "-out", "x.pcap", "-vip", "nope"},
		{"-in", goldenInput, "-out", "x.pcap", "-ports", "80,0"},
		{"-in", goldenInput, "-out", "x.pcap", "-mac", "02:00"},
		{"-in", goldenInput, "-out", "x.pcap", "extra"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
