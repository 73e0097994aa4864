package splice

// The shim against an attacker on the back-end's Ethernet segment, who can
// send any frame with any addresses and replay any datagram it captured.
//
// What a Splice may name. The front-end sends a Splice right after the
// back-end kernel's SYN-ACK on C2 crossed the shim (handoff steps 5-6), so
// the shim takes a Splice only for a C2 tuple whose SYN-ACK it has just
// seen, on one of the ports the web server listens on, with numbers that
// agree with that handshake; a Splice consumes its handshake. A replayed
// Splice then finds no handshake (the tuple has not been reused), an old
// one, or a new one whose numbers it does not match, and a Splice for a
// connection that is not a handoff (ssh on port 22) has no handshake the
// shim recorded at all. Nor has a connection of a client to the host's
// own address: only a SYN-ACK to a handoff address is a handshake
// (handoffAddrs).
//
// Which side is authoritative. The back-end's kernel is the TCP endpoint;
// the shim only watches. So the shim learns a handshake from the kernel's
// SYN-ACK, which names the SYN the kernel accepted (its ACK is that SYN's
// ISN + 1), and not from SYNs on the wire, which anyone can send; and it
// takes the kernel's word on the receive side of C2: its last ACK and
// window say which wire segments it accepts (acceptable). A wire segment
// the kernel would not accept still goes to the kernel, which answers it
// as RFC 5961 says (a challenge ACK, a duplicate ACK), but it changes
// nothing in the shim: no service time, no FIN, no drained response, no
// reset. A RST at exactly the expected sequence number ends the splice
// after the linger, since the kernel takes it; should the kernel go on
// sending on the tuple anyway (it did not take it: the shim's estimate of
// rcv_nxt was off by bytes in flight), the reset is cancelled. The
// kernel's own RST is final.

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// Why a Splice is refused. AddSplice wraps them with the details; the
// agent sends the text back in the SpliceAck.
var (
	ErrSpliceNotWebPort     = errors.New("splice: Splice names a port the web server does not listen on")
	ErrSpliceNoHandshake    = errors.New("splice: no C2 handshake seen for the Splice's tuple")
	ErrSpliceStaleHandshake = errors.New("splice: the C2 handshake of the Splice's tuple is too old")
	ErrSpliceInconsistent   = errors.New("splice: Splice does not match the C2 handshake seen")
	ErrSpliceRequestInUse   = errors.New("splice: Splice RequestID is in use for another connection")
	ErrShimFull             = errors.New("splice: shim splice table full")
)

// maxSendWindow is the largest window a peer can announce (65535 << 14):
// an ACK more than this behind what the kernel sent acknowledges nothing
// it could have (RFC 5961 section 5 uses the peer's largest window).
const maxSendWindow = 65535 << 14

// handshake is a C2 handshake as the kernel's SYN-ACK showed it.
type handshake struct {
	isnB, isnF wire.Seq // the kernel's ISN; the front-end's, from the SYN-ACK's ACK
	at         Time     // when the SYN-ACK crossed
	window     uint16   // the SYN-ACK's window (a SYN's is never scaled)
	wscale     int8     // the kernel's window shift, -1 when it sent none
	ts         bool     // the kernel answered timestamps
	tsVal      uint32   // the SYN-ACK's TSval, when ts (a Splice sent with the SYN maps it)
	// The SYN-ACK's MAC addresses: the host's, and the front-end's as the
	// host knows it (a carried request is addressed so, shim_carry.go).
	hostMAC, peerMAC wire.MAC
	// early is the request that crossed before the Splice (shim_early.go).
	early earlyRequest
	// byFrontEnd: that SYN was the front-end's own, which sends the
	// handshake's last ACK itself (fe_handoff.go c2Established).
	byFrontEnd bool
	// inSYN: the kernel took the carried request in the SYN
	// (shim_fastopen.go); isnF is then that SYN's ISN.
	inSYN bool
}

// handshakeTable holds the C2 handshakes seen recently.
type handshakeTable = tupleTable[handshake]

// tupleTable holds records by C2 tuple, each for at most window, in at
// most len(ring) slots, the oldest pushed out first: the recent
// handshakes, and the Splices sent with their SYN that wait for theirs
// (shim_atsyn.go). A map finds them by tuple; the ring keeps their
// order. A slot whose record was refreshed (a retransmitted SYN-ACK takes
// a new slot) or consumed is dead and skipped; it still takes room until
// it reaches the head, which only makes the oldest live record go a
// little early. The map is made with room for the ring, so steady use
// does not grow it.
type tupleTable[V any] struct {
	byTuple map[fourTuple]tupleRecord[V]
	ring    []tupleSlot
	head, n int
	serial  uint64
	window  time.Duration
}

type tupleRecord[V any] struct {
	v      V
	at     Time
	serial uint64 // which ring slot holds it
}

type tupleSlot struct {
	key    fourTuple
	serial uint64
}

func newTupleTable[V any](size int, window time.Duration) tupleTable[V] {
	return tupleTable[V]{
		byTuple: make(map[fourTuple]tupleRecord[V], size),
		ring:    make([]tupleSlot, size),
		window:  window,
	}
}

// pop frees the head slot, forgetting its record if it is still live.
func (h *tupleTable[V]) pop() {
	slot := h.ring[h.head]
	if r, ok := h.byTuple[slot.key]; ok && r.serial == slot.serial {
		delete(h.byTuple, slot.key)
	}
	h.ring[h.head] = tupleSlot{}
	h.head = (h.head + 1) % len(h.ring)
	h.n--
}

// note records v for key at now and reports whether a record still in
// its window was pushed out to make room.
func (h *tupleTable[V]) note(key fourTuple, v V, now Time) (evicted bool) {
	// Expired and dead slots at the head go first, then, with the ring
	// still full, the oldest record.
	for h.n > 0 {
		old, ok := h.byTuple[h.ring[h.head].key]
		if ok && old.serial == h.ring[h.head].serial && now.Sub(old.at) <= h.window {
			break
		}
		h.pop()
	}
	if h.n == len(h.ring) {
		evicted = true
		h.pop()
	}
	h.serial++
	h.ring[(h.head+h.n)%len(h.ring)] = tupleSlot{key, h.serial}
	h.n++
	h.byTuple[key] = tupleRecord[V]{v: v, at: now, serial: h.serial}
	return evicted
}

// find returns key's record if it is no older than the window.
func (h *tupleTable[V]) find(key fourTuple, now Time) (V, error) {
	r, ok := h.byTuple[key]
	switch {
	case !ok:
		return r.v, ErrSpliceNoHandshake
	case now.Sub(r.at) > h.window:
		return r.v, ErrSpliceStaleHandshake
	}
	return r.v, nil
}

// update stores v, a record find returned for key, changed: it keeps its
// slot and its time.
func (h *tupleTable[V]) update(key fourTuple, v V) {
	if r, ok := h.byTuple[key]; ok {
		r.v = v
		h.byTuple[key] = r
	}
}

// consume forgets key's record: a handshake is good for one Splice.
func (h *tupleTable[V]) consume(key fourTuple) { delete(h.byTuple, key) }

// noteHandshake records the kernel's SYN-ACK t on the C2 tuple key (server
// -> handoff address), if it comes from a port the web server listens on
// and goes to a handoff address.
func (s *Shim) noteHandshake(key fourTuple, p *wire.Packet, now Time, out *Output) {
	t := p.TCP
	if !s.isWebPort(key.srcPort) {
		return
	}
	if !s.handoffs.has(key.dstIP) {
		s.stats.HandshakesNotHandoff++
		return // a client of the host's own address
	}
	o := &s.opts
	if wire.ParseOptions(t, o) != nil {
		return // the front-end will not take it either
	}
	hs := handshake{isnB: t.Seq(), isnF: t.Ack() - 1, at: now, window: t.Window(), wscale: -1, ts: o.HasTS, tsVal: o.TSVal,
		hostMAC: p.Eth.Src(), peerMAC: p.Eth.Dst()}
	s.fastOpenAnswered(key, t, o, &hs, now)
	if old, err := s.handshakes.find(key, now); err == nil && !hs.inSYN && old.isnB == hs.isnB {
		// The kernel sent its SYN-ACK again: what the shim learnt of
		// the first holds.
		switch {
		case old.isnF == hs.isnF:
			hs.early = old.early
		case old.inSYN && old.early.end == t.Ack():
			// Its SYN brought the request (tookRequestInSYN).
			hs.isnF, hs.inSYN, hs.byFrontEnd, hs.early = old.isnF, true, old.byFrontEnd, old.early
		}
	}
	if o.HasWScale {
		hs.wscale = int8(min(o.WScale, 14))
	}
	s.stats.Handshakes++
	if s.handshakes.note(key, hs, now) {
		s.stats.HandshakesEvicted++
	}
	s.completeAtSYN(key, &hs, now, out)
}

func (s *Shim) isWebPort(port uint16) bool {
	for _, p := range s.cfg.WebPorts {
		if p == port {
			return true
		}
	}
	return false
}

// checkSplice decides whether m may be installed for key; nil, or the
// reason, counted.
func (s *Shim) checkSplice(m *proto.Splice, key fourTuple, old *spliceEntry, now Time) (handshake, error) {
	if err := s.checkPortAndID(m, old); err != nil {
		return handshake{}, err
	}
	hs, err := s.handshakes.find(key, now)
	if err != nil {
		s.stats.RefusedNoHandshake++
		return hs, fmt.Errorf("%w: %v:%d", err, m.HandoffIP, m.HandoffPort)
	}
	if err := hs.agrees(m, s.cfg.MaxRequestAhead); err != nil {
		s.stats.RefusedInconsistent++
		return hs, err
	}
	if old == nil && len(s.entries) >= s.cfg.MaxEntries {
		s.stats.RefusedFull++
		return hs, fmt.Errorf("%w: %d entries", ErrShimFull, len(s.entries))
	}
	return hs, nil
}

// checkPortAndID refuses, counted, a Splice for a port the web server
// does not listen on, or with the RequestID of a live entry other than
// old (the entry on its tuple): what no handshake can mend.
func (s *Shim) checkPortAndID(m *proto.Splice, old *spliceEntry) error {
	if !s.isWebPort(m.BackendPort) {
		s.stats.RefusedNotWebPort++
		return fmt.Errorf("%w: %d", ErrSpliceNotWebPort, m.BackendPort)
	}
	if other := s.byReq[m.RequestID]; other != nil && other != old {
		// A front-end numbers requests afresh after a restart: two live
		// entries with one ID would make its Feedback ambiguous, and
		// the second would hide the first from its timers.
		s.stats.RefusedRequestInUse++
		return fmt.Errorf("%w: %d", ErrSpliceRequestInUse, m.RequestID)
	}
	return nil
}

// installedBy reports whether m is the Splice that installed ent, sent
// again (the front-end resends it until acknowledged). A Splice with the
// same RequestID for the same tuple but other numbers is a new connection
// there (a front-end that restarted and numbers its requests afresh) or a
// replay, and must pass the checks.
func (ent *spliceEntry) installedBy(m *proto.Splice) bool {
	return ent.requestID == m.RequestID &&
		ent.client == m.ClientIP.As4() && ent.cport == m.ClientPort &&
		ent.vip == m.VIP.As4() && ent.vport == m.VIPPort && ent.cliMAC == m.ClientNextHopMAC &&
		ent.seqDelta == m.SeqDelta && ent.tsOffset == m.TSOffset && ent.reqEnd == wire.Seq(m.RequestEnd) &&
		ent.ts == (m.Flags&proto.SpliceTimestamps != 0) && ent.scaled == (m.Flags&proto.SpliceWindowScale != 0) &&
		ent.wsShift == int(m.WScaleBackend)-int(m.WScaleFrontend) &&
		ent.rwSplice == spliceRewrite(m) && ent.closeResp == m.CloseResponses
}

// agrees checks m's numbers against the handshake the kernel made. The
// request direction keeps the front-end's ISN (C2's SYN used the
// client's), so RequestEnd lies a request's length past it. The options
// the front-end reports must be those the kernel answered. SeqDelta and
// TSOffset cannot be checked here: what they map to, the front-end's SYN
// cookie and its clock, never cross the back-end's link.
func (hs *handshake) agrees(m *proto.Splice, maxAhead uint32) error {
	if ahead := m.RequestEnd - uint32(hs.isnF+1); ahead > maxAhead {
		return fmt.Errorf("%w: RequestEnd %d is not within %d bytes after the ISN %d",
			ErrSpliceInconsistent, m.RequestEnd, maxAhead, uint32(hs.isnF))
	}
	if m.Flags&proto.SpliceTimestamps != 0 && !hs.ts {
		return fmt.Errorf("%w: timestamps the kernel did not answer", ErrSpliceInconsistent)
	}
	if m.Flags&proto.SpliceWindowScale != 0 && int(m.WScaleBackend) != max(int(hs.wscale), 0) {
		return fmt.Errorf("%w: back-end window scale %d, the kernel's is %d",
			ErrSpliceInconsistent, m.WScaleBackend, hs.wscale)
	}
	return nil
}

// acceptable reports whether the kernel would accept segment t from the
// wire on ent's connection, counting those it would not. A RST must sit
// exactly at rcv_nxt (RFC 5961 section 3.2); the shim knows it as the
// kernel's last ACK, or the end of the request bytes seen when the kernel
// has yet to acknowledge them. Other segments must overlap the window the
// kernel last announced, as Linux's tcp_sequence has it, and acknowledge
// nothing the kernel has not sent (RFC 5961 section 5). A SYN is never
// acceptable on a connection that exists (RFC 5961 section 4).
func (s *Shim) acceptable(ent *spliceEntry, t wire.TCP, flags uint8) bool {
	seq := t.Seq()
	switch {
	case flags&wire.TCPFlagSYN != 0:
		s.stats.WireOutOfWindow++
		return false
	case flags&wire.TCPFlagRST != 0:
		if seq == ent.rcvAck || seq == ent.reqNxt {
			return true
		}
		s.stats.WireRSTRefused++
		return false
	}
	end := seq + wire.Seq(len(t.Payload()))
	if flags&wire.TCPFlagFIN != 0 {
		end++
	}
	if end.LessThan(ent.rcvAck) || (ent.rcvAck + wire.Seq(ent.rcvWnd)).LessThan(seq) ||
		flags&wire.TCPFlagACK != 0 && uint32(ent.sentEdge()-t.Ack()) > maxSendWindow {
		s.stats.WireOutOfWindow++
		return false
	}
	return true
}

// noteHostSegment learns from the kernel's segment t on ent's connection
// what it has received (its ACK and window) and sent, and takes its
// continued talking as a sign that a RST from the wire did not end it.
func (s *Shim) noteHostSegment(ent *spliceEntry, t wire.TCP, flags uint8, n int) {
	if flags&wire.TCPFlagACK != 0 && ent.rcvAck.LessEq(t.Ack()) {
		ent.rcvAck = t.Ack()
		ent.rcvWnd = uint32(t.Window()) << ent.hostShift
	}
	end := t.Seq() + wire.Seq(n)
	if flags&wire.TCPFlagFIN != 0 {
		end++
	}
	if ent.sndNxt.LessThan(end) {
		ent.sndNxt = end
	}
	if ent.resetByWire && flags&wire.TCPFlagRST == 0 {
		ent.reset, ent.resetByWire = false, false
		s.stats.ResetsCancelled++
	}
}

// handoffAddrs are the front-ends' handoff addresses, configured or
// learnt. A SYN-ACK is a C2 handshake only towards one of them: the shim
// holds a request on a recorded handshake until its Splice and drops a
// reply that comes before it, which for a client of the host's own
// address (no Splice ever comes) held its request for the whole
// handshake window. Learning takes the address of every Splice the
// daemon accepted (so only a holder of a front-end's key adds one);
// until the first, or once more than maxLearntHandoffs were seen, every
// address counts, as the shim did before it knew any.
type handoffAddrs struct {
	addrs    []wire.IP4
	learning bool // none configured: learn from Splices
	overflow bool // learnt too many: every address counts
}

// maxLearntHandoffs bounds the learnt addresses: a front-end has one
// handoff address, a cluster a few front-ends.
const maxLearntHandoffs = 16

func newHandoffAddrs(cfg []netip.Addr) (handoffAddrs, error) {
	h := handoffAddrs{learning: len(cfg) == 0}
	for _, a := range cfg {
		if !a.Is4() {
			return h, fmt.Errorf("splice: ShimConfig.HandoffAddrs: %v is not IPv4", a)
		}
		h.addrs = append(h.addrs, a.As4())
	}
	return h, nil
}

func (h *handoffAddrs) has(ip wire.IP4) bool {
	return h.overflow || len(h.addrs) == 0 || slices.Contains(h.addrs, ip)
}

// learn adds ip, a Splice's handoff address, when none were configured.
func (h *handoffAddrs) learn(ip wire.IP4) {
	if !h.learning || h.overflow || slices.Contains(h.addrs, ip) {
		return
	}
	if len(h.addrs) == maxLearntHandoffs {
		h.overflow = true
		return
	}
	h.addrs = append(h.addrs, ip)
}
