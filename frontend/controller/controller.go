package controller

import (
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/qsplice/qsplice/frontend/timeline"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

// Config is what the controller runs by. Zero values take the defaults
// named with them.
type Config struct {
	// Ports are the VIP ports. Listeners choose a port's scheduling
	// policy ("credit", "fifo", "lifo-pri", "eight-fifo", "single-fifo"
	// or "feedback"); a port without one uses FIFO.
	Ports     []uint16
	Listeners []Listener
	// QueueCapacity bounds the FIFO queue (1024).
	QueueCapacity int
	// QueueTimeout bounds how long a request waits in a FIFO queue, and
	// is the queue timeout of the credit and class-based policies when
	// theirs is 0 (10 s). Every queue has one: a request nobody serves
	// gets a 503 with Retry-After instead of holding its connection (and
	// its place) until the engine's idle timeout.
	QueueTimeout time.Duration
	// Credit configures the credit scheduler shared by credit listeners.
	Credit sched.CreditConfig
	// Lifo configures the class-based policies.
	Lifo LifoConfig
	// Feedback configures the feedback policy shared by feedback
	// listeners (issue 10).
	Feedback FeedbackConfig
	// Classify maps a Host header to a customer; nil sends everything to
	// the credit scheduler's default customer (or "default").
	Classify func(host string) string
	// RetryAfter is the Retry-After of 503 answers (1 s).
	RetryAfter time.Duration
	// NormalSize is the response size range the reservations are sold
	// in; responses outside it are counted per customer. Max 0: no range.
	NormalSize NormalSize
	// ConcurrencyCap bounds each back-end below what it registers (0: its
	// own figure).
	ConcurrencyCap int
	// HandoffAhead is how many handoffs a back-end may have under way
	// beyond its capacity (slots.go). 0: each handoff inside its slot.
	HandoffAhead int
	// SlotWait bounds how long a connection handed off ahead may wait
	// ready for its slot before the client gets a 503 (5 s).
	SlotWait time.Duration
	// KeepaliveInterval is told to back-ends in RegisterAck and drives
	// the liveness checks (1 s).
	KeepaliveInterval time.Duration
	// SpliceRetry is how long a Splice waits for its SpliceAck before it
	// is sent again (250 ms), at most SpliceTries times in all (8).
	SpliceRetry time.Duration
	SpliceTries int
	// EarlyRequest sends a safe first request (GET, HEAD, OPTIONS,
	// TRACE) with its Splice when its back-end has a slot free, instead
	// of at the shim's SpliceAck (issue 7, slots.go). Off by default
	// until a quiet measurement shows what it gains.
	EarlyRequest bool
	// LogLevel is the lowest level of the log records made (Info).
	LogLevel slog.Level

	// Control-protocol binding (issue 9, binding.go).
	//
	// RequestIDPrefix is the high 32 bits of every RequestID this
	// controller sends: drawn at random per start of the front-end by
	// the daemon, so that RequestIDs of different runs never meet.
	RequestIDPrefix uint32

	// Timelines (issue 11, timeline.go): every connection that ends puts
	// its handoff timeline in Output.Timelines.
	Timelines bool
}

// Listener is one VIP port and its scheduling policy.
type Listener struct {
	Port   uint16
	Policy string
	// QueueTimeout, for fifo and class-based listeners, bounds the wait
	// of their requests (such listeners then get queues of their own);
	// 0: the policy's (Config.QueueTimeout, LifoConfig.QueueTimeout).
	// Credit listeners share one scheduler and its
	// CreditConfig.QueueTimeout, so theirs must be 0.
	QueueTimeout time.Duration
}

// defaultQueueTimeout is Config.QueueTimeout's default.
const defaultQueueTimeout = 10 * time.Second

// NormalSize is a range of response sizes in bytes.
type NormalSize struct{ Min, Max uint64 }

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.QueueCapacity == 0 {
		c.QueueCapacity = 1024
	}
	def(&c.QueueTimeout, defaultQueueTimeout)
	def(&c.Credit.QueueTimeout, c.QueueTimeout)
	def(&c.Lifo.QueueTimeout, c.QueueTimeout)
	def(&c.RetryAfter, time.Second)
	def(&c.SlotWait, 5*time.Second)
	def(&c.KeepaliveInterval, time.Second)
	def(&c.SpliceRetry, 250*time.Millisecond)
	if c.SpliceTries <= 0 {
		c.SpliceTries = 8
	}
}

// Output collects what one call produced. The caller owns it, resets it
// between passes and acts on everything in it: sends Engine.Frames on the
// link, the Datagrams on the control socket, and logs the Logs.
type Output struct {
	// Engine is the engine's output: that of the caller's own calls
	// (Input, Tick) and that of the controller's. Its events are the
	// controller's input; see HandleEvents.
	Engine    splice.Output
	Datagrams []Datagram
	Logs      []LogRecord
	handled   int // Engine.Events given to the controller
	// splices hold the Splice messages of Datagrams, one request's each:
	// a copy, so that a flow closed in the same pass changes none.
	splices []proto.Splice

	// Timelines are the handoff timelines of the connections that ended
	// in this pass, with Config.Timelines (timeline.go).
	Timelines []timeline.Record
}

// Reset empties the output for the next pass.
func (o *Output) Reset() {
	o.Engine.Reset()
	clear(o.Datagrams)
	o.Datagrams = o.Datagrams[:0]
	o.Logs = o.Logs[:0]
	o.handled = 0
	o.splices = o.splices[:0]
	o.Timelines = o.Timelines[:0]
}

// Datagram is a control message to send. Msg is valid until the Output's
// Reset.
type Datagram struct {
	To  netip.AddrPort
	Msg proto.Message
	// MAC is To's link address when the controller knows it: a Splice
	// to a back-end whose control address is the address it registered
	// (and C2 goes to, at that MAC). The daemon may then send the
	// datagram as a frame of its own on the link, with the pass's frames
	// (frontend/linkcontrol.go); zero: through the control socket.
	MAC wire.MAC
}

// LogRecord is a log line for the caller's logger: Args are key-value
// pairs as log/slog takes them.
type LogRecord struct {
	Level slog.Level
	Msg   string
	Args  []any
}

// Controller schedules the front-end's requests; see the package doc.
type Controller struct {
	cfg   Config
	eng   Engine
	now   splice.Time // latest time passed in
	start splice.Time // when New ran, for uptime-like figures

	queues []*queueSet
	byPort map[uint16]*queueSet
	credit *sched.Credit // the credit queue's policy, if any
	lifo   *lifoControl  // shared by the class-based queues, if any
	// fb is the feedback listeners' policy and classifier, if any.
	fb *feedbackControl
	// treePath is where rewriteForTree builds a request's tree path.
	treePath []byte
	disp     *sched.Dispatcher

	backends map[uint32]*backend
	order    []*backend // by id, so that every walk is deterministic
	flows    map[splice.FlowID]*flowRec
	// flowsPeak is flows' largest size since it was last rebuilt
	// (shrinkFlows).
	flowsPeak int
	// spareRecs are records of flows gone, for the next ones
	// (requests.go).
	spareRecs []*flowRec
	// late are closed flows waiting for the Feedback of requests their
	// back-end had not reported (latefeedback.go), lateOrder when each
	// wait ends; lateServed and lateUnreported count the requests whose
	// Feedback came after the close and those it never did.
	late                       map[splice.FlowID]lateFlow
	lateOrder                  []lateDue
	lateServed, lateUnreported uint64
	splices                    spliceTimers
	custs                      map[string]*customerStats
	refunds                    uint64

	// Control-protocol binding (binding.go): the newest flow id the
	// engine reported, and the control messages refused by reason.
	lastFlow splice.FlowID
	refused  map[string]uint64
}

// New returns a controller that steers eng, starting at now.
func New(cfg Config, eng Engine, now splice.Time) (*Controller, error) {
	cfg.setDefaults()
	qs, err := buildQueues(&cfg, int64(now))
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	return &Controller{
		cfg: cfg, eng: eng, now: now, start: now,
		queues: qs.list, byPort: qs.byPort, credit: qs.credit, lifo: qs.lifo, fb: qs.feedback,
		disp:     sched.NewDispatcher(),
		backends: make(map[uint32]*backend),
		flows:    make(map[splice.FlowID]*flowRec),
		custs:    make(map[string]*customerStats),
	}, nil
}

// advance makes now the controller's time, unless it is earlier than a
// time already seen.
func (c *Controller) advance(now splice.Time) splice.Time {
	if now > c.now {
		c.now = now
	}
	return c.now
}

// Event handles one event the engine reported, then every event the
// controller's own calls into the engine added to out.Engine.Events. An
// event taken from out.Engine.Events is handed over with HandleEvents
// instead, which does not hand it over twice.
func (c *Controller) Event(ev splice.Event, now splice.Time, out *Output) {
	now = c.advance(now)
	c.event(ev, now, out)
	c.drain(now, out)
}

// HandleEvents hands every event in out.Engine.Events not handled yet to
// the controller, including those its calls into the engine add on the
// way. The caller runs it after each call it makes into the engine;
// Control, Tick and Reload run it themselves.
func (c *Controller) HandleEvents(now splice.Time, out *Output) {
	c.drain(c.advance(now), out)
}

func (c *Controller) drain(now splice.Time, out *Output) {
	for out.handled < len(out.Engine.Events) {
		ev := out.Engine.Events[out.handled]
		out.handled++
		c.event(ev, now, out)
	}
}

func (c *Controller) event(ev splice.Event, now splice.Time, out *Output) {
	c.noteFlow(ev.Flow)
	switch ev.Kind {
	case splice.EvRequest:
		c.request(ev, now, out)
	case splice.EvSplice:
		c.sendSplice(ev, now, out)
	case splice.EvSpliceTaken:
		c.spliceTaken(ev, now, out)
	case splice.EvClosed:
		c.closed(ev, now, out)
	case splice.EvAnswered:
		c.log(out, slog.LevelInfo, "answered by front-end", "flow", ev.Flow, "status", ev.Status, "reason", ev.Detail)
	}
}

// Control handles a control message from a back-end's shim at from. The
// controller reads msg during the call only and keeps nothing it refers
// to, so a caller may decode every datagram into the same message. A
// message that does not fit the back-end it comes from (binding.go) is
// counted and changes nothing else.
func (c *Controller) Control(from netip.AddrPort, msg proto.Message, now splice.Time, out *Output) {
	now = c.advance(now)
	if reason := c.bound(from, msg); reason != "" {
		c.refuse(reason, from, msg, out)
		return
	}
	switch m := msg.(type) {
	case *proto.Register:
		c.register(m, now, out)
	case *proto.Keepalive:
		c.keepalive(m, now, out)
	case *proto.SpliceAck:
		c.spliceAck(m, now, out)
	case *proto.Feedback:
		c.feedback(m, now, out)
	case *proto.Close:
		if c.logs(slog.LevelDebug) {
			c.log(out, slog.LevelDebug, "back-end closed", "request", m.RequestID, "backend", m.BackendID, "reason", m.Reason)
		}
	default:
		c.log(out, slog.LevelWarn, "unexpected control message", "type", msg.Type().String(), "from", from)
	}
	c.drain(now, out)
}

// Tick runs everything due at now: queue timeouts, the end of a
// utilization interval, Splice resends, liveness probes and deaths, and
// connections that waited ready too long.
func (c *Controller) Tick(now splice.Time, out *Output) {
	now = c.advance(now)
	c.expire(now, out)
	c.expireLate(now, out)
	c.lifoTick(now, out)
	c.resendSplices(now, out)
	c.checkBackends(now, out)
	c.slotWaits(now, out)
	c.dispatch(now, out)
	c.drain(now, out)
}

// NextDeadline is when Tick next has work; splice.Never when nothing is
// pending. Inputs in between may bring it forward.
func (c *Controller) NextDeadline() splice.Time {
	next := splice.Never
	at := func(t splice.Time) {
		if t < next {
			next = t
		}
	}
	for _, q := range c.queues {
		if t, ok := q.nextExpiry(); ok {
			at(t)
		}
	}
	if c.lifo != nil {
		at(splice.Time(c.lifo.started + c.lifo.interval))
	}
	at(c.splices.next(c))
	at(c.nextLate())
	for _, be := range c.order {
		at(be.nextCheck(c.cfg.KeepaliveInterval))
		if len(be.ready) > 0 {
			at(be.ready[0].since.Add(c.cfg.SlotWait))
		}
	}
	return next
}

// logs reports whether records at level are made.
// Flows is the number of connections the controller keeps a record of:
// queued, being handed off or in service. A driver that runs until the
// system is idle (replay) stops when it is 0 and the engine has nothing
// left to do; the controller's own deadlines then only keep back-ends
// under watch.
func (c *Controller) Flows() int { return len(c.flows) }

func (c *Controller) logs(level slog.Level) bool { return level >= c.cfg.LogLevel }

// log adds a record at level, if that level is logged. Callers of
// frequent records check logs first, so that building the arguments
// costs nothing when they are not wanted.
func (c *Controller) log(out *Output, level slog.Level, msg string, args ...any) {
	if level < c.cfg.LogLevel {
		return
	}
	out.Logs = append(out.Logs, LogRecord{Level: level, Msg: msg, Args: args})
}

func (o *Output) send(to netip.AddrPort, m proto.Message) {
	o.Datagrams = append(o.Datagrams, Datagram{To: to, Msg: m})
}

// sendSplice sends a copy of m to be, kept in o until Reset (growing
// the storage leaves the copies handed out before in the old array).
func (o *Output) sendSplice(be *backend, m *proto.Splice) {
	o.splices = append(o.splices, *m)
	dg := Datagram{To: be.ctl, Msg: &o.splices[len(o.splices)-1]}
	if be.ctl.Addr() == be.ip {
		dg.MAC = be.mac
	}
	o.Datagrams = append(o.Datagrams, dg)
}
