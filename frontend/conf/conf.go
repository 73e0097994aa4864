package conf

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice/wire"
)

// File is a parsed and validated front-end configuration file. Every
// optional field already holds its default. Build one with Parse or Load:
// Classify and Check rely on indexes those build.
type File struct {
	Name string // the file name given to Parse or Load, used in messages

	Link      Link
	Handoff   netip.Addr     // IPv4 source address of handoff connections (C2)
	Admin     netip.AddrPort // HTTP /status and /metrics; zero: disabled
	Control   Control
	Capture   string // pcap file of every frame on the link; "": none
	TCP       TCP
	Backends  Backends
	Scheduler Scheduler
	Listeners []Listener
	Customers []Customer // in file order; an implicit default customer last
	// Classes are the URL classes of lifo-pri, eight-fifo and
	// single-fifo listeners, in file order; sched.DefaultClasses() when
	// the file has none. Zero queue capacities are already resolved.
	Classes []sched.Class
	Lifo    Lifo
	// Feedback configures feedback listeners (issue 10).
	Feedback Feedback

	lines    map[string]int // key path -> line, for Check's warnings
	exact    map[string]string
	wildcard map[string]string // "a.example" for "*.a.example"
}

// LinkType says how the front-end reaches the network.
type LinkType string

const (
	// LinkAFPacket is a bump on a kernel interface through AF_PACKET.
	LinkAFPacket LinkType = "afpacket"
	// LinkTAP is a pure userspace host on a TAP device.
	LinkTAP LinkType = "tap"
)

// Link is the interface the front-end owns its addresses on.
type Link struct {
	Interface string
	Type      LinkType
	MAC       wire.MAC // zero: the interface's (afpacket) or a generated one (tap)
}

// Control is where back-ends register and report, over UDP.
type Control struct {
	Listen  netip.AddrPort
	KeyFile string // read with proto.LoadKey; Load makes it absolute
}

// TCP holds the client-facing TCP endpoint's limits.
type TCP struct {
	Linger      time.Duration // a closed connection is remembered this long
	IdleTimeout time.Duration // a spliced connection silent this long is reset
	HeadTimeout time.Duration // the request head must arrive within this (else 408)
	MaxHead     int           // request head limit in bytes (else 431)
	CookieSeed  string        // derives the SYN-cookie secret; "": random per start

	// Bounded state (splice/limits.go); 0 turns a count limit off.
	MaxFlows          int           // flows of every state
	MaxFlowsPerSource int           // flows of one client address reading their head or being answered
	MaxPortsPerSource int           // handoff ports held for one client address
	FlowLifetime      time.Duration // whole life of a flow not handed off (> HeadTimeout)
	HalfCloseTimeout  time.Duration // client silence after the back-end's FIN before both are reset
}

// Backends holds how the front-end treats its back-ends.
type Backends struct {
	// ConcurrencyCap bounds the requests run at once on one back-end, below
	// what the back-end registers; 0: the back-end's own figure.
	ConcurrencyCap int
	// Expected is how many back-ends the cluster normally has; Check uses
	// it to estimate capacity. 0: unknown.
	Expected          int
	KeepaliveInterval time.Duration // told to back-ends when they register
	SpliceRetry       time.Duration // resend an unacknowledged Splice after this
	// HandoffAhead is how many handoffs a back-end may have under way
	// beyond its concurrency, so a slot does not idle while the next
	// connection is set up; 0: each handoff inside its slot.
	HandoffAhead int
}

// SizeRange is an inclusive range of response sizes in bytes.
type SizeRange struct{ Min, Max int }

// Contains reports whether size is in the range.
func (r SizeRange) Contains(size int) bool { return size >= r.Min && size <= r.Max }

// Scheduler holds the credit scheduler's parameters.
type Scheduler struct {
	Cycle              time.Duration // how often credit is handed out
	TypicalServiceTime time.Duration // cost of one normal-sized request
	NormalSize         SizeRange     // the response sizes reservations assume; responses outside are counted per customer
	BalanceLimit       time.Duration // most unused credit a customer may keep
	DebtLimit          time.Duration // most a customer may overdraw
	QueueTimeout       time.Duration // a request waiting longer gets 503
	CapWindow          time.Duration // customers' caps are averaged over this
	QueueCapacity      int           // default per-customer queue length
	RetryAfter         time.Duration // Retry-After in 503 answers; 0: header omitted
	DefaultCustomer    string        // serves requests whose Host matches no customer
}

// Policy names a listener's queueing discipline.
type Policy string

const (
	PolicyCredit Policy = "credit" // per-customer reservations, caps and weights
	PolicyFIFO   Policy = "fifo"   // one queue, first come first served (baseline)
)

// Listener is one VIP:port the front-end accepts connections on.
type Listener struct {
	VIP    netip.Addr
	Port   uint16
	Policy Policy
	// QueueTimeout bounds how long this listener's requests wait (fifo and
	// class-based policies only); 0: the policy's own
	// (DefaultFIFOQueueTimeout, Lifo.QueueTimeout).
	QueueTimeout time.Duration
}

// Customer is a hosted site (or group of sites) with its share of the
// cluster.
type Customer struct {
	Name string
	// Domains are lower-case host names without a trailing dot; "*.x"
	// stands for exactly one label in front of x.
	Domains     []string
	Reservation float64 // guaranteed req/s of normal-sized requests
	Cap         float64 // most req/s served; 0: no cap
	Weight      float64 // share of spare capacity
	// QueueCapacity is the customer's queue length, already resolved:
	// Scheduler.QueueCapacity when the file leaves it 0.
	QueueCapacity int
	// Implicit is set on the default customer when the file does not list
	// it: it has no domains, no reservation, no cap and weight 1.
	Implicit bool
}

// Defaults for the optional keys; the package doc lists them too.
const (
	DefaultLinkType          = LinkAFPacket
	DefaultLinger            = 5 * time.Second
	DefaultIdleTimeout       = 15 * time.Minute
	DefaultHeadTimeout       = 10 * time.Second
	DefaultMaxHead           = 8 << 10
	DefaultMaxFlows          = 200_000
	DefaultMaxFlowsPerSource = 2_000
	DefaultMaxPortsPerSource = 4_096
	DefaultFlowLifetime      = 30 * time.Second
	DefaultHalfCloseTimeout  = 30 * time.Second
	DefaultFIFOQueueTimeout  = 10 * time.Second
	DefaultLifoQueueTimeout  = 10 * time.Second
	DefaultKeepaliveInterval = time.Second
	DefaultSpliceRetry       = 250 * time.Millisecond
	DefaultHandoffAhead      = 2
	DefaultCycle             = 10 * time.Millisecond
	DefaultTypicalService    = 20 * time.Millisecond
	DefaultNormalSizeMax     = 16 << 10
	DefaultBalanceLimit      = 100 * time.Millisecond
	DefaultDebtLimit         = time.Second
	DefaultQueueTimeout      = 2 * time.Second
	DefaultQueueCapacity     = 1000
	DefaultCapWindow         = time.Second
	DefaultRetryAfter        = time.Second
	DefaultCustomerName      = "default"
	DefaultPolicy            = PolicyCredit
	DefaultWeight            = 1.0
)

// Limits enforced on sizes; MaxHead cannot exceed the engine's 64 KiB
// receive buffer.
const (
	minMaxHead = 512
	maxMaxHead = 64 << 10
	// maxCountLimit bounds tcp.max_flows and the per-source limits: ten
	// million flows would be 6 GiB with short heads, 100 near the limit.
	maxCountLimit = 10_000_000
)

// Error is one problem found by Parse, located by line and key path.
// Parse joins all of them with errors.Join.
type Error struct {
	File    string
	Line    int
	Path    string // e.g. "customers[1].reservation"; "" for the whole file
	Message string
}

func (e *Error) Error() string { return format(e.File, e.Line, e.Path, e.Message) }

// Warning is something legal but probably not meant, found by Check.
type Warning struct {
	File    string
	Line    int
	Path    string
	Message string
}

func (w Warning) String() string { return format(w.File, w.Line, w.Path, w.Message) }

func format(file string, line int, path, msg string) string {
	loc := file
	if line > 0 { // 0: a YAML syntax error that names no line
		loc += ":" + strconv.Itoa(line)
	}
	if path == "" {
		return loc + ": " + msg
	}
	return loc + ": " + path + ": " + msg
}
