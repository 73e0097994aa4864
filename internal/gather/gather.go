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
// busy time in, gathered or not out. The handover is the daemon's
// (frontend/gather.go, backend/gather.go).
package gather

import (
	"fmt"
	"math"
	"strconv"
	"strings"
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
