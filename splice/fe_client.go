package splice

import (
	"errors"

	"github.com/qsplice/qsplice/splice/httphead"
	"github.com/qsplice/qsplice/splice/wire"
)

// inputClient handles a TCP segment from a client to a VIP; v is what
// InputVNet judged of a SYN (fe_linksyn.go), synUnjudged for the rest.
func (e *FrontEnd) inputClient(p *wire.Packet, v synVerdict, now Time, out *Output) {
	t := p.TCP
	ip := p.IP
	key := fourTuple{srcIP: ip.Src(), dstIP: ip.Dst(), srcPort: t.SrcPort(), dstPort: t.DstPort()}
	flags := t.Flags()
	f := e.flows[key]
	if f != nil && f.closed() && e.startsAnew(p, key, flags, now) {
		// Port reuse (design trap 10): a new connection on a tuple we
		// keep only for stragglers.
		e.linger(f, now, CloseFIN, out) // reports the close if not done yet
		e.free(f, now)
		f = nil
	}
	if f == nil {
		switch {
		case flags&wire.TCPFlagRST != 0:
			e.drop(dropNoFlow)
		case flags&(wire.TCPFlagSYN|wire.TCPFlagACK) == wire.TCPFlagSYN:
			e.handleSYN(p, key, v, now, out)
		case flags&(wire.TCPFlagSYN|wire.TCPFlagACK) == wire.TCPFlagACK:
			if f = e.acceptCookie(p, key, now, out); f != nil {
				e.clientSegment(f, p, now, out)
			}
		default:
			e.drop(dropNoFlow)
		}
		return
	}
	f.lastSeen = now
	switch f.state {
	case stSpliced:
		e.forwardClient(f, p, now, out)
	case stLinger:
		if f.hport != 0 && f.c2Up {
			e.forwardClient(f, p, now, out) // late FIN/ACK of a spliced flow
			return
		}
		// Answered or aborted before any handoff: consume a FIN at
		// rcvNxt so the client's close completes, acknowledge the rest.
		// A RST, even an exact one, finds nothing left to reset.
		if !e.validClient(f, t, now, out) {
			return
		}
		if flags&wire.TCPFlagRST == 0 && t.SegLen() > 0 {
			if t.Seq() == f.rcvNxt && flags&wire.TCPFlagFIN != 0 {
				f.rcvNxt += wire.Seq(t.SegLen())
			}
			e.ackClient(f, now, out)
		}
	default:
		e.clientSegment(f, p, now, out)
	}
}

// handleSYN answers a SYN with a SYN cookie (no state kept), or a RST if
// nothing listens on the port. v is InputVNet's verdict on it: when the
// link answered it, everything is done but the sending (fe_linksyn.go).
func (e *FrontEnd) handleSYN(p *wire.Packet, key fourTuple, v synVerdict, now Time, out *Output) {
	t := p.TCP
	if !e.isPort(key.dstPort) {
		e.drop(dropClosedPort)
		e.limitedRST(p, now, out)
		return
	}
	o := &e.opts
	if v == synUnjudged { // else judgeSYN parsed them into o
		if err := wire.ParseOptions(t, o); err != nil {
			e.drop(dropBadOptions)
			return
		}
	}
	e.syns.noteSYN(key, t.Seq(), now) // timeline.go
	if v == synByLink {
		// Its SYN-ACK, the one below, is on its way. The epoch's keys
		// are brought up to now as make would, so the engine's state
		// after a SYN is the same whoever answered it, and deriving a
		// new epoch's keys falls to its first SYN, not to a final ACK.
		e.cookies.at(now)
		return
	}
	isn, tsval := e.cookies.make(now, key, t.Seq(), o)
	so := wire.SynOptions{MSS: e.cfg.MSS, WScale: -1, SACKPermitted: o.SACKPermitted}
	if o.HasWScale {
		so.WScale = e.cfg.WScale
	}
	if o.HasTS {
		so.TS, so.TSVal, so.TSEcr = true, tsval, o.TSVal // tsval carries the cookie's option bits
	}
	var ob [40]byte
	win := min(e.cfg.RecvBuffer, 65535)
	tf := wire.TCPFrame{
		SrcMAC: e.cfg.MAC, DstMAC: p.Eth.Src(),
		Src: key.dstIP, Dst: key.srcIP, SrcPort: key.dstPort, DstPort: key.srcPort,
		Seq: isn, Ack: t.Seq() + 1, Flags: wire.TCPFlagSYN | wire.TCPFlagACK,
		Window: uint16(win), Options: ob[:so.Encode(ob[:])],
	}
	b := out.alloc(tf.Len())
	tf.Encode(b)
	out.send(PortWire, b)
	e.stats.SynCookiesSent++
	e.stats.TxFrames++
}

// limitedRST is sendRST at most FrontEndConfig.RSTRate times a second,
// for segments that have no connection (a bad cookie, a closed port):
// anyone can send those at any rate (a flood of guessed cookies), and a
// RST for each would make us a reflector. What is suppressed is counted;
// the peer of a real connection retransmits and gets its RST later.
func (e *FrontEnd) limitedRST(p *wire.Packet, now Time, out *Output) {
	if !e.rstLimit.allow(now) {
		e.stats.RSTsSuppressed++
		return
	}
	e.sendRST(p, out)
}

// sendRST answers an unacceptable segment as RFC 793 prescribes.
func (e *FrontEnd) sendRST(p *wire.Packet, out *Output) {
	t := p.TCP
	tf := wire.TCPFrame{
		SrcMAC: e.cfg.MAC, DstMAC: p.Eth.Src(),
		Src: p.IP.Dst(), Dst: p.IP.Src(), SrcPort: t.DstPort(), DstPort: t.SrcPort(),
	}
	if t.Has(wire.TCPFlagACK) {
		tf.Seq, tf.Flags = t.Ack(), wire.TCPFlagRST
	} else {
		tf.Ack, tf.Flags = t.Seq()+wire.Seq(t.SegLen()), wire.TCPFlagRST|wire.TCPFlagACK
	}
	b := out.alloc(tf.Len())
	tf.Encode(b)
	out.send(PortWire, b)
	e.stats.TxFrames++
}

// acceptCookie turns a valid final handshake ACK into a flow.
func (e *FrontEnd) acceptCookie(p *wire.Packet, key fourTuple, now Time, out *Output) *flow {
	t := p.TCP
	if !e.isPort(key.dstPort) {
		e.drop(dropNoFlow)
		return nil
	}
	o := &e.opts
	if err := wire.ParseOptions(t, o); err != nil {
		e.drop(dropBadOptions)
		return nil
	}
	// With timestamps, the cookie's option bits come back in the echo of
	// our TSval.
	info, ok := e.cookies.check(now, key, t.Ack(), t.Seq(), o.HasTS, o.TSEcr)
	if !ok {
		e.drop(dropBadCookie)
		e.limitedRST(p, now, out)
		return nil
	}
	if e.acceptOverLimits(p, key, now, out) {
		return nil
	}
	f := e.newFlow(key, now)
	f.syn = info
	f.cliMAC = p.Eth.Src()
	f.isnF = t.Ack() - 1
	f.sndUna, f.sndNxt = t.Ack(), t.Ack()
	f.ansBase = t.Ack()
	f.rcvNxt = info.clientISN + 1
	if info.wscale >= 0 {
		f.wsF = e.cfg.WScale
	}
	if o.HasTS {
		f.tsRecent, f.tsMax = o.TSVal, o.TSVal
	}
	f.cliWin = t.Window()
	f.cliAck = t.Ack() // where the client's receive sequence stands until it ACKs replies
	e.stats.Accepted++
	e.timelineAccepted(f, now)
	e.setDeadline(f, now.Add(e.cfg.HeadTimeout))
	return f
}

// clientSegment handles a client segment before the splice: it buffers
// the request, acknowledges it, and answers on our own behalf.
func (e *FrontEnd) clientSegment(f *flow, p *wire.Packet, now Time, out *Output) {
	t := p.TCP
	flags := t.Flags()
	seq := t.Seq()
	if answeredAhead(f, t) {
		e.hold(f, p)
		return
	}
	// RST only at rcvNxt, SYN challenged, numbers in range (fe_validate.go).
	if !e.validClient(f, t, now, out) {
		return
	}
	if flags&wire.TCPFlagRST != 0 {
		e.abortC2(f, out)
		e.linger(f, now, CloseRST, out)
		return
	}
	o := &e.opts
	if err := wire.ParseOptions(t, o); err != nil {
		e.drop(dropBadOptions)
		return
	}
	if o.HasTS && seq.LessEq(f.rcvNxt) {
		f.noteClientTS(o.TSVal)
	}
	if o.HasTS && f.tsFloorSet && int32(o.TSEcr-f.tsFloor) > 0 {
		// Our answer after a spliced response: the client echoes the
		// last TSval it took, maybe the shim's translation of the
		// server's, which can run ahead of our own clock (a pooled C2's
		// server clock went on while it waited). Ours must not fall
		// behind it, or the client drops our segments (PAWS, RFC 7323
		// section 5) and sends its FIN again and again.
		f.tsFloor = o.TSEcr
	}
	f.cliWin = t.Window()
	if f.poolPending {
		e.poolPendingAck(f, t, o, now, out) // C2 waits for it (fe_pool.go)
	}
	if flags&wire.TCPFlagACK != 0 && f.state == stAnswering {
		e.answerAcked(f, t.Ack(), now, out)
		if f.state == stLinger {
			// The same segment may carry the client's FIN: take it
			// now rather than make the client retransmit it.
			if flags&wire.TCPFlagFIN != 0 && seq == f.rcvNxt {
				f.rcvNxt += wire.Seq(t.SegLen())
				e.ackClient(f, now, out)
			}
			return
		}
	}
	payload := t.Payload()
	fin := flags&wire.TCPFlagFIN != 0
	if len(payload) == 0 && !fin {
		return // pure ACK or window update
	}
	if f.state == stSpliceWait {
		e.hold(f, p)
		return
	}
	if seq != f.rcvNxt {
		// Out of order or a retransmission of what we have: a duplicate
		// ACK tells the client where we are; it will resend.
		if f.rcvNxt.LessThan(seq) {
			e.drop(dropOutOfWindow)
		} else {
			f.tl.retx(RetxClientData, now)
		}
		e.ackClient(f, now, out)
		return
	}
	if f.state == stAnswering || f.cliFin {
		// We are closing or already have the client's FIN: data is not
		// wanted, but a FIN in order is consumed so the close completes.
		if fin && !f.cliFin {
			f.rcvNxt += wire.Seq(t.SegLen())
			f.cliFin = true
		}
		e.ackClient(f, now, out)
		return
	}
	wasReading := f.state == stReading
	room := e.cfg.RecvBuffer - len(f.buf)
	beyond := false
	if f.state != stReading && !e.firstBodyBytes(f, payload, room, now, out) {
		return // a malformed chunked body, answered
	}
	if f.state != stReading && f.reqSpan >= 0 {
		// Only the first request is handed over with the connection;
		// what follows it is the next request, which must be scheduled
		// on its own. Keep its frame for after the splice.
		room = min(room, int(f.reqSpan)-len(f.buf))
		beyond = len(payload) > room || fin
	}
	n := min(len(payload), room)
	if f.buf == nil {
		f.buf = e.spareBuf()
	}
	f.buf = append(f.buf, payload[:n]...)
	f.rcvNxt += wire.Seq(n)
	if fin && n == len(payload) && !beyond {
		f.rcvNxt++
		f.cliFin = true
		f.finInBuf = true
		f.tl.stamp(StepClose, now)
	}
	if f.state == stReading {
		e.parseHead(f, now, out)
	}
	if beyond {
		e.hold(f, p)
	}
	switch {
	case f.state == stAnswering:
	case !beyond && e.mayOweRequestAck(f, wasReading, n, fin):
		e.oweRequestAck(f, now) // the response will carry it (fe_ackdelay.go)
	default:
		e.ackClient(f, now, out)
	}
}

// trimToRequest un-accepts bytes past the first request (pipelined
// requests in the same segment): they were not acknowledged yet, so the
// client will send them again, and they are then scheduled on their own.
func (e *FrontEnd) trimToRequest(f *flow) {
	if f.reqSpan < 0 || int64(len(f.buf)) <= f.reqSpan {
		return
	}
	excess := len(f.buf) - int(f.reqSpan)
	f.buf = f.buf[:f.reqSpan]
	f.rcvNxt -= wire.Seq(excess)
	if f.finInBuf {
		f.rcvNxt--
		f.finInBuf, f.cliFin = false, false
	}
}

// parseHead checks whether the buffered bytes hold a complete head.
func (e *FrontEnd) parseHead(f *flow, now Time, out *Output) {
	req := &e.head
	err := httphead.Parse(f.buf, e.cfg.MaxHead, req)
	switch {
	case err == nil:
		if err := e.firstRequestSpan(f, req); err != nil {
			e.ackClient(f, now, out)
			e.answer(f, 400, err.Error(), now, out)
			return
		}
		f.state = stQueued
		f.tl.stamp(StepHeadComplete, now)
		e.trimToRequest(f)
		e.stats.Requests++
		e.setDeadline(f, now.Add(e.cfg.IdleTimeout))
		out.event(Event{Kind: EvRequest, Flow: f.id, Request: e.requestInfo(f, req, out)})
	case errors.Is(err, httphead.ErrIncomplete):
		switch {
		case f.cliFin && len(f.buf) == 0:
			// Connected and closed without a byte (health checkers, wrk's
			// probe): close in kind, no answer.
			e.closeQuietly(f, now, out)
		case f.cliFin:
			e.ackClient(f, now, out)
			e.answer(f, 400, "request incomplete at end of stream", now, out)
		}
	case errors.Is(err, httphead.ErrTooLarge):
		e.ackClient(f, now, out)
		e.answer(f, 431, "request head larger than the limit", now, out)
	default:
		e.ackClient(f, now, out)
		e.answer(f, 400, err.Error(), now, out)
	}
}

// answeredAhead reports whether t, from the client of f, acknowledges a
// reply the back-end sent before this engine has C2's numbers: with the
// Splice sent with C2's SYN the shim may install it, and the kernel send
// its reply straight to the client (an echo, shim_fastpath.go), before the
// SYN-ACK crossing the shim reaches us. Such a segment (its ACK past what
// we sent, within the window our SYN gave the back-end) is held as the
// splice-wait's are and goes on C2 with them; judged now it would be
// refused as acknowledging what we never sent, the client's answer to
// the reply lost, and its FIN resent until the kernel's timer sent the
// reply again.
func answeredAhead(f *flow, t wire.TCP) bool {
	if !f.atSYN || f.state != stConnecting && f.state != stSpliceWait ||
		t.Flags()&(wire.TCPFlagACK|wire.TCPFlagSYN|wire.TCPFlagRST) != wire.TCPFlagACK {
		return false
	}
	a := t.Ack()
	return f.sndNxt.LessThan(a) && a.LessEq(f.sndNxt+65535+1)
}

// hold keeps a copy of a client frame that arrives while the shim is being
// told about the splice (design trap 6); it is forwarded once the splice
// is acknowledged. Beyond the bound the frame is dropped and the client's
// retransmission brings it again.
func (e *FrontEnd) hold(f *flow, p *wire.Packet) {
	if len(f.held) >= e.cfg.HoldFrames {
		e.drop(dropHoldFull)
		return
	}
	f.held = append(f.held, append([]byte(nil), p.Eth[:p.End]...))
}

// startsAnew reports whether p, on a tuple whose flow is closed and
// lingering, opens a new connection: a fresh SYN, or, when the link hid
// the SYN (it answered it, frontend/synhide.go), an ACK whose
// acknowledgement is a valid cookie for its sequence number. A
// straggler of the old connection acknowledges our own sequence space,
// which a cookie check takes for its own with the odds of guessing a
// cookie.
func (e *FrontEnd) startsAnew(p *wire.Packet, key fourTuple, flags uint8, now Time) bool {
	switch flags & (wire.TCPFlagSYN | wire.TCPFlagACK | wire.TCPFlagRST) {
	case wire.TCPFlagSYN, wire.TCPFlagSYN | wire.TCPFlagRST:
		return true
	case wire.TCPFlagACK:
	default:
		return false
	}
	if !e.isPort(key.dstPort) {
		return false
	}
	o := &e.opts
	if wire.ParseOptions(p.TCP, o) != nil {
		return false
	}
	_, ok := e.cookies.check(now, key, p.TCP.Ack(), p.TCP.Seq(), o.HasTS, o.TSEcr)
	return ok
}
