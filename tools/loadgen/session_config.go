package loadgen

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/qsplice/qsplice/tools/session"
)

// DefaultMaxSessions bounds the sessions alive at once in a session run.
const DefaultMaxSessions = 20000

// SessionSpec is the session mode's arrival process and client model:
// new sessions arrive as a Poisson process of Rate per second, and each
// behaves as Model says (pages, think times, patience, retries).
type SessionSpec struct {
	Rate float64 // sessions per second
	// Count stops starting sessions after this many (warm-up included);
	// 0: until the run's time is up.
	Count int
	Model session.Model
	// LeaveOnRefusal ends a session at once when a page is refused
	// (503), as a user who takes the error page for the shop being down
	// does and as the simulator of tools/experiment models a drop. False:
	// a refusal is a failed page like a timeout, and the model decides
	// between retrying and leaving.
	LeaveOnRefusal bool
}

// sessionKeys are the keys ParseSessions knows, in the order help shows them.
var sessionKeys = []string{"rate", "think", "timeout", "retries", "abandon", "count", "refused"}

// ParseSessions reads the -sessions flag: comma-separated key=value pairs,
// rate (required, sessions/s), think (mean think time, 7s), timeout (mean
// patience per request, 8s), retries (per page, 2), abandon (probability
// of leaving after a timeout, 0.5), count (0: no limit), refused (retry:
// a 503 is a failed page like a timeout; leave: the session ends at once;
// default retry). The other parameters are those of session.DefaultModel().
func ParseSessions(s string) (SessionSpec, error) {
	sp := SessionSpec{Model: session.DefaultModel()}
	fail := func(format string, a ...any) (SessionSpec, error) {
		return SessionSpec{}, fmt.Errorf("sessions %q: %s", s, fmt.Sprintf(format, a...))
	}
	pairs, err := splitPairs(s, sessionKeys)
	if err != nil {
		return fail("%v", err)
	}
	for _, kv := range pairs {
		key, value := kv.key, kv.value
		var err error
		switch key {
		case "rate":
			sp.Rate, err = strconv.ParseFloat(value, 64)
		case "think":
			sp.Model.ThinkMean, err = time.ParseDuration(value)
		case "timeout":
			sp.Model.TimeoutMean, err = time.ParseDuration(value)
		case "retries":
			sp.Model.Retries, err = strconv.Atoi(value)
		case "abandon":
			sp.Model.AbandonProb, err = strconv.ParseFloat(value, 64)
		case "count":
			sp.Count, err = strconv.Atoi(value)
		case "refused":
			switch value {
			case "leave", "retry":
				sp.LeaveOnRefusal = value == "leave"
			default:
				err = errors.New("want leave or retry")
			}
		}
		if err != nil {
			return fail("key %q: %q does not parse", key, value)
		}
	}
	if !pairs.has("rate") {
		return fail("key \"rate\" is missing")
	}
	if err := sp.validate(); err != nil {
		return fail("%v", err)
	}
	return sp, nil
}

func (sp SessionSpec) validate() error {
	switch {
	case !(sp.Rate > 0 && sp.Rate <= maxRate):
		return fmt.Errorf("rate %v must be in (0, %g] sessions/s", sp.Rate, float64(maxRate))
	case sp.Count < 0:
		return errors.New("count must not be negative")
	case sp.Model.TimeoutMean <= 0:
		return errors.New("timeout must be positive")
	}
	return sp.Model.Validate()
}

// SessionConfig describes one session run.
type SessionConfig struct {
	// Target is the base URL, e.g. http://198.18.0.100; pages are
	// requested at the paths of session.Stage.Path (or of Log).
	Target string
	Host   string // Host header; empty: the target's host
	// Sessions is the arrival rate and client model.
	Sessions SessionSpec
	// Log, when not empty, replays these httperf --wsesslog sessions
	// instead of walking Sessions.Model: each new session takes the next
	// one in turn. Patience, retries and abandonment still follow the
	// model; a request without think= waits ThinkMean after it.
	Log []session.LogSession
	// Sessions that arrive during Warmup run but are left out of the
	// results; those that arrive during Duration are measured. At the
	// end no new request starts, requests in flight finish (each within
	// its patience) and sessions still going count as unfinished.
	Warmup, Duration time.Duration
	// Drain, when positive, follows the measured sessions past the end
	// of Duration, for at most Drain, until every one of them is over,
	// while new (unmeasured) sessions keep arriving, so that the last
	// measured ones do not see the load fade. Only those still going
	// after Drain count as unfinished. The simulator of tools/experiment
	// follows its counted sessions to their end the same way.
	Drain time.Duration
	// MaxSessions bounds the sessions alive at once; an arrival beyond it
	// counts as not started.
	MaxSessions int
	Seed        uint64
}

func (c SessionConfig) withDefaults() (SessionConfig, error) {
	if c.MaxSessions == 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	switch err := checkTarget(c.Target, "the pages give the paths, not the target"); {
	case err != nil:
		return c, err
	case c.Duration <= 0:
		return c, errors.New("duration must be positive")
	case c.Warmup < 0:
		return c, errors.New("warmup must not be negative")
	case c.Drain < 0:
		return c, errors.New("drain must not be negative")
	case c.MaxSessions < 0:
		return c, errors.New("max sessions must not be negative")
	case strings.ContainsAny(c.Host, " \t\r\n/"):
		return c, fmt.Errorf("host %q is not a host[:port]", c.Host)
	}
	for i, s := range c.Log {
		if len(s.Requests) == 0 {
			return c, fmt.Errorf("log session %d has no requests", i)
		}
	}
	return c, c.Sessions.validate()
}
