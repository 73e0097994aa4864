package splice

// The request carried in its Splice (issue 7, proto.SpliceRequest).
//
// With the Splice sent at the SYN (shim_atsyn.go), the request still
// waited for the kernel's SYN-ACK to cross the shim, reach the front-end
// and come back as the request's segment: a crossing of the wire each
// way and a wake-up of each daemon on the first byte's path. A Splice
// may carry the request instead (the front-end's -early-request: a safe
// request whose back-end has a slot free), and the shim writes the
// segment the front-end would have sent to its host itself, in the pass
// that completes the Splice: sequence number just after the SYN's,
// acknowledging the kernel's SYN-ACK, with the front-end's window and
// TSval and the SYN-ACK's TSval echoed, addressed like the front-end's
// frames. It is the handshake's third segment, so the kernel's
// connection is established by it, as it would be by the front-end's.
//
// The request waits in a slot of the held pool (shim_early.go) from the
// Splice to its SYN-ACK, as bytes with room for the headers in front;
// completing the Splice writes the headers there and marks the slot for
// the next Tick, which passes it to the host as if it came from the wire
// (so the entry sees its request arrive, as any other). That Tick runs in
// the same pass (backend/worker.go). A request that finds no slot is not
// sent by the shim: the front-end, which counts it sent, sends it again
// after its retransmission timeout, and the shim passes or holds that
// copy like any request. The segment is built only for the exact
// handshake: its bytes must end at RequestEnd and start right after the
// SYN the kernel answered.

import (
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// carriedHeaderRoom is the room left in front of a carried request in its
// slot: the longest headers its segment can have.
const carriedHeaderRoom = wire.EthernetHeaderLen + wire.IPv4MinHeaderLen + wire.TCPMinHeaderLen + wire.TSOptionLen

// carriedSlot is the held slot keeping key's carried request, or nil.
func (s *Shim) carriedSlot(key fourTuple) *heldSegment {
	p := &s.held
	for i := range p.slots {
		if h := &p.slots[i]; h.inUse && h.carried && h.key == key {
			return h
		}
	}
	return nil
}

// keepCarried copies the request m carries into a held slot of key, to
// wait for the SYN-ACK; false when no slot is free (counted).
func (s *Shim) keepCarried(key fourTuple, m *proto.Splice, now Time) bool {
	if len(m.Request) == 0 || len(m.Request) > proto.MaxSpliceRequest {
		return false
	}
	h := s.carriedSlot(key)
	if h == nil {
		if h, _ = s.scanHeld(key, now); h == nil {
			s.stats.CarriedNoRoom++
			return false
		}
		s.held.n++
	}
	h.inUse, h.carried, h.key, h.vh, h.at = true, true, key, wire.VNetHdr{}, now
	h.n, h.inSYN = 0, false // not a frame yet, nor in a SYN
	if s.fo.nSYN > 0 {
		s.fo.release = true // its SYN may be waiting for it (shim_fastopen.go)
	}
	h.reqID, h.reqLen = m.RequestID, copy(h.buf[carriedHeaderRoom:], m.Request)
	h.reqEnd = wire.Seq(m.RequestEnd)
	h.fastOpen = m.Flags&proto.SpliceImplicitAck != 0
	h.keepsCookie = m.Flags&proto.SpliceKeepsCookie != 0
	h.window, h.tsVal = m.RequestWindow, m.RequestTSVal
	return true
}

// sendCarried builds key's carried request into its segment for the
// handshake hs of the Splice r now installed, and has the next Tick pass
// it to the host.
func (s *Shim) sendCarried(key fourTuple, hs *handshake, r *proto.Splice) {
	h := s.carriedSlot(key)
	if h == nil {
		return
	}
	if h.reqID != r.RequestID || wire.Seq(r.RequestEnd) != hs.isnF+1+wire.Seq(h.reqLen) {
		// Another Splice's, or not the whole request right after the
		// SYN the kernel answered.
		s.stats.CarriedRefused++
		s.freeHeld(h)
		return
	}
	var ob [wire.TSOptionLen]byte
	var opts []byte
	if r.Flags&proto.SpliceTimestamps != 0 {
		opts = ob[:wire.EncodeTS(ob[:], h.tsVal, hs.tsVal)]
	}
	if hs.byFrontEnd {
		// The front-end's own SYN brought the request, and the
		// front-end sends the handshake's last ACK (fe_handoff.go).
		s.freeHeld(h)
		return
	}
	seq, flags, payload := hs.isnF+1, uint8(wire.TCPFlagACK|wire.TCPFlagPSH), h.buf[carriedHeaderRoom:carriedHeaderRoom+h.reqLen]
	if hs.inSYN {
		// The kernel took the request with the SYN (shim_fastopen.go):
		// what is left to send is the handshake's last ACK.
		seq, flags, payload = seq+wire.Seq(h.reqLen), wire.TCPFlagACK, nil
	}
	// Written in place: the headers end where the bytes start, or the
	// bytes move forward over the unused option room (copy is a memmove).
	tf := wire.TCPFrame{
		SrcMAC: hs.peerMAC, DstMAC: hs.hostMAC,
		Src: key.dstIP, Dst: key.srcIP, SrcPort: key.dstPort, DstPort: key.srcPort,
		Seq: seq, Ack: hs.isnB + 1, Flags: flags,
		Window: h.window, Options: opts, Payload: payload,
	}
	h.n = tf.Encode(h.buf)
	h.carried = false // a frame now, released like a held one
	s.held.release = true
	s.stats.CarriedRequests++
}
