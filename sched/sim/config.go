// Package sim is a deterministic discrete-event simulator of a qsplice
// cluster, for testing scheduling policies at full scale in virtual time.
//
// Place in the data flow: it stands in for everything around package
// sched. Simulated clients offer requests open-loop (arrivals do not wait
// for answers); the simulated front-end enqueues each in a sched.Policy,
// and whenever a back-end has room it asks the Policy for the Next request
// and a sched.Dispatcher for the back-end, exactly as the front-end daemon
// does; each back-end serves a bounded number of requests at once, each
// for a service time drawn from its customer's distribution, then reports
// completion: sched.Dispatcher.Done, and Complete(customer, service time)
// when the policy takes feedback (see Completer). Expired requests are
// collected with Expire when the policy has a timeout (see Expirer).
//
// Nothing reads the wall clock and every random draw comes from generators
// seeded from Config.Seed, one stream per customer and purpose, so a run
// is a pure function of its Config: the same seed gives the same Result.
package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/qsplice/qsplice/sched"
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
	// Host and Path are copied into every request, for policies that
	// classify by them.
	Host, Path string
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
	// Policy orders the waiting requests. It is used by this run only
	// and left in whatever state the run ends in.
	Policy sched.Policy
}

// Completer is a policy that wants each request's service time when it
// completes, as the back-ends' Feedback carries it. *sched.Credit is one.
type Completer interface {
	Complete(customer string, service time.Duration)
}

// Expirer is a policy with a queue timeout. *sched.Credit is one.
type Expirer interface {
	Expire(now int64, f func(sched.Request))
}

// Port is the VIP port every simulated request arrives on.
const Port = 80

func (cfg *Config) check() error {
	switch {
	case cfg.Policy == nil:
		return errors.New("sim: Policy: missing")
	case cfg.Duration <= 0:
		return errors.New("sim: Duration: must be > 0")
	case cfg.Warmup < 0 || cfg.Warmup >= cfg.Duration:
		return errors.New("sim: Warmup: must be in [0, Duration)")
	case cfg.Backends < 1 || cfg.Capacity < 1:
		return errors.New("sim: Backends and Capacity: must be >= 1")
	}
	for i, c := range cfg.Customers {
		if c.Rate < 0 || c.Service < 0 || c.Reservation < 0 {
			return fmt.Errorf("sim: Customers[%d]: Rate, Service and Reservation must not be negative", i)
		}
	}
	return nil
}
