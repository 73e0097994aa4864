package splice

import (
	"github.com/qsplice/qsplice/splice/httphead"
	"github.com/qsplice/qsplice/splice/wire"
)

// flowState is where a client connection is in the handoff.
type flowState uint8

const (
	stReading    flowState = iota // buffering the request head
	stQueued                      // head complete, waiting for Dispatch
	stConnecting                  // C2 SYN sent
	stSpliceWait                  // C2 up, Splice sent, waiting for the shim's ack
	stSpliced                     // forwarding client packets onto C2
	stAnswering                   // sending our own response, then FIN
	stLinger                      // closed; kept for late segments
)

var flowStateNames = [...]string{"reading", "queued", "connecting", "splice-wait", "spliced", "answering", "linger"}

func (s flowState) String() string { return flowStateNames[s] }

// flow is one client connection and, once dispatched, its handoff
// connection C2. Client-facing numbers: isnF is our ISN, syn.clientISN
// the client's. C2 reuses the client's ISN, so request-direction sequence
// numbers are the same on both connections (until a rewritten request
// target shifts them, f.rw: rewrite.go) and only the reply direction
// (and everything that refers to it: ACK, SACK, TS echo) is translated.
type flow struct {
	id       FlowID
	state    flowState
	key      fourTuple // client -> VIP
	cliMAC   wire.MAC  // source MAC of the client's frames: its next hop
	syn      synInfo
	isnF     wire.Seq
	wsF      int // our window scale towards the client, -1 if none
	deadline Time
	// armed is the time of deadline's live heap entry (Never: none).
	// A deadline later than it is not pushed: the entry at armed fires
	// first and Tick pushes the later time then (issue 7: a flow's
	// deadlines go 10 s, 30 s, 1 s, 3 s, 0.2 s, 5 s..., and pushing
	// each left stale entries that made the heap ~150k deep under load).
	armed Time

	// Request direction before the handoff.
	rcvNxt   wire.Seq
	buf      []byte // bytes from clientISN+1 that we acknowledged
	cliWin   uint16 // client's last raw window
	tsRecent uint32 // client's last TSval
	tsMax    uint32 // the highest TSval it sent (noteClientTS, fe_timewait.go)
	// carried: the Splice carries the request, which the shim sends
	// (fe_atsyn.go); sendRequest only counts it sent.
	carried bool
	// synData: C2's SYN carried the request and the back-end's cookie
	// (FrontEndConfig.FastOpenInSYN). synBare: its SYNs from now on
	// carry none, and the shim fills them (inputBackend says why).
	synData, synBare bool
	// tfo: the back-end's SYN-ACK acknowledged the carried request,
	// which the shim put in C2's SYN (Fast Open, shim_fastopen.go).
	tfo bool
	// implicitAck: the Splice asked the shim to take such a SYN-ACK for
	// its acknowledgement (proto.SpliceImplicitAck): its coming is an
	// EvSpliceTaken. Not when our own SYN brought the request (synData):
	// the kernel may have taken it from the wire, past the shim, and the
	// SYN-ACK proves nothing of the Splice, which UDP may have lost. The
	// Splice is taken then when the client acknowledges a response byte,
	// which only the shim's translation brings it (spliceUnproven, since
	// the SYN-ACK at synAckAt); until then the daemon's resend timer runs.
	implicitAck, spliceUnproven bool
	synAckAt                    Time

	started  Time
	lastSeen Time
	cliFin   bool // client sent FIN (and we have it in sequence)
	finInBuf bool // the FIN was acknowledged by us before the handoff

	// Our own sending (answers such as 400/503).
	sndUna, sndNxt wire.Seq
	sendBuf        []byte
	finSent        bool
	retries        int
	rto            Time
	status         int

	// Handoff connection C2.
	backend Backend
	bIP     wire.IP4
	hport   uint16
	isnB    wire.Seq
	c2Up    bool // the back-end's SYN-ACK arrived (isnB is known; 0 is a valid ISN)
	// spliceHeld: the shim confirmed, the request waits for a back-end
	// slot (HoldSplice).
	spliceHeld bool
	// The Splice sent with the SYN (fe_atsyn.go): atSYN while it is in
	// use; atSYNGo when the request may go as soon as C2 is up (the
	// SpliceAck came first, or an early request); tsBase the
	// client-facing TSval the SYN-ACK's maps to; tsLag how far our own
	// TSvals to the client stay behind our clock to stay just behind
	// the translated ones.
	atSYN, atSYNGo bool
	tsBase, tsLag  uint32
	mssB           uint16
	wsB            int
	tsB            bool
	tsLastB        uint32 // back-end's last TSval seen by us
	seqDelta       uint32 // client-facing reply seq = back-end seq + seqDelta
	tsOffset       uint32 // client-facing TSval = back-end TSval + tsOffset
	reqEnd         wire.Seq
	reqUna         wire.Seq // highest back-end ACK seen (via the shim's copies)
	reqNxt         wire.Seq
	held           [][]byte
	srvFin         bool
	cliAck         wire.Seq // client's latest ACK (client-facing numbers)
	cliAckAt       Time     // when cliAck last advanced: the back-end's data reached the client (fe_progress.go)
	srvRST         bool
	// ackOwed: the request head's ACK was held back until ackOwedBy
	// (fe_ackdelay.go); anything sent to the client at rcvNxt clears it.
	ackOwed   bool
	ackOwedBy Time
	// pendAck is the client's last pure ACK forwarded in the current
	// output, which a later one may overwrite (fe_ackcoalesce.go).
	pendAck pendingAck

	forwardedBytes uint64
	storm          stormTrack
	cliTSecr       uint32 // client's last TS echo (client-facing numbers)

	// Follow-up requests (fe_keepalive.go).
	reqSpan int64 // head+body of the first request, -1 while its chunked end is not found
	kaState kaState
	nextReq wire.Seq // where the next request head starts
	kaBuf   []byte   // held bytes from nextReq
	kaFin   bool     // the client's FIN follows kaBuf
	kaSpan  int64    // head+body of the waiting follow-up, -1 if unknown
	cliNxt  wire.Seq // end of the client's bytes forwarded on C2 (for a RST the back-end accepts)

	// Chunked request bodies followed to their end (fe_keepalive.go).
	chunk     httphead.Chunked // the body being followed: the first request's, or kaChunked's
	kaHeadLen int              // head length of the waiting follow-up, for its chunked body

	// Refused follow-ups answered in the stream (fe_refuse.go).
	respPending  int      // requests sent to the back-end whose end is not reported yet
	respEnd      wire.Seq // end of the back-end's last response (client-facing)
	respEndKnown bool
	refuseBy     Time // reset instead of answering if the end is not known by then
	refuseReason string
	ansBase      wire.Seq // first sequence number of our answer
	tsFloor      uint32   // our TSval never goes below it (when tsFloorSet)
	tsFloorSet   bool

	// Bounded state (limits.go): the count of its source f is in.
	srcHold srcHold

	// Request rewriting (issue 10, rewrite.go, fe_rewrite.go).
	rw        rewriteRec // the newest correction point; rw.on once a target was rewritten
	rwPending bool       // Rewrite was called for the request about to go on C2
	rwAt      int        // the client's target: offset in the head (buf or kaBuf)
	rwOldLen  int        // and length
	rwTarget  []byte     // the new target; the front-end's copy while unacknowledged
	rwFollow  bool       // rw is a follow-up's: the request timer resends rwTarget

	// TCP validation (fe_validate.go).
	ck segCheck

	// Pooled handoff connections (fe_pool.go): c2SYN are the options C2
	// was opened with (its first client's); reused says C2 served an
	// earlier client, and cliTSOff is added to this client's TSvals on
	// it; c2Pooled says C2 went back to the pool when this client closed.
	c2SYN      synInfo
	reuseTaken bool     // the server's ACK of a request on the reused C2 came (EvSpliceTaken)
	c2First    wire.Seq // C2's sequence number of the client's first byte
	// c2PeerWin: the largest window the earlier clients of a pooled C2
	// offered its server (fe_pool.go pooledC2.peerWin).
	c2PeerWin uint32
	reused    bool
	cliTSOff  uint32
	c2Pooled  bool
	// c2AckOwed: this flow's reused C2 came with the last client's ACK
	// owed to the server (fe_pool.go oweAck), which the request's ACK
	// field carries; if the request waits, it goes alone at waitAckBy,
	// and the wait's own deadline is waitBy.
	c2AckOwed bool
	waitBy    Time
	// endEarly: the Feedback of the first response, which came before
	// the flow was spliced (ResponseEnded), for SpliceAcked to apply.
	endEarly      ResponseEnd
	endEarlyKnown bool
	// finHeld: the client's FIN waits for the last Feedback, to pool C2,
	// until finHeldBy (fe_pool.go holdFIN).
	finHeld   bool
	finHeldBy Time
	// closeWanted: the client asked to close, which was taken out of its
	// request for C2's sake; closeBy: when the front-end closes the
	// client's side itself if the client does not (fe_pool.go).
	closeWanted bool
	closeBy     Time
	bodyless    bool // the first request has no body
	// poolPending: the client's side is closing (answering) and C2 goes
	// to the pool once the client acknowledged the response.
	poolPending bool

	// Handoff timeline (issue 11, timeline.go): when each step happened.
	tl FlowTimeline
}

// closed reports whether both ends are done with f: it is lingering, or
// spliced with both FINs seen and waiting out the linger.
func (f *flow) closed() bool {
	return f.state == stLinger || f.state == stSpliced && f.cliFin && f.srvFin
}

// tsClock is the front-end's timestamp clock: milliseconds of engine time,
// like Linux's, so translated back-end values continue it smoothly.
func tsClock(now Time) uint32 { return uint32(now / 1e6) }

// rcvWindow is the window we advertise before the handoff (scaled).
func (e *FrontEnd) rcvWindow(f *flow) uint16 {
	free := e.cfg.RecvBuffer - len(f.buf)
	if free < 0 {
		free = 0
	}
	if f.wsF > 0 {
		free >>= f.wsF
	}
	return uint16(min(free, 65535))
}

// toClient builds a segment from the VIP to the client with the options a
// non-SYN segment of this connection carries.
func (e *FrontEnd) toClient(f *flow, now Time, seq, ack wire.Seq, flags uint8, payload []byte, out *Output) {
	var optBuf [wire.TSOptionLen]byte
	var opts []byte
	if f.syn.ts {
		tsVal := f.ownTSval(now)
		if f.tsFloorSet && int32(f.tsFloor-tsVal) > 0 {
			tsVal = f.tsFloor
		}
		opts = optBuf[:wire.EncodeTS(optBuf[:], tsVal, f.tsRecent)]
	}
	tf := wire.TCPFrame{
		SrcMAC: e.cfg.MAC, DstMAC: f.cliMAC,
		Src: f.key.dstIP, Dst: f.key.srcIP,
		SrcPort: f.key.dstPort, DstPort: f.key.srcPort,
		Seq: seq, Ack: ack, Flags: flags,
		Window:  e.rcvWindow(f),
		Options: opts, Payload: payload,
	}
	b := out.alloc(tf.Len())
	tf.Encode(b)
	out.send(PortWire, b)
	e.stats.TxFrames++
	if ack == f.rcvNxt {
		f.ackOwed = false // this frame carries it (fe_ackdelay.go)
	}
}

// ackClient acknowledges everything received so far.
func (e *FrontEnd) ackClient(f *flow, now Time, out *Output) {
	seq := f.sndNxt
	e.toClient(f, now, seq, f.rcvNxt, wire.TCPFlagACK, nil, out)
}

// toBackend builds a segment on C2 from the handoff address.
func (e *FrontEnd) toBackend(f *flow, seq, ack wire.Seq, flags uint8, opts, payload []byte, out *Output) {
	f.clearPendingAck()
	f.c2AckOwed = false // every segment on C2 acknowledges the server's last byte
	tf := wire.TCPFrame{
		SrcMAC: e.cfg.MAC, DstMAC: f.backend.MAC,
		Src: e.handoff, Dst: f.bIP,
		SrcPort: f.hport, DstPort: f.backend.Port,
		Seq: seq, Ack: ack, Flags: flags,
		Window:  f.cliWin,
		Options: opts, Payload: payload,
	}
	b := out.alloc(tf.Len())
	tf.Encode(b)
	out.send(PortWire, b)
	e.stats.TxFrames++
}

// c2TSOption returns the timestamp option for a segment we originate on
// C2: the client's clock (which the back-end has seen in the client's own
// segments) echoing the back-end's last value.
func (f *flow) c2TSOption(b *[wire.TSOptionLen]byte) []byte {
	if !f.syn.ts || !f.tsB {
		return nil
	}
	return b[:wire.EncodeTS(b[:], f.c2TSval(), f.tsLastB)]
}

// c2TSval is the TSval of a segment the front-end makes up on C2: the
// client's latest, on C2's clock (shifted on a pooled C2, fe_pool.go).
func (f *flow) c2TSval() uint32 { return f.tsRecent + f.cliTSOff }

// flowIn returns flow id if it is in state want: the daemon's calls name
// a flow that may have moved on (or gone) since the event it answers.
func (e *FrontEnd) flowIn(id FlowID, want flowState) (*flow, error) {
	f := e.byID[id]
	switch {
	case f == nil:
		return nil, ErrNoFlow
	case f.state != want:
		return nil, ErrFlowState
	}
	return f, nil
}

// Recycling. A connection per request would allocate a flow record and a
// request buffer per request; both come back when the flow is done (the
// buffer at linger, the record at free) and serve the next connections.
// A flow is freed seconds after it was made (its linger), so the spares
// must absorb a load that changes over seconds: they may number as many
// as the live flows, at least minSpare and at most maxSpare (520 bytes
// each). Spare request buffers are those of at most spareBufCap bytes, up
// to maxSpareBufBytes in all: a long head or body, or a flood, goes back
// to the garbage collector.
const (
	minSpare         = 256
	maxSpare         = 16384
	spareBufCap      = 2 << 10
	maxSpareBufBytes = 8 << 20
)

// spareLimit is how many spare records or buffers may be kept now.
func (e *FrontEnd) spareLimit() int { return min(maxSpare, max(minSpare, len(e.byID))) }

// newFlow registers a flow for key.
func (e *FrontEnd) newFlow(key fourTuple, now Time) *flow {
	e.nextID += FlowID(e.shards()) // congruent to the shard (shard.go)
	var f *flow
	if n := len(e.spareFlows); n > 0 {
		f = e.spareFlows[n-1]
		e.spareFlows[n-1] = nil
		e.spareFlows = e.spareFlows[:n-1]
	} else {
		f = new(flow)
	}
	*f = flow{id: e.nextID, key: key, started: now, lastSeen: now, wsF: -1, wsB: -1, deadline: Never, armed: Never,
		pendAck: pendingAck{idx: -1}}
	e.flows[key] = f
	e.byID[f.id] = f
	e.peak.flows = max(e.peak.flows, len(e.flows))
	e.peak.byID = max(e.peak.byID, len(e.byID))
	e.holdSource(f, holdPre)
	e.noteReading(f)
	return f
}

// free forgets f entirely and keeps its record for a later flow. Nothing
// may use f after.
func (e *FrontEnd) free(f *flow, now Time) {
	if e.flows[f.key] == f {
		delete(e.flows, f.key)
	}
	delete(e.byID, f.id)
	e.releasePort(f, now)
	e.holdSource(f, holdNone)
	e.shrinkTables()
	e.pruneReading()
	e.keepBuf(f.buf)
	*f = flow{deadline: Never} // drop what it refers to while it waits
	if len(e.spareFlows) < e.spareLimit() {
		e.spareFlows = append(e.spareFlows, f)
	}
	e.trimSpares()
}

// spareBuf returns an empty request buffer: a spare one, or nil (append
// makes one).
func (e *FrontEnd) spareBuf() []byte {
	n := len(e.spareBufs)
	if n == 0 {
		return nil
	}
	b := e.spareBufs[n-1]
	e.spareBufs[n-1] = nil
	e.spareBufs = e.spareBufs[:n-1]
	e.spareBufBytes -= cap(b)
	return b
}

// keepBuf keeps a request buffer nothing refers to any more, if it is
// small enough and there is room.
func (e *FrontEnd) keepBuf(b []byte) {
	if b != nil && cap(b) <= spareBufCap && e.spareBufBytes+cap(b) <= maxSpareBufBytes &&
		len(e.spareBufs) < e.spareLimit() {
		e.spareBufs = append(e.spareBufs, b[:0])
		e.spareBufBytes += cap(b)
	}
}

// linger moves f to its final state: late segments still find it (and
// retransmitted FINs are still forwarded) until the linger time passes.
func (e *FrontEnd) linger(f *flow, now Time, reason CloseReason, out *Output) {
	if f.state == stLinger {
		return
	}
	if f.poolPending {
		e.abortC2(f, out) // the client never acknowledged the response: no pool for C2 (fe_pool.go)
		f.poolPending = false
	}
	wasDispatched := f.hport != 0
	f.state = stLinger
	f.held = nil
	e.keepBuf(f.buf)
	f.buf = nil
	f.sendBuf = nil
	e.setDeadline(f, now.Add(e.cfg.Linger))
	f.tl.stamp(StepClose, now) // ended without a FIN or RST seen before
	ev := Event{Kind: EvClosed, Flow: f.id, Reason: reason, Bytes: f.forwardedBytes, Timeline: f.tl}
	if wasDispatched {
		ev.Backend = f.backend.ID
	}
	out.event(ev)
}
