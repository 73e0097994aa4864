package flood

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/qsplice/qsplice/splice/wire"
)

// FirstPort is the lowest source port the generator uses; below it are
// the well-known and registered ports a real client never sends from.
const FirstPort = 1024

// synOptions are the options of every SYN the generator sends: what a
// Linux client offers (MSS 1460, SACK permitted, window scale 7), so the
// front-end does the same work for a flood SYN as for a real one.
// SynMaker adds timestamps (the cookie then uses their bits too); Heads
// leaves them out, so its later segments need no timestamp option.
func synOptions(ts bool, tsVal uint32) wire.SynOptions {
	return wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: ts, TSVal: tsVal}
}

// MaxFrameLen is enough for every frame the generator builds (a SYN with
// options, or the final ACK carrying a partial head of up to
// MaxHeadLen bytes).
const MaxFrameLen = wire.EthernetHeaderLen + wire.IPv4MinHeaderLen + wire.TCPMinHeaderLen + 40 + MaxHeadLen

// SynMaker builds SYN-flood frames: each one from a random address of a
// spoof range inside SpoofPrefix, a random source port, a random ISN, to
// one of the target's ports. It is not safe for concurrent use.
type SynMaker struct {
	srcMAC, dstMAC wire.MAC
	target         wire.IP4
	ports          []uint16
	first, span    uint32 // the addresses drawn: first + [0, span)
	rng            *rand.Rand
}

// NewSynMaker checks the spoof range (CheckSpoofPrefix; the zero prefix
// means SpoofPrefix) and the target.
func NewSynMaker(srcMAC, dstMAC wire.MAC, target netip.Addr, ports []uint16, spoof netip.Prefix, seed uint64) (*SynMaker, error) {
	if spoof == (netip.Prefix{}) {
		spoof = SpoofPrefix
	}
	if err := CheckSpoofPrefix(spoof); err != nil {
		return nil, err
	}
	if !target.Is4() {
		return nil, fmt.Errorf("flood: target %v is not an IPv4 address", target)
	}
	if len(ports) == 0 {
		return nil, errors.New("flood: no target port")
	}
	spoof = spoof.Masked()
	base := spoof.Addr().As4()
	size := uint64(1) << (32 - spoof.Bits())
	first, span := binary.BigEndian.Uint32(base[:]), uint32(size)
	if size >= 4 {
		// Not the prefix's own network and broadcast addresses: a
		// front-end may rightly drop those as martians, and the flood is
		// meant to cost it a SYN-ACK each.
		first, span = first+1, uint32(size-2)
	}
	return &SynMaker{
		srcMAC: srcMAC, dstMAC: dstMAC, target: wire.IP4From(target), ports: ports,
		first: first, span: span, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}, nil
}

// Next writes the next SYN into b (at least MaxFrameLen bytes) and
// returns its length and its source address. It panics rather than
// build a frame from outside SpoofPrefix.
func (m *SynMaker) Next(b []byte) (int, netip.Addr) {
	var src wire.IP4
	binary.BigEndian.PutUint32(src[:], m.first+m.rng.Uint32N(m.span))
	if !inSpoofRange(src.Addr()) {
		panic("flood: spoofed source " + src.String() + " outside " + SpoofPrefix.String())
	}
	o := synOptions(true, m.rng.Uint32())
	var opts [20]byte
	on := o.Encode(opts[:])
	f := wire.TCPFrame{
		SrcMAC: m.srcMAC, DstMAC: m.dstMAC, Src: src, Dst: m.target,
		SrcPort: uint16(FirstPort + m.rng.UintN(65536-FirstPort)),
		DstPort: m.ports[m.rng.IntN(len(m.ports))],
		Seq:     wire.Seq(m.rng.Uint32()), Flags: wire.TCPFlagSYN, Window: 64240,
		IPID: uint16(m.rng.Uint32()), Options: opts[:on],
	}
	return f.Encode(b), src.Addr()
}

// Event is what a frame read off the wire meant to the generator.
type Event uint8

const (
	EvNone        Event = iota // not for us, or nothing new
	EvSynAck                   // the first SYN-ACK of a flow (syn mode: any SYN-ACK)
	EvSynAckAgain              // a retransmitted SYN-ACK (heads: the final ACK is sent again)
	EvHeadAcked                // the front-end acknowledged the partial head: it holds the flow
	EvReset                    // a RST: the flow was refused or reset
	EvServerData               // the front-end sent data or FIN (e.g. a 408): first time per flow
	EvARP                      // an ARP request for the heads source, answered
)

// ClassifySynReply says what a frame from target means in syn mode: a
// SYN-ACK or RST to an address of SpoofPrefix, or nothing.
func ClassifySynReply(frame []byte, target wire.IP4, p *wire.Packet) Event {
	if wire.Parse(frame, p) != nil || p.Kind != wire.KindTCP || p.IP.Src() != target || !inSpoofRange(p.IP.Dst().Addr()) {
		return EvNone
	}
	switch {
	case p.TCP.Has(wire.TCPFlagRST):
		return EvReset
	case p.TCP.Has(wire.TCPFlagSYN | wire.TCPFlagACK):
		return EvSynAck
	}
	return EvNone
}
