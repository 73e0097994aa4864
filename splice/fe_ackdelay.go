package splice

import "time"

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

// defaultRequestAckDelay is FrontEndConfig.RequestAckDelay's default.
const defaultRequestAckDelay = 40 * time.Millisecond

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
}

// owedAckDue runs when f's timer fires: the owed ACK goes out if it is
// due and the client has not acknowledged any response byte yet (which
// it can only have done after a segment that acknowledged its request).
func (e *FrontEnd) owedAckDue(f *flow, now Time, out *Output) {
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
