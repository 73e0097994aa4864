package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/loadgen"
)

func TestFlags(t *testing.T) {
	o, err := parseFlags([]string{
		"-target", "http://198.18.0.100:8080", "-duration", "5s", "-warmup", "1s", "-timeout", "500ms",
		"-stream", "name=A,host=a.example,rate=1000,path=/data/1K,arrival=poisson",
		"-stream", "name=B,rate=100,arrival=constant",
		"-max-inflight", "100", "-conns-per-stream", "8", "-json", "-", "-seed", "7", "-progress=false",
	}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if c.Target != "http://198.18.0.100:8080" || c.Duration != 5*time.Second || c.Warmup != time.Second ||
		c.Timeout != 500*time.Millisecond || c.MaxInFlight != 100 || c.ConnsPerStream != 8 || c.Seed != 7 ||
		o.jsonPath != "-" || o.progress {
		t.Fatalf("parsed %+v", o)
	}
	if len(c.Streams) != 2 || c.Streams[0].Host != "a.example" || c.Streams[1].Arrival != loadgen.Constant {
		t.Fatalf("streams %+v", c.Streams)
	}
	o, err = parseFlags([]string{"-target", "http://x", "-stream", "name=A,rate=1"}, new(bytes.Buffer))
	if err != nil || o.cfg.Duration != 30*time.Second || o.cfg.Warmup != 2*time.Second || o.cfg.Timeout != 2*time.Second ||
		o.cfg.MaxInFlight != 4000 || o.cfg.ConnsPerStream != 0 || o.cfg.Seed != 1 || !o.progress {
		t.Fatalf("defaults %+v, %v", o, err)
	}
	for _, bad := range [][]string{
		{"-stream", "name=A,rate=1"},                 // no target
		{"-target", "http://x"},                      // no stream
		{"-target", "http://x", "-stream", "name=A"}, // no rate
		{"-target", "http://x", "-stream", "name=A,rate=1", "-max-inflight", "0"},
		{"-target", "http://x", "-stream", "name=A,rate=1", "-timeout", "0s"},
		{"-target", "http://x", "-stream", "name=A,rate=1", "extra"},
	} {
		if _, err := parseFlags(bad, new(bytes.Buffer)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	var out bytes.Buffer
	_, err = parseFlags([]string{"-stream", "name=A,rte=1"}, &out)
	if err == nil || !strings.Contains(err.Error(), `unknown key "rte"`) {
		t.Fatalf("bad key: %v", err)
	}
}

func TestHelpExplainsOpenLoopAndEveryFlag(t *testing.T) {
	var out bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"closed-loop", "open-loop", "intended time", "coordinated omission",
		"-target", "-stream", "-duration", "-warmup", "-timeout", "-max-inflight", "-conns-per-stream", "-json", "-seed", "-progress",
		"name=", "rate=", "host=", "path=", "arrival="} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help does not mention %s:\n%s", want, out.String())
		}
	}
}

func TestRunWritesTableAndJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "b.example" {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	args := []string{"-target", srv.URL, "-duration", "200ms", "-warmup", "0s", "-progress=false",
		"-stream", "name=A,host=a.example,rate=50,arrival=constant",
		"-stream", "name=B,host=b.example,rate=50,arrival=constant"}

	// -json FILE: the table on stdout, the JSON in the file.
	path := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), append(args, "-json", path), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stream", "p99ms", "A", "B", "total"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var res loadgen.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	if len(res.Streams) != 2 || res.Streams[0].Completed.OK != 10 || res.Streams[1].Completed.ServiceUnavailable != 10 ||
		res.Streams[1].RetryAfter.ServiceUnavailable != 10 || res.Total.Offered != 20 {
		t.Fatalf("result %s", b)
	}

	// -json -: the JSON alone on stdout, the table on stderr.
	stdout.Reset()
	stderr.Reset()
	if err := run(context.Background(), append(args, "-json", "-"), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout.String())
	}
	if !strings.Contains(stderr.String(), "total") {
		t.Fatalf("table not on stderr: %q", stderr.String())
	}

	if err := run(context.Background(), append(args, "-json", filepath.Join(t.TempDir(), "no", "such", "dir")), &stdout, &stderr); err == nil {
		t.Fatal("an unwritable -json path was accepted")
	}
}
