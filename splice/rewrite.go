package splice

import (
	"encoding/binary"

	"github.com/qsplice/qsplice/splice/wire"
)

// Request rewriting (content adaptation, issue 10).
//
// Serving a degraded content tree means the back-end must read another
// request target than the client sent ("/img/a.jpg" becomes
// "/tree2/img/a.jpg"). The front-end replaces the path of a request
// head's target with the controller's (the query stays), the "target"
// below; from the end of the target on, the
// request direction then has two sequence spaces: the client's (c) and
// the back-end's (b), an offset apart. A rewrite is one correction point:
//
//	client  ... method SP | old target | SP HTTP/1.1 ...
//	           c < startC |  absorbed  | c >= endC
//	back-end  b = c+before| new target | b = c+after
//	           b <= startB|            | b >= endB
//
// Only the newest rewrite of a connection is kept (rewriteRec): a new one
// is made only once the back-end has acknowledged every byte of the last
// (Rewrite refuses with ErrRewriteBusy otherwise), so every request byte
// still unacknowledged lies past the last correction point or before the
// newest, and the bytes before an older point that a client may still
// resend are below the back-end's rcv_nxt, where any offset makes them the
// duplicates they are.
//
// The bytes of the new target belong to the front-end: it sends them,
// retransmits them from its own copy until the back-end acknowledges them
// (reqUna, seen in the shim's header copies, which the shim sends again
// while a rewritten target is unacknowledged), and absorbs the client's
// retransmissions of the old target (their ACK, SACK and window still go
// on, in a header-only segment). The client's retransmissions stop when
// the back-end's ACK, translated by the shim, passes endC.
//
// The shim learns a rewrite before the back-end's kernel can acknowledge a
// byte of it: the first request's from the Splice (RewriteStart,
// RewriteEnd, RequestOffset, acknowledged before the request is sent), a
// follow-up's from a TCP option on every segment that carries new-target
// bytes (rewriteOption), which the shim reads on the segment's way to the
// kernel. The kernel ignores the option (an experimental kind, RFC 6994,
// with our ExID); the front-end blanks the same option in a client's
// segments, so only the front-end can set a connection's offsets.
//
// The shim translates what the back-end's kernel says about request bytes
// into the client's numbers: the ACK number and the SACK edges of every
// reply (toClientSeq). An ACK inside the new target becomes startC (the
// client resends its old target, which the front-end absorbs, rather than
// believe it delivered); a SACK edge inside it shrinks the block, and a
// block that shrinks to nothing is left empty, which the client ignores.
// The client's own ACK and SACK name reply bytes, which no rewrite moves:
// they are translated by seqDelta alone, as before.
type rewriteRec struct {
	on            bool
	startC, endC  wire.Seq // the client's target bytes
	startB, endB  wire.Seq // the back-end's
	before, after uint32   // b - c before startC and from endC on
}

// toB maps a client sequence number into the back-end's numbers. A number
// inside the old target (a pure ACK's, for one) becomes endB: never below
// what the back-end has been sent.
func (r *rewriteRec) toB(c wire.Seq) wire.Seq {
	switch {
	case !r.on:
		return c
	case c.LessEq(r.startC):
		return c + wire.Seq(r.before)
	case r.endC.LessEq(c):
		return c + wire.Seq(r.after)
	}
	return r.endB
}

// toC maps a back-end sequence number into the client's. A number inside
// the new target becomes startC when floor is set (an ACK, a SACK block's
// right edge: claim no more than was delivered), endC otherwise (a SACK
// block's left edge).
func (r *rewriteRec) toC(b wire.Seq, floor bool) wire.Seq {
	switch {
	case !r.on:
		return b
	case b.LessEq(r.startB):
		return b - wire.Seq(r.before)
	case r.endB.LessEq(b):
		return b - wire.Seq(r.after)
	case floor:
		return r.startC
	}
	return r.endC
}

// The in-band rewrite option: kind 254 (RFC 6994 experimental), length
// 20, ExID "QS", then startB, endB, before and after.
const (
	rewriteOptKind = 254
	rewriteOptLen  = 20
	rewriteOptExID = 0x5153
)

// putRewriteOption writes r's option into b (rewriteOptLen bytes).
func putRewriteOption(b []byte, r *rewriteRec) int {
	b[0], b[1] = rewriteOptKind, rewriteOptLen
	binary.BigEndian.PutUint16(b[2:], rewriteOptExID)
	binary.BigEndian.PutUint32(b[4:], uint32(r.startB))
	binary.BigEndian.PutUint32(b[8:], uint32(r.endB))
	binary.BigEndian.PutUint32(b[12:], r.before)
	binary.BigEndian.PutUint32(b[16:], r.after)
	return rewriteOptLen
}

// findRewriteOption returns the offset in t of a rewrite option, or -1.
func findRewriteOption(t wire.TCP) int {
	if off, n := findQSOption(t); n == rewriteOptLen {
		return off
	}
	return -1
}

// findQSOption returns the offset and length of the first of the
// front-end's own options in t (kind 254, ExID "QS": the rewrite option,
// or the reuse option of fe_pool.go), or -1, 0. It walks the options as
// the kernel does: an option that does not fit ends the walk.
func findQSOption(t wire.TCP) (off, n int) {
	hl := t.HeaderLen()
	if hl <= wire.TCPMinHeaderLen || hl > len(t) {
		return -1, 0
	}
	for i := wire.TCPMinHeaderLen; i < hl; {
		switch t[i] {
		case wire.OptEOL:
			return -1, 0
		case wire.OptNOP:
			i++
			continue
		}
		if i+1 >= hl {
			return -1, 0
		}
		n := int(t[i+1])
		if n < 2 || i+n > hl {
			return -1, 0
		}
		if t[i] == rewriteOptKind && (n == rewriteOptLen || n == reuseOptLen) && binary.BigEndian.Uint16(t[i+2:]) == rewriteOptExID {
			return i, n
		}
		i += n
	}
	return -1, 0
}

// parseRewriteOption reads the option at off of t.
func parseRewriteOption(t wire.TCP, off int) rewriteRec {
	r := rewriteRec{on: true,
		startB: wire.Seq(binary.BigEndian.Uint32(t[off+4:])),
		endB:   wire.Seq(binary.BigEndian.Uint32(t[off+8:])),
		before: binary.BigEndian.Uint32(t[off+12:]),
		after:  binary.BigEndian.Uint32(t[off+16:]),
	}
	r.startC = r.startB - wire.Seq(r.before)
	r.endC = r.endB - wire.Seq(r.after)
	return r
}

// blankQSOption turns the front-end's option of n bytes at off into
// NOPs, keeping the checksum exact: a client must not set its
// connection's offsets, nor pass for a request on a pooled C2.
func blankQSOption(t wire.TCP, off, n int) {
	for i := off; i < off+n; i += 4 {
		t.SetUint32AtUpdate(i, 0x01010101)
	}
}
