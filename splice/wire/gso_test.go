package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

// superSpec describes a TCPv4 super-frame as a Linux stack hands it to a
// TAP with TSO: Ethernet, IPv4 (options optional), TCP with timestamps,
// a long payload, the TCP checksum field holding the partial sum.
type superSpec struct {
	seq     uint32
	flags   uint8 // ACK is always added
	ipID    uint16
	ipOpts  []byte // a multiple of 4 bytes
	payload int
	mss     uint16
	ecn     bool
	pad     int  // Ethernet padding after the IPv4 packet
	noCsum  bool // no NEEDS_CSUM, a stale checksum field
	seed    byte // varies the payload bytes
}

var tsOption = []byte{wire.OptNOP, wire.OptNOP, 8, 10, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}

// superFrame builds the frame and its virtio-net header.
func superFrame(tb testing.TB, s superSpec) ([]byte, wire.VNetHdr) {
	tb.Helper()
	payload := make([]byte, s.payload)
	for i := range payload {
		// Not periodic in the MSS, so a misplaced segment shows.
		payload[i] = byte(i) ^ byte(i>>8)*31 ^ s.seed
	}
	f := wire.TCPFrame{SrcMAC: wire.MAC(macA), DstMAC: wire.MAC(macB), Src: ip4(ipA), Dst: ip4(ipB),
		SrcPort: 80, DstPort: 40000, Seq: wire.Seq(s.seq), Ack: 0x01020304, Flags: s.flags | wire.TCPFlagACK,
		Window: 502, IPID: s.ipID, Options: tsOption, Payload: payload}
	if f.Len()+len(s.ipOpts)-wire.EthernetHeaderLen > 65535 {
		tb.Fatalf("super-frame of %d bytes does not fit IPv4", f.Len())
	}
	frame := make([]byte, f.Len())
	f.Encode(frame)
	if len(s.ipOpts) > 0 {
		withOpts := append([]byte(nil), frame[:34]...)
		withOpts = append(withOpts, s.ipOpts...)
		frame = append(withOpts, frame[34:]...)
		ip := frame[14:]
		ip[0] = 0x40 | byte((20+len(s.ipOpts))/4)
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		binary.BigEndian.PutUint16(ip[10:], naiveIPChecksum(ip))
	}
	ihl := 20 + len(s.ipOpts)
	tcpLen := len(frame) - 14 - ihl
	h := wire.VNetHdr{GSOType: wire.GSOTCPv4, HdrLen: uint16(14 + ihl + 20 + len(tsOption)), GSOSize: s.mss,
		CsumStart: uint16(14 + ihl), CsumOffset: 16}
	if s.ecn {
		h.GSOType |= wire.GSOECN
	}
	if s.noCsum {
		binary.BigEndian.PutUint16(frame[14+ihl+16:], 0xdead)
	} else {
		h.Flags = wire.VNetFlagNeedsCsum
		setPartial(frame, 14+ihl, tcpLen)
	}
	return append(frame, bytes.Repeat([]byte{0xee}, s.pad)...), h // padding that would change a sum
}

// setPartial stores the partial checksum Linux leaves in a NEEDS_CSUM
// frame: the folded pseudo-header sum, not complemented.
func setPartial(frame []byte, l4, tcpLen int) {
	src, dst := wire.IP4(frame[26:30]), wire.IP4(frame[30:34])
	binary.BigEndian.PutUint16(frame[l4+16:], wire.Fold(wire.PseudoHeaderSum(src, dst, wire.ProtoTCP, uint16(tcpLen))))
}

// checkSegments verifies segs against the super-frame they were cut from,
// reading both with raw offsets and naive checksums (nothing from the
// code under test but Parse, which every segment must pass).
func checkSegments(tb testing.TB, super []byte, mss int, segs [][]byte) {
	tb.Helper()
	ihl := int(super[14]&0xf) * 4
	l4 := 14 + ihl
	hdr := l4 + int(super[l4+12]>>4)*4
	end := 14 + int(binary.BigEndian.Uint16(super[16:]))
	payload := super[hdr:end]
	want := max(1, (len(payload)+mss-1)/mss)
	if len(segs) != want {
		tb.Fatalf("%d segments of a %d-byte payload at MSS %d, want %d", len(segs), len(payload), mss, want)
	}
	// The bytes GSO rewrites: IPv4 total length, ID and checksum; TCP
	// sequence number, flags and checksum. Everything else is copied.
	rewritten := func(j int) bool {
		return 16 <= j && j < 20 || 24 <= j && j < 26 || l4+4 <= j && j < l4+8 || j == l4+13 || l4+16 <= j && j < l4+18
	}
	id := binary.BigEndian.Uint16(super[18:])
	seq := binary.BigEndian.Uint32(super[l4+4:])
	flags := super[l4+13]
	var got []byte
	for i, seg := range segs {
		lo, hi := i*mss, min((i+1)*mss, len(payload))
		if len(seg) != hdr+hi-lo {
			tb.Fatalf("segment %d is %d bytes, want %d+%d", i, len(seg), hdr, hi-lo)
		}
		for j := range hdr {
			if !rewritten(j) && seg[j] != super[j] {
				tb.Fatalf("segment %d header byte %d is %#02x, super-frame's %#02x", i, j, seg[j], super[j])
			}
		}
		got = append(got, seg[hdr:]...)
		ip := seg[14:]
		if tl := binary.BigEndian.Uint16(ip[2:]); int(tl) != len(ip) {
			tb.Fatalf("segment %d: total length %d, %d bytes", i, tl, len(ip))
		}
		if gid := binary.BigEndian.Uint16(ip[4:]); gid != id+uint16(i) {
			tb.Fatalf("segment %d: IP ID %#04x, want %#04x", i, gid, id+uint16(i))
		}
		if c, w := binary.BigEndian.Uint16(ip[10:]), naiveIPChecksum(ip); c != w {
			tb.Fatalf("segment %d: IP checksum %#04x, full %#04x", i, c, w)
		}
		if s := binary.BigEndian.Uint32(seg[l4+4:]); s != seq+uint32(lo) {
			tb.Fatalf("segment %d: seq %#08x, want %#08x", i, s, seq+uint32(lo))
		}
		wantFlags := flags
		if i < len(segs)-1 {
			wantFlags &^= wire.TCPFlagFIN | wire.TCPFlagPSH
		}
		if i > 0 {
			wantFlags &^= wire.TCPFlagCWR
		}
		if seg[l4+13] != wantFlags {
			tb.Fatalf("segment %d: flags %#02x, want %#02x", i, seg[l4+13], wantFlags)
		}
		if c, w := binary.BigEndian.Uint16(seg[l4+16:]), naiveTCPChecksum(ip); c != w {
			tb.Fatalf("segment %d: TCP checksum %#04x, full %#04x", i, c, w)
		}
		if p := mustParse(tb, seg); p.Kind != wire.KindTCP {
			tb.Fatalf("segment %d parses as kind %d", i, p.Kind)
		}
	}
	if !bytes.Equal(got, payload) {
		tb.Fatal("segment payloads do not reassemble to the super-frame's")
	}
}

// segmentAll runs SegmentTCP4 with a buffer sized by SegmentTCP4Len and
// checks the two agree and the super-frame is left as it was.
func segmentAll(tb testing.TB, frame []byte, h wire.VNetHdr) ([][]byte, []byte) {
	tb.Helper()
	n, size, err := wire.SegmentTCP4Len(frame, h)
	if err != nil {
		tb.Fatalf("SegmentTCP4Len: %v", err)
	}
	orig := append([]byte(nil), frame...)
	out := make([]byte, size)
	segs, err := wire.SegmentTCP4(frame, h, out, make([][]byte, 0, n))
	if err != nil {
		tb.Fatalf("SegmentTCP4: %v", err)
	}
	if !bytes.Equal(frame, orig) {
		tb.Fatal("SegmentTCP4 modified the super-frame")
	}
	if len(segs) != n {
		tb.Fatalf("%d segments, SegmentTCP4Len said %d", len(segs), n)
	}
	off := 0
	for i, s := range segs {
		if &s[0] != &out[off] || cap(s) != len(s) {
			tb.Fatalf("segment %d is not out[%d:] capped at its length", i, off)
		}
		off += len(s)
	}
	if off != size {
		tb.Fatalf("segments fill %d bytes, SegmentTCP4Len said %d", off, size)
	}
	return segs, out
}

func TestSegmentTCP4(t *testing.T) {
	const max64K = 65535 - 20 - 32 // the largest payload behind IPv4 and TCP with timestamps
	routerAlertAndNOPs := []byte{0x94, 0x04, 0x00, 0x00, 0x01, 0x01, 0x01, 0x00}
	tests := []struct {
		name string
		spec superSpec
		segs int
	}{
		{"64 KiB at MSS 1448, sequence wraps inside", superSpec{seq: 0xffffffff - 3000, payload: max64K, mss: 1448, flags: wire.TCPFlagPSH}, 46},
		{"exact multiple, a segment starts at seq 0", superSpec{seq: 0x100000000 - 1448, payload: 4 * 1448, mss: 1448, flags: wire.TCPFlagPSH}, 4},
		{"payload shorter than the MSS", superSpec{seq: 7, payload: 1000, mss: 1448, flags: wire.TCPFlagPSH | wire.TCPFlagFIN}, 1},
		{"header only, FIN", superSpec{seq: 0xffffffff, payload: 0, mss: 1448, flags: wire.TCPFlagFIN}, 1},
		{"IP options, odd MSS and payload", superSpec{seq: 1 << 31, payload: 5001, mss: 999, ipOpts: routerAlertAndNOPs}, 6},
		{"ECN: CWR first, FIN PSH last, ECE and URG everywhere", superSpec{seq: 100, payload: 3 * 1448, mss: 1448, ecn: true,
			flags: wire.TCPFlagCWR | wire.TCPFlagECE | wire.TCPFlagURG | wire.TCPFlagFIN | wire.TCPFlagPSH}, 3},
		{"CWR without the ECN type still only first", superSpec{payload: 3000, mss: 1000, flags: wire.TCPFlagCWR}, 3},
		{"IP ID wraps", superSpec{ipID: 0xfffe, payload: 5 * 536, mss: 536}, 5},
		{"Ethernet padding is not payload", superSpec{payload: 10, mss: 4, pad: 7}, 3},
		{"padding behind a large frame", superSpec{payload: 3000, mss: 1448, pad: 3}, 3},
		{"MSS 1", superSpec{seq: 0xffffffc0, payload: 100, mss: 1, seed: 9}, 100},
		{"MSS larger than any payload", superSpec{payload: max64K, mss: 0xffff}, 1},
		{"no NEEDS_CSUM, stale checksum field", superSpec{payload: 4000, mss: 1448, noCsum: true}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame, h := superFrame(t, tt.spec)
			segs, _ := segmentAll(t, frame, h)
			if len(segs) != tt.segs {
				t.Fatalf("%d segments, want %d", len(segs), tt.segs)
			}
			checkSegments(t, frame, int(tt.spec.mss), segs)
			checkSegmentsWithGopacket(t, frame, int(tt.spec.mss), segs)
		})
	}
}

// checkSegmentsWithGopacket reads the segments with an independent
// decoder, which also verifies both checksums.
func checkSegmentsWithGopacket(t *testing.T, super []byte, mss int, segs [][]byte) {
	t.Helper()
	sp := gopacket.NewPacket(super, layers.LayerTypeEthernet, gopacket.Default)
	sip, stcp := sp.Layer(layers.LayerTypeIPv4).(*layers.IPv4), sp.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if sip == nil || stcp == nil {
		t.Fatalf("gopacket cannot read the super-frame: %v", sp.ErrorLayer())
	}
	for i, seg := range segs {
		p := gopacket.NewPacket(seg, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if ip == nil || tcp == nil {
			t.Fatalf("segment %d: gopacket: %v", i, p.ErrorLayer())
		}
		if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		// gopacket verifies: the sum over the segment, field included.
		if v, err := tcp.ComputeChecksum(); err != nil || v != 0 {
			t.Fatalf("segment %d: gopacket finds the TCP checksum %#04x off (%v)", i, v, err)
		}
		last := i == len(segs)-1
		if tcp.Seq != stcp.Seq+uint32(i*mss) || ip.Id != sip.Id+uint16(i) ||
			tcp.FIN != (stcp.FIN && last) || tcp.PSH != (stcp.PSH && last) || tcp.CWR != (stcp.CWR && i == 0) ||
			tcp.ECE != stcp.ECE || tcp.URG != stcp.URG || tcp.ACK != stcp.ACK || tcp.Ack != stcp.Ack ||
			len(tcp.Options) != len(stcp.Options) || len(ip.Options) != len(sip.Options) {
			t.Fatalf("segment %d: gopacket reads %+v", i, tcp)
		}
	}
}

func TestSegmentTCP4Errors(t *testing.T) {
	good, gh := superFrame(t, superSpec{payload: 3000, mss: 1000})
	udp := udpFrame(t, make([]byte, 3000))
	withFlag := func(f uint8) []byte {
		b, _ := superFrame(t, superSpec{payload: 3000, mss: 1000, flags: f})
		return b
	}
	fragment := append([]byte(nil), good...)
	binary.BigEndian.PutUint16(fragment[20:], 0x2000) // MF
	binary.BigEndian.PutUint16(fragment[24:], naiveIPChecksum(fragment[14:]))
	badIPSum := append([]byte(nil), good...)
	badIPSum[24] ^= 1
	arp := make([]byte, wire.ARPFrameLen)
	wire.EncodeARP(arp, wire.ARPRequest, wire.MAC(macA), ip4(ipA), wire.MAC{}, ip4(ipB), wire.BroadcastMAC)
	withType := func(t uint8) wire.VNetHdr { h := gh; h.GSOType = t; return h }
	withSize := func(s uint16) wire.VNetHdr { h := gh; h.GSOSize = s; return h }
	tests := []struct {
		name  string
		frame []byte
		h     wire.VNetHdr
		err   error
	}{
		{"TCPv6 type", good, withType(wire.GSOTCPv6), wire.ErrGSOType},
		{"UDP type", good, withType(wire.GSOUDP), wire.ErrGSOType},
		{"UDP L4 type with ECN", good, withType(wire.GSOUDPL4 | wire.GSOECN), wire.ErrGSOType},
		{"GSO size 0", good, withSize(0), wire.ErrGSOSize},
		{"UDP packet", udp, gh, wire.ErrGSONotTCP4},
		{"IPv4 fragment", fragment, gh, wire.ErrGSONotTCP4},
		{"ARP", arp, gh, wire.ErrGSONotTCP4},
		{"SYN", withFlag(wire.TCPFlagSYN), gh, wire.ErrGSOFlags},
		{"RST", withFlag(wire.TCPFlagRST), gh, wire.ErrGSOFlags},
		{"truncated", good[:len(good)-1], gh, wire.ErrBadIPLength},
		{"short", good[:30], gh, wire.ErrShortFrame},
		{"bad IPv4 header checksum", badIPSum, gh, wire.ErrBadIPChecksum},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := wire.SegmentTCP4Len(tt.frame, tt.h); !errors.Is(err, tt.err) {
				t.Errorf("SegmentTCP4Len: %v, want %v", err, tt.err)
			}
			prev := [][]byte{{1}}
			segs, err := wire.SegmentTCP4(tt.frame, tt.h, make([]byte, 1<<17), prev)
			if !errors.Is(err, tt.err) || len(segs) != 1 {
				t.Errorf("SegmentTCP4: %v with %d segments, want %v and the one passed in", err, len(segs), tt.err)
			}
		})
	}
}

func TestSegmentTCP4ShortBuffer(t *testing.T) {
	frame, h := superFrame(t, superSpec{payload: 3000, mss: 1000})
	_, size, err := wire.SegmentTCP4Len(frame, h)
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Repeat([]byte{0xa5}, size-1)
	segs, err := wire.SegmentTCP4(frame, h, out, nil)
	if !errors.Is(err, wire.ErrGSOShortBuffer) || len(segs) != 0 {
		t.Fatalf("%d bytes for %d: %v, %d segments", len(out), size, err, len(segs))
	}
	if !bytes.Equal(out, bytes.Repeat([]byte{0xa5}, size-1)) {
		t.Fatal("wrote into a buffer it rejected")
	}
}

// Segments are appended after what segs already holds, and a caller can
// cut several super-frames into one buffer by passing what is left of it.
func TestSegmentTCP4Appends(t *testing.T) {
	a, ha := superFrame(t, superSpec{seq: 1, payload: 2500, mss: 1000})
	b, hb := superFrame(t, superSpec{seq: 2, payload: 1500, mss: 700, seed: 1})
	out := make([]byte, 1<<16)
	segs, err := wire.SegmentTCP4(a, ha, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	used := 0
	for _, s := range segs {
		used += len(s)
	}
	segs, err = wire.SegmentTCP4(b, hb, out[used:], segs)
	if err != nil || len(segs) != 6 {
		t.Fatalf("%v, %d segments", err, len(segs))
	}
	checkSegments(t, a, 1000, segs[:3])
	checkSegments(t, b, 700, segs[3:])
}

// A frame that is not a super-frame comes back as itself, its checksum
// completed in place when it was left to the device.
func TestSegmentTCP4PassesOrdinaryFrames(t *testing.T) {
	frame, h := superFrame(t, superSpec{payload: 1000, mss: 1448, pad: 4})
	h.GSOType, h.GSOSize = wire.GSONone, 0
	segs, err := wire.SegmentTCP4(frame, h, nil, nil)
	if err != nil || len(segs) != 1 || &segs[0][0] != &frame[0] || len(segs[0]) != len(frame) {
		t.Fatalf("%v, %d segments", err, len(segs))
	}
	if c, w := binary.BigEndian.Uint16(frame[50:]), naiveTCPChecksum(frame[14:]); c != w {
		t.Fatalf("checksum %#04x, full %#04x", c, w)
	}

	plain := fullSizeFrame(t)
	orig := append([]byte(nil), plain...)
	segs, err = wire.SegmentTCP4(plain, wire.VNetHdr{}, nil, nil)
	if err != nil || len(segs) != 1 || &segs[0][0] != &plain[0] || !bytes.Equal(plain, orig) {
		t.Fatalf("plain frame: %v, %d segments, changed %v", err, len(segs), !bytes.Equal(plain, orig))
	}

	bad := wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: 34, CsumOffset: 1500}
	segs, err = wire.SegmentTCP4(plain, bad, nil, nil)
	if !errors.Is(err, wire.ErrCsumBounds) || len(segs) != 0 {
		t.Fatalf("checksum outside the frame: %v, %d segments", err, len(segs))
	}
}

// udpFrame is a gopacket-built Ethernet/IPv4/UDP frame.
func udpFrame(tb testing.TB, payload []byte) []byte {
	tb.Helper()
	ip := ipLayer(layers.IPProtocolUDP)
	udp := &layers.UDP{SrcPort: 53, DstPort: 5353}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		tb.Fatal(err)
	}
	return serialize(tb, ethLayer(layers.EthernetTypeIPv4), ip, udp, gopacket.Payload(payload))
}

// deviceChecksum is what a device stores for a NEEDS_CSUM frame, computed
// the slow way on a copy: the complemented sum from start to end, field
// included as it is.
func deviceChecksum(frame []byte, start, end int) uint16 {
	return ^naiveSum(frame[start:end])
}

func TestCompleteChecksumOfLinuxPartial(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for i := range 3000 {
		frame := randomTCPFrame(t, r, 1500)
		p := mustParse(t, frame)
		want := naiveTCPChecksum(p.IP)
		if i%5 == 0 {
			forceTCPChecksum(p, false) // a segment whose checksum is 0x0000
			want = 0
		}
		setPartial(frame, p.L4, len(p.TCP))
		frame = append(frame, randomBytes(r, r.IntN(3)*r.IntN(30))...) // sometimes padded
		h := wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: uint16(p.L4), CsumOffset: 16}
		if err := wire.CompleteChecksum(frame, h); err != nil {
			t.Fatal(err)
		}
		if got := binary.BigEndian.Uint16(frame[p.L4+16:]); got != want {
			t.Fatalf("completed %#04x, full computation %#04x", got, want)
		}
	}
}

// UDP reads a zero checksum as "none": a device stores 0xffff instead.
func TestCompleteChecksumUDPZero(t *testing.T) {
	payload := []byte("sixteen bytes ..")
	frame := udpFrame(t, payload) // padded to 60 bytes
	ip := frame[14 : 14+binary.BigEndian.Uint16(frame[16:])]
	udp := ip[20:]
	// Add the checksum into the last payload word: the sum becomes all
	// ones and the computed checksum zero.
	c := binary.BigEndian.Uint16(udp[6:])
	w := uint32(binary.BigEndian.Uint16(udp[len(udp)-2:])) + uint32(c)
	binary.BigEndian.PutUint16(udp[len(udp)-2:], uint16(w+w>>16))
	src, dst := wire.IP4(ip[12:16]), wire.IP4(ip[16:20])
	binary.BigEndian.PutUint16(udp[6:], wire.Fold(wire.PseudoHeaderSum(src, dst, wire.ProtoUDP, uint16(len(udp)))))
	h := wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: 34, CsumOffset: 6}
	if err := wire.CompleteChecksum(frame, h); err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint16(udp[6:]); got != 0xffff {
		t.Fatalf("stored %#04x, want 0xffff", got)
	}
	if naiveSum(append(append(append([]byte(nil), ip[12:20]...), 0, wire.ProtoUDP, 0, byte(len(udp))), udp...)) != 0xffff {
		t.Fatal("the receiver's sum over the completed datagram is not all ones")
	}
}

// Frames other than IPv4 (here an IPv6-shaped one) are summed to their end.
func TestCompleteChecksumNonIPv4(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for range 200 {
		frame := randomBytes(r, 54+8+r.IntN(200))
		binary.BigEndian.PutUint16(frame[12:], 0x86dd)
		orig := append([]byte(nil), frame...)
		h := wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: 54, CsumOffset: 6}
		if err := wire.CompleteChecksum(frame, h); err != nil {
			t.Fatal(err)
		}
		want := deviceChecksum(orig, 54, len(orig))
		if want == 0 {
			want = 0xffff
		}
		if got := binary.BigEndian.Uint16(frame[60:]); got != want {
			t.Fatalf("stored %#04x, want %#04x", got, want)
		}
		if !bytes.Equal(frame[:60], orig[:60]) || !bytes.Equal(frame[62:], orig[62:]) {
			t.Fatal("changed bytes besides the checksum field")
		}
	}
}

func TestCompleteChecksumErrors(t *testing.T) {
	frame, _ := superFrame(t, superSpec{payload: 100, pad: 10})
	end := len(frame) - 10
	csum := func(start, off uint16) wire.VNetHdr {
		return wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: start, CsumOffset: off}
	}
	badVersion := append([]byte(nil), frame...)
	badVersion[14] = 0x65
	tooLong := append([]byte(nil), frame...)
	binary.BigEndian.PutUint16(tooLong[16:], uint16(len(frame)-13))
	badIHL := append([]byte(nil), frame...)
	badIHL[14] = 0x44
	tests := []struct {
		name  string
		frame []byte
		h     wire.VNetHdr
		err   error
	}{
		{"field ends at the packet's end", frame, csum(uint16(end-2), 0), nil},
		{"field in the padding", frame, csum(uint16(end-1), 0), wire.ErrCsumBounds},
		{"offset beyond the end", frame, csum(34, uint16(end-34)), wire.ErrCsumBounds},
		{"largest start and offset", frame, csum(0xffff, 0xffff), wire.ErrCsumBounds},
		{"super-frame", frame, wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, GSOType: wire.GSOTCPv4, GSOSize: 10, CsumStart: 34, CsumOffset: 16}, wire.ErrCsumOnGSO},
		{"no NEEDS_CSUM: bounds not even read", frame, wire.VNetHdr{CsumStart: 0xffff, CsumOffset: 0xffff}, nil},
		{"IPv4 version 6", badVersion, csum(34, 16), wire.ErrBadIPVersion},
		{"total length beyond the frame", tooLong, csum(34, 16), wire.ErrBadIPLength},
		{"IPv4 header length 16", badIHL, csum(34, 16), wire.ErrBadIPLength},
		{"short IPv4", frame[:33], csum(14, 0), wire.ErrShortFrame},
		{"empty", nil, csum(0, 0), wire.ErrCsumBounds},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := append([]byte(nil), tt.frame...)
			err := wire.CompleteChecksum(b, tt.h)
			if !errors.Is(err, tt.err) {
				t.Fatalf("%v, want %v", err, tt.err)
			}
			if err != nil && !bytes.Equal(b, tt.frame) {
				t.Fatal("changed the frame and failed")
			}
		})
	}
}

// The shim's property: on a NEEDS_CSUM frame, rewriting the addresses
// (IPv4.SetSrc/SetDst) and the partial field with AdjustPartialChecksum,
// then letting the device complete it, gives exactly the checksum a full
// computation over the rewritten frame gives, including where the sums
// wrap around.
func TestAdjustPartialThenCompleteEqualsFullChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	// Partial values where the one's-complement sum wraps.
	targets := []uint16{0xffff, 0xfffe, 0x0001, 0x8000, 0x7fff}
	zeros := 0
	for i := range 20000 {
		frame := randomTCPFrame(t, r, 200)
		p := mustParse(t, frame)
		var newSrc, newDst wire.IP4
		binary.BigEndian.PutUint32(newSrc[:], randSpecial32(r))
		binary.BigEndian.PutUint32(newDst[:], randSpecial32(r))
		if i%2 == 0 {
			target := targets[r.IntN(len(targets))]
			tunePartial(t, &newDst, newSrc, uint16(len(p.TCP)), target)
		}
		if i%7 == 0 {
			// Make the full checksum of the rewritten segment 0x0000.
			c := append([]byte(nil), frame...)
			cp := mustParse(t, c)
			cp.IP.SetSrc(newSrc)
			cp.IP.SetDst(newDst)
			forceTCPChecksum(cp, false)
			copy(p.TCP[18:20], cp.TCP[18:20])
		}
		setPartial(frame, p.L4, len(p.TCP))

		oldSrc, oldDst := p.IP.Src(), p.IP.Dst()
		p.IP.SetSrc(newSrc)
		p.IP.SetDst(newDst)
		partial := p.TCP.Checksum()
		partial = wire.AdjustPartialChecksum(partial, binary.BigEndian.Uint32(oldSrc[:]), binary.BigEndian.Uint32(newSrc[:]))
		partial = wire.AdjustPartialChecksum(partial, binary.BigEndian.Uint32(oldDst[:]), binary.BigEndian.Uint32(newDst[:]))
		p.TCP.SetChecksum(partial)
		if rebuilt := wire.Fold(wire.PseudoHeaderSum(newSrc, newDst, wire.ProtoTCP, uint16(len(p.TCP)))); partial != rebuilt {
			t.Fatalf("adjusted partial %#04x, rebuilt %#04x", partial, rebuilt)
		}
		h := wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: uint16(p.L4), CsumOffset: 16}
		if err := wire.CompleteChecksum(frame, h); err != nil {
			t.Fatal(err)
		}
		got, want := p.TCP.Checksum(), naiveTCPChecksum(p.IP)
		if got != want {
			t.Fatalf("%v>%v -> %v>%v: completed %#04x, full %#04x", oldSrc, oldDst, newSrc, newDst, got, want)
		}
		if want == 0 {
			zeros++
		}
		if got, want := p.IP.Checksum(), naiveIPChecksum(p.IP); got != want {
			t.Fatalf("IP checksum %#04x, full %#04x", got, want)
		}
	}
	if zeros < 20000/7 {
		t.Errorf("only %d rewritten segments had the checksum 0x0000", zeros)
	}
}

// tunePartial sets the low half of dst so that the folded pseudo-header
// sum of src, dst and length is target.
func tunePartial(tb testing.TB, dst *wire.IP4, src wire.IP4, length, target uint16) {
	tb.Helper()
	dst[2], dst[3] = 0, 0
	rest := wire.Fold(wire.PseudoHeaderSum(src, *dst, wire.ProtoTCP, length))
	x := wire.Fold(uint32(target) + uint32(^rest)) // target - rest
	binary.BigEndian.PutUint16(dst[2:], x)
	if got := wire.Fold(wire.PseudoHeaderSum(src, *dst, wire.ProtoTCP, length)); got != target {
		tb.Fatalf("tuned partial %#04x, want %#04x", got, target)
	}
}

func TestSegmentTCP4AllocatesNothing(t *testing.T) {
	frame, h := superFrame(t, superSpec{seq: 0xfffff000, payload: 45 * 1448, mss: 1448, flags: wire.TCPFlagPSH})
	n, size, err := wire.SegmentTCP4Len(frame, h)
	if err != nil || n != 45 {
		t.Fatalf("%d segments, %v", n, err)
	}
	out := make([]byte, size)
	segs := make([][]byte, 0, n)
	runs := 0
	allocs := testing.AllocsPerRun(100, func() {
		segs, err = wire.SegmentTCP4(frame, h, out, segs[:0])
		if err != nil {
			t.Fatal(err)
		}
		runs += len(segs)
	})
	if allocs != 0 {
		t.Errorf("SegmentTCP4 allocates %.1f times per super-frame", allocs)
	}
	// The work was real: every run cut 45 segments, and the last are right.
	if runs != 101*45 {
		t.Errorf("%d segments over 101 runs", runs)
	}
	checkSegments(t, frame, 1448, segs)
}

func TestCompleteChecksumAllocatesNothing(t *testing.T) {
	frame := fullSizeFrame(t)
	p := mustParse(t, frame)
	want := naiveTCPChecksum(p.IP)
	h := wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: uint16(p.L4), CsumOffset: 16}
	completed := 0
	allocs := testing.AllocsPerRun(1000, func() {
		setPartial(frame, p.L4, len(p.TCP))
		if err := wire.CompleteChecksum(frame, h); err != nil {
			t.Fatal(err)
		}
		if p.TCP.Checksum() == want {
			completed++
		}
	})
	if allocs != 0 {
		t.Errorf("CompleteChecksum allocates %.1f times per frame", allocs)
	}
	if completed != 1001 {
		t.Errorf("completed the checksum right %d times of 1001", completed)
	}
}

func BenchmarkSegmentTCP4(b *testing.B) {
	frame, h := superFrame(b, superSpec{seq: 0xffff0000, payload: 45 * 1448, mss: 1448, flags: wire.TCPFlagPSH})
	n, size, err := wire.SegmentTCP4Len(frame, h)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]byte, size)
	segs := make([][]byte, 0, n)
	b.ReportAllocs()
	b.SetBytes(45 * 1448)
	for b.Loop() {
		if segs, err = wire.SegmentTCP4(frame, h, out, segs[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompleteChecksum(b *testing.B) {
	frame := fullSizeFrame(b)
	p := mustParse(b, frame)
	h := wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: uint16(p.L4), CsumOffset: 16}
	b.ReportAllocs()
	b.SetBytes(int64(len(p.TCP)))
	for b.Loop() {
		// Completing an already completed field is the same work.
		if err := wire.CompleteChecksum(frame, h); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzSegmentTCP4 feeds any bytes with any header. SegmentTCP4 must never
// panic, must fail with one of its errors, and when it succeeds the
// segments must be exactly what checkSegments expects; a frame that is
// not a super-frame must come back as itself with the checksum a device
// would have stored.
func FuzzSegmentTCP4(f *testing.F) {
	add := func(s superSpec) {
		frame, h := superFrame(f, s)
		f.Add(frame, h.Flags, h.GSOType, h.GSOSize, h.CsumStart, h.CsumOffset, false)
	}
	add(superSpec{seq: 0xfffffff0, payload: 300, mss: 100, flags: wire.TCPFlagPSH | wire.TCPFlagFIN})
	add(superSpec{payload: 50, mss: 7, ipOpts: []byte{1, 1, 1, 0}, pad: 5, ecn: true, flags: wire.TCPFlagCWR})
	add(superSpec{payload: 0, mss: 1})
	frame, _ := superFrame(f, superSpec{payload: 40, pad: 6})
	f.Add(frame, uint8(wire.VNetFlagNeedsCsum), uint8(0), uint16(0), uint16(34), uint16(16), false)
	udp := udpFrame(f, []byte("datagram"))
	f.Add(udp, uint8(wire.VNetFlagNeedsCsum), uint8(0), uint16(0), uint16(34), uint16(6), false)
	f.Add([]byte{}, uint8(1), uint8(1), uint16(1), uint16(0), uint16(0), true)
	f.Fuzz(func(t *testing.T, frame []byte, flags, gsoType uint8, gsoSize, csumStart, csumOffset uint16, fixIP bool) {
		// Random mutations almost never keep the IPv4 header consistent;
		// repairing length and checksum lets the fuzzer past Parse.
		if fixIP && len(frame) >= 34 && frame[14]&0xf >= 5 && int(frame[14]&0xf)*4 <= len(frame)-14 {
			ip := frame[14:]
			if tl := int(binary.BigEndian.Uint16(ip[2:])); tl > len(ip) || tl < int(ip[0]&0xf)*4 {
				binary.BigEndian.PutUint16(ip[2:], uint16(min(len(ip), 65535)))
			}
			binary.BigEndian.PutUint16(ip[10:], naiveIPChecksum(ip))
		}
		h := wire.VNetHdr{Flags: flags, GSOType: gsoType, HdrLen: 0xbeef, GSOSize: gsoSize, CsumStart: csumStart, CsumOffset: csumOffset}
		orig := append([]byte(nil), frame...)
		n, size, lenErr := wire.SegmentTCP4Len(frame, h)
		var out []byte
		if lenErr == nil {
			out = make([]byte, size)
		}
		segs, err := wire.SegmentTCP4(frame, h, out, nil)
		if h.IsGSO() {
			if !errors.Is(err, lenErr) {
				t.Fatalf("SegmentTCP4: %v, SegmentTCP4Len: %v", err, lenErr)
			}
			if err != nil {
				if !oneOf(err, wire.ErrGSOType, wire.ErrGSOSize, wire.ErrGSONotTCP4, wire.ErrGSOFlags, wire.ErrShortFrame,
					wire.ErrBadIPVersion, wire.ErrBadIPHeader, wire.ErrBadIPLength, wire.ErrBadIPChecksum, wire.ErrBadTCPHeader) {
					t.Fatalf("unexpected error %v", err)
				}
				if len(segs) != 0 {
					t.Fatalf("%d segments and %v", len(segs), err)
				}
				return
			}
			if !bytes.Equal(frame, orig) {
				t.Fatal("SegmentTCP4 modified the super-frame")
			}
			if len(segs) != n {
				t.Fatalf("%d segments, SegmentTCP4Len said %d", len(segs), n)
			}
			checkSegments(t, frame, int(gsoSize), segs)
			return
		}
		if lenErr != nil || n != 1 || size != 0 {
			t.Fatalf("SegmentTCP4Len of an ordinary frame: %d, %d, %v", n, size, lenErr)
		}
		if err != nil {
			if !oneOf(err, wire.ErrCsumBounds, wire.ErrShortFrame, wire.ErrBadIPVersion, wire.ErrBadIPLength) {
				t.Fatalf("unexpected error %v", err)
			}
			if !bytes.Equal(frame, orig) {
				t.Fatal("changed the frame and failed")
			}
			return
		}
		if len(segs) != 1 || len(segs[0]) != len(frame) || len(frame) > 0 && &segs[0][0] != &frame[0] {
			t.Fatal("an ordinary frame did not come back as itself")
		}
		if !h.NeedsCsum() {
			if !bytes.Equal(frame, orig) {
				t.Fatal("changed a frame without NEEDS_CSUM")
			}
			return
		}
		// What a device stores, from the original bytes: the end of the
		// IPv4 packet, or of the frame for anything else.
		end, tcp := len(orig), false
		if len(orig) >= 34 && binary.BigEndian.Uint16(orig[12:]) == wire.EtherTypeIPv4 {
			end, tcp = 14+int(binary.BigEndian.Uint16(orig[16:])), orig[23] == wire.ProtoTCP
		}
		field := int(csumStart) + int(csumOffset)
		want := deviceChecksum(orig, int(csumStart), end)
		if want == 0 && !tcp {
			want = 0xffff
		}
		if got := binary.BigEndian.Uint16(frame[field:]); got != want {
			t.Fatalf("stored %#04x, device would store %#04x", got, want)
		}
		if !bytes.Equal(frame[:field], orig[:field]) || !bytes.Equal(frame[field+2:], orig[field+2:]) {
			t.Fatal("changed bytes besides the checksum field")
		}
	})
}

func oneOf(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
