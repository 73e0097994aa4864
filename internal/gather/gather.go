// Package gather is the policy of gathering (issue 7), shared by the
// front-end's shards and the shim's workers: a daemon runs one packet
// loop per shard so that more traffic than one core can take uses every
// core, and while the traffic fits in one core those extra loops only
// cost (each wakes for its own share of the frames, every wake-up a
// context switch and a wait's system call, and each receive-moderation
// hold gathers a share of what one loop's would). So the first loop
// measures how busy the loops are and, under a share of one core over a
// window, serves every shard itself while the others park; above a
// higher share it hands the shards back.
//
// Policy is the decision alone, pure: the time and the loops' summed
// busy time in, gathered or not out. Handover is what the loops share
// around it (the decision, a channel for the shards, counts); moving a
// shard from loop to loop is the daemon's (frontend/gather.go,
// backend/gather.go).
package gather

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/qsplice/qsplice/splice"
)

// Default thresholds, in shares of one core, and window.
const (
	defaultBelow  = 0.5
	defaultAbove  = 0.8
	defaultWindow = 100 * time.Millisecond
)

// Config is the policy's setting. The zero value gathers never.
type Config struct {
	// Below: the loops gather while their busy time sums to less than
	// this share of one core over a window; Above: the gathering loop
	// hands the shards back when it is busy for more than this share.
	// Below should be well under Above (hysteresis); with Below at or
	// over Above the loops trade the shards every window, which only
	// tests want (tools/e2e).
	Below, Above float64
	// Window is how long each measurement lasts.
	Window time.Duration
}

// Default is both daemons' default policy (their -gather flag).
var Default = Config{Below: defaultBelow, Above: defaultAbove, Window: defaultWindow}

// Usage is the -gather flag's help; what names the daemon's loops.
func Usage(loops string) string {
	return "with several " + loops + ": BELOW,ABOVE[,WINDOW]: while the " + loops + " are busy for less than BELOW of " +
		"one core over WINDOW (default 100ms), the first serves every shard and the others sleep (fewer wake-ups " +
		"and system calls per frame); it hands the shards back once it is busy for more than ABOVE; off: each of " +
		"the " + loops + " serves its own shard always"
}

// On reports whether the policy ever gathers.
func (c Config) On() bool { return c.Below > 0 }

// String is the -gather flag's form of c.
func (c Config) String() string {
	if !c.On() {
		return "off"
	}
	s := strconv.FormatFloat(c.Below, 'g', -1, 64) + "," + strconv.FormatFloat(c.Above, 'g', -1, 64)
	if c.Window != defaultWindow {
		s += "," + c.Window.String()
	}
	return s
}

// Parse parses the -gather flag: "off", or BELOW,ABOVE[,WINDOW].
func Parse(s string) (Config, error) {
	if s == "off" || s == "" {
		return Config{}, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) < 2 || len(parts) > 3 {
		return Config{}, fmt.Errorf("gather %q: want off or BELOW,ABOVE[,WINDOW], e.g. %s", s, Default)
	}
	c := Config{Window: defaultWindow}
	var err error
	if c.Below, err = strconv.ParseFloat(parts[0], 64); err != nil {
		return Config{}, fmt.Errorf("gather %q: BELOW: %w", s, err)
	}
	if c.Above, err = strconv.ParseFloat(parts[1], 64); err != nil {
		return Config{}, fmt.Errorf("gather %q: ABOVE: %w", s, err)
	}
	if len(parts) == 3 {
		if c.Window, err = time.ParseDuration(parts[2]); err != nil {
			return Config{}, fmt.Errorf("gather %q: WINDOW: %w", s, err)
		}
	}
	return c, c.Validate()
}

// Validate says what is wrong with c, if anything.
func (c Config) Validate() error {
	if math.IsNaN(c.Below) || math.IsNaN(c.Above) {
		return fmt.Errorf("gather %v,%v: shares of a core must be numbers", c.Below, c.Above)
	}
	if !c.On() {
		return nil
	}
	switch {
	case c.Above < 0:
		return fmt.Errorf("gather %s: ABOVE must not be negative", c)
	case c.Window <= 0:
		return fmt.Errorf("gather %s: the window must be positive", c)
	}
	return nil
}

// Policy decides, from the loops' busy time, whether one loop serves
// every shard.
type Policy struct {
	cfg      Config
	gathered bool
	since    splice.Time   // the window's start
	busyAt   time.Duration // the busy time at since
}

// NewPolicy starts a policy's first window at now, spread.
func NewPolicy(cfg Config, now splice.Time) Policy {
	return Policy{cfg: cfg, since: now}
}

// Due reports whether the window open at now is over, so that the
// next Observe decides: a loop that pays for reading its busy time reads
// it then.
func (p *Policy) Due(now splice.Time) bool { return now.Sub(p.since) >= p.cfg.Window }

// Observe is given the time and the busy time the loops have summed so
// far; at the end of each window it reports whether one loop should
// serve every shard from now on (before, what it reported last).
func (p *Policy) Observe(now splice.Time, busy time.Duration) bool {
	span := now.Sub(p.since)
	if span < p.cfg.Window {
		return p.gathered
	}
	share := float64(busy-p.busyAt) / float64(span)
	switch {
	case !p.gathered && share < p.cfg.Below:
		p.gathered = true
	case p.gathered && share > p.cfg.Above:
		p.gathered = false
	}
	p.since, p.busyAt = now, busy
	return p.gathered
}

// Handover is what a daemon's loops share to gather: the policy's
// decision, which the other loops read before each wait; the channel on
// which a loop that parks hands its shard to the first loop; and how
// often the loops gathered and spread. The first loop alone calls Due,
// Decide and Take; the others Want and Hand.
type Handover[S any] struct {
	policy           Policy
	want             atomic.Bool
	handed           chan S
	gathers, spreads atomic.Uint64
}

// NewHandover starts the policy at now, spread, for a daemon of shards
// shards.
func NewHandover[S any](cfg Config, now splice.Time, shards int) *Handover[S] {
	return &Handover[S]{policy: NewPolicy(cfg, now), handed: make(chan S, shards)}
}

// Want reports whether the loops are to gather now.
func (h *Handover[S]) Want() bool { return h.want.Load() }

// Due is the policy's Due.
func (h *Handover[S]) Due(now splice.Time) bool { return h.policy.Due(now) }

// Decide gives the policy the loops' busy time so far and publishes its
// decision; gathering reports that the loops have just been asked to
// gather, and the caller then wakes them, so that each sees it before
// its next wait.
func (h *Handover[S]) Decide(now splice.Time, busy time.Duration) (want, gathering bool) {
	want = h.policy.Observe(now, busy)
	if want == h.want.Load() {
		return want, false
	}
	h.want.Store(want)
	if want {
		h.gathers.Add(1)
	} else {
		h.spreads.Add(1)
	}
	return want, want
}

// Hand gives the first loop a shard whose loop parks.
func (h *Handover[S]) Hand(s S) { h.handed <- s }

// Take returns a shard handed over and not yet taken, if any.
func (h *Handover[S]) Take() (s S, ok bool) {
	select {
	case s = <-h.handed:
		return s, true
	default:
		return s, false
	}
}

// Counts is how often the loops gathered and spread.
func (h *Handover[S]) Counts() (gathers, spreads uint64) {
	return h.gathers.Load(), h.spreads.Load()
}
