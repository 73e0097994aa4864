package sched

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults for the zero fields of CreditConfig and CustomerSpec.
const (
	DefaultCycle          = 10 * time.Millisecond
	DefaultTypicalService = 20 * time.Millisecond
	// DefaultBalanceLimit lets a customer bank ten cycles of credit: enough
	// to make up for a cycle or two in which every back-end slot happened
	// to be taken when its credit arrived, too little for a customer idle
	// for minutes to push everyone else aside for more than a tenth of a
	// second when it comes back.
	DefaultBalanceLimit = 100 * time.Millisecond
	// DefaultDebtLimit bounds what unusually slow requests can cost: a
	// customer whose requests suddenly take ten times as long waits at
	// most a second of its reservation before it is served again.
	DefaultDebtLimit = time.Second
	DefaultCapWindow = time.Second
	DefaultQueueCap  = 1000
)

// Errors returned by Credit.Enqueue besides ErrQueueFull.
var (
	// ErrOverCap: the customer sent more than its cap allows; the
	// front-end answers 429.
	ErrOverCap = errors.New("sched: customer over its cap")
	// ErrUnknownCustomer: the request names no configured customer and
	// there is no default class.
	ErrUnknownCustomer = errors.New("sched: unknown customer")
)

// CustomerSpec is what one customer bought.
type CustomerSpec struct {
	Name string
	// Reservation is the guaranteed rate in normal-sized requests per
	// second (see CreditConfig.TypicalService). 0 makes a best-effort
	// customer, served only from spare capacity.
	Reservation float64
	// Cap refuses requests beyond this many per second (averaged over
	// CreditConfig.CapWindow) with ErrOverCap; 0 means no cap.
	Cap float64
	// Weight is the customer's share of spare capacity relative to the
	// others; 0 means 1.
	Weight float64
	// QueueCap is how many of its requests may wait; 0 means
	// DefaultQueueCap.
	QueueCap int
}

// CreditConfig configures a Credit scheduler. Zero durations take the
// defaults above; QueueTimeout 0 means requests wait as long as it takes.
type CreditConfig struct {
	Customers []CustomerSpec
	// Default names the customer that requests for unknown customers
	// are charged to; "" refuses them with ErrUnknownCustomer.
	Default string
	// Cycle is the crediting period: every customer receives
	// Reservation x Cycle credits at each multiple of Cycle on the
	// caller's clock.
	Cycle time.Duration
	// TypicalService is the service time of a normal-sized request,
	// which costs exactly one credit.
	TypicalService time.Duration
	// BalanceLimit caps a balance at Reservation x BalanceLimit credits.
	BalanceLimit time.Duration
	// DebtLimit floors a balance at -Reservation x DebtLimit credits.
	DebtLimit time.Duration
	// QueueTimeout is how long a request may wait before Expire
	// removes it (the front-end answers 503 with Retry-After).
	QueueTimeout time.Duration
	// CapWindow is the token bucket behind Cap: a customer may send
	// Cap x CapWindow requests in a burst, Cap per second on average.
	CapWindow time.Duration
}

// withDefaults checks cfg and returns it with every zero field that has a
// default filled in. The caller's slice is not modified. Errors name the
// offending field.
func (cfg CreditConfig) withDefaults() (CreditConfig, error) {
	durations := []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"Cycle", &cfg.Cycle, DefaultCycle},
		{"TypicalService", &cfg.TypicalService, DefaultTypicalService},
		{"BalanceLimit", &cfg.BalanceLimit, DefaultBalanceLimit},
		{"DebtLimit", &cfg.DebtLimit, DefaultDebtLimit},
		{"QueueTimeout", &cfg.QueueTimeout, 0},
		{"CapWindow", &cfg.CapWindow, DefaultCapWindow},
	}
	for _, f := range durations {
		if *f.d < 0 {
			return cfg, fmt.Errorf("sched: %s: must not be negative", f.name)
		}
		if *f.d == 0 {
			*f.d = f.def
		}
	}
	if len(cfg.Customers) > math.MaxInt32 {
		return cfg, errors.New("sched: Customers: too many")
	}
	specs := make([]CustomerSpec, len(cfg.Customers))
	seen := make(map[string]bool, len(specs))
	for i, s := range cfg.Customers {
		field := func(name, problem string) error {
			return fmt.Errorf("sched: Customers[%d].%s: %s", i, name, problem)
		}
		switch {
		case s.Name == "":
			return cfg, field("Name", "must not be empty")
		case seen[s.Name]:
			return cfg, field("Name", fmt.Sprintf("%q appears twice", s.Name))
		case !finite(s.Reservation) || s.Reservation < 0:
			return cfg, field("Reservation", "must be a finite number >= 0")
		case !finite(s.Cap) || s.Cap < 0:
			return cfg, field("Cap", "must be a finite number >= 0")
		case s.Cap > 0 && s.Cap < s.Reservation:
			return cfg, field("Cap", "must not be below Reservation")
		case !finite(s.Weight) || s.Weight < 0:
			return cfg, field("Weight", "must be > 0")
		case s.QueueCap < 0:
			return cfg, field("QueueCap", "must not be negative")
		}
		seen[s.Name] = true
		if s.Weight == 0 {
			s.Weight = 1
		}
		if s.QueueCap == 0 {
			s.QueueCap = DefaultQueueCap
		}
		specs[i] = s
	}
	if cfg.Default != "" && !seen[cfg.Default] {
		return cfg, fmt.Errorf("sched: Default: %q is not one of the Customers", cfg.Default)
	}
	cfg.Customers = specs
	return cfg, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
