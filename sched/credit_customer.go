package sched

import (
	"math"
	"time"

	"github.com/qsplice/qsplice/internal/queue"
)

// customer is the Credit scheduler's state for one customer. Its balance
// is kept lazily: it is exact as of creditedCycle and only brought up to
// date (creditTo) when the customer is touched, so idle customers cost
// nothing per cycle.
type customer struct {
	spec    CustomerSpec
	retired bool // removed by Reconfigure, kept until its queue drains

	perCycle   float64 // credits added at each cycle boundary
	maxBalance float64 // Reservation x BalanceLimit
	minBalance float64 // -Reservation x DebtLimit
	balance    float64 // credits, as of creditedCycle
	// creditedCycle is the last cycle whose credit balance includes;
	// math.MinInt64 for a customer never touched, whose balance is full.
	creditedCycle int64

	// queue holds the waiting requests, oldest first; it grows on
	// demand (most customers never queue much, so none is allocated up
	// front) and then reuses its storage.
	queue queue.Ring[queued]

	// Links of the round-robin ring of positive customers with waiting
	// requests; meaningful only while inRing.
	prev, next int32
	inRing     bool

	// pass is the customer's virtual time in the sharing of spare
	// capacity: it advances by cost/Weight for every request served
	// from spare capacity, and the customer with the smallest pass is
	// served next.
	pass float64

	tokens   float64 // cap token bucket, in requests
	tokensAt int64   // ns when tokens was computed; math.MinInt64: full

	// Dispatched requests not yet completed or refunded, by how they
	// were paid for: from the balance or from spare capacity. Completions
	// do not say which request finished, so a correction is split in
	// proportion (see Credit.Complete).
	inflightReserved, inflightSpare float64

	offered, admitted, dispatched, spareDispatched uint64
	overCap, queueFull, expired, refunded          uint64
	charged                                        float64
}

// queued is a waiting request and when it was enqueued.
type queued struct {
	r  Request
	at int64
}

// setSpec applies a (validated, defaulted) spec and the scheduler-wide
// limits, clamping the balance into the new bounds.
func (c *customer) setSpec(s CustomerSpec, cfg *CreditConfig) {
	c.spec = s
	c.perCycle = s.Reservation * cfg.Cycle.Seconds()
	c.maxBalance = s.Reservation * cfg.BalanceLimit.Seconds()
	c.minBalance = -s.Reservation * cfg.DebtLimit.Seconds()
	c.balance = min(max(c.balance, c.minBalance), c.maxBalance)
	if burst := c.burst(cfg.CapWindow); c.tokens > burst {
		c.tokens = burst
	}
}

func newCustomer(s CustomerSpec, cfg *CreditConfig) customer {
	c := customer{creditedCycle: math.MinInt64, tokensAt: math.MinInt64, prev: -1, next: -1}
	c.setSpec(s, cfg)
	c.balance = c.maxBalance
	return c
}

// creditTo adds the credit of every cycle boundary after creditedCycle up
// to and including cycle k, within the positive bound.
func (c *customer) creditTo(k int64) {
	if k <= c.creditedCycle {
		return
	}
	c.balance = c.balanceAt(k)
	c.creditedCycle = k
}

// balanceAt is what the balance will be at cycle k if nothing else
// happens before; it changes nothing. Crediting is linear up to the bound,
// so catching up on many cycles at once gives the same result as
// crediting each of them.
func (c *customer) balanceAt(k int64) float64 {
	if k <= c.creditedCycle || c.balance >= c.maxBalance {
		return c.balance
	}
	// In floating point, so the never-credited sentinel cannot overflow.
	cycles := float64(k) - float64(c.creditedCycle)
	return min(c.maxBalance, c.balance+c.perCycle*cycles)
}

// turnCycle is the first cycle at whose boundary a non-positive balance
// becomes positive; false if it never will (no reservation).
func (c *customer) turnCycle() (int64, bool) {
	if c.perCycle <= 0 || c.maxBalance <= 0 {
		return 0, false
	}
	cycles := math.Floor(-c.balance/c.perCycle) + 1
	if cycles > 1<<50 { // a reservation too small to matter in this era
		return 0, false
	}
	return c.creditedCycle + int64(cycles), true
}

// addBalance moves the balance by delta credits within its bounds.
func (c *customer) addBalance(delta float64) {
	c.balance = min(max(c.balance+delta, c.minBalance), c.maxBalance)
}

// reservedShare is the fraction of one completion to account to the
// balance rather than to the spare share, and forgets one request in
// flight accordingly.
func (c *customer) reservedShare() float64 {
	share := 1.0
	if total := c.inflightReserved + c.inflightSpare; total > 0 {
		share = c.inflightReserved / total
	}
	c.inflightReserved = max(0, c.inflightReserved-share)
	c.inflightSpare = max(0, c.inflightSpare-(1-share))
	return share
}

func (c *customer) burst(window time.Duration) float64 {
	return c.spec.Cap * window.Seconds()
}

// capAllows refills the cap's token bucket up to now and reports whether
// it holds a whole request. Customers without a cap always pass.
func (c *customer) capAllows(now int64, window time.Duration) bool {
	if c.spec.Cap <= 0 {
		return true
	}
	burst := c.burst(window)
	if c.tokensAt == math.MinInt64 {
		c.tokens = burst
	} else if now > c.tokensAt {
		c.tokens = min(burst, c.tokens+c.spec.Cap*float64(now-c.tokensAt)/1e9)
	}
	c.tokensAt = max(c.tokensAt, now)
	return c.tokens >= 1
}

// spendToken takes one request out of the cap's bucket, after capAllows.
func (c *customer) spendToken() {
	if c.spec.Cap > 0 {
		c.tokens--
	}
}
