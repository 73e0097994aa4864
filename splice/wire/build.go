package wire

import "encoding/binary"

// TCPFrame describes a segment the engine originates (SYN-ACK, ACK, RST,
// data it retransmits, the SYN of a handoff connection).
type TCPFrame struct {
	SrcMAC, DstMAC   MAC
	Src, Dst         IP4
	SrcPort, DstPort uint16
	Seq, Ack         Seq
	Flags            uint8
	Window           uint16
	IPID             uint16
	TTL              uint8  // 0 means 64
	Options          []byte // encoded, length a multiple of 4, at most 40
	Payload          []byte
}

// Len is the frame length Encode needs.
func (f *TCPFrame) Len() int {
	return EthernetHeaderLen + IPv4MinHeaderLen + TCPMinHeaderLen + len(f.Options) + len(f.Payload)
}

// Encode writes the frame into b (at least f.Len() bytes) with both
// checksums computed, and returns its length.
func (f *TCPFrame) Encode(b []byte) int {
	n := f.Len()
	b = b[:n]
	ip := encodeIPv4Headers(b, f.SrcMAC, f.DstMAC, f.Src, f.Dst, ProtoTCP, f.IPID, f.TTL)
	t := TCP(ip[IPv4MinHeaderLen:])
	binary.BigEndian.PutUint16(t[0:], f.SrcPort)
	binary.BigEndian.PutUint16(t[2:], f.DstPort)
	binary.BigEndian.PutUint32(t[4:], uint32(f.Seq))
	binary.BigEndian.PutUint32(t[8:], uint32(f.Ack))
	t[12] = byte((TCPMinHeaderLen+len(f.Options))/4) << 4
	t[13] = f.Flags
	binary.BigEndian.PutUint16(t[14:], f.Window)
	binary.BigEndian.PutUint16(t[16:], 0)
	binary.BigEndian.PutUint16(t[18:], 0)
	copy(t[TCPMinHeaderLen:], f.Options)
	copy(t[TCPMinHeaderLen+len(f.Options):], f.Payload)
	t.SetChecksum(t.ComputeChecksum(f.Src, f.Dst))
	return n
}

// UDPFrame describes a datagram a daemon originates on the wire (the
// shim's control messages, backend/wirecontrol.go).
type UDPFrame struct {
	SrcMAC, DstMAC   MAC
	Src, Dst         IP4
	SrcPort, DstPort uint16
	IPID             uint16
	TTL              uint8 // 0 means 64
	Payload          []byte
}

// UDPHeaderLen is the size of a UDP header.
const UDPHeaderLen = 8

// Len is the frame length Encode needs.
func (f *UDPFrame) Len() int {
	return EthernetHeaderLen + IPv4MinHeaderLen + UDPHeaderLen + len(f.Payload)
}

// Encode writes the frame into b (at least f.Len() bytes) with both
// checksums computed (a UDP sum of 0 sent as 0xffff: 0 says "none",
// RFC 768), and returns its length. Don't fragment, as for TCP.
func (f *UDPFrame) Encode(b []byte) int {
	n := f.Len()
	b = b[:n]
	ip := encodeIPv4Headers(b, f.SrcMAC, f.DstMAC, f.Src, f.Dst, ProtoUDP, f.IPID, f.TTL)
	u := ip[IPv4MinHeaderLen:]
	binary.BigEndian.PutUint16(u[0:], f.SrcPort)
	binary.BigEndian.PutUint16(u[2:], f.DstPort)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	binary.BigEndian.PutUint16(u[6:], 0)
	copy(u[UDPHeaderLen:], f.Payload)
	sum := ^Fold(Sum(u, PseudoHeaderSum(f.Src, f.Dst, ProtoUDP, uint16(len(u)))))
	if sum == 0 {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], sum)
	return n
}

// encodeIPv4Headers writes the Ethernet header and an option-less IPv4
// header (don't fragment, TTL ttl or 64, its checksum) for a packet
// filling b, and returns the IPv4 part.
func encodeIPv4Headers(b []byte, srcMAC, dstMAC MAC, src, dst IP4, proto uint8, id uint16, ttl uint8) IPv4 {
	eth := Ethernet(b)
	eth.SetDst(dstMAC)
	eth.SetSrc(srcMAC)
	eth.SetEtherType(EtherTypeIPv4)
	ip := IPv4(b[EthernetHeaderLen:])
	ip[0] = 0x45
	ip[1] = 0
	binary.BigEndian.PutUint16(ip[2:], uint16(len(b)-EthernetHeaderLen))
	binary.BigEndian.PutUint16(ip[4:], id)
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF: path MTU discovery, as the kernels do
	if ttl == 0 {
		ttl = 64
	}
	ip[8] = ttl
	ip[9] = proto
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	ip.SetChecksum(0)
	ip.SetChecksum(ip.ComputeChecksum())
	return ip
}
