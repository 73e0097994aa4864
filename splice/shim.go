package splice

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// ShimConfig configures a back-end shim engine.
type ShimConfig struct {
	HostIP      netip.Addr    // the back-end kernel's address
	Linger      time.Duration // keep a closed splice for stragglers (5 s)
	IdleTimeout time.Duration // forget a splice with no packet (15 min)
	// ResponseQuiet ends a response: once the client has acknowledged
	// every reply byte and the server stayed silent this long (20 ms), the
	// request no longer counts as in service. A server pausing longer
	// mid-response splits it in two reports.
	ResponseQuiet time.Duration

	// Against an attacker on the LAN (issue 9, shim_guard.go).
	//
	// WebPorts are the ports the web server listens on: the only back-end
	// ports a Splice may name, and whose handshakes the shim records.
	// Required.
	WebPorts []uint16
	// HandshakeWindow is how long after the kernel's SYN-ACK on a C2
	// tuple a Splice for it is taken (5 s): the front-end sends it one
	// round trip after that SYN-ACK, or SpliceDelay later (backend).
	HandshakeWindow time.Duration
	// MaxHandshakes bounds the handshakes remembered (4096), the oldest
	// pushed out first. A Splice comes a round trip after its SYN-ACK,
	// so it takes that many SYN-ACKs within a round trip (a SYN flood at
	// the web port) to push out a handshake before its Splice.
	MaxHandshakes int
	// MaxEntries bounds the splices held (65536); a Splice for a new
	// tuple beyond it is refused.
	MaxEntries int
	// MaxLifetime bounds an entry's life however busy its connection
	// (24 h), on top of IdleTimeout.
	MaxLifetime time.Duration
	// MaxRequestAhead bounds how far a Splice's RequestEnd may lie past
	// the front-end's ISN on C2: at least the front-end's RecvBuffer
	// (1 MiB).
	MaxRequestAhead uint32
	// HandoffAddrs are the front-ends' handoff addresses: only the
	// kernel's SYN-ACKs to them are recorded as C2 handshakes, so a
	// client that connects to the host's own address is not taken for a
	// handoff (its request held and its reply dropped until the handshake
	// window ends, as if a Splice were on its way). Empty: learnt from
	// the Splices the front-ends send (shim_guard.go); until the first,
	// every SYN-ACK from a web port is recorded.
	HandoffAddrs []netip.Addr

	// Control datagrams off the wire (issue 7, shim_control.go).
	//
	// ControlPort is the UDP port the back-end's agent listens on at
	// HostIP: datagrams for it from the wire are handed to the caller
	// (Output.Control) instead of passed to the host. 0: they pass.
	ControlPort uint16
	// HostMAC is the host's MAC address on the wire: only a datagram
	// sent to it is taken (the kernel drops the others). Zero: any. The
	// frames the shim makes for the kernel go to it (ResetIdle).
	HostMAC wire.MAC

	// FastOpen puts a carried request in C2's SYN when the host's kernel
	// takes TCP Fast Open (issue 7, shim_fastopen.go).
	FastOpen bool

	// KernelFastPath: the daemon runs the kernel's reply fast path, and
	// the engine hands it the replies in the middle of responses
	// (issue 7, shim_fastpath.go). KernelEcho lets it send the other
	// replies too and give their originals here (echoes; the daemon's
	// default, docs/results.md, twenty-seventh session).
	KernelFastPath bool
	KernelEcho     bool
	// KernelSYNs: the daemon runs the kernel's SYN fast path on the
	// wire's ingress (link.SYNFastPath), which hands every SYN that
	// carries data straight to the host (issue 7, shim_fastopen.go): the
	// shim learns from its copy of such a SYN and never writes one itself.
	KernelSYNs bool
}

// DefaultHandshakeWindow is ShimConfig.HandshakeWindow's default.
const DefaultHandshakeWindow = 5 * time.Second

// Shim is the back-end's packet engine: a bump in the wire between the
// host kernel (PortHost) and the network (PortWire). Everything passes
// unchanged except replies on spliced connections, which are rewritten to
// come from the VIP and sent to the client's next hop (handoff step 8).
// Not safe for concurrent use.
type Shim struct {
	cfg     ShimConfig
	hostIP  wire.IP4
	entries map[fourTuple]*spliceEntry // by reply tuple: server -> handoff address
	// byReq holds the same entries by RequestID, one entry per ID
	// (AddSplice refuses a second), which is also the timers' key.
	byReq      map[uint64]*spliceEntry
	handshakes handshakeTable // recent C2 handshakes, by reply tuple
	// atSYN holds the Splices sent with their SYN that wait for the
	// kernel's SYN-ACK, by reply tuple (shim_atsyn.go).
	atSYN  tupleTable[proto.Splice]
	timers deadlines
	stats  ShimStats
	pkt    wire.Packet
	opts   wire.TCPOptions
	fo     fastOpen // cookies and held SYNs (shim_fastopen.go)
	// handoffs are the addresses whose SYN-ACKs are C2 handshakes.
	handoffs handoffAddrs
	active   int

	// Allocation per request (issue 7): entries removed, kept for the
	// next Splices instead of a new one each (see remove).
	spareEntries []*spliceEntry

	// held are request segments waiting for their Splice (shim_early.go).
	held heldPool

	// fastQueue are the fast-path commands for the daemon, in order
	// (shim_fastpath.go, TakeFastPaths).
	fastQueue []FastPathUpdate
}

// maxSpareEntries bounds the removed entries a shim keeps for reuse: the
// turnover of a busy shim between two Ticks, not its peak.
const maxSpareEntries = 256

// ShimStats are the shim's counters.
type ShimStats struct {
	HostToWire, WireToHost uint64 // frames passed unchanged
	Translated             uint64 // replies rewritten towards a client
	TranslatedBytes        uint64 // their payload bytes
	CopiesToFrontEnd       uint64 // header-only copies sent to the front-end
	Malformed              uint64 // frames that failed parsing (passed unchanged)
	BadOptions             uint64 // spliced replies dropped for untranslatable options
	BadVNet                uint64 // spliced replies dropped for a vnet header that does not fit them
	Splices, Expired       uint64
	Entries                uint64
	// Request rewriting (issue 10, shim_offset.go).
	Rewrites        uint64 // correction points learned from the front-end's rewrite option
	RewritesStale   uint64 // rewrite options naming an older point than the one held: ignored
	RewritesRefused uint64 // Splices whose rewrite fields do not fit the request: refused
	// PeakActive is the most requests ever in service at once: what the
	// front-end's concurrency cap is there to bound.
	PeakActive uint64

	// Against an attacker on the LAN (issue 9, shim_guard.go). Every
	// refused Splice counts in SplicesRefused and under one reason.
	SplicesRefused       uint64
	RefusedNotWebPort    uint64 // names a port the web server does not listen on
	RefusedNoHandshake   uint64 // no handshake seen on its tuple, or too long ago
	RefusedInconsistent  uint64 // numbers that contradict the handshake seen
	RefusedRequestInUse  uint64 // RequestID of a live entry for another tuple
	RefusedFull          uint64 // MaxEntries reached
	SplicesReplaced      uint64 // entries replaced by a Splice for a new handshake on their tuple
	EntriesSuperseded    uint64 // lingering entries forgotten for a new SYN on their tuple, or the kernel's answer to one
	Handshakes           uint64 // kernel SYN-ACKs on web ports recorded
	HandshakesEvicted    uint64 // of them, pushed out within HandshakeWindow by newer ones
	HandshakesNotHandoff uint64 // SYN-ACKs on web ports to an address not a handoff one, not recorded
	WireRSTRefused       uint64 // wire RSTs not at the exact sequence: passed, splice kept
	WireOutOfWindow      uint64 // other wire segments the kernel would not accept: passed, ignored
	ResetsCancelled      uint64 // wire RSTs after which the kernel kept sending
	RefusedNotIdle       uint64 // Splices that would move a C2 not idle, or not where they say (shim_pool.go)
	SplicesReused        uint64 // C2s moved to a later client (also in Splices)
	RepliesOfLastClient  uint64 // replies on a moved C2 from before the move: dropped
	HeldForReuse         uint64 // requests held for the Splice that moves their C2 (also in HeldRequests)
	// IdleResetForNewFrontEnd: idle C2s reset when a new front-end
	// started, which knows nothing of them (shim_pool.go ResetIdle).
	IdleResetForNewFrontEnd uint64
	// Responses to a client that asked to close, whose head's
	// "Connection: keep-alive" became "close", and those whose head had
	// no such field in its first segment (left as they were).
	ResponsesClosed, ResponsesNotClosed uint64
	ExpiredLifetime                     uint64 // entries ended by MaxLifetime (also in Expired)

	// Early requests (issue 7, shim_early.go): request segments that
	// crossed before their Splice (noted), and server replies that came
	// before it (dropped: the kernel sends them again).
	EarlyRequests, RepliesBeforeSplice uint64
	// Request segments held until their Splice: taken, passed once it
	// came, dropped when it did not within the handshake window, and
	// not held for want of room (they pass; see shim_early.go).
	HeldRequests, HeldReleased, HeldExpired, HeldFull uint64
	// Requests carried in their Splice (shim_carry.go): sent to the host
	// for the front-end, not kept for want of a slot, not sent because
	// they did not fit the handshake.
	CarriedRequests, CarriedNoRoom, CarriedRefused uint64
	// Carried requests in C2's SYN (TCP Fast Open, shim_fastopen.go):
	// SYNs sent with their request; of them, those whose SYN-ACK took it
	// and those whose SYN-ACK did not (the request went after it); cookies
	// the kernel gave (new or changed); SYNs held for their Splice, of
	// them those that passed without it, and those not held for want of
	// room.
	FastOpenSent, FastOpenAccepted, FastOpenRefused, FastOpenCookies uint64
	FastOpenHeld, FastOpenHeldExpired, FastOpenHeldFull              uint64
	// SYNs the front-end sent with their request and its cookie in them
	// (FrontEndConfig.FastOpenInSYN) whose SYN-ACK took the request; SYNs
	// with data the kernel took from the wire itself (KernelSYNs), which
	// the shim did not write.
	FastOpenFromFrontEnd, SYNsByKernel uint64
	// Replies that came before their SYN-ACK (another worker's): held
	// until it came, or dropped for want of room or time.
	FastOpenRepliesHeld, FastOpenRepliesDropped uint64

	// Ingress checks (ingress.go): frames from the wire for the host
	// dropped for their headers, by reason.
	IngressBadIPChecksum, IngressBadTCPChecksum uint64
	IngressMartianSource, IngressOwnSource      uint64 // 0/8, 127/8, 224/4, 240/4; the host's own address
	IngressMulticastMAC                         uint64 // broadcast or multicast source MAC
	IngressTTLZero, IngressIPOptions            uint64
	// AcksCoalesced counts the front-end's pure ACKs written over the
	// connection's previous one in the same pass instead of passed to the
	// host (shim_ackcoalesce.go).
	AcksCoalesced uint64

	// Splices sent with C2's SYN (issue 7, shim_atsyn.go): taken before
	// their SYN-ACK, to wait for it; completed by it and installed;
	// pushed out by newer ones before it came (the wait is bounded like
	// the handshakes); contradicted by it (refused then).
	AtSYNWaited, AtSYNCompleted, AtSYNEvicted, AtSYNRefused uint64

	// Control datagrams off the wire (issue 7, shim_control.go): taken
	// for the caller; dropped for a UDP length that does not fit its
	// packet or a wrong UDP checksum; passed to the host as fragments
	// (first fragments counted) or GSO super-frames.
	ControlTaken                         uint64
	ControlBadLength, ControlBadChecksum uint64
	ControlFragments, ControlOffloaded   uint64

	// The kernel's reply fast path (shim_fastpath.go): responses handed
	// to it (a Put each), and the reply bytes it sent that this engine
	// then counted from the gap before the next reply it saw.
	FastPathOffers, FastPathBytes uint64
	// Replies the kernel sent itself and gave this engine for the rest
	// (echoes), and echoes of connections no longer here (dropped).
	Echoes, EchoBytes, EchoesOrphaned uint64
	// Requests that came before the echo of the response they follow
	// was read, and waited for it (nextRequest).
	RequestsAheadOfEchoes uint64
	// Responses whose first reply this engine read, and of them those
	// whose first reply the kernel had sent itself (an echo): the share
	// is how often a connection's entry reached the kernel before the
	// server's first reply, so that the first byte did not wait for the
	// shim to wake (qsplice-bench-proxy reports it with the first byte).
	Responses, ResponsesFirstEchoed uint64
}

// spliceEntry is one spliced connection as the shim sees it.
type spliceEntry struct {
	key       fourTuple // reply direction: server -> handoff address
	requestID uint64
	client    wire.IP4
	vip       wire.IP4
	cport     uint16
	vport     uint16
	cliMAC    wire.MAC
	seqDelta  uint32
	tsOffset  uint32
	ts        bool
	wsShift   int // reply windows: win << wsB >> wsF, as one signed shift
	scaled    bool
	reqEnd    wire.Seq
	reqAcked  bool

	// The kernel's side of C2, to judge segments from the wire as it
	// will (acceptable, shim_guard.go).
	rcvAck      wire.Seq // the kernel's latest ACK: its rcv_nxt as it last said
	rcvWnd      uint32   // the window it announced with that ACK, scaled
	sndNxt      wire.Seq // past the last sequence number the kernel sent
	hostShift   uint8    // the kernel's window shift on C2
	resetByWire bool     // reset by a RST from the wire, which the kernel may not have taken
	born        Time

	// owedAcks counts the segments from the wire since both FINs
	// (closedByFINs) that the kernel may still answer, with an ACK at
	// most each: a bare ACK beyond them answers something that never
	// crossed the shim (a SYN the kernel took from the wire, KernelSYNs).
	// cliFinEnd is past the client's FIN: the kernel's rcv_nxt once it
	// has it, where a bare ACK or RST gets no answer (owesAck).
	owedAcks  uint8
	cliFinEnd wire.Seq
	// cliFinAnswered: a segment of the kernel acknowledged the client's
	// FIN.
	cliFinAnswered bool

	// The handshake it was installed on, to recognise a Splice sent with
	// the SYN when it comes again (shim_atsyn.go).
	isnB      wire.Seq
	synTSval  uint32
	synWScale int8
	synTS     bool
	synAckAt  Time // when that SYN-ACK crossed

	// Service-time measurement, one request at a time.
	reqNxt     wire.Seq // end of the request bytes seen: less is a retransmission
	inService  bool
	served     bool // a request has been in service on this entry
	responding bool
	reqStart   Time
	lastReply  Time
	srvNxt     wire.Seq
	replyBytes uint64
	// respEnd is where the response ends, when its head said so;
	// then the response is over when the client has acknowledged it.
	respEnd      wire.Seq
	respEndKnown bool
	headRequest  bool // the request in service is a HEAD: no body comes
	firstReply   Time // the response's first byte (timelines, issue 11)
	drained      bool // the client acknowledged all reply bytes so far
	drainedAt    Time
	// nextReq is a request that came ahead of the echo of the response
	// before it (shim_fastpath.go): in service once that one ends.
	nextReq nextRequest

	// The front-end's last pure ACK passed to the host in the current
	// output, and the highest ACK seen from the wire
	// (shim_ackcoalesce.go).
	pendAck     pendingAck
	wireAck     wire.Seq
	wireAckSeen bool

	cliFin, srvFin, reset bool
	lastSeen, deadline    Time

	// Request rewriting (issue 10, shim_offset.go): the newest correction
	// point between the back-end's request numbers and the client's, the
	// one the Splice installed (to recognise it resent), and whether the
	// kernel has acknowledged the newest rewritten target (until then its
	// replies' headers are copied to the front-end, which resends it).
	rw       rewriteRec
	rwSplice rewriteRec
	rwAcked  bool

	// The kernel's reply fast path (shim_fastpath.go): whether it holds
	// a Put for this connection, and the response end that Put named.
	fastOn     bool
	fastMiddle bool
	fastEcho   bool
	fastEnd    wire.Seq

	// A C2 moved to a later client (shim_pool.go): what the Splice said,
	// the offset of the client's TSvals on C2, and where the new client's
	// replies start (epoch; epochOn until one at or past it came).
	reuse    proto.SpliceReuse
	cliTSOff uint32
	// closeResp: the client asked to close, which the front-end took out
	// of the request; each response's "Connection: keep-alive" becomes
	// "close" here (shim_pool.go closeResponse).
	closeResp  bool
	respClosed bool // the response in service had its head rewritten so
	// finToClient: the shim ended that response to the client with a FIN
	// at finAt (C2 numbers), which the server never sent.
	finToClient bool
	finAt       wire.Seq
	epoch       wire.Seq
	epochOn     bool
}

// NewShim returns a shim for the back-end host at cfg.HostIP.
func NewShim(cfg ShimConfig) (*Shim, error) {
	if !cfg.HostIP.Is4() {
		return nil, fmt.Errorf("splice: ShimConfig.HostIP %v is not IPv4", cfg.HostIP)
	}
	if cfg.Linger == 0 {
		cfg.Linger = 5 * time.Second
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 15 * time.Minute
	}
	if cfg.ResponseQuiet == 0 {
		cfg.ResponseQuiet = 20 * time.Millisecond
	}
	if len(cfg.WebPorts) == 0 {
		return nil, errors.New("splice: ShimConfig.WebPorts is empty")
	}
	if cfg.HandshakeWindow == 0 {
		cfg.HandshakeWindow = DefaultHandshakeWindow
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = 4096
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 65536
	}
	if cfg.MaxLifetime == 0 {
		cfg.MaxLifetime = 24 * time.Hour
	}
	if cfg.MaxRequestAhead == 0 {
		cfg.MaxRequestAhead = 1 << 20
	}
	cfg.WebPorts = append([]uint16(nil), cfg.WebPorts...)
	h, err := newHandoffAddrs(cfg.HandoffAddrs)
	if err != nil {
		return nil, err
	}
	return &Shim{
		cfg:        cfg,
		hostIP:     cfg.HostIP.As4(),
		handoffs:   h,
		entries:    make(map[fourTuple]*spliceEntry),
		byReq:      make(map[uint64]*spliceEntry),
		handshakes: newTupleTable[handshake](cfg.MaxHandshakes, cfg.HandshakeWindow),
		atSYN:      newTupleTable[proto.Splice](cfg.MaxHandshakes, cfg.HandshakeWindow),
		held:       newHeldPool(),
		fo:         fastOpen{cookieJar: newCookieJar(maxFastOpenCookies), seen: newTupleTable[seenSYN](maxSeenSYNs, fastOpenSeen)},
	}, nil
}

// ErrSpliceMismatch rejects a Splice that is not about this host.
var ErrSpliceMismatch = errors.New("splice: Splice message names another back-end")

// AddSplice installs the translation for one handoff. The daemon answers
// the front-end with a SpliceAck only after this returned nil; an error
// says why not, for SpliceAck's Reason. The front-end sends an unsafe
// request only after the ack, which orders the Splice before the first
// reply; a safe one it may send with the Splice, and should that request
// cross the shim first, or a reply be ready before the Splice, the shim
// handles both (shim_early.go).
//
// A Splice is taken only for a C2 tuple whose handshake the kernel has
// just made (within HandshakeWindow of its SYN-ACK), on one of WebPorts,
// with numbers that agree with that handshake, and with a RequestID no
// other live entry has; each handshake is good for one Splice
// (shim_guard.go). A resent Splice for an entry in place is a no-op. A
// Splice for a new handshake on the tuple of an entry still held
// replaces it: the kernel took a new connection there, so the old one is
// gone, and so is its slot.
func (s *Shim) AddSplice(m *proto.Splice, now Time) error {
	if !m.BackendIP.Is4() || m.BackendIP.As4() != s.hostIP {
		s.stats.SplicesRefused++
		return ErrSpliceMismatch
	}
	if !m.ClientIP.Is4() || !m.VIP.Is4() || !m.HandoffIP.Is4() {
		s.stats.SplicesRefused++
		return fmt.Errorf("splice: Splice %d has a non-IPv4 address", m.RequestID)
	}
	key := fourTuple{srcIP: s.hostIP, dstIP: m.HandoffIP.As4(), srcPort: m.BackendPort, dstPort: m.HandoffPort}
	s.handoffs.learn(key.dstIP) // the daemon took m only with the front-end's key
	if m.Reuse.On {
		return s.reuseSplice(m, key, now) // a C2 that served another client (shim_pool.go)
	}
	if m.Flags&proto.SpliceAtSYN != 0 {
		return s.addSpliceAtSYN(m, key, now)
	}
	old := s.entries[key]
	if old != nil && old.installedBy(m) {
		return nil // a resent Splice: keep the live state
	}
	hs, err := s.checkSplice(m, key, old, now)
	if err != nil {
		s.stats.SplicesRefused++
		return err
	}
	if err := rewriteFits(m, hs); err != nil {
		s.stats.SplicesRefused++
		s.stats.RewritesRefused++
		return err
	}
	s.handshakes.consume(key)
	if old != nil {
		s.stats.SplicesReplaced++
		s.remove(old)
	}
	ent := s.newEntry()
	*ent = spliceEntry{
		key: key, requestID: m.RequestID,
		client: m.ClientIP.As4(), vip: m.VIP.As4(), cport: m.ClientPort, vport: m.VIPPort,
		cliMAC: m.ClientNextHopMAC, seqDelta: m.SeqDelta, tsOffset: m.TSOffset,
		ts:      m.Flags&proto.SpliceTimestamps != 0,
		scaled:  m.Flags&proto.SpliceWindowScale != 0,
		wsShift: int(m.WScaleBackend) - int(m.WScaleFrontend),
		reqEnd:  wire.Seq(m.RequestEnd),
		rcvAck:  hs.isnF + 1, rcvWnd: uint32(hs.window), sndNxt: hs.isnB + 1,
		isnB: hs.isnB, synTSval: hs.tsVal, synWScale: hs.wscale, synTS: hs.ts, synAckAt: hs.at,
		reqNxt: hs.isnF + 1, pendAck: pendingAck{idx: -1},
		born: now, lastSeen: now, deadline: Never,
	}
	if hs.wscale > 0 {
		ent.hostShift = uint8(hs.wscale)
	}
	ent.rw = spliceRewrite(m)
	ent.rwSplice, ent.rwAcked = ent.rw, true
	ent.closeResp = m.CloseResponses
	s.startEarlyRequest(ent, hs.early)
	if s.held.n > 0 {
		s.held.release = true // Tick passes what waited for this Splice
	}
	if s.fo.nReply > 0 {
		s.fo.releaseReplies = true // and the replies that waited for its SYN-ACK
	}
	s.entries[key] = ent
	s.byReq[m.RequestID] = ent
	s.stats.Splices++
	s.offerFastPath(ent, false) // the kernel may send the first reply itself
	s.arm(ent, now)
	return nil
}

// ended reports whether ent's connection is over (both FINs, or a RST)
// and the entry only lingers for late segments.
func (ent *spliceEntry) ended() bool { return ent.reset || ent.closedByFINs() }

// closedByFINs reports whether both sides sent their FIN. The kernel's
// socket is then in TIME-WAIT, CLOSING or LAST-ACK, or gone, and sends
// nothing but its FIN again or an ACK for a segment it received. (After a
// RST it may not have taken, it may still send anything.)
func (ent *spliceEntry) closedByFINs() bool { return ent.cliFin && ent.srvFin }

// owesAck reports whether the kernel may answer t, a segment from the wire
// after both FINs, with an ACK. In TIME-WAIT Linux answers everything but
// a RST or bare ACK at its rcv_nxt (tcp_timewait_state_process), and in
// LAST-ACK or CLOSING those are acceptable and need no answer either: so
// the client's last ACK, and its duplicates, are owed nothing. Anything
// else may be answered (a FIN sent again, data, a segment out of window).
func (ent *spliceEntry) owesAck(t wire.TCP) bool {
	return t.Flags()&(wire.TCPFlagSYN|wire.TCPFlagFIN) != 0 || len(t.Payload()) != 0 || t.Seq() != ent.cliFinEnd
}

// Active is the number of requests in service (for Feedback/Keepalive).
func (s *Shim) Active() int { return s.active }

// Entries is the number of splices held, lingering ones included.
func (s *Shim) Entries() int { return len(s.entries) }

// Stats returns a copy of the counters.
func (s *Shim) Stats() ShimStats {
	st := s.stats
	st.Entries = uint64(len(s.entries))
	return st
}

// NextDeadline is when Tick next has work.
func (s *Shim) NextDeadline() Time {
	return min(s.timers.next(), s.heldDeadline(), s.fo.deadline())
}

// due is the entry's next deadline: the end of a drained response's quiet
// period, the end of the linger after both FINs or a RST, or the idle
// timeout; never later than the end of its lifetime.
func (s *Shim) due(ent *spliceEntry) Time {
	when := ent.lastSeen.Add(s.cfg.IdleTimeout)
	if ent.ended() {
		when = ent.lastSeen.Add(s.cfg.Linger)
	}
	when = min(when, ent.born.Add(s.cfg.MaxLifetime))
	if ent.inService && ent.responding && ent.drained {
		when = min(when, ent.drainedAt.Add(s.cfg.ResponseQuiet))
	}
	return when
}

// arm makes sure a timer entry exists no later than the entry's due time;
// later deadlines are found when an early entry fires (see deadlines).
func (s *Shim) arm(ent *spliceEntry, now Time) {
	when := s.due(ent)
	if when < ent.deadline || ent.deadline == Never {
		ent.deadline = when
		s.timers.push(when, ent.requestID)
	}
}

// Tick ends quiet responses and expires splices whose linger or idle time
// has passed.
func (s *Shim) Tick(now Time, out *Output) {
	if s.fo.nSYN > 0 {
		s.releaseSYNs(now, out)
	}
	if s.fo.nReply > 0 {
		s.releaseHeldReplies(now, out)
	}
	if s.held.n > 0 {
		s.releaseHeld(now, out)
	}
	for {
		d, ok := s.timers.popDue(now)
		if !ok {
			return
		}
		ent := s.byReq[d.key]
		if ent == nil || ent.deadline != d.when {
			continue
		}
		if ent.inService && ent.responding && ent.drained && !now.Before(ent.drainedAt.Add(s.cfg.ResponseQuiet)) {
			s.finishResponse(ent, out)
		}
		if want := s.due(ent); want > now {
			ent.deadline = want
			s.timers.push(want, ent.requestID)
			continue
		}
		s.finishResponse(ent, out)
		s.stats.Expired++
		if !now.Before(ent.born.Add(s.cfg.MaxLifetime)) {
			s.stats.ExpiredLifetime++
		}
		s.remove(ent)
	}
}

// releaseWaiting passes what waited for a Splice installed since (held
// SYNs, replies, early segments) before the frame that comes next: each
// came before that frame, and a connection's frames must leave in the
// order they came. Left to the next Tick, a frame read in between (the
// server's FIN after the replies held for their SYN-ACK, in a lab run
// with four connections a millisecond) left ahead of them: the client
// had the FIN first, and the engine, which had seen the FIN's sequence
// number, took the replies for ones sent again and never reported the
// response.
func (s *Shim) releaseWaiting(now Time, out *Output) {
	if s.fo.release && s.fo.nSYN > 0 {
		s.releaseSYNs(now, out)
	}
	if s.fo.releaseReplies && s.fo.nReply > 0 {
		s.releaseHeldReplies(now, out)
	}
	if s.held.release && s.held.n > 0 {
		s.releaseHeld(now, out)
	}
}

func (s *Shim) remove(ent *spliceEntry) {
	s.closeFastPath(ent)
	if ent.inService {
		ent.inService = false
		s.active--
	}
	delete(s.entries, ent.key)
	if s.byReq[ent.requestID] == ent {
		delete(s.byReq, ent.requestID)
	}
	ent.deadline = Never
	// Nothing refers to ent now (the maps dropped it, and its timers
	// find it only through byReq): the next Splice may reuse it.
	if len(s.spareEntries) < maxSpareEntries {
		s.spareEntries = append(s.spareEntries, ent)
	}
}

// newEntry returns a removed entry to reuse, or a new one; AddSplice
// overwrites all of it.
func (s *Shim) newEntry() *spliceEntry {
	if n := len(s.spareEntries); n > 0 {
		ent := s.spareEntries[n-1]
		s.spareEntries[n-1] = nil
		s.spareEntries = s.spareEntries[:n-1]
		return ent
	}
	return new(spliceEntry)
}

// Input processes a frame from port at time now: InputVNet for a frame
// that came without a virtio-net header (complete checksums, one segment).
func (s *Shim) Input(port Port, frame []byte, now Time, out *Output) {
	s.InputVNet(port, frame, wire.VNetHdr{}, now, out)
}

// InputVNet processes a frame from port at time now that came with the
// virtio-net header vh (the zero header on a link without them). Super-
// frames stay whole: a reply of up to 64 KiB that the host kernel left to
// TSO is translated once and leaves with its header for the kernel (or the
// NIC) to segment, and a GRO'd frame from the wire passes with its header.
// A frame passed through keeps its header; a translated frame keeps it too
// (translation changes no length), with a partial checksum kept partial
// (see translateReply).
func (s *Shim) InputVNet(port Port, frame []byte, vh wire.VNetHdr, now Time, out *Output) {
	if s.fo.release || s.fo.releaseReplies || s.held.release {
		s.releaseWaiting(now, out)
	}
	p := &s.pkt
	if err := wire.Parse(frame, p); err != nil {
		if port == PortWire && err == wire.ErrBadIPChecksum && s.forHost(frame) {
			s.countIngress(ingressBadIPChecksum)
			return
		}
		// Not ours to judge: the shim is transparent for traffic it does
		// not translate, and the receiver will drop what is broken.
		s.stats.Malformed++
		s.pass(port, frame, vh, out)
		return
	}
	if port == PortWire && s.refuseFromWire(p, vh) {
		return // odd headers from the network (ingress.go)
	}
	if port == PortWire && p.Kind != wire.KindTCP && s.takeControl(p, frame, vh, out) {
		return // a control datagram for the caller, or dropped (shim_control.go)
	}
	if p.Kind == wire.KindTCP {
		if port == PortHost && p.IP.Src() == s.hostIP {
			t := p.TCP
			key := fourTuple{srcIP: s.hostIP, dstIP: p.IP.Dst(), srcPort: t.SrcPort(), dstPort: t.DstPort()}
			ent := s.entries[key]
			if ent != nil && ent.closedByFINs() && t.Flags() == wire.TCPFlagACK && len(t.Payload()) == 0 {
				if ent.owedAcks == 0 {
					// The kernel answers a segment the shim never saw:
					// after the connection's end it speaks only when
					// spoken to, and everything but a SYN with data
					// crosses the shim first. So this is its answer to a
					// new connection's SYN it took from the wire before
					// the shim read the copy (KernelSYNs): the old
					// connection's ACK from its TIME-WAIT, or a
					// challenge ACK. Translated, it would go to the old
					// client, and the front-end, waiting for an answer
					// to reset the old connection, would send the SYN
					// again only when its timer fires. It is the
					// front-end's: forget the entry, as the SYN's copy
					// would have, and pass it.
					s.stats.EntriesSuperseded++
					s.remove(ent)
					ent = nil
				} else {
					ent.owedAcks--
				}
			}
			if ent != nil && !t.Has(wire.TCPFlagSYN) {
				s.translateReply(ent, p, vh, now, out)
				return
			}
			if ent != nil && t.Flags()&(wire.TCPFlagSYN|wire.TCPFlagACK) == wire.TCPFlagSYN|wire.TCPFlagACK && ent.ended() {
				// The kernel answers a new connection on the tuple of one
				// that ended, whose SYN it took from the wire before the
				// shim read its copy (KernelSYNs), which would have made
				// the shim forget the lingering entry (the wire's branch
				// below): forget it now, or it translates the new
				// connection's replies towards the old client.
				s.stats.EntriesSuperseded++
				s.remove(ent)
			}
			if s.cfg.KernelEcho && p.IP.TTL() == 0 {
				// A reply the kernel sent itself (shim_fastpath.go) for a
				// connection gone from here since: nothing to learn, and
				// never to be sent again. (Only with echoes on: else the
				// shim passes whatever it does not translate.)
				s.stats.EchoesOrphaned++
				return
			}
			if t.Flags()&(wire.TCPFlagSYN|wire.TCPFlagACK|wire.TCPFlagRST) == wire.TCPFlagSYN|wire.TCPFlagACK {
				s.noteHandshake(key, p, now, out)
			} else if s.holdEarlyReply(key, frame, vh, t, now) {
				return // before its SYN-ACK, which another worker has (shim_fastopen.go)
			} else if s.replyBeforeSplice(key, t, now) {
				return // before its Splice (shim_early.go)
			}
		} else if port == PortWire && p.IP.Dst() == s.hostIP {
			t := p.TCP
			key := fourTuple{srcIP: s.hostIP, dstIP: p.IP.Src(), srcPort: t.DstPort(), dstPort: t.SrcPort()}
			ent := s.entries[key]
			if ent != nil && t.Flags()&(wire.TCPFlagSYN|wire.TCPFlagACK) == wire.TCPFlagSYN && ent.ended() {
				// A new connection on the tuple of one that ended: the
				// front-end's handoff ports come round again within the
				// linger at a few thousand connections a second. Kept, the
				// lingering entry would translate the kernel's answer to
				// this SYN (a challenge ACK while the old connection is
				// in TIME_WAIT) towards the old client, and the front-end,
				// which resets the old connection on seeing it, would wait
				// for a SYN-ACK that never comes. The linger only serves
				// late segments of the old connection, which the new SYN
				// says are over (the front-end frees its own flow the same
				// way, design trap 10).
				s.stats.EntriesSuperseded++
				s.remove(ent)
				ent = nil
			}
			if t.Flags()&(wire.TCPFlagSYN|wire.TCPFlagACK|wire.TCPFlagRST|wire.TCPFlagFIN) == wire.TCPFlagSYN && len(t.Payload()) > 0 {
				if ent == nil {
					s.requestInSYN(key, t, now) // the front-end built it (shim_fastopen.go)
				} else {
					s.requestInSYNOfEntry(ent, t, out) // its copy read late (shim_fastopen.go)
				}
				if s.cfg.KernelSYNs {
					s.stats.SYNsByKernel++
					return // the kernel took it from the wire (shim_fastopen.go)
				}
			}
			if ent != nil && len(t.Payload()) > 0 && s.holdForReuse(ent, frame, vh, t, now) {
				return // a request for the C2's next client, before its Splice (shim_pool.go)
			}
			if ent != nil {
				if ent.finToClient {
					clampFinAck(ent, p.TCP, vh) // shim_pool.go
				}
				accepted := s.observeRequest(ent, p, now, out)
				if ent.closedByFINs() && ent.owedAcks < math.MaxUint8 && ent.owesAck(t) {
					ent.owedAcks++ // acceptable or not
				}
				if accepted && s.coalesceWireAck(ent, p.TCP, frame, vh, out) {
					return // passed, or written over its previous ACK (shim_ackcoalesce.go)
				}
			} else if t.Flags()&(wire.TCPFlagSYN|wire.TCPFlagACK|wire.TCPFlagRST|wire.TCPFlagFIN) == wire.TCPFlagSYN &&
				s.fastOpenSYN(key, p, frame, now, out) {
				return // sent with its request, or held for its Splice (shim_fastopen.go)
			} else if s.holdEarlyRequest(key, frame, vh, t, now) {
				return // until its Splice (shim_early.go)
			} else {
				s.noteEarlyRequest(key, t, now)
			}
		}
	}
	s.pass(port, frame, vh, out)
}

func (s *Shim) pass(port Port, frame []byte, vh wire.VNetHdr, out *Output) {
	if port == PortHost {
		s.stats.HostToWire++
		out.sendVNet(PortWire, frame, vh)
	} else {
		s.stats.WireToHost++
		out.sendVNet(PortHost, frame, vh)
	}
}
