package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/loadgen"
)

func TestSessionModeWritesJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "shop.example" {
			http.Error(w, "wrong host", http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "sessions.log")
	if err := os.WriteFile(logPath, []byte("/ think=0.001\n/details\n\n/search\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-target", srv.URL, "-host", "shop.example", "-warmup", "0s",
		"-duration", "10s", "-sessions", "rate=50,timeout=2s,count=4", "-wsesslog", logPath, "-json", "-"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var res loadgen.SessionResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if res.Mode != "wsesslog" || res.Sessions.Completed != 4 || res.Total.Requested != 6 || res.Total.Completed != 6 {
		t.Errorf("result %+v", res)
	}
	if !strings.Contains(stderr.String(), "sessions: 4 started, 4 completed") {
		t.Errorf("table:\n%s", stderr.String())
	}
}

func TestSessionFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-target", "http://x", "-wsesslog", "f"},
		{"-target", "http://x", "-sessions", "rate=1", "-stream", "name=A,rate=1"},
		{"-sessions", "rate=1"},
		{"-target", "http://x", "-sessions", "rate=1", "-wsesslog", "/nonexistent/file"},
		{"-target", "http://x", "-sessions", "rate=1", "-drain", "-1s"},
		{"-target", "http://x", "-sessions", "rate=1,refused=maybe"},
	} {
		if _, err := parseFlags(args, new(bytes.Buffer)); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

func TestSessionDrainAndRefusalFlags(t *testing.T) {
	o, err := parseFlags([]string{"-target", "http://x", "-sessions", "rate=1,refused=leave", "-drain", "30s"}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if o.sessions == nil || o.sessions.Drain != 30*time.Second || !o.sessions.Sessions.LeaveOnRefusal {
		t.Fatalf("parsed %+v", o.sessions)
	}
}
