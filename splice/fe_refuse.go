package splice

import (
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// Refusing a follow-up request inside its own stream.
//
// A keep-alive client whose next request the scheduler refuses (queue
// full, queue timeout, over its cap) deserves the answer a client on a new
// connection gets: 503 with Retry-After, or 429. On a spliced connection
// the reply direction belongs to the back-end, so the answer can only
// start where the back-end's previous response ended, and only once the
// client has all of it: after that point the back-end has nothing more to
// send (it never saw the refused request). The shim reports the end in
// its Feedback (proto.Feedback.ResponseEnd) and the daemon hands it on
// (ResponseEnded). Then the front-end takes the connection back: it
// resets C2 at the back-end's rcv_nxt, acknowledges the client's bytes
// itself and sends the answer and its FIN with the usual retransmissions,
// as for any answer of its own. Requests the front-end cannot follow (a
// follow-up head that does not parse, a malformed chunked body: see
// fe_keepalive.go) are answered the same way, 400 or 431, without asking
// the scheduler.
//
// Requests handed to the back-end are counted (respPending) so that the
// end of an older response is not taken for the end of a pipelined newer
// one. If the end never becomes known (a lost Feedback, a response the
// shim did not see) within RefuseWait of the client's last progress, the
// connection is reset, which is what every refusal got before.

// kaRefused is the follow-up state after RejectFollowUp: the answer waits
// in sendBuf for the previous response to end.
const kaRefused kaState = kaChunked + 1

// RejectFollowUp answers the follow-up request waiting on a spliced flow
// with status (and Retry-After when retryAfter > 0) instead of admitting
// it, inside the same TCP stream, then closes the connection.
func (e *FrontEnd) RejectFollowUp(id FlowID, status int, reason string, retryAfter time.Duration, now Time, out *Output) error {
	f, err := e.waitingFollowUp(id)
	if err != nil {
		return err
	}
	e.refuseInStream(f, status, reason, retryAfter, now, out)
	return nil
}

// refuseInStream answers in f's stream from the end of the last response
// the back-end sends, at once if that is already known and acknowledged.
// Nothing the client sends from nextReq on reaches the back-end any more.
// The scheduler's refusals come here, and so do requests the front-end
// cannot follow (fe_keepalive.go).
func (e *FrontEnd) refuseInStream(f *flow, status int, reason string, retryAfter time.Duration, now Time, out *Output) {
	f.kaState = kaRefused
	f.status = status
	f.refuseReason = reason
	f.sendBuf = answerBody(status, reason, retryAfter)
	f.refuseBy = now.Add(e.cfg.RefuseWait)
	if f.refusalReady() {
		e.answerInStream(f, now, out)
		return
	}
	e.deadlineBy(f, f.refuseBy)
}

// ResponseEnd is what a shim's Feedback says of the end of a response
// (proto.Feedback): Seq, the back-end's sequence number just past its
// last byte; CloseSent, the shim wrote close into its head for a client
// that asked to close; FINSent, and it ended it with a FIN to the
// client (fe_pool.go).
type ResponseEnd struct {
	Seq                uint32
	CloseSent, FINSent bool
}

// ResponseEnded records that a response on a spliced flow is complete at
// the back-end. A refusal waiting for it may go out now; a client that
// asked to close is closed as the server would have (fe_pool.go).
//
// The Feedback of a request that went with C2's SYN or its Splice may
// overtake the SYN-ACK (they reach the front-end by different ways: the
// datagram by the control path, the SYN-ACK by its flow's shard): it is
// kept until SpliceAcked makes the flow spliced, or the C2 would look
// busy when the client closes and miss the pool.
func (e *FrontEnd) ResponseEnded(id FlowID, re ResponseEnd, now Time, out *Output) error {
	f := e.byID[id]
	switch {
	case f == nil:
		return ErrNoFlow
	case f.state == stConnecting || f.state == stSpliceWait:
		f.endEarly, f.endEarlyKnown = re, true
		return nil
	case f.state != stSpliced:
		return ErrFlowState
	}
	end := wire.Seq(re.Seq + f.seqDelta)
	if f.respPending > 0 {
		f.respPending--
	}
	if f.bodyless && f.respPending == 0 && f.reqUna.LessThan(f.reqEnd) {
		// The server answered a request without a body: it had all of
		// it. Its ACK comes in the shim's copy, which may come after
		// the Feedback (fe_pool.go closeAsAsked).
		f.reqUna = f.reqEnd
	}
	if !f.respEndKnown || f.respEnd.LessThan(end) {
		f.respEnd, f.respEndKnown = end, true
	}
	if f.kaState == kaRefused && f.refusalReady() {
		e.answerInStream(f, now, out)
	}
	e.scheduleClose(f, re, now, out) // a client that asked to close (fe_pool.go)
	if f.state == stSpliced && f.finHeld {
		switch {
		case e.poolable(f) && e.poolReady(f):
			e.poolC2(f, now, out) // the client's FIN waited for this (fe_pool.go)
		case f.respPending == 0:
			f.finHeldBy = now // no pool after all: the FIN goes at the next Tick
			e.deadlineBy(f, now)
		}
	}
	return nil
}

// refusalReady: every response handed to the back-end has ended and the
// client acknowledged all of it, so nothing of the back-end's is still in
// flight that a reset of C2 could cut short.
func (f *flow) refusalReady() bool {
	return f.respPending == 0 && f.respEndKnown && !f.cliAck.LessThan(f.respEnd)
}

// refusalProgress runs for each client segment while a refusal waits: the
// client's ACK may be the last thing missing, and its progress postpones
// the reset.
func (e *FrontEnd) refusalProgress(f *flow, ackAdvanced bool, now Time, out *Output) bool {
	if ackAdvanced {
		f.refuseBy = now.Add(e.cfg.RefuseWait)
	}
	if !f.refusalReady() {
		return false
	}
	e.answerInStream(f, now, out)
	return true
}

// refusalTimeout runs when refuseBy passed: reset, as a last resort.
func (e *FrontEnd) refusalTimeout(f *flow, now Time, out *Output) {
	e.stats.FollowUpsReset++
	e.Abort(f.id, now, out)
}

// answerInStream takes the connection back from the back-end and sends
// the refusal from the end of the last response.
func (e *FrontEnd) answerInStream(f *flow, now Time, out *Output) {
	e.stats.FollowUpsRefused++
	e.abortC2(f, out) // at cliNxt: the held request never reached it
	f.rcvNxt = f.nextReq + wire.Seq(len(f.kaBuf))
	if f.kaFin {
		f.rcvNxt++
		f.cliFin = true
	}
	f.buf, f.kaBuf, f.kaState = nil, nil, kaOff
	f.ansBase = f.respEnd
	f.sndUna, f.sndNxt = f.respEnd, f.respEnd
	// The client has seen the back-end's timestamps (translated); ours
	// must not go back behind the last one it echoed, or PAWS drops them.
	f.tsFloor, f.tsFloorSet = f.cliTSecr, f.syn.ts
	e.answerWith(f, f.status, f.refuseReason, f.sendBuf, now, out)
}
