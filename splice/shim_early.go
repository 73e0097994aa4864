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
// the shim's wire and TAP ahead of the request's segment, so the shim
// normally holds the entry before the server can answer. Two things may
// still come before it, and each is handled so that nothing goes wrong,
// only late:
//
//   - the request itself, when the shim reads its wire before the
//     kernel delivered the datagram: the handshake record notes the
//     request's arrival (noteEarlyRequest), and AddSplice starts the
//     entry with that request in service, so its service time runs from
//     its real arrival and its Feedback comes;
//   - a reply of the server, when the Splice was slow or lost: it would
//     leave untranslated, towards the handoff address, and put response
//     bytes on the front-end's link. It is dropped and counted
//     (replyBeforeSplice): the kernel sends it again after its
//     retransmission timeout, translated then. Its pure ACKs and RSTs
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
	ent.inService = true
	ent.reqStart = r.at
	ent.headRequest = r.head
	ent.cliFin = r.fin
	ent.lastSeen = max(ent.lastSeen, r.at)
	s.active++
	s.stats.PeakActive = max(s.stats.PeakActive, uint64(s.active))
}
