// Package sim is a deterministic discrete-event simulator of a qsplice
// cluster, for testing scheduling at full scale in virtual time.
//
// Place in the data flow: it stands in for everything around the
// front-end's controller (frontend/controller), which schedules exactly
// as it does in the daemon. Simulated clients offer requests open-loop
// (arrivals do not wait for answers); a stand-in for the packet engine
// reports each as the engine would (EvRequest), carries out what the
// controller asks (Dispatch, SpliceAcked, Reject, ...), and reports the
// Splice to send (EvSplice) as the daemon's engine does: with C2's SYN at
// dispatch by default, or once the handoff connection is up, the
// configured handoff delay later (Config.ClassicSplice; atsyn.go has the
// timing of both), or at once on a pooled handoff connection
// (Config.PoolC2; pool.go). Simulated shims on the back-ends register, confirm
// each Splice (once they have it and the back-end's SYN-ACK has crossed
// them), send keepalives, and report each request's service time in a
// Feedback when it is served. Each back-end serves what the controller
// sends it, for a service time drawn from the customer's distribution.
// So the simulator measures the same code the live front-end runs, from
// its configuration (listener policies, customers, classes, timeouts) to
// its decisions.
//
// Nothing reads the wall clock and every random draw comes from generators
// seeded from Config.Seed, one stream per customer and purpose, so a run
// is a pure function of its Config: the same seed gives the same Result.
package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
)

// Arrivals is how a customer's requests are spaced in time.
type Arrivals int

const (
	// Poisson arrivals: exponential gaps with mean 1/Rate.
	Poisson Arrivals = iota
	// Steady arrivals: exactly 1/Rate apart, from a random phase.
	Steady
)

// Distribution is how service times vary around their mean.
type Distribution int

const (
	// Exponential service times with the given mean.
	Exponential Distribution = iota
	// Constant service times, always the mean.
	Constant
)

// Customer is one source of load.
type Customer struct {
	// Name is put in Request.Customer; the policy charges it.
	Name string
	// Rate is the offered load in requests per second.
	Rate     float64
	Arrivals Arrivals
	// Service is the mean time a back-end takes to serve one request.
	Service      time.Duration
	Distribution Distribution
	// Reservation is what the customer bought, in requests per second,
	// used only to report attainment; 0 reports none.
	Reservation float64
	// Host and Path are those of every request: credit listeners
	// classify by Host (empty: the customer's Name), class-based ones by
	// Path.
	Host, Path string

	// Feedback experiments (issue 10).
	//
	// Steps change Rate over time: from each step's At on, the customer
	// offers the step's Rate (steps in time order). Arrivals are drawn
	// at the highest rate and kept with probability rate(now)/highest,
	// which for Poisson arrivals is exactly a Poisson process of the
	// changing rate.
	Steps []RateStep
	// Bytes is the size of a response at full quality: what the shim
	// reports in Feedback (scaled by the tree, see Config.Trees).
	Bytes uint64
}

// RateStep is a change of a customer's offered rate at At.
type RateStep struct {
	At   time.Duration
	Rate float64
}

// rateAt is the customer's offered rate at t, and the highest it ever
// offers.
func (c *Customer) rateAt(t time.Duration) (now, highest float64) {
	now, highest = c.Rate, c.Rate
	for _, s := range c.Steps {
		if t >= s.At {
			now = s.Rate
		}
		highest = max(highest, s.Rate)
	}
	return now, highest
}

// Config describes one simulation run.
type Config struct {
	Seed uint64
	// Duration is how long clients send requests, in virtual time from
	// 0; the run stops there, leaving what is queued or in service.
	Duration time.Duration
	// Warmup is excluded from every statistic: counts and response times
	// cover what happens in [Warmup, Duration].
	Warmup time.Duration
	// Backends is how many back-ends there are, each serving at most
	// Capacity requests at once.
	Backends, Capacity int
	Customers          []Customer
	// Scheduler configures the front-end's controller as a configuration
	// file would: listener policies (on Port; none means FIFO), credit
	// customers, classes, queue timeouts, handoffs ahead. A nil Classify
	// takes a request's Host for its customer's name.
	Scheduler controller.Config
	// HandoffDelay is the time from dispatch to the back-end's SYN-ACK
	// reaching the front-end (the handoff connection up); ControlDelay
	// that of a control message between the front-end and a shim, either
	// way, and of any packet between the two hosts: the SYN-ACK crossed
	// its shim ControlDelay before it reached the front-end (atsyn.go).
	// Zero: at once.
	HandoffDelay, ControlDelay time.Duration
	// ClassicSplice sends each Splice when the handoff connection is up
	// (HandoffDelay after dispatch), and the request goes when the shim's
	// SpliceAck is back, 2 x ControlDelay later: the order the front-end
	// used before issue 7. By default the Splice goes with C2's SYN, as
	// qsplice-frontend sends it (-splice-at-syn, on by default;
	// splice.FrontEndConfig.SpliceAtSYN): it leaves at dispatch, the shim
	// confirms it once it has it and the back-end's SYN-ACK has crossed
	// the shim, and the request goes when both the SYN-ACK and the
	// SpliceAck have reached the front-end, HandoffDelay or 2 x
	// ControlDelay after dispatch, whichever is longer: the round trip
	// overlaps the handshake. A request the feedback policy serves from a
	// smaller tree is rewritten, and its Splice goes the classic way in
	// either mode, as the engine sends it.
	ClassicSplice bool
	// FastOpen: the back-ends take TCP Fast Open, so a request the
	// Splice carries goes in C2's SYN as the Splice reaches the shim (D +
	// ControlDelay) instead of after the back-end's SYN-ACK
	// (splice/shim_fastopen.go).
	FastOpen bool
	// PoolC2 keeps the handoff connection of a request served to its
	// end, for the next request to the same back-end, as qsplice-frontend
	// does by default (-pool-c2; docs/pooled-c2.md). A request dispatched
	// to a back-end with one in its pool needs no handshake: its Splice
	// goes at dispatch and HandoffDelay does not apply. The request goes
	// when the SpliceAck is back, 2 x ControlDelay later, or with the
	// Splice when the controller lets it go early (EarlyRequest), the
	// server's ACK of it then standing for the SpliceAck. A rewritten
	// request (Trees) neither takes a pooled connection nor leaves its
	// own, as in the engine. PoolPerBackend (0: 64) and PoolIdle (0: 30
	// s) bound the pool as the front-end's flags of those names do. Off
	// by default, so that a Config written before it keeps its results.
	PoolC2         bool
	PoolPerBackend int
	PoolIdle       time.Duration

	// Feedback experiments (issue 10).
	//
	// Trees is M, the content trees of the site: a request the feedback
	// policy serves from tree k of M costs k/M of its customer's service
	// time and Bytes (the cheaper trees are the same pages with smaller
	// objects). 0: every request costs the full amount.
	Trees int
	// SampleEvery, when > 0, records the controller's feedback state
	// every so often in Result.Samples.
	SampleEvery time.Duration
	// Stalls are times the front-end's process does not run (in time
	// order, not overlapping; see Stall).
	Stalls []Stall
}

// Port is the VIP port every simulated request arrives on.
const Port = 80

func (cfg *Config) check() error {
	switch {
	case cfg.Duration <= 0:
		return errors.New("sim: Duration: must be > 0")
	case cfg.Warmup < 0 || cfg.Warmup >= cfg.Duration:
		return errors.New("sim: Warmup: must be in [0, Duration)")
	case cfg.Backends < 1 || cfg.Capacity < 1:
		return errors.New("sim: Backends and Capacity: must be >= 1")
	case cfg.Backends > 1<<16 || cfg.Capacity > 1<<16-1:
		return errors.New("sim: Backends and Capacity: must be below 65536")
	case cfg.HandoffDelay < 0 || cfg.ControlDelay < 0:
		return errors.New("sim: HandoffDelay and ControlDelay: must not be negative")
	case cfg.PoolPerBackend < 0 || cfg.PoolIdle < 0:
		return errors.New("sim: PoolPerBackend and PoolIdle: must not be negative")
	}
	for i, c := range cfg.Customers {
		if c.Rate < 0 || c.Service < 0 || c.Reservation < 0 {
			return fmt.Errorf("sim: Customers[%d]: Rate, Service and Reservation must not be negative", i)
		}
		for j, st := range c.Steps {
			if st.Rate < 0 || j > 0 && st.At < c.Steps[j-1].At {
				return fmt.Errorf("sim: Customers[%d].Steps[%d]: rates must not be negative, steps in time order", i, j)
			}
		}
	}
	if cfg.Trees < 0 || cfg.Trees > 255 || cfg.SampleEvery < 0 {
		return errors.New("sim: Trees must be in 0..255, SampleEvery not negative")
	}
	if err := checkStalls(cfg.Stalls); err != nil {
		return err
	}
	return nil
}
