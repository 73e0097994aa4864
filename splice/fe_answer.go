package splice

import (
	"strconv"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

var statusText = map[int]string{
	400: "Bad Request",
	408: "Request Timeout",
	429: "Too Many Requests",
	431: "Request Header Fields Too Large",
	502: "Bad Gateway",
	503: "Service Unavailable",
}

// answerBody builds a small self-contained response. Connection: close,
// because after answering we close: the request was not handed to anyone
// who could serve a next one.
func answerBody(status int, reason string, retryAfter time.Duration) []byte {
	text := statusText[status]
	body := strconv.Itoa(status) + " " + text + ": " + reason + "\n"
	h := "HTTP/1.1 " + strconv.Itoa(status) + " " + text + "\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n" +
		"Connection: close\r\n" +
		"Server: qsplice\r\n"
	if retryAfter > 0 {
		h += "Retry-After: " + strconv.Itoa(int((retryAfter+time.Second-1)/time.Second)) + "\r\n"
	}
	return []byte(h + "\r\n" + body)
}

// Reject answers a request on the front-end's behalf (503 when the queue
// is full or the wait too long, 429 over a cap), then closes. The request
// may be queued, or held on a connection set up ahead of its back-end
// slot (HoldSplice): then C2 is reset first, as the request never reached
// the server. Like every command it returns ErrNoFlow for a flow the
// engine does not hold and ErrFlowState for one in neither state.
func (e *FrontEnd) Reject(id FlowID, status int, reason string, retryAfter time.Duration, now Time, out *Output) error {
	f := e.byID[id]
	switch {
	case f == nil:
		return ErrNoFlow
	case f.state == stSpliceWait && f.spliceHeld:
		e.abandonHandoff(f, status, reason, retryAfter, now, out)
		return nil
	case f.state != stQueued && f.state != stReading:
		return ErrFlowState
	}
	e.answerWith(f, status, reason, answerBody(status, reason, retryAfter), now, out)
	return nil
}

func (e *FrontEnd) answer(f *flow, status int, reason string, now Time, out *Output) {
	e.answerWith(f, status, reason, answerBody(status, reason, 0), now, out)
}

// answerWith starts sending resp followed by FIN, reliably: the segments
// are retransmitted from sndUna until the client acknowledges the FIN.
func (e *FrontEnd) answerWith(f *flow, status int, reason string, resp []byte, now Time, out *Output) {
	f.state = stAnswering
	f.status = status
	f.sendBuf = resp
	f.retries = 0
	e.stats.Answered[answeredIndex(status)]++
	out.event(Event{Kind: EvAnswered, Flow: f.id, Status: status, Detail: reason})
	e.sendAnswer(f, now, out)
	f.rto = now.Add(e.cfg.RTOMin)
	e.setDeadline(f, f.rto)
}

// sendAnswer (re)sends everything from sndUna: answers are small, and a
// go-back-N retransmission keeps the state to two numbers.
func (e *FrontEnd) sendAnswer(f *flow, now Time, out *Output) {
	base := f.ansBase
	off := int(f.sndUna - base)
	if off > len(f.sendBuf) {
		off = len(f.sendBuf)
	}
	mss := int(max(f.syn.mss, minMSS))
	if f.syn.ts {
		mss -= wire.TSOptionLen
	}
	seq := f.sndUna
	for off < len(f.sendBuf) {
		n := min(mss, len(f.sendBuf)-off)
		flags := uint8(wire.TCPFlagACK | wire.TCPFlagPSH)
		last := off+n == len(f.sendBuf)
		if last {
			flags |= wire.TCPFlagFIN
		}
		e.toClient(f, now, seq, f.rcvNxt, flags, f.sendBuf[off:off+n], out)
		seq += wire.Seq(n)
		off += n
		if last {
			seq++
		}
	}
	if len(f.sendBuf) == 0 || f.sndUna == base+wire.Seq(len(f.sendBuf)) {
		e.toClient(f, now, base+wire.Seq(len(f.sendBuf)), f.rcvNxt, wire.TCPFlagACK|wire.TCPFlagFIN, nil, out)
		seq = base + wire.Seq(len(f.sendBuf)) + 1
	}
	f.sndNxt = seq
	f.finSent = true
}

// answerAcked processes the client's ACK of our answer.
func (e *FrontEnd) answerAcked(f *flow, ack wire.Seq, now Time, out *Output) {
	if !f.sndUna.LessThan(ack) || f.sndNxt.LessThan(ack) {
		return
	}
	f.sndUna = ack
	f.retries = 0
	if f.sndUna == f.sndNxt {
		// Everything including our FIN is acknowledged. The client's FIN
		// may still come; linger answers it.
		reason := CloseAnswered
		if f.c2Pooled || f.closeWanted {
			reason = CloseFIN // a served connection whose C2 was pooled (fe_pool.go)
		}
		e.linger(f, now, reason, out)
		return
	}
	f.rto = now.Add(e.cfg.RTOMin)
	e.setDeadline(f, f.rto)
}

// answerTimeout retransmits an unacknowledged answer with backoff.
func (e *FrontEnd) answerTimeout(f *flow, now Time, out *Output) {
	f.retries++
	if f.retries > e.cfg.MaxRetries {
		e.linger(f, now, CloseTimeout, out)
		return
	}
	e.stats.Retransmits++
	e.sendAnswer(f, now, out)
	f.rto = now.Add(e.cfg.RTOMin << f.retries)
	e.setDeadline(f, f.rto)
}

// closeQuietly sends our FIN (reliably) without a response.
func (e *FrontEnd) closeQuietly(f *flow, now Time, out *Output) {
	f.state = stAnswering
	f.sendBuf = nil
	f.retries = 0
	e.sendAnswer(f, now, out)
	f.rto = now.Add(e.cfg.RTOMin)
	e.setDeadline(f, f.rto)
}
