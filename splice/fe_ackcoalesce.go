package splice

import "github.com/qsplice/qsplice/splice/wire"

// Coalescing the client's pure ACKs (issue 7). A daemon feeds the engine
// every frame one pass read, and under load a spliced client's ACKs come
// several to a pass: each would be a frame on C2, written to the
// back-end's TAP by its shim one system call apiece, and processed by the
// back-end's kernel one by one, for the same news the last one brings. So
// when a pure ACK of a spliced flow is forwarded and the flow's previous
// pure ACK is still in this pass's output, with nothing else of the flow
// after it, the new one (translated, checksum and all) is written over
// the old one instead of being sent too: one frame, the latest word.
//
// Only a pure ACK that advances the acknowledgement replaces another:
// duplicate ACKs are how the back-end learns of a loss (three make it
// retransmit), so they all go. ACKs with SACK blocks, window probes and
// anything carrying data, SYN, FIN or RST are never merged, nor merged
// into. Linux receives such stretch ACKs from every GRO-capable NIC and
// counts acknowledged bytes, not ACKs, when it grows its window.

// pendingAck is a flow's last forwarded pure ACK in the current output.
type pendingAck struct {
	// out and gen name the output it is in: the Output, and its Reset
	// count then. Both, since a flow's frames can go into another
	// shard's Output (the controller's calls) whose count may match.
	out *Output
	gen uint64
	idx int      // its index in Output.Frames; -1: none
	ack wire.Seq // its acknowledgement number, client-facing
}

// pureAck: a segment that only acknowledges (no data, no SYN, FIN, RST,
// no SACK blocks).
func pureAck(t wire.TCP, payload int, numSACK int) bool {
	return payload == 0 && numSACK == 0 && t.Flags()&^wire.TCPFlagPSH == wire.TCPFlagACK
}

// coalesceAck writes frame, the translated pure ACK of f acknowledging
// ack (client-facing), over f's previous pure ACK in out if it may
// replace it, and reports whether it did; otherwise the caller sends it
// and records it with notePureAck.
func (e *FrontEnd) coalesceAck(f *flow, frame []byte, ack wire.Seq, out *Output) bool {
	p := &f.pendAck
	if p.idx < 0 || p.out != out || p.gen != out.gen || p.idx >= len(out.Frames) || !p.ack.LessThan(ack) {
		return false
	}
	prev := out.Frames[p.idx].Data
	if len(prev) != len(frame) {
		return false // another option layout: not worth a rewrite
	}
	copy(prev, frame)
	p.ack = ack
	e.stats.AcksCoalesced++
	return true
}

// notePureAck records that f's pure ACK acknowledging ack is the last
// frame in out at index idx.
func (f *flow) notePureAck(out *Output, ack wire.Seq) {
	f.pendAck = pendingAck{out: out, gen: out.gen, idx: len(out.Frames) - 1, ack: ack}
}

// clearPendingAck: something else of f went out after its pure ACK, which
// must now keep its place.
func (f *flow) clearPendingAck() { f.pendAck = pendingAck{idx: -1} }
