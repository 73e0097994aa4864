package sim

import (
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
)

// Result is what a run measured, over [Warmup, Duration].
type Result struct {
	Window    time.Duration // Duration - Warmup
	Customers []CustomerResult
	// Utilization is the busy fraction of all back-end slots: the
	// service time of the requests completed in the window over
	// Backends x Capacity x Window.
	Utilization float64
	// Samples are the controller's feedback state every
	// Config.SampleEvery, over the whole run (warm-up included).
	Samples []Sample
	// Handoffs counts the requests dispatched in the window by the
	// handoff connection they went on.
	Handoffs HandoffCounts
}

// CustomerResult is one customer's share of a Result. Requests are
// counted when they arrive (Offered, Admitted, Rejected at the door),
// are refused later (Rejected.Timeout) or complete (Served, response
// times) inside the window.
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
	OverCap   int // the customer is over its cap: 429
	QueueFull int // its queue is full: 503
	Timeout   int // waited past the queue timeout: 503 with Retry-After
	Unknown   int // no such customer and no default
	// Overload: refused by the feedback policy, at once for tree 0 or
	// after its periods in reserve: 503 with Retry-After.
	Overload int
	Other    int // any other refusal (a handoff that waited too long for its slot, ...)
}

// Total is the number of refused requests.
func (r Rejections) Total() int {
	return r.OverCap + r.QueueFull + r.Timeout + r.Unknown + r.Overload + r.Other
}

// maxTicksAtOneTime bounds how often the controller's deadline may come
// due at one instant without time moving on.
const maxTicksAtOneTime = 1000

// run is the state of one simulation.
type run struct {
	cfg      Config
	events   eventQueue
	ctrl     *controller.Controller
	out      controller.Output
	flows    []simFlow    // flow id - 1 -> its state
	inServ   []int        // per back-end (index id-1): requests it is serving
	arrivals []*rand.Rand // per customer: gaps between arrivals
	services []*rand.Rand // per customer: service times
	stats    []tally
	samples  []Sample
	held     []deferred // what a stall holds back (stall.go)
	pools    [][]int64  // per back-end (index id-1): when each pooled C2 went idle, oldest first (pool.go)
	handoffs HandoffCounts
	now      int64
	err      error
}

// Run simulates cfg and returns what it measured. It is deterministic:
// the same Config gives the same Result.
func Run(cfg Config) (Result, error) {
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	r := &run{cfg: cfg, inServ: make([]int, cfg.Backends), pools: make([][]int64, cfg.Backends)}
	ctrl, err := controller.New(r.schedulerConfig(), (*frontEnd)(r), 0)
	if err != nil {
		return Result{}, fmt.Errorf("sim: Scheduler: %w", err)
	}
	r.ctrl = ctrl
	r.stats = make([]tally, len(cfg.Customers))
	for i, c := range cfg.Customers {
		r.arrivals = append(r.arrivals, rand.New(rand.NewPCG(cfg.Seed, uint64(2*i))))
		r.services = append(r.services, rand.New(rand.NewPCG(cfg.Seed, uint64(2*i+1))))
		r.stats[i].Name, r.stats[i].Reservation = c.Name, c.Reservation
		if _, highest := c.rateAt(0); highest > 0 {
			first := r.gap(i)
			if c.Arrivals == Steady { // a random phase, so steady sources do not all coincide
				first = int64(r.arrivals[i].Float64() * float64(first))
			}
			r.schedule(event{at: first, kind: arrival, customer: int32(i)})
		}
	}
	if cfg.SampleEvery > 0 {
		r.schedule(event{at: cfg.SampleEvery.Nanoseconds(), kind: sample})
	}
	for _, s := range cfg.Stalls {
		r.schedule(event{at: (s.At + s.For).Nanoseconds(), kind: stallEnd})
	}
	for b := 1; b <= cfg.Backends; b++ {
		r.control(&proto.Register{BackendID: uint32(b), IP: backendIP(b), ControlPort: 7401,
			Capacity: uint16(cfg.Capacity), Incarnation: 1})
		r.schedule(event{at: r.keepaliveInterval().Nanoseconds(), kind: keepalive, backend: uint32(b)})
	}
	if err := r.loop(); err != nil {
		return Result{}, err
	}
	return r.result(), nil
}

// schedulerConfig is the controller's configuration: Config.Scheduler
// with a FIFO listener on Port when none is given, classifying by Host.
func (r *run) schedulerConfig() controller.Config {
	sc := r.cfg.Scheduler
	if len(sc.Ports) == 0 {
		sc.Ports = []uint16{Port}
	}
	if sc.Classify == nil {
		sc.Classify = func(host string) string { return host }
	}
	sc.LogLevel = slog.LevelError + 1 // nobody reads them
	return sc
}

func (r *run) keepaliveInterval() time.Duration {
	if iv := r.cfg.Scheduler.KeepaliveInterval; iv > 0 {
		return iv
	}
	return time.Second
}

func backendIP(b int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(b >> 8), byte(b)}) }

// loop runs the events and the controller's deadlines in time order, a
// deadline before an event at the same instant, until Duration.
func (r *run) loop() error {
	end := r.cfg.Duration.Nanoseconds()
	ticks, tickAt := 0, int64(-1)
	for r.err == nil {
		tEv := int64(math.MaxInt64)
		if r.events.len() > 0 {
			tEv = r.events.next()
		}
		tDl := r.stalledUntil(max(int64(r.ctrl.NextDeadline()), r.now))
		if min(tEv, tDl) > end {
			return nil
		}
		if tDl <= tEv {
			if tDl == tickAt {
				if ticks++; ticks > maxTicksAtOneTime {
					return fmt.Errorf("sim: the controller's deadline is stuck at %d ns", tDl)
				}
			} else {
				tickAt, ticks = tDl, 0
			}
			r.now = tDl
			r.out.Reset()
			r.ctrl.Tick(splice.Time(r.now), &r.out)
			r.after()
			continue
		}
		e := r.events.pop()
		r.now = e.at
		r.handle(e)
	}
	return r.err
}

func (r *run) schedule(e event) { r.events.push(e) }

// inWindow says whether an instant counts in the statistics.
func (r *run) inWindow(t int64) bool { return t >= r.cfg.Warmup.Nanoseconds() }

// gap draws the time to customer i's next arrival.
func (r *run) gap(i int) int64 {
	c := &r.cfg.Customers[i]
	_, rate := c.rateAt(0)
	mean := 1e9 / rate
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

func (r *run) handle(e event) {
	switch e.kind {
	case arrival:
		r.arrive(e.customer)
	case handoffUp:
		r.c2Up(e.flow)
	case spliceAcked:
		r.control(&proto.SpliceAck{RequestID: uint64(e.flow), BackendID: r.flow(e.flow).backend, OK: true})
	case served:
		r.serve(e.flow)
	case feedback:
		f := r.flow(e.flow)
		r.control(&proto.Feedback{BackendID: f.backend, RequestID: uint64(e.flow), ServiceTime: e.service,
			ResponseBytes: f.bytes, Concurrency: uint16(r.inServ[f.backend-1])})
		// The response is over and the connection closes.
		r.event(splice.Event{Kind: splice.EvClosed, Flow: e.flow, Backend: f.backend, Reason: splice.CloseFIN})
		r.pool(f)
	case spliceTaken:
		// The engine reports it while the flow is open; the controller
		// may have had the Feedback first, and takes that for the ack.
		if f := r.flow(e.flow); f.state == flowSent || f.state == flowServed {
			r.event(splice.Event{Kind: splice.EvSpliceTaken, Flow: e.flow, Backend: f.backend})
		}
	case keepalive:
		r.control(&proto.Keepalive{BackendID: e.backend, Incarnation: 1, Concurrency: uint16(r.inServ[e.backend-1])})
		r.schedule(event{at: r.now + r.keepaliveInterval().Nanoseconds(), kind: keepalive, backend: e.backend})
	case stallEnd:
		r.endStall()
	case carriedSent:
		if f := r.flow(e.flow); f.state == flowConnecting || f.state == flowSpliceWait {
			r.sendRequest(e.flow, f, r.now)
		}
	case sample:
		r.takeSample()
		r.schedule(event{at: r.now + r.cfg.SampleEvery.Nanoseconds(), kind: sample})
	}
}

// arrive offers customer i's next request to the controller, as the
// engine reports a parsed request head.
func (r *run) arrive(i int32) {
	c := &r.cfg.Customers[i]
	if len(c.Steps) > 0 {
		rate, highest := c.rateAt(time.Duration(r.now))
		if r.arrivals[i].Float64()*highest >= rate { // thinned out
			r.schedule(event{at: r.now + r.gap(int(i)), kind: arrival, customer: i})
			return
		}
	}
	r.flows = append(r.flows, simFlow{customer: i, arrival: r.now, state: flowQueued})
	id := splice.FlowID(len(r.flows))
	host := c.Host
	if host == "" {
		host = c.Name
	}
	r.event(splice.Event{Kind: splice.EvRequest, Flow: id,
		Request: &splice.RequestInfo{Method: "GET", Host: host, Path: c.Path, Port: Port, Client: clientAddr(id)}})
	if f := r.flow(id); r.inWindow(r.now) {
		st := &r.stats[i]
		st.Offered++
		if !f.refusedAtDoor {
			st.Admitted++
		}
	}
	r.schedule(event{at: r.now + r.gap(int(i)), kind: arrival, customer: i})
}

// serve ends a request at its back-end: the shim reports it after the
// control delay.
func (r *run) serve(id splice.FlowID) {
	f := r.flow(id)
	if f.state != flowSent {
		return // reset meanwhile
	}
	f.state = flowServed
	r.inServ[f.backend-1]--
	if r.inWindow(r.now) {
		st := &r.stats[f.customer]
		st.Served++
		st.responses = append(st.responses, r.now-f.arrival)
		st.busy += min(f.service, r.now-r.cfg.Warmup.Nanoseconds())
	}
	r.schedule(event{at: r.now + r.cfg.ControlDelay.Nanoseconds(), kind: feedback, flow: id, service: time.Duration(f.service)})
}

// event hands the controller an event of the engine's.
func (r *run) event(ev splice.Event) {
	if r.holdForStall(ev, nil) {
		return
	}
	r.out.Reset()
	r.ctrl.Event(ev, splice.Time(r.now), &r.out)
	r.after()
}

// control hands the controller a shim's message, from that shim's
// control address (the controller checks it).
func (r *run) control(m proto.Message) {
	if r.holdForStall(splice.Event{}, m) {
		return
	}
	r.out.Reset()
	r.ctrl.Control(netip.AddrPortFrom(backendIP(int(proto.BackendOf(m))), 7401), m, splice.Time(r.now), &r.out)
	r.after()
}

// after delivers the controller's datagrams to the shims: a Splice is
// confirmed after the control round trip, or once the back-end's SYN-ACK
// crossed the shim if that is later (atsyn.go).
func (r *run) after() {
	for _, d := range r.out.Datagrams {
		if s, ok := d.Msg.(*proto.Splice); ok {
			id := splice.FlowID(s.RequestID)
			kind := spliceAcked
			if s.Reuse.Early {
				kind = spliceTaken // no SpliceAck: the server's ACK of the request stands for it (pool.go)
			}
			r.schedule(event{at: r.spliceAckAt(id, r.now), kind: kind, flow: id})
		}
	}
}

func (r *run) result() Result {
	window := r.cfg.Duration - r.cfg.Warmup
	res := Result{Window: window, Samples: r.samples, Handoffs: r.handoffs}
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
