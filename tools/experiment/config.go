package experiment

import (
	"fmt"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/session"
	"github.com/qsplice/qsplice/tools/testserver"
)

// Config is one simulated run: the cluster, the workload, the policy and
// the offered load. DefaultConfig documents every value; change fields of
// a copy for variants.
type Config struct {
	// Backends x SlotsPerBackend requests are served at once.
	Backends, SlotsPerBackend int
	// ServiceMean is the mean of the exponential service time of each
	// page class, indexed by session.Stage.
	ServiceMean [session.NumPages]time.Duration
	// Model is the clients' behaviour: page transitions, think time,
	// patience, retries and abandonment.
	Model session.Model
	// Mode is the front-end policy: one sched.LifoPri in this mode with
	// sched.DefaultClasses and the default thresholds and capacities.
	Mode sched.Mode
	// Load is the offered load relative to Capacity: session arrival
	// rate x expected session length = Load x Capacity.
	Load float64
	// Sessions arriving in [Warmup, Duration) are counted; earlier ones
	// fill the system, and sessions keep arriving after Duration until
	// every counted session has ended, so counted sessions never see an
	// emptying system.
	Warmup, Duration time.Duration
	// UtilInterval is how often the front-end feeds the
	// UtilizationMeter's figure to LifoPri.SetUtilization.
	UtilInterval time.Duration
	// Seed fixes every random draw. Session i draws from its own
	// generator seeded by (Seed, i), so the same seed gives every policy
	// the same sessions, arrival times and service times.
	Seed uint64
}

// DefaultConfig returns the documented experiment (see the package
// comment for why each number is what it is) at the given policy and load.
func DefaultConfig(mode sched.Mode, load float64) Config {
	m := session.DefaultModel()
	m.TimeoutMean = 8 * time.Second
	m.ThinkMean = 7 * time.Second
	return Config{
		Backends:        5,
		SlotsPerBackend: 5,
		// The test server's shop pages cost the same, so the live
		// experiment serves what this one simulates.
		ServiceMean:  testserver.DefaultShopService(),
		Model:        m,
		Mode:         mode,
		Load:         load,
		Warmup:       60 * time.Second,
		Duration:     600 * time.Second,
		UtilInterval: 10 * time.Second,
		Seed:         1,
	}
}

// Slots is the number of requests the cluster serves at once.
func (c Config) Slots() int { return c.Backends * c.SlotsPerBackend }

// MeanService is the mean service time of a request of the model's mix.
func (c Config) MeanService() time.Duration {
	st := c.Model.Stats()
	mean := 0.0
	for j := range session.NumPages {
		mean += st.Mix[j] * float64(c.ServiceMean[j])
	}
	return time.Duration(mean)
}

// Capacity is the request rate the cluster can serve, in requests per
// second: Slots / MeanService.
func (c Config) Capacity() float64 {
	return float64(c.Slots()) / c.MeanService().Seconds()
}

// SessionRate is the rate of new sessions, per second, that offers Load.
func (c Config) SessionRate() float64 {
	return c.Load * c.Capacity() / c.Model.Stats().Length
}

// validate reports the first field that cannot be simulated.
func (c Config) validate() error {
	if err := c.Model.Validate(); err != nil {
		return err
	}
	switch {
	case c.Backends <= 0 || c.SlotsPerBackend <= 0:
		return fmt.Errorf("experiment: Backends and SlotsPerBackend must be > 0")
	case !(c.Load > 0):
		return fmt.Errorf("experiment: Load %v must be > 0", c.Load)
	case c.Duration <= c.Warmup || c.Warmup < 0:
		return fmt.Errorf("experiment: need 0 <= Warmup (%v) < Duration (%v)", c.Warmup, c.Duration)
	case c.UtilInterval <= 0:
		return fmt.Errorf("experiment: UtilInterval must be > 0")
	}
	for j, d := range c.ServiceMean {
		if d <= 0 {
			return fmt.Errorf("experiment: ServiceMean[%v] must be > 0", session.Stage(j))
		}
	}
	return nil
}
