package loadgen

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// issueSteps is the issue's step load: 0.5x, 2x from 10 s, 0.5x from 40 s.
var issueSteps = []LoadStep{{0, 0.5}, {10 * time.Second, 2}, {40 * time.Second, 0.5}}

// The inverse of the cumulative intensity, seed numbers at rate 100/s:
// 0.5 x 100 x 10 s = 500 arrivals by 10 s, 500 + 2 x 100 x 30 s = 6500
// by 40 s, then 50/s.
func TestStepTimeInvertsTheIntensity(t *testing.T) {
	for _, tc := range []struct {
		mass float64
		want time.Duration
	}{
		{0, 0}, {250, 5 * time.Second}, {500, 10 * time.Second}, {700, 11 * time.Second},
		{6500, 40 * time.Second}, {6525, 40*time.Second + 500*time.Millisecond},
	} {
		if got := stepTime(issueSteps, 100, tc.mass); got != tc.want {
			t.Errorf("mass %v: at %v, want %v", tc.mass, got, tc.want)
		}
	}
	// Before the first step the factor is 1; a factor 0 sends nothing.
	gap := []LoadStep{{2 * time.Second, 0}, {3 * time.Second, 1}}
	for _, tc := range []struct {
		mass float64
		want time.Duration
	}{{100, time.Second}, {200, 3 * time.Second}, {300, 4 * time.Second}} {
		if got := stepTime(gap, 100, tc.mass); got != tc.want {
			t.Errorf("with a pause: mass %v at %v, want %v", tc.mass, got, tc.want)
		}
	}
	if got := stepTime([]LoadStep{{time.Second, 0}}, 100, 101); got != time.Duration(math.MaxInt64) {
		t.Errorf("after a final factor 0: %v, want never", got)
	}
}

// A constant stream under the step load sends exactly factor x rate per
// second in each phase; a Poisson one within four standard deviations.
func TestStepScheduleCountsPerPhase(t *testing.T) {
	phases := []struct {
		from, to time.Duration
		want     float64
	}{{0, 10 * time.Second, 500}, {10 * time.Second, 40 * time.Second, 6000}, {40 * time.Second, 60 * time.Second, 1000}}
	for _, a := range []Arrival{Constant, Poisson} {
		s := newSchedule(a, 100, 7, 0)
		s.steps = issueSteps
		counts := make([]float64, len(phases))
		var prev time.Duration
		for {
			at := s.next()
			if at < prev {
				t.Fatalf("%s: offsets go backwards", a)
			}
			prev = at
			if at >= 60*time.Second {
				break
			}
			for i, p := range phases {
				if at >= p.from && at < p.to {
					counts[i]++
				}
			}
		}
		for i, p := range phases {
			tol := 0.0
			if a == Poisson {
				tol = 4 * math.Sqrt(p.want)
			}
			if math.Abs(counts[i]-p.want) > tol {
				t.Errorf("%s: %v..%v: %v arrivals, want %v +/- %.0f", a, p.from, p.to, counts[i], p.want, tol)
			}
		}
	}
}

func TestParseSteps(t *testing.T) {
	steps, err := ParseSteps("0.5@0,2@10s, 0.5@40s")
	if err != nil || len(steps) != 3 || steps[1] != (LoadStep{10 * time.Second, 2}) {
		t.Fatalf("ParseSteps: %v, %v", steps, err)
	}
	if back, err := ParseSteps(FormatSteps(steps)); err != nil || fmt.Sprint(back) != fmt.Sprint(steps) {
		t.Errorf("round trip %q: %v, %v", FormatSteps(steps), back, err)
	}
	for _, bad := range []string{"", "2", "x@1s", "2@-1s", "1@2s,1@1s", "1@1s,2@1s", "-1@0", "NaN@0", "0@0", "2@1x"} {
		if _, err := ParseSteps(bad); err == nil {
			t.Errorf("ParseSteps(%q) accepted", bad)
		}
	}
	if f := FactorAt(issueSteps, 9*time.Second); f != 0.5 {
		t.Errorf("FactorAt 9s = %v", f)
	}
	if f := FactorAt(issueSteps, 10*time.Second); f != 2 {
		t.Errorf("FactorAt 10s = %v", f)
	}
	if f := FactorAt([]LoadStep{{time.Second, 3}}, 0); f != 1 {
		t.Errorf("FactorAt before the first step = %v", f)
	}
}

// Per-class streams: each request carries its class's Host and cookie
// and, for a class with sessions, one of its session cookies in turn;
// the results count per class the 503s with Retry-After and the 2xx per
// content tree the server named.
func TestClassStreamsCookiesAndTrees(t *testing.T) {
	var mu sync.Mutex
	cookies := map[string]map[string]int{} // host -> Cookie header -> count
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if cookies[r.Host] == nil {
			cookies[r.Host] = map[string]int{}
		}
		cookies[r.Host][r.Header.Get("Cookie")]++
		mu.Unlock()
		switch r.Host {
		case "gold.example":
			w.Header().Set("X-Content-Tree", "3")
		case "silver.example":
			w.Header().Set("X-Content-Tree", "2")
		default:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	gold := Stream{Name: "gold", Host: "gold.example", Path: "/data/1K", Rate: 200, Arrival: Constant, Cookie: "tier=gold", Sessions: 4}
	silver := Stream{Name: "silver", Host: "silver.example", Path: "/data/1K", Rate: 100, Arrival: Constant}
	bronze := Stream{Name: "bronze", Host: "bronze.example", Path: "/data/1K", Rate: 100, Arrival: Constant, Sessions: 2}
	res, err := Run(context.Background(), Config{
		Target: srv.URL, Duration: 200 * time.Millisecond, Streams: []Stream{gold, silver, bronze},
		SessionCookie: "session",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, s, b := res.Streams[0], res.Streams[1], res.Streams[2]
	for _, r := range res.Streams {
		checkAccounting(t, r)
	}
	if g.Completed.OK != 40 || len(g.Trees) != 4 || g.Trees[3] != 40 {
		t.Errorf("gold: %d 2xx, trees %v; want 40 all from tree 3", g.Completed.OK, g.Trees)
	}
	if s.Completed.OK != 20 || len(s.Trees) != 3 || s.Trees[2] != 20 {
		t.Errorf("silver: %d 2xx, trees %v; want 20 from tree 2", s.Completed.OK, s.Trees)
	}
	if b.Completed.ServiceUnavailable != 20 || b.RetryAfter.ServiceUnavailable != 20 || b.Trees != nil {
		t.Errorf("bronze: %d 503, %d with Retry-After, trees %v", b.Completed.ServiceUnavailable, b.RetryAfter.ServiceUnavailable, b.Trees)
	}
	if tot := res.Total.Trees; len(tot) != 4 || tot[2] != 20 || tot[3] != 40 {
		t.Errorf("total trees %v", tot)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]map[string]int{
		"gold.example": {"tier=gold; session=gold-0": 10, "tier=gold; session=gold-1": 10,
			"tier=gold; session=gold-2": 10, "tier=gold; session=gold-3": 10},
		"silver.example": {"": 20},
		"bronze.example": {"session=bronze-0": 10, "session=bronze-1": 10},
	}
	if fmt.Sprint(cookies) != fmt.Sprint(want) {
		t.Errorf("cookies sent %v\nwant %v", cookies, want)
	}
}

func TestParseStreamClassKeys(t *testing.T) {
	st, err := ParseStream("name=gold,host=gold.example,rate=10,cookie=tier=gold,sessions=50")
	if err != nil || st.Cookie != "tier=gold" || st.Sessions != 50 {
		t.Fatalf("%+v, %v", st, err)
	}
	for _, bad := range []string{"name=a,rate=1,sessions=-1", "name=a,rate=1,sessions=x", "name=a,rate=1,cookie=a\r\nb"} {
		if _, err := ParseStream(bad); err == nil || !strings.Contains(err.Error(), "key") {
			t.Errorf("ParseStream(%q): %v", bad, err)
		}
	}
	if _, err := (Config{Target: "http://x", Duration: time.Second, Streams: []Stream{st}, SessionCookie: "a b"}).withDefaults(); err == nil {
		t.Error("a session cookie name with a space accepted")
	}
}

// Rolling sessions: request n goes to slot n mod N; a slot's session is
// replaced after K requests, so one request in K starts a session.
func TestRollingSessions(t *testing.T) {
	st := Stream{Name: "gold", Sessions: 2, SessionRequests: 3, Cookie: "tier=gold"}
	r := newRollingSessions([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), st, "sid")
	want := []string{"gold-0.0", "gold-1.0", "gold-0.0", "gold-1.0", "gold-0.0", "gold-1.0", "gold-0.1", "gold-1.1"}
	seen := map[string]bool{}
	for n, id := range want {
		req := string(r.request(uint64(n)))
		if req != "GET / HTTP/1.1\r\nHost: x\r\nCookie: tier=gold; sid="+id+"\r\n\r\n" || SessionID(st, uint64(n)) != id {
			t.Errorf("request %d: %q, SessionID %q; want session %s", n, req, SessionID(st, uint64(n)), id)
		}
		seen[id] = true
	}
	// 6000 requests: 2 slots x 1000 generations, each of 3 requests.
	news := 0
	for n := range uint64(6000) {
		if id := SessionID(st, n); !seen[id] {
			seen[id] = true
			news++
		}
	}
	if news != 2000-4 {
		t.Errorf("%d new sessions in 6000 requests after the first 8, want 1996", news)
	}
	if newRollingSessions(nil, Stream{Sessions: 5}, "sid") != nil {
		t.Error("sessions that never end rolled")
	}
	if _, err := ParseStream("name=a,rate=1,session-requests=3"); err == nil {
		t.Error("session-requests without sessions accepted")
	}
}

// The results split a stream's requests into those that started a
// session and those that continued one: here the server serves slot 0's
// sessions and refuses slot 1's, and one request in three starts one.
func TestSessionSplitInResults(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Cookie"), "sid=s-1.") {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	st := Stream{Name: "s", Path: "/", Rate: 300, Arrival: Constant, Sessions: 2, SessionRequests: 3}
	res, err := Run(context.Background(), Config{Target: srv.URL, Duration: 200 * time.Millisecond, Streams: []Stream{st}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Streams[0]
	if r.Sent != 60 || r.NewSessions == nil || r.KnownSessions == nil {
		t.Fatalf("sent %d, split %v %v", r.Sent, r.NewSessions, r.KnownSessions)
	}
	if got, want := *r.NewSessions, (SessionKindCounts{Sent: 20, OK: 10, Refused: 10}); got != want {
		t.Errorf("new sessions %+v, want %+v", got, want)
	}
	if got, want := *r.KnownSessions, (SessionKindCounts{Sent: 40, OK: 20, Refused: 20}); got != want {
		t.Errorf("known sessions %+v, want %+v", got, want)
	}
	res, _ = Run(context.Background(), Config{Target: srv.URL, Duration: 50 * time.Millisecond,
		Streams: []Stream{{Name: "c", Path: "/", Rate: 100, Arrival: Constant, Cookie: "a=b"}}}, nil)
	if res.Streams[0].NewSessions != nil {
		t.Error("a split without sessions")
	}
}
