package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"github.com/qsplice/qsplice/tools/lab"
	"github.com/qsplice/qsplice/tools/netns"
	"os"
	"slices"
	"testing"
	"time"
)

func TestParseInterleavesFlagsAndArguments(t *testing.T) {
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	var lf labFlags
	lf.register(fs)
	count := fs.Int("count", 0, "")
	pos, rest, err := parse(fs, []string{"fe", "-name", "x1", "/tmp/f.pcap", "-count", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pos, []string{"fe", "/tmp/f.pcap"}) || lf.name != "x1" || *count != 3 || rest != nil {
		t.Fatalf("pos %v rest %v name %q count %d", pos, rest, lf.name, *count)
	}
}

func TestParseKeepsCommandAfterDashes(t *testing.T) {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	var lf labFlags
	lf.register(fs)
	pos, rest, err := parse(fs, []string{"-name", "x2", "c1", "--", "curl", "-s", "--", "-name"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pos, []string{"c1"}) || !slices.Equal(rest, []string{"curl", "-s", "--", "-name"}) || lf.name != "x2" {
		t.Fatalf("pos %v rest %v name %q", pos, rest, lf.name)
	}
	if _, _, err := parse(fs, []string{"-nosuchflag"}); err == nil {
		t.Fatal("unknown flag accepted")
	}
}

func TestUpFlagsBuildConfig(t *testing.T) {
	fs, config := upFlags()
	args := []string{"-name", "abc", "-backends", "3", "-clients", "2", "-topology-only",
		"-files", "0, 2K,1M", "-service-time", "20ms", "-backend-args", "-log-level debug", "-ready-timeout", "5s"}
	if _, _, err := parse(fs, args); err != nil {
		t.Fatal(err)
	}
	cfg, err := config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "abc" || cfg.Backends != 3 || cfg.Clients != 2 || cfg.StateDir != "" {
		t.Errorf("identity: %+v", cfg)
	}
	if cfg.Nginx || cfg.TestServer || cfg.Daemons {
		t.Errorf("-topology-only left processes on: %+v", cfg)
	}
	if !slices.Equal(cfg.Files, []int64{0, 2 << 10, 1 << 20}) {
		t.Errorf("files = %v", cfg.Files)
	}
	if cfg.ServiceTime != 20*time.Millisecond || cfg.ReadyTimeout != 5*time.Second {
		t.Errorf("durations: %v %v", cfg.ServiceTime, cfg.ReadyTimeout)
	}
	if !slices.Equal(cfg.BackendArgs, []string{"-log-level", "debug"}) {
		t.Errorf("backend args = %q", cfg.BackendArgs)
	}
	if !cfg.FastOpen {
		t.Error("TCP Fast Open is off by default")
	}

	fs, config = upFlags()
	if _, _, err := parse(fs, []string{"-fast-open=false"}); err != nil {
		t.Fatal(err)
	}
	if cfg, err := config(); err != nil || cfg.FastOpen {
		t.Errorf("-fast-open=false: FastOpen %v, %v", cfg.FastOpen, err)
	}

	fs, config = upFlags()
	if _, _, err := parse(fs, []string{"-files", "1Q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := config(); err == nil {
		t.Error("bad -files accepted")
	}
}

// TestPruneRemovesOnlyTheAbandonedLabsItMatches: two labs with nothing
// running in them, as killed runs leave them; prune with a -match that
// names one removes that one and leaves the other (the match keeps the
// test off the labs other packages' tests are building meanwhile).
func TestPruneRemovesOnlyTheAbandonedLabsItMatches(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
	var b [4]byte
	rand.Read(b[:])
	gone, kept := "p"+hex.EncodeToString(b[:])[:7], "q"+hex.EncodeToString(b[:])[:7]
	for _, name := range []string{gone, kept} {
		t.Cleanup(func() { lab.Down(name, t.TempDir()) })
		if err := netns.Add("qs-" + name + "-sw"); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmdPrune([]string{"-older", "0s", "-match", "^" + gone + "$"}); err != nil {
		t.Fatal(err)
	}
	if netns.Exists("qs-" + gone + "-sw") {
		t.Errorf("lab %s is still there", gone)
	}
	if !netns.Exists("qs-" + kept + "-sw") {
		t.Errorf("lab %s, which -match does not name, was removed", kept)
	}
	if err := cmdPrune([]string{"-older", "-1s"}); err == nil {
		t.Error("a negative -older was taken")
	}
}
