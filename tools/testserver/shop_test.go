package testserver

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/session"
)

// fixedExp returns the given variates in turn, then repeats the last.
func fixedExp(xs ...float64) func() float64 {
	var mu sync.Mutex
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		x := xs[0]
		if len(xs) > 1 {
			xs = xs[1:]
		}
		return x
	}
}

func TestShopPages(t *testing.T) {
	w := new(waits)
	means := DefaultShopService()
	srv := start(t, Config{ID: 3, Wait: w.wait, Shop: &Shop{ServiceMean: means, ExpFloat64: fixedExp(0.5)}})
	for p := range session.NumPages {
		page := session.Stage(p)
		for _, path := range []string{page.Path(), page.Path() + "?item=42&q=a"} {
			resp, body := do(t, srv, "GET", path, nil)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("%s: status %d, type %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if string(body) != shopBody(page, "3") || !strings.Contains(string(body), "<h1>"+page.String()+"</h1>") {
				t.Fatalf("%s: body %q", path, body)
			}
			if resp.ContentLength != int64(len(body)) || resp.Header.Get("X-Backend-Id") != "3" {
				t.Fatalf("%s: Content-Length %d, X-Backend-Id %q", path, resp.ContentLength, resp.Header.Get("X-Backend-Id"))
			}
			if want := (means[page] / 2).String(); resp.Header.Get("X-Service-Time") != want {
				t.Fatalf("%s: X-Service-Time %q, want %s", path, resp.Header.Get("X-Service-Time"), want)
			}
		}
		if got := w.take(); len(got) != 2 || got[0] != means[page]/2 || got[1] != means[page]/2 {
			t.Fatalf("%s: waited %v, want twice half of the mean %v", page, got, means[page])
		}
	}
	// HEAD works as GET does, other methods are refused.
	if resp, body := do(t, srv, "HEAD", "/payment", nil); resp.StatusCode != 200 || len(body) != 0 {
		t.Fatalf("HEAD /payment: %d, %d body bytes", resp.StatusCode, len(body))
	}
	if resp, _ := do(t, srv, "POST", "/confirm", nil); resp.StatusCode != 405 {
		t.Fatalf("POST /confirm: %d, want 405", resp.StatusCode)
	}
	if resp, _ := do(t, srv, "GET", "/confirm/more", nil); resp.StatusCode != 404 {
		t.Fatalf("/confirm/more: %d, want 404", resp.StatusCode)
	}
}

// The draws scale each page's own mean, in the order requests arrive.
func TestShopServiceDraws(t *testing.T) {
	w := new(waits)
	means := DefaultShopService()
	srv := start(t, Config{ID: 1, Wait: w.wait, Shop: &Shop{ServiceMean: means, ExpFloat64: fixedExp(0, 1, 3.25)}})
	for _, path := range []string{"/search", "/login", "/confirm"} {
		do(t, srv, "GET", path, nil)
	}
	want := []time.Duration{0, means[session.Login], 3*means[session.Confirm] + means[session.Confirm]/4}
	got := w.take()
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("service times %v, want %v", got, want)
	}
}

// Without an injected source the times are exponential with the page's
// mean: over 2000 draws the mean is within 10% (about 4.5 standard
// errors) and about 1/e of them exceed it.
func TestShopServiceIsExponential(t *testing.T) {
	w := new(waits)
	srv := start(t, Config{ID: 1, Wait: w.wait, Shop: &Shop{ServiceMean: DefaultShopService()}})
	const n = 2000
	for range n {
		do(t, srv, "HEAD", "/payment", nil)
	}
	mean := DefaultShopService()[session.Payment]
	var sum time.Duration
	above := 0
	for _, d := range w.take() {
		sum += d
		if d > mean {
			above++
		}
	}
	if got := sum / n; got < mean*9/10 || got > mean*11/10 {
		t.Errorf("mean service time %v over %d draws, want %v within 10%%", got, n, mean)
	}
	if frac := float64(above) / n; frac < 0.33 || frac > 0.41 {
		t.Errorf("%.3f of the draws above the mean, want about 1/e = 0.368", frac)
	}
}

// Shop mode keeps /health and /data; / becomes the main page.
func TestShopKeepsHealthAndData(t *testing.T) {
	w := new(waits)
	srv := start(t, Config{ID: 5, ServiceTime: 7 * time.Millisecond, Wait: w.wait,
		Shop: &Shop{ServiceMean: DefaultShopService(), ExpFloat64: fixedExp(1)}})
	if resp, body := do(t, srv, "GET", "/health", nil); resp.StatusCode != 200 || string(body) != "qsplice-testserver id=5\n" {
		t.Fatalf("/health: %d %q", resp.StatusCode, body)
	}
	if resp, body := do(t, srv, "GET", "/data/1K", nil); resp.StatusCode != 200 || len(body) != 1024 {
		t.Fatalf("/data/1K: %d, %d bytes", resp.StatusCode, len(body))
	}
	if _, body := do(t, srv, "GET", "/", nil); string(body) != shopBody(session.Main, "5") {
		t.Fatalf("/: %q, want the main page", body)
	}
	if got := w.take(); len(got) != 2 || got[0] != 7*time.Millisecond || got[1] != 150*time.Millisecond {
		t.Fatalf("waits %v, want /data's 7ms and main's 150ms", got)
	}
}

func TestParseShopService(t *testing.T) {
	got, err := ParseShopService("confirm=1s, main=0s")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultShopService()
	want[session.Confirm], want[session.Main] = time.Second, 0
	if got != want {
		t.Fatalf("parsed %v, want %v", got, want)
	}
	if got, err := ParseShopService(""); err != nil || got != DefaultShopService() {
		t.Fatalf("empty: %v, %v", got, err)
	}
	back, err := ParseShopService(FormatShopService(want))
	if err != nil || back != want {
		t.Fatalf("round trip of %q: %v, %v", FormatShopService(want), back, err)
	}
	for _, bad := range []string{"main", "exit=1s", "checkout=1s", "main=-1ms", "main=fast", "main=1s,main=2s"} {
		if _, err := ParseShopService(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestShopServiceTimeSaturates(t *testing.T) {
	if d := shopServiceTime(1e30, time.Hour); d <= 0 {
		t.Fatalf("huge draw gave %v", d)
	}
	if d := shopServiceTime(-1, time.Second); d != 0 {
		t.Fatalf("negative draw gave %v", d)
	}
}
