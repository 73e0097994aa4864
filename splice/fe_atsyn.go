package splice

// The Splice sent with C2's SYN (issue 7; the shim's side and why:
// shim_atsyn.go).
//
// Dispatch sends it when the first request is in the buffer whole (its
// length known, every byte of it here) and not rewritten, so that
// RequestEnd cannot move before the SYN-ACK. Of the numbers that come
// from the SYN-ACK, the front-end fixes one in advance: the client-facing
// TSval the SYN-ACK's maps to, tsBase = our clock at dispatch + 1. The
// rule of the classic handoff (design trap 2) is that translated TSvals
// run one ahead of our own to the client, so the client's PAWS check
// takes both. With tsBase fixed early that holds if our own stay one
// behind it: until the SYN-ACK they do not pass tsBase - 1, and from the
// SYN-ACK on they lag our clock by the milliseconds it took to come
// (tsLag, usually 0). Both daemons then compute the same tsOffset, as
// they compute the same seqDelta and window shift from the same SYN-ACK.
//
// The shim acknowledges such a Splice when the SYN-ACK completed it, so
// the SpliceAck may come before the SYN-ACK reaches us: SpliceAcked and
// HoldSplice remember it in the connecting state (atSYNGo, spliceHeld),
// and the SYN-ACK then does what they would have done.

import (
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// spliceWithSYN sends f's Splice now, with C2's SYN, when it may, and
// with carry lets it carry the request when that fits one.
func (e *FrontEnd) spliceWithSYN(f *flow, carry bool, now Time, out *Output) {
	if !e.cfg.SpliceAtSYN || f.rwPending || f.rw.on || f.reqSpan < 0 || int64(len(f.buf)) != f.reqSpan {
		return
	}
	f.atSYN, f.atSYNGo = true, false
	f.tsBase, f.tsLag = tsClock(now)+1, 0
	m := e.spliceMessage(f)
	m.Flags |= proto.SpliceAtSYN
	m.SeqDelta, m.TSOffset, m.WScaleBackend = uint32(f.isnF), f.tsBase, 0
	m.RequestEnd = uint32(f.requestEnd())
	m.Flags &^= proto.SpliceTimestamps
	if f.syn.ts {
		m.Flags |= proto.SpliceTimestamps // offered on C2; in use if the kernel answers
	}
	if carry && !f.finInBuf && len(f.buf) > 0 && len(f.buf) <= proto.MaxSpliceRequest {
		// The segment sendRequest would send, but for its ACK and echo,
		// which the shim takes from the SYN-ACK. The bytes are f.buf's
		// until the Splice is encoded, in this pass.
		m.Flags |= proto.SpliceRequest
		m.Request, m.RequestWindow, m.RequestTSVal = f.buf, f.cliWin, f.tsRecent
		f.carried = true
		if e.asksFastOpen(f) {
			// A SYN-ACK that acknowledges the request in the SYN will
			// tell us the shim has this Splice (proto.SpliceImplicitAck).
			m.Flags |= proto.SpliceImplicitAck
			f.implicitAck = true
			if e.cfg.FastOpenInSYN && e.foCookies.cookie(f.bIP) == nil {
				// Its SYN asks for the cookie the next SYNs carry: the
				// shim is not to answer it with its own (it may hold
				// one from before this front-end started), or the
				// kernel's SYN-ACK brings none.
				m.Flags |= proto.SpliceKeepsCookie
			}
		}
		f.tl.Carried = true
		f.tl.requestSent(now, len(f.buf)) // it leaves the front-end now
		e.stats.RequestsCarried++
	}
	e.stats.SplicesAtSYN++
	out.event(Event{Kind: EvSplice, Flow: f.id, Backend: f.backend.ID, Splice: m})
}

// carriedRequestSent does for a request its Splice carried what sending
// it would: the shim sent it when the SYN-ACK passed (shim_carry.go), or,
// if it could not, the retransmission timer sends it from here.
func (e *FrontEnd) carriedRequestSent(f *flow, now Time) {
	f.carried = false
	f.reqNxt = f.reqEnd
	f.rto = now.Add(e.cfg.RTOMin << f.retries)
	e.stats.HandedOffBytes += uint64(len(f.buf))
}

// atSYNOffset is tsOffset for f's Splice sent with the SYN, whose SYN-ACK
// carried TSval tsB: the shim's, from the same numbers. From now on our
// own TSvals lag our clock by what it moved past tsBase - 1.
func (e *FrontEnd) atSYNOffset(f *flow, tsB uint32, now Time) uint32 {
	if d := int32(tsClock(now) + 1 - f.tsBase); d > 0 {
		f.tsLag = uint32(d)
		e.stats.SplicesAtSYNLagged++
	}
	return f.tsBase - tsB
}

// atSYNEstablished finishes c2Established for a Splice sent with the SYN:
// nothing more to send the shim; the request goes now if the SpliceAck
// came first, else it waits for it like any other.
func (e *FrontEnd) atSYNEstablished(f *flow, now Time, out *Output) {
	switch {
	case f.atSYNGo:
		f.atSYNGo = false
		_ = e.SpliceAcked(f.id, now, out) // f is in stSpliceWait: it cannot fail
	case f.spliceHeld:
		e.setDeadline(f, now.Add(e.cfg.IdleTimeout)) // as HoldSplice does
	default:
		e.setDeadline(f, now.Add(3*e.cfg.HandoffTimeout))
	}
}

// ownTSval is the TSval of a segment we send the client ourselves at now.
func (f *flow) ownTSval(now Time) uint32 {
	v := tsClock(now) - f.tsLag
	if f.atSYN && f.state == stConnecting && int32(v-(f.tsBase-1)) > 0 {
		v = f.tsBase - 1
	}
	return v
}

// c2Start is C2's sequence number of the client's first byte: the
// client's own on a C2 opened for it (its SYN used the client's ISN), C2's
// next byte on a pooled one (fe_pool.go).
func (f *flow) c2Start() wire.Seq { return f.c2First }

// requestEnd is the sequence number on C2 just past the first request
// (and the client's FIN, when it came with it).
func (f *flow) requestEnd() wire.Seq {
	end := f.c2Start() + wire.Seq(len(f.buf))
	if f.finInBuf {
		end++
	}
	return end
}
