package wire_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

// gopacketDecoded holds what gopacket's DecodingLayerParser found.
type gopacketDecoded struct {
	eth     layers.Ethernet
	arp     layers.ARP
	ip      layers.IPv4
	tcp     layers.TCP
	icmp    layers.ICMPv4
	payload gopacket.Payload
	types   []gopacket.LayerType
}

func gopacketDecode(tb testing.TB, frame []byte) *gopacketDecoded {
	tb.Helper()
	d := &gopacketDecoded{}
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &d.eth, &d.arp, &d.ip, &d.tcp, &d.icmp, &d.payload)
	parser.IgnoreUnsupported = true
	if err := parser.DecodeLayers(frame, &d.types); err != nil {
		tb.Fatalf("gopacket: %v", err)
	}
	return d
}

func (d *gopacketDecoded) has(t gopacket.LayerType) bool {
	for _, x := range d.types {
		if x == t {
			return true
		}
	}
	return false
}

// checkAgainstGopacket compares every field the views expose with
// gopacket's decoding of the same frame.
func checkAgainstGopacket(t *testing.T, frame []byte, p *wire.Packet) {
	t.Helper()
	d := gopacketDecode(t, frame)
	if got, want := p.Eth.Dst().String(), d.eth.DstMAC.String(); got != want {
		t.Errorf("Eth.Dst %s, gopacket %s", got, want)
	}
	if got, want := p.Eth.Src().String(), d.eth.SrcMAC.String(); got != want {
		t.Errorf("Eth.Src %s, gopacket %s", got, want)
	}
	if p.Eth.EtherType() != uint16(d.eth.EthernetType) {
		t.Errorf("EtherType %#x, gopacket %#x", p.Eth.EtherType(), d.eth.EthernetType)
	}
	if p.Kind == wire.KindARP {
		a := p.ARP
		if !d.has(layers.LayerTypeARP) {
			t.Fatal("gopacket saw no ARP")
		}
		if a.Op() != d.arp.Operation || a.SenderMAC().String() != net.HardwareAddr(d.arp.SourceHwAddress).String() ||
			a.TargetMAC().String() != net.HardwareAddr(d.arp.DstHwAddress).String() ||
			a.SenderIP().String() != net.IP(d.arp.SourceProtAddress).String() ||
			a.TargetIP().String() != net.IP(d.arp.DstProtAddress).String() {
			t.Errorf("ARP view %d %s %s %s %s disagrees with gopacket %+v", a.Op(), a.SenderMAC(), a.SenderIP(), a.TargetMAC(), a.TargetIP(), d.arp)
		}
		return
	}
	if p.IP == nil {
		return
	}
	if !d.has(layers.LayerTypeIPv4) {
		t.Fatal("gopacket saw no IPv4")
	}
	ip := p.IP
	if ip.HeaderLen() != int(d.ip.IHL)*4 || ip.TotalLen() != int(d.ip.Length) || ip.ID() != d.ip.Id ||
		ip.TTL() != d.ip.TTL || ip.Protocol() != uint8(d.ip.Protocol) || ip.Checksum() != d.ip.Checksum ||
		ip.Src().String() != d.ip.SrcIP.String() || ip.Dst().String() != d.ip.DstIP.String() {
		t.Errorf("IPv4 view disagrees with gopacket %+v", d.ip)
	}
	if got, want := ip.IsFragment(), d.ip.Flags&layers.IPv4MoreFragments != 0 || d.ip.FragOffset != 0; got != want {
		t.Errorf("IsFragment %v, gopacket %v", got, want)
	}
	if _, res := d.ip.VerifyChecksum(); !res.Valid {
		t.Errorf("gopacket finds the IPv4 checksum invalid: %+v", res)
	}
	if len(ip) != len(d.ip.Contents)+len(d.ip.Payload) {
		t.Errorf("IPv4 view is %d bytes, gopacket's packet %d", len(ip), len(d.ip.Contents)+len(d.ip.Payload))
	}
	if p.Kind != wire.KindTCP {
		return
	}
	if !d.has(layers.LayerTypeTCP) {
		t.Fatal("gopacket saw no TCP")
	}
	tc := p.TCP
	g := &d.tcp
	if tc.SrcPort() != uint16(g.SrcPort) || tc.DstPort() != uint16(g.DstPort) || uint32(tc.Seq()) != g.Seq ||
		uint32(tc.Ack()) != g.Ack || tc.HeaderLen() != int(g.DataOffset)*4 || tc.Window() != g.Window ||
		tc.Checksum() != g.Checksum {
		t.Errorf("TCP view disagrees with gopacket %+v", g)
	}
	flags := []struct {
		bit uint8
		set bool
	}{{wire.TCPFlagFIN, g.FIN}, {wire.TCPFlagSYN, g.SYN}, {wire.TCPFlagRST, g.RST}, {wire.TCPFlagPSH, g.PSH},
		{wire.TCPFlagACK, g.ACK}, {wire.TCPFlagURG, g.URG}, {wire.TCPFlagECE, g.ECE}, {wire.TCPFlagCWR, g.CWR}}
	for _, f := range flags {
		if tc.Has(f.bit) != f.set {
			t.Errorf("flag %#x: view %v, gopacket %v", f.bit, tc.Has(f.bit), f.set)
		}
	}
	if string(tc.Payload()) != string(g.Payload) {
		t.Errorf("TCP payload %d bytes, gopacket %d", len(tc.Payload()), len(g.Payload))
	}
	if string(tc.Options()) != string(g.Contents[wire.TCPMinHeaderLen:]) {
		t.Errorf("TCP options % x, gopacket % x", tc.Options(), g.Contents[wire.TCPMinHeaderLen:])
	}
	if err := g.SetNetworkLayerForChecksum(&d.ip); err != nil {
		t.Fatal(err)
	}
	if _, res := g.VerifyChecksum(); !res.Valid {
		t.Errorf("gopacket finds the TCP checksum invalid: %+v", res)
	}
}

func TestParseValidFrames(t *testing.T) {
	payload := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	fragIP := ipLayer(layers.IPProtocolTCP)
	fragIP.Flags = layers.IPv4MoreFragments
	laterFrag := ipLayer(layers.IPProtocolTCP)
	laterFrag.FragOffset = 185
	ipOpts := ipLayer(layers.IPProtocolTCP)
	ipOpts.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
	udp := &layers.UDP{SrcPort: 53, DstPort: 53}
	udpIP := ipLayer(layers.IPProtocolUDP)
	if err := udp.SetNetworkLayerForChecksum(udpIP); err != nil {
		t.Fatal(err)
	}
	tcp := func() *layers.TCP {
		return &layers.TCP{SrcPort: 40000, DstPort: 80, Seq: 0xfffffff0, Ack: 7, PSH: true, ACK: true, Window: 502,
			Options: []layers.TCPOption{{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop},
				{OptionType: layers.TCPOptionKindTimestamps, OptionData: []byte{1, 2, 3, 4, 5, 6, 7, 8}}}}
	}
	tests := []struct {
		name     string
		frame    []byte
		kind     wire.Kind
		l4, end  int
		tcpHdr   int
		tcpBytes int
	}{
		{"arp", serialize(t, ethLayer(layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
			HwAddressSize: 6, ProtAddressSize: 4, Operation: 1, SourceHwAddress: macA, SourceProtAddress: ipA,
			DstHwAddress: make([]byte, 6), DstProtAddress: ipB}), wire.KindARP, 0, 60, 0, 0},
		{"tcp", refTCPFrame(t, tcp(), payload), wire.KindTCP, 34, 34 + 32 + len(payload), 32, 32 + len(payload)},
		{"tcp ip options", serialize(t, ethLayer(layers.EthernetTypeIPv4), ipOpts, tcp(), gopacket.Payload(payload)),
			wire.KindTCP, 38, 38 + 32 + len(payload), 32, 32 + len(payload)},
		{"icmp", serialize(t, ethLayer(layers.EthernetTypeIPv4), ipLayer(layers.IPProtocolICMPv4),
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 4)}, gopacket.Payload(make([]byte, 28))),
			wire.KindICMP, 34, 34 + 8 + 28, 0, 0},
		{"first fragment", serialize(t, ethLayer(layers.EthernetTypeIPv4), fragIP, gopacket.Payload(make([]byte, 40))),
			wire.KindFragment, 34, 74, 0, 0},
		{"later fragment", serialize(t, ethLayer(layers.EthernetTypeIPv4), laterFrag, gopacket.Payload(make([]byte, 8))),
			wire.KindFragment, 34, 42, 0, 0},
		{"udp", serialize(t, ethLayer(layers.EthernetTypeIPv4), udpIP, udp, gopacket.Payload(make([]byte, 30))),
			wire.KindIPv4, 34, 34 + 8 + 30, 0, 0},
		{"ipv6", serialize(t, ethLayer(layers.EthernetTypeIPv6), gopacket.Payload(make([]byte, 60))), wire.KindOther, 0, 74, 0, 0},
		{"vlan", serialize(t, ethLayer(layers.EthernetTypeDot1Q), gopacket.Payload(make([]byte, 60))), wire.KindOther, 0, 74, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustParse(t, tc.frame)
			if p.Kind != tc.kind || p.End != tc.end {
				t.Fatalf("Kind %d End %d, want %d %d", p.Kind, p.End, tc.kind, tc.end)
			}
			if len(p.Eth) != len(tc.frame) {
				t.Errorf("Eth view %d bytes, frame %d", len(p.Eth), len(tc.frame))
			}
			if tc.l4 != 0 {
				if p.L3 != wire.EthernetHeaderLen || p.L4 != tc.l4 || len(p.IP) != tc.end-p.L3 {
					t.Errorf("L3 %d L4 %d len(IP) %d", p.L3, p.L4, len(p.IP))
				}
				if len(p.IP.Payload()) != tc.end-tc.l4 {
					t.Errorf("IP payload %d bytes, want %d", len(p.IP.Payload()), tc.end-tc.l4)
				}
			}
			if tc.kind == wire.KindTCP {
				if p.TCP.HeaderLen() != tc.tcpHdr || len(p.TCP) != tc.tcpBytes || string(p.TCP.Payload()) != string(payload) {
					t.Errorf("TCP header %d, %d bytes, payload %q", p.TCP.HeaderLen(), len(p.TCP), p.TCP.Payload())
				}
				if &p.TCP[0] != &tc.frame[tc.l4] {
					t.Error("TCP view does not alias the frame")
				}
				if want := uint32(len(payload)); p.TCP.SegLen() != want {
					t.Errorf("SegLen %d, want %d", p.TCP.SegLen(), want)
				}
			} else if p.TCP != nil {
				t.Error("TCP view set on a non-TCP frame")
			}
			checkAgainstGopacket(t, tc.frame, p)
		})
	}
}

func TestParseRandomTCPAgreesWithGopacket(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		frame := randomTCPFrame(t, r, 200)
		p := mustParse(t, frame)
		if p.Kind != wire.KindTCP {
			t.Fatalf("Kind %d", p.Kind)
		}
		checkAgainstGopacket(t, frame, p)
		if t.Failed() {
			t.Fatalf("frame % x", frame)
		}
	}
}

// A 40-byte IP packet padded to the 60-byte Ethernet minimum: the views
// must stop at Total Length, or the padding would be taken as payload and
// summed into checksums.
func TestParseEthernetPadding(t *testing.T) {
	frame := refTCPFrame(t, &layers.TCP{SrcPort: 1, DstPort: 2, ACK: true, Window: 9}, nil)
	if len(frame) != 60 {
		t.Fatalf("gopacket frame is %d bytes, want padded 60", len(frame))
	}
	for i := 54; i < 60; i++ {
		frame[i] = 0xee // padding that is not zero must not matter either
	}
	p := mustParse(t, frame)
	if p.Kind != wire.KindTCP || p.End != 54 || len(p.IP) != 40 || len(p.TCP) != 20 || len(p.TCP.Payload()) != 0 {
		t.Fatalf("Kind %d End %d IP %d TCP %d payload %d", p.Kind, p.End, len(p.IP), len(p.TCP), len(p.TCP.Payload()))
	}
	if p.TCP.SegLen() != 0 {
		t.Errorf("SegLen %d, want 0", p.TCP.SegLen())
	}
	if got, want := p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()), p.TCP.Checksum(); got != want {
		t.Errorf("checksum over the view %#04x, stored %#04x", got, want)
	}
	checkAgainstGopacket(t, frame, p)
}

func TestParseErrors(t *testing.T) {
	// 14+20+20+10 bytes: above the Ethernet minimum, so no padding.
	base := refTCPFrame(t, &layers.TCP{SrcPort: 1, DstPort: 2, ACK: true, Window: 9}, []byte("hello, you"))
	arp := serialize(t, ethLayer(layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: 1, SourceHwAddress: macA, SourceProtAddress: ipA,
		DstHwAddress: make([]byte, 6), DstProtAddress: ipB})
	// mutate copies base, applies f to the IPv4 packet and, unless the test
	// is about the checksum, repairs the IPv4 header checksum so only the
	// intended error can trigger.
	mutate := func(src []byte, fixSum bool, f func(ip []byte)) []byte {
		b := append([]byte(nil), src...)
		ip := b[14:]
		f(ip)
		if fixSum && len(ip) >= 20 {
			hl := int(ip[0]&0xf) * 4
			if hl >= 20 && hl <= len(ip) {
				binary.BigEndian.PutUint16(ip[10:], naiveIPChecksum(ip))
			}
		}
		return b
	}
	tests := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, wire.ErrShortFrame},
		{"13 bytes", base[:13], wire.ErrShortFrame},
		{"ip header cut", base[:14+19], wire.ErrShortFrame},
		{"ipv6 version", mutate(base, true, func(ip []byte) { ip[0] = 0x65 }), wire.ErrBadIPVersion},
		{"ihl 4", mutate(base, true, func(ip []byte) { ip[0] = 0x44 }), wire.ErrBadIPHeader},
		{"ihl 0", mutate(base, true, func(ip []byte) { ip[0] = 0x40 }), wire.ErrBadIPHeader},
		{"ihl past frame", mutate(base[:14+40], true, func(ip []byte) { ip[0] = 0x4f }), wire.ErrBadIPHeader},
		{"total < header", mutate(base, true, func(ip []byte) { binary.BigEndian.PutUint16(ip[2:], 19) }), wire.ErrBadIPLength},
		{"total past frame", mutate(base, true, func(ip []byte) { binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+1)) }), wire.ErrBadIPLength},
		{"frame cut before total", base[:len(base)-1], wire.ErrBadIPLength},
		{"bad ip checksum", mutate(base, false, func(ip []byte) { ip[10] ^= 1 }), wire.ErrBadIPChecksum},
		{"ttl changed, sum not", mutate(base, false, func(ip []byte) { ip[8]-- }), wire.ErrBadIPChecksum},
		{"tcp shorter than 20", mutate(base, true, func(ip []byte) { binary.BigEndian.PutUint16(ip[2:], 20+19) }), wire.ErrShortFrame},
		{"tcp offset 4", mutate(base, true, func(ip []byte) { ip[20+12] = 4 << 4 }), wire.ErrBadTCPHeader},
		{"tcp offset 0", mutate(base, true, func(ip []byte) { ip[20+12] = 0 }), wire.ErrBadTCPHeader},
		{"tcp offset past segment", mutate(base, true, func(ip []byte) { ip[20+12] = 8 << 4 }), wire.ErrBadTCPHeader}, // 32 > 30,
		{"arp short", arp[:14+27], wire.ErrBadARP},
		{"arp hw type", mutate(arp, false, func(a []byte) { a[1] = 6 }), wire.ErrBadARP},
		{"arp proto", mutate(arp, false, func(a []byte) { a[2] = 0x86 }), wire.ErrBadARP},
		{"arp sizes", mutate(arp, false, func(a []byte) { a[5] = 16 }), wire.ErrBadARP},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p wire.Packet
			p.Kind = wire.KindTCP // stale state from a previous frame must not survive
			if err := wire.Parse(tc.frame, &p); !errors.Is(err, tc.want) {
				t.Fatalf("Parse = %v, want %v", err, tc.want)
			}
			if p.Kind == wire.KindTCP {
				t.Error("failed Parse left Kind TCP")
			}
		})
	}
	// The frame the mutations start from is itself valid.
	if len(base) != 64 {
		t.Fatalf("base frame %d bytes, want 64", len(base))
	}
	mustParse(t, base)
}
