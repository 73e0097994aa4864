package splice

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
	"unsafe"

	"github.com/qsplice/qsplice/internal/queue"
	"github.com/qsplice/qsplice/splice/httphead"
	"github.com/qsplice/qsplice/splice/wire"
)

// FrontEndConfig configures the front-end engine. Zero durations and sizes
// take the defaults listed with them.
type FrontEndConfig struct {
	MAC wire.MAC // our link address, answered in ARP for every owned address
	// ControlAddr is the address of the host kernel's control socket,
	// and ControlMAC the MAC of the kernel's interface that has it: a
	// datagram for it on the link is handed to the caller
	// (Output.Control, fe_control.go) instead of being left to the
	// kernel. Zero: none is.
	ControlAddr netip.AddrPort
	ControlMAC  wire.MAC
	VIPs        []netip.Addr // client-facing addresses
	Ports       []uint16     // listening ports on every VIP
	HandoffAddr netip.Addr   // source address of handoff connections (C2)
	// HandoffPortFirst..HandoffPortLast is the C2 source port range
	// (default 20000..60999).
	HandoffPortFirst, HandoffPortLast uint16
	// CookieSecret keys the SYN cookies: each 64-s epoch's key is derived
	// from it and the epoch number (cookie.go).
	CookieSecret [32]byte

	MSS            uint16        // MSS we advertise to clients (1460)
	WScale         int           // our window scale when the client offers one (7)
	RecvBuffer     int           // request bytes buffered before the handoff (64 KiB)
	MaxHead        int           // request head limit -> 431 (8 KiB)
	HeadTimeout    time.Duration // client must finish its head within (10 s) -> 408
	HandoffTimeout time.Duration // C2 SYN retransmission base (1 s), 3 tries
	RTOMin         time.Duration // retransmission timeout for what we send (200 ms)
	MaxRetries     int           // retransmissions before giving up (6)
	Linger         time.Duration // keep a closed flow for late segments (5 s)
	IdleTimeout    time.Duration // spliced flow with no client packet (15 min)
	// RefuseWait bounds how long a refused follow-up request waits for
	// the previous response to end before the connection is reset
	// instead of answered (10 s, counted from the client's last
	// progress; see fe_refuse.go).
	RefuseWait time.Duration
	HoldFrames int // client frames held while C2 is set up (16)
	// StormLimit duplicate pure ACKs from a client within StormWindow
	// mean an ACK storm: both ends are reset (10000 per 1 s).
	StormLimit  int
	StormWindow time.Duration

	// SYN cookies (cookie.go): RSTRate bounds the RSTs sent per second
	// to segments with no connection (a bad cookie, a closed port), in
	// bursts of at most a tenth of a second's worth (1000).
	RSTRate int

	// Bounded state (issue 9, limits.go). A negative count or duration
	// turns that limit off.
	//
	// MaxFlows bounds the flows of every state (200,000): when it is
	// reached the oldest flow still reading its head makes room.
	// MaxFlowsPerSource bounds those of one client address reading their
	// head or being answered before any handoff (2,000). Beyond either a
	// SYN is dropped and a cookie ACK reset.
	MaxFlows, MaxFlowsPerSource int
	// MaxPortsPerSource bounds the handoff ports held for one client
	// address (4,096): Dispatch then fails with ErrSourcePorts.
	MaxPortsPerSource int
	// FlowLifetime bounds the life of a flow not handed off, its answer
	// and linger included (30 s): then it is reset and forgotten.
	FlowLifetime time.Duration
	// HalfCloseTimeout: after the back-end's FIN, a client silent this
	// long is reset on both sides and its handoff port freed (30 s).
	HalfCloseTimeout time.Duration

	// TCP validation (fe_validate.go): ChallengeACKLimit bounds the
	// challenge ACKs (and resets of stale C2 tuples) the engine sends a
	// second across all flows, each second's budget drawn between half and
	// one and a half times it (1000; negative: none at all). Each flow
	// also answers at most once per 500 ms.
	ChallengeACKLimit int

	// RequestAckDelay is how long the ACK of a request head that came
	// whole in one segment may wait for the response to carry it
	// (fe_ackdelay.go; 40 ms; negative: ACK at once).
	RequestAckDelay time.Duration

	// Sharding (issue 7, shard.go): this engine is shard Shard of Shards
	// (0 or 1: not sharded). It picks only handoff ports whose C2 replies
	// the fanout group hands its own socket, and FlowIDs congruent to
	// Shard modulo Shards.
	Shard, Shards int

	// SpliceAtSYN sends a request's Splice with C2's SYN rather than
	// after its SYN-ACK, when the first request is buffered whole and not
	// rewritten (issue 7, fe_atsyn.go): the shim completes it from the
	// SYN-ACK and acknowledges it as that passes, so the SpliceAck comes
	// with the SYN-ACK instead of a round trip later.
	SpliceAtSYN bool

	// FastOpen asks, in the C2 SYN of a request its Splice carries, for a
	// TCP Fast Open cookie (RFC 7413): the sign for the shim to put the
	// request in the SYN when the back-end's kernel gave it a cookie, and
	// the way it gets one (shim_fastopen.go). A SYN-ACK that acknowledges
	// the request is then taken as one that acknowledges the SYN.
	FastOpen bool
	// FastOpenInSYN puts the cookie and the request in that SYN itself
	// once a SYN-ACK of the back-end's kernel gave the engine a cookie
	// (it learns them as the shim does): the shim then changes nothing,
	// and a shim running the kernel's SYN fast path has its kernel take
	// the SYN from the wire without reading it (shim_fastopen.go).
	FastOpenInSYN bool

	// LinkAnswersSYNs says the link answers clients' SYNs itself: the
	// daemon set a TC program on its ingress that sends the SYN-ACK this
	// engine would send (splice/link/synanswer.go), so that the SYN-ACK
	// does not wait for the engine's thread to wake. The engine still
	// sees every SYN (AF_PACKET hands a frame to its sockets before tc
	// ingress runs) and does everything but send the SYN-ACK for those
	// the program answers, which it knows by the program's rule
	// (fe_linksyn.go). Replay and the simulator leave it off.
	LinkAnswersSYNs bool

	// PoolC2 keeps a handoff connection whose client connection ended
	// cleanly for the next request to its back-end (fe_pool.go): at
	// most PoolPerBackend idle ones a back-end (64), each for at most
	// PoolIdle (30 s: keep it below the servers' keep-alive timeout).
	PoolC2         bool
	PoolPerBackend int
	PoolIdle       time.Duration
	// PoolFINWait is how long a client's FIN waits for the Feedback of
	// the response before it (20 ms): then C2 closes with it.
	PoolFINWait time.Duration
	// PoolCloseWait is how long a client that asked to close, and whose
	// response could not say close (the server announced no
	// keep-alive), may stay quiet before the front-end closes its side
	// (1 s; fe_pool.go scheduleClose).
	PoolCloseWait time.Duration
	// PoolAckDelay is how long the client's last ACK of a pooled C2's
	// response may wait for the next request on it to carry it (1 ms;
	// negative: sent at once). See fe_pool.go oweAck.
	PoolAckDelay time.Duration

	// Timelines (issue 11, timeline.go) makes the engine remember when
	// SYNs arrived, so that a flow's timeline starts at its SYN; the
	// other steps are stamped whether it is set or not.
	Timelines bool
}

// WithDefaults returns c with every zero field set to its default, as
// NewFrontEnd runs it (for status pages that show the limits in force).
func (c FrontEndConfig) WithDefaults() FrontEndConfig {
	c.setDefaults()
	return c
}

func (c *FrontEndConfig) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.HandoffPortFirst == 0 {
		c.HandoffPortFirst, c.HandoffPortLast = 20000, 60999
	}
	if c.MSS == 0 {
		c.MSS = 1460
	}
	if c.WScale == 0 {
		c.WScale = 7
	}
	if c.RecvBuffer == 0 {
		c.RecvBuffer = 64 << 10
	}
	if c.MaxHead == 0 {
		c.MaxHead = 8 << 10
	}
	def(&c.HeadTimeout, 10*time.Second)
	def(&c.HandoffTimeout, time.Second)
	def(&c.RTOMin, 200*time.Millisecond)
	def(&c.Linger, 5*time.Second)
	def(&c.IdleTimeout, 15*time.Minute)
	def(&c.RefuseWait, 10*time.Second)
	if c.MaxRetries == 0 {
		c.MaxRetries = 6
	}
	if c.HoldFrames == 0 {
		c.HoldFrames = 16
	}
	if c.StormLimit == 0 {
		c.StormLimit = defaultStormLimit
	}
	def(&c.StormWindow, defaultStormWindow)
	if c.RSTRate == 0 {
		c.RSTRate = 1000
	}
	if c.MaxFlows == 0 {
		c.MaxFlows = defaultMaxFlows
	}
	if c.MaxFlowsPerSource == 0 {
		c.MaxFlowsPerSource = defaultMaxFlowsPerSource
	}
	if c.MaxPortsPerSource == 0 {
		c.MaxPortsPerSource = defaultMaxPortsPerSource
	}
	def(&c.FlowLifetime, 30*time.Second)
	def(&c.HalfCloseTimeout, 30*time.Second)
	def(&c.RequestAckDelay, defaultRequestAckDelay)
	def(&c.PoolIdle, 30*time.Second)
	def(&c.PoolFINWait, 20*time.Millisecond)
	def(&c.PoolCloseWait, time.Second)
	def(&c.PoolAckDelay, time.Millisecond)
	if c.PoolPerBackend == 0 {
		c.PoolPerBackend = 64
	}
	if c.ChallengeACKLimit == 0 {
		c.ChallengeACKLimit = defaultChallengeACKLimit
	}
}

func (c *FrontEndConfig) validate() error {
	if len(c.VIPs) == 0 {
		return errors.New("splice: FrontEndConfig.VIPs is empty")
	}
	for _, a := range append([]netip.Addr{c.HandoffAddr}, c.VIPs...) {
		if !a.Is4() {
			return fmt.Errorf("splice: FrontEndConfig: %v is not an IPv4 address", a)
		}
	}
	if len(c.Ports) == 0 {
		return errors.New("splice: FrontEndConfig.Ports is empty")
	}
	if a := c.ControlAddr; a.IsValid() && (!a.Addr().Is4() || a.Port() == 0) {
		return fmt.Errorf("splice: FrontEndConfig.ControlAddr %v is not an IPv4 address and port", a)
	}
	if c.HandoffPortLast < c.HandoffPortFirst {
		return errors.New("splice: FrontEndConfig: HandoffPortLast < HandoffPortFirst")
	}
	if c.WScale < 0 || c.WScale > wire.MaxWScale {
		return fmt.Errorf("splice: FrontEndConfig.WScale %d out of 0..14", c.WScale)
	}
	if c.MaxHead > c.RecvBuffer {
		return errors.New("splice: FrontEndConfig.MaxHead exceeds RecvBuffer")
	}
	if c.FlowLifetime > 0 && c.FlowLifetime <= c.HeadTimeout {
		return fmt.Errorf("splice: FrontEndConfig.FlowLifetime %v must exceed HeadTimeout %v", c.FlowLifetime, c.HeadTimeout)
	}
	return c.validateShard()
}

// Backend is where Dispatch sends a request.
type Backend struct {
	ID   uint32
	IP   netip.Addr
	MAC  wire.MAC
	Port uint16
}

// FrontEnd is the front-end's packet engine. It is not safe for
// concurrent use: one goroutine feeds it, which is also why no lock is
// taken per packet.
type FrontEnd struct {
	cfg FrontEndConfig
	// foCookies are the back-ends' Fast Open cookies (FastOpenInSYN).
	foCookies cookieJar
	vips      []wire.IP4
	handoff   wire.IP4
	ports     []uint16
	flows     map[fourTuple]*flow // by client-facing tuple (client -> VIP)
	byID      map[FlowID]*flow
	byC2      map[c2Key]*flow        // by handoff connection (back-end, handoff port)
	nextPort  map[c2Dest]uint16      // per back-end: where the next port search starts
	ledgers   map[c2Dest]*portLedger // per back-end: what its TIME-WAITs hold (fe_timewait.go)
	nextID    FlowID
	sources   map[wire.IP4]srcUse // what each client address holds (limits.go)
	reading   queue.Ring[FlowID]  // flows reading their head, oldest first (limits.go)
	peak      peaks
	timers    deadlines
	stats     FrontEndStats
	pkt       wire.Packet
	opts      wire.TCPOptions
	head      httphead.Request // the head being parsed

	// What a connection per request would otherwise allocate each
	// time: flow records and request buffers freed, kept for the next
	// connections (flow.go), and the strings heads repeat (intern.go).
	spareFlows    []*flow
	spareBufs     [][]byte
	spareBufBytes int // their capacity in all
	strs          interner

	// SYN cookies (cookie.go): the epoch keys, and the bound on RSTs
	// answering segments that have no connection.
	cookies  cookieKeys
	rstLimit rateLimit
	answers  answerLimit // the budget of challenge ACKs (fe_validate.go)

	// Request rewriting (fe_rewrite.go): a rewritten follow-up's bytes
	// are put together here on their way to C2.
	rwScratch []byte
	syns      synTable // when recent SYNs came, with Timelines (timeline.go)

	pool c2Pool // idle handoff connections (fe_pool.go)
}

// NewFrontEnd validates cfg and returns an engine.
func NewFrontEnd(cfg FrontEndConfig) (*FrontEnd, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &FrontEnd{
		cfg:       cfg,
		handoff:   wire.IP4From(cfg.HandoffAddr),
		ports:     append([]uint16(nil), cfg.Ports...),
		flows:     make(map[fourTuple]*flow),
		byID:      make(map[FlowID]*flow),
		byC2:      make(map[c2Key]*flow),
		nextPort:  make(map[c2Dest]uint16),
		ledgers:   make(map[c2Dest]*portLedger),
		sources:   make(map[wire.IP4]srcUse),
		cookies:   newCookieKeys(cfg.CookieSecret),
		foCookies: newCookieJar(maxBackendCookies),
		// A tenth of a second's worth at once.
		rstLimit: newRateLimit(cfg.RSTRate, cfg.RSTRate/10),
		nextID:   FlowID(cfg.Shard),
		syns:     newSynTable(cfg.Timelines),
	}
	for _, v := range cfg.VIPs {
		e.vips = append(e.vips, wire.IP4From(v))
	}
	e.pool.init()
	return e, nil
}

// Stats returns a copy of the counters.
func (e *FrontEnd) Stats() FrontEndStats {
	s := e.stats
	s.Flows = uint64(len(e.byID))
	s.Sources = uint64(len(e.sources))
	s.HandoffPorts = uint64(len(e.byC2))
	s.PooledC2s = uint64(len(e.pool.byKey))
	s.SpareBytes = uint64(len(e.spareFlows))*uint64(unsafe.Sizeof(flow{})) + uint64(e.spareBufBytes)
	return s
}

// FlowStates counts live flows by state name, for status pages.
func (e *FrontEnd) FlowStates() map[string]int {
	m := make(map[string]int)
	for _, f := range e.byID {
		m[f.state.String()]++
	}
	return m
}

// Flows returns the number of live flows (including lingering ones).
func (e *FrontEnd) Flows() int { return len(e.byID) }

func (e *FrontEnd) isVIP(a wire.IP4) bool {
	for _, v := range e.vips {
		if v == a {
			return true
		}
	}
	return false
}

func (e *FrontEnd) isPort(p uint16) bool {
	for _, q := range e.ports {
		if q == p {
			return true
		}
	}
	return false
}

// Input processes one frame received at time now: InputVNet for a frame
// that came without a virtio-net header.
func (e *FrontEnd) Input(frame []byte, now Time, out *Output) {
	e.InputVNet(frame, wire.VNetHdr{}, now, out)
}

// InputVNet processes one frame received at time now with the virtio-net
// header vh (the zero header on a link without them). The engine takes
// plain segments: a super-frame (GSO) is refused as malformed, the caller
// cuts it first (wire.SegmentTCP4) and passes the segments with
// VNetFlagDataValid, since they are right by construction. A partial
// checksum (NEEDS_CSUM) is completed here. VNetFlagDataValid spares the
// engine verifying a TCP checksum the kernel already verified (ingress.go).
func (e *FrontEnd) InputVNet(frame []byte, vh wire.VNetHdr, now Time, out *Output) {
	e.stats.RxFrames++
	p := &e.pkt
	if err := wire.Parse(frame, p); err != nil {
		if err == wire.ErrBadIPChecksum {
			e.drop(dropBadIPChecksum)
		} else {
			e.drop(dropMalformed)
		}
		return
	}
	if p.Kind != wire.KindTCP && e.cfg.ControlAddr.IsValid() && e.takeControl(p, frame, vh, out) {
		return // a control datagram for the caller, or dropped (fe_control.go)
	}
	if vh.IsGSO() || vh.NeedsCsum() && !completeTCPChecksum(p, frame, vh) {
		e.drop(dropMalformed)
		return
	}
	if f := e.checkIngress(p, vh); f != ingressOK {
		e.drop(ingressDrop[f])
		return
	}
	switch p.Kind {
	case wire.KindARP:
		e.inputARP(p, out)
	case wire.KindTCP:
		ip := p.IP
		dst := ip.Dst()
		switch {
		case e.isVIP(dst):
			v := synUnjudged
			if p.TCP.Flags()&(wire.TCPFlagSYN|wire.TCPFlagACK|wire.TCPFlagRST) == wire.TCPFlagSYN {
				// A SYN the link answered is past refusing: its SYN-ACK
				// is out, and the limits apply to its final ACK
				// (acceptOverLimits). It is counted here, where it is
				// known, whatever the engine does with it next (a SYN
				// on a tuple that has a flow is that flow's).
				if v = e.judgeSYN(p); v == synByLink {
					e.stats.SynCookiesByLink++
				} else if e.synOverLimits(p) {
					return
				}
			}
			e.inputClient(p, v, now, out)
		case dst == e.handoff:
			e.inputBackend(p, now, out)
		default:
			e.drop(dropNotOurs)
		}
	case wire.KindICMP:
		e.inputICMP(p, now, out)
	default:
		e.drop(dropNotOurs)
	}
}

func (e *FrontEnd) inputARP(p *wire.Packet, out *Output) {
	a := p.ARP
	if a.Op() != wire.ARPRequest {
		return
	}
	t := a.TargetIP()
	if !e.isVIP(t) && t != e.handoff {
		return
	}
	b := out.alloc(wire.ARPFrameLen)
	wire.EncodeARP(b, wire.ARPReply, e.cfg.MAC, t, a.SenderMAC(), a.SenderIP(), a.SenderMAC())
	out.send(PortWire, b)
	e.stats.ARPReplies++
	e.stats.TxFrames++
}

// NextDeadline is when Tick next has work; the caller may sleep until then
// or until a frame arrives, whichever is first.
func (e *FrontEnd) NextDeadline() Time {
	return min(e.timers.next(), e.poolDeadline(), e.ackDeadline())
}

// Tick runs the timers due at now.
func (e *FrontEnd) Tick(now Time, out *Output) {
	if len(e.pool.acks) > 0 {
		e.sendDueAcks(now, out)
	}
	if len(e.pool.order) > 0 {
		e.expirePool(now, out)
	}
	for {
		ent, ok := e.timers.popDue(now)
		if !ok {
			return
		}
		f := e.byID[FlowID(ent.key)]
		if f == nil || f.armed != ent.when {
			continue // stale entry
		}
		f.armed = Never
		e.owedAckDue(f, now, out)
		if f.deadline > now {
			// Moved later since it was armed (or to Never): arm that.
			e.arm(f, f.deadline)
			e.armOwedAck(f)
			continue
		}
		if e.limitTimer(f, now, out) {
			continue
		}
		e.onTimer(f, now, out)
		if e.byID[f.id] == f {
			e.armOwedAck(f)
		}
	}
}

// deadlineBy makes sure f's timer fires no later than when.
func (e *FrontEnd) deadlineBy(f *flow, when Time) {
	if f.deadline == Never || when < f.deadline {
		e.setDeadline(f, when)
	}
}

// setDeadline arms f's single timer, no later than its limits allow. Every
// change of state arms a timer, so it is also where f moves between its
// source's counts (recount).
func (e *FrontEnd) setDeadline(f *flow, when Time) {
	e.recount(f)
	when = e.limitDeadline(f, when)
	if f.deadline == when {
		return
	}
	f.deadline = when
	if when < f.armed {
		e.arm(f, when)
	}
}

// arm pushes f's timer entry for when, which is earlier than any it has
// in the heap; Never pushes nothing.
func (e *FrontEnd) arm(f *flow, when Time) {
	if when == Never {
		return
	}
	f.armed = when
	e.timers.push(when, uint64(f.id))
}
