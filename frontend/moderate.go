package frontend

import (
	"time"

	"github.com/qsplice/qsplice/internal/rxmod"
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
// The policy is rxmod.Moderator, shared with the shim's workers: counts
// and times in, a hold out. The loop (loop.go) does the waiting.

// moderation configures an rxModerator.
type moderation = rxmod.Config

// rxModerator decides how long a shard's loop holds off before its next
// pass: pure ACKs are its steady frames, every other frame is urgent.
type rxModerator = rxmod.Moderator

func newRxModerator(cfg moderation) rxModerator { return rxmod.New(cfg) }

// defaultModeration was chosen by measurement (docs/results.md): under
// bench-proxy's bulk load (8 connections, about 1-1.6 GB/s on the busy
// 2-core development machine) each of two shards sees 3-8 pure ACKs per
// millisecond, in bursts, with 2 ms windows of none when a sender
// stalls. A hold of at most 1 ms left the front-end at 0.2-0.3 system
// calls per frame in the lab, 2 ms at 0.15-0.2 (bench-proxy: 0.3 with
// two workers, 0.11 with one) with bulk throughput not lower; 4 ms
// measured about 0.18, too noisy a machine to tell what it cost. Since
// the shards gather on one loop under such a load (gather.go), that
// loop's hold counts all their ACKs together (rxmod.Joint): 0.11-0.13
// with the default two workers, and 3 ms held no fewer. The
// 5 ms window smooths the bursts. The loop holds only while other frames
// are at most one in UrgentShare of the pure ACKs: under bulk load they
// are about one in twenty (keep-alive requests and the shim's copies of
// their replies), with short connections five in three.
var defaultModeration = moderation{
	Window:      5 * time.Millisecond,
	MinSteady:   10,
	Batch:       16,
	MaxHold:     2 * time.Millisecond,
	UrgentShare: 4,
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
