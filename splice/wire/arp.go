package wire

import "encoding/binary"

// ARP for Ethernet/IPv4 (RFC 826); the only kind qsplice speaks.
const (
	ARPLen       = 28
	ARPRequest   = 1
	ARPReply     = 2
	arpHTEther   = 1
	arpProtoIPv4 = 0x0800
)

// ARP is a view of an Ethernet/IPv4 ARP packet; validated by Parse.
type ARP []byte

func (a ARP) Op() uint16     { return binary.BigEndian.Uint16(a[6:]) }
func (a ARP) SenderMAC() MAC { return MAC(a[8:14]) }
func (a ARP) SenderIP() IP4  { return IP4(a[14:18]) }
func (a ARP) TargetMAC() MAC { return MAC(a[18:24]) }
func (a ARP) TargetIP() IP4  { return IP4(a[24:28]) }

// validARP checks the fixed fields for Ethernet/IPv4.
func validARP(a []byte) bool {
	return len(a) >= ARPLen &&
		binary.BigEndian.Uint16(a[0:]) == arpHTEther &&
		binary.BigEndian.Uint16(a[2:]) == arpProtoIPv4 &&
		a[4] == 6 && a[5] == 4
}

// ARPFrameLen is the length of a frame built by EncodeARP: ARP is padded to
// the 60-byte Ethernet minimum.
const ARPFrameLen = 60

// EncodeARP writes a complete Ethernet frame carrying an ARP packet into b
// (at least ARPFrameLen bytes) and returns its length.
func EncodeARP(b []byte, op uint16, srcMAC MAC, srcIP IP4, dstMAC MAC, dstIP IP4, ethDst MAC) int {
	b = b[:ARPFrameLen]
	clear(b)
	eth := Ethernet(b)
	eth.SetDst(ethDst)
	eth.SetSrc(srcMAC)
	eth.SetEtherType(EtherTypeARP)
	a := b[EthernetHeaderLen:]
	binary.BigEndian.PutUint16(a[0:], arpHTEther)
	binary.BigEndian.PutUint16(a[2:], arpProtoIPv4)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], op)
	copy(a[8:14], srcMAC[:])
	copy(a[14:18], srcIP[:])
	copy(a[18:24], dstMAC[:])
	copy(a[24:28], dstIP[:])
	return ARPFrameLen
}
