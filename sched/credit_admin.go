package sched

import "math"

// CustomerState is a customer's accounting at one moment, for metrics and
// the admin interface. Counters count since the customer first appeared
// and survive Reconfigure.
type CustomerState struct {
	Name string
	// Retired customers were removed by Reconfigure while requests of
	// theirs were waiting; they are served from spare capacity until
	// their queue drains, then forgotten at the next Reconfigure.
	Retired bool
	Balance float64 // credits, as of the cycle of now
	Queued  int     // requests waiting

	Offered    uint64 // requests Enqueue was asked to admit
	Admitted   uint64 // requests queued
	Dispatched uint64 // requests handed out by Next, both kinds
	// SpareDispatched counts the dispatches paid from spare capacity
	// rather than from the balance.
	SpareDispatched uint64
	OverCap         uint64  // refused with ErrOverCap
	QueueFull       uint64  // refused with ErrQueueFull
	Expired         uint64  // removed by Expire
	Refunded        uint64  // Refund calls
	Charged         float64 // credits taken from the balance, corrections and refunds included
}

// NewCredit returns a Credit scheduler for cfg, or an error naming the
// first field that is wrong, such as "sched: Customers[2].Weight: must be
// > 0".
func NewCredit(cfg CreditConfig) (*Credit, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Credit{lastNow: math.MinInt64}
	s.cycle = floorDiv(s.lastNow, int64(cfg.Cycle))
	s.customers = make([]customer, len(cfg.Customers))
	for i, spec := range cfg.Customers {
		s.customers[i] = newCustomer(spec, &cfg)
	}
	s.install(cfg)
	return s, nil
}

// Reconfigure switches to cfg at now, as on SIGHUP. Customers that remain
// (by name) keep their queue, balance (credited up to now under the old
// reservation, then clamped to the new bounds), spare share, cap bucket
// and counters; requests already waiting stay even if the new QueueCap is
// smaller. New customers start as NewCredit starts them. A removed
// customer with requests waiting is retired: no longer accepted, served
// from spare capacity until empty. On error nothing changes.
func (s *Credit) Reconfigure(cfg CreditConfig, now int64) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	s.advance(now)
	old := s.customers
	for i := range old {
		old[i].creditTo(s.cycle)
	}
	cycle := floorDiv(s.lastNow, int64(cfg.Cycle))
	kept := make([]bool, len(old))
	customers := make([]customer, 0, len(cfg.Customers))
	for _, spec := range cfg.Customers {
		j, ok := s.byName[spec.Name]
		if !ok {
			customers = append(customers, newCustomer(spec, &cfg))
			continue
		}
		kept[j] = true
		c := old[j]
		c.retired = false
		c.setSpec(spec, &cfg)
		if c.creditedCycle != math.MinInt64 {
			c.creditedCycle = cycle
		}
		customers = append(customers, c)
	}
	for j := range old {
		if kept[j] || old[j].queue.Len() == 0 {
			continue
		}
		c := old[j]
		c.retired = true
		spec := c.spec
		spec.Reservation, spec.Cap = 0, 0
		c.setSpec(spec, &cfg)
		customers = append(customers, c)
	}
	s.customers = customers
	s.cycle = cycle
	s.install(cfg)
	return nil
}

// install makes cfg current for s.customers and rebuilds every index
// from the customers' queues and balances.
func (s *Credit) install(cfg CreditConfig) {
	s.cfg = cfg
	n := len(s.customers)
	s.byName = make(map[string]int32, n)
	s.defaultIdx = -1
	s.waiting = 0
	s.ringHead = -1
	s.turn.reset(n)
	s.spare.reset(n)
	s.expiry.reset(n)
	for i := range s.customers {
		c := &s.customers[i]
		s.byName[c.spec.Name] = int32(i)
		if c.spec.Name == cfg.Default {
			s.defaultIdx = int32(i)
		}
		c.inRing, c.prev, c.next = false, -1, -1
		s.waiting += c.queue.Len()
		if c.queue.Len() > 0 {
			s.place(int32(i))
		}
	}
}

// Snapshot returns every customer's state at now, in configuration order
// with retired customers last. It changes nothing.
func (s *Credit) Snapshot(now int64) []CustomerState {
	cycle := floorDiv(max(now, s.lastNow), int64(s.cfg.Cycle))
	out := make([]CustomerState, len(s.customers))
	for i := range s.customers {
		c := &s.customers[i]
		out[i] = CustomerState{
			Name:            c.spec.Name,
			Retired:         c.retired,
			Balance:         c.balanceAt(cycle),
			Queued:          c.queue.Len(),
			Offered:         c.offered,
			Admitted:        c.admitted,
			Dispatched:      c.dispatched,
			SpareDispatched: c.spareDispatched,
			OverCap:         c.overCap,
			QueueFull:       c.queueFull,
			Expired:         c.expired,
			Refunded:        c.refunded,
			Charged:         c.charged,
		}
	}
	return out
}
