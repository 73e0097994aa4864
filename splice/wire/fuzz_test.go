package wire_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

func FuzzParse(f *testing.F) {
	f.Add(randomTCPFrame(f, rand.New(rand.NewPCG(1, 1)), 16), false)
	f.Add(refTCPFrame(f, &layers.TCP{SrcPort: 1, DstPort: 2, SYN: true}, nil), true)
	f.Add(serialize(f, ethLayer(layers.EthernetTypeIPv4), ipLayer(layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 4)}, gopacket.Payload(make([]byte, 28))), false)
	arp := make([]byte, wire.ARPFrameLen)
	wire.EncodeARP(arp, wire.ARPRequest, wire.MAC(macA), ip4(ipA), wire.MAC{}, ip4(ipB), wire.BroadcastMAC)
	f.Add(arp, false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, frame []byte, fixIPChecksum bool) {
		// Random mutations almost never keep the IPv4 checksum right;
		// repairing it lets the fuzzer reach the code behind that check.
		if fixIPChecksum && len(frame) >= 34 && frame[14]&0xf >= 5 && int(frame[14]&0xf)*4 <= len(frame)-14 {
			ip := frame[14:]
			binary.BigEndian.PutUint16(ip[10:], naiveIPChecksum(ip))
		}
		var p wire.Packet
		if err := wire.Parse(frame, &p); err != nil {
			return
		}
		if len(p.Eth) != len(frame) || p.End > len(frame) || p.End < wire.EthernetHeaderLen {
			t.Fatalf("Eth %d End %d frame %d", len(p.Eth), p.End, len(frame))
		}
		switch p.Kind {
		case wire.KindOther:
			return
		case wire.KindARP:
			if len(p.ARP) != wire.ARPLen || p.L3 != wire.EthernetHeaderLen || &p.ARP[0] != &frame[p.L3] {
				t.Fatalf("ARP view %d bytes at L3 %d", len(p.ARP), p.L3)
			}
			_ = p.ARP.TargetIP()
			return
		}
		ip := p.IP
		hl := ip.HeaderLen()
		if p.L3 != wire.EthernetHeaderLen || &ip[0] != &frame[p.L3] || p.L3+len(ip) != p.End || ip.TotalLen() != len(ip) {
			t.Fatalf("IP view: L3 %d len %d End %d TotalLen %d", p.L3, len(ip), p.End, ip.TotalLen())
		}
		if hl < wire.IPv4MinHeaderLen || p.L4 != p.L3+hl || p.L4 > p.End {
			t.Fatalf("IP header %d, L4 %d, End %d", hl, p.L4, p.End)
		}
		if naiveSum(ip[:hl]) != 0xffff {
			t.Fatal("accepted a bad IPv4 header checksum")
		}
		if p.Kind == wire.KindICMP && p.End-p.L4 < 8 {
			t.Fatalf("ICMP with %d bytes", p.End-p.L4)
		}
		if p.Kind != wire.KindTCP {
			if p.TCP != nil {
				t.Fatal("TCP view on a non-TCP packet")
			}
			return
		}
		seg := p.TCP
		if &seg[0] != &frame[p.L4] || p.L4+len(seg) != p.End || seg.HeaderLen() < wire.TCPMinHeaderLen || seg.HeaderLen() > len(seg) {
			t.Fatalf("TCP view: %d bytes, header %d", len(seg), seg.HeaderLen())
		}
		_, _ = seg.Options(), seg.Payload()
		var o wire.TCPOptions
		if wire.ParseOptions(seg, &o) == nil {
			checkParsedOptions(t, seg, &o)
		}
		if hl == wire.IPv4MinHeaderLen {
			var gip layers.IPv4
			var gtcp layers.TCP
			if err := gip.DecodeFromBytes(ip, gopacket.NilDecodeFeedback); err != nil {
				t.Fatalf("gopacket rejects the IPv4 header Parse accepted: %v", err)
			}
			if err := gtcp.DecodeFromBytes(gip.Payload, gopacket.NilDecodeFeedback); err != nil {
				t.Fatalf("gopacket rejects the TCP header Parse accepted: %v", err)
			}
			if uint32(seg.Seq()) != gtcp.Seq || uint32(seg.Ack()) != gtcp.Ack || int(gtcp.DataOffset)*4 != seg.HeaderLen() ||
				len(gtcp.Payload) != len(seg.Payload()) {
				t.Fatalf("gopacket disagrees: %+v", gtcp)
			}
		}
	})
}

// checkParsedOptions holds the invariants of a successful ParseOptions:
// offsets inside the header, values readable there, limits respected.
func checkParsedOptions(t *testing.T, seg wire.TCP, o *wire.TCPOptions) {
	t.Helper()
	hl := seg.HeaderLen()
	if o.HasTS != (o.TSOffset != 0) || o.HasTS && (o.TSOffset < wire.TCPMinHeaderLen+2 || o.TSOffset+8 > hl) {
		t.Fatalf("TS offset %d in a %d-byte header", o.TSOffset, hl)
	}
	if (o.NumSACK > 0) != (o.SACKOffset != 0) || o.NumSACK > wire.MaxSACKBlocks ||
		o.NumSACK > 0 && (o.SACKOffset < wire.TCPMinHeaderLen+2 || o.SACKOffset+8*o.NumSACK > hl) {
		t.Fatalf("%d SACK blocks at offset %d in a %d-byte header", o.NumSACK, o.SACKOffset, hl)
	}
	if o.WScale > wire.MaxWScale || !o.HasWScale && o.WScale != 0 || !o.HasMSS && o.MSS != 0 {
		t.Fatalf("options %+v", o)
	}
	checkOptionOffsets(t, seg, o)
}

func FuzzParseOptions(f *testing.F) {
	f.Add([]byte{2, 4, 5, 0xb4, 4, 2, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8, 1, 3, 3, 7})
	f.Add([]byte{1, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2})
	f.Add([]byte{1, 1, 5, 34, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 7, 0, 0, 0, 8})
	f.Add([]byte{253, 4, 0, 0, 30, 3, 0, 0, 3, 3, 200})
	f.Add([]byte{8, 10, 1, 2, 3, 4, 5, 6, 7, 8, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, opts []byte) {
		opts = append([]byte(nil), opts[:min(len(opts), 40)]...)
		for len(opts)%4 != 0 {
			opts = append(opts, wire.OptEOL)
		}
		p := segment(t, opts)
		var o wire.TCPOptions
		err := wire.ParseOptions(p.TCP, &o)
		if err != nil {
			if !errors.Is(err, wire.ErrOptionLength) && !errors.Is(err, wire.ErrOptionDuplicate) && !errors.Is(err, wire.ErrOptionMalformed) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		checkParsedOptions(t, p.TCP, &o)
		var g layers.TCP
		if err := g.DecodeFromBytes(p.TCP, gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("gopacket: %v", err)
		}
		// gopacket checks MPTCP subtype lengths and stops reading options at
		// one it dislikes (keeping the rest as Padding); we skip MPTCP.
		if n := len(g.Options); len(g.Padding) > 0 && (n == 0 || g.Options[n-1].OptionType != layers.TCPOptionKindEndList) {
			return
		}
		compareWithGopacketOptions(t, &o, g.Options)
	})
}

// FuzzChecksumUpdate rewrites one field of a segment built around the fuzzed
// payload and requires the incremental checksum to equal a full
// recomputation.
func FuzzChecksumUpdate(f *testing.F) {
	f.Add([]byte("hello"), uint8(2|16), uint16(0), uint32(0), true) // seq 0xffffffff->0 over a stored 0xffff
	f.Add([]byte{0xff, 0xff, 0xff}, uint8(13), uint16(3), uint32(0xffffffff), false)
	f.Add(make([]byte, 64), uint8(5), uint16(40), uint32(1), true)
	f.Fuzz(func(t *testing.T, payload []byte, field uint8, off uint16, v uint32, negZero bool) {
		if len(payload) > 1460 {
			payload = payload[:1460]
		}
		opts := []byte{1, 1, 8, 10, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
		if field&8 != 0 {
			opts = []byte{1, 8, 10, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1} // TS at an odd offset
		}
		fr := wire.TCPFrame{Src: wire.IP4{198, 18, 0, 1}, Dst: wire.IP4{198, 19, 0, 2}, SrcPort: 80, DstPort: 40000,
			Seq: 0xffffffff, Ack: 0xfffffffe, Flags: wire.TCPFlagACK, Window: 0xffff, Options: opts, Payload: payload}
		frame := make([]byte, fr.Len())
		fr.Encode(frame)
		p := mustParse(t, frame)
		if field&16 != 0 {
			forceTCPChecksum(p, negZero)
		}
		var o wire.TCPOptions
		if err := wire.ParseOptions(p.TCP, &o); err != nil {
			t.Fatal(err)
		}
		seg := p.TCP
		switch field % 8 {
		case 0:
			seg.SetSrcPortUpdate(uint16(v))
		case 1:
			seg.SetDstPortUpdate(uint16(v))
		case 2:
			seg.SetSeqUpdate(wire.Seq(v))
		case 3:
			seg.SetAckUpdate(wire.Seq(v))
		case 4:
			seg.SetWindowUpdate(uint16(v))
		case 5:
			seg.SetUint32AtUpdate(o.TSOffset, v)
		case 6: // any 4 bytes of the segment that do not cover the checksum
			at := int(off) % (len(seg) - 3)
			if at+4 > 16 && at < 18 {
				at = 18
			}
			seg.SetUint32AtUpdate(at, v)
		case 7:
			var dst wire.IP4
			binary.BigEndian.PutUint32(dst[:], v)
			old := p.IP.Dst()
			p.IP.SetDst(dst)
			seg.UpdateAddrs(p.IP.Src(), old, p.IP.Src(), dst)
			if got, want := p.IP.Checksum(), naiveIPChecksum(p.IP); got != want {
				t.Fatalf("IP checksum %#04x, full %#04x", got, want)
			}
		}
		if got, want := seg.Checksum(), naiveTCPChecksum(p.IP); got != want {
			t.Fatalf("field %d: TCP checksum %#04x, full %#04x", field%8, got, want)
		}
	})
}
