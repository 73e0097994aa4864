package sched

import "time"

// Credit is the credit-reservation policy: each customer buys a rate of
// normal-sized requests per second and gets it whenever it asks for at
// least that much; capacity nobody reserved, or reserved but unused, is
// shared among the customers that want more, in proportion to their
// weights.
//
// # Credits
//
// A credit pays for one normal-sized request: one whose service time, as
// the back-end measures it, equals TypicalService. Nothing else (bytes,
// path, method) enters the price. Serving a request from the balance
// costs one credit when it is dispatched; Complete corrects the charge by
// service/TypicalService - 1 once the back-end reports the service time,
// so a request that took twice the typical time has cost two credits, one
// that took half has cost half. Refund gives the credit back for a request
// that was dispatched but never served.
//
// Credit is added at cycle boundaries of the caller's clock: at every
// instant that is a multiple of Cycle (counted from 0 ns), every customer
// receives Reservation x Cycle credits. The balance is then clamped to
// Reservation x BalanceLimit, so a customer idle for an hour comes back
// with at most BalanceLimit worth of burst; corrections and charges clamp
// it to -Reservation x DebtLimit, so a streak of slow requests cannot
// starve a customer for longer than DebtLimit. A customer never seen before
// starts with a full balance, like one that has been idle for a while.
// Calls that take no clock (Complete, Refund) act at the latest time any
// call passed.
//
// # Serving order
//
// Next serves, round robin one request at a time, the customers whose
// balance is positive and who have requests waiting. Only when none of
// them waits does it serve the customers with a zero or negative balance,
// from spare capacity. Those are chosen by virtual time (stride
// scheduling): each has a pass that advances by cost/Weight for every
// request served this way, the smallest pass goes next, and a customer
// joining the group starts no earlier than the pass last served, so
// absence earns no backlog. A request served from spare capacity is not
// charged to the balance: if it were, in a saturated cluster every balance
// would sink to the debt limit and the reservations would dissolve into
// plain weighted sharing. Its service-time correction goes to the pass
// instead. Completions do not name the request, so when a customer has
// requests of both kinds in flight a correction is split between balance
// and pass in proportion to how many of each are outstanding.
//
// Next is work-conserving: it returns a request whenever one waits.
//
// # Data structures
//
// Per-decision work does not depend on how many customers exist, only
// (logarithmically) on how many have requests waiting:
//
//   - balances are credited lazily: each customer records the last cycle
//     its balance includes and catches up when touched, in O(1);
//   - customers with a positive balance and waiting requests form a
//     doubly linked ring (intrusive, by index) served from its head;
//   - customers with a non-positive balance and waiting requests sit in
//     two indexed heaps: one keyed by the cycle at which their balance
//     turns positive (Next first moves every customer whose time has
//     come into the ring) and one keyed by pass, for spare capacity;
//   - with a QueueTimeout, customers with waiting requests sit in a heap
//     keyed by when their oldest request was enqueued, for Expire;
//   - each customer's queue is a ring buffer that grows up to QueueCap;
//     the cap is a token bucket refilled lazily from the clock.
//
// Enqueue is O(1) plus O(log n) when a customer's queue stops being
// empty; Next, Complete, Refund and each expired request cost O(log n),
// n being the number of customers with waiting requests (Next also moves
// customers whose balance turned positive into the ring, O(log n) each,
// once per turn). Snapshot and Reconfigure are O(customers).
type Credit struct {
	cfg        CreditConfig
	customers  []customer
	byName     map[string]int32 // includes retired customers
	defaultIdx int32            // -1: unknown customers are refused

	waiting int   // requests queued, all customers
	lastNow int64 // latest clock value passed in
	cycle   int64 // the cycle lastNow falls in

	ringHead int32 // positive customers with waiting requests; -1 none
	turn     idHeap[int64]
	spare    idHeap[float64]
	expiry   idHeap[int64]
	vtime    float64 // largest pass served from spare capacity so far
}

var _ Policy = (*Credit)(nil)

// Enqueue admits r for the customer r.Customer names, or for the default
// class when that names no customer; in that case the request is
// rewritten to name the default class, so Next hands back the name to
// complete it with. It refuses with ErrUnknownCustomer, ErrOverCap
// (checked first) or ErrQueueFull; a refused request costs neither queue
// space nor cap.
func (s *Credit) Enqueue(r Request, now int64) error {
	s.advance(now)
	i, ok := s.byName[r.Customer]
	if !ok || s.customers[i].retired {
		if s.defaultIdx < 0 {
			return ErrUnknownCustomer
		}
		i = s.defaultIdx
		r.Customer = s.customers[i].spec.Name
	}
	c := &s.customers[i]
	c.offered++
	if !c.capAllows(s.lastNow, s.cfg.CapWindow) {
		c.overCap++
		return ErrOverCap
	}
	if c.queue.Len() >= c.spec.QueueCap {
		c.queueFull++
		return ErrQueueFull
	}
	c.spendToken()
	c.queue.PushBack(queued{r: r, at: s.lastNow})
	c.admitted++
	s.waiting++
	if c.queue.Len() == 1 {
		c.creditTo(s.cycle)
		s.place(i)
	}
	return nil
}

// Next removes and returns the next request to dispatch: round robin over
// customers with a positive balance, charging one credit, else the
// customer with the smallest pass, charging its spare share.
func (s *Credit) Next(now int64) (Request, bool) {
	s.advance(now)
	s.promote()
	if i := s.ringHead; i >= 0 {
		c := &s.customers[i]
		r := s.take(i)
		c.creditTo(s.cycle)
		c.addBalance(-1)
		c.charged++
		c.inflightReserved++
		s.unring(i) // back to the tail, if still positive
		s.place(i)
		return r, true
	}
	if s.spare.len() > 0 {
		i, pass := s.spare.min()
		c := &s.customers[i]
		s.vtime = max(s.vtime, pass)
		r := s.take(i)
		c.pass += 1 / c.spec.Weight
		c.spareDispatched++
		c.inflightSpare++
		s.place(i)
		return r, true
	}
	return Request{}, false
}

// Len returns the number of waiting requests.
func (s *Credit) Len() int { return s.waiting }

// Complete records that one of customer's dispatched requests took
// service to serve, correcting its charge by service/TypicalService - 1
// credits (to the balance, or to the spare share for requests served
// from spare capacity). Unknown names are ignored.
func (s *Credit) Complete(customer string, service time.Duration) {
	i, ok := s.byName[customer]
	if !ok {
		return
	}
	c := &s.customers[i]
	correction := float64(max(service, 0))/float64(s.cfg.TypicalService) - 1
	share := c.reservedShare()
	c.creditTo(s.cycle)
	c.addBalance(-correction * share)
	c.charged += correction * share
	c.pass += correction * (1 - share) / c.spec.Weight
	s.place(i)
}

// Refund gives back what a dispatched request of customer cost, when it
// was never served (its back-end died). It replaces Complete for that
// request. Unknown names are ignored.
func (s *Credit) Refund(customer string) {
	i, ok := s.byName[customer]
	if !ok {
		return
	}
	c := &s.customers[i]
	share := c.reservedShare()
	c.creditTo(s.cycle)
	c.addBalance(share)
	c.charged -= share
	c.pass -= (1 - share) / c.spec.Weight
	c.refunded++
	s.place(i)
}

// Expire removes every request that at now has waited longer than
// QueueTimeout since its Enqueue, oldest first, and calls f with each
// after it is gone. Without a QueueTimeout it does nothing.
func (s *Credit) Expire(now int64, f func(Request)) {
	s.advance(now)
	timeout := int64(s.cfg.QueueTimeout)
	if timeout <= 0 {
		return
	}
	for s.expiry.len() > 0 {
		i, at := s.expiry.min()
		if s.lastNow-at <= timeout {
			return
		}
		c := &s.customers[i]
		r := c.queue.PopFront().r
		s.waiting--
		c.expired++
		c.creditTo(s.cycle)
		s.place(i)
		f(r)
	}
}

// NextExpiry is the earliest time at which Expire would remove a
// request; false when none can expire (nothing waits, or no
// QueueTimeout). A caller that sleeps until then needs no polling. It
// changes nothing.
func (s *Credit) NextExpiry() (int64, bool) {
	timeout := int64(s.cfg.QueueTimeout)
	if timeout <= 0 || s.expiry.len() == 0 {
		return 0, false
	}
	_, at := s.expiry.min()
	return at + timeout + 1, true
}

// CustomerIndex returns the position of the named customer in the
// configuration, false for unknown (or removed) customers.
func (s *Credit) CustomerIndex(name string) (int, bool) {
	i, ok := s.byName[name]
	if !ok || s.customers[i].retired {
		return 0, false
	}
	return int(i), true
}

// advance moves the scheduler's notion of now forward; a clock that steps
// back is ignored.
func (s *Credit) advance(now int64) {
	if now > s.lastNow {
		s.lastNow = now
		s.cycle = floorDiv(now, int64(s.cfg.Cycle))
	}
}

// promote moves into the ring every customer whose balance has turned
// positive at a cycle boundary that has now passed.
func (s *Credit) promote() {
	for s.turn.len() > 0 {
		i, at := s.turn.min()
		if at > s.cycle {
			return
		}
		s.customers[i].creditTo(s.cycle)
		s.turn.remove(i)
		s.place(i)
	}
}

// take removes customer i's oldest request.
func (s *Credit) take(i int32) Request {
	c := &s.customers[i]
	s.waiting--
	c.dispatched++
	return c.queue.PopFront().r
}

// place puts customer i, whose balance is credited to the current cycle,
// where its queue and balance say it belongs: nowhere when it has nothing
// waiting, in the ring when its balance is positive, else in the turn and
// spare heaps.
func (s *Credit) place(i int32) {
	c := &s.customers[i]
	if c.queue.Len() == 0 {
		s.unring(i)
		s.turn.remove(i)
		s.spare.remove(i)
		s.expiry.remove(i)
		return
	}
	if s.cfg.QueueTimeout > 0 {
		s.expiry.set(i, c.queue.Front().at)
	}
	if c.balance > 0 {
		s.turn.remove(i)
		s.spare.remove(i)
		if !c.inRing {
			s.ring(i)
		}
		return
	}
	s.unring(i)
	if at, ok := c.turnCycle(); ok {
		s.turn.set(i, at)
	} else {
		s.turn.remove(i)
	}
	if !s.spare.contains(i) {
		c.pass = max(c.pass, s.vtime)
	}
	s.spare.set(i, c.pass)
}

// ring appends customer i at the tail of the round robin.
func (s *Credit) ring(i int32) {
	c := &s.customers[i]
	c.inRing = true
	if s.ringHead < 0 {
		c.prev, c.next = i, i
		s.ringHead = i
		return
	}
	head := &s.customers[s.ringHead]
	tail := head.prev
	c.prev, c.next = tail, s.ringHead
	s.customers[tail].next = i
	head.prev = i
}

// unring takes customer i out of the round robin, if it is in.
func (s *Credit) unring(i int32) {
	c := &s.customers[i]
	if !c.inRing {
		return
	}
	c.inRing = false
	if c.next == i {
		s.ringHead = -1
		return
	}
	s.customers[c.prev].next = c.next
	s.customers[c.next].prev = c.prev
	if s.ringHead == i {
		s.ringHead = c.next
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
