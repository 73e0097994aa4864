package experiment

import (
	"fmt"
	"strings"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/session"
)

// Preset names one complete set of the model's numbers: the cluster, the
// page costs, the clients' behaviour and the counted window. The package
// comment explains each preset and what it reproduces of the publication.
type Preset string

const (
	// PresetShop is DefaultConfig: 5 x 5 slots, plausible page costs,
	// users who leave after a timeout half of the time.
	PresetShop Preset = "shop"
	// PresetRetry is RetryConfig: 5 x 1 slots with 1.6x the shop's page
	// costs, so the single FIFO queue holds about one patience of work,
	// and users who retry a timed-out page rather than leave.
	PresetRetry Preset = "retry"
)

// Presets lists every preset, in the order tools print them.
func Presets() []Preset { return []Preset{PresetShop, PresetRetry} }

// PresetConfig returns preset p's experiment at the given policy and load.
func PresetConfig(p Preset, mode sched.Mode, load float64) (Config, error) {
	switch p {
	case PresetShop:
		return DefaultConfig(mode, load), nil
	case PresetRetry:
		return RetryConfig(mode, load), nil
	}
	return Config{}, fmt.Errorf("experiment: no model preset %q (%s)", string(p), presetNames())
}

func presetNames() string {
	names := make([]string, 0, len(Presets()))
	for _, p := range Presets() {
		names = append(names, string(p))
	}
	return strings.Join(names, ", ")
}

// Retry preset's numbers, and why (the package comment has the results).
const (
	// retryServiceScale multiplies the shop's page costs. With 5 slots the
	// cluster then serves 13.8 req/s, and the single FIFO queue's 100
	// requests are 100 / 13.8 = 7.2 s of work: a client at its back
	// waits about its patience (8 s).
	retryServiceScale = 1.6
	// retryRetries and retryAbandonProb: a user whose page times out
	// reloads it nine times in ten, up to five times, so the load a
	// failing page sheds is small and FIFO keeps serving requests their
	// clients have given up on.
	retryRetries     = 5
	retryAbandonProb = 0.1
	// retryUtilInterval gives the utilization meter 700-800 completions
	// per interval near capacity, the order of the shop preset's ~1000
	// in its 10 s (see DefaultConfig): with 10 s the switch turned LIFO
	// in up to 20% of the intervals at loads 0.5-0.8.
	retryUtilInterval = 60 * time.Second
	// The counted window, [180 s, 4500 s): 4320 s at 1/8 of the shop's
	// capacity counts about as many requests as the shop's 540 s, and
	// the 180 s of warm-up (two to three session lengths under overload)
	// let FIFO's queue reach its collapsed state before counting starts.
	retryWarmup   = 180 * time.Second
	retryDuration = 4500 * time.Second
)

// RetryConfig returns the retry preset at the given policy and load: the
// shop preset with one slot per back-end, page costs x1.6
// (main 240 ms ... confirm 960 ms), patience 8 s, think 7 s, and users
// who retry a timed-out page up to five times, leaving with probability
// 0.1 after each timeout. It gives the publication's completion shares
// at load 1.4 in the simulator, whose front-end serves requests their
// clients gave up on; the package comment says why the lab does not.
func RetryConfig(mode sched.Mode, load float64) Config {
	c := DefaultConfig(mode, load)
	c.SlotsPerBackend = 1
	for p := range c.ServiceMean {
		c.ServiceMean[p] = time.Duration(float64(c.ServiceMean[p]) * retryServiceScale)
	}
	c.Model.Retries = retryRetries
	c.Model.AbandonProb = retryAbandonProb
	c.UtilInterval = retryUtilInterval
	c.Warmup, c.Duration = retryWarmup, retryDuration
	return c
}

// Summary describes the cluster and the clients in one line, for the
// heading of a printed table.
func (c Config) Summary() string {
	m := c.Model
	return fmt.Sprintf("%d back-ends x %d slot(s), service %v (main) to %v (confirm), capacity %.1f req/s; "+
		"patience %v, think %v, %d retries, leave after a timeout with p=%g; utilization every %v",
		c.Backends, c.SlotsPerBackend, c.ServiceMean[session.Main], c.ServiceMean[session.Confirm], c.Capacity(),
		m.TimeoutMean, m.ThinkMean, m.Retries, m.AbandonProb, c.UtilInterval)
}
