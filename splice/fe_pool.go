package splice

import (
	"encoding/binary"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/httphead"
	"github.com/qsplice/qsplice/splice/wire"
)

// Handoff connections kept alive between client connections (issue 7,
// docs/pooled-c2.md): the front-end's side. With FrontEndConfig.PoolC2
// a C2 whose client connection ended cleanly goes into its back-end's
// pool instead of being closed, and the next request dispatched to that
// back-end takes it instead of opening one: no accept in the back-end's
// kernel, no handshake, no close.
//
// Which C2s are kept. A keep-alive client that closes its connection
// when nothing is under way -- every response it asked for reported
// ended by the shim's Feedback (ResponseEnded) and acknowledged, every
// byte it sent forwarded, no FIN or RST from the server -- sends a FIN
// that would close C2 too. The front-end does not forward it: it sends
// C2 the segment's ACK alone (the server must see the last ACK, or it
// sends its last reply again), moves C2 to the pool, and closes the
// client's side itself, as an answer with no bytes: its FIN from the end
// of the last response, its TSvals never behind the last the client
// echoed (fe_refuse.go does the same when it takes a connection back).
// The client has the response straight from the shim, so its FIN often
// comes before the shim's Feedback: the FIN is held for the Feedback, at
// most PoolFINWait, then sent to C2 after all (holdFIN).
//
// Numbers on a reused C2. C2's request direction began at its first
// client's ISN and carries that client's TSvals; a later client's go on
// C2 shifted, so C2's sequence numbers and TSvals keep growing:
//
//   - cliDelta = n_f - (c + 1), n_f C2's next request byte: a correction
//     point that changes no bytes (rewrite.go: startC = endC = c + 1,
//     before = after = cliDelta), so every path that maps a rewritten
//     connection's request numbers (forwardClient, the request and its
//     resends, a RST's sequence, follow-up rewrites, which compose with
//     it) maps a reused one's, and the shim maps the server's ACK and SACK
//     back with the same record (shim_pool.go);
//   - cliTSOff, added to the client's TSvals on C2, puts the client's
//     latest TSval at the TSval after the last one C2 carried (the
//     server's PAWS check); the shim takes it off the server's TS echo;
//   - seqDelta and tsOffset map the server's numbers as for a new C2,
//     from its next byte n_b (isnB is taken as n_b - 1) and from its
//     TSval as the front-end last saw it, which the server's clock has
//     passed since: translated TSvals run ahead of ours, never behind.
//
// C2's MSS, SACK, timestamps and window scale were fixed by its first
// client's SYN, so it serves only a client whose SYN offered the same
// SACK, timestamps and window scale and an MSS at least C2's. The
// server may have as much in flight for the new client as the last
// client's window allowed, which bounds the new client's ACKs at first
// (peerWin).
//
// The request. The Splice (with Splice.Reuse) moves the shim's entry;
// the request waits for its SpliceAck, or, when the controller lets it
// go early (Reuse.Early), follows at once with the reuse option
// (putReuseOption), which the shim holds until the Splice that moves the
// C2 is in: without it the shim would take the request for the last
// client's. Then the server's ACK of the request, in the shim's copy,
// stands for the SpliceAck (EvSpliceTaken).
//
// A client that asked to close (closeAsAsked): its "Connection: close"
// is blanked in the request, the shim writes close into the response and
// ends it with a FIN, and the front-end takes the client's side when the
// Feedback says so (afterShimFIN), pooling C2 once the client has the
// response.
//
// The pool's life. Pooled C2s are kept per back-end, newest first, at
// most PoolPerBackend of them; each for at most PoolIdle (below the
// server's keep-alive timeout), then reset. A FIN or RST from the server
// on a pooled C2 (its keep-alive timeout, a restart) reaches the
// front-end in the shim's header copy and takes it out of the pool; a
// FIN is answered with a RST, which frees the server's socket at once.
// Until a new client takes it the shim's entry still names the last
// client, so a server FIN also reaches that client, which has closed and
// ignores or resets it (the front-end keeps PoolIdle below the server's
// timeout so that this is rare).

// pooledC2 is an idle handoff connection, with what a reuse needs.
type pooledC2 struct {
	key     c2Key
	backend Backend
	srvNxt  wire.Seq // n_b: the server's next sequence number
	c2Nxt   wire.Seq // n_f: C2's next request byte
	tsNext  uint32   // the lowest TSval C2 may carry next
	tsLastB uint32   // the server's TSval as the front-end last saw it
	tsB     bool
	mssB    uint16
	wsB     int
	syn     synInfo // C2's SYN options: its first client's
	// peerWin is the largest window its clients offered the server on
	// it: the server may have that much in flight for the next client
	// before it hears of that client's own window.
	peerWin uint32
	win     uint16 // the last client's window field, for an owed ACK
	// ackOwed: the server has not had the client's ACK of its last
	// response; the next request's segment carries it (oweAck).
	ackOwed bool
	since   Time
}

// poolRef is a pooled C2 in the order it was pooled: the oldest expires
// first (PoolIdle is one span for all).
type poolRef struct {
	key   c2Key
	since Time
}

// c2Pool holds the pooled C2s: by back-end, newest last, and by key.
type c2Pool struct {
	byDest map[c2Dest][]*pooledC2
	byKey  map[c2Key]*pooledC2
	order  []poolRef // pooling order, oldest first; stale refs skipped
	acks   []poolRef // C2s owing their server an ACK, oldest first; stale refs skipped
	spare  []*pooledC2
}

func (p *c2Pool) init() {
	p.byDest = make(map[c2Dest][]*pooledC2)
	p.byKey = make(map[c2Key]*pooledC2)
}

// remove takes pc out of the pool's maps (its order ref goes stale).
func (p *c2Pool) remove(pc *pooledC2) {
	dest := c2Dest{pc.key.bIP, pc.key.bPort}
	list := p.byDest[dest]
	for i, x := range list {
		if x == pc {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(p.byDest, dest)
	} else {
		p.byDest[dest] = list
	}
	delete(p.byKey, pc.key)
	if len(p.spare) < 64 {
		*pc = pooledC2{}
		p.spare = append(p.spare, pc)
	}
}

func (p *c2Pool) newEntry() *pooledC2 {
	if n := len(p.spare); n > 0 {
		pc := p.spare[n-1]
		p.spare = p.spare[:n-1]
		return pc
	}
	return new(pooledC2)
}

// PooledC2s is the number of idle handoff connections held now.
func (e *FrontEnd) PooledC2s() int { return len(e.pool.byKey) }

// poolable reports whether f's C2 may go to the pool once its responses
// are over: spliced, neither side closed, everything the client sent
// forwarded, no follow-up begun, nothing rewritten.
func (e *FrontEnd) poolable(f *flow) bool {
	if !e.cfg.PoolC2 || f.state != stSpliced || !f.c2Up || f.srvFin || f.srvRST || f.cliFin {
		return false
	}
	if f.kaState != kaForward || f.nextReq != f.cliNxt || len(f.kaBuf) != 0 || f.spliceUnproven {
		return false // a follow-up begun, or the Splice not known taken
	}
	if f.rw.on && !(f.reused && f.rw.startB == f.rw.endB) || f.rwPending || f.reqUna.LessThan(f.reqEnd) {
		return false // a rewritten target: its correction point would outlive it
	}
	return true
}

// poolsAtClientFIN reports whether f's client FIN t may end f's client
// connection while its C2 goes into the pool, now or once the Feedback of
// the last response came (see holdFIN).
func (e *FrontEnd) poolsAtClientFIN(f *flow, t wire.TCP) bool {
	if f.finHeld || !e.poolable(f) {
		return false
	}
	if t.Flags()&(wire.TCPFlagFIN|wire.TCPFlagSYN|wire.TCPFlagRST|wire.TCPFlagACK) != wire.TCPFlagFIN|wire.TCPFlagACK ||
		len(t.Payload()) != 0 || t.Seq() != f.cliNxt {
		return false
	}
	if f.respPending == 0 && f.respEndKnown {
		return e.poolReady(f) // the Feedback is in: now or never
	}
	return e.poolHasRoom(f)
}

// poolHasRoom reports whether f's back-end's pool can take one more C2.
func (e *FrontEnd) poolHasRoom(f *flow) bool {
	return len(e.pool.byDest[c2Dest{f.bIP, f.backend.Port}]) < e.cfg.PoolPerBackend
}

// poolReady reports whether f's held FIN may go with C2 to the pool now:
// every response reported ended and acknowledged, and the pool has room.
func (e *FrontEnd) poolReady(f *flow) bool {
	return f.respPending == 0 && f.respEndKnown && !f.cliAck.LessThan(f.respEnd) && e.poolHasRoom(f)
}

// holdFIN takes the client's FIN t (its options o, validated and noted by
// forwardClient) for the pool: C2 gets the segment's ACK alone, if it
// brought one (the server must have the client's last ACK, or it sends
// its last reply again, on a C2 that may serve another client by then),
// and the FIN waits for the Feedback of the last response, which comes
// from the shim about when the client, which had the response straight
// from it, closes: then C2 goes to the pool (ResponseEnded). The client
// resends its FIN only after its retransmission timeout; PoolFINWait is
// shorter, and then the FIN goes to C2 after all, as it would have.
func (e *FrontEnd) holdFIN(f *flow, t wire.TCP, o *wire.TCPOptions, ackAdvanced bool, now Time, out *Output) {
	f.finHeld, f.finHeldBy = true, now.Add(e.cfg.PoolFINWait)
	if e.poolReady(f) {
		pc := e.poolC2(f, now, out)
		if ackAdvanced {
			e.oweAck(pc, out) // the segment's ACK, for the next request to carry
		}
		return
	}
	if ackAdvanced {
		e.ackToC2(f, t.Ack(), o, out)
	}
	e.deadlineBy(f, f.finHeldBy)
}

// ackToC2 sends the server a bare ACK of ack (in the client's sequence
// space) for a client segment with options o: the client's TSval on C2's
// clock, its echo in the server's, as forwardClient would have sent it.
func (e *FrontEnd) ackToC2(f *flow, ack wire.Seq, o *wire.TCPOptions, out *Output) {
	var ob [wire.TSOptionLen]byte
	var opts []byte
	if o.HasTS && f.tsB {
		opts = ob[:wire.EncodeTS(ob[:], o.TSVal+f.cliTSOff, o.TSEcr-f.tsOffset)]
	}
	e.toBackend(f, f.rw.toB(f.cliNxt), ack-wire.Seq(f.seqDelta), wire.TCPFlagACK, opts, nil, out)
	e.stats.ForwardedFrames++
}

// releaseFIN sends the client's held FIN to C2 after all (PoolFINWait
// passed without the Feedback that would have pooled C2): the
// connection closes as without a pool.
func (e *FrontEnd) releaseFIN(f *flow, now Time, out *Output) {
	f.finHeld = false
	var ob [wire.TSOptionLen]byte
	e.toBackend(f, f.rw.toB(f.cliNxt), f.cliAck-wire.Seq(f.seqDelta), wire.TCPFlagACK|wire.TCPFlagFIN, f.c2TSOption(&ob), nil, out)
	e.stats.C2PoolFINsReleased++
	f.deadline = Never // its timer ran: the next is armed afresh
	e.forwardedClientSegment(f, wire.TCPFlagFIN, now, out)
}

// poolC2 moves f's C2 to the pool and closes the client's side itself
// (poolReady): after the client's held FIN, or for a client that asked
// to close (closeWanted) before it.
func (e *FrontEnd) poolC2(f *flow, now Time, out *Output) *pooledC2 {
	pc := e.detachToPool(f, now)
	e.closeClientSide(f, now, out)
	return pc
}

// detachToPool puts f's C2 in its back-end's pool and returns its entry:
// nothing of f's goes there any more.
func (e *FrontEnd) detachToPool(f *flow, now Time) *pooledC2 {
	pc := e.pool.newEntry()
	*pc = pooledC2{
		key: f.c2Key(), backend: f.backend,
		srvNxt: f.respEnd - wire.Seq(f.seqDelta), c2Nxt: f.rw.toB(f.cliNxt),
		tsNext:  f.tsMax + f.cliTSOff + 1,
		tsLastB: f.tsLastB, tsB: f.tsB, mssB: f.mssB, wsB: f.wsB,
		syn: f.c2SYN, since: now, peerWin: max(f.ck.cliMaxWin, f.c2PeerWin),
		win: f.cliWin,
	}
	dest := c2Dest{pc.key.bIP, pc.key.bPort}
	e.pool.byDest[dest] = append(e.pool.byDest[dest], pc)
	e.pool.byKey[pc.key] = pc
	e.pool.order = append(e.pool.order, poolRef{pc.key, now})
	if e.byC2[pc.key] == f {
		delete(e.byC2, pc.key)
	}
	f.c2Up = false
	f.poolPending = false
	f.c2Pooled = true
	e.stats.C2Pooled++
	return pc
}

// closeClientSide takes the client's side of f: it acknowledges the
// client's FIN, if it came (held), and sends the front-end's own from
// the end of the last response, reliably (the answering state), its
// TSvals never behind the last the client echoed.
func (e *FrontEnd) closeClientSide(f *flow, now Time, out *Output) {
	f.rcvNxt = f.cliNxt
	if f.finHeld {
		f.finHeld, f.cliFin = false, true
		f.rcvNxt++
	}
	f.closeBy = 0
	f.ansBase = f.respEnd
	f.sndUna, f.sndNxt = f.respEnd, f.respEnd
	f.tsFloor, f.tsFloorSet = f.cliTSecr, f.syn.ts
	f.tl.stamp(StepClose, now)
	e.closeQuietly(f, now, out)
}

// closeForClient closes f's client side at once for a client that asked
// to close and was told so in the response (closeSent), as the server
// would have: the client then closes after it, and is left without a
// TIME-WAIT of its own, as with the server's close. C2 goes to the pool
// now if the client has acknowledged the whole response, else once it
// has (poolPendingAck): until then the server may still have to send a
// byte again, which the shim translates for this client.
func (e *FrontEnd) closeForClient(f *flow, now Time, out *Output) {
	if !e.poolHasRoom(f) {
		return // no room: the client closes, and C2 with it
	}
	e.stats.C2PoolClosedForClient++
	if !f.cliAck.LessThan(f.respEnd) {
		e.oweTakenBackAck(f, e.poolC2(f, now, out), out)
		return
	}
	f.poolPending = true
	e.closeClientSide(f, now, out)
}

// poolPendingAck runs for a client segment t (options o, validated) while
// f's client side is closing and its C2 waits for the client's ACK of
// the response: the server gets the ACK (never past its own last byte),
// and C2 goes to the pool once it covers the response.
func (e *FrontEnd) poolPendingAck(f *flow, t wire.TCP, o *wire.TCPOptions, now Time, out *Output) {
	if t.Flags()&wire.TCPFlagACK == 0 || !f.cliAck.LessThan(t.Ack()) || !f.cliAck.LessThan(f.respEnd) {
		return
	}
	f.cliAck = t.Ack().Min(f.respEnd)
	if f.cliAck == f.respEnd {
		e.oweAck(e.detachToPool(f, now), out) // for the next request to carry
		return
	}
	e.ackToC2(f, f.cliAck, o, out)
}

// The client's last ACK on a pooled C2. The server must have it, or it
// sends the tail of its response again when its timers fire (Linux: a
// loss probe two round trips plus 2 ms after its last segment, or after
// 200 ms for a single segment; its retransmission timeout at 200 ms at
// the least). Under load the next request to the back-end takes the C2
// within a fraction of a millisecond (the pool gives the newest first),
// and that request acknowledges the response with its own ACK field: a
// frame less per request for the front-end, the shim and the server's
// kernel. So the ACK that pools C2 is owed (oweAck) rather than sent,
// and goes out by itself only if no request took the C2 within
// PoolAckDelay (1 ms, below any loss probe on a LAN).

// oweAck notes that pc's server still waits for the client's last ACK,
// which goes out at PoolAckDelay unless a request carries it first.
func (e *FrontEnd) oweAck(pc *pooledC2, out *Output) {
	if e.cfg.PoolAckDelay <= 0 {
		e.sendPooledAck(pc, out) // not deferred
		return
	}
	pc.ackOwed = true
	e.pool.acks = append(e.pool.acks, poolRef{pc.key, pc.since})
	e.stats.C2AcksDeferred++
}

// oweTakenBackAck owes pc, the C2 f just pooled, the client's ACK of
// this pass if it could be taken back out of out (takeBackAck): the next
// request carries it instead.
func (e *FrontEnd) oweTakenBackAck(f *flow, pc *pooledC2, out *Output) {
	if e.takeBackAck(f, out) {
		e.oweAck(pc, out)
	}
}

// takeBackAck takes f's last forwarded pure ACK back out of out, where
// it still waits to be written with the pass's frames, and reports
// whether it did. The shim's Feedback and the client's ACK of the
// response it reports usually reach the front-end together (the client
// had the response straight from the shim, a moment before), and the
// daemon's pass hands the engine its frames before the controller its
// datagrams: so the ACK was forwarded before C2 could be pooled, and
// without this it went out by itself, a frame on C2 that the next
// request's ACK field would have carried (oweAck). The hole it leaves
// is an OutFrame without Data, which the daemon skips.
func (e *FrontEnd) takeBackAck(f *flow, out *Output) bool {
	p := &f.pendAck
	if p.idx < 0 || p.out != out || p.gen != out.gen || p.idx >= len(out.Frames) || out.Frames[p.idx].Data == nil {
		return false
	}
	out.Frames[p.idx].Data = nil
	f.clearPendingAck()
	e.stats.ForwardedFrames--
	e.stats.TxFrames--
	e.stats.C2AcksTakenBack++
	return true
}

// sendPooledAck sends pooled C2 pc's owed ACK: the server's next sequence
// number, the last client's window, the C2's next TSval echoing the
// server's last.
func (e *FrontEnd) sendPooledAck(pc *pooledC2, out *Output) {
	pc.ackOwed = false
	var ob [wire.TSOptionLen]byte
	var opts []byte
	if pc.syn.ts && pc.tsB {
		opts = ob[:wire.EncodeTS(ob[:], pc.tsNext, pc.tsLastB)]
	}
	e.toPooled(pc, wire.TCPFrame{Ack: pc.srvNxt, Flags: wire.TCPFlagACK, Window: pc.win, Options: opts}, out)
	e.stats.ForwardedFrames++
}

// ackDeadline is when the oldest owed ACK of a pooled C2 is due.
func (e *FrontEnd) ackDeadline() Time {
	if pc := e.pool.head(&e.pool.acks, owesAck); pc != nil {
		return pc.since.Add(e.cfg.PoolAckDelay)
	}
	return Never
}

func owesAck(pc *pooledC2) bool { return pc.ackOwed }

// sendDueAcks sends the owed ACKs due by now.
func (e *FrontEnd) sendDueAcks(now Time, out *Output) {
	for due := e.ackDeadline(); due != Never && now >= due; due = e.ackDeadline() {
		e.sendPooledAck(e.pool.pop(&e.pool.acks), out)
		e.stats.C2AcksSentAlone++
	}
}

// closeAsAsked is for a client that sent "Connection: close" (HTTP/1.1),
// while f is queued: with a pool, the option is blanked in the request
// (httphead.BlankClose, the byte count kept) so that the server keeps C2
// open, and the Splice asks the shim to write close into the responses
// (proto.Splice.CloseResponses), so that the client still sees it.
// Then, once the response is over and acknowledged, the front-end
// closes the client's side as the server would have (scheduleClose),
// unless the client closes first (holdFIN) or, ignoring its own close,
// sends another request (then the connection simply stays open).
//
// It also notes whether the request has no body (bodyless): when its
// response has ended, the server had all of it, though the shim's copy
// of its ACK may come after the Feedback.
func (e *FrontEnd) closeAsAsked(f *flow) {
	if !e.cfg.PoolC2 || f.finInBuf {
		return
	}
	r := &e.head
	if httphead.Parse(f.buf, e.cfg.MaxHead, r) != nil {
		return
	}
	f.bodyless = r.BodyLen == 0
	if r.KeepAlive || string(r.Proto) != "HTTP/1.1" {
		return
	}
	f.closeWanted = httphead.BlankClose(f.buf[:r.HeadLen]) > 0
}

// scheduleClose runs when the last response on f ended (closeSent: the
// shim told the client to close in it) and when the client's ACK
// advances: for a client that asked to close (closeAsAsked), the
// front-end closes the client's side at once when the response said so
// (closeForClient); when it could not (the server announced no
// keep-alive for the shim to turn into close), the client may well go on
// as with any keep-alive connection, and only one that stays quiet for
// PoolCloseWait is closed.
func (e *FrontEnd) scheduleClose(f *flow, re ResponseEnd, now Time, out *Output) {
	if re.FINSent && f.closeWanted && f.state == stSpliced && f.respPending == 0 {
		// The client has the FIN: its side is the front-end's now,
		// whether C2 may be pooled or not.
		e.afterShimFIN(f, e.poolable(f), now, out)
		return
	}
	if !f.closeWanted || !e.poolable(f) || f.respPending != 0 || !f.respEndKnown {
		return
	}
	if re.CloseSent {
		e.closeForClient(f, now, out)
		return
	}
	if f.closeBy == 0 && e.poolReady(f) {
		f.closeBy = now.Add(e.cfg.PoolCloseWait)
		e.deadlineBy(f, f.closeBy)
	}
}

// afterShimFIN takes the client's side after the shim ended the response
// with a FIN (endWithFIN in shim_pool.go): the front-end's own FIN is
// out, at the response's end, and is sent again from here until the
// client acknowledges it (the answering state, as closeClientSide); a
// FIN of the client's held for this is taken. C2 goes to the pool once
// the client acknowledged the response, now or later (poolPendingAck),
// if poolOK; else it is reset, its server's response being over.
func (e *FrontEnd) afterShimFIN(f *flow, poolOK bool, now Time, out *Output) {
	e.stats.C2PoolClosedForClient++
	f.rcvNxt = f.cliNxt
	heldFIN := f.finHeld
	if heldFIN {
		f.finHeld, f.cliFin = false, true
		f.rcvNxt++
	}
	f.closeBy = 0
	f.ansBase = f.respEnd
	f.sendBuf = nil
	f.sndUna, f.sndNxt, f.finSent = f.respEnd, f.respEnd+1, true
	f.tsFloor, f.tsFloorSet = f.cliTSecr, f.syn.ts
	f.state = stAnswering
	f.retries = 0
	f.tl.stamp(StepClose, now)
	switch {
	case !poolOK || !e.poolHasRoom(f):
		// C2 closes, as the server wanted to.
		e.abortC2(f, out)
		f.c2Up = false
	case !f.cliAck.LessThan(f.respEnd):
		e.oweTakenBackAck(f, e.detachToPool(f, now), out)
	default:
		f.poolPending = true
	}
	if heldFIN {
		e.ackClient(f, now, out)
	}
	if f.sndUna.LessThan(f.cliAck) {
		e.answerAcked(f, f.cliAck, now, out) // the client had our FIN before the Feedback
		return
	}
	f.rto = now.Add(e.cfg.RTOMin)
	e.setDeadline(f, f.rto)
}

// closeDue runs f's close timer (scheduleClose): the client stayed quiet,
// so the front-end closes as the server would have.
func (e *FrontEnd) closeDue(f *flow, now Time, out *Output) {
	f.closeBy = 0
	f.deadline = Never // its timer ran: the next is armed afresh
	if e.poolable(f) && e.poolReady(f) {
		e.stats.C2PoolClosedForClient++
		e.poolC2(f, now, out)
		return
	}
	e.armSplicedTimer(f, now)
}

// reuseC2 hands queued flow f a pooled C2 of back-end b, if one fits its
// SYN options, and sends the Splice that moves it (EvSplice): true if it
// did.
func (e *FrontEnd) reuseC2(f *flow, b Backend, now Time, out *Output) bool {
	if !e.cfg.PoolC2 || f.rwPending || f.finInBuf {
		return false
	}
	dest := c2Dest{wire.IP4From(b.IP), b.Port}
	list := e.pool.byDest[dest]
	var pc *pooledC2
	for i := len(list) - 1; i >= 0; i-- { // the newest first
		if c := list[i]; c.fits(f) && c.backend.MAC == b.MAC {
			pc = c
			break
		}
	}
	if pc == nil {
		return false
	}
	c := *pc
	if c.ackOwed {
		f.c2AckOwed = true // the request's ACK field carries it (HoldSplice if it waits)
		e.stats.C2AcksCarried++
	}
	e.pool.remove(pc)
	f.backend, f.bIP, f.hport = b, c.key.bIP, c.key.hport
	e.takePort(f)
	f.reused, f.c2SYN, f.c2First = true, c.syn, c.c2Nxt
	f.c2Up = true
	f.state = stSpliceWait
	f.retries = 0
	f.tl.stamp(StepC2SYN, now)
	f.tl.stamp(StepC2SYNACK, now)
	f.tl.Reused = true
	e.stats.HandoffsStarted++
	e.stats.C2Reused++

	f.isnB = c.srvNxt - 1
	f.mssB, f.wsB, f.tsB = c.mssB, c.wsB, c.tsB
	f.seqDelta = uint32(f.isnF - f.isnB)
	if f.tsB {
		f.tsLastB = c.tsLastB
		f.tsOffset = tsClock(now) + 1 - c.tsLastB
		f.cliTSOff = c.tsNext - f.tsMax
	}
	start := f.syn.clientISN + 1
	delta := uint32(c.c2Nxt - start)
	f.rw = rewriteRec{on: true, startC: start, endC: start, startB: c.c2Nxt, endB: c.c2Nxt, before: delta, after: delta}
	f.reqEnd = f.requestEnd()
	f.reqUna, f.reqNxt = c.c2Nxt, c.c2Nxt
	f.cliNxt = f.rw.toC(f.reqEnd, true)
	// The server sends as far as the last client's window let it
	// before it hears of this one's: the bound the client's ACKs are
	// checked against (fe_validate.go) starts there.
	f.c2PeerWin = c.peerWin
	f.ck.replyEdge = f.ck.replyEdge.Max(f.isnF + 1 + wire.Seq(max(65535, c.peerWin)))
	e.waitDeadline(f, now.Add(3*e.cfg.HandoffTimeout), now)
	out.event(Event{Kind: EvSplice, Flow: f.id, Backend: f.backend.ID, Splice: e.spliceMessage(f)})
	return true
}

// waitDeadline arms f's deadline while it waits for its Splice's answer
// or a slot: by, or sooner if its reused C2 owes the server an ACK,
// which must not wait longer than PoolAckDelay (onTimer: ackWhileWaiting).
func (e *FrontEnd) waitDeadline(f *flow, by, now Time) {
	if f.c2AckOwed {
		f.waitBy = by
		by = min(by, now.Add(e.cfg.PoolAckDelay))
	}
	e.setDeadline(f, by)
}

// ackWhileWaiting sends the ACK f's reused C2 owes its server, if it
// still does, and re-arms the wait's own deadline; false: the wait's
// deadline has come.
func (e *FrontEnd) ackWhileWaiting(f *flow, now Time, out *Output) bool {
	if !f.c2AckOwed || now >= f.waitBy {
		return false
	}
	var ob [wire.TSOptionLen]byte
	e.toBackend(f, f.reqNxt, f.isnB+1, wire.TCPFlagACK, f.c2TSOption(&ob), nil, out)
	e.stats.C2AcksSentAlone++
	e.setDeadline(f, f.waitBy)
	return true
}

// fits reports whether pc may serve f: C2's options are the ones f's
// client offered (its MSS no smaller than C2's).
func (pc *pooledC2) fits(f *flow) bool {
	return pc.syn.ts == f.syn.ts && pc.syn.sack == f.syn.sack && pc.syn.wscale == f.syn.wscale && pc.syn.mss <= f.syn.mss
}

// putReuseOption writes the reuse option of f's Splice into b (which
// has room for it) and returns its length: the request on a reused C2
// carries it, so that the shim holds it until it has the Splice
// (shim_pool.go holdForReuse), and the controller may send the request
// with the Splice (proto.SpliceReuse.Early).
func (f *flow) putReuseOption(b []byte) int {
	b[0], b[1] = rewriteOptKind, reuseOptLen
	binary.BigEndian.PutUint16(b[2:], rewriteOptExID)
	binary.BigEndian.PutUint32(b[4:], f.rw.before)
	binary.BigEndian.PutUint32(b[8:], f.cliTSOff)
	return reuseOptLen
}

// spliceReuse is the Splice's Reuse part for f's reused C2.
func (f *flow) spliceReuse() proto.SpliceReuse {
	return proto.SpliceReuse{On: true,
		ServerNext: uint32(f.isnB + 1), FrontNext: uint32(f.rw.startB),
		ClientDelta: f.rw.before, ClientTSOffset: f.cliTSOff}
}

// inputPooled handles a segment from a back-end to the handoff port of
// a pooled C2: the shim's copy of the server's FIN or RST, at the
// server's next sequence number, from the back-end's address, port and
// MAC. Anything else is dropped, as for a free port.
func (e *FrontEnd) inputPooled(pc *pooledC2, p *wire.Packet, out *Output) {
	t := p.TCP
	flags := t.Flags()
	if p.Eth.Src() != pc.backend.MAC || t.Seq() != pc.srvNxt || flags&(wire.TCPFlagFIN|wire.TCPFlagRST) == 0 || flags&wire.TCPFlagSYN != 0 {
		e.drop(dropUnexpected)
		return
	}
	if flags&wire.TCPFlagRST == 0 {
		if flags&wire.TCPFlagACK == 0 || t.Ack() != pc.c2Nxt {
			e.drop(dropUnexpected)
			return
		}
		e.resetPooled(pc, out) // the server closes: free its socket at once
	}
	e.stats.C2PoolClosedByServer++
	e.pool.remove(pc)
}

// resetPooled sends a RST on pooled C2 pc, at the server's rcv_nxt.
func (e *FrontEnd) resetPooled(pc *pooledC2, out *Output) {
	e.toPooled(pc, wire.TCPFrame{Flags: wire.TCPFlagRST}, out)
}

// toPooled sends tf (its flags, ACK, window and options) on pooled C2 pc,
// at C2's next sequence number, to its server.
func (e *FrontEnd) toPooled(pc *pooledC2, tf wire.TCPFrame, out *Output) {
	tf.SrcMAC, tf.DstMAC = e.cfg.MAC, pc.backend.MAC
	tf.Src, tf.Dst, tf.SrcPort, tf.DstPort = e.handoff, pc.key.bIP, pc.key.hport, pc.key.bPort
	tf.Seq = pc.c2Nxt
	b := out.alloc(tf.Len())
	tf.Encode(b)
	out.send(PortWire, b)
	e.stats.TxFrames++
}

// poolDeadline is when the oldest pooled C2 expires.
func (e *FrontEnd) poolDeadline() Time {
	if pc := e.pool.head(&e.pool.order, anyPooled); pc != nil {
		return pc.since.Add(e.cfg.PoolIdle)
	}
	return Never
}

func anyPooled(*pooledC2) bool { return true }

// head returns the pooled C2 at the head of queue q (order or acks) that
// is still in the pool and still wanted there (want), dropping the stale
// refs before it: C2s taken, closed or no longer waiting since.
func (p *c2Pool) head(q *[]poolRef, want func(*pooledC2) bool) *pooledC2 {
	for len(*q) > 0 {
		r := (*q)[0]
		if pc := p.byKey[r.key]; pc != nil && pc.since == r.since && want(pc) {
			return pc
		}
		*q = (*q)[1:]
	}
	*q = (*q)[:0] // the storage serves again
	return nil
}

// pop takes the head of queue q, which head has just returned.
func (p *c2Pool) pop(q *[]poolRef) *pooledC2 {
	pc := p.byKey[(*q)[0].key]
	*q = (*q)[1:]
	return pc
}

// DropPool resets and forgets the pooled C2s to back-end backend (its
// ID) and returns how many: it restarted, and its shim lost their entries, so
// a Splice reusing one would be refused and its client's connection
// lost. The RST frees the server's socket, if the back-end's kernel
// still has it. They go in pool order, so that the output is the same
// for the same input (replay).
func (e *FrontEnd) DropPool(backend uint32, now Time, out *Output) int {
	n := 0
	for _, r := range e.pool.order {
		pc := e.pool.byKey[r.key]
		if pc == nil || pc.since != r.since || pc.backend.ID != backend {
			continue // stale, or another back-end's
		}
		e.resetPooled(pc, out)
		e.stats.C2PoolDropped++
		e.pool.remove(pc)
		n++
	}
	return n
}

// expirePool resets the pooled C2s idle for PoolIdle by now.
func (e *FrontEnd) expirePool(now Time, out *Output) {
	for due := e.poolDeadline(); due != Never && now >= due; due = e.poolDeadline() {
		pc := e.pool.pop(&e.pool.order)
		e.resetPooled(pc, out)
		e.stats.C2PoolExpired++
		e.pool.remove(pc)
	}
}
