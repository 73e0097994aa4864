package wire_test

import (
	"bytes"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

func TestSynOptionsEncodeEveryCombination(t *testing.T) {
	for mask := range 32 {
		for _, ws := range []int{0, 7, 14} {
			o := wire.SynOptions{WScale: -1, TSVal: 0xfffffffe, TSEcr: 0x01020304}
			if mask&1 != 0 {
				o.MSS = 1460
			}
			if mask&2 != 0 {
				o.WScale = ws
			}
			o.SACKPermitted = mask&4 != 0
			o.TS = mask&8 != 0
			o.FastOpen = mask&16 != 0
			buf := bytes.Repeat([]byte{0xaa}, 48)
			n := o.Encode(buf)
			if n != o.Len() || n%4 != 0 || n > 40 {
				t.Fatalf("%+v: Encode wrote %d, Len %d", o, n, o.Len())
			}
			if !bytes.Equal(buf[n:], bytes.Repeat([]byte{0xaa}, 48-n)) {
				t.Fatalf("%+v: Encode wrote past %d bytes", o, n)
			}
			p := segment(t, buf[:n])
			var got wire.TCPOptions
			if err := wire.ParseOptions(p.TCP, &got); err != nil {
				t.Fatalf("%+v: ParseOptions: %v", o, err)
			}
			if got.HasMSS != (o.MSS != 0) || got.MSS != o.MSS || got.HasWScale != (o.WScale >= 0) ||
				got.HasWScale && int(got.WScale) != o.WScale || got.SACKPermitted != o.SACKPermitted ||
				got.HasTS != o.TS || o.TS && (got.TSVal != o.TSVal || got.TSEcr != o.TSEcr) || got.NumSACK != 0 ||
				(got.FastOpenOffset != 0) != o.FastOpen || got.CookieLen != 0 {
				t.Fatalf("encoded %+v, parsed back %+v", o, got)
			}
			if o.TS && got.TSOffset%4 != 0 {
				t.Errorf("%+v: timestamps at offset %d, not aligned", o, got.TSOffset)
			}
			d := gopacketDecode(t, p.Eth)
			compareWithGopacketOptions(t, &got, d.tcp.Options)
			if mask&2 == 0 {
				break // WScale omitted: the value loop adds nothing
			}
		}
	}
}

func TestSynOptionsLinuxLayout(t *testing.T) {
	// What a Linux SYN carries: MSS, SACK_PERM, TS, NOP, WS.
	want := []byte{2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 1, 3, 3, 7}
	o := wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 0xdeadbeef}
	b := make([]byte, 40)
	if n := o.Encode(b); !bytes.Equal(b[:n], want) {
		t.Errorf("full set\n got % x\nwant % x", b[:n], want)
	}
	// Without timestamps Linux pads SACK_PERM with two NOPs; without SACK
	// it pads the timestamps.
	o = wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true}
	want = []byte{2, 4, 0x05, 0xb4, 1, 1, 4, 2, 1, 3, 3, 7}
	if n := o.Encode(b); !bytes.Equal(b[:n], want) {
		t.Errorf("no TS\n got % x\nwant % x", b[:n], want)
	}
	o = wire.SynOptions{MSS: 1460, WScale: -1, TS: true, TSVal: 1, TSEcr: 2}
	want = []byte{2, 4, 0x05, 0xb4, 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}
	if n := o.Encode(b); !bytes.Equal(b[:n], want) {
		t.Errorf("no SACK, no WS\n got % x\nwant % x", b[:n], want)
	}
}

// TestSynOptionsFastOpenCookie checks the cookie option as the shim
// writes it over a cookie request and Linux sends it: kind, length,
// cookie, NOPs to the next word; parsed back, it is the same cookie.
func TestSynOptionsFastOpenCookie(t *testing.T) {
	for _, n := range []int{wire.MinFastOpenCookie, 6, 8, wire.MaxFastOpenCookie} {
		cookie := make([]byte, n)
		for i := range cookie {
			cookie[i] = byte(0xa0 + i)
		}
		o := wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 9, FastOpen: true, Cookie: cookie}
		b := make([]byte, 40)
		got := b[:o.Encode(b)]
		want := append([]byte{2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 9, 0, 0, 0, 0, 1, 3, 3, 7, 34, byte(2 + n)}, cookie...)
		for len(want)%4 != 0 {
			want = append(want, 1)
		}
		if !bytes.Equal(got, want) || o.Len() != len(want) {
			t.Errorf("cookie of %d: Len %d\n got % x\nwant % x", n, o.Len(), got, want)
		}
		p := segment(t, got)
		var po wire.TCPOptions
		if err := wire.ParseOptions(p.TCP, &po); err != nil {
			t.Fatal(err)
		}
		if c := po.Cookie(p.TCP); !bytes.Equal(c, cookie) {
			t.Errorf("cookie of %d parsed back as % x", n, c)
		}
	}
	// Without a cookie: the request, as before.
	o := wire.SynOptions{MSS: 1460, WScale: -1, FastOpen: true}
	b := make([]byte, 40)
	if got, want := b[:o.Encode(b)], []byte{2, 4, 0x05, 0xb4, 1, 1, 34, 2}; !bytes.Equal(got, want) || o.Len() != len(want) {
		t.Errorf("cookie request\n got % x\nwant % x", got, want)
	}
}

func TestEncodeTS(t *testing.T) {
	b := make([]byte, wire.TSOptionLen)
	if n := wire.EncodeTS(b, 0xffffffff, 0x80000000); n != wire.TSOptionLen {
		t.Fatalf("EncodeTS wrote %d", n)
	}
	p := segment(t, b)
	var o wire.TCPOptions
	if err := wire.ParseOptions(p.TCP, &o); err != nil {
		t.Fatal(err)
	}
	if !o.HasTS || o.TSVal != 0xffffffff || o.TSEcr != 0x80000000 || o.TSOffset != 24 {
		t.Errorf("parsed %+v", o)
	}
}

// TestTCPFrameEncodeDecodesWithGopacket builds random frames with TCPFrame
// and checks every field and both checksums with gopacket.
func TestTCPFrameEncodeDecodesWithGopacket(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for i := range 500 {
		o := wire.SynOptions{MSS: uint16(r.Uint32()), WScale: r.IntN(16) - 1, SACKPermitted: r.IntN(2) == 0, TS: r.IntN(2) == 0,
			TSVal: randSpecial32(r), TSEcr: randSpecial32(r)}
		opts := make([]byte, o.Len())
		o.Encode(opts)
		f := wire.TCPFrame{
			SrcMAC: wire.MAC(macA), DstMAC: wire.MAC(macB), Src: wire.IP4(randomBytes(r, 4)), Dst: wire.IP4(randomBytes(r, 4)),
			SrcPort: randSpecial16(r), DstPort: randSpecial16(r), Seq: wire.Seq(randSpecial32(r)), Ack: wire.Seq(randSpecial32(r)),
			Flags: uint8(r.Uint32()), Window: randSpecial16(r), IPID: randSpecial16(r), TTL: uint8(r.IntN(3)),
			Options: opts, Payload: randomBytes(r, r.IntN(1461)),
		}
		b := make([]byte, f.Len()+7)
		n := f.Encode(b)
		if n != f.Len() || n != 54+len(opts)+len(f.Payload) {
			t.Fatalf("Encode returned %d, Len %d", n, f.Len())
		}
		frame := b[:n]
		d := gopacketDecode(t, frame)
		ttl := f.TTL
		if ttl == 0 {
			ttl = 64
		}
		g := &d.tcp
		if d.eth.SrcMAC.String() != f.SrcMAC.String() || d.eth.DstMAC.String() != f.DstMAC.String() ||
			d.ip.Version != 4 || d.ip.IHL != 5 || int(d.ip.Length) != n-14 || d.ip.Id != f.IPID || d.ip.TTL != ttl ||
			d.ip.Flags != layers.IPv4DontFragment || d.ip.FragOffset != 0 || d.ip.Protocol != layers.IPProtocolTCP ||
			!d.ip.SrcIP.Equal(net.IP(f.Src[:])) || !d.ip.DstIP.Equal(net.IP(f.Dst[:])) ||
			uint16(g.SrcPort) != f.SrcPort || uint16(g.DstPort) != f.DstPort || g.Seq != uint32(f.Seq) || g.Ack != uint32(f.Ack) ||
			g.Window != f.Window || int(g.DataOffset)*4 != 20+len(opts) || g.Urgent != 0 || !bytes.Equal(g.Payload, f.Payload) ||
			!bytes.Equal(g.Contents[20:], opts) || tcpFlagsByte(g) != f.Flags {
			t.Fatalf("trial %d: gopacket decoded\n%+v\n%+v\nfrom %+v", i, d.ip, g, f)
		}
		if _, res := d.ip.VerifyChecksum(); !res.Valid {
			t.Fatalf("trial %d: IPv4 checksum %+v", i, res)
		}
		if err := g.SetNetworkLayerForChecksum(&d.ip); err != nil {
			t.Fatal(err)
		}
		if _, res := g.VerifyChecksum(); !res.Valid {
			t.Fatalf("trial %d: TCP checksum %+v", i, res)
		}
		if got := naiveTCPChecksum(frame[14:]); got != g.Checksum {
			t.Fatalf("trial %d: TCP checksum %#04x, naive %#04x", i, g.Checksum, got)
		}
		if b[n] != 0 {
			t.Fatalf("Encode wrote past its length")
		}
	}
}

func tcpFlagsByte(g *layers.TCP) uint8 {
	var f uint8
	for bit, set := range []bool{g.FIN, g.SYN, g.RST, g.PSH, g.ACK, g.URG, g.ECE, g.CWR} {
		if set {
			f |= 1 << bit
		}
	}
	return f
}

func TestEncodeARP(t *testing.T) {
	b := bytes.Repeat([]byte{0xaa}, 64)
	srcIP := wire.IP4From(netip.MustParseAddr("198.18.0.1"))
	dstIP := wire.IP4From(netip.MustParseAddr("198.18.0.2"))
	n := wire.EncodeARP(b, wire.ARPReply, wire.MAC(macA), srcIP, wire.MAC(macB), dstIP, wire.MAC(macB))
	if n != wire.ARPFrameLen {
		t.Fatalf("EncodeARP returned %d", n)
	}
	if !bytes.Equal(b[42:60], make([]byte, 18)) || !bytes.Equal(b[60:], []byte{0xaa, 0xaa, 0xaa, 0xaa}) {
		t.Errorf("padding wrong or written past 60 bytes: % x", b[42:])
	}
	d := gopacketDecode(t, b[:n])
	a := &d.arp
	if d.eth.EthernetType != layers.EthernetTypeARP || d.eth.SrcMAC.String() != macA.String() || d.eth.DstMAC.String() != macB.String() ||
		a.AddrType != layers.LinkTypeEthernet || a.Protocol != layers.EthernetTypeIPv4 || a.HwAddressSize != 6 || a.ProtAddressSize != 4 ||
		a.Operation != layers.ARPReply || !bytes.Equal(a.SourceHwAddress, macA) || !bytes.Equal(a.DstHwAddress, macB) ||
		!net.IP(a.SourceProtAddress).Equal(net.IP{198, 18, 0, 1}) || !net.IP(a.DstProtAddress).Equal(net.IP{198, 18, 0, 2}) {
		t.Fatalf("gopacket decoded %+v / %+v", d.eth, a)
	}
	p := mustParse(t, b[:n])
	if p.Kind != wire.KindARP || p.ARP.Op() != wire.ARPReply || p.ARP.SenderIP() != srcIP || p.ARP.TargetIP() != dstIP ||
		p.ARP.SenderMAC() != wire.MAC(macA) || p.ARP.TargetMAC() != wire.MAC(macB) {
		t.Errorf("Parse of EncodeARP output: %+v", p)
	}
}

func TestMAC(t *testing.T) {
	for _, s := range []string{"00:00:00:00:00:00", "02:00:5e:10:ab:cd", "ff:ff:ff:ff:ff:ff"} {
		m, err := wire.ParseMAC(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseMAC(%q) = %v, %v", s, m, err)
		}
		hw, _ := net.ParseMAC(s)
		if m != wire.MAC(hw) {
			t.Errorf("ParseMAC(%q) = %v, net.ParseMAC %v", s, m, hw)
		}
	}
	if m, err := wire.ParseMAC("02:00:5E:10:AB:CD"); err != nil || m.String() != "02:00:5e:10:ab:cd" {
		t.Errorf("upper case: %v, %v", m, err)
	}
	if wire.BroadcastMAC.String() != "ff:ff:ff:ff:ff:ff" {
		t.Errorf("BroadcastMAC %v", wire.BroadcastMAC)
	}
	for _, s := range []string{"", "02:00:5e:10:ab", "02:00:5e:10:ab:cd:", "02-00-5e-10-ab-cd", "02:00:5e:10:ab:cg",
		"2:00:5e:10:ab:cd0", "02:00:5e:10:ab:c", " 02:00:5e:10:ab:c", "02:00:5e:10:ab:cd:ef:01", "0200.5e10.abcd....",
		"02::00:5e:10:ab:c"} {
		if m, err := wire.ParseMAC(s); err == nil {
			t.Errorf("ParseMAC(%q) accepted as %v", s, m)
		}
	}
}

func TestIP4(t *testing.T) {
	a := netip.MustParseAddr("198.19.255.254")
	if ip := wire.IP4From(a); ip.Addr() != a || ip.String() != "198.19.255.254" {
		t.Errorf("IP4 round trip: %v", ip)
	}
	defer func() {
		if recover() == nil {
			t.Error("IP4From accepted an IPv6 address")
		}
	}()
	wire.IP4From(netip.MustParseAddr("2001:db8::1"))
}

// TestUDPFrameEncode: a built datagram parses back with its addresses,
// ports and payload, don't-fragment and TTL 64, and both checksums
// verify (the UDP sum over pseudo-header and datagram is all ones).
func TestUDPFrameEncode(t *testing.T) {
	f := wire.UDPFrame{SrcMAC: wire.MAC{2, 0, 0, 0, 0, 1}, DstMAC: wire.MAC{2, 0, 0, 0, 0, 2}, Src: wire.IP4{198, 18, 0, 2},
		Dst: wire.IP4{198, 18, 0, 21}, SrcPort: 7400, DstPort: 7401, IPID: 7, Payload: []byte("splice")}
	b := make([]byte, f.Len()+10)
	n := f.Encode(b)
	if n != 14+20+8+6 {
		t.Fatalf("length %d", n)
	}
	var p wire.Packet
	if err := wire.Parse(b[:n], &p); err != nil {
		t.Fatal(err)
	}
	ip := p.IP
	if ip.Src() != f.Src || ip.Dst() != f.Dst || ip.Protocol() != wire.ProtoUDP || ip[8] != 64 || ip[6] != 0x40 || ip[5] != 7 {
		t.Errorf("IPv4 header % x", []byte(ip[:20]))
	}
	if ip.ComputeChecksum() != ip.Checksum() {
		t.Error("IPv4 checksum does not verify")
	}
	u := b[14+20 : n]
	if string(u[8:]) != "splice" || u[0] != 7400>>8 || u[3] != 7401&0xff || int(u[5]) != len(u) {
		t.Errorf("UDP % x", u)
	}
	if wire.Fold(wire.Sum(u, wire.PseudoHeaderSum(f.Src, f.Dst, wire.ProtoUDP, uint16(len(u))))) != 0xffff {
		t.Error("UDP checksum does not verify")
	}
}
