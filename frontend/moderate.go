package frontend

import (
	"time"

	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

// Receive moderation (issue 7), in the spirit of a NIC's adaptive
// interrupt coalescing. Under bulk load the front-end sees only the
// clients' pure ACKs, a few thousand a second per shard, and its loop
// woke for one or two of them at a time: an epoll_wait(2) and a
// sendmmsg(2) for every two frames. An ACK that waits a millisecond or
// two costs a bulk transfer nothing measurable (the sender's window
// covers it many times over), so when recent traffic was a steady stream of
// pure ACKs the loop holds off before its next pass, for about the time
// it takes Batch of them to arrive, and one pass then forwards them all
// with one write (merged per flow, splice/fe_ackcoalesce.go).
//
// Every other frame -- a SYN, request data, a FIN, a RST, a C2 reply --
// is a step some client waits on, and so is a pure ACK that advertises a
// window under splice.NarrowWindow (1 MiB; the engine counts them,
// FrontEndStats.NarrowAcks): its sender is bound by the window, and a
// client with a tiny receive buffer, whose every ACK lets the server send
// a few KB more, went from MB/s to a few hundred KB/s when they were held. When they are more than a quarter of
// the pure ACKs (a load of short connections: five frames to three), or
// the stream is thin, the loop never holds, so the first byte of a
// response is not delayed. A hold still ends at once for a control
// datagram or a Wake (link.Poller.Hold), and never runs past the shard's
// next deadline.
//
// rxModerator is the policy alone, pure: counts and times in, a hold
// out. The loop (loop.go) does the waiting.

// moderation configures an rxModerator.
type moderation struct {
	// Window is the span over which the receive rate is counted; the
	// decision uses the last complete one and the open one.
	Window time.Duration
	// MinAcks is the pure ACKs, in the last complete Window and the
	// open one together, below which the loop never holds: below it a
	// hold would gather too few to be worth a delay.
	MinAcks int
	// Batch is the pure ACKs a held pass aims to collect.
	Batch int
	// MaxHold bounds a hold; 0 turns moderation off.
	MaxHold time.Duration
}

// defaultModeration was chosen by measurement (docs/results.md): under
// bench-proxy's bulk load (8 connections, about 1-1.6 GB/s on the busy
// 2-core development machine) each of two shards sees 3-8 pure ACKs per
// millisecond, in bursts, with 2 ms windows of none when a sender
// stalls. A hold of at most 1 ms left the front-end at 0.2-0.3 system
// calls per frame in the lab, 2 ms at 0.15-0.2 (bench-proxy: 0.3 with
// two workers, 0.11 with one) with bulk throughput not lower; 4 ms
// measured about 0.18, too noisy a machine to tell what it cost. The
// 5 ms window smooths the bursts.
var defaultModeration = moderation{
	Window:  5 * time.Millisecond,
	MinAcks: 10,
	Batch:   16,
	MaxHold: 2 * time.Millisecond,
}

// urgentShare: the loop holds only while other frames are at most one in
// urgentShare of the pure ACKs. Under bulk load they are about one in
// twenty (keep-alive requests and the shim's copies of their replies),
// with short connections five in three.
const urgentShare = 4

// rxModerator decides how long a shard's loop holds off before its next
// pass. The zero value (MaxHold 0) never holds.
type rxModerator struct {
	cfg moderation
	// The window being counted, from start; prevAcks and prevUrgent are
	// the last complete window's counts.
	start                splice.Time
	acks, urgent         int
	prevAcks, prevUrgent int
}

func newRxModerator(cfg moderation) rxModerator { return rxModerator{cfg: cfg} }

// roll closes the counted window if it is over. A window with no pass in
// it (the loop slept through it) counts as empty.
func (m *rxModerator) roll(now splice.Time) {
	w := splice.Time(m.cfg.Window)
	if now < m.start+w {
		return
	}
	if now < m.start+2*w {
		m.prevAcks, m.prevUrgent = m.acks, m.urgent
	} else {
		m.prevAcks, m.prevUrgent = 0, 0
	}
	m.start, m.acks, m.urgent = now, 0, 0
}

// Observe counts a pass's received frames at now: acks pure ACKs and
// urgent frames of any other kind.
func (m *rxModerator) Observe(now splice.Time, acks, urgent int) {
	if m.cfg.MaxHold <= 0 {
		return
	}
	m.roll(now)
	m.acks += acks
	m.urgent += urgent
}

// Hold is how long the loop should wait at now before its next pass
// although frames may be waiting: 0 unless the last complete window and
// the open one together were a steady stream of pure ACKs, else the time
// Batch of them take to arrive at their rate, at most MaxHold. Counting
// the open window too keeps a stream that paused for a window (a sender
// stalled for a few milliseconds on a shared machine) from being taken
// for a thin one until the next window closes.
func (m *rxModerator) Hold(now splice.Time) time.Duration {
	if m.cfg.MaxHold <= 0 {
		return 0
	}
	m.roll(now)
	acks, urgent := m.prevAcks+m.acks, m.prevUrgent+m.urgent
	if acks < max(m.cfg.MinAcks, 1) || urgent*urgentShare > acks {
		return 0
	}
	span := m.cfg.Window + time.Duration(now-m.start)
	return min(time.Duration(m.cfg.Batch)*span/time.Duration(acks), m.cfg.MaxHold)
}

// isPureACK reports whether frame is a TCP segment with ACK and no SYN,
// FIN, RST or payload: the only kind of frame a hold may delay. p is the
// caller's scratch.
func isPureACK(frame []byte, p *wire.Packet) bool {
	if wire.Parse(frame, p) != nil || p.Kind != wire.KindTCP {
		return false
	}
	const control = wire.TCPFlagSYN | wire.TCPFlagFIN | wire.TCPFlagRST
	return p.TCP.Flags()&control == 0 && p.TCP.Has(wire.TCPFlagACK) && p.End == p.L4+p.TCP.HeaderLen()
}
