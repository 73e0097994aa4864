package splice

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"github.com/qsplice/qsplice/splice/httphead"
	"github.com/qsplice/qsplice/splice/wire"
)

// Follow-up requests on a spliced connection.
//
// Keep-alive clients send more requests on a connection that is already
// spliced. They must be scheduled like the first one, or a customer could
// bypass its reservation by reusing connections. The request direction
// still crosses the front-end, so it watches the byte stream for request
// boundaries: nextReq is where the next head starts (client and C2
// sequence numbers are the same). Bytes before it belong to the admitted
// request and are forwarded as they come; bytes from it on are held in
// kaBuf until the head is complete (EvRequest with FollowUp set) and the
// daemon admits it (Admit). Held segments are not acknowledged by anyone,
// so the client keeps them until the back-end acknowledges them: the
// front-end sends them once on admission and the client's own
// retransmissions cover any loss. The ACK, SACK and window a held segment
// carries are forwarded at once in a header-only copy, so the response in
// flight keeps flowing.
//
// A chunked body's end is found by following it (httphead.Chunked): the
// tracker consumes the body in sequence order as it is forwarded
// (kaChunked, nextReq is how far it got), and where it ends the next head
// starts. A segment beyond that point (after a loss) is not forwarded:
// it could hold the body's end and the next request; the client resends
// it (a chunked upload recovers from loss without the back-end's SACK).
// The first request's body is followed the same way while the front-end
// still buffers it (fe_client.go), so a pipelined request behind it is
// not handed over with it.
//
// No request reaches the back-end unscheduled. What the front-end cannot
// follow -- a follow-up head that does not parse (400), one over MaxHead
// (431), a partial head at the client's FIN (400), a chunked body that
// breaks the grammar (400) -- is never forwarded: it is answered in the
// stream once the previous response has ended (fe_refuse.go) and the
// connection closes, as a refused follow-up is. A chunked body that
// breaks after part of it was forwarded leaves its own response open:
// unless the server answers early, the connection is reset after
// RefuseWait.

type kaState uint8

const (
	kaOff     kaState = iota // not tracking: the client's FIN is in, or the flow was taken back
	kaForward                // inside an admitted request; next head at nextReq
	kaCollect                // collecting the next head in kaBuf
	kaWaiting                // head complete, EvRequest sent, waiting for Admit
	kaChunked                // inside an admitted chunked body, followed up to nextReq
)

// ErrNotWaiting: Admit for a flow with no follow-up waiting.
var ErrNotWaiting = errors.New("splice: no follow-up request is waiting on that flow")

// waitingFollowUp returns flow id if a follow-up request waits on it.
func (e *FrontEnd) waitingFollowUp(id FlowID) (*flow, error) {
	f := e.byID[id]
	switch {
	case f == nil:
		return nil, ErrNoFlow
	case f.state != stSpliced || f.kaState != kaWaiting:
		return nil, ErrNotWaiting
	}
	return f, nil
}

// requestSpan is the sequence space of a parsed request: head plus body,
// or -1 when the body is chunked (its end is found by following it).
func requestSpan(r *httphead.Request) int64 {
	if r.Chunked || r.BodyLen < 0 {
		return -1
	}
	return int64(r.HeadLen) + r.BodyLen
}

// followUp decides what happens to a client segment on a spliced flow.
// It returns true when the caller should forward the segment unchanged
// (translated), false when followUp consumed it.
func (e *FrontEnd) followUp(f *flow, p *wire.Packet, o *wire.TCPOptions, now Time, out *Output) bool {
	t := p.TCP
	payload := t.Payload()
	fin := t.Has(wire.TCPFlagFIN)
	if f.kaState == kaOff || (len(payload) == 0 && !fin) || t.Has(wire.TCPFlagRST) {
		return true
	}
	s := t.Seq()
	end := s + wire.Seq(len(payload))
	if f.kaState == kaChunked {
		if forward, handled := e.followChunked(f, t, o, payload, fin, now, out); handled {
			return forward
		}
	}
	if end.LessEq(f.nextReq) && !(fin && end == f.nextReq && f.kaState != kaForward) {
		return true // old bytes of the current request, or its retransmission
	}
	if f.kaState == kaForward && s.LessThan(f.nextReq) {
		// The segment straddles the boundary: the part before it goes on
		// now, the rest starts the next request.
		cut := int(f.nextReq - s)
		e.sendC2(f, t, o, s, payload[:cut], 0, out)
		payload, s = payload[cut:], f.nextReq
	} else {
		// Keep the ACK, SACK and window information flowing. At the
		// back-end's rcv_nxt, which the held bytes have not passed.
		e.sendC2(f, t, o, f.nextReq, nil, 0, out)
	}
	if f.kaState == kaForward {
		f.kaState = kaCollect
		f.kaBuf = f.kaBuf[:0]
	}
	expected := f.nextReq + wire.Seq(len(f.kaBuf))
	switch {
	case expected.LessThan(s):
		e.drop(dropOutOfWindow) // a gap: the client will resend
		return false
	case s.LessThan(expected):
		skip := int(expected - s)
		if skip >= len(payload) {
			payload = nil
		} else {
			payload = payload[skip:]
		}
	}
	if room := e.cfg.RecvBuffer - len(f.kaBuf); len(payload) > room {
		e.drop(dropHoldFull)
		payload, fin = payload[:room], false
	}
	f.kaBuf = append(f.kaBuf, payload...)
	if fin {
		f.kaFin = true
	}
	if f.kaState == kaCollect {
		e.parseFollowUp(f, now, out)
	}
	return false
}

// parseFollowUp looks for a complete head at the start of kaBuf.
func (e *FrontEnd) parseFollowUp(f *flow, now Time, out *Output) {
	req := &e.head
	err := httphead.Parse(f.kaBuf, e.cfg.MaxHead, req)
	switch {
	case err == nil:
		f.kaState = kaWaiting
		f.kaSpan = requestSpan(req)
		f.kaHeadLen = req.HeadLen
		e.stats.Requests++
		e.stats.FollowUps++
		out.event(Event{Kind: EvRequest, Flow: f.id, Backend: f.backend.ID, FollowUp: true,
			Request: e.requestInfo(f, req, out)})
	case errors.Is(err, httphead.ErrIncomplete):
		if !f.kaFin {
			return
		}
		if onlyEmptyLines(f.kaBuf) {
			// A plain close (after CRLFs some clients send behind a
			// body, which servers ignore): nothing to schedule.
			e.flushHeld(f, len(f.kaBuf), true, out)
			f.kaState = kaForward
			return
		}
		e.refuseUnfollowable(f, 400, "request incomplete at end of stream", now, out)
	case errors.Is(err, httphead.ErrTooLarge):
		e.refuseUnfollowable(f, 431, "request head larger than the limit", now, out)
	default:
		// Never forwarded: a server could read a different request in
		// what we cannot parse.
		e.refuseUnfollowable(f, 400, err.Error(), now, out)
	}
}

// onlyEmptyLines reports whether b is nothing but CRLFs.
func onlyEmptyLines(b []byte) bool {
	for i := 0; i+1 < len(b); i += 2 {
		if b[i] != '\r' || b[i+1] != '\n' {
			return false
		}
	}
	return len(b)%2 == 0
}

// refuseUnfollowable answers a request the front-end cannot follow inside
// its stream after the previous response, as a refused follow-up, and
// counts it.
func (e *FrontEnd) refuseUnfollowable(f *flow, status int, reason string, now Time, out *Output) {
	e.stats.FollowUpsUnfollowable++
	e.refuseInStream(f, status, reason, 0, now, out)
}

// followChunked handles a client segment inside an admitted chunked body
// (kaChunked). handled says whether it decided; forward whether the
// segment goes on unchanged. Not handled: the body ended inside the
// segment, nextReq is the next head and followUp carries on from there.
func (e *FrontEnd) followChunked(f *flow, t wire.TCP, o *wire.TCPOptions, payload []byte, fin bool, now Time, out *Output) (forward, handled bool) {
	s := t.Seq()
	end := s + wire.Seq(len(payload))
	switch {
	case end.LessEq(f.nextReq):
		return true, true // body bytes already followed, or a FIN right after them
	case f.nextReq.LessThan(s):
		// A gap: the missing bytes could end the body and this segment
		// start the next request. The client resends; its ACK goes on.
		e.sendC2(f, t, o, f.nextReq, nil, 0, out)
		e.drop(dropOutOfWindow)
		return false, true
	}
	fresh := payload[f.nextReq-s:]
	n, err := f.chunk.Feed(fresh)
	if err != nil {
		e.sendC2(f, t, o, f.nextReq, nil, 0, out)
		f.kaBuf = append(f.kaBuf[:0], fresh[:min(len(fresh), e.cfg.RecvBuffer)]...)
		f.kaFin = fin && len(fresh) <= e.cfg.RecvBuffer
		e.refuseUnfollowable(f, 400, err.Error(), now, out)
		return false, true
	}
	f.nextReq += wire.Seq(n)
	if !f.chunk.Done() {
		return true, true
	}
	e.stats.ChunkedBodies++
	f.kaState = kaForward
	return false, false
}

// Admit releases the follow-up request waiting on a spliced flow.
func (e *FrontEnd) Admit(id FlowID, now Time, out *Output) error {
	f, err := e.waitingFollowUp(id)
	if err != nil {
		return err
	}
	if f.kaSpan < 0 {
		// Chunked: the body's end among the held bytes, if it is there.
		f.chunk.Reset()
		n, err := f.chunk.Feed(f.kaBuf[f.kaHeadLen:])
		switch {
		case err != nil:
			// Nothing of it went out: answer it like a refusal.
			e.refuseUnfollowable(f, 400, err.Error(), now, out)
			return nil
		case !f.chunk.Done():
			f.respPending++
			e.flushAdmitted(f, len(f.kaBuf), f.kaFin, now, out)
			f.kaState = kaChunked
			return nil
		}
		e.stats.ChunkedBodies++
		f.kaSpan = int64(f.kaHeadLen + n)
	}
	n := int(min(f.kaSpan, int64(len(f.kaBuf))))
	fin := f.kaFin && n == len(f.kaBuf)
	f.respPending++
	e.flushAdmitted(f, n, fin, now, out)
	rest := int64(n) - f.kaSpan // <= 0: body bytes still to come
	f.kaState = kaForward
	if rest < 0 {
		f.nextReq += wire.Seq(-rest)
		return nil
	}
	if len(f.kaBuf) > 0 {
		f.kaState = kaCollect // pipelined: the next head is already here
		e.parseFollowUp(f, now, out)
	}
	return nil
}

// trackFollowUps starts watching for follow-ups when the first request
// has gone to the back-end (SpliceAcked): from the first request's end,
// or from where its chunked body has been followed to. After the
// client's FIN nothing can follow.
func (e *FrontEnd) trackFollowUps(f *flow) {
	switch {
	case f.finInBuf:
		f.kaState = kaOff
	case f.reqSpan >= 0:
		f.kaState = kaForward
		f.nextReq = f.syn.clientISN + 1 + wire.Seq(f.reqSpan)
	default:
		f.kaState = kaChunked
		// f.buf holds the back-end's bytes (a rewritten target): the
		// client's numbers are wanted here.
		f.nextReq = f.rw.toC(f.c2Start()+wire.Seq(len(f.buf)), true)
	}
}

// firstRequestSpan sets the first request's span once its head parsed
// (fe_client.go): for a chunked body, following it through the bytes
// already buffered after the head. An error is a malformed body.
func (e *FrontEnd) firstRequestSpan(f *flow, req *httphead.Request) error {
	f.reqSpan = requestSpan(req)
	if f.reqSpan >= 0 {
		return nil
	}
	f.chunk.Reset()
	return e.followFirstBody(f, f.buf[req.HeadLen:], req.HeadLen)
}

// followFirstBody feeds the first request's chunked body bytes b, which
// start at offset at of the request, and sets reqSpan where it ends.
func (e *FrontEnd) followFirstBody(f *flow, b []byte, at int) error {
	n, err := f.chunk.Feed(b)
	if err != nil {
		return err
	}
	if f.chunk.Done() {
		e.stats.ChunkedBodies++
		f.reqSpan = int64(at + n)
	}
	return nil
}

// firstBodyBytes runs for request bytes that arrive after the first head
// while the front-end still buffers them (queued or connecting), before
// they are appended: accept bytes of them may be. It reports false when
// the body is malformed; the client has been answered 400 then.
func (e *FrontEnd) firstBodyBytes(f *flow, b []byte, accept int, now Time, out *Output) bool {
	if f.reqSpan >= 0 {
		return true
	}
	err := e.followFirstBody(f, b[:max(0, min(len(b), accept))], len(f.buf))
	if err == nil {
		return true
	}
	if f.state == stQueued {
		e.answer(f, 400, err.Error(), now, out)
	} else {
		e.abandonHandoff(f, 400, err.Error(), 0, now, out)
	}
	return false
}

// flushHeld sends the first n held bytes (and the FIN if asked) on C2,
// advancing nextReq past them.
func (e *FrontEnd) flushHeld(f *flow, n int, fin bool, out *Output) {
	mss := f.c2MSS() - wire.TSOptionLen
	for off := 0; off < n || (fin && off == n); {
		k := min(mss, n-off)
		var flags uint8
		if fin && off+k == n {
			flags = wire.TCPFlagFIN
		}
		e.sendC2(f, nil, nil, f.nextReq+wire.Seq(off), f.kaBuf[off:off+k], flags, out)
		off += k
		if flags != 0 {
			break
		}
	}
	f.nextReq += wire.Seq(n)
	if fin {
		f.nextReq++
		f.kaFin = false
	}
	f.kaBuf = append(f.kaBuf[:0], f.kaBuf[n:]...)
}

// sendC2 builds a client-direction segment on C2 from scratch: seq (the
// client's numbers) and payload as given, ACK, window, timestamps and
// SACK translated from t (the client segment being handled) or, when t is
// nil, from what the client said last. Payload that overlaps a replaced
// request target goes around it (sendC2Around).
func (e *FrontEnd) sendC2(f *flow, t wire.TCP, o *wire.TCPOptions, seq wire.Seq, payload []byte, extra uint8, out *Output) {
	if e.sendC2Around(f, t, o, seq, payload, extra, out) {
		return
	}
	e.sendC2At(f, t, o, f.rw.toB(seq), payload, extra, false, out)
	if end := seq + wire.Seq(len(payload)); f.cliNxt.LessThan(end) {
		f.cliNxt = end
	}
}

// sendC2At is sendC2 with seq in the back-end's numbers, and the rewrite
// option when withRewrite is set (fe_rewrite.go).
func (e *FrontEnd) sendC2At(f *flow, t wire.TCP, o *wire.TCPOptions, seq wire.Seq, payload []byte, extra uint8, withRewrite bool, out *Output) {
	ack, win := f.cliAck, f.cliWin
	if t != nil {
		ack, win = t.Ack(), t.Window()
	}
	var ob [40]byte
	n := 0
	if f.tsB {
		ecr := f.cliTSecr
		if o != nil && o.HasTS {
			ecr = o.TSEcr
		}
		n += wire.EncodeTS(ob[n:], f.c2TSval(), ecr-f.tsOffset)
	}
	if withRewrite {
		n += putRewriteOption(ob[n:], &f.rw)
	}
	if o != nil && o.NumSACK > 0 && len(ob)-n >= 12 {
		k := min(o.NumSACK, (len(ob)-n-4)/8)
		ob[n], ob[n+1], ob[n+2], ob[n+3] = wire.OptNOP, wire.OptNOP, wire.OptSACK, byte(2+8*k)
		n += 4
		for i := 0; i < k; i++ {
			binary.BigEndian.PutUint32(ob[n:], uint32(o.SACKBlocks[i].Left)-f.seqDelta)
			binary.BigEndian.PutUint32(ob[n+4:], uint32(o.SACKBlocks[i].Right)-f.seqDelta)
			n += 8
		}
	}
	flags := wire.TCPFlagACK | extra
	if len(payload) > 0 {
		flags |= wire.TCPFlagPSH
	}
	tf := wire.TCPFrame{
		SrcMAC: e.cfg.MAC, DstMAC: f.backend.MAC,
		Src: e.handoff, Dst: f.bIP, SrcPort: f.hport, DstPort: f.backend.Port,
		Seq: seq, Ack: ack - wire.Seq(f.seqDelta), Flags: flags, Window: win,
		Options: ob[:n], Payload: payload,
	}
	b := out.alloc(tf.Len())
	tf.Encode(b)
	out.send(PortWire, b)
	f.clearPendingAck()
	if extra&wire.TCPFlagFIN != 0 {
		f.cliFin = true
	}
	f.forwardedBytes += uint64(len(payload))
	e.stats.ForwardedBytes += uint64(len(payload))
	e.stats.ForwardedFrames++
	e.stats.TxFrames++
}

// requestInfo gives the daemon what it needs of a parsed head, in out.
// Method, Host and Path repeat from request to request and are interned;
// a Cookie is usually the client's own and is copied.
func (e *FrontEnd) requestInfo(f *flow, req *httphead.Request, out *Output) *RequestInfo {
	return out.request(RequestInfo{
		Method:    e.strs.get(req.Method),
		Host:      e.strs.get(req.Host),
		Path:      e.strs.get(req.Path),
		Cookie:    string(req.Cookie),
		Port:      f.key.dstPort,
		Client:    netip.AddrPortFrom(f.key.srcIP.Addr(), f.key.srcPort),
		HeadLen:   req.HeadLen,
		KeepAlive: req.KeepAlive,
	})
}
