package splice

// Fuzz targets: arbitrary frames into fresh and spliced engines. Whatever
// comes in, the engines must not panic, must count every frame they emit,
// must emit only frames that parse (with checksums equal to a full
// recompute whenever the input's were), must never let an untranslated
// reply through towards a client, and must forget everything once their
// timers have run.

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// fixIPChecksum sets a fuzzed frame's IPv4 header checksum right, so that
// inputs get past the parser into the engine.
func fixIPChecksum(b []byte) {
	if len(b) < 34 || binary.BigEndian.Uint16(b[12:]) != wire.EtherTypeIPv4 {
		return
	}
	hl := int(b[14]&0x0f) * 4
	if hl < 20 || 14+hl > len(b) {
		return
	}
	c := ipChecksum(b[14 : 14+hl])
	b[24], b[25] = byte(c>>8), byte(c)
}

// fixTCPChecksum sets a fuzzed TCP segment's checksum right too, so that
// inputs get past the ingress checks (FuzzIngress feeds wrong ones).
func fixTCPChecksum(b []byte) {
	var p wire.Packet
	if wire.Parse(b, &p) != nil || p.Kind != wire.KindTCP {
		return
	}
	p.TCP.SetChecksum(0)
	p.TCP.SetChecksum(tcpChecksum(p.IP[12:16], p.IP[16:20], p.TCP))
}

// fuzzOptions turns fuzzed bytes into a TCP option area: at most 40
// bytes, padded with EOL to a multiple of 4.
func fuzzOptions(o []byte) []byte {
	o = append([]byte(nil), o[:min(len(o), 40)]...)
	for len(o)%4 != 0 {
		o = append(o, wire.OptEOL)
	}
	return o
}

// fuzzVNet reads a virtio-net header from fuzzed bytes, missing ones zero.
func fuzzVNet(b []byte) wire.VNetHdr {
	var buf [wire.VNetHdrLen]byte
	copy(buf[:], b)
	vh, _ := wire.DecodeVNetHdr(buf[:])
	return vh
}

// exactOnTheWire reports whether frame f with header vh has exact
// checksums once a device completed its checksum as vh says: over the
// packet (Ethernet padding cut), the partial field included. A super-frame
// is completed whole, as one long segment, which is right exactly when
// its partial field is (the tests in shim_vnet_test.go cut super-frames
// as Linux does; here a fuzzed GSO size of 1 would make that cost more
// than the engine). The checksums are not exact when vh cannot apply to
// f: a checksum field outside the packet, or a segmentation that is not
// of a TCPv4 frame with a partial checksum in its TCP checksum field.
func exactOnTheWire(f []byte, vh wire.VNetHdr) (ok bool, why string) {
	if !vh.NeedsCsum() && !vh.IsGSO() {
		return checksumsExact(f)
	}
	var p wire.Packet
	if wire.Parse(f, &p) != nil || !vh.NeedsCsum() || int(vh.CsumStart)+int(vh.CsumOffset)+2 > p.End ||
		vh.IsGSO() && (p.Kind != wire.KindTCP || vh.GSOType&^wire.GSOECN != wire.GSOTCPv4 || vh.GSOSize == 0 ||
			int(vh.CsumStart) != p.L4 || vh.CsumOffset != wire.TCPChecksumOff) {
		return false, fmt.Sprintf("header %+v does not fit the frame", vh)
	}
	g := append([]byte(nil), f[:p.End]...)
	completeLikeDevice(g, vh)
	return checksumsExact(g)
}

// checkEmitted asserts every frame out parses, and, when exact is set, has
// exact checksums once the device completed them as its vnet header says.
func checkEmitted(t *testing.T, out *Output, exact bool) {
	t.Helper()
	for i, f := range out.Frames {
		var p wire.Packet
		if err := wire.Parse(f.Data, &p); err != nil {
			t.Fatalf("frame %d out does not parse: %v\n%x", i, err, f.Data)
		}
		if ok, why := exactOnTheWire(f.Data, f.VNet); exact && !ok {
			t.Fatalf("frame %d out: %s\n%x", i, why, f.Data)
		}
	}
}

// drainFE runs the front-end's timers to the end and expects no flow left.
func drainFE(t *testing.T, h *feHarness, now Time) {
	t.Helper()
	for i := 0; h.fe.NextDeadline() != Never; i++ {
		if i > 1000 {
			t.Fatalf("timers still due after 1000 ticks")
		}
		now = max(now, h.fe.NextDeadline())
		checkEmitted(t, h.tick(now), true)
	}
	if h.fe.Flows() != 0 {
		t.Fatalf("%d flows left after every timer ran", h.fe.Flows())
	}
	h.checkCounters()
}

func drainShim(t *testing.T, h *shimHarness, now Time) {
	t.Helper()
	for i := 0; h.sh.NextDeadline() != Never; i++ {
		if i > 1000 {
			t.Fatalf("timers still due after 1000 ticks")
		}
		now = max(now, h.sh.NextDeadline())
		h.tick(now)
	}
	if h.sh.Entries() != 0 || h.sh.Active() != 0 {
		t.Fatalf("%d entries, %d active after every timer ran", h.sh.Entries(), h.sh.Active())
	}
	h.checkCounters()
}

func FuzzFrontEndInput(f *testing.F) {
	// Seeds: a SYN, the final ACK with a valid cookie carrying a request,
	// a RST, an ARP request, an ICMP, a stale C2 segment.
	h := newFE(f, nil)
	c := newClient(40100, 0x1234, fullOffer(99))
	f.Add(c.syn(), uint16(0))
	sa := decodeTCP(f, onlyFrame(f, h.input(c.syn(), t0)))
	f.Add(c.frame(wire.TCPFlagACK|wire.TCPFlagPSH, c.isn+1, sa.seq()+1, nil, []byte(shortRequest)), uint16(0))
	f.Add(c.frame(wire.TCPFlagRST, c.isn+1, 0, nil, nil), uint16(1))
	f.Add(arpRequest(routerMAC, routerIP, vipA), uint16(2))
	f.Add(icmpFragNeeded(c, 5), uint16(3))
	srv := newServer(9, wire.SynOptions{})
	srv.peerPort = 20000
	f.Add(srv.seg(wire.TCPFlagACK, 9, 9, []byte("x")), uint16(4))

	f.Fuzz(func(t *testing.T, frame []byte, at uint16) {
		h := newFE(t, nil)
		now := t0 + Time(at)*ms
		frame = append([]byte(nil), frame...)
		fixIPChecksum(frame)
		fixTCPChecksum(frame)
		// A fresh engine forwards nothing: every frame out is its own.
		checkEmitted(t, h.input(frame, now), true)
		h.checkCounters()
		drainFE(t, h, now)
	})
}

func FuzzFrontEndInputSpliced(f *testing.F) {
	p := defaultSpliceParams()
	f.Add(uint8(wire.TCPFlagACK), uint32(p.clientISN+100), uint32(1), uint16(502), segOpts(&[2]uint32{1, 2}, wire.SACKBlock{Left: 5, Right: 9}), []byte("data"), false)
	f.Add(uint8(wire.TCPFlagACK|wire.TCPFlagFIN), uint32(1), uint32(2), uint16(3), []byte{1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}, []byte(nil), false)
	f.Add(uint8(wire.TCPFlagRST), uint32(p.clientISN+1), uint32(0), uint16(0), []byte(nil), []byte(nil), false)
	f.Add(uint8(wire.TCPFlagSYN), uint32(7), uint32(0), uint16(0), synOpts(fullOffer(3)), []byte(nil), false)
	f.Add(uint8(wire.TCPFlagACK|wire.TCPFlagFIN), uint32(p.backendISN+1), uint32(p.clientISN+1), uint16(9), []byte(nil), []byte(nil), true)
	f.Add(uint8(wire.TCPFlagACK|wire.TCPFlagRST), uint32(p.backendISN+1), uint32(p.clientISN+1), uint16(9), []byte{5, 10, 0, 0, 0, 1, 0, 0, 0, 2}, []byte(nil), true)

	f.Fuzz(func(t *testing.T, flags uint8, seq, ack uint32, window uint16, opts, payload []byte, fromBackend bool) {
		sc := connectSpliced(t, defaultSpliceParams())
		o := fuzzOptions(opts)
		payload = payload[:min(len(payload), 1400)]
		// A client segment on the spliced tuple, or a back-end segment on
		// C2 as the shim copies them.
		tf := wire.TCPFrame{SrcMAC: routerMAC, DstMAC: feMAC, Src: clientIP, Dst: vipA,
			SrcPort: sc.c.port, DstPort: webPort}
		if fromBackend {
			tf = wire.TCPFrame{SrcMAC: testBackend.MAC, DstMAC: feMAC, Src: backendIP, Dst: handoffIP,
				SrcPort: webPort, DstPort: sc.sp.HandoffPort}
		}
		tf.Seq, tf.Ack, tf.Flags, tf.Window, tf.Options, tf.Payload = wire.Seq(seq), wire.Seq(ack), flags, window, o, payload
		// The input's checksums are exact, so whatever is forwarded or
		// built must be exact too.
		checkEmitted(t, sc.h.input(frame(tf), sc.now+ms), true)
		sc.h.checkCounters()
		drainFE(t, sc.h, sc.now+ms)
	})
}

// checkShimOut asserts what a shim emitted for a frame on port with vnet
// header vh: frames either pass unchanged with their header or are
// translated towards the client with it, copies to the front-end carry no
// payload and the zero header, and a reply of the spliced connection never
// reaches the wire in its own numbers. If the input would have left the
// device with exact checksums, so must every frame out.
func checkShimOut(t *testing.T, sc *shimConn, port Port, in []byte, vh wire.VNetHdr, out *Output) {
	t.Helper()
	if port == PortWire && sc.h.sh.Stats().IngressDrops() > 0 {
		// Refused for its headers (ingress.go): nothing goes anywhere.
		if len(out.Frames) != 0 {
			t.Fatalf("frame refused at ingress still sent %d frames", len(out.Frames))
		}
		return
	}
	inExact, _ := exactOnTheWire(in, vh)
	var p wire.Packet
	spliced := port == PortHost && wire.Parse(in, &p) == nil && p.Kind == wire.KindTCP &&
		p.IP.Src() == backendIP && p.IP.Dst() == handoffIP &&
		p.TCP.SrcPort() == webPort && p.TCP.DstPort() == shimHandoffPort && !p.TCP.Has(wire.TCPFlagSYN)
	if !spliced {
		// Everything else passes as it came, broken frames included.
		if len(out.Frames) != 1 || string(out.Frames[0].Data) != string(in) || out.Frames[0].VNet != vh {
			t.Fatalf("frame not on the spliced reply path was changed, dropped or multiplied")
		}
		return
	}
	checkEmitted(t, out, inExact)
	for i, f := range out.Frames {
		var q wire.Packet
		wire.Parse(f.Data, &q)
		switch {
		case q.Kind != wire.KindTCP:
			t.Fatalf("frame %d out of a TCP reply is not TCP", i)
		case q.IP.Dst() == handoffIP:
			if len(q.TCP.Payload()) != 0 || f.VNet != (wire.VNetHdr{}) {
				t.Fatalf("copy to the front-end carries %d payload bytes, header %+v", len(q.TCP.Payload()), f.VNet)
			}
		case q.IP.Src() != vipA || q.IP.Dst() != clientIP || wire.Ethernet(f.Data).Dst() != routerMAC:
			t.Fatalf("reply left as %v -> %v, not translated", q.IP.Src(), q.IP.Dst())
		case f.VNet != vh:
			t.Fatalf("translated reply left with header %+v, came with %+v", f.VNet, vh)
		}
	}
}

// vnetSeed encodes a header for a fuzz seed.
func vnetSeed(vh wire.VNetHdr) []byte {
	b := make([]byte, wire.VNetHdrLen)
	vh.Encode(b)
	return b
}

// Seed headers: a TSO super-frame and a partial checksum, as the host
// kernel hands them over for the seeds' frames, and a GRO'd frame.
var (
	seedSuper   = vnetSeed(wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, GSOType: wire.GSOTCPv4, HdrLen: 66, GSOSize: 7, CsumStart: 34, CsumOffset: wire.TCPChecksumOff})
	seedPartial = vnetSeed(wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: 34, CsumOffset: wire.TCPChecksumOff})
	seedGRO     = vnetSeed(wire.VNetHdr{Flags: wire.VNetFlagDataValid, GSOType: wire.GSOTCPv4, HdrLen: 66, GSOSize: 1448})
)

func FuzzShimInput(f *testing.F) {
	sc := newShimConn(f, ShimConfig{}, 0x1000, 0x2000, nil)
	f.Add(sc.srv.reply([]byte("HTTP/1.1 200 OK\r\n")), true, []byte(nil))
	f.Add(sc.srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, sc.srv.nxt, sc.cliSeq, nil), true, []byte(nil))
	f.Add(sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, sc.srv.nxt, []byte("GET / HTTP/1.1\r\n\r\n")), false, []byte(nil))
	f.Add(sc.fromFrontEnd(wire.TCPFlagRST, 0, nil), false, []byte(nil))
	f.Add(arpRequest(routerMAC, routerIP, backendIP), false, []byte(nil))
	f.Add(icmpFragNeeded(newClient(1, 1, fullOffer(1)), 1), true, []byte(nil))
	super := sc.srv.reply(make([]byte, 40))
	toPartial(f, super, 7)
	f.Add(super, true, seedSuper)
	partial := sc.srv.reply([]byte("HTTP/1.1 200 OK\r\n"))
	toPartial(f, partial, 0)
	f.Add(partial, true, seedPartial)
	f.Add(sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, sc.srv.nxt, make([]byte, 3000)), false, seedGRO)

	f.Fuzz(func(t *testing.T, frame []byte, fromHost bool, vnet []byte) {
		sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, nil)
		frame = append([]byte(nil), frame...)
		fixIPChecksum(frame)
		vh := fuzzVNet(vnet)
		if !vh.NeedsCsum() {
			fixTCPChecksum(frame) // a partial checksum stays as the seed has it
		}
		port := PortWire
		if fromHost {
			port = PortHost
		}
		checkShimOut(t, sc, port, frame, vh, sc.h.inputVNet(port, frame, vh, t0+ms))
		sc.h.checkCounters()
		drainShim(t, sc.h, t0+ms)
	})
}

func FuzzShimInputSpliced(f *testing.F) {
	f.Add(uint8(wire.TCPFlagACK|wire.TCPFlagPSH), uint32(0x1001), uint32(0x2001+100), uint16(1000), segOpts(&[2]uint32{1, 2}), []byte("reply"), true, []byte(nil))
	f.Add(uint8(wire.TCPFlagACK|wire.TCPFlagFIN), uint32(0x1001), uint32(0x2001), uint16(0), []byte{1, 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}, []byte(nil), true, []byte(nil))
	f.Add(uint8(wire.TCPFlagRST), uint32(0), uint32(0), uint16(1), []byte(nil), []byte(nil), true, []byte(nil))
	f.Add(uint8(wire.TCPFlagACK|wire.TCPFlagPSH), uint32(0x2001), uint32(0x1001), uint16(300), segOpts(&[2]uint32{1, 2}), []byte("GET /"), false, []byte(nil))
	f.Add(uint8(wire.TCPFlagACK|wire.TCPFlagPSH|wire.TCPFlagCWR), uint32(0xfffffff0), uint32(0x2001+100), uint16(1000), segOpts(&[2]uint32{0xfffffff0, 2}), make([]byte, 1000), true, seedSuper)
	f.Add(uint8(wire.TCPFlagACK|wire.TCPFlagFIN), uint32(0x1001), uint32(0x2001), uint16(7), []byte{1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 0}, []byte("odd"), true, seedPartial)
	f.Add(uint8(wire.TCPFlagACK|wire.TCPFlagPSH), uint32(0x2001), uint32(0x1001), uint16(300), segOpts(&[2]uint32{1, 2}), make([]byte, 1400), false, seedGRO)

	f.Fuzz(func(t *testing.T, flags uint8, seq, ack uint32, window uint16, opts, payload []byte, fromHost bool, vnet []byte) {
		sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, nil)
		o := fuzzOptions(opts)
		payload = payload[:min(len(payload), 1400)]
		port := PortWire
		tf := wire.TCPFrame{SrcMAC: feMAC, DstMAC: backendMAC, Src: handoffIP, Dst: backendIP,
			SrcPort: shimHandoffPort, DstPort: webPort}
		if fromHost {
			port = PortHost
			tf = wire.TCPFrame{SrcMAC: hostMAC, DstMAC: feMAC, Src: backendIP, Dst: handoffIP,
				SrcPort: webPort, DstPort: shimHandoffPort}
		}
		tf.Seq, tf.Ack, tf.Flags, tf.Window, tf.Options, tf.Payload = wire.Seq(seq), wire.Seq(ack), flags, window, o, payload
		in := frame(tf)
		vh := fuzzVNet(vnet)
		if vh.NeedsCsum() {
			// The kernel's partial sum, wherever the header says it is:
			// a header that points elsewhere must not get the frame out.
			wire.TCP(in[34:]).SetChecksum(wire.PartialChecksum(tf.Src, tf.Dst, len(in)-34))
		}
		checkShimOut(t, sc, port, in, vh, sc.h.inputVNet(port, in, vh, t0+ms))
		sc.h.checkCounters()
		drainShim(t, sc.h, t0+ms)
	})
}
