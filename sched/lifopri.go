package sched

import "math"

// LifoPri is the LIFO-Pri overload control for e-commerce sites: requests
// are sorted by URL into classes (see Classifier), each class has its own
// bounded queue, and the order of service follows what a request is worth
// and whether its client is likely to still be waiting.
//
// # Serving order
//
// Transaction queues are strictly above browsing queues: no browsing
// request is served while any transaction request waits. Within a group,
// Next serves the non-empty queue with the largest queue length x
// Utility, so a long queue of cheap requests can overtake a short queue
// of dear ones, and ties go to the higher Utility, then to the class
// listed first. With the default classes, 10 waiting "main" (10 x 27 =
// 270), 8 "search" (288) and 4 "details" (292) are served details,
// search, main, ...
//
// Transaction queues are always FIFO: a transaction client is committed
// and waits. Browsing queues are FIFO until SetUtilization reports a
// utilization above Upper, then LIFO until it reports one below Lower.
// Under overload the oldest browsing requests are the ones whose clients
// have most likely given up; serving the newest first spends capacity on
// clients still there, and the hysteresis keeps measurement noise from
// switching back and forth.
//
// Full queues refuse with ErrQueueFull: the front-end answers at once
// rather than let the client time out. ModeEightFIFO keeps the queues and
// their order but never turns LIFO; ModeSingleFIFO puts every request in
// one FIFO queue of SingleCap and orders by arrival only, still counting
// per class for Snapshot.
//
// # Cost
//
// Enqueue is a map lookup and a ring push. Next and each expired request
// scan the classes once (eight by default), whatever the queue lengths;
// queues are ring deques that grow on demand, as far as their capacity
// needs, and are then reused, so neither allocates in steady state.
// Snapshot is O(classes).
type LifoPri struct {
	cfg     LifoPriConfig
	classes []lpClass
	byName  map[string]int32
	// Class indices of each group in configuration order, transaction
	// first: the order in which Next looks for work.
	groups  [2][]int32
	single  deque // ModeSingleFIFO's one queue
	waiting int
	lifo    bool
	lastNow int64
}

// lpClass is LifoPri's state for one class.
type lpClass struct {
	spec   Class
	queue  deque // unused in ModeSingleFIFO
	queued int   // waiting requests of this class, in any mode

	enqueued, dispatched, refused, expired uint64
}

var _ Policy = (*LifoPri)(nil)

// ClassState is one class's state at one moment, for metrics and the
// admin interface. Counters count since the policy was made.
type ClassState struct {
	Name    string
	Kind    Kind
	Utility float64
	Queued  int // requests waiting

	Enqueued   uint64 // requests admitted
	Dispatched uint64 // requests handed out by Next
	Refused    uint64 // refused with ErrQueueFull
	Expired    uint64 // removed by Expire
	// LIFO reports whether Next takes this class's newest request first.
	LIFO bool
}

// NewLifoPri returns a LifoPri policy for cfg, or an error naming the
// first field that is wrong, such as "sched: Classes[2].Utility: must be
// a finite number > 0". Browsing queues start FIFO.
func NewLifoPri(cfg LifoPriConfig) (*LifoPri, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &LifoPri{
		cfg:     cfg,
		classes: make([]lpClass, len(cfg.Classes)),
		byName:  make(map[string]int32, len(cfg.Classes)),
		single:  deque{cap: cfg.SingleCap},
		lastNow: math.MinInt64,
	}
	for i, c := range cfg.Classes {
		p.classes[i] = lpClass{spec: c, queue: deque{cap: c.QueueCap}}
		p.byName[c.Name] = int32(i)
		g := 1
		if c.Kind == Transaction {
			g = 0
		}
		p.groups[g] = append(p.groups[g], int32(i))
	}
	return p, nil
}

// Enqueue admits r into the queue of the class r.Customer names (the
// front-end classifies the path and puts the class name there). It
// refuses with ErrUnknownCustomer when no class has that name and with
// ErrQueueFull when the class's queue (in ModeSingleFIFO, the single
// queue) is full; a refused request is counted but takes no space.
func (p *LifoPri) Enqueue(r Request, now int64) error {
	p.lastNow = max(p.lastNow, now)
	i, ok := p.byName[r.Customer]
	if !ok {
		return ErrUnknownCustomer
	}
	c := &p.classes[i]
	q := &c.queue
	if p.cfg.Mode == ModeSingleFIFO {
		q = &p.single
	}
	if q.full() {
		c.refused++
		return ErrQueueFull
	}
	q.PushBack(classWaiter{r: r, at: p.lastNow, class: i})
	c.queued++
	c.enqueued++
	p.waiting++
	return nil
}

// Next removes and returns the request to dispatch next, in the order
// described on LifoPri; false when none waits. now is only recorded.
func (p *LifoPri) Next(now int64) (Request, bool) {
	p.lastNow = max(p.lastNow, now)
	if p.waiting == 0 {
		return Request{}, false
	}
	q, back := &p.single, false
	if p.cfg.Mode != ModeSingleFIFO {
		i, group := p.pick()
		q, back = &p.classes[i].queue, group == 1 && p.LIFO()
	}
	// The request is read in place, then dropped: taken out by value it
	// would be copied twice more on the way out.
	w := q.Front()
	if back {
		w = q.Back()
	}
	r, c := w.r, &p.classes[w.class]
	if back {
		q.PopBack()
	} else {
		q.PopFront()
	}
	c.queued--
	c.dispatched++
	p.waiting--
	return r, true
}

// pick returns the class to serve next and its group (0 transaction, 1
// browsing); some request must be waiting.
func (p *LifoPri) pick() (int32, int) {
	for g, members := range p.groups {
		best := int32(-1)
		var bestScore, bestUtility float64
		for _, i := range members {
			c := &p.classes[i]
			if c.queue.Len() == 0 {
				continue
			}
			score := float64(c.queue.Len()) * c.spec.Utility
			// Members are in configuration order, so strict comparisons
			// leave full ties to the class listed first.
			if best < 0 || score > bestScore || (score == bestScore && c.spec.Utility > bestUtility) {
				best, bestScore, bestUtility = i, score, c.spec.Utility
			}
		}
		if best >= 0 {
			return best, g
		}
	}
	panic("sched: LifoPri.pick with nothing waiting")
}

// Len returns the number of waiting requests.
func (p *LifoPri) Len() int { return p.waiting }

// SetUtilization feeds the utilization measured over the interval that
// just ended (see UtilizationMeter) into the hysteresis: browsing queues
// turn LIFO when u > Upper and FIFO again when u < Lower; values in
// between keep the current discipline. Requests already waiting are
// simply served in the new order. now is only recorded.
func (p *LifoPri) SetUtilization(u float64, now int64) {
	p.lastNow = max(p.lastNow, now)
	switch {
	case u > p.cfg.Upper:
		p.lifo = true
	case u < p.cfg.Lower:
		p.lifo = false
	}
}

// LIFO reports whether browsing queues are currently served newest
// first. It is always false outside ModeLifoPri.
func (p *LifoPri) LIFO() bool { return p.lifo && p.cfg.Mode == ModeLifoPri }

// Expire removes every request that at now has waited longer than
// QueueTimeout since its Enqueue, oldest first across all classes, and
// calls f with each after it is gone. Without a QueueTimeout it does
// nothing.
func (p *LifoPri) Expire(now int64, f func(Request)) {
	p.lastNow = max(p.lastNow, now)
	timeout := int64(p.cfg.QueueTimeout)
	if timeout <= 0 {
		return
	}
	for p.waiting > 0 {
		q := p.oldestQueue()
		if p.lastNow-q.Front().at <= timeout {
			return
		}
		w := q.PopFront()
		c := &p.classes[w.class]
		c.queued--
		c.expired++
		p.waiting--
		f(w.r)
	}
}

// NextExpiry is the earliest time at which Expire would remove a
// request; false when none can expire (nothing waits, or no
// QueueTimeout). It changes nothing.
func (p *LifoPri) NextExpiry() (int64, bool) {
	timeout := int64(p.cfg.QueueTimeout)
	if timeout <= 0 || p.waiting == 0 {
		return 0, false
	}
	return p.oldestQueue().Front().at + timeout + 1, true
}

// oldestQueue returns the non-empty queue whose front request was
// enqueued first (the class listed first on ties); some request must be
// waiting.
func (p *LifoPri) oldestQueue() *deque {
	if p.cfg.Mode == ModeSingleFIFO {
		return &p.single
	}
	var oldest *deque
	for i := range p.classes {
		q := &p.classes[i].queue
		if q.Len() > 0 && (oldest == nil || q.Front().at < oldest.Front().at) {
			oldest = q
		}
	}
	return oldest
}

// Snapshot returns every class's state, in configuration order. It
// changes nothing.
func (p *LifoPri) Snapshot() []ClassState {
	out := make([]ClassState, len(p.classes))
	lifo := p.LIFO()
	for i := range p.classes {
		c := &p.classes[i]
		out[i] = ClassState{
			Name:       c.spec.Name,
			Kind:       c.spec.Kind,
			Utility:    c.spec.Utility,
			Queued:     c.queued,
			Enqueued:   c.enqueued,
			Dispatched: c.dispatched,
			Refused:    c.refused,
			Expired:    c.expired,
			LIFO:       lifo && c.spec.Kind == Browsing,
		}
	}
	return out
}
