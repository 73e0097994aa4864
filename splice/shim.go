package splice

import (
	"errors"
	"fmt"
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
}

// Shim is the back-end's packet engine: a bump in the wire between the
// host kernel (PortHost) and the network (PortWire). Everything passes
// unchanged except replies on spliced connections, which are rewritten to
// come from the VIP and sent to the client's next hop (handoff step 8).
// Not safe for concurrent use.
type Shim struct {
	cfg     ShimConfig
	hostIP  wire.IP4
	entries map[fourTuple]*spliceEntry // by reply tuple: server -> handoff address
	byReq   map[uint64]*spliceEntry
	timers  deadlines
	stats   ShimStats
	pkt     wire.Packet
	opts    wire.TCPOptions
	active  int
}

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
	// PeakActive is the most requests ever in service at once: what the
	// front-end's concurrency cap is there to bound.
	PeakActive uint64

	// Ingress checks (ingress.go): frames from the wire for the host
	// dropped for their headers, by reason.
	IngressBadIPChecksum, IngressBadTCPChecksum uint64
	IngressMartianSource, IngressOwnSource      uint64 // 0/8, 127/8, 224/4, 240/4; the host's own address
	IngressMulticastMAC                         uint64 // broadcast or multicast source MAC
	IngressTTLZero, IngressIPOptions            uint64
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

	// Service-time measurement, one request at a time.
	reqSeen    bool     // some request byte went past
	reqNxt     wire.Seq // end of the request bytes seen: less is a retransmission
	inService  bool
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
	drained      bool // the client acknowledged all reply bytes so far
	drainedAt    Time

	cliFin, srvFin, reset bool
	lastSeen, deadline    Time
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
	return &Shim{
		cfg:     cfg,
		hostIP:  cfg.HostIP.As4(),
		entries: make(map[fourTuple]*spliceEntry),
		byReq:   make(map[uint64]*spliceEntry),
	}, nil
}

// ErrSpliceMismatch rejects a Splice that is not about this host.
var ErrSpliceMismatch = errors.New("splice: Splice message names another back-end")

// AddSplice installs the translation for one handoff. The daemon answers
// the front-end with a SpliceAck only after this returned nil, which is
// what orders the Splice before the first reply (the front-end sends the
// request only after the ack).
func (s *Shim) AddSplice(m *proto.Splice, now Time) error {
	if !m.BackendIP.Is4() || m.BackendIP.As4() != s.hostIP {
		return ErrSpliceMismatch
	}
	if !m.ClientIP.Is4() || !m.VIP.Is4() || !m.HandoffIP.Is4() {
		return fmt.Errorf("splice: Splice %d has a non-IPv4 address", m.RequestID)
	}
	key := fourTuple{srcIP: s.hostIP, dstIP: m.HandoffIP.As4(), srcPort: m.BackendPort, dstPort: m.HandoffPort}
	if old := s.entries[key]; old != nil {
		if old.requestID == m.RequestID {
			return nil // a resent Splice: keep the live state
		}
		s.remove(old) // the front-end reused the handoff port
	}
	ent := &spliceEntry{
		key: key, requestID: m.RequestID,
		client: m.ClientIP.As4(), vip: m.VIP.As4(), cport: m.ClientPort, vport: m.VIPPort,
		cliMAC: m.ClientNextHopMAC, seqDelta: m.SeqDelta, tsOffset: m.TSOffset,
		ts:       m.Flags&proto.SpliceTimestamps != 0,
		scaled:   m.Flags&proto.SpliceWindowScale != 0,
		wsShift:  int(m.WScaleBackend) - int(m.WScaleFrontend),
		reqEnd:   wire.Seq(m.RequestEnd),
		lastSeen: now, deadline: Never,
	}
	s.entries[key] = ent
	s.byReq[m.RequestID] = ent
	s.stats.Splices++
	s.arm(ent, now)
	return nil
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
func (s *Shim) NextDeadline() Time { return s.timers.next() }

// due is the entry's next deadline: the end of a drained response's quiet
// period, the end of the linger after both FINs or a RST, or the idle
// timeout.
func (s *Shim) due(ent *spliceEntry) Time {
	when := ent.lastSeen.Add(s.cfg.IdleTimeout)
	if ent.reset || (ent.cliFin && ent.srvFin) {
		when = ent.lastSeen.Add(s.cfg.Linger)
	}
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
		s.remove(ent)
	}
}

func (s *Shim) remove(ent *spliceEntry) {
	if ent.inService {
		ent.inService = false
		s.active--
	}
	delete(s.entries, ent.key)
	if s.byReq[ent.requestID] == ent {
		delete(s.byReq, ent.requestID)
	}
	ent.deadline = Never
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
	if p.Kind == wire.KindTCP {
		if port == PortHost && p.IP.Src() == s.hostIP {
			t := p.TCP
			key := fourTuple{srcIP: s.hostIP, dstIP: p.IP.Dst(), srcPort: t.SrcPort(), dstPort: t.DstPort()}
			if ent := s.entries[key]; ent != nil && !t.Has(wire.TCPFlagSYN) {
				s.translateReply(ent, p, vh, now, out)
				return
			}
		} else if port == PortWire && p.IP.Dst() == s.hostIP {
			t := p.TCP
			key := fourTuple{srcIP: s.hostIP, dstIP: p.IP.Src(), srcPort: t.DstPort(), dstPort: t.SrcPort()}
			if ent := s.entries[key]; ent != nil {
				s.observeRequest(ent, p, now, out)
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
