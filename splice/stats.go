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
	SynCookiesSent     uint64
	Accepted           uint64 // handshakes completed with a valid cookie
	Requests           uint64 // request heads parsed
	Answered           [6]uint64
	HandoffsStarted    uint64
	HandoffsDone       uint64 // splice acknowledged, request sent
	HandoffsFailed     uint64
	Retransmits        uint64
	ForwardedFrames    uint64 // client frames translated onto C2
	ForwardedBytes     uint64 // client payload bytes forwarded after splicing
	HandedOffBytes     uint64 // request bytes the front-end sent on C2 itself
	// ReplyPayloadBytes counts back-end payload bytes the front-end
	// received on C2 (copies the shim sends while the request is
	// unacknowledged, or replies from a back-end without a shim). With
	// one-way splicing it stays at 0 for the response bodies.
	ReplyPayloadBytes uint64
	ICMPForwarded     uint64
	AckStorms         uint64 // flows cut because of an ACK storm (trap 8)
	FollowUps         uint64 // keep-alive requests seen on spliced flows
	// FollowUpsUntracked counts follow-ups the front-end could not
	// schedule (chunked body, unparsable head): forwarded unscheduled.
	FollowUpsUntracked uint64
	// FollowUpsRefused counts refused follow-ups answered inside their
	// stream; FollowUpsReset those that had to be reset instead (the end
	// of the previous response never became known).
	FollowUpsRefused, FollowUpsReset uint64
	Flows                            uint64

	// TCP validation (RFC 5961, fe_validate.go): challenge ACKs sent, and
	// those the rate limit held back.
	ChallengeAcks, ChallengeAcksLimited uint64
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
