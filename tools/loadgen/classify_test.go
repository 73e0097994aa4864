package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// misbehavingServer answers each path in one of the ways the front-end
// and back-ends may answer, and counts requests and new connections.
type misbehavingServer struct {
	*httptest.Server
	requests sync.Map // path -> *atomic.Int64
	conns    atomic.Int64
}

func newMisbehavingServer(t *testing.T) *misbehavingServer {
	s := &misbehavingServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	mux.HandleFunc("/full", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/full-bare", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/teapot", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	mux.HandleFunc("/close", func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close() // FIN, no answer
	})
	mux.HandleFunc("/rst", func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close() // RST
	})
	mux.HandleFunc("/cut", func(w http.ResponseWriter, r *http.Request) {
		conn, buf, _ := w.(http.Hijacker).Hijack()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly ten..")
		buf.Flush()
		conn.Close() // body ends early
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // past any client timeout: until the client gives up
	})
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := s.requests.LoadOrStore(r.URL.Path, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		mux.ServeHTTP(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *misbehavingServer) served(path string) int64 {
	n, ok := s.requests.Load(path)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

func TestStatusAndErrorClassification(t *testing.T) {
	srv := newMisbehavingServer(t)
	paths := []string{"/ok", "/busy", "/full", "/full-bare", "/teapot", "/close", "/rst", "/cut", "/slow"}
	cfg := Config{
		Target: srv.URL,
		// 40/s constant from t=0: 4 requests in the 100 ms warm-up, then
		// 10 in the window [100 ms, 350 ms).
		Warmup:   100 * time.Millisecond,
		Duration: 250 * time.Millisecond,
		// /slow never answers, so any timeout tells it from the others;
		// it must outlast the slowest answer of the quick paths, which
		// took over 300 ms once on the loaded 2-core machine under -race
		// (a /full request counted as timed out). The run waits it out
		// once, for the last /slow requests.
		Timeout: 3 * time.Second,
	}
	for _, p := range paths {
		cfg.Streams = append(cfg.Streams, constantStream(strings.TrimPrefix(p, "/"), p, 40))
	}
	res, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	want := map[string]StreamResult{
		"ok":        {Completed: StatusCounts{OK: n}},
		"busy":      {Completed: StatusCounts{TooManyRequests: n}, RetryAfter: RetryAfter{TooManyRequests: n}},
		"full":      {Completed: StatusCounts{ServiceUnavailable: n}, RetryAfter: RetryAfter{ServiceUnavailable: n}},
		"full-bare": {Completed: StatusCounts{ServiceUnavailable: n}},
		"teapot":    {Completed: StatusCounts{Other: n}},
		"close":     {Errors: ErrorCounts{Reset: n}},
		"rst":       {Errors: ErrorCounts{Reset: n}},
		"cut":       {Errors: ErrorCounts{Reset: n}},
		"slow":      {Errors: ErrorCounts{Timeout: n}},
	}
	for _, r := range res.Streams {
		checkAccounting(t, r)
		w := want[r.Name]
		if r.Offered != n || r.Sent != n || r.Completed != w.Completed || r.Errors != w.Errors || r.RetryAfter != w.RetryAfter {
			t.Errorf("%s: offered %d sent %d completed %+v errors %+v retry-after %+v; want %d each, %+v %+v %+v",
				r.Name, r.Offered, r.Sent, r.Completed, r.Errors, r.RetryAfter, n, w.Completed, w.Errors, w.RetryAfter)
		}
	}
	if got := srv.served("/ok"); got != n+4 {
		t.Errorf("server saw %d /ok requests, want %d (warm-up ones are sent, just not counted)", got, n+4)
	}
	ok := res.Streams[0]
	if ok.BodyBytes != 5*n || ok.Latency.Count != n || ok.ThroughputOK != n/0.25 {
		t.Errorf("ok stream: %d body bytes, %d latencies, %.1f/s; want %d, %d, %.1f", ok.BodyBytes, ok.Latency.Count, ok.ThroughputOK, 5*n, n, n/0.25)
	}
	slow := res.Streams[len(res.Streams)-1]
	if slow.LatencyAll.P50Ms < float64(cfg.Timeout.Milliseconds()) {
		t.Errorf("timed-out requests report %v ms, less than the %v timeout", slow.LatencyAll.P50Ms, cfg.Timeout)
	}
	if res.Total.Offered != int64(n*len(paths)) || res.Total.Completed.OK != n || res.Total.Errors.Reset != 3*n {
		t.Errorf("total %+v", res.Total)
	}
	if got, want := srv.conns.Load(), int64((n+4)*len(paths)); got != want {
		t.Errorf("%d connections for %d requests without keep-alive", got, want)
	}
}

func TestConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: the SYN gets a RST
	res, err := Run(context.Background(), Config{
		Target:   "http://" + addr,
		Duration: 100 * time.Millisecond,
		Timeout:  time.Second,
		Streams:  []Stream{constantStream("A", "/", 50)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Streams[0]; r.Offered != 5 || r.Errors != (ErrorCounts{ConnectRefused: 5}) {
		t.Fatalf("offered %d, errors %+v; want 5 refused", r.Offered, r.Errors)
	}
}

func TestResultJSONShape(t *testing.T) {
	var h Histogram
	h.Record(3 * time.Millisecond)
	res := Result{
		Target:  "http://198.18.0.100:8080",
		Streams: []StreamResult{{Name: "A", Rate: 10, Arrival: Poisson, Path: "/", Latency: h.Summary()}},
		Total:   StreamResult{Name: "total", Rate: 10},
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"target", "start", "warmup_s", "duration_s", "measured_s", "timeout_s", "max_inflight", "conns_per_stream", "seed", "interrupted", "streams", "total"} {
		if _, ok := m[k]; !ok {
			t.Errorf("result has no %q: %s", k, b)
		}
	}
	stream := m["streams"].([]any)[0].(map[string]any)
	for _, path := range []string{
		"name", "rate", "arrival", "path", "offered", "sent", "not_sent", "body_bytes", "throughput_ok_per_s",
		"completed.2xx", "completed.429", "completed.503", "completed.other",
		"retry_after.429", "retry_after.503",
		"errors.timeout", "errors.connect_refused", "errors.reset", "errors.other",
		"latency.count", "latency.mean_ms", "latency.p50_ms", "latency.p90_ms", "latency.p99_ms", "latency.p999_ms", "latency.max_ms",
		"latency_all.p99_ms", "send_lag.p99_ms",
	} {
		var v any = stream
		for _, k := range strings.Split(path, ".") {
			v = v.(map[string]any)[k]
		}
		if v == nil {
			t.Errorf("stream result has no %s", path)
		}
	}
	if p50 := stream["latency"].(map[string]any)["p50_ms"].(float64); p50 < 2.99 || p50 > 3.01 {
		t.Errorf("latency.p50_ms = %v, want 3", p50)
	}
	if _, hasHost := stream["host"]; hasHost {
		t.Error("empty host is written out")
	}
}

func TestProgressLine(t *testing.T) {
	r := &runner{cfg: Config{Warmup: 2 * time.Second}, start: time.Unix(100, 0)}
	for _, name := range []string{"A", "B"} {
		r.streams = append(r.streams, &streamState{cfg: Stream{Name: name}})
	}
	r.streams[0].liveSent.Store(1000)
	r.streams[0].liveOK.Store(990)
	r.streams[1].liveSent.Store(50)
	r.inFlight.Store(7)
	sent, ok := []int64{0, 0}, []int64{0, 0}
	line := progressLine(r, time.Unix(101, 0), time.Unix(100, 0), sent, ok)
	if want := "    1s warmup | A sent 1000/s ok 990/s | B sent 50/s ok 0/s | in-flight 7"; line != want {
		t.Fatalf("line %q, want %q", line, want)
	}
	r.streams[0].liveSent.Store(1500)
	line = progressLine(r, time.Unix(103, 0), time.Unix(101, 0), sent, ok)
	if want := "    3s | A sent 250/s ok 0/s | B sent 0/s ok 0/s | in-flight 7"; line != want {
		t.Fatalf("line %q, want %q", line, want)
	}
	if isTerminal(new(strings.Builder)) {
		t.Fatal("a strings.Builder is not a terminal")
	}
}
