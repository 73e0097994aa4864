package session

import (
	"math"
	"math/rand/v2"
	"time"
)

// Session is one client's walk through the shop, in progress. It decides
// what the client does; the caller (simulator or load generator) does it
// and reports back. The loop is:
//
//	for page, ok := s.Next(); ok; page, ok = s.Next() {
//		patience := s.Patience()
//		if request(page) takes longer than patience {
//			s.TimedOut() // Next repeats page, or ends the session
//			continue
//		}
//		wait(s.Think())
//	}
//
// A Session draws every random number from the caller's generator, in the
// order of the calls, so a fixed seed and call sequence give the same
// session. It is not safe for concurrent use.
type Session struct {
	model       *Model
	rng         *rand.Rand
	page        Stage // the page last returned by Next; Exit once over
	started     bool
	retryNext   bool // TimedOut asked for the same page again
	retriesLeft int
	abandoned   bool
	pages       int
	attempts    int
}

// NewSession starts a session of model m drawing from rng. The model is
// shared, not copied: do not change it while sessions use it.
func NewSession(m *Model, rng *rand.Rand) *Session {
	return &Session{model: m, rng: rng, page: m.Start}
}

// Next returns the page the client requests now: the Start page first,
// then the same page again after a TimedOut that chose to retry, otherwise
// a page drawn from the current page's row of Transitions. It returns
// (Exit, false) once the session is over, by Exit or abandonment.
func (s *Session) Next() (Stage, bool) {
	switch {
	case s.page == Exit:
		return Exit, false
	case !s.started:
		s.started = true
	case s.retryNext:
		s.retryNext = false
		s.attempts++
		return s.page, true
	default:
		s.page = s.draw(s.page)
		if s.page == Exit {
			return Exit, false
		}
	}
	s.retriesLeft = s.model.Retries
	s.pages++
	s.attempts++
	return s.page, true
}

// draw picks the stage after from.
func (s *Session) draw(from Stage) Stage { return s.model.NextStage(s.rng, from) }

// NextStage draws the stage a user on page from asks for next, by inverse
// transform sampling of from's row with one number from rng. Everything
// that walks the chain (sessions, the simulator, the pages a user who
// left would still have asked for) draws the same way, so one seed gives
// the same walk everywhere.
func (m *Model) NextStage(rng *rand.Rand, from Stage) Stage {
	u := rng.Float64()
	cum := 0.0
	last := Exit
	for to, p := range m.Transitions[from] {
		if p <= 0 {
			continue
		}
		cum += p
		last = Stage(to)
		if u < cum {
			return last
		}
	}
	// Only reached when the row sums to a hair under 1 and u falls in
	// the gap: give it to the last possible stage.
	return last
}

// Think returns the time the client waits between receiving a page and
// requesting the next: exponential with mean ThinkMean.
func (s *Session) Think() time.Duration { return s.exp(s.model.ThinkMean) }

// Patience returns how long the client waits for the current request
// before giving up on it: exponential with mean TimeoutMean. Call it once
// per attempt (each retry has its own patience).
func (s *Session) Patience() time.Duration { return s.exp(s.model.TimeoutMean) }

// exp draws an exponential duration with the given mean, saturating
// instead of overflowing for absurd means.
func (s *Session) exp(mean time.Duration) time.Duration {
	d := s.rng.ExpFloat64() * float64(mean)
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// TimedOut reports that the current request outlived the client's
// patience. The client leaves with probability AbandonProb; otherwise it
// retries if it has retries left for this page and leaves if not. It
// returns true when Next will repeat the page; false when the session is
// now over (abandoned), or was already over.
func (s *Session) TimedOut() (retry bool) {
	if s.page == Exit || !s.started {
		return false
	}
	if s.rng.Float64() >= s.model.AbandonProb && s.retriesLeft > 0 {
		s.retriesLeft--
		s.retryNext = true
		return true
	}
	s.page, s.abandoned, s.retryNext = Exit, true, false
	return false
}

// Abandoned reports whether the session ended because the client gave up
// after a timeout rather than by choosing Exit.
func (s *Session) Abandoned() bool { return s.abandoned }

// Pages is the number of distinct page visits so far (retries not counted).
func (s *Session) Pages() int { return s.pages }

// Attempts is the number of requests sent so far, retries included.
func (s *Session) Attempts() int { return s.attempts }
