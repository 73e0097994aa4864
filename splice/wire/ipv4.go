package wire

import "encoding/binary"

// IPv4 header layout.
const (
	IPv4MinHeaderLen = 20
	ProtoICMP        = 1
	ProtoTCP         = 6
	ProtoUDP         = 17
	ipv4FlagMF       = 0x2000
	ipv4FragOffMask  = 0x1fff
)

// IPv4 is a view of an IPv4 packet, from the first header byte to the end
// given by Total Length (Ethernet padding excluded); validated by Parse.
type IPv4 []byte

func (ip IPv4) HeaderLen() int   { return int(ip[0]&0x0f) * 4 }
func (ip IPv4) TotalLen() int    { return int(binary.BigEndian.Uint16(ip[2:])) }
func (ip IPv4) ID() uint16       { return binary.BigEndian.Uint16(ip[4:]) }
func (ip IPv4) TTL() uint8       { return ip[8] }
func (ip IPv4) Protocol() uint8  { return ip[9] }
func (ip IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(ip[10:]) }
func (ip IPv4) Src() IP4         { return IP4(ip[12:16]) }
func (ip IPv4) Dst() IP4         { return IP4(ip[16:20]) }
func (ip IPv4) Payload() []byte  { return ip[ip.HeaderLen():] }
func (ip IPv4) IsFragment() bool {
	return binary.BigEndian.Uint16(ip[6:])&(ipv4FlagMF|ipv4FragOffMask) != 0
}
func (ip IPv4) SetChecksum(c uint16) { binary.BigEndian.PutUint16(ip[10:], c) }

// ComputeChecksum returns the header checksum computed over the header
// with the checksum field taken as zero.
func (ip IPv4) ComputeChecksum() uint16 {
	h := ip[:ip.HeaderLen()]
	s := Sum(h[:10], 0)
	s = Sum(h[12:], s)
	return ^Fold(s)
}

// SetSrc rewrites the source address and updates the header checksum
// incrementally. The caller updates the transport checksum, which covers
// the address through the pseudo-header.
func (ip IPv4) SetSrc(a IP4) {
	old := binary.BigEndian.Uint32(ip[12:])
	nw := binary.BigEndian.Uint32(a[:])
	copy(ip[12:16], a[:])
	ip.SetChecksum(UpdateChecksum32(ip.Checksum(), old, nw))
}

// SetDst is SetSrc for the destination address.
func (ip IPv4) SetDst(a IP4) {
	old := binary.BigEndian.Uint32(ip[16:])
	nw := binary.BigEndian.Uint32(a[:])
	copy(ip[16:20], a[:])
	ip.SetChecksum(UpdateChecksum32(ip.Checksum(), old, nw))
}
