package wire

import "errors"

// Kind says what Parse found in a frame.
type Kind uint8

const (
	KindOther Kind = iota // valid Ethernet frame qsplice does not look into
	KindARP
	KindIPv4     // IPv4 but neither TCP nor a first fragment of it
	KindTCP      // IPv4 + TCP, headers validated
	KindICMP     // IPv4 + ICMP (at least its 8-byte header)
	KindFragment // IPv4 fragment (non-first, or first of TCP): passed, never rewritten
)

// Parse errors; each is a drop reason the engine counts.
var (
	ErrShortFrame    = errors.New("wire: frame shorter than its headers")
	ErrBadIPVersion  = errors.New("wire: not IPv4")
	ErrBadIPHeader   = errors.New("wire: bad IPv4 header length")
	ErrBadIPLength   = errors.New("wire: IPv4 total length does not fit the frame")
	ErrBadIPChecksum = errors.New("wire: bad IPv4 header checksum")
	ErrBadTCPHeader  = errors.New("wire: bad TCP data offset")
	ErrBadARP        = errors.New("wire: not an Ethernet/IPv4 ARP packet")
)

// Packet records where the headers of a validated frame are. It holds
// slices into the frame and no copies; the zero value is unusable until
// Parse fills it. Reuse one Packet per loop to avoid allocation.
type Packet struct {
	Kind Kind
	Eth  Ethernet
	ARP  ARP
	IP   IPv4
	TCP  TCP
	// L3 and L4 are the offsets of the IPv4 and transport headers in the
	// frame; End is where the IPv4 packet ends (frames may carry padding).
	L3, L4, End int
}

// Parse validates frame once so the views can be used without further
// bounds checks. It verifies the IPv4 header checksum (a cheap 20-byte sum)
// but not the TCP checksum: the engine only rewrites incrementally, which
// preserves an existing error for the receiver to catch, exactly as a
// router would.
func Parse(frame []byte, p *Packet) error {
	*p = Packet{}
	if len(frame) < EthernetHeaderLen {
		return ErrShortFrame
	}
	p.Eth = Ethernet(frame)
	p.End = len(frame)
	switch p.Eth.EtherType() {
	case EtherTypeARP:
		a := frame[EthernetHeaderLen:]
		if !validARP(a) {
			return ErrBadARP
		}
		p.Kind = KindARP
		p.ARP = ARP(a[:ARPLen])
		p.L3 = EthernetHeaderLen
		return nil
	case EtherTypeIPv4:
	default:
		p.Kind = KindOther
		return nil
	}
	p.L3 = EthernetHeaderLen
	b := frame[EthernetHeaderLen:]
	if len(b) < IPv4MinHeaderLen {
		return ErrShortFrame
	}
	if b[0]>>4 != 4 {
		return ErrBadIPVersion
	}
	ip := IPv4(b)
	hl := ip.HeaderLen()
	if hl < IPv4MinHeaderLen || hl > len(b) {
		return ErrBadIPHeader
	}
	tl := ip.TotalLen()
	if tl < hl || tl > len(b) {
		return ErrBadIPLength
	}
	ip = ip[:tl]
	// The receiver's test of RFC 1071: the header, checksum included, sums
	// to all ones. Comparing with a recomputed value instead would reject a
	// stored 0xffff, the other form of zero, which is valid.
	if Fold(Sum(ip[:hl], 0)) != 0xffff {
		return ErrBadIPChecksum
	}
	p.IP = ip
	p.End = EthernetHeaderLen + tl
	p.L4 = EthernetHeaderLen + hl
	p.Kind = KindIPv4
	if ip.IsFragment() {
		p.Kind = KindFragment
		return nil
	}
	switch ip.Protocol() {
	case ProtoTCP:
		t := TCP(ip[hl:])
		if len(t) < TCPMinHeaderLen {
			return ErrShortFrame
		}
		thl := t.HeaderLen()
		if thl < TCPMinHeaderLen || thl > len(t) {
			return ErrBadTCPHeader
		}
		p.TCP = t
		p.Kind = KindTCP
	case ProtoICMP:
		if tl-hl >= 8 {
			p.Kind = KindICMP
		}
	}
	return nil
}
