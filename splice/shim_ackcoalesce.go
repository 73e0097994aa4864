package splice

import (
	"encoding/binary"

	"github.com/qsplice/qsplice/splice/wire"
)

// Coalescing the front-end's pure ACKs on their way into the back-end's
// kernel (issue 7). Each frame from the wire to the host is a write(2) on
// the TAP, which takes no batches; under bulk load most of them are the
// client's ACKs, translated by the front-end, several per flow in one
// pass. The front-end already merges those of its own passes
// (fe_ackcoalesce.go); a shim's pass often spans several of them, so the
// shim applies the same rule: a pure ACK that advances the
// acknowledgement, accepted as the kernel will accept it, is written over
// the connection's previous pure ACK in this pass's output when nothing
// else of the connection came between. Duplicate ACKs, SACK blocks, data,
// SYN, FIN and RST keep every frame.

// onlyTimestamps: t carries no option but, at most, a timestamp in its
// usual NOP NOP TS layout (so no SACK blocks, no window probe option).
func onlyTimestamps(t wire.TCP) bool {
	opts := t[20:t.HeaderLen()]
	switch len(opts) {
	case 0:
		return true
	case wire.TSOptionLen:
		return binary.BigEndian.Uint32(opts) == 0x0101080a // NOP NOP TS(8) len 10
	}
	return false
}

// coalesceWireAck passes frame (ent's segment t from the wire, accepted)
// to the host, over ent's previous pure ACK of this output if it may
// replace it, and reports true; false: the caller passes it.
func (s *Shim) coalesceWireAck(ent *spliceEntry, t wire.TCP, frame []byte, vh wire.VNetHdr, out *Output) bool {
	advanced := false
	if t.Flags()&wire.TCPFlagACK != 0 && (!ent.wireAckSeen || ent.wireAck.LessThan(t.Ack())) {
		ent.wireAck, ent.wireAckSeen, advanced = t.Ack(), true, true
	}
	pure := len(t.Payload()) == 0 && t.Flags()&^wire.TCPFlagPSH == wire.TCPFlagACK && onlyTimestamps(t)
	p := &ent.pendAck
	if !pure || !advanced {
		*p = pendingAck{idx: -1} // it keeps its place, and so do those before it
		return false
	}
	if p.idx >= 0 && p.out == out && p.gen == out.gen && p.idx < len(out.Frames) &&
		len(out.Frames[p.idx].Data) == len(frame) {
		copy(out.Frames[p.idx].Data, frame)
		out.Frames[p.idx].VNet = vh
		s.stats.AcksCoalesced++
		return true
	}
	s.pass(PortWire, frame, vh, out)
	*p = pendingAck{out: out, gen: out.gen, idx: len(out.Frames) - 1, ack: t.Ack()}
	return true
}
