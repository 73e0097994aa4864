package splice

import (
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// ACK-storm detection (design trap 8). If a translation were ever wrong,
// each end would find the other's segments unacceptable and answer every
// one with an ACK, and the two would ping-pong pure ACKs at line rate
// forever. The front-end sees the client's half of such a loop: pure
// ACKs that acknowledge nothing new and carry nothing new. Duplicate ACKs
// are normal in loss recovery, but they are paced by the server's data
// and bounded by its window; a storm is not. When more than StormLimit
// of them arrive within StormWindow, the connection is cut with a RST to
// both ends rather than left to burn the link.

const (
	defaultStormLimit  = 10000
	defaultStormWindow = time.Second
)

// stormTrack is the per-flow detector state.
type stormTrack struct {
	lastSeq, lastAck wire.Seq
	lastWin          uint16
	count            int
	since            Time
}

// noProgress updates the detector with a forwarded client segment and
// reports whether the flow is in an ACK storm.
func (s *stormTrack) noProgress(t wire.TCP, numSACK int, now Time, limit int, window time.Duration) bool {
	dup := len(t.Payload()) == 0 && t.Flags()&(wire.TCPFlagSYN|wire.TCPFlagFIN|wire.TCPFlagRST) == 0 &&
		t.Seq() == s.lastSeq && t.Ack() == s.lastAck && t.Window() == s.lastWin && numSACK == 0
	s.lastSeq, s.lastAck, s.lastWin = t.Seq(), t.Ack(), t.Window()
	if !dup {
		s.count = 0
		return false
	}
	if s.count == 0 || now.Sub(s.since) > window {
		s.count, s.since = 0, now
	}
	s.count++
	return s.count > limit
}
