package testserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/content"
)

// waits records the service times a handler asked for, without waiting.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) wait(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return nil
}

func (w *waits) take() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.d
	w.d = nil
	return d
}

func start(t *testing.T, cfg Config) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(NewHandler(cfg))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, srv *httptest.Server, method, path string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func TestData(t *testing.T) {
	srv := start(t, Config{ID: 7, Wait: new(waits).wait})
	for _, size := range []string{"0", "1500", "1K", "1M"} {
		n, _ := content.ParseSize(size)
		resp, body := do(t, srv, "GET", "/data/"+size, nil)
		if resp.StatusCode != 200 || resp.ContentLength != n || int64(len(body)) != n {
			t.Fatalf("/data/%s: status %d, Content-Length %d, %d bytes", size, resp.StatusCode, resp.ContentLength, len(body))
		}
		if sha256.Sum256(body) != content.SHA256(7, n) {
			t.Fatalf("/data/%s: body differs from content.Reader(7, %d)", size, n)
		}
		if resp.Header.Get("X-Backend-Id") != "7" || resp.Header.Get("Content-Type") != "application/octet-stream" {
			t.Fatalf("/data/%s: headers %v", size, resp.Header)
		}
	}
}

func TestHeadAndRange(t *testing.T) {
	srv := start(t, Config{ID: 2, Wait: new(waits).wait})
	resp, body := do(t, srv, "HEAD", "/data/64M", nil)
	if resp.StatusCode != 200 || resp.ContentLength != 64<<20 || len(body) != 0 {
		t.Fatalf("HEAD: status %d, Content-Length %d, %d body bytes", resp.StatusCode, resp.ContentLength, len(body))
	}
	req, _ := http.NewRequest("GET", srv.URL+"/data/1K", nil)
	req.Header.Set("Range", "bytes=100-199")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	part, _ := io.ReadAll(resp.Body)
	whole, _ := io.ReadAll(content.Reader(2, 1024))
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(part, whole[100:200]) {
		t.Fatalf("range: status %d, %d bytes, match %v", resp.StatusCode, len(part), bytes.Equal(part, whole[100:200]))
	}
}

func TestHello(t *testing.T) {
	w := new(waits)
	srv := start(t, Config{ID: 12, ServiceTime: time.Second, Wait: w.wait})
	for _, path := range []string{"/", "/health"} {
		resp, body := do(t, srv, "GET", path, nil)
		if resp.StatusCode != 200 || string(body) != "qsplice-testserver id=12\n" {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, body)
		}
	}
	if got := w.take(); len(got) != 0 {
		t.Fatalf("health answers waited %v; they must not be slowed", got)
	}
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	srv := start(t, Config{ID: 1, Wait: new(waits).wait})
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/nope", 404, ""},
		{"DELETE", "/nope", 404, ""},
		{"GET", "/data/abc", 404, ""},
		{"GET", "/data/-1", 404, ""},
		{"GET", "/data/1K/more", 404, ""},
		{"GET", "/healthz", 404, ""},
		{"POST", "/data/1K", 405, "GET, HEAD"},
		{"PUT", "/", 405, "GET, HEAD"},
		{"DELETE", "/health", 405, "GET, HEAD"},
		{"GET", "/echo", 405, "POST"},
	} {
		resp, _ := do(t, srv, tc.method, tc.path, nil)
		if resp.StatusCode != tc.status || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q, want %d Allow %q", tc.method, tc.path,
				resp.StatusCode, resp.Header.Get("Allow"), tc.status, tc.allow)
		}
		if resp.Header.Get("X-Backend-Id") != "1" {
			t.Errorf("%s %s: no X-Backend-Id on the error response", tc.method, tc.path)
		}
	}
}

func TestEcho(t *testing.T) {
	w := new(waits)
	srv := start(t, Config{ID: 1, ServiceTime: 5 * time.Millisecond, Wait: w.wait})
	upload := make([]byte, 3<<20) // larger than any buffer on the way: needs full duplex
	rand.NewChaCha8([32]byte{1}).Read(upload)
	resp, body := do(t, srv, "POST", "/echo", bytes.NewReader(upload))
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(upload)) || !bytes.Equal(body, upload) {
		t.Fatalf("echo: status %d, Content-Length %d, %d bytes back, equal %v",
			resp.StatusCode, resp.ContentLength, len(body), bytes.Equal(body, upload))
	}
	// Unknown length: the request is chunked, and so is the echo.
	resp, body = do(t, srv, "POST", "/echo", io.MultiReader(strings.NewReader("chunked "), strings.NewReader("upload")))
	if resp.StatusCode != 200 || string(body) != "chunked upload" {
		t.Fatalf("chunked echo: %d %q", resp.StatusCode, body)
	}
	if got := w.take(); len(got) != 2 || got[0] != 5*time.Millisecond {
		t.Fatalf("echo service times %v, want two of 5ms", got)
	}
}

func TestServiceTime(t *testing.T) {
	w := new(waits)
	srv := start(t, Config{ID: 1, ServiceTime: 20 * time.Millisecond, Wait: w.wait})
	resp, _ := do(t, srv, "GET", "/data/1K", nil)
	resp2, _ := do(t, srv, "GET", "/data/1K?service=40ms", nil)
	resp3, _ := do(t, srv, "GET", "/data/1K?service=0", nil)
	got := w.take()
	want := []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 0}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("service times %v, want %v", got, want)
	}
	if resp.Header.Get("X-Service-Time") != "20ms" || resp2.Header.Get("X-Service-Time") != "40ms" || resp3.Header.Get("X-Service-Time") != "0s" {
		t.Fatalf("X-Service-Time headers %q %q %q", resp.Header.Get("X-Service-Time"),
			resp2.Header.Get("X-Service-Time"), resp3.Header.Get("X-Service-Time"))
	}
	for _, bad := range []string{"fast", "-5ms", "10"} {
		if resp, _ := do(t, srv, "GET", "/data/1K?service="+bad, nil); resp.StatusCode != 400 {
			t.Errorf("service=%s: status %d, want 400", bad, resp.StatusCode)
		}
	}
}

func TestServiceJitter(t *testing.T) {
	w := new(waits)
	srv := start(t, Config{ID: 1, ServiceTime: 20 * time.Millisecond, ServiceJitter: 5 * time.Millisecond, Wait: w.wait})
	for range 40 {
		do(t, srv, "HEAD", "/data/1K", nil)
	}
	got := w.take()
	distinct := map[time.Duration]bool{}
	for _, d := range got {
		if d < 15*time.Millisecond || d > 25*time.Millisecond {
			t.Fatalf("service time %v outside 20ms ± 5ms", d)
		}
		distinct[d] = true
	}
	if len(got) != 40 || len(distinct) < 2 {
		t.Fatalf("%d service times, %d distinct: jitter not applied", len(got), len(distinct))
	}
	// Jitter larger than the service time clamps at zero.
	srv = start(t, Config{ServiceTime: time.Millisecond, ServiceJitter: time.Second, Wait: w.wait})
	for range 20 {
		do(t, srv, "HEAD", "/data/1K", nil)
	}
	for _, d := range w.take() {
		if d < 0 {
			t.Fatalf("negative service time %v", d)
		}
	}
}

// The default Wait really waits, and stops waiting when the client leaves.
func TestRealWait(t *testing.T) {
	finished := make(chan struct{}, 1)
	started := make(chan struct{}, 1)
	h := NewHandler(Config{ID: 1})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		h.ServeHTTP(w, r)
		finished <- struct{}{}
	}))
	t.Cleanup(srv.Close)

	begin := time.Now()
	do(t, srv, "GET", "/data/1K?service=30ms", nil)
	if took := time.Since(begin); took < 30*time.Millisecond {
		t.Fatalf("answered in %v, before the 30ms service time", took)
	}
	<-started
	<-finished

	// The client leaves once the handler is waiting (not before the
	// server has read the request: then no handler runs at all).
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/data/1K?service=1h", nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("request survived its cancellation")
	}
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("handler still waiting out a 1h service time after the client left")
	}
}

func TestKeepAlive(t *testing.T) {
	srv := start(t, Config{ID: 1, Wait: new(waits).wait})
	var reused []bool
	for range 3 {
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = append(reused, info.Reused) }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", srv.URL+"/data/10K", nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if len(reused) != 3 || reused[0] || !reused[1] || !reused[2] {
		t.Fatalf("connection reuse %v, want [false true true]", reused)
	}
}
