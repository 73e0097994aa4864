package splice

// dropReason indexes the drop counters; every frame the engines refuse is
// counted under exactly one reason.
type dropReason uint8

const (
	dropMalformed   dropReason = iota // failed wire.Parse
	dropBadOptions                    // TCP options that cannot be translated safely
	dropNotOurs                       // not addressed to anything we own
	dropNoFlow                        // TCP for a tuple we have no state for
	dropBadCookie                     // final ACK with a cookie that does not verify
	dropClosedPort                    // SYN to a port we do not listen on (RST sent)
	dropHoldFull                      // client frame during handoff with the hold queue full
	dropOutOfWindow                   // client data not at rcvNxt before the handoff
	dropUnexpected                    // a segment the state machine has no use for

	// Ingress checks (ingress.go): frames refused for their headers
	// before the engine acts on them.
	dropBadIPChecksum  // IPv4 header checksum wrong
	dropBadTCPChecksum // TCP checksum wrong (and not vouched for by a vnet header)
	dropMartianSource  // source in 0/8, 127/8, 224/4 or 240/4
	dropOwnSource      // source is a VIP or the handoff address
	dropMulticastMAC   // broadcast or multicast source MAC
	dropTTLZero        // TTL 0
	dropIPOptions      // IPv4 options (a source route, ...)

	dropOverLimit // a SYN or cookie ACK beyond a flow limit (limits.go)
	// TCP validation (RFC 5961, fe_validate.go).
	dropRSTInWindow    // RST in the window but not at the exact sequence: challenged
	dropRSTOutOfWindow // RST outside the window: dropped silently
	dropSynInFlow      // SYN on a live connection: challenged
	dropAckOutOfRange  // ACK of bytes never sent, or far below what was acknowledged: challenged
	dropNoAck          // a synchronized connection's segment without ACK
	dropC2Spoofed      // a C2 segment from another address, port or MAC than the back-end's
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{
	"malformed", "bad-options", "not-ours", "no-flow", "bad-cookie",
	"closed-port", "hold-full", "out-of-window", "unexpected",
	// ingress checks
	"bad-ip-checksum", "bad-tcp-checksum", "martian-source", "own-source",
	"multicast-source-mac", "ttl-zero", "ip-options",
	"over-limit",
	"rst-in-window", "rst-out-of-window", "syn-in-flow", "ack-out-of-range", "no-ack", "c2-spoofed",
}

// DropReasonName names drop counter i, for metrics labels.
func DropReasonName(i int) string { return dropReasonNames[i] }

// NumDropReasons is the length of the Drops arrays.
const NumDropReasons = int(numDropReasons)

// FrontEndStats are the front-end engine's counters.
type FrontEndStats struct {
	RxFrames, TxFrames uint64
	Drops              [NumDropReasons]uint64
	ARPReplies         uint64
	SynCookiesSent     uint64 // SYN-ACKs the engine sent itself
	SynCookiesByLink   uint64 // SYNs the link's program answered instead (fe_linksyn.go)
	Accepted           uint64 // handshakes completed with a valid cookie
	Requests           uint64 // request heads parsed
	Answered           [6]uint64
	HandoffsStarted    uint64
	HandoffsDone       uint64 // splice acknowledged, request sent
	HandoffsFailed     uint64
	// Pooled handoff connections (fe_pool.go): C2s put in the pool when
	// their client closed, handoffs that took one instead of opening
	// one, and pooled C2s reset when idle for PoolIdle or closed by
	// their server.
	C2Pooled, C2Reused, C2PoolExpired, C2PoolClosedByServer uint64
	// C2PoolDropped: pooled C2s reset because their back-end restarted
	// (DropPool): its shim no longer knows them.
	C2PoolDropped uint64
	// The client's last ACK of a pooled C2's response (fe_pool.go
	// oweAck): owed to the server, carried by the next request on the C2,
	// or sent by itself when none came within PoolAckDelay.
	C2AcksDeferred, C2AcksCarried, C2AcksSentAlone uint64
	// C2AcksTakenBack: of the deferred ones, ACKs already forwarded in
	// the same pass, taken back out of its output (takeBackAck).
	C2AcksTakenBack uint64
	// C2ReusesRefused: reuses the shim refused, whose flow went on a new
	// C2 instead (fe_pool_refused.go).
	C2ReusesRefused uint64
	// C2PoolFINsReleased: client FINs held for the last response's
	// Feedback that went to C2 after all (PoolFINWait passed).
	C2PoolFINsReleased uint64
	// C2PoolClosedForClient: client connections the front-end closed
	// itself, as the server would have, for a client that asked to close
	// (C2 pooled, or to be once the client acknowledged the response).
	C2PoolClosedForClient uint64
	// PooledC2s is the number of idle handoff connections in the pool now.
	PooledC2s uint64
	// SplicesAtSYN: handoffs whose Splice went with C2's SYN (issue 7,
	// fe_atsyn.go); SpliceAtSYNLagged: of them, those whose SYN-ACK came
	// a millisecond or more later, so our own TSvals to the client lag.
	SplicesAtSYN, SplicesAtSYNLagged uint64
	// RequestsCarried: of them, those that carried their request for the
	// shim to send (DispatchCarrying).
	RequestsCarried uint64
	// RequestsInSYN: of those, the ones the shim put in C2's SYN and the
	// back-end's kernel took with it (TCP Fast Open, shim_fastopen.go).
	RequestsInSYN uint64
	// RequestsSentInSYN: requests the engine put in C2's SYN itself,
	// with the back-end's cookie (FastOpenInSYN).
	RequestsSentInSYN uint64
	Retransmits       uint64
	ForwardedFrames   uint64 // client frames translated onto C2
	ForwardedBytes    uint64 // client payload bytes forwarded after splicing
	HandedOffBytes    uint64 // request bytes the front-end sent on C2 itself
	// ReplyPayloadBytes counts back-end payload bytes the front-end
	// received on C2 (copies the shim sends while the request is
	// unacknowledged, or replies from a back-end without a shim). With
	// one-way splicing it stays at 0 for the response bodies.
	ReplyPayloadBytes uint64
	ICMPForwarded     uint64
	AckStorms         uint64 // flows cut because of an ACK storm (trap 8)
	FollowUps         uint64 // keep-alive requests seen on spliced flows
	// FollowUpsRefused counts refused follow-ups answered inside their
	// stream; FollowUpsReset those that had to be reset instead (the end
	// of the previous response never became known).
	FollowUpsRefused, FollowUpsReset uint64
	Flows                            uint64

	// Requests the front-end follows to the end (issue 9, fe_keepalive.go).
	// ChunkedBodies counts chunked request bodies followed to their end;
	// FollowUpsUnfollowable follow-ups it could not follow (a head that
	// does not parse or is over MaxHead, a partial head at the client's
	// FIN, a malformed chunked body), answered 400 or 431 in the stream
	// and never forwarded (also counted in FollowUpsRefused once sent).
	ChunkedBodies, FollowUpsUnfollowable uint64

	// SYN cookies (cookie.go): RSTs not sent to segments without a
	// connection because they came faster than FrontEndConfig.RSTRate.
	RSTsSuppressed uint64
	// Bounded state (issue 9, limits.go). Refused SYNs were dropped,
	// refused cookie ACKs reset, by the limit that bit: all flows
	// (MaxFlows) or those of the source (MaxFlowsPerSource).
	RefusedSYNFlows, RefusedSYNSource       uint64
	RefusedAcceptFlows, RefusedAcceptSource uint64
	// RefusedPortsSource counts Dispatch calls refused because the
	// client's address held MaxPortsPerSource handoff ports.
	RefusedPortsSource uint64
	// HeadDeadlineFreed: clients silent since the handshake, reset at
	// the head deadline; LifetimeExpired: flows not handed off reset at
	// FlowLifetime; HalfClosedReleased: connections the back-end closed
	// and the client left idle, reset and their handoff port freed.
	HeadDeadlineFreed, LifetimeExpired, HalfClosedReleased uint64
	// Evicted counts flows still reading their head reset to make room
	// for a new connection when MaxFlows was reached.
	Evicted uint64
	// The back-ends' TIME-WAIT on handoff ports (fe_timewait.go):
	// HandoffPortsInTimeWait counts C2 SYNs sent on a port whose
	// back-end, by its record, still held an older connection that
	// refuses them (no free port nearby would take them);
	// HandoffTimeWaitResets the old connections the front-end reset
	// because a back-end answered a C2 SYN with one's ACK.
	HandoffPortsInTimeWait, HandoffTimeWaitResets uint64
	// TablesRebuilt counts maps rebuilt smaller after a peak.
	TablesRebuilt uint64
	// SpareBytes is what the spare flow records and request buffers
	// kept for the next connections hold now (flow.go): memory a flood
	// leaves in use by design, at least minSpare of each once used.
	SpareBytes uint64
	// Sources is the number of client addresses holding flows or ports
	// now; HandoffPorts the handoff connections held now.
	Sources, HandoffPorts uint64
	// TCP validation (RFC 5961, fe_validate.go): challenge ACKs sent, and
	// those the rate limit held back.
	ChallengeAcks, ChallengeAcksLimited uint64
	// The request head's ACK (fe_ackdelay.go): sent late because no
	// response had reached the client by RequestAckDelay, or not sent
	// because one had.
	RequestAcksDelayed, RequestAcksSaved uint64
	// AcksCoalesced counts client pure ACKs written over the flow's
	// previous one in the same pass instead of sent (fe_ackcoalesce.go).
	AcksCoalesced uint64

	// Request rewriting (issue 10, fe_rewrite.go).
	Rewrites        uint64 // requests sent to a back-end with a rewritten target
	RewriteBusy     uint64 // Rewrite refused: the last rewritten target was not acknowledged yet
	RewriteAbsorbed uint64 // client segments with bytes of a replaced target, not forwarded
	RewriteResent   uint64 // retransmissions of a rewritten follow-up's target

	// Receive moderation (issue 7, frontend/moderate.go): NarrowAcks
	// counts forwarded client pure ACKs that advertise a window under
	// NarrowWindow. Their sender is window-bound, so holding them would
	// slow the transfer down; the daemon's loop never holds for them.
	NarrowAcks uint64

	// Control datagrams for the host's control socket taken off the link
	// (issue 7, fe_control.go): handed to the caller, or dropped for a
	// bad length or checksum; fragments and super-frames of them, which
	// are not taken.
	ControlTaken, ControlBadLength, ControlBadChecksum uint64
	ControlFragments, ControlOffloaded                 uint64
}

// answeredIndex maps the statuses the front-end answers itself.
func answeredIndex(status int) int {
	switch status {
	case 400:
		return 0
	case 408:
		return 1
	case 431:
		return 2
	case 503:
		return 3
	case 429:
		return 4
	}
	return 5
}

// AnsweredStatuses lists the statuses in FrontEndStats.Answered order.
var AnsweredStatuses = [6]int{400, 408, 431, 503, 429, 0}

func (e *FrontEnd) drop(r dropReason) { e.stats.Drops[r]++ }
