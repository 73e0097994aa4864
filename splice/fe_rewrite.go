package splice

import (
	"errors"
	"slices"

	"github.com/qsplice/qsplice/splice/httphead"
	"github.com/qsplice/qsplice/splice/wire"
)

// The front-end's side of request rewriting: see rewrite.go for the
// sequence spaces and who owns which bytes.

// Errors from Rewrite.
var (
	ErrRewriteBusy = errors.New("splice: the last rewritten request target is not acknowledged yet")
	ErrBadPath     = errors.New("splice: not a usable request path")
)

// maxPathLen bounds a replacement path; with the rest of the head it
// still has to fit the back-end's limits, which are the operator's.
const maxPathLen = 4096

// Rewrite asks that the request about to go to the back-end be sent with
// path as its request-target's path instead of the client's (the query
// string stays, and so do an absolute-form target's scheme and host): a
// queued first request (call it before Dispatch) or a waiting follow-up
// (before Admit). Which path to serve is the caller's policy; the engine
// only substitutes the bytes, which it copies, and keeps the sequence
// numbers of both sides right for the rest of the connection. A request
// whose target has no path of its own ("*", "http://host") is not
// rewritten (ErrFlowState). A follow-up cannot be rewritten
// while the back-end has not acknowledged the previous rewritten target
// (ErrRewriteBusy, rare: only a client pipelining faster than the
// back-end acknowledges); the caller then admits it as it is.
func (e *FrontEnd) Rewrite(id FlowID, path []byte) error {
	f := e.byID[id]
	if f == nil {
		return ErrNoFlow
	}
	if !usablePath(path) {
		return ErrBadPath
	}
	var head []byte
	switch {
	case f.state == stQueued:
		head = f.buf
	case f.state == stSpliced && f.kaState == kaWaiting:
		if f.reqUna.LessThan(f.reqEnd) {
			e.stats.RewriteBusy++
			return ErrRewriteBusy
		}
		head = f.kaBuf
	default:
		return ErrFlowState
	}
	req := &e.head
	if httphead.Parse(head, e.cfg.MaxHead, req) != nil || len(req.Path) == 0 || req.Path[0] != '/' {
		return ErrFlowState // no path of its own (the head parsed when it was reported)
	}
	// Path is a sub-slice of head: its offset is the difference in
	// capacity.
	f.rwAt, f.rwOldLen = cap(head)-cap(req.Path), len(req.Path)
	f.rwTarget = append(f.rwTarget[:0], path...)
	f.rwPending = true
	return nil
}

// usablePath accepts an absolute path that keeps the request line one
// request line and the client's query its query: visible ASCII from a
// '/', no '?' or '#'.
func usablePath(p []byte) bool {
	if len(p) == 0 || len(p) > maxPathLen || p[0] != '/' {
		return false
	}
	for _, c := range p {
		if c <= ' ' || c >= 0x7f || c == '?' || c == '#' {
			return false
		}
	}
	return true
}

// applyFirstRewrite replaces the target in the buffered first request
// when C2 is up (c2Established), before the request's end and the Splice
// are computed: from then on f.buf holds the back-end's bytes, which the
// front-end sends and resends (sendRequest).
func (e *FrontEnd) applyFirstRewrite(f *flow) {
	if !f.rwPending {
		return
	}
	f.rwPending = false
	if f.rwAt+f.rwOldLen > len(f.buf) {
		return // cannot happen: the head is buffered whole
	}
	f.buf = slices.Replace(f.buf, f.rwAt, f.rwAt+f.rwOldLen, f.rwTarget...)
	start := f.syn.clientISN + 1 + wire.Seq(f.rwAt)
	f.rw = rewriteRec{on: true,
		startC: start, endC: start + wire.Seq(f.rwOldLen),
		startB: start, endB: start + wire.Seq(len(f.rwTarget)),
		after: uint32(len(f.rwTarget) - f.rwOldLen),
	}
	f.rwFollow = false
	e.stats.Rewrites++
}

// flushAdmitted sends the first n held bytes of an admitted follow-up
// (and the FIN, if asked), with its target rewritten when Rewrite asked
// for it: the new target goes with the rewrite option on every segment
// that carries a byte of it, and the front-end keeps it until the
// back-end acknowledges it (f.reqEnd, resent by the request timer).
func (e *FrontEnd) flushAdmitted(f *flow, n int, fin bool, now Time, out *Output) {
	if !f.rwPending || f.rwAt+f.rwOldLen > n {
		f.rwPending = false
		e.flushHeld(f, n, fin, out)
		return
	}
	f.rwPending = false
	startC := f.nextReq + wire.Seq(f.rwAt)
	r := rewriteRec{on: true, startC: startC, endC: startC + wire.Seq(f.rwOldLen)}
	r.startB = f.rw.toB(startC)
	r.before = uint32(r.startB - startC)
	r.endB = r.startB + wire.Seq(len(f.rwTarget))
	r.after = r.before + uint32(len(f.rwTarget)-f.rwOldLen)
	f.rw, f.rwFollow = r, true

	// The back-end's bytes, contiguous, from the head's first byte.
	b := append(e.rwScratch[:0], f.kaBuf[:f.rwAt]...)
	b = append(b, f.rwTarget...)
	b = append(b, f.kaBuf[f.rwAt+f.rwOldLen:n]...)
	e.rwScratch = b
	base := f.nextReq + wire.Seq(r.before)
	e.sendRewritten(f, base, b, fin, out)
	f.nextReq += wire.Seq(n)
	if end := f.nextReq; f.cliNxt.LessThan(end) {
		f.cliNxt = end
	}
	if fin {
		f.nextReq++
		f.kaFin = false
	}
	f.kaBuf = append(f.kaBuf[:0], f.kaBuf[n:]...)
	f.reqEnd = r.endB
	f.reqNxt = r.endB
	f.retries = 0
	f.rto = now.Add(e.cfg.RTOMin)
	e.armSplicedTimer(f, now)
	e.stats.Rewrites++
}

// sendRewritten sends b, back-end bytes from seq base, in segments on C2;
// those that carry a byte of the new target carry the rewrite option.
func (e *FrontEnd) sendRewritten(f *flow, base wire.Seq, b []byte, fin bool, out *Output) {
	mss := f.c2MSS() - wire.TSOptionLen - rewriteOptLen
	for off := 0; off < len(b) || fin && off == len(b); {
		k := min(mss, len(b)-off)
		seq := base + wire.Seq(off)
		var flags uint8
		if fin && off+k == len(b) {
			flags = wire.TCPFlagFIN
		}
		withOpt := seq.LessThan(f.rw.endB) && f.rw.startB.LessThan(seq+wire.Seq(k))
		e.sendC2At(f, nil, nil, seq, b[off:off+k], flags, withOpt, out)
		off += k
		if flags != 0 {
			break
		}
	}
}

// resendRewrittenTarget is the request timer's retransmission for a
// rewritten follow-up: the new target from the back-end's last ACK. The
// client resends everything else itself.
func (e *FrontEnd) resendRewrittenTarget(f *flow, now Time, out *Output) {
	from := f.rw.startB
	if from.LessThan(f.reqUna) {
		from = f.reqUna
	}
	if from.LessThan(f.rw.endB) {
		e.stats.RewriteResent++
		e.sendRewritten(f, from, f.rwTarget[from-f.rw.startB:], false, out)
	}
	f.rto = now.Add(e.cfg.RTOMin << f.retries)
}

// sendC2Around sends a client segment's payload p (client numbers from
// seq) that overlaps the replaced target: the bytes before and after it
// go on in the back-end's numbers, the target's own bytes are absorbed
// (the front-end sent the new target). With nothing left to send, the
// segment's ACK, SACK and window still go on, at the end of what reached
// C2. It reports false when p does not touch the target.
func (e *FrontEnd) sendC2Around(f *flow, t wire.TCP, o *wire.TCPOptions, seq wire.Seq, p []byte, extra uint8, out *Output) bool {
	r := &f.rw
	end := seq + wire.Seq(len(p))
	if !r.on || len(p) == 0 || !seq.LessThan(r.endC) || !r.startC.LessThan(end) {
		return false
	}
	e.stats.RewriteAbsorbed++
	sent := false
	if seq.LessThan(r.startC) {
		e.sendC2At(f, t, o, seq+wire.Seq(r.before), p[:r.startC-seq], 0, false, out)
		sent = true
	}
	switch {
	case r.endC.LessThan(end):
		e.sendC2At(f, t, o, r.endB, p[r.endC-seq:], extra, false, out)
		sent = true
	case extra&wire.TCPFlagFIN != 0:
		e.sendC2At(f, t, o, r.endB, nil, extra, false, out)
		sent = true
	}
	if end.LessThan(f.cliNxt) {
		end = f.cliNxt
	}
	if !sent {
		e.sendC2At(f, t, o, r.toB(end), nil, 0, false, out)
	}
	f.cliNxt = end
	return true
}
