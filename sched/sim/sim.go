package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/qsplice/qsplice/sched"
)

// Result is what a run measured, over [Warmup, Duration].
type Result struct {
	Window    time.Duration // Duration - Warmup
	Customers []CustomerResult
	// Utilization is the busy fraction of all back-end slots: the
	// service time of the requests completed in the window over
	// Backends x Capacity x Window.
	Utilization float64
}

// CustomerResult is one customer's share of a Result. Requests are
// counted when they arrive (Offered, Admitted, Rejected) or complete
// (Served, response times) inside the window.
type CustomerResult struct {
	Name                    string
	Offered, Admitted       int
	Served                  int
	Rejected                Rejections
	OfferedRate, ServedRate float64 // requests per second
	// Work is the back-end time spent on the requests served, per second
	// of the window: 0.5 means half a request slot busy on average.
	// Divided by the typical service time it is the rate of normal-sized
	// requests served, the unit reservations are sold in.
	Work        float64
	Reservation float64 // copied from the Customer
	// Attainment is ServedRate over what the customer was entitled to:
	// its reservation, or what it offered if that was less. 1 means it
	// got its due; 0 when it has no reservation.
	Attainment             float64
	MeanResponse, P50, P99 time.Duration // arrival to completion
}

// tally is a customer's result while the run goes on.
type tally struct {
	CustomerResult
	responses []int64 // ns, of the requests served in the window
	busy      int64   // ns of back-end time they took within the window
}

// Rejections counts refused requests by reason.
type Rejections struct {
	OverCap   int // sched.ErrOverCap: 429
	QueueFull int // sched.ErrQueueFull: 503
	Timeout   int // removed by Expire: 503 with Retry-After
	Unknown   int // sched.ErrUnknownCustomer
	Other     int // any other Enqueue error
}

// Total is the number of refused requests.
func (r Rejections) Total() int { return r.OverCap + r.QueueFull + r.Timeout + r.Unknown + r.Other }

// run is the state of one simulation.
type run struct {
	cfg       Config
	events    eventQueue
	disp      *sched.Dispatcher
	completer Completer
	expirer   Expirer
	arrivals  []*rand.Rand // per customer: gaps between arrivals
	services  []*rand.Rand // per customer: service times
	origin    []int32      // RequestID -> customer index; ids count from 0
	stats     []tally
	now       int64
}

// Run simulates cfg and returns what it measured. It is deterministic:
// the same Config (and a Policy in the same initial state) gives the same
// Result.
func Run(cfg Config) (Result, error) {
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	r := &run{cfg: cfg, disp: sched.NewDispatcher()}
	r.completer, _ = cfg.Policy.(Completer)
	r.expirer, _ = cfg.Policy.(Expirer)
	for b := range cfg.Backends {
		r.disp.AddBackend(sched.BackendID(b+1), cfg.Capacity, nil)
	}
	r.stats = make([]tally, len(cfg.Customers))
	for i, c := range cfg.Customers {
		r.arrivals = append(r.arrivals, rand.New(rand.NewPCG(cfg.Seed, uint64(2*i))))
		r.services = append(r.services, rand.New(rand.NewPCG(cfg.Seed, uint64(2*i+1))))
		r.stats[i].Name, r.stats[i].Reservation = c.Name, c.Reservation
		if c.Rate > 0 {
			first := r.gap(i)
			if c.Arrivals == Steady { // a random phase, so steady sources do not all coincide
				first = int64(r.arrivals[i].Float64() * float64(first))
			}
			r.schedule(event{at: first, kind: arrival, customer: int32(i)})
		}
	}
	end := cfg.Duration.Nanoseconds()
	for r.events.len() > 0 {
		e := r.events.pop()
		if e.at > end {
			break
		}
		r.now = e.at
		switch e.kind {
		case arrival:
			r.arrive(e.customer)
		case completion:
			r.complete(e)
		}
		r.expire()
		if err := r.dispatch(); err != nil {
			return Result{}, err
		}
	}
	return r.result(), nil
}

func (r *run) schedule(e event) { r.events.push(e) }

// inWindow says whether an instant counts in the statistics.
func (r *run) inWindow(t int64) bool { return t >= r.cfg.Warmup.Nanoseconds() }

// gap draws the time to customer i's next arrival.
func (r *run) gap(i int) int64 {
	c := &r.cfg.Customers[i]
	mean := 1e9 / c.Rate
	if c.Arrivals == Poisson {
		return max(1, int64(r.arrivals[i].ExpFloat64()*mean))
	}
	return max(1, int64(mean))
}

// serviceTime draws how long customer i's request takes to serve.
func (r *run) serviceTime(i int32) int64 {
	c := &r.cfg.Customers[i]
	if c.Distribution == Constant {
		return c.Service.Nanoseconds()
	}
	return int64(r.services[i].ExpFloat64() * float64(c.Service.Nanoseconds()))
}

func (r *run) arrive(i int32) {
	c := &r.cfg.Customers[i]
	st := &r.stats[i]
	id := sched.RequestID(len(r.origin))
	r.origin = append(r.origin, i)
	req := sched.Request{ID: id, Customer: c.Name, Host: c.Host, Path: c.Path, Port: Port, Arrival: r.now}
	err := r.cfg.Policy.Enqueue(req, r.now)
	if r.inWindow(r.now) {
		st.Offered++
		switch {
		case err == nil:
			st.Admitted++
		case errors.Is(err, sched.ErrOverCap):
			st.Rejected.OverCap++
		case errors.Is(err, sched.ErrQueueFull):
			st.Rejected.QueueFull++
		case errors.Is(err, sched.ErrUnknownCustomer):
			st.Rejected.Unknown++
		default:
			st.Rejected.Other++
		}
	}
	r.schedule(event{at: r.now + r.gap(int(i)), kind: arrival, customer: i})
}

func (r *run) complete(e event) {
	r.disp.Done(e.backend)
	if r.completer != nil {
		r.completer.Complete(e.request.Customer, time.Duration(e.service))
	}
	if !r.inWindow(r.now) {
		return
	}
	st := &r.stats[r.origin[e.request.ID]]
	st.Served++
	st.responses = append(st.responses, r.now-e.request.Arrival)
	st.busy += min(e.service, r.now-r.cfg.Warmup.Nanoseconds())
}

func (r *run) expire() {
	if r.expirer == nil {
		return
	}
	r.expirer.Expire(r.now, func(req sched.Request) {
		if r.inWindow(r.now) {
			r.stats[r.origin[req.ID]].Rejected.Timeout++
		}
	})
}

// dispatch starts waiting requests while some back-end has room.
func (r *run) dispatch() error {
	for r.cfg.Policy.Len() > 0 {
		b, ok := r.disp.Pick(Port)
		if !ok {
			return nil
		}
		req, ok := r.cfg.Policy.Next(r.now)
		if !ok {
			return nil // a policy may hold requests back
		}
		if int(req.ID) >= len(r.origin) {
			return errors.New("sim: the policy returned a request it was never given")
		}
		r.disp.Start(b)
		service := r.serviceTime(r.origin[req.ID])
		r.schedule(event{at: r.now + service, kind: completion, backend: b, request: req, service: service})
	}
	return nil
}

func (r *run) result() Result {
	window := r.cfg.Duration - r.cfg.Warmup
	res := Result{Window: window}
	var busy int64
	for i := range r.stats {
		st := r.stats[i].CustomerResult
		st.OfferedRate = float64(st.Offered) / window.Seconds()
		st.ServedRate = float64(st.Served) / window.Seconds()
		if want := min(st.Reservation, st.OfferedRate); want > 0 {
			st.Attainment = st.ServedRate / want
		}
		st.MeanResponse, st.P50, st.P99 = summarize(r.stats[i].responses)
		st.Work = float64(r.stats[i].busy) / float64(window.Nanoseconds())
		busy += r.stats[i].busy
		res.Customers = append(res.Customers, st)
	}
	slots := float64(r.cfg.Backends * r.cfg.Capacity)
	res.Utilization = float64(busy) / (slots * float64(window.Nanoseconds()))
	return res
}

// summarize returns the mean, median and 99th percentile (nearest rank).
func summarize(ns []int64) (mean, p50, p99 time.Duration) {
	if len(ns) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ns)
	var sum float64
	for _, v := range ns {
		sum += float64(v)
	}
	rank := func(p float64) time.Duration {
		return time.Duration(ns[max(0, int(math.Ceil(p*float64(len(ns))))-1)])
	}
	return time.Duration(sum / float64(len(ns))), rank(0.50), rank(0.99)
}
