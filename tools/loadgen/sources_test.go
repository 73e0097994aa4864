package loadgen

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"
)

func TestParseSources(t *testing.T) {
	got, err := ParseSources("198.18.0.40/30, 198.18.0.50")
	want := []string{"198.18.0.40", "198.18.0.41", "198.18.0.42", "198.18.0.43", "198.18.0.50"}
	if err != nil || len(got) != len(want) {
		t.Fatalf("%v, %v", got, err)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("address %d: %v, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"", "x", "::1", "10.0.0.0/8", "198.18.0.1,"} {
		if _, err := ParseSources(bad); err == nil {
			t.Errorf("ParseSources(%q) accepted", bad)
		}
	}
}

// The connections go out from the source addresses in turn (the
// loopback answers from all of 127/8).
func TestSourcesSpreadTheConnections(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		mu.Lock()
		seen[host]++
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	src := []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4")}
	res, err := Run(context.Background(), Config{Target: srv.URL, Duration: 150 * time.Millisecond, Sources: src,
		Streams: []Stream{constantStream("a", "/", 200), constantStream("b", "/", 200)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Total.Completed.OK != 60 {
		t.Fatalf("%d answers: %+v", res.Total.Completed.OK, res.Total)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range src {
		if seen[a.String()] != 20 {
			t.Errorf("from %v: %d connections, want 20 (%v)", a, seen[a.String()], seen)
		}
	}
}
