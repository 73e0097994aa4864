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
	alive   chan struct{} // a token per live session, MaxSessions deep

	mu       sync.Mutex // guards what follows
	classes  map[string]*classTally
	sessions SessionCounts
}

// classTally is one page class's counters in the measured sessions.
type classTally struct {
	requested, completed, timedOut, refused, other, errors int64
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
// time is up, Count sessions started, or ctx ends.
func (r *sessionRunner) release(ctx context.Context) (time.Duration, bool) {
	end := r.cfg.Warmup + r.cfg.Duration
	arrivals := newSchedule(Poisson, r.cfg.Sessions.Rate, r.cfg.Seed, 0)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for n := 0; r.cfg.Sessions.Count == 0 || n < r.cfg.Sessions.Count; n++ {
		at := arrivals.next()
		if at >= end {
			break
		}
		if wait := time.Until(r.start.Add(at)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return min(time.Since(r.start), end), true
			}
		} else if ctx.Err() != nil {
			return min(time.Since(r.start), end), true
		}
		r.startSession(n, at >= r.cfg.Warmup)
	}
	// Let the sessions already started run to the end of the window, or
	// until they are all over when Count limited them.
	var allDone chan struct{} // nil, never ready: a run without Count lasts its full time
	if r.cfg.Sessions.Count > 0 {
		allDone = make(chan struct{})
		go func() { r.workers.Wait(); close(allDone) }()
	}
	if wait := time.Until(r.start.Add(end)); wait > 0 {
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-allDone:
			return min(time.Since(r.start), end), false
		case <-ctx.Done():
			return min(time.Since(r.start), end), true
		}
	}
	return end, false
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
		}
	})
}

type sessionEnd int

const (
	sessionCompleted sessionEnd = iota
	sessionAbandoned
	sessionUnfinished
)

// walk runs one session of the Markov model.
func (r *sessionRunner) walk(rng *rand.Rand, measured bool) sessionEnd {
	s := session.NewSession(&r.cfg.Sessions.Model, rng)
	for page, ok := s.Next(); ok; page, ok = s.Next() {
		if r.stopped() {
			return sessionUnfinished
		}
		c := newPageClient(r.target, r.cfg.Host, "", page.Path(), "")
		if !r.fetch(c, page.String(), s.Patience(), measured) {
			s.TimedOut() // Next repeats the page or ends the session
			continue
		}
		if !r.sleep(s.Think()) {
			return sessionUnfinished
		}
	}
	if s.Abandoned() {
		return sessionAbandoned
	}
	return sessionCompleted
}

// replay runs one logged session with the model's patience and retries.
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
		class := "other"
		if st, ok := session.StageForPath(req.Path); ok {
			class = st.String()
		}
		c := newPageClient(r.target, r.cfg.Host, req.Method, req.Path, req.Contents)
		for retries := m.Retries; ; retries-- {
			if r.stopped() {
				return sessionUnfinished
			}
			patience := time.Duration(rng.ExpFloat64() * float64(m.TimeoutMean))
			if r.fetch(c, class, patience, measured) {
				break
			}
			// As session.Session.TimedOut: leave, or retry while allowed.
			if rng.Float64() < m.AbandonProb || retries <= 0 {
				return sessionAbandoned
			}
		}
	}
	return sessionCompleted
}

// fetch sends one request that the client waits for at most patience
// and records it; it reports whether the page arrived (2xx in time). Any
// other outcome, a refusal or an error as much as a timeout, leaves the
// client without its page, and the session model decides what it does.
func (r *sessionRunner) fetch(c *client, class string, patience time.Duration, measured bool) bool {
	start := time.Now()
	o := c.doUntil(start.Add(patience))
	ok := !o.err && o.class == class2xx
	if !measured {
		return ok
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.classes[class]
	if t == nil {
		t = &classTally{}
		r.classes[class] = t
	}
	t.requested++
	switch {
	case ok:
		t.completed++
		t.latency.Record(o.doneAt.Sub(start))
	case o.err && o.kind == errTimeout:
		t.timedOut++
	case o.err:
		t.errors++
	case o.class == class503:
		t.refused++
	default:
		t.other++
	}
	return ok
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
