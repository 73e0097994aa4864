package splice

import (
	"bytes"

	"github.com/qsplice/qsplice/splice/wire"
)

// A request before its Splice (issue 7's early request).
//
// The front-end may send a safe request on C2 in the same pass as the
// Splice instead of waiting for the SpliceAck (frontend/controller,
// slots.go). The Splice, a datagram to the shim's control socket, crosses
// the shim's wire and TAP just ahead of the request's segment, but it
// reaches the shim's loop only through the kernel and its socket, and
// with several workers through another worker's mailbox: under load the
// request's segment was read first for one request in ten in the lab,
// and one reply in fifty came before its Splice. So:
//
//   - a request segment on a C2 tuple whose SYN-ACK the shim recorded
//     and which has no entry yet is held, in a small pool of buffers
//     taken at start (holdEarlyRequest), until its Splice is installed:
//     the next Tick then passes it to the host as if it had just come
//     (releaseHeld). The server cannot answer what it has not seen, so no
//     reply comes before the Splice, and the service time starts when
//     the kernel gets the request. A held segment whose Splice never
//     comes goes after the handshake window, dropped;
//   - when the pool is full, or the segment is too large for it (a GRO'd
//     super-frame), it passes: the handshake record notes the request's
//     arrival (noteEarlyRequest), and AddSplice starts the entry with it
//     in service; a reply that comes before the Splice is then dropped
//     and counted (replyBeforeSplice), and the kernel sends it again after
//     its retransmission timeout, translated then. Its pure ACKs and RSTs
//     pass, as they always did before a Splice.
//
// Only a C2 tuple whose SYN-ACK the shim recorded within the handshake
// window is concerned: any other connection of the host passes as ever.

// earlyRequest is what a handshake record keeps of request bytes that
// crossed the shim before the Splice.
type earlyRequest struct {
	seen bool
	at   Time     // the first byte's arrival
	end  wire.Seq // past the last request byte seen
	head bool     // a HEAD request: its response has no body
	fin  bool     // the client's FIN came with it
}

// noteEarlyRequest records a segment from the wire for the host on key,
// a tuple with no entry, if it is request data of a recorded handshake:
// its sequence numbers must continue the handshake exactly as the
// front-end's do (the first byte at the front-end's ISN + 1,
// acknowledging the kernel's SYN-ACK), so a guessed segment cannot start
// a measurement; later ones only extend it.
func (s *Shim) noteEarlyRequest(key fourTuple, t wire.TCP, now Time) {
	n := len(t.Payload())
	if n == 0 || !s.isWebPort(key.srcPort) {
		return
	}
	hs, err := s.handshakes.find(key, now)
	if err != nil {
		return
	}
	seq, end := t.Seq(), t.Seq()+wire.Seq(n)
	r := &hs.early
	switch {
	case !r.seen:
		if seq != hs.isnF+1 || !t.Has(wire.TCPFlagACK) || t.Ack() != hs.isnB+1 {
			return
		}
		*r = earlyRequest{seen: true, at: now, end: end, head: bytes.HasPrefix(t.Payload(), []byte("HEAD "))}
	case seq.LessEq(r.end) && r.end.LessThan(end):
		r.end = end
	default:
		return
	}
	r.fin = r.fin || t.Has(wire.TCPFlagFIN)
	s.stats.EarlyRequests++
	s.handshakes.update(key, hs)
}

// replyBeforeSplice reports whether a segment of the host on key, a tuple
// with no entry, is a reply that must wait for the Splice: data or a FIN
// on a recorded C2 handshake. The caller drops it.
func (s *Shim) replyBeforeSplice(key fourTuple, t wire.TCP, now Time) bool {
	if len(t.Payload()) == 0 && !t.Has(wire.TCPFlagFIN) || t.Has(wire.TCPFlagSYN) || t.Has(wire.TCPFlagRST) {
		return false
	}
	if !s.isWebPort(key.srcPort) {
		return false
	}
	if _, err := s.handshakes.find(key, now); err != nil {
		return false
	}
	s.stats.RepliesBeforeSplice++
	return true
}

// startEarlyRequest puts the request that crossed before the Splice in
// service on the new entry, as observeRequest would have.
func (s *Shim) startEarlyRequest(ent *spliceEntry, r earlyRequest) {
	if !r.seen {
		return
	}
	ent.reqNxt = r.end
	s.startService(ent, r.at, r.head)
	ent.cliFin = r.fin
	ent.lastSeen = max(ent.lastSeen, r.at)
}

// Held request segments (see the top of this file).
const (
	// heldSlots bounds the segments held at once per shim shard: the
	// requests of the handoffs whose Splice is a few tens of microseconds
	// behind, a few at a time.
	heldSlots = 64
	// heldSlotSize is a slot's buffer: an MTU-sized frame and its
	// headers. A larger one (a super-frame) is not held.
	heldSlotSize = 2048
	// heldPerTuple bounds the slots one C2 tuple may take: a request of a
	// few segments; more pass.
	heldPerTuple = 8
)

type heldSegment struct {
	inUse bool
	key   fourTuple
	vh    wire.VNetHdr
	at    Time
	n     int    // the frame's length; 0 while a carried request waits
	buf   []byte // heldSlotSize, from the pool
	// A request carried in its Splice, waiting for its SYN-ACK
	// (shim_carry.go): reqLen bytes at buf[carriedHeaderRoom:], and its
	// segment's window and TSval.
	carried bool
	// inSYN: the request went in C2's SYN, sequence number synSeq
	// (shim_fastopen.go); its SYN-ACK is to say whether the kernel took it.
	inSYN  bool
	synSeq wire.Seq
	// forReuse: a request on a pooled C2 waiting for the Splice that
	// moves the C2 to its client, which the reuse option names by its
	// numbers (shim_pool.go holdForReuse).
	forReuse bool
	reuseID  [2]uint32
	reqEnd   wire.Seq // the Splice's RequestEnd
	reqID    uint64   // the Splice's RequestID
	reqLen   int
	// fastOpen: the Splice said its SYN asks for Fast Open
	// (proto.SpliceImplicitAck); keepsCookie: for a cookie the front-end
	// keeps, so the shim passes that SYN as it came
	// (proto.SpliceKeepsCookie).
	fastOpen, keepsCookie bool
	window                uint16
	tsVal                 uint32
}

// heldPool is a shard's held segments; release: a Splice was installed
// since the last Tick, so Tick has segments to pass.
type heldPool struct {
	slots   []heldSegment
	n       int
	release bool
}

func newHeldPool() heldPool {
	buf := make([]byte, heldSlots*heldSlotSize)
	p := heldPool{slots: make([]heldSegment, heldSlots)}
	for i := range p.slots {
		p.slots[i].buf = buf[i*heldSlotSize : (i+1)*heldSlotSize : (i+1)*heldSlotSize]
	}
	return p
}

// holdEarlyRequest holds frame, a segment from the wire for the host on
// key, a tuple with no entry, if it is request data of a recorded
// handshake and there is room; it reports whether it did. A segment must
// acknowledge exactly the kernel's SYN-ACK and lie within the request
// bytes a Splice may announce (MaxRequestAhead), so one that a guesser
// sends on a recent tuple takes a slot only until the handshake window
// ends, and the pool's bound is all it can fill.
func (s *Shim) holdEarlyRequest(key fourTuple, frame []byte, vh wire.VNetHdr, t wire.TCP, now Time) bool {
	if len(t.Payload()) == 0 || len(frame) > heldSlotSize || vh.IsGSO() || !s.isWebPort(key.srcPort) {
		return false
	}
	hs, err := s.handshakes.find(key, now)
	if err != nil || !t.Has(wire.TCPFlagACK) || t.Ack() != hs.isnB+1 || uint32(t.Seq()-(hs.isnF+1)) >= s.cfg.MaxRequestAhead {
		return false
	}
	h, mine := s.scanHeld(key, now)
	if h == nil || mine >= heldPerTuple {
		s.stats.HeldFull++
		return false
	}
	h.inUse, h.key, h.vh, h.at, h.n = true, key, vh, now, copy(h.buf, frame)
	s.held.n++
	s.stats.HeldRequests++
	return true
}

// scanHeld drops the held slots whose Splice did not come within the
// handshake window, and returns the first free slot (nil: none) and how
// many key holds.
func (s *Shim) scanHeld(key fourTuple, now Time) (free *heldSegment, mine int) {
	for i := range s.held.slots {
		h := &s.held.slots[i]
		if h.inUse && now.Sub(h.at) > s.cfg.HandshakeWindow {
			s.dropHeld(h) // its Splice never came
		}
		switch {
		case !h.inUse:
			if free == nil {
				free = h
			}
		case h.key == key:
			mine++
		}
	}
	return free, mine
}

// freeHeld gives slot h back to the pool.
func (s *Shim) freeHeld(h *heldSegment) {
	h.inUse, h.carried, h.inSYN, h.forReuse = false, false, false, false
	s.held.n--
}

func (s *Shim) dropHeld(h *heldSegment) {
	s.freeHeld(h)
	s.stats.HeldExpired++
}

// heldDeadline is when Tick has held segments to pass or to drop.
func (s *Shim) heldDeadline() Time {
	p := &s.held
	if p.n == 0 {
		return Never
	}
	if p.release {
		return 0
	}
	next := Never
	for i := range p.slots {
		if h := &p.slots[i]; h.inUse {
			next = min(next, h.at.Add(s.cfg.HandshakeWindow)+1)
		}
	}
	return next
}

// releaseHeld passes the held segments whose Splice is now installed to
// the host, in the order they were taken, as if they had just come from
// the wire (so the entry sees its request arrive), each copied into out
// first (the slot is free again at once); it drops those whose handshake
// window is over.
func (s *Shim) releaseHeld(now Time, out *Output) {
	p := &s.held
	p.release = false
	for p.n > 0 {
		first := -1
		for i := range p.slots {
			h := &p.slots[i]
			if !h.inUse {
				continue
			}
			if now.Sub(h.at) > s.cfg.HandshakeWindow {
				s.dropHeld(h)
				continue
			}
			if !h.carried && s.heldReady(h) && (first < 0 || h.at < p.slots[first].at) {
				first = i
			}
		}
		if first < 0 {
			return
		}
		h := &p.slots[first]
		b := out.alloc(h.n)
		copy(b, h.buf[:h.n])
		h.inUse, h.forReuse = false, false
		p.n--
		s.stats.HeldReleased++
		s.InputVNet(PortWire, b, h.vh, now, out)
	}
}
