package wire

import (
	"encoding/binary"
	"errors"
)

// Software offloads: what a device does with a frame whose VNetHdr leaves
// work to it, done here for a link that cannot pass the work on (a wire
// without vnet headers). Both functions follow Linux, which is what would
// otherwise have done the work: skb_checksum_help for a partial checksum,
// inet_gso_segment and tcp_gso_segment for a TCPv4 super-frame.

// Errors of CompleteChecksum and SegmentTCP4 (besides Parse's, which
// SegmentTCP4 returns as they are for a malformed super-frame).
var (
	ErrCsumBounds     = errors.New("wire: virtio-net checksum start/offset outside the packet")
	ErrCsumOnGSO      = errors.New("wire: a super-frame is segmented (SegmentTCP4), not checksummed whole")
	ErrGSOType        = errors.New("wire: GSO type is not TCPv4")
	ErrGSOSize        = errors.New("wire: GSO size is zero")
	ErrGSONotTCP4     = errors.New("wire: super-frame is not an unfragmented IPv4/TCP packet")
	ErrGSOFlags       = errors.New("wire: SYN or RST in a TCP super-frame")
	ErrGSOShortBuffer = errors.New("wire: segment buffer too small for the super-frame")
)

// CompleteChecksum does a device's part of a NEEDS_CSUM frame in place:
// it sums from h.CsumStart to the end of the packet, the partial
// (pseudo-header) sum already in the field at h.CsumStart+h.CsumOffset
// included, and stores the complement of the folded sum there. It does
// nothing for a frame without NEEDS_CSUM, and refuses a super-frame, whose
// checksums only exist per segment. The caller clears the flag in its copy
// of the header if the frame travels on with one.
//
// The packet ends where IPv4's Total Length says (Ethernet padding is not
// summed); any other frame (IPv6, a VLAN tag) is summed to its end, as
// Linux sums to the end of the buffer it was handed, which carries no
// padding on the links that produce partial checksums. A sum that folds to
// zero is stored as 0x0000 for TCP, which has no "no checksum" value and
// which a full computation stores, and as 0xffff otherwise: UDP reads
// 0x0000 as "no checksum" (RFC 768), and Linux stores 0xffff for every
// protocol.
func CompleteChecksum(frame []byte, h VNetHdr) error {
	if !h.NeedsCsum() {
		return nil
	}
	if h.IsGSO() {
		return ErrCsumOnGSO
	}
	end, proto, err := ipPacketEnd(frame)
	if err != nil {
		return err
	}
	start := int(h.CsumStart)
	field := start + int(h.CsumOffset)
	if field+2 > end {
		return ErrCsumBounds
	}
	c := ^Fold(Sum(frame[start:end], 0))
	if c == 0 && proto != ProtoTCP {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(frame[field:], c)
	return nil
}

// ipPacketEnd returns where the packet in frame ends and, for IPv4, its
// protocol (0 otherwise). An IPv4 header is checked only as far as its
// Total Length is needed.
func ipPacketEnd(frame []byte) (end int, proto uint8, err error) {
	if len(frame) < EthernetHeaderLen || Ethernet(frame).EtherType() != EtherTypeIPv4 {
		return len(frame), 0, nil
	}
	ip := IPv4(frame[EthernetHeaderLen:])
	if len(ip) < IPv4MinHeaderLen {
		return 0, 0, ErrShortFrame
	}
	if ip[0]>>4 != 4 {
		return 0, 0, ErrBadIPVersion
	}
	hl, tl := ip.HeaderLen(), ip.TotalLen()
	if hl < IPv4MinHeaderLen || tl < hl || tl > len(ip) {
		return 0, 0, ErrBadIPLength
	}
	return EthernetHeaderLen + tl, ip.Protocol(), nil
}

// gsoPlan is how a super-frame is cut: hdr bytes of Ethernet, IPv4 and
// TCP headers copied in front of each of n segments of mss payload bytes
// (the last one shorter), payload bytes in all.
type gsoPlan struct {
	p                 Packet
	hdr, payload, mss int
	n                 int
}

func planTCP4(frame []byte, h VNetHdr, g *gsoPlan) error {
	if h.GSOType&^GSOECN != GSOTCPv4 {
		return ErrGSOType
	}
	if h.GSOSize == 0 {
		return ErrGSOSize
	}
	if len(frame) >= EthernetHeaderLen && Ethernet(frame).EtherType() != EtherTypeIPv4 {
		return ErrGSONotTCP4
	}
	if err := Parse(frame, &g.p); err != nil {
		return err
	}
	if g.p.Kind != KindTCP {
		return ErrGSONotTCP4
	}
	if g.p.TCP.Flags()&(TCPFlagSYN|TCPFlagRST) != 0 {
		// A SYN takes a sequence number the later segments' numbers would
		// have to skip; neither occurs in a super-frame a stack builds.
		return ErrGSOFlags
	}
	g.hdr = g.p.L4 + g.p.TCP.HeaderLen()
	g.payload = g.p.End - g.hdr
	g.mss = int(h.GSOSize)
	g.n = max(1, (g.payload+g.mss-1)/g.mss)
	return nil
}

// SegmentTCP4Len reports how SegmentTCP4 will cut frame: into segments
// frames using bytes of its out buffer (0 for a frame that is not a
// super-frame, which is returned as it is). It returns the errors
// SegmentTCP4 would, so a caller can size or flush its scratch first.
func SegmentTCP4Len(frame []byte, h VNetHdr) (segments, bytes int, err error) {
	if !h.IsGSO() {
		return 1, 0, nil
	}
	var g gsoPlan
	if err := planTCP4(frame, h, &g); err != nil {
		return 0, 0, err
	}
	return g.n, g.n*g.hdr + g.payload, nil
}

// SegmentTCP4 is software GSO for a TCPv4 super-frame (GSOTCPv4, with or
// without GSOECN), for a link that cannot send super-frames. It cuts the
// payload into h.GSOSize-byte segments, each behind a copy of the
// super-frame's Ethernet, IPv4 (options included) and TCP headers (options
// included), with, as Linux's GSO does:
//
//   - the sequence number advanced by the segment's payload offset;
//   - IPv4 Total Length set, ID = super-frame's ID + i (mod 2^16; virtio
//     has no fixed-ID flag), header checksum recomputed;
//   - FIN and PSH only on the last segment, CWR only on the first;
//   - the TCP checksum computed in full over the pseudo-header with the
//     segment's length and the whole segment. The super-frame's checksum
//     field is not read, so the kernel's partial sum needs no checking.
//
// Header lengths come from parsing (Parse, whose errors are returned as
// they are for a malformed IPv4/TCP packet); h.HdrLen, h.CsumStart and h.CsumOffset are not used. A
// super-frame whose payload fits one segment (or is empty) becomes one
// segment. frame is only read.
//
// The segments are written one after the other into out, which must hold
// SegmentTCP4Len's bytes (else ErrGSOShortBuffer, nothing written), and
// appended to segs as slices of out, capped at their length. Pass segs[:0]
// of a slice with room for all of them and nothing is allocated.
//
// A frame that is not a super-frame is appended to segs itself, after
// CompleteChecksum completed its checksum in place if it had NEEDS_CSUM;
// out is not used.
func SegmentTCP4(frame []byte, h VNetHdr, out []byte, segs [][]byte) ([][]byte, error) {
	if !h.IsGSO() {
		if err := CompleteChecksum(frame, h); err != nil {
			return segs, err
		}
		return append(segs, frame), nil
	}
	var g gsoPlan
	if err := planTCP4(frame, h, &g); err != nil {
		return segs, err
	}
	if len(out) < g.n*g.hdr+g.payload {
		return segs, ErrGSOShortBuffer
	}
	headers := frame[:g.hdr]
	payload := frame[g.hdr:g.p.End]
	ipOff, tcpOff := g.p.L3, g.p.L4
	src, dst := g.p.IP.Src(), g.p.IP.Dst()
	id := g.p.IP.ID()
	seq := uint32(g.p.TCP.Seq())
	flags := g.p.TCP.Flags()
	off := 0
	for i := range g.n {
		lo := i * g.mss
		hi := min(lo+g.mss, g.payload)
		n := g.hdr + hi - lo
		seg := out[off : off+n : off+n]
		copy(seg, headers)
		copy(seg[g.hdr:], payload[lo:hi])

		ip := IPv4(seg[ipOff:])
		binary.BigEndian.PutUint16(ip[2:], uint16(n-ipOff))
		binary.BigEndian.PutUint16(ip[4:], id+uint16(i))
		ip.SetChecksum(ip.ComputeChecksum())

		t := TCP(seg[tcpOff:])
		binary.BigEndian.PutUint32(t[4:], seq+uint32(lo))
		f := flags
		if i < g.n-1 {
			f &^= TCPFlagFIN | TCPFlagPSH
		}
		if i > 0 {
			f &^= TCPFlagCWR
		}
		t[13] = f
		t.SetChecksum(t.ComputeChecksum(src, dst))

		segs = append(segs, seg)
		off += n
	}
	return segs, nil
}
