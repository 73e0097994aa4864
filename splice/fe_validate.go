package splice

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// Validation: which segments may change a flow (RFC 5961, RFC 9293 3.10.7.4).
//
// Anyone on the front-end's Ethernet segment can send a frame claiming a
// client's tuple, or a back-end's address and port towards a handoff
// port. Such a segment may change state only if its numbers are ones the
// real peer could use:
//
//   - A RST at exactly the sequence number expected next is taken. In the
//     window but not exact, it gets a challenge ACK and nothing else: the
//     real peer, if it did reset, answers that with a RST at exactly the
//     ACK number the challenge carried. Outside the window it is dropped.
//   - A SYN on a live connection gets a challenge ACK (a new connection
//     on the tuple of a closed, lingering one is still a new connection).
//   - Any other segment must carry ACK, a sequence number in the window,
//     and an ACK number between what the peer acknowledged less the
//     largest window it offered and the end of what can have been sent;
//     otherwise it is dropped, and a client's gets a challenge ACK.
//
// Before the splice, and while the front-end answers, it is the client's
// peer and knows both numbers exactly. Once spliced it is in the middle:
// the client's next sequence number is the end of everything it sent
// (ck.cliEnd), and the back-end's replies can have gone no further than
// the right edge of the windows the client offered (ck.replyEdge). A
// challenge ACK to a spliced client cannot carry the back-end's numbers
// (the front-end does not know them, and must never acknowledge request
// bytes for the back-end): its sequence number lies just below the
// client's window, so a live client ignores its ACK number and answers
// with an ACK of its own, while a client that did reset answers with a
// RST at cliEnd.
//
// On C2 the front-end is the back-end's peer as far as the request goes,
// and sees the replies' headers only while the request is unacknowledged
// and at FIN and RST (the shim's copies). The back-end's next sequence
// number is the client's rcv_nxt (the client's latest ACK, in back-end
// numbers); its RST must be there. Segments to a handoff port nobody uses,
// or that fail these checks, are dropped silently: a port in use cannot be
// told from a free one.
//
// Challenge ACKs, and the resets of stale C2 tuples, are answers an
// attacker can provoke (RFC 5961 section 7), so they are limited twice.
// Each flow answers at most once per challengeGap, as Linux limits each
// socket (tcp_invalid_ratelimit): an attack on one flow cannot spend the
// answers other flows need. And the engine sends at most about
// ChallengeACKLimit of them a second in all, each second's budget drawn
// between half and one and a half times the limit from a keyed hash, as
// Linux did after CVE-2016-5696: an attacker who counts the challenges it
// gets learns little about the ones other flows provoked.

// minMSS is the smallest MSS the front-end segments with, whatever a
// client or back-end announced: below the options a segment carries, a
// segment would hold nothing (and the loop sending a request would not
// end). 64 bytes leaves room for 24 bytes of payload behind 40 of options.
const minMSS = 64

// defaultChallengeACKLimit is Linux's tcp_challenge_ack_limit of old.
const defaultChallengeACKLimit = 1000

// challengeGap is the least time between two answers of one flow: Linux's
// tcp_invalid_ratelimit.
const challengeGap = Time(500 * time.Millisecond)

// segCheck is what a flow knows of the numbers its peers may use, in
// client-facing numbers.
type segCheck struct {
	started bool
	// c2Resets counts the RSTs this flow sent to clear an old connection
	// the back-end still held on its C2 tuple (see inputBackend): bounded
	// per handoff, not by time, because under load it is the normal way
	// a reused handoff port meets the back-end's TIME_WAIT.
	c2Resets uint8
	// cliEnd is the end (seq + SegLen) of the client's accepted
	// segments: once spliced, the sequence number the client uses next.
	cliEnd wire.Seq
	// cliMaxWin is the largest window the client offered, scaled.
	cliMaxWin uint32
	// replyEdge bounds the reply stream: no reply byte (ours or the
	// back-end's) can lie beyond the right edge of a window the client
	// offered.
	replyEdge wire.Seq
	// aborted: Abort reset both ends. Its RST reached a spliced client at
	// its latest ACK, which misses if the client had more than it
	// acknowledged; the client then answers with a challenge ACK, and a
	// RST at that ACK number lands exactly (resetAborted).
	aborted bool
	// challenged: the flow sent a challenge ACK (or a stale-C2 reset) at
	// lastChallenge.
	challenged    bool
	lastChallenge Time
}

// forwarded reports whether f's client segments go on to the back-end:
// the front-end is then in the middle, not the client's peer.
func (f *flow) forwarded() bool {
	return f.state == stSpliced || f.state == stLinger && f.hport != 0 && f.c2Up
}

// clientShift is the scale of the client's windows: its own offer, which
// the front-end always accepts (and C2 offers on).
func (f *flow) clientShift() uint { return uint(max(f.syn.wscale, 0)) }

// synWindow is the client's last window in bytes as a SYN carries it:
// unscaled (RFC 7323 section 2.2), so at most 65535.
func (f *flow) synWindow() uint16 {
	return uint16(min(f.clientWindow(), 65535))
}

// clientWindow is the client's last window in bytes.
func (f *flow) clientWindow() uint32 { return uint32(f.cliWin) << f.clientShift() }

// fastOpenFits reports whether the client's window holds two full
// segments, below which the request does not go in C2's SYN. Linux sizes
// a socket's largest segment once, when the socket is made, to at most
// half the largest window it has seen, so that a peer with a window below
// two segments still gets segments that fit. A socket made from a Fast
// Open SYN does that sizing with the SYN's window scaled (it corrects the
// window only afterwards, tcp_fastopen_create_child), which for a client
// with a 4 KiB receive buffer is 128 times too large: the back-end then
// sends only full segments, which never fit, and the download crawls at
// one small segment per 200 ms persist timeout. From the handshake's
// ACK, as without Fast Open, the sizing is right. Above two segments the
// bound does not bite either way.
func (f *flow) fastOpenFits() bool {
	return f.clientWindow() >= 2*uint32(f.syn.mss)
}

// backendWindow bounds the back-end's receive window: the largest a
// kernel announcing its scale can offer, and never less than ours.
func (e *FrontEnd) backendWindow(f *flow) uint32 {
	return max(uint32(65535)<<uint(max(f.wsB, 0)), uint32(e.cfg.RecvBuffer))
}

// c2MSS is the segment size on C2: the smaller of the two ends' MSS, and
// not below minMSS.
func (f *flow) c2MSS() int { return int(max(min(f.mssB, f.syn.mss), minMSS)) }

// validClient checks a client segment on f before anything of it is used.
// It returns true for a segment that may proceed: an exact RST, or an
// acceptable segment without SYN, whose numbers then widen f's bounds.
// Everything else is dropped, counted and, where RFC 5961 says so,
// answered with a challenge ACK.
func (e *FrontEnd) validClient(f *flow, t wire.TCP, now Time, out *Output) bool {
	ck := &f.ck
	if !ck.started {
		// The handshake's final ACK: we know exactly where both sides are.
		ck.started = true
		ck.cliEnd, ck.replyEdge = f.rcvNxt, f.sndNxt
	}
	flags := t.Flags()
	seq := t.Seq()
	end := seq + wire.Seq(t.SegLen())
	// expected is where the client's next byte goes. Segments must touch
	// [lo, hi] (old ones are acknowledged again further on), a RST that is
	// not exact lie in [rstLo, hi] to be challenged, and ACK numbers in
	// [ackLo, ackHi].
	var expected, lo, hi, rstLo, ackLo, ackHi wire.Seq
	if f.forwarded() {
		// expected is only the end of what the client sent as far as we
		// saw: its RST may lie before it, at what reached the back-end.
		w := wire.Seq(e.backendWindow(f))
		expected = ck.cliEnd
		lo, hi, rstLo = expected-w, expected+w, expected-w
		ackLo, ackHi = f.cliAck-wire.Seq(ck.cliMaxWin), ck.replyEdge
	} else {
		w := wire.Seq(e.cfg.RecvBuffer)
		expected = f.rcvNxt
		lo, hi, rstLo = expected-w, expected+w, expected
		ackLo, ackHi = f.sndUna-wire.Seq(ck.cliMaxWin), f.sndNxt
	}
	switch {
	case flags&wire.TCPFlagRST != 0:
		if seq == expected {
			return true
		}
		if seq.InRange(rstLo, hi+1) {
			e.drop(dropRSTInWindow)
			e.challengeClient(f, now, out)
		} else {
			e.drop(dropRSTOutOfWindow)
		}
		return false
	case flags&wire.TCPFlagSYN != 0:
		e.drop(dropSynInFlow)
		e.challengeClient(f, now, out)
		return false
	case flags&wire.TCPFlagACK == 0:
		e.drop(dropNoAck)
		return false
	case hi.LessThan(seq) || end.LessThan(lo):
		e.drop(dropOutOfWindow)
		e.challengeClient(f, now, out)
		return false
	case !t.Ack().InRange(ackLo, ackHi+1):
		e.drop(dropAckOutOfRange)
		e.challengeClient(f, now, out)
		return false
	}
	ck.cliEnd = ck.cliEnd.Max(end)
	win := uint32(t.Window()) << f.clientShift()
	ck.cliMaxWin = max(ck.cliMaxWin, win)
	ck.replyEdge = ck.replyEdge.Max(t.Ack() + wire.Seq(win) + 1) // +1: a FIN may follow the last byte
	return true
}

// challengeClient sends the client a challenge ACK, if the rate limit
// allows: at our own numbers when we are its peer; when spliced, just
// below its window (see the top of the file) with the next sequence
// number we expect as the ACK.
func (e *FrontEnd) challengeClient(f *flow, now Time, out *Output) {
	if !e.flowAnswerAllowed(f, now) {
		return
	}
	e.stats.ChallengeAcks++
	if f.forwarded() {
		e.toClient(f, now, f.cliAck-1, f.ck.cliEnd, wire.TCPFlagACK, nil, out)
		return
	}
	e.toClient(f, now, f.sndNxt, f.rcvNxt, wire.TCPFlagACK, nil, out)
}

// validBackend checks a segment on C2 of a spliced (or lingering) flow,
// already known to come from the back-end's address, port and MAC. It
// returns true for an exact RST or an acceptable segment; it drops the
// rest, answering only an in-window RST (with a challenge ACK).
func (e *FrontEnd) validBackend(f *flow, t wire.TCP, now Time, out *Output) bool {
	delta := wire.Seq(f.seqDelta)
	flags := t.Flags()
	seq := t.Seq()
	// The back-end sends next where the client's receiving stands; its
	// replies end at the right edge of the client's windows at most.
	expected := f.cliAck - delta
	lo := expected - wire.Seq(max(f.ck.cliMaxWin, 65535))
	hi := f.ck.replyEdge - delta
	switch {
	case flags&wire.TCPFlagRST != 0:
		if seq == expected {
			return true
		}
		if seq.InRange(lo, hi+1) {
			e.drop(dropRSTInWindow)
			e.challengeBackend(f, now, out)
		} else {
			e.drop(dropRSTOutOfWindow)
		}
		return false
	case flags&wire.TCPFlagSYN != 0:
		e.drop(dropSynInFlow)
		return false
	case flags&wire.TCPFlagACK == 0:
		e.drop(dropNoAck)
		return false
	case !seq.InRange(lo, hi+1):
		e.drop(dropOutOfWindow)
		return false
	case !t.Ack().InRange(f.reqUna-wire.Seq(e.backendWindow(f)), f.rw.toB(f.ck.cliEnd)+1):
		// The back-end acknowledges request bytes: no more than the
		// client sent, nor far below what it acknowledged already.
		e.drop(dropAckOutOfRange)
		return false
	}
	return true
}

// challengeBackend sends the back-end a challenge ACK on C2, if the rate
// limit allows: at the end of the request bytes sent on C2, acknowledging
// what the client acknowledged, with the client's window and clock, so
// that a live back-end learns nothing new from it.
func (e *FrontEnd) challengeBackend(f *flow, now Time, out *Output) {
	if !e.flowAnswerAllowed(f, now) {
		return
	}
	e.stats.ChallengeAcks++
	if f.state == stSpliceWait {
		e.sendC2Ack(f, out)
		return
	}
	var ob [wire.TSOptionLen]byte
	var opts []byte
	if f.syn.ts && f.tsB {
		ecr := f.tsLastB
		if f.cliTSecr != 0 {
			ecr = f.cliTSecr - f.tsOffset
		}
		opts = ob[:wire.EncodeTS(ob[:], f.c2TSval(), ecr)]
	}
	e.toBackend(f, f.rw.toB(f.cliNxt), f.cliAck-wire.Seq(f.seqDelta), wire.TCPFlagACK, opts, nil, out)
}

// answerLimit is the engine's budget of provoked answers for the current
// second.
type answerLimit struct {
	started bool
	second  int64
	left    int
}

// flowAnswerAllowed lets f answer a provoking segment if it did not
// within challengeGap and the engine's budget allows; it counts the
// answer as held back otherwise.
func (e *FrontEnd) flowAnswerAllowed(f *flow, now Time) bool {
	if f.ck.challenged && now-f.ck.lastChallenge < challengeGap {
		e.stats.ChallengeAcksLimited++
		return false
	}
	if !e.answerAllowed(now) {
		return false
	}
	f.ck.challenged, f.ck.lastChallenge = true, now
	return true
}

// answerAllowed takes one answer from the budget of now's second, and
// counts it as held back when none is left.
func (e *FrontEnd) answerAllowed(now Time) bool {
	limit := e.cfg.ChallengeACKLimit
	if limit < 0 {
		e.stats.ChallengeAcksLimited++
		return false
	}
	l := &e.answers
	if sec := int64(now / 1e9); !l.started || sec != l.second {
		l.started, l.second, l.left = true, sec, answerBudget(&e.cfg.CookieSecret, sec, limit)
	}
	if l.left <= 0 {
		e.stats.ChallengeAcksLimited++
		return false
	}
	l.left--
	return true
}

// answerBudget draws the budget of second sec between (limit+1)/2 and
// that plus limit-1, from a hash keyed with the secret: unpredictable to
// an attacker, the same in a replay.
func answerBudget(secret *[32]byte, sec int64, limit int) int {
	var b [32 + 8 + 9]byte
	copy(b[:32], secret[:])
	binary.BigEndian.PutUint64(b[32:], uint64(sec))
	copy(b[40:], "challenge")
	sum := sha256.Sum256(b[:])
	return (limit+1)/2 + int(binary.BigEndian.Uint32(sum[:])%uint32(limit))
}

// resetAborted answers a late segment of a spliced client whose flow was
// aborted (a challenge ACK to Abort's RST, or anything the client still
// sends) with a RST at the segment's ACK number: the client's rcv_nxt,
// so the client takes it, even when the back-end and its shim are gone.
// It reports whether it took the segment.
func (e *FrontEnd) resetAborted(f *flow, t wire.TCP, now Time, out *Output) bool {
	if f.state != stLinger || !f.ck.aborted {
		return false
	}
	if t.Flags()&(wire.TCPFlagRST|wire.TCPFlagACK) == wire.TCPFlagACK && e.answerAllowed(now) {
		e.toClient(f, now, t.Ack(), 0, wire.TCPFlagRST, nil, out)
	}
	return true
}
