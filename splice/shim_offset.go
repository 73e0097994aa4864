package splice

import (
	"encoding/binary"
	"fmt"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// The shim's side of request rewriting (rewrite.go): it translates what
// the back-end's kernel says about request bytes -- the ACK number and
// the SACK edges of its replies -- into the client's numbers.

// spliceRewrite is the correction point a Splice installs: the first
// request's target, rewritten before anything reached the back-end, so
// the two spaces agree before it.
func spliceRewrite(m *proto.Splice) rewriteRec {
	if m.Flags&proto.SpliceRewrite == 0 {
		return rewriteRec{}
	}
	r := rewriteRec{on: true,
		startB: wire.Seq(m.RewriteStart), endB: wire.Seq(m.RewriteEnd),
		after: m.RequestOffset,
	}
	r.startC = r.startB
	r.endC = r.endB - wire.Seq(r.after)
	return r
}

// rewriteFits checks a Splice's rewrite against the request it names:
// the new target lies within the bytes handed over, after the ISN.
func rewriteFits(m *proto.Splice, hs handshake) error {
	if m.Flags&proto.SpliceRewrite == 0 {
		return nil
	}
	first := hs.isnF + 1
	end := wire.Seq(m.RequestEnd)
	start, rwEnd := wire.Seq(m.RewriteStart), wire.Seq(m.RewriteEnd)
	if !first.LessEq(start) || !start.LessEq(rwEnd) || !rwEnd.LessEq(end) {
		return fmt.Errorf("%w: rewritten target %d-%d is not within the request %d-%d",
			ErrSpliceInconsistent, uint32(start), uint32(rwEnd), uint32(first), uint32(end))
	}
	return nil
}

// noteRewrite takes a correction point from the rewrite option of a
// request segment on its way to the kernel: before the kernel can
// acknowledge a byte of the new target, since every segment carrying one
// carries the option. A repeat (a retransmission) changes nothing; a
// point before the one held is stale and ignored (the front-end makes a
// new point only after the last one's target was acknowledged).
func (s *Shim) noteRewrite(ent *spliceEntry, r rewriteRec) {
	switch {
	case r == ent.rw:
		return
	case ent.rw.on && r.startB.LessThan(ent.rw.endB), r.endB.LessThan(r.startB):
		s.stats.RewritesStale++
		return
	}
	ent.rw = r
	ent.rwAcked = false
	s.closeFastPath(ent) // the replies' ACK numbers need translating now
	s.stats.Rewrites++
}

// translateRequestNumbers moves a reply's ACK number and SACK edges,
// which name request bytes, from the back-end's numbers to the client's.
// update keeps a complete checksum exact; without it the checksum field
// holds a partial sum that the device completes.
func translateRequestNumbers(ent *spliceEntry, t wire.TCP, o *wire.TCPOptions, update bool) {
	set := func(off int, v uint32) {
		if update {
			t.SetUint32AtUpdate(off, v)
		} else {
			t.SetUint32At(off, v)
		}
	}
	if t.Has(wire.TCPFlagACK) {
		set(8, uint32(ent.rw.toC(t.Ack(), true)))
	}
	for k := 0; k < o.NumSACK; k++ {
		off := o.SACKOffset + 8*k
		left := ent.rw.toC(wire.Seq(binary.BigEndian.Uint32(t[off:])), false)
		right := ent.rw.toC(wire.Seq(binary.BigEndian.Uint32(t[off+4:])), true)
		if right.LessThan(left) {
			right = left // inside the new target only: an empty block, which the client ignores
		}
		set(off, uint32(left))
		set(off+4, uint32(right))
	}
}
