package backend

import (
	"time"

	"github.com/qsplice/qsplice/internal/rxmod"
	"github.com/qsplice/qsplice/splice/wire"
)

// Receive moderation of the shim's workers (issue 7), the front-end's
// (frontend/moderate.go) turned round: under a bulk response the back-end
// kernel writes a TCP super-frame into a worker's TAP queue every few
// tens of microseconds, and the loop woke for each, translated it and sent
// it with a sendmmsg(2) of its own. When a worker's recent passes read a
// steady stream of such super-frames it now holds off before its next
// pass for about the time Batch more take to arrive, at most Config.RxHold
// (-rx-hold, 200 us), so that one pass translates them all and sends them
// with one system call. The frames that wait are the TAP's and the
// wire's, the client's ACKs, at most one hold: the front-end holds those
// up to 2 ms already, and a bulk sender's window covers a millisecond
// many times over. A control datagram, mail from another worker (a
// Splice to install, a handed-over frame) or the daemon stopping end a
// hold at once (link.Poller.Hold). The hold waits in io_uring_enter
// (link.Poller.HoldInRing), where the TAP's reads, which complete as the
// worker thread's task work, do not interrupt it as they interrupt
// epoll_pwait2; the wire is read after every hold through its receive
// ring (-rx-ring slots, no system call), or with recvmmsg when the hold
// reports it (link.Poller.AddLate).
//
// Steady are super-frames with at least bulkPayload bytes of payload.
// Urgent, for the policy, is every other frame some client waits on: from
// the TAP a SYN-ACK, a FIN, a RST, data under bulkPayload (a small reply,
// the end of a response, the few KB a client with a tiny receive buffer
// lets the server send at a time); from the wire anything but a pure ACK
// (a SYN, a request, a FIN); and control datagrams. A load of short
// connections is made of those, so it never holds, and neither does the
// pass after one that read an urgent frame (rxmod.Config.NotAfterUrgent):
// the SYN-ACK answering a SYN, or the first bytes of a response, are read
// as soon as they come, whatever else the worker is busy with. Data
// under bulkPayload from the TAP also keeps the worker from holding for
// 2 ms (rxmod.Config.Quiet): a client with a tiny receive buffer beside a
// bulk load fell from 9 MB/s to 0.8 when its frames were held. (Quiet
// after every urgent frame instead cost half the holds under bench-proxy's
// load of 10 MB responses: a request and a response's end every few
// milliseconds per worker.)

// bulkPayload is the payload from which a TAP frame counts as a bulk
// super-frame: 11 segments of 1460 bytes. Under bench-proxy's bulk load
// the back-end's TCP writes 64 KB super-frames (TSO autosizing at GB/s);
// a window-bound flow (a client's tiny receive buffer) writes no more
// than its window at a time.
const bulkPayload = 16 << 10

// DefaultRxHold is the longest hold when Config.RxHold is not set by the
// flag (qsplice-backend -rx-hold; the Config's zero value is off).
const DefaultRxHold = 200 * time.Microsecond

// minHoldRest: a hold ended early with less than this left is not
// resumed after the pass that served what ended it.
const minHoldRest = 20 * time.Microsecond

// shimModeration is the policy's configuration for a hold of at most
// maxHold (0: off). Under bulk load a worker reads 5-15 super-frames per
// millisecond; a 2 ms window counts enough of them to see a steady
// stream. Batch is 24 (under the 32 of a TAP read, batchFrames): at
// any rate the policy counts as steady (MinSteady: 2,000 a second and
// more) 24 super-frames take longer than a few hundred microseconds, so
// every hold is maxHold, which -rx-hold sets; 200 us, 500 us and 1 ms
// were measured (docs/results.md).
func shimModeration(maxHold time.Duration) rxmod.Config {
	return rxmod.Config{
		Window:         2 * time.Millisecond,
		MinSteady:      8,
		Batch:          24,
		MaxHold:        max(maxHold, 0),
		UrgentShare:    8,
		NotAfterUrgent: true,
		// A flow bound by a small window (a client's tiny receive
		// buffer) sends data under bulkPayload at least once per round
		// trip: 2 ms keeps the loop from holding while one is active on
		// a network whose round trips are that short; where they are
		// longer, a hold adds little to them.
		Quiet: 2 * time.Millisecond,
	}
}

// rxCounts are a pass's received frames as the policy counts them.
type rxCounts struct {
	steady, urgent int
	narrow         int // of urgent: data under bulkPayload from the TAP
}

// tcpControl are the flags that make a segment a step of a connection.
const tcpControl = wire.TCPFlagSYN | wire.TCPFlagFIN | wire.TCPFlagRST

// fromHost counts a frame read from the TAP (p is scratch): a bulk
// super-frame is steady; a handshake, a FIN, a RST or data under
// bulkPayload urgent; a pure ACK or anything else neither.
func (c *rxCounts) fromHost(frame []byte, p *wire.Packet) {
	if wire.Parse(frame, p) != nil || p.Kind != wire.KindTCP {
		return
	}
	payload := p.End - p.L4 - p.TCP.HeaderLen()
	switch {
	case p.TCP.Flags()&tcpControl != 0:
		c.urgent++
	case payload >= bulkPayload:
		c.steady++
	case payload > 0:
		c.urgent++
		c.narrow++
	}
}

// fromWire counts a frame read from the wire: anything but a pure ACK is
// urgent (the client's ACKs end a hold anyway, but do not stop the next).
func (c *rxCounts) fromWire(frame []byte, p *wire.Packet) {
	if wire.Parse(frame, p) != nil {
		return
	}
	if p.Kind == wire.KindTCP && p.TCP.Flags()&tcpControl == 0 && p.TCP.Has(wire.TCPFlagACK) &&
		p.End == p.L4+p.TCP.HeaderLen() {
		return
	}
	c.urgent++
}
