package session

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Model is the client behaviour of the shop workload: which page follows
// which, how long a user thinks between pages, and how a user reacts to a
// slow server. A Model is a plain value; copy it and change fields to make
// variants, then call Validate.
type Model struct {
	// Transitions[from][to] is the probability that a user on page
	// `from` asks for page `to` next (to == Exit ends the session). Each
	// page row sums to 1; the Exit row is never read.
	Transitions [NumStages][NumStages]float64
	// Start is the first page of every session.
	Start Stage
	// ThinkMean is the mean of the exponential think time between the
	// end of one page and the request for the next.
	ThinkMean time.Duration
	// TimeoutMean is the mean of the exponential patience a user has
	// for one request before giving up on it.
	TimeoutMean time.Duration
	// Retries is how many times a timed-out request is asked for again
	// before the user gives up on the session.
	Retries int
	// AbandonProb is the probability that the user leaves the session
	// after a timeout instead of retrying (checked before Retries).
	AbandonProb float64
}

// DefaultModel returns the shop model documented in the package comment.
func DefaultModel() Model {
	m := Model{
		Start: Main,
		// TPC-W (clause 5.3.1.1) draws its emulated browsers' think time
		// from a negative exponential with a 7 s mean.
		ThinkMean: 7 * time.Second,
		// The "8-second rule" of thumb for web users' patience
		// (Zona Research, 1999): most users leave a page that takes
		// longer than about 8 s to load.
		TimeoutMean: 8 * time.Second,
		Retries:     2,
		AbandonProb: 0.5,
	}
	t := &m.Transitions
	t[Main] = row(map[Stage]float64{Browse: 0.50, Search: 0.35, Details: 0.05, Login: 0.02, Exit: 0.08})
	t[Browse] = row(map[Stage]float64{Main: 0.05, Browse: 0.25, Search: 0.10, Details: 0.50, Exit: 0.10})
	t[Search] = row(map[Stage]float64{Browse: 0.10, Search: 0.20, Details: 0.60, Exit: 0.10})
	t[Details] = row(map[Stage]float64{Main: 0.05, Browse: 0.40, Search: 0.28, Details: 0.11, Login: 0.05, Exit: 0.11})
	t[Login] = row(map[Stage]float64{Main: 0.05, Browse: 0.10, Shipping: 0.65, Exit: 0.20})
	t[Shipping] = row(map[Stage]float64{Details: 0.05, Payment: 0.80, Exit: 0.15})
	t[Payment] = row(map[Stage]float64{Shipping: 0.05, Confirm: 0.85, Exit: 0.10})
	t[Confirm] = row(map[Stage]float64{Main: 0.10, Browse: 0.10, Exit: 0.80})
	return m
}

// row builds a matrix row from the stages it leads to.
func row(next map[Stage]float64) [NumStages]float64 {
	var r [NumStages]float64
	for to, p := range next {
		r[to] = p
	}
	return r
}

// rowSumTolerance is how far a row may sum from 1 (rounding in hand-typed
// decimal probabilities stays far below it).
const rowSumTolerance = 1e-9

// Validate reports the first problem with the model: a negative or
// non-finite probability (naming its row and column), a page row that
// does not sum to 1, a page from which no path leads to Exit, or an
// out-of-range Start, time, retry count or abandonment probability.
func (m Model) Validate() error {
	if m.Start < 0 || m.Start >= Exit {
		return fmt.Errorf("session: Start %v is not a page", m.Start)
	}
	for from := range NumPages {
		sum := 0.0
		for to := range NumStages {
			p := m.Transitions[from][to]
			if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 || p > 1 {
				return fmt.Errorf("session: Transitions[%v][%v] = %v is not a probability", Stage(from), Stage(to), p)
			}
			sum += p
		}
		if math.Abs(sum-1) > rowSumTolerance {
			return fmt.Errorf("session: Transitions row %v sums to %.12g, want 1", Stage(from), sum)
		}
	}
	if from, ok := m.trappedPage(); ok {
		return fmt.Errorf("session: Transitions row %v: no path from %v leads to exit", from, from)
	}
	switch {
	case m.ThinkMean < 0:
		return fmt.Errorf("session: ThinkMean %v is negative", m.ThinkMean)
	case m.TimeoutMean <= 0:
		return fmt.Errorf("session: TimeoutMean %v must be positive", m.TimeoutMean)
	case m.Retries < 0:
		return fmt.Errorf("session: Retries %d is negative", m.Retries)
	case !(m.AbandonProb >= 0 && m.AbandonProb <= 1):
		return fmt.Errorf("session: AbandonProb %v is not a probability", m.AbandonProb)
	}
	return nil
}

// trappedPage finds a page from which Exit cannot be reached, by walking
// the transition graph backwards from Exit. Such a page would make a
// session that reaches it last forever, and I-Q singular in Stats.
func (m Model) trappedPage() (Stage, bool) {
	var reaches [NumStages]bool
	reaches[Exit] = true
	for changed := true; changed; {
		changed = false
		for from := range NumPages {
			if reaches[from] {
				continue
			}
			for to := range NumStages {
				if reaches[to] && m.Transitions[from][to] > 0 {
					reaches[from], changed = true, true
					break
				}
			}
		}
	}
	for from := range NumPages {
		if !reaches[from] {
			return Stage(from), true
		}
	}
	return Exit, false
}

// errSingular is returned by solve when the system has no unique solution.
var errSingular = errors.New("session: singular matrix")
