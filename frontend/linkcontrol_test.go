package frontend

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

// Each condition under which Splices must go through the socket says so.
func TestLinkControlFromSaysWhyNot(t *testing.T) {
	ctl := netip.MustParseAddrPort("198.18.0.2:7400")
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{ControlSocketOnly: true, LinkType: "afpacket", Link: "lo", Control: ctl}, "-control-socket-only"},
		{Config{LinkType: "tap", Link: "tap0", Control: ctl}, "TAP"},
		{Config{LinkType: "afpacket", Link: "lo", Control: ctl, Capture: "x.pcapng"}, "-capture"},
		{Config{LinkType: "afpacket", Link: "lo", Control: netip.MustParseAddrPort("0.0.0.0:7400")}, "not one IPv4 address"},
		{Config{LinkType: "afpacket", Link: "lo", Control: netip.MustParseAddrPort("[::1]:7400")}, "not one IPv4 address"},
		{Config{LinkType: "afpacket", Link: "qsplice-no-such-link", Control: ctl}, "no such network interface"},
		{Config{LinkType: "afpacket", Link: "lo", Control: netip.MustParseAddrPort("127.0.0.1:7400")}, "no Ethernet address"},
	} {
		src, why := linkControlFrom(&c.cfg)
		if src.on() || !strings.Contains(why, c.want) {
			t.Errorf("%+v: on %v, reason %q, want off because %q", c.cfg, src.on(), why, c.want)
		}
	}
}

// onLink makes the daemons of the rigs made from now on run the control
// protocol on their link, as they would on an AF_PACKET link whose
// interface has the control address.
func onLink(t *testing.T) {
	t.Cleanup(func() { linkControlOf = linkControlFrom })
	linkControlOf = func(cfg *Config) (linkControlSource, string) {
		return linkControlSource{mac: feMAC, src: cfg.Control}, ""
	}
}

// expectControlFrame waits for a UDP frame of the front-end's on the link
// and checks it is what the kernel would have sent from the control
// socket: from the front-end's MAC and the socket's address to the shim's
// at its registered MAC, don't fragment, TTL 64, both checksums right
// (gopacket recomputes them). It returns the datagram.
func (r *rig) expectControlFrame(to netip.AddrPort) []byte {
	r.t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case f := <-r.frames:
			pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
			udp, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
			if udp == nil {
				continue
			}
			eth := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
			ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			from := netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip.SrcIP.To4())), uint16(udp.SrcPort))
			dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip.DstIP.To4())), uint16(udp.DstPort))
			if wire.MAC(eth.SrcMAC) != feMAC || wire.MAC(eth.DstMAC) != serverMAC ||
				from != r.feCtl || dst != to || ip.Flags != layers.IPv4DontFragment || ip.TTL != 64 {
				r.t.Fatalf("control frame %v > %v, %v > %v, flags %v ttl %d; want %v > %v, %v > %v, DF, 64",
					eth.SrcMAC, eth.DstMAC, from, dst, ip.Flags, ip.TTL, feMAC, serverMAC, r.feCtl, to)
			}
			ipSum, udpSum := ip.Checksum, udp.Checksum
			if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
				r.t.Fatal(err)
			}
			buf := gopacket.NewSerializeBuffer()
			opts := gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}
			if err := gopacket.SerializeLayers(buf, opts, ip, udp, gopacket.Payload(udp.Payload)); err != nil {
				r.t.Fatal(err)
			}
			if ip.Checksum != ipSum || udp.Checksum != udpSum {
				r.t.Fatalf("control frame checksums IP %#x UDP %#x, want %#x %#x", ipSum, udpSum, ip.Checksum, udp.Checksum)
			}
			return udp.Payload
		case <-timeout:
			r.t.Fatal("no control frame from the front-end")
			return nil
		}
	}
}

// A Splice sent with the SYN goes as a frame right behind the SYN, in the
// same batch, and not through the socket; the shim's SpliceAck, a frame
// on the link, is taken off it and lets the request go, as one through
// the socket did.
func TestDaemonRunsTheControlProtocolInTheLinksBatches(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "frontend.yaml")
	writeConfig(t, cfgPath, "100")
	onLink(t)
	r := newRig(t, cfgPath, func(c *Config) { c.SpliceAtSYN = true })
	if !r.d.linkCtl.on() {
		t.Fatal("the control protocol is not on the link")
	}
	stop := r.run()
	defer stop()
	// The back-end is at an address of the link (the loopback is no
	// source a frame may have), and its datagrams come as frames on the
	// link, its Register first. (The RegisterAck, through the socket to
	// that address, cannot leave the loopback, and is not needed.)
	shimPort := r.shim.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	beIP := netip.MustParseAddr("198.18.0.21")
	shimAddr := netip.AddrPortFrom(beIP, shimPort)
	server := wire.IP4From(beIP)
	var ipID uint16
	sendOnLink := func(m proto.Message) {
		t.Helper()
		b, err := r.codec.Append(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		ipID++
		u := wire.UDPFrame{SrcMAC: serverMAC, DstMAC: feMAC, Src: server, Dst: r.feCtl.Addr().As4(),
			SrcPort: shimPort, DstPort: r.feCtl.Port(), IPID: ipID, Payload: b}
		f := make([]byte, u.Len())
		u.Encode(f)
		if err := r.wire.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	sendOnLink(&proto.Register{BackendID: 1, IP: beIP, MAC: serverMAC, ControlPort: shimPort, Capacity: 5, Incarnation: 9})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if st, _ := r.d.Snapshot(); len(st.Backends) == 1 && st.Backends[0].Alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the back-end did not register")
		}
	}

	const clientISN, clientPort = wire.Seq(0x3000), 40003
	req := []byte("GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
	ourISN := r.clientRequest(clientISN, clientPort, req)
	// The SYN, with no datagram ahead of it, and the very next frame on
	// the link the Splice.
	var syn *wire.Packet
	for syn == nil {
		select {
		case f := <-r.frames:
			p := parsed(t, f)
			if p.Kind == wire.KindIPv4 && p.IP.Protocol() == wire.ProtoUDP {
				t.Fatal("a datagram went ahead of the C2 SYN")
			}
			if p.Kind == wire.KindTCP && p.IP.Dst() == server && p.TCP.Flags() == wire.TCPFlagSYN {
				syn = p
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no C2 SYN from the front-end")
		}
	}
	hport := syn.TCP.SrcPort()
	var next []byte
	select {
	case next = <-r.frames:
	case <-time.After(5 * time.Second):
		t.Fatal("nothing on the link after the C2 SYN")
	}
	r.frames <- next // expectControlFrame takes it from there
	m, err := r.codec.Decode(r.expectControlFrame(shimAddr))
	if err != nil {
		t.Fatalf("the shim's codec refuses the Splice frame: %v", err)
	}
	sp, ok := m.(*proto.Splice)
	if !ok || sp.Flags&proto.SpliceAtSYN == 0 || sp.HandoffPort != hport || sp.SeqDelta != uint32(ourISN) {
		t.Fatalf("frame after the SYN carries %T %+v, want the Splice sent with the SYN of port %d", m, m, hport)
	}
	// Nothing came through the socket.
	r.shim.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _, err := r.shim.ReadFromUDPAddrPort(make([]byte, 2048)); err == nil {
		t.Fatalf("a %d-byte datagram came through the socket too", n)
	}

	// The SYN-ACK, and the SpliceAck as the shim sends it on its wire.
	var sso [8]byte
	ssyn := wire.SynOptions{MSS: 1460, WScale: -1}
	r.send(wire.TCPFrame{SrcMAC: serverMAC, DstMAC: feMAC, Src: server, Dst: wire.IP4From(handoff), SrcPort: 80, DstPort: hport,
		Seq: 0x9000, Ack: clientISN + 1, Flags: wire.TCPFlagSYN | wire.TCPFlagACK, Window: 65535, Options: sso[:ssyn.Encode(sso[:])]})
	sendOnLink(&proto.SpliceAck{RequestID: sp.RequestID, BackendID: 1, OK: true})
	onC2 := parsed(t, r.expectFrame("request on C2", func(p *wire.Packet) bool {
		return p.IP.Dst() == server && len(p.TCP.Payload()) > 0
	}))
	if string(onC2.TCP.Payload()) != string(req) {
		t.Fatalf("request on C2 %q, want %q", onC2.TCP.Payload(), req)
	}
	st, _ := r.d.Snapshot()
	if st.ControlFrames != 1 || st.Engine.ControlFromLink != 2 || st.BadCtl != 0 {
		t.Fatalf("control_frames_sent %d, control_from_link %d, bad %d; want 1, 2 (Register, SpliceAck), 0", st.ControlFrames, st.Engine.ControlFromLink, st.BadCtl)
	}
}

// The pass's batch is the classic Splices' frames, the engine's frames,
// then the frames of the Splices sent with their SYN; a pass with more
// Splices than frame buffers sends the rest through the socket.
func TestPassBatchPutsEachSpliceFrameInItsPlace(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "frontend.yaml")
	writeConfig(t, cfgPath, "100")
	onLink(t)
	r := newRig(t, cfgPath)
	s := r.d.shards[0]
	codec := r.d.ctl.codec
	shimCtl := netip.AddrPortFrom(loopback, 7401)
	queue := func(withSYN bool, id uint64) bool {
		t.Helper()
		m := testSplice(id)
		if withSYN {
			m.Flags |= proto.SpliceAtSYN
		}
		framed, err := s.lctl.queueSplice(r.d.linkCtl, codec, &controller.Datagram{To: shimCtl, Msg: m, MAC: serverMAC}, withSYN)
		if err != nil {
			t.Fatal(err)
		}
		return framed
	}
	if !queue(true, 1) || !queue(false, 2) {
		t.Fatal("a Splice with a MAC and buffers left was not framed")
	}
	engine := []byte("engine frame")
	s.out.Engine.Frames = append(s.out.Engine.Frames, splice.OutFrame{Data: engine})
	s.flushFrames()
	if got, want := r.batchOrder(t, engine, 3), []string{"Splice 2", "engine", "Splice 1"}; !slices.Equal(got, want) {
		t.Fatalf("batch order %v, want %v", got, want)
	}
	// Out of buffers: the rest through the socket.
	for i := range linkControlFrames {
		if !queue(false, uint64(10+i)) {
			t.Fatalf("Splice %d of %d not framed", i, linkControlFrames)
		}
	}
	if queue(false, 99) {
		t.Fatal("a Splice beyond the pass's frame buffers was framed")
	}
	// No MAC: the socket.
	if framed, _ := s.lctl.queueSplice(r.d.linkCtl, codec, &controller.Datagram{To: shimCtl, Msg: testSplice(100)}, false); framed {
		t.Fatal("a Splice to a back-end of unknown MAC was framed")
	}
}

// A Splice sent with a SYN that asks for Fast Open goes ahead of the
// pass's frames, as a classic one does: the shim holds that SYN until
// its Splice has come. One sent with any other SYN goes behind them.
func TestFastOpenSpliceGoesAheadOfItsSYN(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "frontend.yaml")
	writeConfig(t, cfgPath, "100")
	onLink(t)
	r := newRig(t, cfgPath)
	s := r.d.shards[0]
	shimCtl := netip.AddrPortFrom(loopback, 7401)
	atSYN := func(id uint64) *proto.Splice {
		m := testSplice(id)
		m.Flags |= proto.SpliceAtSYN
		return m
	}
	fastOpen := func(id uint64) *proto.Splice {
		m := atSYN(id)
		m.Flags |= proto.SpliceRequest | proto.SpliceImplicitAck
		m.Request = []byte("GET / HTTP/1.1\r\n\r\n")
		return m
	}
	s.out.Reset()
	s.out.Datagrams = append(s.out.Datagrams,
		controller.Datagram{To: shimCtl, Msg: atSYN(1), MAC: serverMAC},
		controller.Datagram{To: shimCtl, Msg: testSplice(2), MAC: serverMAC},
		controller.Datagram{To: shimCtl, Msg: fastOpen(3), MAC: serverMAC})
	engine := []byte("engine frame: the C2 SYN")
	s.out.Engine.Frames = append(s.out.Engine.Frames, splice.OutFrame{Data: engine})
	r.d.ctrlMu.Lock()
	s.splicesAfter = r.d.sendDatagrams(s, false)
	r.d.ctrlMu.Unlock()
	s.flushFrames()
	if got, want := r.batchOrder(t, engine, 4), []string{"Splice 2", "Splice 3", "engine", "Splice 1"}; !slices.Equal(got, want) {
		t.Fatalf("batch order %v, want %v", got, want)
	}
}

// batchOrder reads the n frames a pass wrote on the rig's link (written
// already: flushFrames returned) and names each: "engine" for the frame
// engine, "Splice ID" for a Splice frame.
func (r *rig) batchOrder(t *testing.T, engine []byte, n int) []string {
	t.Helper()
	var got []string
	for range n {
		buf := make([]byte, 2048)
		k, err := r.wire.ReadFrame(buf)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		f := buf[:k]
		if string(f) == string(engine) {
			got = append(got, "engine")
			continue
		}
		var p wire.Packet
		if err := wire.Parse(f, &p); err != nil || p.Kind != wire.KindIPv4 || p.IP.Protocol() != wire.ProtoUDP {
			t.Fatalf("after %v: %v, kind %v", got, err, p.Kind)
		}
		m, err := r.codec.Decode(f[p.L4+wire.UDPHeaderLen : p.End])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("Splice %d", m.(*proto.Splice).RequestID))
	}
	return got
}

// testSplice is a Splice that encodes, numbered id.
func testSplice(id uint64) *proto.Splice {
	a := netip.MustParseAddr("198.18.0.10")
	return &proto.Splice{RequestID: id, BackendID: 1, ClientIP: a, ClientPort: 40000, VIP: vip, VIPPort: 80,
		HandoffIP: handoff, HandoffPort: 50000, BackendIP: loopback, BackendPort: 80}
}
