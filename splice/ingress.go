package splice

import (
	"encoding/binary"
	"math/bits"

	"github.com/qsplice/qsplice/splice/wire"
)

// Ingress checks: what both engines refuse before acting on a frame from
// the network. Anyone on the segment can send any frame, and a frame that
// no honest host sends must not make the front-end answer (a SYN-ACK to a
// broadcast or multicast address, to the VIP itself, to a loopback
// address), nor reach a back-end's kernel with something it would act on.
// A frame is refused, and counted under one reason, when
//
//   - its source MAC has the group bit set (broadcast or multicast): no
//     station sends from one, and an answer would go to every host;
//   - its IPv4 source is martian: 0.0.0.0/8 ("this network", only valid
//     before a host has an address), 127.0.0.0/8 (loopback, never on a
//     wire), 224.0.0.0/4 (multicast) or 240.0.0.0/4 (reserved, with the
//     limited broadcast 255.255.255.255), as RFC 1122 3.2.1.3 and
//     RFC 1812 5.3.7 say (at the front-end, a C2 segment from the
//     back-end its flow was dispatched to passes whatever that address
//     is: see fromFlowBackend);
//   - its source is the engine's own address (the VIPs and the handoff
//     address at the front-end, the host's address at the shim): a
//     spoofed frame that would make us talk to ourselves;
//   - its TTL is 0: RFC 1122 3.2.1.7 forbids sending one, so it is forged
//     or broken;
//   - its IPv4 header carries options. Dropped rather than stripped:
//     stripping moves the transport header (a copy of every such frame,
//     or rewriting the Ethernet and IP headers in front of it) and changes
//     what the sender asked for, for options that have no legitimate use
//     towards a web server. Source routes (LSRR/SSRR) are the attack (a
//     reply routed through the attacker; RFC 7126 recommends dropping
//     them), Record Route and Timestamp only reveal the path, and no
//     common stack sends options on TCP. Linux drops source-routed
//     packets by default too (accept_source_route = 0);
//   - its IPv4 header checksum is wrong (wire.Parse finds it);
//   - it is TCP with a wrong checksum. The engines rewrite incrementally,
//     which preserves an error for the receiver, but the front-end is
//     the receiver of everything before the splice (it acknowledged and
//     scheduled corrupted request bytes), and the shim's measurement
//     would count a request the kernel then drops.
//
// The TCP checksum costs one pass over the segment (onesSum: about 90 ns
// for 1480 bytes on the 2-core lab host, where wire.Sum takes 200; a pure
// ACK costs the checks about 15 ns in all). It is skipped when the
// frame's virtio-net header says the kernel already verified it
// (VNetFlagDataValid) or that it was made on this host with the checksum
// left to the device (VNetFlagNeedsCsum: a partial checksum, not one that
// can be wrong; the front-end completes it first, see FrontEnd.InputVNet).
// What the kernel has verified, or generated itself, it would accept from
// the device too, so trusting it changes nothing an attacker can do.
//
// The front-end checks every frame it receives. The shim checks frames
// from the wire addressed to its host only: what the host kernel sends on
// the TAP is the local kernel's own, and frames for other addresses
// (broadcasts, multicast, ARP) are the kernel's to judge.

// ingressFault is why a frame was refused; ingressOK when it was not.
type ingressFault uint8

const (
	ingressOK ingressFault = iota
	ingressBadIPChecksum
	ingressBadTCPChecksum
	ingressMartianSource
	ingressOwnSource
	ingressMulticastMAC
	ingressTTLZero
	ingressIPOptions
)

// martianSource reports whether a is never a valid source on a wire:
// 0.0.0.0/8, 127.0.0.0/8, 224.0.0.0/4 and 240.0.0.0/4.
func martianSource(a wire.IP4) bool {
	return a[0] == 0 || a[0] == 127 || a[0] >= 224
}

// checkIngressHeaders makes the cheap checks on a parsed frame: the
// source MAC, and for IPv4 the source address, the TTL and options. The
// engine checks its own addresses and the TCP checksum itself.
func checkIngressHeaders(p *wire.Packet) ingressFault {
	if p.Eth[6]&1 != 0 { // the group bit of the source MAC
		return ingressMulticastMAC
	}
	if p.IP == nil {
		return ingressOK // ARP, or not IPv4
	}
	switch {
	case martianSource(p.IP.Src()):
		return ingressMartianSource
	case p.IP.TTL() == 0:
		return ingressTTLZero
	case p.IP.HeaderLen() > wire.IPv4MinHeaderLen:
		return ingressIPOptions
	}
	return ingressOK
}

// tcpChecksumValid reports whether a TCP segment's checksum verifies, or
// its virtio-net header vouches for it (see above). The receiver's test of
// RFC 1071: pseudo-header and segment, checksum field included, sum to
// all ones.
func tcpChecksumValid(p *wire.Packet, vh wire.VNetHdr) bool {
	if vh.Flags&(wire.VNetFlagDataValid|wire.VNetFlagNeedsCsum) != 0 {
		return true
	}
	ip := p.IP
	pseudo := wire.Fold(wire.PseudoHeaderSum(ip.Src(), ip.Dst(), wire.ProtoTCP, uint16(len(p.TCP))))
	return onesSum(p.TCP, pseudo) == 0xffff
}

// onesSum is the folded one's-complement sum of b (as big-endian 16-bit
// words, an odd last byte padded with zero) plus initial: wire.Fold of
// wire.Sum, about four times faster on a full segment. The sum does not
// depend on byte order (RFC 1071 2(B)): it adds the bytes as
// native little-endian 64-bit words, carries counted apart and added back
// end-around, and swaps the two bytes of the folded result once at the
// end.
func onesSum(b []byte, initial uint16) uint16 {
	acc := uint64(bits.ReverseBytes16(initial))
	var carries, c uint64
	for len(b) >= 32 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b), 0)
		carries += c
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[8:]), 0)
		carries += c
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[16:]), 0)
		carries += c
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[24:]), 0)
		carries += c
		b = b[32:]
	}
	for len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b), 0)
		carries += c
		b = b[8:]
	}
	var tail uint64 // what is left, at most 7 bytes: 16-bit words, then the odd byte
	for len(b) >= 2 {
		tail += uint64(binary.LittleEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		tail += uint64(b[0])
	}
	acc, c = bits.Add64(acc, tail, 0)
	carries += c
	acc, c = bits.Add64(acc, carries, 0) // 2^64 = 1 in one's complement
	acc += c                             // cannot carry again: acc < 2^64-1 after a carry
	// Fold 64 -> 16 bits with end-around carry.
	s := acc>>32 + acc&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return bits.ReverseBytes16(uint16(s))
}

// completeTCPChecksum completes the partial checksum of a NEEDS_CSUM TCP
// segment in place; it refuses a header that points anywhere but the TCP
// checksum field (it could overwrite a header Parse already checked).
func completeTCPChecksum(p *wire.Packet, frame []byte, vh wire.VNetHdr) bool {
	if p.Kind != wire.KindTCP || int(vh.CsumStart) != p.L4 || vh.CsumOffset != wire.TCPChecksumOff {
		return false
	}
	return wire.CompleteChecksum(frame[:p.End], vh) == nil
}

// ingressDrop maps a fault to the front-end's drop reason.
var ingressDrop = [...]dropReason{
	ingressBadIPChecksum:  dropBadIPChecksum,
	ingressBadTCPChecksum: dropBadTCPChecksum,
	ingressMartianSource:  dropMartianSource,
	ingressOwnSource:      dropOwnSource,
	ingressMulticastMAC:   dropMulticastMAC,
	ingressTTLZero:        dropTTLZero,
	ingressIPOptions:      dropIPOptions,
}

// checkIngress judges a frame the front-end received; the caller drops
// it unless ingressOK. vh is the frame's virtio-net header.
func (e *FrontEnd) checkIngress(p *wire.Packet, vh wire.VNetHdr) ingressFault {
	if f := checkIngressHeaders(p); f != ingressOK && !(f == ingressMartianSource && e.fromFlowBackend(p)) {
		return f
	}
	if p.IP == nil {
		return ingressOK
	}
	if src := p.IP.Src(); src == e.handoff || e.isVIP(src) {
		return ingressOwnSource
	}
	if p.Kind == wire.KindTCP && !tcpChecksumValid(p, vh) {
		return ingressBadTCPChecksum
	}
	return ingressOK
}

// fromFlowBackend reports whether p is a C2 segment from the back-end of
// the flow that holds its handoff port. Such a segment may come from a
// martian address: the back-end was registered there, by the operator
// (the daemon's tests run one on the loopback). Nothing else from a
// martian source gets as far as an answer.
func (e *FrontEnd) fromFlowBackend(p *wire.Packet) bool {
	if p.Kind != wire.KindTCP || p.IP.Dst() != e.handoff {
		return false
	}
	f := e.byC2[c2Key{bIP: p.IP.Src(), bPort: p.TCP.SrcPort(), hport: p.TCP.DstPort()}]
	return f != nil
}

// refuseFromWire judges a parsed frame that came from the wire: it counts
// and reports true for one the shim must drop. Only frames for the host
// are judged (see above).
func (s *Shim) refuseFromWire(p *wire.Packet, vh wire.VNetHdr) bool {
	if p.IP == nil || p.IP.Dst() != s.hostIP {
		return false
	}
	f := checkIngressHeaders(p)
	switch {
	case f != ingressOK:
	case p.IP.Src() == s.hostIP:
		f = ingressOwnSource
	case p.Kind == wire.KindTCP && !tcpChecksumValid(p, vh):
		f = ingressBadTCPChecksum
	default:
		return false
	}
	s.countIngress(f)
	return true
}

// forHost reports whether an IPv4 frame that failed parsing names the
// host as its destination.
func (s *Shim) forHost(frame []byte) bool {
	const dst = wire.EthernetHeaderLen + 16
	return len(frame) >= dst+4 && wire.IP4(frame[dst:dst+4]) == s.hostIP
}

// countIngress counts a frame from the wire the shim dropped.
func (s *Shim) countIngress(f ingressFault) {
	st := &s.stats
	switch f {
	case ingressBadIPChecksum:
		st.IngressBadIPChecksum++
	case ingressBadTCPChecksum:
		st.IngressBadTCPChecksum++
	case ingressMartianSource:
		st.IngressMartianSource++
	case ingressOwnSource:
		st.IngressOwnSource++
	case ingressMulticastMAC:
		st.IngressMulticastMAC++
	case ingressTTLZero:
		st.IngressTTLZero++
	case ingressIPOptions:
		st.IngressIPOptions++
	}
}

// IngressDrops is the number of frames from the wire the shim dropped for
// their headers, all reasons together.
func (st ShimStats) IngressDrops() uint64 {
	return st.IngressBadIPChecksum + st.IngressBadTCPChecksum + st.IngressMartianSource +
		st.IngressOwnSource + st.IngressMulticastMAC + st.IngressTTLZero + st.IngressIPOptions
}
