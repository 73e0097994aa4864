package splice

// The checker: emitted frames are decoded with gopacket (a decoder that
// owes nothing to package wire), both checksums are compared with a naive
// full recompute, and small check functions assert fields, in the manner
// of gVisor's checker package:
//
//	expectTCP(t, frame, from(vipA, 80), seqIs(isn+1), flagsAre(wire.TCPFlagACK))

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

// seen is an emitted frame decoded by gopacket.
type seen struct {
	raw []byte
	eth *layers.Ethernet
	ip  *layers.IPv4
	tcp *layers.TCP
}

// naiveSum is the RFC 1071 sum, word by word, as simple as it gets.
func naiveSum(b []byte, acc uint32) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		acc += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		acc += uint32(b[len(b)-1]) << 8
	}
	return acc
}

func naiveFinish(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc&0xffff + acc>>16
	}
	return ^uint16(acc)
}

// ipChecksum recomputes an IPv4 header checksum with its field zeroed.
func ipChecksum(hdr []byte) uint16 {
	h := append([]byte(nil), hdr...)
	h[10], h[11] = 0, 0
	return naiveFinish(naiveSum(h, 0))
}

// tcpChecksum recomputes a TCP checksum over the pseudo header and seg.
func tcpChecksum(src, dst []byte, seg []byte) uint16 {
	s := append([]byte(nil), seg...)
	s[16], s[17] = 0, 0
	pseudo := make([]byte, 0, 12)
	pseudo = append(pseudo, src...)
	pseudo = append(pseudo, dst...)
	pseudo = append(pseudo, 0, wire.ProtoTCP, byte(len(s)>>8), byte(len(s)))
	return naiveFinish(naiveSum(s, naiveSum(pseudo, 0)))
}

// tcpChecksumVerifies is a receiver's check of a segment's checksum
// (RFC 1071): the one's-complement sum of the pseudo-header and the whole
// segment, checksum field included, is all ones. It differs from
// comparing the field with tcpChecksum in one case: a segment whose
// checksum computes to 0x0000 verifies with 0xffff in the field too, the
// other zero of one's-complement arithmetic (RFC 1624 section 3), as the
// kernel's own check has it.
func tcpChecksumVerifies(src, dst []byte, seg []byte) bool {
	pseudo := make([]byte, 0, 12)
	pseudo = append(pseudo, src...)
	pseudo = append(pseudo, dst...)
	pseudo = append(pseudo, 0, wire.ProtoTCP, byte(len(seg)>>8), byte(len(seg)))
	return naiveFinish(naiveSum(seg, naiveSum(pseudo, 0))) == 0
}

// decodeTCP decodes an Ethernet/IPv4/TCP frame and checks that both
// checksums equal a full recompute.
func decodeTCP(tb testing.TB, b []byte) *seen {
	tb.Helper()
	pkt := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	if el := pkt.ErrorLayer(); el != nil {
		tb.Fatalf("gopacket cannot decode the frame: %v\n%x", el.Error(), b)
	}
	s := &seen{raw: b}
	var ok bool
	if s.eth, ok = pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); !ok {
		tb.Fatalf("no Ethernet layer in %x", b)
	}
	if s.ip, ok = pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4); !ok {
		tb.Fatalf("no IPv4 layer in %x", b)
	}
	if s.tcp, ok = pkt.Layer(layers.LayerTypeTCP).(*layers.TCP); !ok {
		tb.Fatalf("no TCP layer in %x", b)
	}
	ipHdr := b[14 : 14+int(s.ip.IHL)*4]
	if want := ipChecksum(ipHdr); s.ip.Checksum != want {
		tb.Errorf("IPv4 checksum %#04x, full recompute %#04x", s.ip.Checksum, want)
	}
	seg := b[14+len(ipHdr) : 14+int(s.ip.Length)]
	if want := tcpChecksum(ipHdr[12:16], ipHdr[16:20], seg); s.tcp.Checksum != want {
		tb.Errorf("TCP checksum %#04x, full recompute %#04x", s.tcp.Checksum, want)
	}
	return s
}

func (s *seen) seq() wire.Seq { return wire.Seq(s.tcp.Seq) }
func (s *seen) ack() wire.Seq { return wire.Seq(s.tcp.Ack) }

func (s *seen) flags() uint8 { return s.raw[14+int(s.ip.IHL)*4+13] }

func (s *seen) payload() []byte { return s.tcp.Payload }

func (s *seen) option(kind layers.TCPOptionKind) (layers.TCPOption, bool) {
	for _, o := range s.tcp.Options {
		if o.OptionType == kind {
			return o, true
		}
	}
	return layers.TCPOption{}, false
}

// ts returns the timestamp option's values.
func (s *seen) ts() (val, ecr uint32, ok bool) {
	o, ok := s.option(layers.TCPOptionKindTimestamps)
	if !ok || len(o.OptionData) != 8 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(o.OptionData), binary.BigEndian.Uint32(o.OptionData[4:]), true
}

func (s *seen) sackBlocks() []wire.SACKBlock {
	o, ok := s.option(layers.TCPOptionKindSACK)
	if !ok {
		return nil
	}
	var bl []wire.SACKBlock
	for i := 0; i+8 <= len(o.OptionData); i += 8 {
		bl = append(bl, wire.SACKBlock{
			Left:  wire.Seq(binary.BigEndian.Uint32(o.OptionData[i:])),
			Right: wire.Seq(binary.BigEndian.Uint32(o.OptionData[i+4:])),
		})
	}
	return bl
}

// check is one assertion about a decoded frame.
type check func(tb testing.TB, s *seen)

// expectTCP decodes b, verifies checksums and runs checks.
func expectTCP(tb testing.TB, b []byte, checks ...check) *seen {
	tb.Helper()
	s := decodeTCP(tb, b)
	for _, c := range checks {
		c(tb, s)
	}
	return s
}

func macOf(m wire.MAC) net.HardwareAddr { return net.HardwareAddr(m[:]) }

func ethFrom(m wire.MAC) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if !bytes.Equal(s.eth.SrcMAC, macOf(m)) {
			tb.Errorf("source MAC %v, want %v", s.eth.SrcMAC, m)
		}
	}
}

func ethTo(m wire.MAC) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if !bytes.Equal(s.eth.DstMAC, macOf(m)) {
			tb.Errorf("destination MAC %v, want %v", s.eth.DstMAC, m)
		}
	}
}

func from(a wire.IP4, port uint16) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if !s.ip.SrcIP.Equal(net.IP(a[:])) || uint16(s.tcp.SrcPort) != port {
			tb.Errorf("from %v:%d, want %v:%d", s.ip.SrcIP, s.tcp.SrcPort, a, port)
		}
	}
}

func to(a wire.IP4, port uint16) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if !s.ip.DstIP.Equal(net.IP(a[:])) || uint16(s.tcp.DstPort) != port {
			tb.Errorf("to %v:%d, want %v:%d", s.ip.DstIP, s.tcp.DstPort, a, port)
		}
	}
}

func seqIs(q wire.Seq) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if s.seq() != q {
			tb.Errorf("seq %#x, want %#x", uint32(s.seq()), uint32(q))
		}
	}
}

func ackIs(q wire.Seq) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if s.ack() != q {
			tb.Errorf("ack %#x, want %#x", uint32(s.ack()), uint32(q))
		}
	}
}

// flagsAre asserts the exact set of TCP flags.
func flagsAre(f uint8) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if s.flags() != f {
			tb.Errorf("flags %#02x, want %#02x", s.flags(), f)
		}
	}
}

func windowIs(w uint16) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if s.tcp.Window != w {
			tb.Errorf("window %d, want %d", s.tcp.Window, w)
		}
	}
}

func payloadIs(p []byte) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if !bytes.Equal(s.payload(), p) {
			tb.Errorf("payload %q, want %q", s.payload(), p)
		}
	}
}

func tsIs(val, ecr uint32) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		v, e, ok := s.ts()
		if !ok {
			tb.Errorf("no timestamp option, want TSval %#x TSecr %#x", val, ecr)
			return
		}
		if v != val || e != ecr {
			tb.Errorf("TSval %#x TSecr %#x, want %#x %#x", v, e, val, ecr)
		}
	}
}

func noOption(kind layers.TCPOptionKind) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if _, ok := s.option(kind); ok {
			tb.Errorf("unexpected option %v", kind)
		}
	}
}

// checksumsExact reports whether an IPv4 frame's header checksum, and its
// TCP checksum if it is a TCP segment, equal a full recompute. It needs no
// decoder that could refuse odd options, so fuzz targets can use it.
func checksumsExact(b []byte) (ok bool, why string) {
	var p wire.Packet
	if err := wire.Parse(b, &p); err != nil {
		return false, "does not parse: " + err.Error()
	}
	if p.IP == nil {
		return true, ""
	}
	hdr := p.IP[:p.IP.HeaderLen()]
	if ipChecksum(hdr) != p.IP.Checksum() {
		return false, "IPv4 checksum differs from a full recompute"
	}
	if p.Kind == wire.KindTCP && tcpChecksum(hdr[12:16], hdr[16:20], p.TCP) != p.TCP.Checksum() {
		return false, "TCP checksum differs from a full recompute"
	}
	return true, ""
}
