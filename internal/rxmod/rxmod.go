// Package rxmod is the policy of receive moderation (issue 7), in the
// spirit of a NIC's adaptive interrupt coalescing, shared by the
// front-end's shards and the shim's workers: when a loop's recent passes
// saw a steady stream of frames that nobody waits on one by one, it holds
// off before its next pass for about the time a few more take to arrive,
// so that one pass handles them together (one read, one write). What is
// "steady" and what is "urgent" is the loop's to say: for the front-end,
// clients' pure ACKs against everything else (frontend/moderate.go); for
// the shim, the back-end kernel's bulk super-frames against handshakes,
// small replies and requests (backend/moderate.go).
//
// Moderator is the policy alone, pure: counts and times in, a hold out.
// The loop does the waiting (link.Poller.Hold), which a control datagram
// or a wake-up still ends at once.
package rxmod

import (
	"time"

	"github.com/qsplice/qsplice/splice"
)

// Config configures a Moderator.
type Config struct {
	// Window is the span over which the receive rate is counted; the
	// decision uses the last complete one and the open one.
	Window time.Duration
	// MinSteady is the steady frames, in the last complete Window and
	// the open one together, below which the loop never holds: below it
	// a hold would gather too few to be worth a delay.
	MinSteady int
	// Batch is the steady frames a held pass aims to collect.
	Batch int
	// MaxHold bounds a hold; 0 turns moderation off.
	MaxHold time.Duration
	// UrgentShare: the loop holds only while urgent frames are at most
	// one in UrgentShare of the steady ones (0 counts as 1).
	UrgentShare int
	// NotAfterUrgent: the pass after one that saw an urgent frame is
	// never held, so that what answers it (a SYN-ACK to a SYN, a
	// response to a request) is read as soon as it comes.
	NotAfterUrgent bool
	// Quiet: no hold within this time of a Quiet call, which the loop
	// makes for a frame of a flow that a hold would slow down (a
	// window-bound one) and that keeps coming while the flow is active.
	Quiet time.Duration
}

// Moderator decides how long a loop holds off before its next pass. The
// zero value (MaxHold 0) never holds.
type Moderator struct {
	cfg Config
	// The window being counted, from start; prevSteady and prevUrgent
	// are the last complete window's counts.
	start                  splice.Time
	steady, urgent         int
	prevSteady, prevUrgent int
	// lastUrgent: the last pass observed saw an urgent frame.
	lastUrgent bool
	// quietUntil: no hold before it (Quiet).
	quietUntil splice.Time
}

// New returns a Moderator with the configuration cfg.
func New(cfg Config) Moderator { return Moderator{cfg: cfg} }

// Config returns the Moderator's configuration.
func (m *Moderator) Config() Config { return m.cfg }

// roll closes the counted window if it is over. A window with no pass in
// it (the loop slept through it) counts as empty.
func (m *Moderator) roll(now splice.Time) {
	w := splice.Time(m.cfg.Window)
	if now < m.start+w {
		return
	}
	if now < m.start+2*w {
		m.prevSteady, m.prevUrgent = m.steady, m.urgent
	} else {
		m.prevSteady, m.prevUrgent = 0, 0
	}
	m.start, m.steady, m.urgent = now, 0, 0
}

// Observe counts a pass's received frames at now: steady frames and
// urgent ones. Frames of neither kind are not counted.
func (m *Moderator) Observe(now splice.Time, steady, urgent int) {
	if m.cfg.MaxHold <= 0 {
		return
	}
	m.roll(now)
	m.steady += steady
	m.urgent += urgent
	m.lastUrgent = urgent > 0
}

// Quiet keeps the loop from holding for Config.Quiet from now.
func (m *Moderator) Quiet(now splice.Time) {
	if m.cfg.Quiet > 0 {
		m.quietUntil = max(m.quietUntil, now.Add(m.cfg.Quiet))
	}
}

// Hold is how long the loop should wait at now before its next pass
// although frames may be waiting: 0 unless the last complete window and
// the open one together were a steady stream, else the time Batch
// steady frames take to arrive at their rate, at most MaxHold. Counting
// the open window too keeps a stream that paused for a window (a sender
// stalled for a few milliseconds on a shared machine) from being taken
// for a thin one until the next window closes.
func (m *Moderator) Hold(now splice.Time) time.Duration {
	if !m.mayHold(now) {
		return 0
	}
	steady, urgent := m.counts(now)
	return m.holdFor(now, steady, urgent)
}

// Joint is Hold for a loop that serves the frames of several moderators
// with the same Config (the front-end's shards, gathered on one loop):
// no hold if any of them may not hold now, else the hold their counts
// added up call for, as if one moderator had seen all the frames.
func Joint(now splice.Time, ms []*Moderator) time.Duration {
	if len(ms) == 0 {
		return 0
	}
	steady, urgent := 0, 0
	for _, m := range ms {
		if !m.mayHold(now) {
			return 0
		}
		s, u := m.counts(now)
		steady, urgent = steady+s, urgent+u
	}
	return ms[0].holdFor(now, steady, urgent)
}

// mayHold: moderation is on, and neither the last pass's urgent frame
// nor a Quiet call rules a hold out at now.
func (m *Moderator) mayHold(now splice.Time) bool {
	return m.cfg.MaxHold > 0 && !(m.cfg.NotAfterUrgent && m.lastUrgent) && now >= m.quietUntil
}

// counts are the frames of the last complete window and the open one.
func (m *Moderator) counts(now splice.Time) (steady, urgent int) {
	m.roll(now)
	return m.prevSteady + m.steady, m.prevUrgent + m.urgent
}

// holdFor is the hold at now for the counts of the last complete window
// and the open one (whose start is m's: the moderators of one loop roll
// their windows at its passes, together).
func (m *Moderator) holdFor(now splice.Time, steady, urgent int) time.Duration {
	if steady < max(m.cfg.MinSteady, 1) || urgent*max(m.cfg.UrgentShare, 1) > steady {
		return 0
	}
	span := m.cfg.Window + time.Duration(now-m.start)
	return min(time.Duration(m.cfg.Batch)*span/time.Duration(steady), m.cfg.MaxHold)
}
