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
	for _, want := range []string{"requests     1 (0 follow-ups); handed to a back-end 1, not 0\n", "answers      400: 1, 408: 1\n"} {
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

// -config schedules with a front-end configuration's customers: the
// capture's Host maps to its customer. No control key is needed.
func TestConfigFileCustomers(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "front.yaml")
	y := "link: {interface: eth0}\nhandoff: 198.18.0.101\ncontrol: {listen: 198.18.0.2:7400, key_file: /nonexistent}\n" +
		"listeners:\n  - {vip: 198.18.0.100, port: 80, policy: credit}\n" +
		"customers:\n  - {name: W, domains: [www.example.com], reservation: 10}\n"
	if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if err := run([]string{"-in", goldenInput, "-out", filepath.Join(dir, "o.pcap"), "-config", cfg, "-json"}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	var sum replay.Summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatal(err)
	}
	if c := sum.Customers["W"]; c.Offered != 1 || c.Admitted != 1 || len(sum.Customers) != 1 {
		t.Errorf("customers %+v, want W's one request handed over", sum.Customers)
	}
	if err := run([]string{"-in", goldenInput, "-out", filepath.Join(dir, "o.pcap"), "-config", filepath.Join(dir, "none.yaml")},
		io.Discard, io.Discard); err == nil {
		t.Error("a missing configuration file was accepted")
	}
}

// -out naming the input is refused, and a failed run leaves -out as it
// was.
func TestOutputIsNeverDestroyed(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcap")
	golden, err := os.ReadFile(goldenInput)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, golden, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-in", in, "-out", in}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "input") {
		t.Errorf("-out = -in: %v", err)
	}
	if got, _ := os.ReadFile(in); !bytes.Equal(got, golden) {
		t.Fatal("the input was changed")
	}
	out := filepath.Join(dir, "out.pcap")
	if err := os.WriteFile(out, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A capture with no frame for the VIP is an error, and -out stays.
	err = run([]string{"-in", in, "-out", out, "-vip", "198.18.9.9"}, io.Discard, io.Discard)
	if !errors.Is(err, replay.ErrNothingFed) {
		t.Errorf("replaying for another VIP: %v, want ErrNothingFed", err)
	}
	if got, _ := os.ReadFile(out); string(got) != "precious" {
		t.Errorf("a failed run replaced -out with %d bytes", len(got))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}
