package frontend

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/internal/gather"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

// Config is everything the daemon needs. Zero values take the defaults
// documented on the flags (cmd/qsplice-frontend).
type Config struct {
	Link     string   // interface (afpacket) or TAP name
	LinkType string   // "afpacket" or "tap"
	MAC      wire.MAC // our MAC; zero: the interface's (afpacket) or a generated one (tap)
	VIPs     []netip.Addr
	Handoff  netip.Addr
	Ports    []uint16

	Control netip.AddrPort // UDP address for back-end control messages
	Admin   string         // HTTP address for /status and /metrics; "" disables
	// Pprof adds Go's profiler (/debug/pprof/) to the admin address: CPU
	// and allocation profiles of the live daemon, for performance work.
	Pprof bool
	// Key is the control protocol's master key (proto.LoadKey): each
	// back-end's key is derived from it (proto.DeriveKey).
	Key     []byte
	Capture string // pcap file of everything on the link (.pcapng: and the control datagrams); "" disables
	// Timeline is the file the handoff timelines go to, one JSON line
	// per connection (issue 11, frontend/timeline); "" disables.
	Timeline string
	// RxRing makes an afpacket link receive through a memory-mapped ring
	// (link.RingConfig); nil: recvmmsg.
	RxRing *link.RingConfig
	// Workers is the number of shards (issue 7, shard.go): each an engine
	// on an AF_PACKET socket of its own in one fanout group, on a
	// goroutine of its own. 0: one per CPU (runtime.NumCPU); a TAP link
	// takes one.
	Workers int
	// Gather lets shard 0's loop serve every shard while the loops are
	// busy for less than a share of one core (gather.go): fewer
	// wake-ups per frame. The zero value never gathers; the flag's
	// default is gather.Default.
	Gather gather.Config
	// RxHold bounds a receive-moderation hold (issue 7, moderate.go):
	// under a steady stream of pure ACKs a shard waits up to this long
	// before a pass, so that one pass forwards many. 0: the default
	// (2 ms); negative: never hold.
	RxHold time.Duration
	// RingWait says which of a shard loop's waits happen in an io_uring
	// that also sends the frames of the pass just ended, in the same
	// io_uring_enter (issue 7, link.Poller.SendWith): one system call per
	// pass where sendmmsg and the wait made two. RingWaitHolds (the
	// flag's default): the receive-moderation holds, nearly every pass
	// under bulk load; RingWaitAll: every wait (measured slower for short
	// connections, docs/results.md); "" or RingWaitOff: none. Only a
	// plain afpacket link (no -capture) can; others, and a kernel that
	// cannot, wait in epoll as before.
	RingWait string

	QueueCapacity     int
	KeepaliveInterval time.Duration // told to back-ends in RegisterAck
	SpliceRetry       time.Duration // resend an unacknowledged Splice after this
	// EarlyRequest sends a safe first request with its Splice instead of
	// at the shim's SpliceAck (controller.Config.EarlyRequest).
	EarlyRequest bool
	// SpliceAtSYN sends a request's Splice with C2's SYN, so the shim's
	// SpliceAck comes with the SYN-ACK (splice.FrontEndConfig.SpliceAtSYN).
	SpliceAtSYN bool
	// PoolC2 keeps handoff connections alive between client connections
	// (splice.FrontEndConfig.PoolC2): at most PoolPerBackend idle ones a
	// back-end, each for at most PoolIdle (0: the engine's defaults).
	PoolC2         bool
	PoolPerBackend int
	PoolIdle       time.Duration
	// PoolAckDelay is how long the client's last ACK of a pooled C2's
	// response waits for the next request on it to carry it
	// (splice.FrontEndConfig.PoolAckDelay; 0: the engine's 1 ms,
	// negative: sent at once).
	PoolAckDelay time.Duration
	// SYNAnswer answers clients' SYNs in the kernel, with a TC program on
	// an afpacket link's ingress (synanswer.go); off, or where the
	// program cannot load, the engines answer them.
	SYNAnswer bool
	// FastOpen asks, in the SYN of a request its Splice carries, for the
	// back-end kernel's TCP Fast Open cookie, so that the shim can put the
	// request in the SYN (splice.FrontEndConfig.FastOpen).
	FastOpen bool
	// FastOpenInSYN puts the cookie, once a SYN-ACK gave it, and the
	// request in that SYN itself, for a back-end's kernel to take from
	// the wire (splice.FrontEndConfig.FastOpenInSYN).
	FastOpenInSYN bool
	// ControlSocketOnly runs the control protocol through the control
	// socket only. By default, where it can, a Splice goes as a frame in
	// the pass's batch on the link and the back-ends' datagrams are read
	// off the link (linkcontrol.go).
	ControlSocketOnly bool

	Linger      time.Duration
	IdleTimeout time.Duration
	HeadTimeout time.Duration
	MaxHead     int
	CookieSeed  string // derives the SYN-cookie secret; random when empty

	// Bounded state (issue 9): the engine's limits, as in
	// splice.FrontEndConfig: 0 takes its default (200,000 flows, 2,000
	// per source, 4,096 ports per source, 30 s, 30 s), a negative value
	// turns the limit off.
	MaxFlows, MaxFlowsPerSource, MaxPortsPerSource int
	FlowLifetime, HalfCloseTimeout                 time.Duration
	// HandoffPortFirst..HandoffPortLast are the source ports of handoff
	// connections (C2) towards each back-end; 0, 0: 20000-60999.
	HandoffPortFirst, HandoffPortLast uint16
	// QueueTimeout bounds the wait in FIFO queues, and of the other
	// policies when theirs is 0 (10 s).
	QueueTimeout time.Duration

	// Listeners choose the scheduling policy per port ("credit", "fifo",
	// "lifo-pri", "eight-fifo" or "single-fifo"); a port without one
	// uses FIFO.
	Listeners []Listener
	// Credit configures the credit scheduler shared by credit listeners.
	Credit sched.CreditConfig
	// Lifo configures the class-based policies: their listeners classify
	// requests by path into its classes.
	Lifo controller.LifoConfig
	// Feedback configures the feedback listener policy (issue 10).
	Feedback controller.FeedbackConfig
	// Classify maps a Host header to a customer; nil sends everything to
	// the default customer.
	Classify func(host string) string
	// RetryAfter is the Retry-After of 503 answers (1 s).
	RetryAfter time.Duration
	// NormalSize is the response size range the reservations are sold
	// in; responses outside it are counted per customer. Max 0: no range.
	NormalSize struct{ Min, Max uint64 }
	// ConcurrencyCap bounds each back-end below what it registers (0: its own).
	ConcurrencyCap int
	// HandoffAhead is how many handoffs a back-end may have under way
	// beyond its capacity, so that setting one up does not take slot
	// time (controller/slots.go). 0: each handoff inside its slot.
	HandoffAhead int
	// SlotWait bounds how long a connection handed off ahead may wait for
	// its back-end slot before the client gets a 503 (5 s).
	SlotWait time.Duration
	// ConfigPath is re-read on SIGHUP when set.
	ConfigPath string
}

// Listener is one VIP port and its scheduling policy.
type Listener = controller.Listener

// LifoConfig configures the class-based listener policies.
type LifoConfig = controller.LifoConfig

// maxWorkers bounds -workers: a shard's fanout member index and its
// share of the handoff ports (splice/shard.go) stay meaningful.
const maxWorkers = 256

func (c *Config) setDefaults() {
	if c.LinkType == "" {
		c.LinkType = "afpacket"
	}
	if c.Workers == 0 {
		c.Workers = 1
		if c.LinkType == "afpacket" {
			c.Workers = runtime.NumCPU()
		}
	}
	if c.QueueCapacity == 0 {
		c.QueueCapacity = 1024
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = time.Second
	}
	if c.SpliceRetry == 0 {
		c.SpliceRetry = 250 * time.Millisecond
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = time.Second
	}
}

// moderation is the receive moderation of c.RxHold.
func (c *Config) moderation() moderation {
	m := defaultModeration
	switch {
	case c.RxHold < 0:
		m.MaxHold = 0
	case c.RxHold > 0:
		m.MaxHold = c.RxHold
	}
	return m
}

// The values of Config.RingWait.
const (
	RingWaitOff   = "off"
	RingWaitHolds = "holds"
	RingWaitAll   = "all"
)

func (c *Config) validate() error {
	var errs []error
	if err := c.Gather.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w (-gather)", err))
	}
	switch c.RingWait {
	case "", RingWaitOff, RingWaitHolds, RingWaitAll:
	default:
		errs = append(errs, fmt.Errorf("ring-wait: %q is none of off, holds, all (-ring-wait)", c.RingWait))
	}
	if c.Link == "" {
		errs = append(errs, errors.New("link: no interface given (-link)"))
	}
	if c.LinkType != "afpacket" && c.LinkType != "tap" {
		errs = append(errs, fmt.Errorf("link-type: %q is neither afpacket nor tap", c.LinkType))
	}
	if c.Workers < 1 || c.Workers > maxWorkers {
		errs = append(errs, fmt.Errorf("workers: %d is not in 1..%d (-workers)", c.Workers, maxWorkers))
	} else if c.Workers > 1 && c.LinkType != "afpacket" {
		errs = append(errs, fmt.Errorf("workers: %d workers need -link-type afpacket (a TAP link has one queue here)", c.Workers))
	}
	if len(c.VIPs) == 0 {
		errs = append(errs, errors.New("vip: no VIP given (-vip)"))
	}
	for _, v := range c.VIPs {
		if !v.Is4() {
			errs = append(errs, fmt.Errorf("vip: %v is not IPv4", v))
		}
	}
	if !c.Handoff.Is4() {
		errs = append(errs, errors.New("handoff: need an IPv4 handoff address (-handoff)"))
	}
	if len(c.Ports) == 0 {
		errs = append(errs, errors.New("ports: no listening port (-ports)"))
	}
	if !c.Control.IsValid() {
		errs = append(errs, errors.New("control: no control address (-control)"))
	}
	if err := proto.CheckKey(c.Key); err != nil {
		errs = append(errs, fmt.Errorf("key: control master key: %w (-key)", err))
	}
	return errors.Join(errs...)
}
