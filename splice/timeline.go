package splice

import "github.com/qsplice/qsplice/splice/wire"

// Handoff timelines (issue 11): the front-end engine stamps the time of
// each handoff step it sees itself into the flow, and hands the stamps to
// the daemon in the flow's EvClosed. The controller adds the steps it
// sees (queued, admitted, Splice sent, SpliceAck, Feedback) and those the
// shim reports, and writes one record per connection
// (frontend/timeline). Times are the caller's (see Time): nothing here
// reads a clock, and a stamp is a store, so it is always on.
//
// The SYN is the one step a flow does not exist for: SYN cookies keep no
// state until the handshake's last ACK. With FrontEndConfig.Timelines the
// engine remembers when SYNs came in a fixed table of synSlots slots,
// indexed by a hash of the 4-tuple and overwritten by any later SYN that
// lands in the same slot; the cookie ACK takes its SYN's time from there
// if the slot still holds it. A SYN flood therefore costs timelines their
// SYN step, never memory: the table does not grow.

// FlowStep names a step of a connection's handoff the engine sees.
type FlowStep uint8

const (
	// StepSYN: the client's SYN arrived (the first one, when it was
	// retransmitted; FlowTimeline.SYNs counts them).
	StepSYN FlowStep = iota
	// StepCookieACK: the handshake's last ACK carried a valid cookie;
	// the flow exists from here on.
	StepCookieACK
	// StepHeadComplete: the request head was complete (EvRequest).
	StepHeadComplete
	// StepC2SYN: the first SYN of the handoff connection went out
	// (Dispatch).
	StepC2SYN
	// StepC2SYNACK: the back-end's SYN-ACK arrived (EvSplice).
	StepC2SYNACK
	// StepRequestSent: the request went out on C2 (SpliceAcked); a request
	// its Splice carries (FlowTimeline.Carried): with the Splice, at
	// dispatch, before C2's SYN-ACK.
	StepRequestSent
	// StepClose: the first FIN or RST in either direction, or the flow's
	// end when it ended without one (a timeout, an abort).
	StepClose
	// NumFlowSteps counts the steps.
	NumFlowSteps
)

var flowStepNames = [NumFlowSteps]string{"syn", "cookie_ack", "head_complete", "c2_syn", "c2_synack", "request_sent", "close"}

func (s FlowStep) String() string {
	if s < NumFlowSteps {
		return flowStepNames[s]
	}
	return "unknown"
}

// FlowTimeline is what the engine saw of one connection's handoff.
type FlowTimeline struct {
	At   [NumFlowSteps]Time // valid where Have says so
	Have uint16             // bit s: At[s] was stamped
	// SYNs counts the SYNs that came for the connection's client ISN
	// (retransmissions show as more than 1); 0 when the SYN was not
	// remembered.
	SYNs uint8
	// C2SYNs counts the handoff connection's SYNs (more than 1: the
	// back-end did not answer at once, or held an old connection);
	// RequestResends the retransmissions of the request on C2.
	C2SYNs, RequestResends uint8
	// RequestBytes is what the front-end handed over on C2 itself: the
	// request head and the body bytes it buffered.
	RequestBytes uint32
	// Carried: the request went in its Splice, and the shim sent it on
	// C2 (fe_atsyn.go).
	Carried bool
	// Reused: C2 came from the pool (fe_pool.go reuseC2): no handshake.
	Reused bool
	// Retx are the first MaxRetxMarks retransmissions the engine saw on
	// the connection, in order; NumRetx counts them all.
	Retx    [MaxRetxMarks]RetxMark
	NumRetx uint16
	// sacking: the client's last forwarded segment carried SACK blocks
	// (a loss episode is under way; its first such ACK was marked).
	sacking bool
}

// RetxKind says which retransmission a RetxMark is.
type RetxKind uint8

const (
	// RetxSYN: the client resent its SYN (the latest resend's time; the
	// SYN table keeps one).
	RetxSYN RetxKind = iota + 1
	// RetxClientData: the client resent bytes the front-end already had
	// (the front-end's ACK or the client's segment was lost), before or
	// after the splice.
	RetxClientData
	// RetxClientSACK: the client began reporting response bytes missing
	// (its first ACK with SACK blocks after one without): the back-end's
	// retransmission follows, from the shim, which the front-end does not
	// see. A D-SACK (the client got a byte twice) counts too.
	RetxClientSACK
	// RetxC2SYN: the front-end resent the handoff connection's SYN.
	RetxC2SYN
	// RetxRequest: the front-end resent the request on C2.
	RetxRequest
	numRetxKinds
)

var retxKindNames = [numRetxKinds]string{"", "syn", "client_data", "client_sack", "c2_syn", "request"}

func (k RetxKind) String() string {
	if k > 0 && k < numRetxKinds {
		return retxKindNames[k]
	}
	return "unknown"
}

// MaxRetxMarks bounds the retransmissions a flow keeps the time of: a
// connection under heavy loss reports its first ones and their count,
// in a fixed 128 bytes.
const MaxRetxMarks = 8

// RetxMark is one retransmission the engine saw.
type RetxMark struct {
	At   Time
	Kind RetxKind
}

// Marks returns the retransmissions kept, in order.
func (t *FlowTimeline) Marks() []RetxMark {
	return t.Retx[:min(int(t.NumRetx), MaxRetxMarks)]
}

// retx notes a retransmission of kind k at now.
func (t *FlowTimeline) retx(k RetxKind, now Time) {
	if t.NumRetx < MaxRetxMarks {
		t.Retx[t.NumRetx] = RetxMark{At: now, Kind: k}
	}
	if t.NumRetx < 1<<16-1 {
		t.NumRetx++
	}
}

// c2SYNSent counts a handoff SYN; any after the first is a resend.
func (t *FlowTimeline) c2SYNSent(now Time) {
	t.C2SYNs = min(t.C2SYNs+1, 255)
	if t.C2SYNs > 1 {
		t.retx(RetxC2SYN, now)
	}
}

// requestResent counts a resend of the request on C2.
func (t *FlowTimeline) requestResent(now Time) {
	t.RequestResends = min(t.RequestResends+1, 255)
	t.retx(RetxRequest, now)
}

// clientSACK marks the start of each loss episode the client reports on
// the response: numSACK is the SACK blocks of its forwarded segment.
func (t *FlowTimeline) clientSACK(numSACK int, now Time) {
	if numSACK > 0 && !t.sacking {
		t.retx(RetxClientSACK, now)
	}
	t.sacking = numSACK > 0
}

// Get returns the time of step s, if it was stamped.
func (t *FlowTimeline) Get(s FlowStep) (Time, bool) {
	return t.At[s], t.Have&(1<<s) != 0
}

// stamp records now as the time of step s unless s already has one: each
// step's first occurrence counts (a retransmitted C2 SYN or request is
// not a new step).
func (t *FlowTimeline) stamp(s FlowStep, now Time) {
	if t.Have&(1<<s) == 0 {
		t.At[s] = now
		t.Have |= 1 << s
	}
}

// requestSent stamps the request's first sending on C2 and its size.
func (t *FlowTimeline) requestSent(now Time, n int) {
	if t.Have&(1<<StepRequestSent) == 0 {
		t.RequestBytes = uint32(min(n, 1<<32-1))
	}
	t.stamp(StepRequestSent, now)
}

// synSlots is the size of the SYN table: at 4096 slots a connection rate
// of thousands a second with round trips of a millisecond leaves few
// collisions; 96 KiB in all.
const synSlots = 4096

type synSlot struct {
	key  fourTuple
	isn  wire.Seq
	at   Time
	last Time // the latest resend, when n > 1
	n    uint8
}

// synTable remembers when recent SYNs arrived (nil: timelines are off).
type synTable []synSlot

func newSynTable(on bool) synTable {
	if !on {
		return nil
	}
	return make(synTable, synSlots)
}

func (t synTable) slot(key fourTuple) *synSlot {
	h := uint32(key.srcIP[0]) | uint32(key.srcIP[1])<<8 | uint32(key.srcIP[2])<<16 | uint32(key.srcIP[3])<<24
	h ^= uint32(key.srcPort)<<16 | uint32(key.dstPort)
	h ^= uint32(key.dstIP[3]) << 5
	h *= 0x9e3779b1 // Fibonacci hashing: the top bits mix every input bit
	return &t[h>>(32-12)]
}

// noteSYN records a SYN for key with client ISN isn at now.
func (t synTable) noteSYN(key fourTuple, isn wire.Seq, now Time) {
	if t == nil {
		return
	}
	s := t.slot(key)
	if s.n > 0 && s.key == key && s.isn == isn {
		s.n = min(s.n+1, 255) // a retransmitted SYN: the first one's time stays
		s.last = now
		return
	}
	*s = synSlot{key: key, isn: isn, at: now, n: 1}
}

// accepted stamps the cookie ACK of a new flow, and its SYN if the table
// still holds it (the slot is freed for the next connection).
func (e *FrontEnd) timelineAccepted(f *flow, now Time) {
	f.tl.stamp(StepCookieACK, now)
	if e.syns == nil {
		return
	}
	s := e.syns.slot(f.key)
	if s.n > 0 && s.key == f.key && s.isn == f.syn.clientISN {
		f.tl.stamp(StepSYN, s.at)
		f.tl.SYNs = s.n
		if s.n > 1 {
			f.tl.retx(RetxSYN, s.last)
		}
		*s = synSlot{}
	}
}

// LiveTimeline returns what the engine saw so far of flow id's handoff
// and the client bytes it forwarded, while the flow has not been
// reported closed (no EvClosed yet: open, or spliced and waiting out its
// linger after both FINs). The front-end asks when it stops, to write
// the records of the connections it still holds.
func (e *FrontEnd) LiveTimeline(id FlowID) (FlowTimeline, uint64, bool) {
	f := e.byID[id]
	if f == nil || f.state == stLinger {
		return FlowTimeline{}, 0, false
	}
	return f.tl, f.forwardedBytes, true
}
