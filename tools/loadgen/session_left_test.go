package loadgen

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/session"
)

// The continued walk visits, on average, what the model's absorbing-chain
// algebra says is left of a session after its first page.
func TestRemainingWalkMatchesModel(t *testing.T) {
	m := session.DefaultModel()
	st := m.Stats()
	rng := rand.New(rand.NewPCG(1, 2))
	const walks = 20000
	var sum [session.NumPages]int64
	for range walks {
		for p, n := range remainingWalk(&m, rng, m.Start) {
			sum[p] += n
		}
	}
	total := 0.0
	for p := range session.NumPages {
		want := st.Visits[p]
		if session.Stage(p) == m.Start {
			want-- // the first page was sent
		}
		got := float64(sum[p]) / walks
		total += got
		if math.Abs(got-want) > 0.06*want+0.01 {
			t.Errorf("%v: %.3f requests left per session, want %.3f", session.Stage(p), got, want)
		}
	}
	if want := st.Length - 1; math.Abs(total-want) > 0.03*want {
		t.Errorf("%.3f pages left per session, want %.3f", total, want)
	}
}

// expectedWalks replays the sessions of a seeded run offline against a
// shop that answers every page at once and refuses refusedPage: the same
// draws in the same order as RunSessions, so its counts must match the
// run's exactly.
func expectedWalks(m *session.Model, seed uint64, count int, refusedPage session.Stage, leave bool) (requested, notGen [session.NumPages]int64, abandoned int64) {
	for n := range count {
		rng := rand.New(rand.NewPCG(seed, uint64(n)+1))
		s := session.NewSession(m, rng)
		for page, ok := s.Next(); ok; page, ok = s.Next() {
			requested[page]++
			s.Patience()
			if page != refusedPage {
				s.Think()
				continue
			}
			if !leave && s.TimedOut() {
				continue
			}
			for p, k := range remainingWalk(m, rng, page) {
				notGen[p] += k
			}
			abandoned++
			break
		}
	}
	return requested, notGen, abandoned
}

func TestSessionsCountNotGenerated(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/details" {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("page"))
	}))
	t.Cleanup(srv.Close)
	const count, seed = 40, 11
	for _, refused := range []string{"leave", "retry"} {
		// A mean patience of an hour: no page times out by chance, so the
		// only failures are the refusals the offline replay knows of.
		spec, err := ParseSessions("rate=400,think=1ms,timeout=1h,count=40,refused=" + refused)
		if err != nil {
			t.Fatal(err)
		}
		res, err := RunSessions(context.Background(), SessionConfig{Target: srv.URL, Sessions: spec, Duration: 20 * time.Second, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		requested, notGen, abandoned := expectedWalks(&spec.Model, seed, count, session.Details, refused == "leave")
		if res.Sessions.Abandoned != abandoned || res.Sessions.Completed != count-abandoned || abandoned == 0 {
			t.Errorf("refused=%s: sessions %+v, want %d abandoned of %d", refused, res.Sessions, abandoned, count)
		}
		var sumNotGen int64
		for p, c := range res.Classes {
			checkClassAccounting(t, c)
			if c.Requested != requested[p] || c.NotGenerated != notGen[p] {
				t.Errorf("refused=%s %s: requested %d, not generated %d; want %d, %d",
					refused, c.Name, c.Requested, c.NotGenerated, requested[p], notGen[p])
			}
			sumNotGen += c.NotGenerated
		}
		if res.Total.NotGenerated != sumNotGen || sumNotGen == 0 {
			t.Errorf("refused=%s: total not generated %d, classes add to %d (want > 0)", refused, res.Total.NotGenerated, sumNotGen)
		}
		if res.LeaveOnRefusal != (refused == "leave") {
			t.Errorf("refused=%s: result says leave_on_refusal=%v", refused, res.LeaveOnRefusal)
		}
	}
}

// A replayed session that leaves counts its remaining log requests.
func TestReplayCountsNotGenerated(t *testing.T) {
	var gaveUp atomic.Int64
	srv := shopServer(t, &gaveUp) // refuses /login
	log := []session.LogSession{{Requests: []session.LogRequest{
		{Path: "/"}, {Path: "/login"}, {Path: "/shipping"}, {Path: "/img.png", Burst: true}, {Path: "/confirm"},
	}}}
	spec, err := ParseSessions("rate=100,think=1ms,timeout=1h,count=1,refused=leave")
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunSessions(context.Background(), SessionConfig{Target: srv.URL, Sessions: spec, Log: log, Duration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{ // requested, not generated
		"main": {1, 0}, "login": {1, 0}, "shipping": {0, 1}, "other": {0, 1}, "confirm": {0, 1},
	}
	for _, c := range res.Classes {
		if w := want[c.Name]; c.Requested != w[0] || c.NotGenerated != w[1] {
			t.Errorf("%s: requested %d, not generated %d; want %d, %d", c.Name, c.Requested, c.NotGenerated, w[0], w[1])
		}
	}
	if res.Sessions.Abandoned != 1 {
		t.Errorf("sessions %+v, want the one abandoned", res.Sessions)
	}
}

// With a drain, the measured sessions are followed to their end while
// unmeasured ones keep arriving; a drain too short leaves some unfinished.
//
// The arrivals are open-loop: 100 sessions a second of about 9 pages each
// offer some 900 connections a second, more than a loaded 2-core machine
// serves under -race (about 500 were measured). Unbounded, the live
// sessions then pile up for as long as the drain lasts, each page waits
// behind more of them, and the last measured sessions were still going
// after 20 s. MaxSessions makes the drain's load a bounded population:
// a measured page competes with at most drainMaxSessions-1 others, so the
// measured sessions' few hundred pages end in a bounded time however
// slow the machine, while arrivals still keep the load up.
func TestSessionsDrain(t *testing.T) {
	const drainMaxSessions = 32
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Write([]byte("page"))
	}))
	t.Cleanup(srv.Close)
	spec, err := ParseSessions("rate=100,think=20ms,timeout=1h")
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunSessions(context.Background(), SessionConfig{Target: srv.URL, Sessions: spec,
		Duration: 300 * time.Millisecond, Drain: 20 * time.Second, Seed: 5, MaxSessions: drainMaxSessions})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Sessions
	if s.Started == 0 || s.Unfinished != 0 || s.Completed != s.Started {
		t.Errorf("sessions %+v: want every measured one followed to its end", s)
	}
	if res.MeasuredS != 0.3 || !(res.DrainS > 0 && res.DrainS < 20) {
		t.Errorf("measured %vs, drained %vs: want 0.3 and a drain that ended with the sessions", res.MeasuredS, res.DrainS)
	}
	if got := served.Load(); got <= res.Total.Requested {
		t.Errorf("the server saw %d requests, the measured sessions sent %d: no arrivals during the drain", got, res.Total.Requested)
	}

	spec, err = ParseSessions("rate=100,think=1s,timeout=1h")
	if err != nil {
		t.Fatal(err)
	}
	res, err = RunSessions(context.Background(), SessionConfig{Target: srv.URL, Sessions: spec,
		Duration: 200 * time.Millisecond, Drain: 100 * time.Millisecond, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sessions.Unfinished == 0 || res.DrainS != 0.1 {
		t.Errorf("sessions %+v after a %vs drain: want some unfinished after 0.1s", res.Sessions, res.DrainS)
	}
}
