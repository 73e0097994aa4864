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
	eth := Ethernet(b)
	eth.SetDst(f.DstMAC)
	eth.SetSrc(f.SrcMAC)
	eth.SetEtherType(EtherTypeIPv4)
	ip := IPv4(b[EthernetHeaderLen:])
	ip[0] = 0x45
	ip[1] = 0
	binary.BigEndian.PutUint16(ip[2:], uint16(n-EthernetHeaderLen))
	binary.BigEndian.PutUint16(ip[4:], f.IPID)
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF: we do path MTU discovery like the kernels do
	ttl := f.TTL
	if ttl == 0 {
		ttl = 64
	}
	ip[8] = ttl
	ip[9] = ProtoTCP
	copy(ip[12:16], f.Src[:])
	copy(ip[16:20], f.Dst[:])
	ip.SetChecksum(0)
	ip.SetChecksum(ip.ComputeChecksum())
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
