package splice

// Ingress checks (ingress.go): frames an attacker on the segment can
// forge with odd headers are dropped and counted before either engine
// acts on them; the front-end answers none of them, the shim passes none
// of them from the wire to its host.

import (
	"math/rand/v2"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// Frame mutators. Each returns a new frame with both checksums right
// unless breaking one is the point.

// refixIP recomputes the IPv4 header checksum of b in place.
func refixIP(b []byte) []byte {
	ip := wire.IPv4(b[14:])
	ip.SetChecksum(0)
	ip.SetChecksum(ip.ComputeChecksum())
	return b
}

func withTTL(b []byte, ttl uint8) []byte {
	b = append([]byte(nil), b...)
	b[14+8] = ttl
	return refixIP(b)
}

func withSrcMAC(b []byte, m wire.MAC) []byte {
	b = append([]byte(nil), b...)
	wire.Ethernet(b).SetSrc(m)
	return b
}

// withBadTCPChecksum flips a bit of the TCP checksum field.
func withBadTCPChecksum(b []byte) []byte {
	b = append([]byte(nil), b...)
	ihl := int(b[14]&0x0f) * 4
	b[14+ihl+16] ^= 0x01
	return b
}

// withIPOptions inserts opts (a multiple of 4 bytes) after the 20-byte
// IPv4 header. The TCP checksum stays right: options are not part of
// the pseudo-header.
func withIPOptions(b []byte, opts []byte) []byte {
	out := append([]byte(nil), b[:14+20]...)
	out = append(out, opts...)
	out = append(out, b[14+20:]...)
	ip := wire.IPv4(out[14:])
	ip[0] = 0x40 | byte((20+len(opts))/4)
	tl := len(out) - 14
	ip[2], ip[3] = byte(tl>>8), byte(tl)
	return refixIP(out)
}

// lsrr is a loose source route through 198.18.5.5, padded with EOL.
var lsrr = []byte{0x83, 7, 4, 198, 18, 5, 5, 0}

// synFrom is the SYN of client c sent from source address src.
func synFrom(c *testClient, src wire.IP4) []byte {
	return frame(wire.TCPFrame{
		SrcMAC: routerMAC, DstMAC: feMAC, Src: src, Dst: c.vip, SrcPort: c.port, DstPort: c.vport,
		Seq: c.isn, Flags: wire.TCPFlagSYN, Window: 502, Options: synOpts(c.offer),
	})
}

// dropsNamed returns the front-end's drop counter called name (0 if no
// such reason exists).
func dropsNamed(h *feHarness, name string) uint64 {
	st := h.fe.Stats()
	for i := range NumDropReasons {
		if DropReasonName(i) == name {
			return st.Drops[i]
		}
	}
	return 0
}

// oddSYNs are SYNs with the headers of issue 9's "odd headers answered",
// each with the drop reason it must be counted under.
func oddSYNs(c *testClient) []struct {
	name, reason string
	frame        []byte
} {
	syn := c.syn()
	return []struct {
		name, reason string
		frame        []byte
	}{
		{"source 255.255.255.255", "martian-source", synFrom(c, ip4("255.255.255.255"))},
		{"source 240.0.0.1", "martian-source", synFrom(c, ip4("240.0.0.1"))},
		{"multicast source 224.0.0.1", "martian-source", synFrom(c, ip4("224.0.0.1"))},
		{"multicast source 239.1.2.3", "martian-source", synFrom(c, ip4("239.1.2.3"))},
		{"source 0.0.0.0", "martian-source", synFrom(c, ip4("0.0.0.0"))},
		{"source 0.1.2.3", "martian-source", synFrom(c, ip4("0.1.2.3"))},
		{"loopback source", "martian-source", synFrom(c, ip4("127.0.0.1"))},
		{"source the VIP itself", "own-source", synFrom(c, vipA)},
		{"source another VIP", "own-source", synFrom(c, vipB)},
		{"source the handoff address", "own-source", synFrom(c, handoffIP)},
		{"broadcast source MAC", "multicast-source-mac", withSrcMAC(syn, wire.BroadcastMAC)},
		{"multicast source MAC", "multicast-source-mac", withSrcMAC(syn, wire.MAC{0x01, 0x00, 0x5e, 0, 0, 1})},
		{"bad TCP checksum", "bad-tcp-checksum", withBadTCPChecksum(syn)},
		{"TTL 0", "ttl-zero", withTTL(syn, 0)},
		{"IP options (LSRR)", "ip-options", withIPOptions(syn, lsrr)},
	}
}

func TestAdversarialOddHeadersGetNoSynAck(t *testing.T) {
	c := newClient(41000, 0x31337, fullOffer(1))
	for _, tc := range oddSYNs(c) {
		t.Run(tc.name, func(t *testing.T) {
			h := newFE(t, nil)
			if out := h.input(tc.frame, t0); len(out.Frames) != 0 {
				t.Errorf("answered with %d frames", len(out.Frames))
			}
			if got := dropsNamed(h, tc.reason); got != 1 {
				t.Errorf("%s drops = %d, want 1", tc.reason, got)
			}
			if h.fe.Stats().SynCookiesSent != 0 || h.fe.Flows() != 0 {
				t.Errorf("a cookie was sent or a flow made")
			}
			h.checkCounters()
		})
	}
	// The same SYN with ordinary headers is answered (TTL 1 included):
	// the cases above fail for their header alone.
	h := newFE(t, nil)
	expectTCP(t, onlyFrame(t, h.input(withTTL(c.syn(), 1), t0)), flagsAre(wire.TCPFlagSYN|wire.TCPFlagACK))
}

// A segment whose checksum computes to 0x0000 verifies with 0xffff in
// the field as well (the other one's-complement zero; the kernel takes
// it): the front-end answers that SYN, as it answers the one with
// 0x0000, and refuses the same SYN with any other checksum. FuzzIngress
// found the case (its corpus keeps it): its check compared the field
// with the computed value and called the segment bad.
func TestIngressTakesEitherZeroChecksum(t *testing.T) {
	c := newClient(41000, 0x31337, fullOffer(1))
	syn := c.syn()
	seg := syn[34:]
	// Move the window until the checksum computes to 0x0000.
	for w := 0; w < 1<<16; w++ {
		wire.TCP(seg).SetWindow(uint16(w))
		if tcpChecksum(syn[26:30], syn[30:34], seg) == 0 {
			break
		}
	}
	if tcpChecksum(syn[26:30], syn[30:34], seg) != 0 {
		t.Fatal("no window gives a checksum of 0x0000")
	}
	for _, tc := range []struct {
		field  uint16
		answer bool
	}{{0x0000, true}, {0xffff, true}, {0xfffe, false}, {0x0001, false}} {
		wire.TCP(seg).SetChecksum(tc.field)
		h := newFE(t, nil)
		out := h.input(append([]byte(nil), syn...), t0)
		if tc.answer {
			expectTCP(t, onlyFrame(t, out), flagsAre(wire.TCPFlagSYN|wire.TCPFlagACK))
		} else if len(out.Frames) != 0 || dropsNamed(h, "bad-tcp-checksum") != 1 {
			t.Errorf("checksum %#04x: answered with %d frames, %d bad-checksum drops", tc.field, len(out.Frames), dropsNamed(h, "bad-tcp-checksum"))
		}
		h.checkCounters()
	}
}

// A request with a bad TCP checksum is neither acknowledged nor reported
// (scheduled); the same bytes with a good checksum are.
func TestAdversarialBadChecksumRequestIsNotAcknowledged(t *testing.T) {
	h := newFE(t, nil)
	c := newClient(41001, 0x4000, fullOffer(10))
	c.handshake(t, h, t0)
	req := c.data([]byte(shortRequest))
	out := h.input(withBadTCPChecksum(req), t0+ms)
	if len(out.Frames) != 0 || len(out.Events) != 0 {
		t.Fatalf("bad-checksum request answered with %d frames, %d events", len(out.Frames), len(out.Events))
	}
	if got := dropsNamed(h, "bad-tcp-checksum"); got != 1 {
		t.Errorf("bad-tcp-checksum drops = %d, want 1", got)
	}
	out = h.input(req, t0+2*ms)
	expectTCP(t, onlyFrame(t, out), ackIs(c.nxt), flagsAre(wire.TCPFlagACK))
	onlyEvent(t, out, EvRequest)
	h.checkCounters()
}

// A final handshake ACK with a bad checksum makes no connection, whatever
// its cookie.
func TestAdversarialBadChecksumFinalACKMakesNoFlow(t *testing.T) {
	h := newFE(t, nil)
	c := newClient(41002, 0x5000, fullOffer(10))
	sa := expectTCP(t, onlyFrame(t, h.input(c.syn(), t0)))
	ack := finalACK(c, sa, nil)
	if out := h.input(withBadTCPChecksum(ack), t0+ms); len(out.Frames) != 0 || h.fe.Flows() != 0 {
		t.Fatalf("bad-checksum final ACK: %d frames, %d flows", len(out.Frames), h.fe.Flows())
	}
	h.input(ack, t0+ms)
	if h.fe.Flows() != 1 {
		t.Fatalf("the good final ACK made %d flows", h.fe.Flows())
	}
	h.checkCounters()
}

// Client segments of a spliced flow with odd headers are not forwarded to
// the back-end: IP options (a source route) would reach it otherwise.
func TestAdversarialOddHeadersAreNotForwarded(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	c := sc.c
	seg := c.seg(wire.TCPFlagACK|wire.TCPFlagPSH, c.nxt, c.isnF+1, []byte("body"))
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"IP options (LSRR)", withIPOptions(seg, lsrr)},
		{"TTL 0", withTTL(seg, 0)},
		{"bad TCP checksum", withBadTCPChecksum(seg)},
		{"broadcast source MAC", withSrcMAC(seg, wire.BroadcastMAC)},
	} {
		before := sc.h.fe.Stats().ForwardedFrames
		if out := sc.h.input(tc.frame, sc.now+ms); len(out.Frames) != 0 {
			t.Errorf("%s: %d frames out", tc.name, len(out.Frames))
		}
		if sc.h.fe.Stats().ForwardedFrames != before {
			t.Errorf("%s: forwarded", tc.name)
		}
	}
	sc.forward(t, seg) // the segment itself goes through
	sc.h.checkCounters()
}

// The shim drops the same frames arriving from the wire for its host: the
// host kernel would answer some (TTL 0, broadcast sources), act on
// others (IP options), and a request with a bad checksum would start the
// service-time measurement though the kernel then drops it.
func TestAdversarialShimDropsOddHeadersFromTheWire(t *testing.T) {
	mk := func(sc *shimConn, src wire.IP4, payload []byte) []byte {
		return frame(wire.TCPFrame{
			SrcMAC: feMAC, DstMAC: backendMAC, Src: src, Dst: backendIP, SrcPort: shimHandoffPort, DstPort: webPort,
			Seq: sc.cliSeq, Ack: sc.srv.nxt, Flags: wire.TCPFlagACK | wire.TCPFlagPSH, Window: 300,
			Options: segOpts(&[2]uint32{sc.cliTS, sc.srv.tsVal}), Payload: payload,
		})
	}
	req := []byte("GET / HTTP/1.1\r\n\r\n")
	badIP := func(sc *shimConn) []byte {
		b := mk(sc, handoffIP, req)
		b[14+10] ^= 0xff
		return b
	}
	type stats = ShimStats
	cases := []struct {
		name    string
		frame   func(sc *shimConn) []byte
		counter func(st stats) uint64
	}{
		{"bad TCP checksum", func(sc *shimConn) []byte { return withBadTCPChecksum(mk(sc, handoffIP, req)) },
			func(st stats) uint64 { return st.IngressBadTCPChecksum }},
		{"bad IP checksum", badIP, func(st stats) uint64 { return st.IngressBadIPChecksum }},
		{"loopback source", func(sc *shimConn) []byte { return mk(sc, ip4("127.0.0.1"), req) },
			func(st stats) uint64 { return st.IngressMartianSource }},
		{"source 0.0.0.0", func(sc *shimConn) []byte { return mk(sc, ip4("0.0.0.0"), req) },
			func(st stats) uint64 { return st.IngressMartianSource }},
		{"multicast source", func(sc *shimConn) []byte { return mk(sc, ip4("224.0.0.5"), req) },
			func(st stats) uint64 { return st.IngressMartianSource }},
		{"source 255.255.255.255", func(sc *shimConn) []byte { return mk(sc, ip4("255.255.255.255"), req) },
			func(st stats) uint64 { return st.IngressMartianSource }},
		{"source the host itself", func(sc *shimConn) []byte { return mk(sc, backendIP, req) },
			func(st stats) uint64 { return st.IngressOwnSource }},
		{"broadcast source MAC", func(sc *shimConn) []byte { return withSrcMAC(mk(sc, handoffIP, req), wire.BroadcastMAC) },
			func(st stats) uint64 { return st.IngressMulticastMAC }},
		{"TTL 0", func(sc *shimConn) []byte { return withTTL(mk(sc, handoffIP, req), 0) },
			func(st stats) uint64 { return st.IngressTTLZero }},
		{"IP options (LSRR)", func(sc *shimConn) []byte { return withIPOptions(mk(sc, handoffIP, req), lsrr) },
			func(st stats) uint64 { return st.IngressIPOptions }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, nil)
			if out := sc.h.input(PortWire, tc.frame(sc), t0+ms); len(out.Frames) != 0 {
				t.Errorf("passed %d frames to the host", len(out.Frames))
			}
			if sc.h.sh.Active() != 0 {
				t.Errorf("the dropped request started a service-time measurement")
			}
			if st := sc.h.sh.Stats(); tc.counter(st) != 1 || st.IngressDrops() != 1 {
				t.Errorf("counters %+v, want this reason's at 1 and no other", st)
			}
			sc.h.checkCounters()
		})
	}
	// The same request with ordinary headers passes and is measured.
	sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, nil)
	good := mk(sc, handoffIP, req)
	if out := sc.h.input(PortWire, good, t0+ms); len(out.Frames) != 1 || out.Frames[0].Port != PortHost {
		t.Fatalf("good request: %d frames out", len(out.Frames))
	}
	if sc.h.sh.Active() != 1 {
		t.Errorf("good request not measured")
	}
}

// feInputVNet feeds the front-end a frame with a virtio-net header.
func (h *feHarness) inputVNet(frame []byte, vh wire.VNetHdr, now Time) *Output {
	h.out.Reset()
	h.fe.InputVNet(append([]byte(nil), frame...), vh, now, &h.out)
	h.inputs++
	h.frames += uint64(len(h.out.Frames))
	return &h.out
}

// What the kernel verified (DATA_VALID) or made itself (NEEDS_CSUM) is
// not checked again; that is what makes the check cheap on links with
// offloads. The shim never judges the host kernel's own frames.
func TestIngressTrustsTheKernelsChecksumVerdict(t *testing.T) {
	valid := wire.VNetHdr{Flags: wire.VNetFlagDataValid}
	c := newClient(41003, 0x6000, fullOffer(1))
	bad := withBadTCPChecksum(c.syn())

	h := newFE(t, nil)
	if out := h.inputVNet(bad, valid, t0); len(out.Frames) != 1 {
		t.Errorf("front-end: a SYN the kernel vouched for got %d frames", len(out.Frames))
	}
	// A partial checksum is completed in place and the frame is taken:
	// the SYN-ACK is the same as for the plain SYN.
	partial := c.syn()
	vh := toPartial(t, partial, 0)
	a := onlyFrame(t, h.inputVNet(partial, vh, t0))
	b := onlyFrame(t, h.input(c.syn(), t0))
	if string(a) != string(b) {
		t.Errorf("SYN with a partial checksum answered differently from the plain SYN")
	}
	// A super-frame must be cut by the caller.
	super := c.seg(wire.TCPFlagACK, c.nxt, 1, make([]byte, 3000))
	if out := h.inputVNet(super, toPartial(t, super, 1448), t0); len(out.Frames) != 0 || dropsNamed(h, "malformed") != 1 {
		t.Errorf("super-frame: %d frames out, %d malformed", len(out.Frames), dropsNamed(h, "malformed"))
	}
	h.checkCounters()

	sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, nil)
	req := withBadTCPChecksum(sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, sc.srv.nxt, []byte("GET /")))
	for _, tc := range []struct {
		name string
		port Port
		vh   wire.VNetHdr
	}{
		{"wire, DATA_VALID", PortWire, valid},
		{"wire, NEEDS_CSUM", PortWire, wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: 34, CsumOffset: wire.TCPChecksumOff}},
		{"host", PortHost, wire.VNetHdr{}},
	} {
		if out := sc.h.inputVNet(tc.port, req, tc.vh, t0+ms); len(out.Frames) != 1 {
			t.Errorf("shim, %s: %d frames out", tc.name, len(out.Frames))
		}
	}
	if st := sc.h.sh.Stats(); st.IngressDrops() != 0 {
		t.Errorf("shim counted ingress drops: %+v", st)
	}
	sc.h.checkCounters()
}

// The shim judges frames for its host only: a DHCP discover from 0.0.0.0
// to the broadcast address, or a frame for another host on a promiscuous
// link, is the kernel's to judge.
func TestShimIngressLeavesOtherDestinationsToTheKernel(t *testing.T) {
	sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, nil)
	other := frame(wire.TCPFrame{SrcMAC: routerMAC, DstMAC: wire.BroadcastMAC, Src: ip4("0.0.0.0"), Dst: ip4("255.255.255.255"),
		SrcPort: 68, DstPort: 67, Flags: wire.TCPFlagSYN})
	forOther := withTTL(frame(wire.TCPFrame{SrcMAC: routerMAC, DstMAC: backendMAC, Src: clientIP, Dst: otherIP,
		SrcPort: 1, DstPort: 2, Flags: wire.TCPFlagSYN}), 0)
	for _, f := range [][]byte{other, forOther} {
		if out := sc.h.input(PortWire, f, t0); len(out.Frames) != 1 {
			t.Errorf("frame not for the host: %d frames out", len(out.Frames))
		}
	}
	sc.h.checkCounters()
}

// A wrong IPv4 header checksum is counted apart from other malformed
// frames.
func TestFrontEndCountsBadIPChecksumApart(t *testing.T) {
	h := newFE(t, nil)
	syn := newClient(41004, 1, fullOffer(1)).syn()
	syn[14+10] ^= 0x40
	if out := h.input(syn, t0); len(out.Frames) != 0 {
		t.Fatalf("answered a SYN with a bad IPv4 checksum")
	}
	if dropsNamed(h, "bad-ip-checksum") != 1 || dropsNamed(h, "malformed") != 0 {
		t.Errorf("bad-ip-checksum %d, malformed %d", dropsNamed(h, "bad-ip-checksum"), dropsNamed(h, "malformed"))
	}
	h.checkCounters()
}

// The checks on the paths every frame takes allocate nothing: a client
// segment verified in software and one the kernel vouched for, and a
// frame from the wire through the shim's check.
func TestIngressChecksAllocateNothing(t *testing.T) {
	fe, tmpl, now := forwardBench(t)
	frame := make([]byte, len(tmpl))
	var out Output
	for _, vh := range []wire.VNetHdr{{}, {Flags: wire.VNetFlagDataValid}} {
		before := fe.Stats().ForwardedFrames
		allocs := testing.AllocsPerRun(100, func() {
			copy(frame, tmpl)
			out.Reset()
			fe.InputVNet(frame, vh, now, &out)
		})
		if allocs != 0 || fe.Stats().ForwardedFrames-before != 101 {
			t.Errorf("front-end, header %+v: %v allocations, %d forwarded", vh, allocs, fe.Stats().ForwardedFrames-before)
		}
	}
	sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, nil)
	wtmpl := sc.fromFrontEnd(wire.TCPFlagACK, sc.srv.nxt, make([]byte, 1460))
	wframe := make([]byte, len(wtmpl))
	before := sc.h.sh.Stats().WireToHost
	allocs := testing.AllocsPerRun(100, func() {
		copy(wframe, wtmpl)
		out.Reset()
		sc.h.sh.Input(PortWire, wframe, t0+s1, &out)
	})
	if allocs != 0 || sc.h.sh.Stats().WireToHost-before != 101 {
		t.Errorf("shim from the wire: %v allocations, %d passed", allocs, sc.h.sh.Stats().WireToHost-before)
	}
}

// FuzzIngress feeds both engines arbitrary frames whose checksums are
// left as they are (the other fuzzers fix them): a TCP segment whose
// checksum does not verify must get no answer from the front-end, and
// must not pass the shim from the wire to its host.
func FuzzIngress(f *testing.F) {
	c := newClient(41005, 0x7000, fullOffer(3))
	f.Add(c.syn())
	f.Add(withBadTCPChecksum(c.syn()))
	f.Add(withIPOptions(c.syn(), lsrr))
	f.Add(withTTL(c.syn(), 0))
	sc := newShimConn(f, ShimConfig{}, 0x1000, 0x2000, nil)
	f.Add(withBadTCPChecksum(sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, sc.srv.nxt, []byte("GET /"))))
	f.Fuzz(func(t *testing.T, frame []byte) {
		frame = append([]byte(nil), frame...)
		fixIPChecksum(frame)
		var p wire.Packet
		err := wire.Parse(frame, &p)
		parsed := err == nil
		badTCP := parsed && p.Kind == wire.KindTCP && !tcpChecksumVerifies(p.IP[12:16], p.IP[16:20], p.TCP)
		odd := parsed && p.IP != nil && (martianSource(p.IP.Src()) || p.IP.TTL() == 0 || p.IP.HeaderLen() > 20) ||
			len(frame) >= 14 && frame[6]&1 != 0

		h := newFE(t, nil)
		out := h.input(frame, t0)
		if (badTCP || odd) && len(out.Frames) != 0 {
			t.Fatalf("front-end answered a frame with odd headers (bad TCP checksum %v)", badTCP)
		}
		h.checkCounters()

		sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, nil)
		out = sc.h.input(PortWire, frame, t0+ms)
		forHost := parsed && p.IP != nil && p.IP.Dst() == backendIP
		refuse := forHost && (badTCP || odd || p.IP.Src() == backendIP) ||
			err == wire.ErrBadIPChecksum && wire.IP4(frame[30:34]) == backendIP
		if refuse && len(out.Frames) != 0 {
			t.Fatalf("shim passed a frame with odd headers to its host")
		}
		if !refuse && len(out.Frames) != 1 {
			t.Fatalf("shim dropped a frame it has no reason to drop: %d frames out", len(out.Frames))
		}
		sc.h.checkCounters()
	})
}

// A back-end registered at a martian address (the daemon's tests run one
// on the loopback) still completes its handoff, while any other segment
// from such an address to the handoff address is dropped unanswered (a
// stale-C2 RST would otherwise go to it).
func TestIngressMartianBackendOnlyForItsOwnFlow(t *testing.T) {
	p := defaultSpliceParams()
	h := newFE(t, nil)
	c := newClient(testRequestPort, p.clientISN, p.offer)
	id := queuedRequest(t, h, c, shortRequest)
	be := testBackend
	be.IP = ip4("127.0.0.1").Addr()
	syn := expectTCP(t, onlyFrame(t, h.call(func(out *Output) {
		if err := h.fe.Dispatch(id, be, t0+2*ms, out); err != nil {
			t.Fatal(err)
		}
	})))
	srv := newServer(p.backendISN, p.answer)
	srv.ip = ip4("127.0.0.1")
	out := h.input(srv.synAck(syn), t0+3*ms)
	onlyEvent(t, out, EvSplice)

	stray := newServer(1, p.answer)
	stray.ip, stray.peerPort = ip4("127.0.0.2"), srv.peerPort
	if out := h.input(stray.seg(wire.TCPFlagACK, 5, 5, nil), t0+4*ms); len(out.Frames) != 0 {
		t.Errorf("answered a C2 segment from another loopback address")
	}
	if dropsNamed(h, "martian-source") != 1 {
		t.Errorf("martian-source drops = %d, want 1", dropsNamed(h, "martian-source"))
	}
	h.checkCounters()
}

// onesSum is wire.Fold of wire.Sum, for every length around the loops'
// strides and for words that make every carry happen.
func TestOnesSumEqualsWireSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for n := range 200 {
		for _, fill := range []string{"random", "ones", "zeros"} {
			b := make([]byte, n)
			for i := range b {
				switch fill {
				case "random":
					b[i] = byte(rng.Uint32())
				case "ones":
					b[i] = 0xff
				}
			}
			for _, init := range []uint16{0, 1, 0xfffe, 0xffff, uint16(rng.Uint32())} {
				if got, want := onesSum(b, init), wire.Fold(wire.Sum(b, uint32(init))); got != want {
					t.Fatalf("%d %s bytes, initial %#x: onesSum %#x, wire.Sum %#x", n, fill, init, got, want)
				}
			}
		}
	}
}

func BenchmarkOnesSum1480(b *testing.B) {
	buf := make([]byte, 1480)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		onesSum(buf, 0x1234)
	}
}

func BenchmarkWireSum1480(b *testing.B) {
	buf := make([]byte, 1480)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		wire.Fold(wire.Sum(buf, 0x1234))
	}
}
