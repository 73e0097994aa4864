package replay

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

// simBackend plays one back-end host as the front-end sees it: its kernel
// answering C2 connections, seen through its shim. It sends no response
// body (the shim sends that straight to the client); what reaches the
// front-end is a SYN-ACK, a header-only ACK of the request, and a FIN.
type simBackend struct {
	k     int
	ip    wire.IP4
	mac   wire.MAC
	seed  uint64
	cfg   *Config
	sched *actionQueue
	conns map[uint16]*simConn // by C2 source port (the handoff address is fixed)
	pkt   wire.Packet
	opts  wire.TCPOptions
}

// simConn is one C2 connection at a simulated back-end.
type simConn struct {
	peerMAC  wire.MAC
	peerIP   wire.IP4
	peerPort uint16
	peerISN  wire.Seq
	port     uint16 // ours: the port the SYN asked for
	isn      wire.Seq
	sndNxt   wire.Seq // next sequence number we send (after SYN, FIN)
	rcvNxt   wire.Seq
	ws       int // our window scale, -1: none
	ts, sack bool
	tsBase   uint32 // this connection's timestamp clock offset
	tsRecent uint32 // peer's last TSval, echoed
	finSent  bool
	ackDue   bool // a delayed ACK of request bytes is scheduled
}

// simRecvWindow is the receive buffer the back-ends advertise.
const simRecvWindow = 64 << 10

func newSimBackend(k int, cfg *Config, sched *actionQueue) *simBackend {
	return &simBackend{
		k: k, ip: wire.IP4From(backendAddr(k)), mac: backendMAC(k),
		seed: cfg.Seed, cfg: cfg, sched: sched,
		conns: make(map[uint16]*simConn),
	}
}

// hash32 is a seeded hash of a C2 4-tuple and a purpose label, so ISNs and
// timestamp offsets are fixed by Config.Seed and differ per connection.
func (b *simBackend) hash32(purpose byte, port uint16, peer wire.IP4, peerPort uint16) uint32 {
	var in [8 + 1 + 4 + 2 + 4 + 2]byte
	binary.BigEndian.PutUint64(in[0:], b.seed)
	in[8] = purpose
	copy(in[9:13], b.ip[:])
	binary.BigEndian.PutUint16(in[13:], port)
	copy(in[15:19], peer[:])
	binary.BigEndian.PutUint16(in[19:], peerPort)
	sum := sha256.Sum256(in[:])
	return binary.BigEndian.Uint32(sum[:])
}

// receive takes a frame the engine sent to this host at now and schedules
// the host's answers. The frame may be reused by the caller afterwards.
func (b *simBackend) receive(frame []byte, now splice.Time) {
	p := &b.pkt
	if wire.Parse(frame, p) != nil || p.Kind != wire.KindTCP {
		return
	}
	t := p.TCP
	if wire.ParseOptions(t, &b.opts) != nil {
		return // a kernel would drop it too
	}
	o := &b.opts
	flags := t.Flags()
	c := b.conns[t.SrcPort()]
	switch {
	case flags&wire.TCPFlagRST != 0:
		delete(b.conns, t.SrcPort())
		return
	case flags&(wire.TCPFlagSYN|wire.TCPFlagACK) == wire.TCPFlagSYN:
		if c == nil || c.peerISN != t.Seq() {
			c = b.accept(p, o)
		}
		b.send(c, now.Add(b.cfg.LinkDelay), c.isn, wire.TCPFlagSYN|wire.TCPFlagACK)
		return
	case c == nil || c.port != t.DstPort():
		// No such connection: answer as a kernel does, with a RST.
		b.reset(p, now.Add(b.cfg.LinkDelay))
		return
	}
	if o.HasTS && c.ts && t.Seq().LessEq(c.rcvNxt) {
		c.tsRecent = o.TSVal
	}
	n := len(t.Payload())
	fin := flags&wire.TCPFlagFIN != 0
	if n == 0 && !fin {
		return // a pure ACK (of the SYN-ACK, or of response bytes)
	}
	end := t.Seq() + wire.Seq(n)
	if t.Seq().LessEq(c.rcvNxt) && c.rcvNxt.LessThan(end) {
		c.rcvNxt = end // new bytes, possibly overlapping old ones
	}
	if fin {
		switch {
		case end == c.rcvNxt && !c.finSent:
			// The client is done and so is the server's response: close.
			c.rcvNxt++
			c.finSent = true
			b.send(c, now.Add(b.cfg.LinkDelay), c.sndNxt, wire.TCPFlagFIN|wire.TCPFlagACK)
			c.sndNxt++
			return
		case end+1 == c.rcvNxt && c.finSent:
			// A retransmitted FIN: our FIN|ACK was lost (or is late).
			b.send(c, now.Add(b.cfg.LinkDelay), c.sndNxt-1, wire.TCPFlagFIN|wire.TCPFlagACK)
			return
		}
	}
	if !c.ackDue {
		c.ackDue = true
		b.sched.push(action{when: now.Add(b.cfg.ServiceDelay), kind: actBackendAck, backend: b.k, port: t.SrcPort()})
	}
}

// accept creates the connection for a SYN, mirroring the options it
// offered as a kernel does.
func (b *simBackend) accept(p *wire.Packet, o *wire.TCPOptions) *simConn {
	t := p.TCP
	isn := wire.Seq(b.hash32('i', t.DstPort(), p.IP.Src(), t.SrcPort()))
	if isn == 0 {
		isn = 1 // keep 0 out: the engine reads a zero back-end ISN as "none yet"
	}
	c := &simConn{
		peerMAC: p.Eth.Src(), peerIP: p.IP.Src(), peerPort: t.SrcPort(),
		peerISN: t.Seq(), port: t.DstPort(), isn: isn, sndNxt: isn + 1, rcvNxt: t.Seq() + 1,
		ws: -1, ts: o.HasTS, sack: o.SACKPermitted, tsRecent: o.TSVal,
		tsBase: b.hash32('t', t.DstPort(), p.IP.Src(), t.SrcPort()),
	}
	if o.HasWScale {
		c.ws = 7
	}
	b.conns[t.SrcPort()] = c
	return c
}

// sendDelayedAck runs the scheduled header-only ACK of request bytes.
func (b *simBackend) sendDelayedAck(port uint16, now splice.Time) []byte {
	c := b.conns[port]
	if c == nil || !c.ackDue {
		return nil
	}
	c.ackDue = false
	return b.build(c, now, c.sndNxt, wire.TCPFlagACK)
}

// send schedules a segment of c for when.
func (b *simBackend) send(c *simConn, when splice.Time, seq wire.Seq, flags uint8) {
	b.sched.push(action{when: when, kind: actBackendFrame, frame: b.build(c, when, seq, flags)})
}

// build encodes a segment of c sent at now.
func (b *simBackend) build(c *simConn, now splice.Time, seq wire.Seq, flags uint8) []byte {
	var ob [40]byte
	var opts []byte
	win := uint16(65535)
	tsVal := c.tsBase + uint32(now/splice.Time(time.Millisecond))
	if flags&wire.TCPFlagSYN != 0 {
		so := wire.SynOptions{MSS: 1460, WScale: c.ws, SACKPermitted: c.sack, TS: c.ts, TSVal: tsVal, TSEcr: c.tsRecent}
		opts = ob[:so.Encode(ob[:])]
	} else {
		if c.ts {
			opts = ob[:wire.EncodeTS(ob[:], tsVal, c.tsRecent)]
		}
		if c.ws > 0 {
			win = uint16(min(simRecvWindow>>c.ws, 65535))
		}
	}
	tf := wire.TCPFrame{
		SrcMAC: b.mac, DstMAC: c.peerMAC,
		Src: b.ip, Dst: c.peerIP, SrcPort: c.port, DstPort: c.peerPort,
		Seq: seq, Ack: c.rcvNxt, Flags: flags, Window: win,
		Options: opts,
	}
	frame := make([]byte, tf.Len())
	tf.Encode(frame)
	return frame
}

// reset schedules a RST answering segment p, for which no connection exists.
func (b *simBackend) reset(p *wire.Packet, when splice.Time) {
	t := p.TCP
	tf := wire.TCPFrame{
		SrcMAC: b.mac, DstMAC: p.Eth.Src(),
		Src: b.ip, Dst: p.IP.Src(), SrcPort: t.DstPort(), DstPort: t.SrcPort(),
	}
	if t.Has(wire.TCPFlagACK) {
		tf.Seq, tf.Flags = t.Ack(), wire.TCPFlagRST
	} else {
		tf.Ack, tf.Flags = t.Seq()+wire.Seq(t.SegLen()), wire.TCPFlagRST|wire.TCPFlagACK
	}
	frame := make([]byte, tf.Len())
	tf.Encode(frame)
	b.sched.push(action{when: when, kind: actBackendFrame, frame: frame})
}
