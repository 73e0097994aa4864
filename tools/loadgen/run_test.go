package loadgen

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func constantStream(name, path string, rate float64) Stream {
	return Stream{Name: name, Path: path, Rate: rate, Arrival: Constant}
}

// checkAccounting asserts that every offered request is counted once.
func checkAccounting(t *testing.T, r StreamResult) {
	t.Helper()
	if r.Offered != r.Sent+r.NotSent || r.Sent != r.Completed.Total()+r.Errors.Total() || r.LatencyAll.Count != uint64(r.Sent) {
		t.Errorf("%s: offered %d, sent %d, not sent %d, answered %d, failed %d, latencies %d: do not add up",
			r.Name, r.Offered, r.Sent, r.NotSent, r.Completed.Total(), r.Errors.Total(), r.LatencyAll.Count)
	}
}

func TestKeepAlivePoolAndHostHeader(t *testing.T) {
	var hosts sync.Map
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts.Store(r.Host, true)
	}))
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	a, b := constantStream("A", "/", 200), constantStream("B", "/", 200)
	a.Host, b.Host = "a.example", "b.example"
	res, err := Run(context.Background(), Config{
		Target:         srv.URL,
		Duration:       200 * time.Millisecond,
		ConnsPerStream: 2,
		Streams:        []Stream{a, b},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Total.Completed.OK != 80 {
		t.Fatalf("%d answers, want 80: %+v", res.Total.Completed.OK, res.Total)
	}
	if got := conns.Load(); got > 4 {
		t.Errorf("%d connections for two streams of 2 pooled connections", got)
	}
	for _, h := range []string{"a.example", "b.example"} {
		if _, ok := hosts.Load(h); !ok {
			t.Errorf("no request with Host %s", h)
		}
	}
}

// TestLatencyCountsFromIntendedTime stalls the server on the first request
// while a single pooled connection is all the stream has: requests due
// during the stall cannot go out, and their latency must include the
// wait. Measured from when each request got the connection (what a
// closed-loop tool reports), only the stalled request would be slow.
func TestLatencyCountsFromIntendedTime(t *testing.T) {
	const stall = 400 * time.Millisecond
	var first atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			time.Sleep(stall) // the stall being measured, not synchronisation
		}
	}))
	t.Cleanup(srv.Close)
	res, err := Run(context.Background(), Config{
		Target:         srv.URL,
		Duration:       time.Second,
		Timeout:        5 * time.Second,
		ConnsPerStream: 1,
		Streams:        []Stream{constantStream("A", "/", 100)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, lag := res.Streams[0].Latency, res.Streams[0].SendLag
	// Requests due at 0, 10, ..., 390 ms wait until about 400 ms: ten of the
	// hundred waited over 300 ms, so p90 is near 300 ms; half waited not at
	// all. Bounds are loose so a busy machine cannot break them.
	if l.Count != 100 || l.MaxMs < float64(stall.Milliseconds())*0.97 || l.P90Ms < 150 || l.P50Ms > 150 {
		t.Fatalf("latency %+v: want 100 answers, max >= ~400 ms, p90 >= 150 ms, p50 < 150 ms", l)
	}
	// The wait was spent before the requests had a connection to go out
	// on: timed from sending, as closed-loop tools do, it would vanish.
	if lag.Count != 100 || lag.P90Ms < 150 {
		t.Fatalf("send lag %+v: the queued requests' wait should show here too", lag)
	}
}

func TestMaxInFlightCountsNotSentAndProgress(t *testing.T) {
	srv := newMisbehavingServer(t)
	var progress strings.Builder
	res, err := Run(context.Background(), Config{
		Target: srv.URL,
		// 20 requests due in the first 200 ms; the first 3 hang until their
		// 1.5 s timeout, so the other 17 find the bound reached. The run
		// lasts past the first one-second progress tick (and on a loaded
		// machine maybe past the second: only the first line is known).
		Duration:    200 * time.Millisecond,
		Timeout:     1500 * time.Millisecond,
		MaxInFlight: 3,
		Streams:     []Stream{constantStream("A", "/slow", 100)},
	}, &progress)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Streams[0]
	checkAccounting(t, r)
	if r.Offered != 20 || r.Sent != 3 || r.NotSent != 17 || r.Errors.Timeout != 3 {
		t.Fatalf("offered %d sent %d not sent %d timeouts %d; want 20 3 17 3", r.Offered, r.Sent, r.NotSent, r.Errors.Timeout)
	}
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	if strings.Contains(progress.String(), "\r") ||
		!strings.Contains(lines[0], "A sent 3/s ok 0/s") || !strings.HasSuffix(lines[0], "in-flight 3") {
		t.Fatalf("progress on a non-terminal: %q", progress.String())
	}
}

func TestInterruptedRunReturnsPartialResult(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 5 {
			cancel() // as SIGINT would, mid-run
		}
	}))
	t.Cleanup(srv.Close)
	res, err := Run(ctx, Config{
		Target:   srv.URL,
		Duration: time.Minute,
		Streams:  []Stream{constantStream("A", "/", 100)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Streams[0]
	checkAccounting(t, r)
	if !res.Interrupted || res.MeasuredS >= 30 || r.Offered < 5 || r.Completed.OK < 5 || r.Errors.Total() != 0 {
		t.Fatalf("interrupted %v after %.2fs: %+v", res.Interrupted, res.MeasuredS, r)
	}
}

// TestIdleConnectionClosedByServerIsRetried: a server that closes every
// connection after one answer, without saying so, makes each pooled
// connection fail on its next use before anything is answered. Such a
// request is sent again on a new connection and must not count as reset.
func TestIdleConnectionClosedByServerIsRetried(t *testing.T) {
	var hosts sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts.Store(r.Host, true)
		conn, buf, _ := w.(http.Hijacker).Hijack()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		buf.Flush()
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	res, err := Run(context.Background(), Config{
		Target:         srv.URL,
		Duration:       200 * time.Millisecond,
		ConnsPerStream: 1,
		Streams:        []Stream{constantStream("A", "/", 50)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Streams[0]; r.Completed.OK != 10 || r.Errors.Total() != 0 {
		t.Fatalf("completed %+v errors %+v; want 10 answers, no errors", r.Completed, r.Errors)
	}
	// With no host= in the stream, Host is the target's host:port.
	if _, ok := hosts.Load(strings.TrimPrefix(srv.URL, "http://")); !ok {
		t.Error("Host header is not the target's host:port")
	}
}
