package loadgen

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/qsplice/qsplice/tools/session"
)

// sessionRunner holds one session run's state.
type sessionRunner struct {
	cfg     SessionConfig
	target  string
	start   time.Time
	stop    chan struct{} // closed when no new request may start
	workers sync.WaitGroup
	// measured counts the measured sessions still going.
	measured sync.WaitGroup
	alive    chan struct{} // a token per live session, MaxSessions deep

	mu       sync.Mutex // guards what follows
	classes  map[string]*classTally
	sessions SessionCounts
}

// classTally is one page class's counters in the measured sessions.
type classTally struct {
	requested, completed, timedOut, refused, other, errors int64
	notGenerated                                           int64
	latency                                                Histogram
}

// RunSessions offers session load to cfg.Target: sessions arrive as a
// Poisson process, each a client that requests a page, waits for it at
// most its patience (closing the connection when that runs out), thinks,
// and requests the next, as session.Session (or a replayed log session)
// says, until it exits or gives up. It returns the per-class and
// per-session counts of the sessions that arrived after the warm-up.
// When ctx ends early the run stops as at the end of its time and the
// result has Interrupted set. Errors are for configurations that cannot
// run.
func RunSessions(ctx context.Context, cfg SessionConfig) (*SessionResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &sessionRunner{
		cfg: cfg, target: cfg.Target, stop: make(chan struct{}),
		alive:   make(chan struct{}, cfg.MaxSessions),
		classes: map[string]*classTally{},
	}
	r.start = time.Now()
	stoppedAt, interrupted := r.release(ctx)
	close(r.stop)
	r.workers.Wait()
	return r.result(stoppedAt, interrupted), nil
}

// release starts sessions at their Poisson arrival times until the run's
// time is up, Count sessions started, or ctx ends, then drains (see
// SessionConfig.Drain). It returns when the run stopped, as an offset
// from its start, and whether ctx cut it short.
func (r *sessionRunner) release(ctx context.Context) (time.Duration, bool) {
	end := r.cfg.Warmup + r.cfg.Duration
	arrivals := newSchedule(Poisson, r.cfg.Sessions.Rate, r.cfg.Seed, 0)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	cancelled := func() (time.Duration, bool) { return min(time.Since(r.start), end+r.cfg.Drain), true }
	n, at := 0, arrivals.next()
	more := func() bool { return r.cfg.Sessions.Count == 0 || n < r.cfg.Sessions.Count }
	for ; more() && at < end; n, at = n+1, arrivals.next() {
		if r.waitUntil(ctx, timer, at, nil) == wokeCancelled {
			return cancelled()
		}
		r.startSession(n, at >= r.cfg.Warmup)
	}
	// Let the sessions already started run to the end of the window, or
	// until they are all over when Count limited them.
	var allDone chan struct{} // nil, never ready: a run without Count lasts its full time
	if !more() {
		allDone = make(chan struct{})
		go func() { r.workers.Wait(); close(allDone) }()
	}
	switch r.waitUntil(ctx, timer, end, allDone) {
	case wokeCancelled:
		return cancelled()
	case wokeDone:
		return min(time.Since(r.start), end), false
	}
	if r.cfg.Drain <= 0 {
		return end, false
	}
	// No measured session starts any more: follow those still going
	// while unmeasured arrivals keep the load up.
	measuredOver := make(chan struct{})
	go func() { r.measured.Wait(); close(measuredOver) }()
	drainEnd := end + r.cfg.Drain
	for ; more() && at < drainEnd; n, at = n+1, arrivals.next() {
		switch r.waitUntil(ctx, timer, at, measuredOver) {
		case wokeCancelled:
			return cancelled()
		case wokeDone:
			return min(time.Since(r.start), drainEnd), false
		}
		r.startSession(n, false)
	}
	switch r.waitUntil(ctx, timer, drainEnd, measuredOver) {
	case wokeCancelled:
		return cancelled()
	case wokeDone:
		return min(time.Since(r.start), drainEnd), false
	}
	return drainEnd, false
}

// wake says why waitUntil returned.
type wake int

const (
	wokeOnTime    wake = iota // the time came
	wokeDone                  // done was closed first
	wokeCancelled             // ctx ended first
)

// waitUntil waits until offset at of the run, unless done (nil: never)
// is closed or ctx ends first.
func (r *sessionRunner) waitUntil(ctx context.Context, timer *time.Timer, at time.Duration, done <-chan struct{}) wake {
	wait := time.Until(r.start.Add(at))
	if wait <= 0 {
		select {
		case <-ctx.Done():
			return wokeCancelled
		case <-done:
			return wokeDone
		default:
			return wokeOnTime
		}
	}
	timer.Reset(wait)
	select {
	case <-timer.C:
		return wokeOnTime
	case <-done:
		return wokeDone
	case <-ctx.Done():
		return wokeCancelled
	}
}

// startSession runs session n in its own goroutine, with a generator of
// its own so that its walk depends only on the seed and n.
func (r *sessionRunner) startSession(n int, measured bool) {
	select {
	case r.alive <- struct{}{}:
	default:
		if measured {
			r.count(func(c *SessionCounts) { c.NotStarted++ })
		}
		return
	}
	if measured {
		r.count(func(c *SessionCounts) { c.Started++ })
		r.measured.Add(1)
	}
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(n)+1))
	r.workers.Go(func() {
		defer func() { <-r.alive }()
		var end sessionEnd
		if len(r.cfg.Log) > 0 {
			end = r.replay(r.cfg.Log[n%len(r.cfg.Log)], rng, measured)
		} else {
			end = r.walk(rng, measured)
		}
		if measured {
			r.count(func(c *SessionCounts) {
				switch end {
				case sessionCompleted:
					c.Completed++
				case sessionAbandoned:
					c.Abandoned++
				default:
					c.Unfinished++
				}
			})
			r.measured.Done()
		}
	})
}

type sessionEnd int

const (
	sessionCompleted sessionEnd = iota
	sessionAbandoned
	sessionUnfinished
)

// walk runs one session of the Markov model. A session that leaves
// early has the rest of its walk counted as not generated.
func (r *sessionRunner) walk(rng *rand.Rand, measured bool) sessionEnd {
	m := &r.cfg.Sessions.Model
	s := session.NewSession(m, rng)
	for page, ok := s.Next(); ok; page, ok = s.Next() {
		if r.stopped() {
			return sessionUnfinished
		}
		c := newPageClient(r.target, r.cfg.Host, "", page.Path(), "")
		got := r.fetch(c, page.String(), s.Patience(), measured)
		if got == pageServed {
			if !r.sleep(s.Think()) {
				return sessionUnfinished
			}
			continue
		}
		leave := got == pageRefused && r.cfg.Sessions.LeaveOnRefusal
		if !leave && s.TimedOut() {
			continue // Next repeats the page
		}
		if measured {
			r.notGenerated(remainingWalk(m, rng, page))
		}
		return sessionAbandoned
	}
	return sessionCompleted
}

// replay runs one logged session with the model's patience and retries.
// A session that leaves early has its remaining requests counted as not
// generated.
func (r *sessionRunner) replay(ls session.LogSession, rng *rand.Rand, measured bool) sessionEnd {
	m := &r.cfg.Sessions.Model
	think := m.ThinkMean
	for i, req := range ls.Requests {
		if i > 0 && !req.Burst && !r.sleep(think) {
			return sessionUnfinished
		}
		if !req.Burst {
			think = req.Think
			if think == 0 {
				think = m.ThinkMean
			}
		}
		c := newPageClient(r.target, r.cfg.Host, req.Method, req.Path, req.Contents)
		for retries := m.Retries; ; retries-- {
			if r.stopped() {
				return sessionUnfinished
			}
			patience := time.Duration(rng.ExpFloat64() * float64(m.TimeoutMean))
			got := r.fetch(c, logClass(req.Path), patience, measured)
			if got == pageServed {
				break
			}
			// As session.Session.TimedOut: leave, or retry while allowed.
			leave := got == pageRefused && r.cfg.Sessions.LeaveOnRefusal
			if leave || rng.Float64() < m.AbandonProb || retries <= 0 {
				if measured {
					r.notGeneratedLog(ls.Requests[i+1:])
				}
				return sessionAbandoned
			}
		}
	}
	return sessionCompleted
}

// logClass is the page class of a replayed path: its stage, or "other".
func logClass(path string) string {
	if st, ok := session.StageForPath(path); ok {
		return st.String()
	}
	return "other"
}

// pageOutcome is what became of one request, as the session sees it.
type pageOutcome int

const (
	pageServed  pageOutcome = iota // 2xx within the client's patience
	pageRefused                    // 503
	pageFailed                     // timed out, another status, or an error
)

// fetch sends one request that the client waits for at most patience
// and records it. Anything but a page in time, a refusal or an error as
// much as a timeout, leaves the client without its page, and the
// session model (and LeaveOnRefusal) decides what it does.
func (r *sessionRunner) fetch(c *client, class string, patience time.Duration, measured bool) pageOutcome {
	start := time.Now()
	o := c.doUntil(start.Add(patience))
	got := pageFailed
	switch {
	case !o.err && o.class == class2xx:
		got = pageServed
	case !o.err && o.class == class503:
		got = pageRefused
	}
	if !measured {
		return got
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tally(class)
	t.requested++
	switch {
	case got == pageServed:
		t.completed++
		t.latency.Record(o.doneAt.Sub(start))
	case got == pageRefused:
		t.refused++
	case o.err && o.kind == errTimeout:
		t.timedOut++
	case o.err:
		t.errors++
	default:
		t.other++
	}
	return got
}

// tally returns class's counters, creating them; r.mu must be held.
func (r *sessionRunner) tally(class string) *classTally {
	t := r.classes[class]
	if t == nil {
		t = &classTally{}
		r.classes[class] = t
	}
	return t
}

// sleep waits d, or less when the run stops; it reports whether it
// waited the whole time.
func (r *sessionRunner) sleep(d time.Duration) bool {
	if d <= 0 {
		return !r.stopped()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stop:
		return false
	}
}

func (r *sessionRunner) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

func (r *sessionRunner) count(f func(*SessionCounts)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.sessions)
}
