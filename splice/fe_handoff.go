package splice

import (
	"errors"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// Errors from the daemon-facing calls.
var (
	ErrNoFlow     = errors.New("splice: no such flow")
	ErrFlowState  = errors.New("splice: flow is not in a state for that")
	ErrNoPorts    = errors.New("splice: no free handoff port")
	ErrBadBackend = errors.New("splice: back-end address is not IPv4")
)

// allocPort finds a free C2 source port towards b (allocPortFor in
// limits.go: each back-end has the whole range, taken in turn).
func (e *FrontEnd) allocPort(b Backend, f *flow, now Time) (uint16, bool) {
	return e.allocPortFor(c2Dest{wire.IP4From(b.IP), b.Port}, f, now)
}

// Dispatch hands a queued request to back-end b: the engine opens C2 with
// the client's ISN and SYN options (handoff step 4).
func (e *FrontEnd) Dispatch(id FlowID, b Backend, now Time, out *Output) error {
	return e.dispatch(id, b, false, now, out)
}

// DispatchCarrying is Dispatch for a request the caller lets go at once
// (a safe request whose back-end has a slot free: it calls SpliceAcked
// right after): a Splice sent with the SYN may then carry the request,
// for the shim to send (fe_atsyn.go). The EvSplice's Splice says whether
// it does (proto.SpliceRequest).
func (e *FrontEnd) DispatchCarrying(id FlowID, b Backend, now Time, out *Output) error {
	return e.dispatch(id, b, true, now, out)
}

func (e *FrontEnd) dispatch(id FlowID, b Backend, carry bool, now Time, out *Output) error {
	f, err := e.flowIn(id, stQueued)
	if err != nil {
		return err
	}
	if !b.IP.Is4() {
		return ErrBadBackend
	}
	if e.sourcePortsFull(f) {
		e.stats.RefusedPortsSource++
		return ErrSourcePorts
	}
	e.closeAsAsked(f) // before the request can go anywhere (fe_pool.go)
	if e.reuseC2(f, b, now, out) {
		return nil // a pooled C2: its Splice, no SYN (fe_pool.go)
	}
	return e.dispatchNew(f, b, carry, now, out)
}

// dispatchNew opens a new C2 to b for queued flow f: its SYN, and its
// Splice with it when it may go there (fe_atsyn.go).
func (e *FrontEnd) dispatchNew(f *flow, b Backend, carry bool, now Time, out *Output) error {
	port, ok := e.allocPort(b, f, now)
	if !ok {
		return ErrNoPorts
	}
	f.backend = b
	f.bIP = b.IP.As4()
	f.hport = port
	e.takePort(f)
	f.state = stConnecting
	f.retries = 0
	f.c2SYN, f.c2First = f.syn, f.syn.clientISN+1
	f.synData, f.synBare = false, false
	f.tl.stamp(StepC2SYN, now)
	e.stats.HandoffsStarted++
	// The Splice first: whether it carries the request decides the SYN's
	// options (sendC2SYN); the order of the two in out is the daemon's.
	e.spliceWithSYN(f, carry, now, out)
	e.sendC2SYN(f, now, out)
	e.setDeadline(f, now.Add(e.cfg.HandoffTimeout))
	return nil
}

// asksFastOpen reports whether f's C2 SYN asks for Fast Open: only for a
// carried request, to a client whose window holds two full segments
// (fastOpenFits).
func (e *FrontEnd) asksFastOpen(f *flow) bool {
	return f.carried && e.cfg.FastOpen && f.fastOpenFits()
}

// sendC2SYN offers the back-end exactly what the client offered us, so it
// negotiates nothing the client cannot honour (design trap 4), and the
// window the client last offered, so a kernel taking the request in this
// SYN starts with the client's window, not more. It asks for Fast Open
// only for a carried request to a client whose window holds two full
// segments (fastOpenFits).
func (e *FrontEnd) sendC2SYN(f *flow, now Time, out *Output) {
	f.tl.c2SYNSent(now)
	so := wire.SynOptions{MSS: f.syn.mss, WScale: f.syn.wscale, SACKPermitted: f.syn.sack,
		FastOpen: e.asksFastOpen(f)}
	if f.syn.ts {
		so.TS, so.TSVal = true, f.tsRecent
	}
	var payload []byte
	if so.FastOpen && e.cfg.FastOpenInSYN && !f.synBare {
		// The request the Splice carries, with the cookie the kernel
		// gave: in the SYN from here, so the shim need not touch it.
		if so.Cookie = e.foCookies.cookie(f.bIP); so.Cookie != nil {
			payload = f.buf
		}
	}
	if payload != nil && !f.synData {
		f.synData = true
		e.stats.RequestsSentInSYN++
	}
	var ob [40]byte
	tf := wire.TCPFrame{
		SrcMAC: e.cfg.MAC, DstMAC: f.backend.MAC,
		Src: e.handoff, Dst: f.bIP, SrcPort: f.hport, DstPort: f.backend.Port,
		Seq: f.syn.clientISN, Flags: wire.TCPFlagSYN,
		Window:  f.synWindow(),
		Options: ob[:so.Encode(ob[:])],
		Payload: payload,
	}
	b := out.alloc(tf.Len())
	tf.Encode(b)
	out.send(PortWire, b)
	e.stats.TxFrames++
}

// spliceProven takes client segment t for the proof that the shim has
// f's Splice when it acknowledges a response byte, which only the shim's
// translation can have brought the client (flow.implicitAck).
func (e *FrontEnd) spliceProven(f *flow, t wire.TCP, out *Output) {
	if f.spliceUnproven && t.Has(wire.TCPFlagACK) && (f.isnF + 1).LessThan(t.Ack()) {
		f.spliceUnproven = false
		out.event(Event{Kind: EvSpliceTaken, Flow: f.id, Backend: f.backend.ID, At: f.synAckAt})
	}
}

// learnCookie keeps the Fast Open cookie the back-end's SYN-ACK t (its
// options o) gives for f's back-end, and forgets the one its kernel no
// longer takes: a SYN-ACK that acknowledges only a SYN that brought data
// and gives no new cookie.
func (e *FrontEnd) learnCookie(f *flow, t wire.TCP, o *wire.TCPOptions) {
	if !e.cfg.FastOpenInSYN {
		return
	}
	if c := o.Cookie(t); c != nil {
		e.foCookies.learn(f.bIP, c)
	} else if f.synData && t.Ack() == f.syn.clientISN+1 {
		e.foCookies.forget(f.bIP)
	}
}

// inputBackend handles segments a back-end sent to our handoff address:
// its SYN-ACK, and the header-only copies its shim sends while the
// request is unacknowledged or when the server closes. Only the back-end
// of the flow holding the port, from its address, port and MAC, with
// numbers in its sequence space, moves anything; every other segment is
// dropped without an answer, so a port in use looks like a free one
// (fe_validate.go).
func (e *FrontEnd) inputBackend(p *wire.Packet, now Time, out *Output) {
	t := p.TCP
	f := e.c2Flow(p)
	if f == nil {
		if pc := e.pool.byKey[c2Key{p.IP.Src(), t.SrcPort(), t.DstPort()}]; pc != nil {
			e.inputPooled(pc, p, out) // an idle C2's server closes (fe_pool.go)
			return
		}
		e.drop(dropNoFlow)
		return
	}
	if p.IP.Src() != f.bIP || t.SrcPort() != f.backend.Port || p.Eth.Src() != f.backend.MAC {
		e.drop(dropC2Spoofed)
		return
	}
	flags := t.Flags()
	switch f.state {
	case stConnecting:
		// A SYN-ACK may also acknowledge a carried request the shim put
		// in the SYN (Fast Open, shim_fastopen.go).
		ackOK := flags&wire.TCPFlagACK != 0 && (t.Ack() == f.syn.clientISN+1 || f.carried && t.Ack() == f.requestEnd())
		switch {
		case flags&wire.TCPFlagRST != 0:
			// In SYN-SENT a RST counts only if it acknowledges our SYN.
			if !ackOK {
				e.drop(dropRSTOutOfWindow)
				return
			}
			e.handoffFailed(f, "back-end refused the connection", now, out)
		case flags&(wire.TCPFlagSYN|wire.TCPFlagACK) == wire.TCPFlagACK && len(t.Payload()) == 0:
			// A challenge ACK (RFC 5961 section 4): the back-end still
			// holds an old connection on this tuple: its TIME_WAIT once
			// the handoff ports wrap (at a few thousand connections a
			// second, within seconds), or one from before a front-end
			// restart. A RST at its ACK number clears it; then our SYN
			// can go again. Waiting for the SYN timer instead stalls the
			// request a second, so this is bounded per handoff (a few
			// tries, like the SYN's), not per second; a spoofer gains two
			// frames to the back-end per frame it sends, only while this
			// flow is connecting.
			if int(f.ck.c2Resets) >= e.cfg.MaxRetries {
				e.drop(dropUnexpected)
				return
			}
			f.ck.c2Resets++
			e.timeWaitRefused(f, now)
			e.sendRST(p, out)
			// The SYN must reach the kernel after the RST. One with the
			// request goes there from the back-end's wire in the kernel
			// (the SYN fast path), the RST through the shim: the SYN
			// would overtake it, meet the old connection again and get
			// no answer (its ACKs are rate-limited). Without the request
			// it follows the RST through the shim, which puts the
			// request in it as it passes.
			f.synData, f.synBare = false, true
			e.sendC2SYN(f, now, out)
		case flags&(wire.TCPFlagSYN|wire.TCPFlagACK) == wire.TCPFlagSYN|wire.TCPFlagACK && ackOK:
			e.c2Established(f, p, now, out)
		default:
			e.drop(dropUnexpected)
		}
	case stSpliceWait:
		switch {
		case flags&wire.TCPFlagSYN != 0:
			if flags&wire.TCPFlagACK == 0 || t.Seq() != f.isnB || t.Ack() != f.syn.clientISN+1 && !(f.tfo && t.Ack() == f.reqUna) {
				e.drop(dropUnexpected)
				return
			}
			e.sendC2Ack(f, out) // our ACK was lost
		case flags&wire.TCPFlagRST != 0:
			// Nothing was sent yet either way: the back-end's next
			// sequence number is its ISN+1.
			switch seq := t.Seq(); {
			case seq == f.isnB+1:
				e.handoffFailed(f, "back-end reset the connection", now, out)
			case seq.InRange(f.isnB+1, f.ck.replyEdge-wire.Seq(f.seqDelta)+1): // our window on C2
				e.drop(dropRSTInWindow)
				e.challengeBackend(f, now, out)
			default:
				e.drop(dropRSTOutOfWindow)
			}
		default:
			e.drop(dropUnexpected)
		}
	case stSpliced, stLinger:
		if !f.c2Up {
			e.drop(dropUnexpected) // aborted while connecting: nothing to learn
			return
		}
		if !e.validBackend(f, t, now, out) {
			return
		}
		e.stats.ReplyPayloadBytes += uint64(len(t.Payload()))
		if flags&wire.TCPFlagACK != 0 && f.reqUna.LessThan(t.Ack()) {
			f.reqUna = t.Ack()
		}
		if f.reused && !f.reuseTaken && flags&wire.TCPFlagACK != 0 && f.c2First.LessThan(t.Ack()) {
			// The server has request bytes, which the shim passes only
			// with the Splice in: it stands for the SpliceAck that an
			// early one does not get (fe_pool.go).
			f.reuseTaken = true
			out.event(Event{Kind: EvSpliceTaken, Flow: f.id, Backend: f.backend.ID, At: now})
		}
		if flags&(wire.TCPFlagFIN|wire.TCPFlagRST) != 0 {
			f.tl.stamp(StepClose, now)
		}
		if flags&wire.TCPFlagFIN != 0 {
			f.srvFin = true
			e.serverClosed(f)
		}
		if flags&wire.TCPFlagRST != 0 {
			f.srvRST = true
			e.linger(f, now, CloseRST, out)
			return
		}
		if f.state == stSpliced {
			e.armSplicedTimer(f, now)
		}
	default:
		e.drop(dropUnexpected)
	}
}

// c2Established records the back-end's choices and computes the numbers
// the translation needs (handoff step 5), then asks the daemon to tell the
// shim (step 6).
func (e *FrontEnd) c2Established(f *flow, p *wire.Packet, now Time, out *Output) {
	t := p.TCP
	o := &e.opts
	if err := wire.ParseOptions(t, o); err != nil {
		e.drop(dropBadOptions)
		return
	}
	e.learnCookie(f, t, o)
	f.isnB = t.Seq()
	f.c2Up = true
	f.tl.stamp(StepC2SYNACK, now)
	f.mssB = 536
	if o.HasMSS {
		f.mssB = max(o.MSS, minMSS) // a tiny MSS would leave no room for payload
	}
	f.wsB = -1
	if o.HasWScale && f.syn.wscale >= 0 {
		f.wsB = min(int(o.WScale), wire.MaxWScale) // RFC 7323: a larger shift means 14
	}
	f.tsB = o.HasTS && f.syn.ts
	if f.tsB {
		f.tsLastB = o.TSVal
		// Translated back-end TSvals must continue after everything we
		// sent the client ourselves, or its PAWS check drops them
		// (design trap 2). Our clock is at tsClock(now); the back-end's
		// later values only grow from o.TSVal.
		f.tsOffset = tsClock(now) + 1 - o.TSVal
		if f.atSYN {
			f.tsOffset = e.atSYNOffset(f, o.TSVal, now)
		}
	}
	f.seqDelta = uint32(f.isnF - f.isnB)
	e.applyFirstRewrite(f) // f.buf holds the back-end's bytes from here on
	f.reqEnd = f.requestEnd()
	f.reqUna = f.syn.clientISN + 1
	f.reqNxt = f.reqUna
	if t.Ack() != f.reqUna { // the request came in the SYN (inputBackend checked it)
		f.reqUna = t.Ack()
		f.tfo = true
		e.stats.RequestsInSYN++
		switch {
		case f.implicitAck && f.synData:
			f.spliceUnproven, f.synAckAt = true, now // forwardClient
		case f.implicitAck:
			out.event(Event{Kind: EvSpliceTaken, Flow: f.id, Backend: f.backend.ID, At: now})
		}
		if f.synData {
			// The request went in our own SYN: the kernel took it
			// without the Splice, which may come late or be lost (its
			// resends carry no request), and a Fast Open socket sends
			// nothing again before its handshake completes. So the
			// handshake's last ACK is ours, not the shim's
			// (shim_carry.go sendCarried).
			var ob [wire.TSOptionLen]byte
			e.toBackend(f, f.reqUna, f.isnB+1, wire.TCPFlagACK, f.c2TSOption(&ob), nil, out)
		}
	}
	f.cliNxt = f.rw.toC(f.reqEnd, true)
	// The back-end may send up to the window of our SYN before it sees the
	// client's: the bound the client's ACKs are checked against.
	f.ck.replyEdge = f.ck.replyEdge.Max(f.isnF + 1 + 65535)
	f.state = stSpliceWait
	// No ACK of its own: the request's first segment, sent when the shim
	// has confirmed the Splice (a round trip of a few hundred
	// microseconds), completes the back-end's handshake, which saves a
	// frame per request on both machines. A connection held for a slot
	// longer than the back-end waits (its SYN-ACK timer, 1 s on Linux) is
	// ACKed when the SYN-ACK comes again (inputBackend, stSpliceWait).
	if f.atSYN {
		e.atSYNEstablished(f, now, out)
		return
	}
	e.setDeadline(f, now.Add(3*e.cfg.HandoffTimeout))
	out.event(Event{Kind: EvSplice, Flow: f.id, Backend: f.backend.ID, Splice: e.spliceMessage(f)})
}

func (e *FrontEnd) sendC2Ack(f *flow, out *Output) {
	var ob [wire.TSOptionLen]byte
	e.toBackend(f, f.c2Start(), f.isnB+1, wire.TCPFlagACK, f.c2TSOption(&ob), nil, out)
}

func (e *FrontEnd) spliceMessage(f *flow) proto.Splice {
	s := proto.Splice{
		RequestID:        uint64(f.id),
		ClientIP:         f.key.srcIP.Addr(),
		ClientPort:       f.key.srcPort,
		VIP:              f.key.dstIP.Addr(),
		VIPPort:          f.key.dstPort,
		HandoffIP:        e.handoff.Addr(),
		HandoffPort:      f.hport,
		BackendIP:        f.bIP.Addr(),
		BackendPort:      f.backend.Port,
		SeqDelta:         f.seqDelta,
		TSOffset:         f.tsOffset,
		ClientNextHopMAC: f.cliMAC,
		RequestEnd:       uint32(f.reqEnd),
	}
	if f.tsB {
		s.Flags |= proto.SpliceTimestamps
	}
	if f.syn.sack {
		s.Flags |= proto.SpliceSACK
	}
	s.CloseResponses = f.closeWanted
	if f.reused {
		s.Reuse = f.spliceReuse() // its correction point is the reuse's
	} else if f.rw.on {
		s.Flags |= proto.SpliceRewrite
		s.RewriteStart, s.RewriteEnd, s.RequestOffset = uint32(f.rw.startB), uint32(f.rw.endB), f.rw.after
	}
	if f.wsF >= 0 {
		s.Flags |= proto.SpliceWindowScale
		s.WScaleFrontend = uint8(f.wsF)
		if f.wsB >= 0 {
			s.WScaleBackend = uint8(f.wsB)
		}
	}
	return s
}

// HoldSplice is called instead of SpliceAcked when the shim confirmed the
// Splice but the back-end has no free slot yet: the caller set the
// connection up ahead of time, so that the handoff (C2 handshake, Splice
// round trip) does not take slot time. C2 stays open with the request
// held until SpliceAcked releases it or Reject refuses it. How long it
// may wait is the caller's decision, as for a queued request: the engine
// only keeps its idle timeout as a backstop (then the client gets a 503;
// nothing reached the server, so a retry is safe).
func (e *FrontEnd) HoldSplice(id FlowID, now Time) error {
	if f := e.byID[id]; f != nil && f.state == stConnecting && f.atSYN {
		f.spliceHeld = true // the SpliceAck came before C2's SYN-ACK (fe_atsyn.go)
		return nil
	}
	f, err := e.flowIn(id, stSpliceWait)
	if err != nil {
		return err
	}
	f.spliceHeld = true
	e.waitDeadline(f, now.Add(e.cfg.IdleTimeout), now)
	return nil
}

// SpliceAcked is called when the shim confirmed the Splice message (and,
// after HoldSplice, when the back-end has a slot): from now on every
// reply it sees is translated, so the request can go.
func (e *FrontEnd) SpliceAcked(id FlowID, now Time, out *Output) error {
	if f := e.byID[id]; f != nil && f.state == stConnecting && f.atSYN {
		f.atSYNGo, f.spliceHeld = true, false // sent once C2 is up (fe_atsyn.go)
		return nil
	}
	f, err := e.flowIn(id, stSpliceWait)
	if err != nil {
		return err
	}
	f.state = stSpliced
	f.retries = 0
	f.respPending = 1
	e.stats.HandoffsDone++
	e.trackFollowUps(f)
	f.tl.requestSent(now, len(f.buf))
	e.sendRequest(f, now, out)
	for _, h := range f.held {
		var p wire.Packet
		if wire.Parse(h, &p) == nil && p.Kind == wire.KindTCP {
			e.forwardClient(f, &p, now, out)
		}
	}
	f.held = nil
	e.armSplicedTimer(f, now)
	if f.endEarlyKnown {
		f.endEarlyKnown = false
		e.ResponseEnded(f.id, f.endEarly, now, out) // its Feedback came first
	}
	return nil
}

// sendRequest sends (or resends, from the back-end's last ACK) the bytes
// we acknowledged to the client ourselves: they must reach the back-end
// exactly once, and only we still have them.
func (e *FrontEnd) sendRequest(f *flow, now Time, out *Output) {
	if f.rwFollow {
		e.resendRewrittenTarget(f, now, out)
		return
	}
	if f.carried {
		e.carriedRequestSent(f, now)
		return
	}
	mss := f.c2MSS()
	var ob [wire.TSOptionLen + reuseOptLen]byte
	opts := f.c2TSOption((*[wire.TSOptionLen]byte)(ob[:]))
	if f.reused {
		opts = ob[:len(opts)+f.putReuseOption(ob[len(opts):])] // fe_pool.go
	}
	mss -= len(opts)
	base := f.c2Start()
	off := int(f.reqUna - base)
	for off < len(f.buf) {
		n := min(mss, len(f.buf)-off)
		flags := uint8(wire.TCPFlagACK)
		if off+n == len(f.buf) {
			flags |= wire.TCPFlagPSH
			if f.finInBuf {
				flags |= wire.TCPFlagFIN
			}
		}
		e.toBackend(f, base+wire.Seq(off), f.isnB+1, flags, opts, f.buf[off:off+n], out)
		e.stats.HandedOffBytes += uint64(n)
		off += n
	}
	if len(f.buf) == off && f.finInBuf && f.reqUna == base+wire.Seq(len(f.buf)) {
		e.toBackend(f, base+wire.Seq(len(f.buf)), f.isnB+1, wire.TCPFlagACK|wire.TCPFlagFIN, opts, nil, out)
	}
	f.reqNxt = f.reqEnd
	f.rto = now.Add(e.cfg.RTOMin << f.retries)
}

// armSplicedTimer picks the spliced flow's next deadline: retransmission
// while the request is unacknowledged, then idle or linger.
func (e *FrontEnd) armSplicedTimer(f *flow, now Time) {
	if f.reqUna.LessThan(f.reqEnd) {
		e.setDeadline(f, f.rto)
		return
	}
	want := f.lastSeen.Add(e.cfg.IdleTimeout)
	if f.cliFin && f.srvFin {
		want = f.lastSeen.Add(e.cfg.Linger)
	}
	// Every packet moves the idle deadline later; pushing each time would
	// leave a heap entry per packet. A pending earlier deadline is kept:
	// onTimer finds lastSeen moved on and re-arms (see deadlines).
	if f.deadline == Never || want < f.deadline {
		e.setDeadline(f, want)
		return
	}
	// The FINs change what f holds without a new deadline: a closed
	// connection's port stops counting against its source now, not when
	// the pending timer fires (the dispatch's, a second away, after a
	// handoff whose request went in the SYN).
	e.recount(f)
}

// handoffFailed gives the client a 503: the request never reached a
// server, so it is safe for the client to retry.
func (e *FrontEnd) handoffFailed(f *flow, reason string, now Time, out *Output) {
	e.abandonHandoff(f, 503, reason, time.Second, now, out)
}

// abandonHandoff resets C2, reports the flow's back-end part closed and
// answers the client itself.
func (e *FrontEnd) abandonHandoff(f *flow, status int, reason string, retryAfter time.Duration, now Time, out *Output) {
	e.stats.HandoffsFailed++
	e.abortC2(f, out)
	out.event(Event{Kind: EvClosed, Flow: f.id, Backend: f.backend.ID, Reason: CloseHandoffFailed, Timeline: f.tl})
	e.releasePort(f, now)
	f.hport = 0
	f.spliceHeld = false
	e.answerWith(f, status, reason, answerBody(status, reason, retryAfter), now, out)
}

// abortC2 resets the handoff connection if one exists.
func (e *FrontEnd) abortC2(f *flow, out *Output) {
	if f.hport == 0 || !f.c2Up {
		return
	}
	// The back-end accepts a RST only at its rcv_nxt (RFC 5961): the end
	// of what reached it, handed over by us or forwarded from the client.
	seq := f.c2Start() + wire.Seq(len(f.buf))
	if f.finInBuf {
		seq++
	}
	if f.c2Up {
		seq = seq.Max(f.rw.toB(f.cliNxt))
	}
	e.toBackend(f, seq, 0, wire.TCPFlagRST, nil, nil, out)
}

// Abort resets a flow on both sides (a back-end died under it, design
// trap 13): the client sees a RST rather than a hang.
func (e *FrontEnd) Abort(id FlowID, now Time, out *Output) error {
	f := e.byID[id]
	if f == nil {
		return ErrNoFlow
	}
	if f.state == stLinger {
		return nil
	}
	e.abortC2(f, out)
	seq := f.sndNxt
	if f.state == stSpliced {
		// The client accepts a RST at exactly its rcv_nxt (RFC 5961),
		// which its latest ACK told us.
		seq = f.cliAck
	}
	e.toClient(f, now, seq, f.rcvNxt, wire.TCPFlagRST|wire.TCPFlagACK, nil, out)
	f.ck.aborted = true
	e.linger(f, now, CloseAborted, out)
	return nil
}
