package link

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
	"github.com/qsplice/qsplice/splice/wire"
)

// TestAFPacketOfOneProtocolReadsAfterIngress is what the front-end's
// hidden SYNs rest on (AFPacketConfig.Protocol): with the SYN answer on
// the interface's ingress, a socket of every protocol reads the SYN the
// program answered, one bound to IPv4 reads only what the program let
// pass, and ARP only a socket bound to ARP (or to every protocol).
func TestAFPacketOfOneProtocolReadsAfterIngress(t *testing.T) {
	w := newWire(t)
	var ifindex int
	if err := nstest.Do(w.nsB, func() error {
		ifi, err := net.InterfaceByName(vethB)
		if err == nil {
			ifindex = ifi.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var prog *SYNAnswer
	err := nstest.Do(w.nsB, func() error {
		var err error
		if prog, err = NewSYNAnswer(answerConfig(ifindex)); err != nil {
			return err
		}
		if err := prog.SetKey(7, 0x0706050403020100, 0x0f0e0d0c0b0a0908); err != nil {
			return err
		}
		if err := prog.SetCurrent(7, 0); err != nil {
			return err
		}
		if err := prog.SetListeners([][4]byte{answerVIP}, []uint16{80}, [][4]byte{answerVIP, answerHandoff}); err != nil {
			return err
		}
		return prog.AttachIngress(ifindex)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })

	vip := netip.AddrFrom4(answerVIP)
	filter := FilterIPv4Dst([]netip.Addr{vip})
	all := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: filter, Promiscuous: true})
	ip := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: filter, Promiscuous: true, Protocol: unix.ETH_P_IP})
	arp := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Promiscuous: true, Protocol: unix.ETH_P_ARP})
	client := openAFPacket(t, w.nsA, vethA, AFPacketConfig{Promiscuous: true})
	for _, l := range []Link{all, ip, arp, client} {
		watchdog(t, l, 20*time.Second)
	}

	answered := linuxSYN()
	passed := answerEdit(func(f []byte) []byte { f[saDPort+1] = 81; return f })
	var req [wire.ARPFrameLen]byte
	wire.EncodeARP(req[:], wire.ARPRequest, wire.MAC{0x02, 0, 0xc6, 0x12, 0, 0x02}, answerClient,
		wire.MAC{}, wire.IP4(answerVIP), wire.MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	for _, f := range [][]byte{answered, req[:], passed} {
		if err := client.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
	}

	// The client gets the SYN-ACK: the program answered the first SYN.
	buf := make([]byte, 2048)
	for {
		n, err := client.ReadFrame(buf)
		if err != nil {
			t.Fatal(err)
		}
		var p wire.Packet
		if wire.Parse(buf[:n], &p) == nil && p.Kind == wire.KindTCP &&
			p.TCP.Flags() == wire.TCPFlagSYN|wire.TCPFlagACK && p.TCP.SrcPort() == 80 {
			break
		}
	}
	firstPort := func(l Link) uint16 {
		t.Helper()
		n, err := l.ReadFrame(buf)
		if err != nil {
			t.Fatal(err)
		}
		var p wire.Packet
		if err := wire.Parse(buf[:n], &p); err != nil || p.Kind != wire.KindTCP {
			t.Fatalf("%s read %x first, want a SYN", l.Name(), buf[:n])
		}
		return p.TCP.DstPort()
	}
	if port := firstPort(all); port != 80 {
		t.Errorf("the socket of every protocol read a SYN to port %d first, want the answered one to 80", port)
	}
	if port := firstPort(ip); port != 81 {
		t.Errorf("the IPv4 socket read a SYN to port %d first, want the one the program let pass, to 81", port)
	}
	n, err := arp.ReadFrame(buf)
	if err != nil {
		t.Fatal(err)
	}
	var p wire.Packet
	if err := wire.Parse(buf[:n], &p); err != nil || p.Kind != wire.KindARP || p.ARP.TargetIP() != wire.IP4(answerVIP) {
		t.Errorf("the ARP socket read %x first, want the request for the VIP", buf[:n])
	}
}
