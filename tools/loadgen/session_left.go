package loadgen

import (
	"math/rand/v2"

	"github.com/qsplice/qsplice/tools/session"
)

// Requests a session did not send because it had left.
//
// A user who leaves the shop after a failed page takes with them every
// page they would still have asked for. Counting those as "not
// generated" makes the experiment's total independent of the policy:
// completed + timed out + refused + other + errors + not generated is
// every request the sessions would have made, the denominator of the
// simulator's (tools/experiment) percentages. The rest of the walk is
// drawn from the session's own generator, after everything the session
// drew while it ran, so a seeded run counts the same pages every time.

// remainingWalk continues a Markov walk that left on page from, without
// sending anything, and returns how many requests for each page it would
// still have made before Exit.
func remainingWalk(m *session.Model, rng *rand.Rand, from session.Stage) [session.NumPages]int64 {
	var n [session.NumPages]int64
	for page := m.NextStage(rng, from); page != session.Exit; page = m.NextStage(rng, page) {
		n[page]++
	}
	return n
}

// notGenerated adds a left session's unsent pages to the class counts.
func (r *sessionRunner) notGenerated(pages [session.NumPages]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, n := range pages {
		if n > 0 {
			r.tally(session.Stage(p).String()).notGenerated += n
		}
	}
}

// notGeneratedLog adds a left replayed session's remaining requests to
// the class counts.
func (r *sessionRunner) notGeneratedLog(rest []session.LogRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, req := range rest {
		r.tally(logClass(req.Path)).notGenerated++
	}
}
