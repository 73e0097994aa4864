package link

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// tcpFrame builds an Ethernet/IPv4/TCP frame with correct checksums.
func notedTCPFrame(t testing.TB, src, dst string, syn, ack, rst bool, payload string) []byte {
	t.Helper()
	s, d := netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst)
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: s.Addr().AsSlice(), DstIP: d.Addr().AsSlice()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(s.Port()), DstPort: layers.TCPPort(d.Port()), SYN: syn, ACK: ack, RST: rst, Window: 1000, Seq: 1, Ack: 2}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, tcp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFrontEndNotesSayWhatTheEngineDid: each kind of frame a front-end
// writes gets its comment; frames it read, and its plain ACKs, none.
func TestFrontEndNotesSayWhatTheEngineDid(t *testing.T) {
	notes := FrontEndNotes([]netip.Addr{netip.MustParseAddr("198.18.0.100"), netip.MustParseAddr("198.18.0.101")},
		netip.MustParseAddr("198.18.0.3"))
	const (
		vip     = "198.18.0.101:80"
		client  = "198.18.0.10:40000"
		handoff = "198.18.0.3:50000"
		backend = "198.18.0.21:80"
	)
	for _, c := range []struct {
		name    string
		frame   []byte
		inbound bool
		want    string // a part of the comment; "" for none
	}{
		{"SYN-ACK to the client", notedTCPFrame(t, vip, client, true, true, false, ""), Outbound, "SYN cookie"},
		{"reset to the client", notedTCPFrame(t, vip, client, false, true, true, ""), Outbound, "reset to the client"},
		{"503", notedTCPFrame(t, vip, client, false, true, false, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\r\n"), Outbound,
			"answered by the front-end: HTTP/1.1 503 Service Unavailable"},
		{"C2 SYN", notedTCPFrame(t, handoff, backend, true, false, false, ""), Outbound, "handed off: C2 SYN"},
		{"request on C2", notedTCPFrame(t, handoff, backend, false, true, false, "GET / HTTP/1.1\r\n\r\n"), Outbound, "request bytes on C2"},
		{"client ACK translated", notedTCPFrame(t, handoff, backend, false, true, false, ""), Outbound, "a client segment translated"},
		{"C2 reset", notedTCPFrame(t, handoff, backend, false, false, true, ""), Outbound, "reset on C2"},
		{"the front-end's own ACK", notedTCPFrame(t, vip, client, false, true, false, ""), Outbound, ""},
		{"a client's SYN read", notedTCPFrame(t, client, vip, true, false, false, ""), Inbound, ""},
		{"the back-end's SYN-ACK read", notedTCPFrame(t, backend, handoff, true, true, false, ""), Inbound, ""},
		{"someone else's frame", notedTCPFrame(t, "198.18.0.9:1", client, true, true, false, ""), Outbound, ""},
		{"garbage", []byte{1, 2, 3}, Outbound, ""},
		{"ARP", notedARPFrame(t), Outbound, ""},
		{"ICMP passed on", icmpFrame(t), Outbound, "ICMP about a reply forwarded"},
	} {
		got := notes(c.frame, c.inbound)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: comment %q, want one with %q", c.name, got, c.want)
		}
	}
}

func notedARPFrame(t *testing.T) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true},
		&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: []byte{2, 0, 0, 0, 0, 1}, SourceProtAddress: []byte{198, 18, 0, 100},
			DstHwAddress: make([]byte, 6), DstProtAddress: []byte{198, 18, 0, 10}}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// icmpFrame is a "fragmentation needed" from a router on the client's
// path, about a reply, as the front-end passes it on to a back-end.
func icmpFrame(t *testing.T) []byte {
	t.Helper()
	inner := notedTCPFrame(t, "198.18.0.21:80", "198.18.0.3:50000", false, true, false, "")[14:]
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4},
		&layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: []byte{198, 18, 0, 1}, DstIP: []byte{198, 18, 0, 21}},
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 4)}, gopacket.Payload(inner[:28])); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func FuzzFrontEndNotes(f *testing.F) {

	f.Add(notedTCPFrame(f, "198.18.0.100:80", "198.18.0.10:1", true, true, false, ""), false)
	f.Add(notedTCPFrame(f, "198.18.0.3:5", "198.18.0.21:80", false, true, false, "GET"), false)
	notes := FrontEndNotes([]netip.Addr{netip.MustParseAddr("198.18.0.100")}, netip.MustParseAddr("198.18.0.3"))
	f.Fuzz(func(t *testing.T, frame []byte, inbound bool) {
		notes(frame, inbound) // must not panic, whatever the frame
	})
}
