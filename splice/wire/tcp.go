package wire

import "encoding/binary"

// TCP header layout and flags.
const (
	TCPMinHeaderLen = 20
	TCPMaxHeaderLen = 60
	TCPChecksumOff  = 16 // offset of the checksum field (a VNetHdr's CsumOffset)
	TCPFlagFIN      = 0x01
	TCPFlagSYN      = 0x02
	TCPFlagRST      = 0x04
	TCPFlagPSH      = 0x08
	TCPFlagACK      = 0x10
	TCPFlagURG      = 0x20
	TCPFlagECE      = 0x40
	TCPFlagCWR      = 0x80
)

// TCP is a view of a TCP segment, header and payload, ending where the
// IPv4 Total Length ends; validated by Parse.
type TCP []byte

func (t TCP) SrcPort() uint16  { return binary.BigEndian.Uint16(t[0:]) }
func (t TCP) DstPort() uint16  { return binary.BigEndian.Uint16(t[2:]) }
func (t TCP) Seq() Seq         { return Seq(binary.BigEndian.Uint32(t[4:])) }
func (t TCP) Ack() Seq         { return Seq(binary.BigEndian.Uint32(t[8:])) }
func (t TCP) HeaderLen() int   { return int(t[12]>>4) * 4 }
func (t TCP) Flags() uint8     { return t[13] }
func (t TCP) Window() uint16   { return binary.BigEndian.Uint16(t[14:]) }
func (t TCP) Checksum() uint16 { return binary.BigEndian.Uint16(t[16:]) }
func (t TCP) Options() []byte  { return t[TCPMinHeaderLen:t.HeaderLen()] }
func (t TCP) Payload() []byte  { return t[t.HeaderLen():] }
func (t TCP) Has(flags uint8) bool {
	return t[13]&flags == flags
}

// SegLen is the sequence space the segment occupies: payload plus one for
// each of SYN and FIN.
func (t TCP) SegLen() uint32 {
	n := uint32(len(t) - t.HeaderLen())
	if t[13]&TCPFlagSYN != 0 {
		n++
	}
	if t[13]&TCPFlagFIN != 0 {
		n++
	}
	return n
}

func (t TCP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(t[16:], c) }

// The ...Update setters rewrite a field and fix the checksum with RFC 1624
// so a rewrite costs a few instructions instead of a pass over the payload.

func (t TCP) SetSrcPortUpdate(p uint16) {
	old := t.SrcPort()
	binary.BigEndian.PutUint16(t[0:], p)
	t.SetChecksum(UpdateChecksum16(t.Checksum(), old, p))
}

func (t TCP) SetDstPortUpdate(p uint16) {
	old := t.DstPort()
	binary.BigEndian.PutUint16(t[2:], p)
	t.SetChecksum(UpdateChecksum16(t.Checksum(), old, p))
}

func (t TCP) SetSeqUpdate(s Seq) {
	old := uint32(t.Seq())
	binary.BigEndian.PutUint32(t[4:], uint32(s))
	t.SetChecksum(UpdateChecksum32(t.Checksum(), old, uint32(s)))
}

func (t TCP) SetAckUpdate(s Seq) {
	old := uint32(t.Ack())
	binary.BigEndian.PutUint32(t[8:], uint32(s))
	t.SetChecksum(UpdateChecksum32(t.Checksum(), old, uint32(s)))
}

func (t TCP) SetWindowUpdate(w uint16) {
	old := t.Window()
	binary.BigEndian.PutUint16(t[14:], w)
	t.SetChecksum(UpdateChecksum16(t.Checksum(), old, w))
}

// SetUint32AtUpdate rewrites the 32-bit value at byte offset off of the
// segment (an option field, aligned or not) and fixes the checksum.
func (t TCP) SetUint32AtUpdate(off int, v uint32) {
	old := binary.BigEndian.Uint32(t[off:])
	binary.BigEndian.PutUint32(t[off:], v)
	t.SetChecksum(UpdateChecksumAt(t.Checksum(), off, old, v))
}

// UpdateAddrs fixes the checksum for a change of the pseudo-header's
// addresses (after IPv4.SetSrc/SetDst).
func (t TCP) UpdateAddrs(oldSrc, oldDst, newSrc, newDst IP4) {
	c := t.Checksum()
	c = UpdateChecksum32(c, binary.BigEndian.Uint32(oldSrc[:]), binary.BigEndian.Uint32(newSrc[:]))
	c = UpdateChecksum32(c, binary.BigEndian.Uint32(oldDst[:]), binary.BigEndian.Uint32(newDst[:]))
	t.SetChecksum(c)
}

// The plain setters rewrite a field and leave the checksum field alone.
// They are for frames whose checksum is partial (VNetHdr.NeedsCsum): the
// field then holds only the pseudo-header's sum and the device sums the
// header and payload into it later, so rewriting anything but the
// pseudo-header must not touch it. On a frame with a complete checksum
// use the ...Update setters.

func (t TCP) SetSrcPort(p uint16) { binary.BigEndian.PutUint16(t[0:], p) }
func (t TCP) SetDstPort(p uint16) { binary.BigEndian.PutUint16(t[2:], p) }
func (t TCP) SetSeq(s Seq)        { binary.BigEndian.PutUint32(t[4:], uint32(s)) }
func (t TCP) SetAck(s Seq)        { binary.BigEndian.PutUint32(t[8:], uint32(s)) }
func (t TCP) SetWindow(w uint16)  { binary.BigEndian.PutUint16(t[14:], w) }

// SetUint32At rewrites the 32-bit value at byte offset off of the segment
// (an option field, aligned or not).
func (t TCP) SetUint32At(off int, v uint32) { binary.BigEndian.PutUint32(t[off:], v) }

// UpdatePartialAddrs is UpdateAddrs for a partial checksum field
// (VNetHdr.NeedsCsum): the field holds the pseudo-header's folded sum, not
// its complement, so each address change is added as a plain sum
// (AdjustPartialChecksum) rather than with RFC 1624.
func (t TCP) UpdatePartialAddrs(oldSrc, oldDst, newSrc, newDst IP4) {
	c := t.Checksum()
	c = AdjustPartialChecksum(c, binary.BigEndian.Uint32(oldSrc[:]), binary.BigEndian.Uint32(newSrc[:]))
	c = AdjustPartialChecksum(c, binary.BigEndian.Uint32(oldDst[:]), binary.BigEndian.Uint32(newDst[:]))
	t.SetChecksum(c)
}

// PartialChecksum returns what a sender stores in the checksum field of a
// segment whose checksum it leaves to the device (VNetHdr.NeedsCsum): the
// folded, not complemented, pseudo-header sum for a segment of tcpLen
// bytes (header and payload).
func PartialChecksum(src, dst IP4, tcpLen int) uint16 {
	return Fold(PseudoHeaderSum(src, dst, ProtoTCP, uint16(tcpLen)))
}

// ComputeChecksum returns the TCP checksum over the pseudo-header and the
// whole segment, with the checksum field taken as zero.
func (t TCP) ComputeChecksum(src, dst IP4) uint16 {
	s := PseudoHeaderSum(src, dst, ProtoTCP, uint16(len(t)))
	s = Sum(t[:16], s)
	s = Sum(t[18:], s)
	return ^Fold(s)
}
