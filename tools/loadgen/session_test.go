package loadgen

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/session"
)

// shopServer answers every page at once, except that /search never
// answers (its clients must give up) and /login is refused with 503.
func shopServer(t *testing.T, searchGaveUp *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/search":
			<-r.Context().Done() // the client closed the connection
			searchGaveUp.Add(1)
		case "/login":
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case "/confirm":
			if r.Method != http.MethodPost {
				http.Error(w, "want POST", http.StatusMethodNotAllowed)
				return
			}
			b, _ := io.ReadAll(r.Body)
			w.Write(b)
		default:
			w.Write([]byte("page"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func checkClassAccounting(t *testing.T, c ClassResult) {
	t.Helper()
	if c.Requested != c.Completed+c.TimedOut+c.Refused+c.Other+c.Errors || c.Latency.Count != uint64(c.Completed) {
		t.Errorf("%s: %+v does not add up", c.Name, c)
	}
}

func TestSessionsMarkov(t *testing.T) {
	var gaveUp atomic.Int64
	srv := shopServer(t, &gaveUp)
	spec, err := ParseSessions("rate=400,think=1ms,timeout=300ms,retries=1,abandon=0.5,count=60")
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunSessions(context.Background(), SessionConfig{Target: srv.URL, Sessions: spec, Duration: 20 * time.Second, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Sessions
	if s.Started != 60 || s.Started != s.Completed+s.Abandoned+s.Unfinished || s.Unfinished != 0 {
		t.Fatalf("sessions %+v: want 60 started, all ended", s)
	}
	if s.Abandoned == 0 || s.Completed == 0 {
		t.Errorf("sessions %+v: want some completed and some abandoned", s)
	}
	if res.MeasuredS >= 20 {
		t.Errorf("the run waited for its full time (%vs) although all sessions were over", res.MeasuredS)
	}
	by := map[string]ClassResult{}
	for _, c := range res.Classes {
		checkClassAccounting(t, c)
		by[c.Name] = c
	}
	checkClassAccounting(t, res.Total)
	if c := by["main"]; c.Requested < 60 || c.Completed == 0 {
		t.Errorf("main: %+v, want every session to start there", c)
	}
	if c := by["search"]; c.Requested == 0 || c.TimedOut != c.Requested {
		t.Errorf("search: %+v, want every request timed out", c)
	}
	// The shop refuses every login at once; a client whose (exponential)
	// patience is shorter than that answer on a loaded machine times out
	// instead, which is also right.
	if c := by["login"]; c.Refused == 0 || c.Completed != 0 || c.Refused+c.TimedOut != c.Requested {
		t.Errorf("login: %+v, want every request refused (or, rarely, timed out first)", c)
	}
	if len(res.Classes) != session.NumPages {
		t.Errorf("%d classes, want the %d pages", len(res.Classes), session.NumPages)
	}
	// Every search the server got, its client gave up on; a search whose
	// client timed out before its request reached a handler (a loaded
	// machine, 300 ms of patience) the server never sees, so it may see
	// fewer, never more.
	srv.Close() // waits for the handlers: each returns once its client hung up
	if got := gaveUp.Load(); got == 0 || got > by["search"].TimedOut {
		t.Errorf("server saw %d abandoned searches, client timed out %d", got, by["search"].TimedOut)
	}
}

const shopLog = `# two sessions
/ think=0.001
/browse think=0.001
  /img.png
/confirm method=POST contents='a=1'

/login
`

func TestSessionsReplayWsesslog(t *testing.T) {
	var gaveUp atomic.Int64
	srv := shopServer(t, &gaveUp)
	log, err := session.ReadWsesslog(strings.NewReader(shopLog))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ParseSessions("rate=100,think=1ms,timeout=10s,retries=1,abandon=0,count=2")
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunSessions(context.Background(), SessionConfig{Target: srv.URL, Sessions: spec, Log: log, Duration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != "wsesslog" || res.Sessions != (SessionCounts{Started: 2, Completed: 1, Abandoned: 1}) {
		t.Fatalf("mode %s, sessions %+v: want one completed and one abandoned", res.Mode, res.Sessions)
	}
	want := map[string][2]int64{ // requested, completed
		"main": {1, 1}, "browse": {1, 1}, "other": {1, 1}, "confirm": {1, 1}, "login": {2, 0},
	}
	for _, c := range res.Classes {
		checkClassAccounting(t, c)
		if w := want[c.Name]; c.Requested != w[0] || c.Completed != w[1] {
			t.Errorf("%s: requested %d completed %d, want %d %d", c.Name, c.Requested, c.Completed, w[0], w[1])
		}
	}
	if res.Total.Requested != 6 || res.Total.Refused != 2 {
		t.Errorf("total %+v: want 6 requests, 2 refused", res.Total)
	}
}

// Sessions arriving in the warm-up are not counted; the rest stop when
// the window ends.
func TestSessionsWarmupAndEnd(t *testing.T) {
	var gaveUp atomic.Int64
	srv := shopServer(t, &gaveUp)
	spec, err := ParseSessions("rate=200,think=20ms,timeout=100ms")
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunSessions(context.Background(), SessionConfig{Target: srv.URL, Sessions: spec,
		Warmup: 100 * time.Millisecond, Duration: 200 * time.Millisecond, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Sessions
	// About 40 arrivals are expected in the window; 200 would mean the
	// warm-up's were counted too, or the schedule is wrong.
	if s.Started < 15 || s.Started > 80 || s.Started != s.Completed+s.Abandoned+s.Unfinished || s.Unfinished == 0 {
		t.Errorf("sessions %+v", s)
	}
	if res.MeasuredS != 0.2 {
		t.Errorf("measured %vs, want 0.2", res.MeasuredS)
	}
}

func TestParseSessions(t *testing.T) {
	sp, err := ParseSessions("rate=2.5,think=3s,timeout=4s,retries=0,abandon=1,count=9")
	if err != nil {
		t.Fatal(err)
	}
	m := sp.Model
	if sp.Rate != 2.5 || sp.Count != 9 || m.ThinkMean != 3*time.Second || m.TimeoutMean != 4*time.Second ||
		m.Retries != 0 || m.AbandonProb != 1 || m.Transitions != session.DefaultModel().Transitions {
		t.Errorf("parsed %+v", sp)
	}
	for _, bad := range []string{"think=1s", "rate=0", "rate=1,abandon=2", "rate=1,timeout=0s",
		"rate=1,speed=2", "rate=1,rate=2", "rate=1,count=-1", "rate=x", "rate"} {
		if _, err := ParseSessions(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
