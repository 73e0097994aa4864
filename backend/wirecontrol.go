package backend

import (
	"net/netip"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

// The control protocol on the wire (issue 7).
//
// In. The front-end's datagrams for this back-end cross the shim's wire
// like any frame for the host; passed to it, each went through the TAP,
// the kernel's UDP stack and the control socket, and reached the agent on
// a later pass than the one that read it off the wire, while a request
// sent right behind its Splice waited, held (splice/shim_early.go).
// Shard 0 takes them off the wire instead (splice.ShimConfig.ControlPort,
// after the checks the kernel would have made) and readWire hands each to
// the agent before it feeds the shard the next frame: the Splice is
// installed, in this pass, before the request behind it is looked at.
// The agent gets a datagram off the wire exactly as one from the socket:
// the same Codec and Decode (authentication, direction, back-end id,
// replay window), the same Control and Malformed.
//
// Worker 0 sees them all without a hand-off: the wire's fanout program
// sends every frame that is not TCP to member 0 (link.FanoutPorts), and
// only shard 0 is configured to take them; another shard would pass one
// to the host, whose socket worker 0 still reads. The socket stays, for
// datagrams that still come through the kernel (IP fragments) and for
// Register.
//
// Out. What the agent sends went out through the socket, the kernel's
// UDP stack, the TAP (a queue another worker may read, which then hands
// the frame to worker 0 as it is not TCP) and back through the shim to
// the wire: two wake-ups and a hand-over per SpliceAck and per Feedback.
// Once a datagram from the front-end's control address has come off the
// wire and authenticated, worker 0 knows the MAC the front-end is reached
// through (the frame's source: the front-end's, or its router's) and
// sends what the agent sends from there on as a frame it builds itself
// (buildControlFrame: Ethernet, IPv4 and UDP headers with both checksums,
// from the host's MAC, address and control port, as the kernel would
// have sent it), in the pass's wire batch: a SpliceAck ahead of the
// pass's frames, so ahead of the request it lets go. The front-end sees
// the same datagram from the same address and port. Register always goes
// through the socket: it is what the agent sends when the front-end has
// gone quiet, which is when the MAC learned may be stale; and so does
// everything once nothing has come off the wire for wireControlFresh, or
// when the pass's frame buffers ran out.

const (
	// wireControlFrames bounds the control datagrams one pass sends on
	// the wire; more go through the socket.
	wireControlFrames = 64
	// wireControlFresh is how long the front-end's MAC, learned from its
	// last datagram off the wire, is used: its keepalive echoes renew it
	// every keepalive interval (1 s by default).
	wireControlFresh = 10 * time.Second
	// controlFrameHeaders is what a control frame adds to its datagram.
	controlFrameHeaders = wire.EthernetHeaderLen + wire.IPv4MinHeaderLen + 8
)

// wireControlOut is worker 0's state for sending on the wire.
type wireControlOut struct {
	feMAC  wire.MAC    // the next hop to the front-end's control address
	heard  splice.Time // when a datagram from it last came off the wire
	known  bool
	ipID   uint16
	bufs   [][]byte // frame buffers; used of them hold this pass's frames
	used   int
	frames [][]byte // queued, until flushControl moves them to the wire batch

	// Datagrams sent each way, for /status.
	wire, socket uint64
}

func newWireControlOut() wireControlOut {
	o := wireControlOut{bufs: make([][]byte, wireControlFrames), frames: make([][]byte, 0, wireControlFrames)}
	for i := range o.bufs {
		o.bufs[i] = make([]byte, controlFrameHeaders+proto.MaxDatagram)
	}
	return o
}

// inputWire feeds the shard a frame from the wire, and the agent what
// the shard took of it (wireControl) before the next frame, which may be
// the request sent right behind this Splice.
func (w *worker) inputWire(f []byte, vh wire.VNetHdr, now splice.Time) {
	w.shim.InputVNet(splice.PortWire, f, vh, now, &w.out)
	if len(w.out.Control) > 0 {
		w.wireControl(now)
	}
}

// wireControl hands the agent the control datagrams the shard took off
// the wire, exactly as readControl hands it those of the socket.
func (w *worker) wireControl(now splice.Time) {
	for i := range w.out.Control {
		dg := &w.out.Control[i]
		if w.agent != nil && w.codec != nil {
			w.control(dg.Payload, dg.From, &dg.SrcMAC, nil, now)
		}
	}
	clear(w.out.Control) // the payloads alias the read batch
	w.out.Control = w.out.Control[:0]
}

// control decodes datagram b from the front-end at from (or takes err,
// the socket's error for it) and hands the message, or the refusal, to
// the agent, then carries out what it asked for. srcMAC is the source
// MAC of a datagram that came off the wire (nil from the socket): once
// the datagram decoded (authenticated and fresh) and came from the
// front-end's control address, it is where to send the answer.
func (w *worker) control(b []byte, from netip.AddrPort, srcMAC *wire.MAC, err error, now splice.Time) {
	var m proto.Message
	if err == nil {
		m, err = w.codec.Decode(b)
	}
	w.aout.Reset()
	if err != nil {
		w.agent.Malformed(from, err, &w.aout)
	} else {
		if srcMAC != nil && from == w.d.cfg.Frontend {
			o := &w.ctlOut
			o.feMAC, o.heard, o.known = *srcMAC, now, true
		}
		// m is the Codec's, reused by the next Decode; the agent
		// copies what it keeps (a Splice, into its output).
		w.agent.SetConcurrency(w.d.concurrency())
		w.agent.FrontEnd(w.codec.Header().Incarnation, &w.aout)
		w.agent.Control(from, m, now, &w.aout)
	}
	w.carryOut(now)
}

// queueWireControl queues datagram b for the front-end as a frame on the
// wire, and reports whether it did; false: send it on the socket.
func (w *worker) queueWireControl(b []byte, now splice.Time) bool {
	o := &w.ctlOut
	if !o.known || now.Sub(o.heard) > wireControlFresh || o.used == len(o.bufs) {
		return false
	}
	buf := o.bufs[o.used]
	o.used++
	o.ipID++
	f := buildControlFrame(buf, w.d.mac, o.feMAC, netip.AddrPortFrom(w.d.cfg.Addr, w.d.cfg.ControlPort), w.d.cfg.Frontend, o.ipID, b)
	o.frames = append(o.frames, f)
	o.wire++
	return true
}

// buildControlFrame writes into buf (room for controlFrameHeaders plus
// the payload) an Ethernet frame carrying payload as a UDP datagram from
// src to dst, with both checksums, and returns it. The IPv4 header is
// the kernel's for a datagram of its own: no options, don't fragment
// (the protocol's datagrams fit any MTU), TTL 64.
func buildControlFrame(buf []byte, srcMAC, dstMAC wire.MAC, src, dst netip.AddrPort, id uint16, payload []byte) []byte {
	f := wire.UDPFrame{SrcMAC: srcMAC, DstMAC: dstMAC, Src: src.Addr().As4(), Dst: dst.Addr().As4(),
		SrcPort: src.Port(), DstPort: dst.Port(), IPID: id, Payload: payload}
	return buf[:f.Encode(buf)]
}
