package splice

import (
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// The acknowledgement of a request head (issue 7: a frame less per
// request). A request that arrives whole in one segment is usually
// handed off and answered within a millisecond or two, and the first
// segment of its response (which the shim sends with the back-end's ACK
// translated into the client's numbers) acknowledges the request anyway.
// So the front-end does not ACK such a head at once: it owes the ACK,
// and sends it only if RequestAckDelay passes before the client shows,
// by acknowledging response bytes, that a response reached it. The delay
// must stay well below what the client waits before it retransmits: a
// Linux client with one segment in flight sends its tail loss probe
// after twice its smoothed RTT plus 200 ms (RTO_min). A head in several
// segments, or with a FIN, or with bytes past the request, is ACKed at
// once: with more than one segment in flight the probe comes after 2 ms.

//
// The same holds on C2 when the back-end's kernel took the request in
// the front-end's own Fast Open SYN (synData): the handshake's last ACK
// is the front-end's to send (fe_handoff.go says why), but the kernel
// answers the request at once, the client acknowledges the reply, and
// that ACK, forwarded on C2 in the back-end's numbers, acknowledges the
// SYN-ACK as well: it completes the handshake. Linux's Fast Open socket
// sends its reply in SYN-RECV and needs nothing from the ACK before it
// (RFC 7413 section 4.2.2). So the front-end owes that ACK too, and
// sends it only if C2AckDelay passes with nothing sent on C2: a frame
// less per connection through the front-end's send, the switch, the
// shim's read and its TAP write. The delay bounds what a lost first
// reply costs: the Fast Open socket sends nothing again before its
// handshake completes.

// defaultRequestAckDelay is FrontEndConfig.RequestAckDelay's default.
const defaultRequestAckDelay = 40 * time.Millisecond

// defaultC2AckDelay is FrontEndConfig.C2AckDelay's default: a reply
// taken with the SYN is usually at the client, and its ACK back, within
// a millisecond.
const defaultC2AckDelay = 10 * time.Millisecond

// oweC2Ack holds back the handshake's last ACK on f's C2 (sent at once
// with C2AckDelay negative).
func (e *FrontEnd) oweC2Ack(f *flow, now Time, out *Output) {
	if e.cfg.C2AckDelay < 0 {
		e.sendC2HandshakeAck(f, out)
		return
	}
	f.c2AckOwed = true
	f.c2AckOwedBy = now.Add(e.cfg.C2AckDelay)
	e.armOwedAck(f)
}

// sentOnC2 notes a segment sent on f's C2: it completes the handshake, so
// an ACK owed for that is not needed.
func (e *FrontEnd) sentOnC2(f *flow) {
	if f.c2AckOwed {
		f.c2AckOwed = false
		e.stats.C2AcksSaved++
	}
}

// sendC2HandshakeAck sends the handshake's last ACK on f's C2: from the
// end of the request the SYN carried, acknowledging the SYN-ACK.
func (e *FrontEnd) sendC2HandshakeAck(f *flow, out *Output) {
	var ob [wire.TSOptionLen]byte
	e.toBackend(f, f.reqUna, f.isnB+1, wire.TCPFlagACK, f.c2TSOption(&ob), nil, out)
}

// mayOweRequestAck: the segment just taken (n payload bytes, fin) made
// the whole first request head, alone; its ACK may wait.
func (e *FrontEnd) mayOweRequestAck(f *flow, wasReading bool, n int, fin bool) bool {
	return e.cfg.RequestAckDelay > 0 && wasReading && f.state == stQueued && !fin && len(f.buf) == n
}

// oweRequestAck records the ACK owed and makes f's timer fire by then.
func (e *FrontEnd) oweRequestAck(f *flow, now Time) {
	f.ackOwed = true
	f.ackOwedBy = now.Add(e.cfg.RequestAckDelay)
	e.armOwedAck(f)
}

// armOwedAck makes f's timer fire no later than its owed ACK.
func (e *FrontEnd) armOwedAck(f *flow) {
	if f.ackOwed && f.ackOwedBy < f.armed {
		e.arm(f, f.ackOwedBy)
	}
	if f.c2AckOwed && f.c2AckOwedBy < f.armed {
		e.arm(f, f.c2AckOwedBy)
	}
}

// owedAckDue runs when f's timer fires: the owed ACK goes out if it is
// due and the client has not acknowledged any response byte yet (which
// it can only have done after a segment that acknowledged its request).
func (e *FrontEnd) owedAckDue(f *flow, now Time, out *Output) {
	if f.c2AckOwed && now >= f.c2AckOwedBy {
		f.c2AckOwed = false
		switch f.state {
		case stSpliceWait, stSpliced:
			e.stats.C2AcksDelayed++
			e.sendC2HandshakeAck(f, out)
		}
	}
	if !f.ackOwed || now < f.ackOwedBy {
		return
	}
	f.ackOwed = false
	if (f.isnF + 1).LessThan(f.cliAck) {
		e.stats.RequestAcksSaved++
		return
	}
	switch f.state {
	case stQueued, stConnecting, stSpliceWait, stSpliced:
		e.stats.RequestAcksDelayed++
		e.ackClient(f, now, out)
	}
}
