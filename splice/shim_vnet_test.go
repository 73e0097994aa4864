package splice

// The shim on links with virtio-net headers: TSO super-frames from the
// host kernel are translated whole, partial checksums stay partial, and
// everything else passes with its header. The proof that a translated
// super-frame is right is what the kernel makes of it: segmentLikeLinux
// cuts it as tcp_gso_segment does, deriving every segment's checksum from
// the super-frame's partial sum, and each segment must then decode with
// exact checksums and the numbers of the segment the server meant.

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// superMSS is the segment size of the super-frames in these tests: a
// 1500-byte MTU less the IPv4, TCP and timestamp option headers.
const superMSS = 1448

// toPartial turns a frame's complete TCP checksum into the partial one a
// kernel leaves to the device (the pseudo-header's sum, not complemented)
// and returns the header it would come with: NEEDS_CSUM, and a TCPv4
// segmentation into mss-byte segments when mss is not zero.
func toPartial(tb testing.TB, f []byte, mss uint16) wire.VNetHdr {
	tb.Helper()
	var p wire.Packet
	if err := wire.Parse(f, &p); err != nil || p.Kind != wire.KindTCP {
		tb.Fatalf("toPartial: not a TCP frame: %v", err)
	}
	p.TCP.SetChecksum(wire.PartialChecksum(p.IP.Src(), p.IP.Dst(), len(p.TCP)))
	vh := wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: uint16(p.L4), CsumOffset: wire.TCPChecksumOff}
	if mss != 0 {
		vh.GSOType, vh.GSOSize, vh.HdrLen = wire.GSOTCPv4, mss, uint16(p.L4+p.TCP.HeaderLen())
	}
	return vh
}

// completeLikeDevice stores the checksum a device computes for a
// NEEDS_CSUM frame: the complement of the sum from CsumStart to the end,
// the partial field included. Written with the checker's naive sum.
func completeLikeDevice(f []byte, vh wire.VNetHdr) {
	if !vh.NeedsCsum() {
		return
	}
	start := int(vh.CsumStart)
	binary.BigEndian.PutUint16(f[start+int(vh.CsumOffset):], naiveFinish(naiveSum(f[start:], 0)))
}

// segmentLikeLinux returns the frames the kernel sends for f with header
// vh, each with complete checksums. A super-frame is cut as Linux's
// tcp_gso_segment does: headers copied, IPv4 length, ID and checksum
// redone, the sequence number advanced, FIN and PSH kept for the last
// segment and CWR for the first, and the TCP checksum derived from the
// super-frame's partial field: adjusted, as a plain sum, from the
// super-frame's length to the segment's, then completed by the device. A
// partial field that is not the translated pseudo-header's sum gives
// wrong checksums here.
func segmentLikeLinux(tb testing.TB, f []byte, vh wire.VNetHdr) [][]byte {
	tb.Helper()
	f = append([]byte(nil), f...)
	if !vh.IsGSO() {
		completeLikeDevice(f, vh)
		return [][]byte{f}
	}
	var p wire.Packet
	if err := wire.Parse(f, &p); err != nil || p.Kind != wire.KindTCP {
		tb.Fatalf("segmentLikeLinux: not a TCP super-frame: %v", err)
	}
	hdr := p.L4 + p.TCP.HeaderLen()
	payload := f[hdr:p.End]
	mss := int(vh.GSOSize)
	partial, superLen := p.TCP.Checksum(), len(p.TCP)
	var segs [][]byte
	for off, i := 0, 0; off < len(payload) || i == 0; off, i = off+mss, i+1 {
		end := min(off+mss, len(payload))
		seg := append(append([]byte(nil), f[:hdr]...), payload[off:end]...)
		ip := wire.IPv4(seg[p.L3:])
		binary.BigEndian.PutUint16(ip[2:], uint16(len(seg)-p.L3))
		binary.BigEndian.PutUint16(ip[4:], p.IP.ID()+uint16(i))
		ip.SetChecksum(ipChecksum(ip[:ip.HeaderLen()]))
		t := wire.TCP(seg[p.L4:])
		binary.BigEndian.PutUint32(t[4:], uint32(p.TCP.Seq())+uint32(off))
		if end < len(payload) {
			t[13] &^= wire.TCPFlagFIN | wire.TCPFlagPSH
		}
		if i > 0 {
			t[13] &^= wire.TCPFlagCWR
		}
		adj := uint32(partial) + uint32(^uint16(superLen)) + uint32(uint16(len(t)))
		t.SetChecksum(^naiveFinish(adj)) // folded, not complemented
		completeLikeDevice(seg, vh)
		segs = append(segs, seg)
	}
	return segs
}

// superPayload is n bytes that differ from segment to segment, so a
// payload cut in the wrong place shows.
func superPayload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/superMSS)
	}
	return b
}

// sentFrames copies out's frames with their ports and headers, those for
// the client first, then those for the front-end's handoff address.
func sentFrames(out *Output) (toClient, toFE []OutFrame) {
	for _, f := range out.Frames {
		f.Data = append([]byte(nil), f.Data...)
		if wire.IPv4(f.Data[14:]).Dst() == handoffIP {
			toFE = append(toFE, f)
		} else {
			toClient = append(toClient, f)
		}
	}
	return toClient, toFE
}

// checkHeadersKeptTheirLengths asserts that translation changed no header
// length, which is what lets the vnet header go out unchanged.
func checkHeadersKeptTheirLengths(tb testing.TB, in, out []byte, vh wire.VNetHdr) {
	tb.Helper()
	var pi, po wire.Packet
	if wire.Parse(in, &pi) != nil || wire.Parse(out, &po) != nil {
		tb.Fatalf("frames do not parse")
	}
	if len(out) != len(in) || po.L4 != pi.L4 || po.TCP.HeaderLen() != pi.TCP.HeaderLen() {
		tb.Fatalf("translation changed a length: %d/%d/%d bytes -> %d/%d/%d",
			len(in), pi.L4, pi.TCP.HeaderLen(), len(out), po.L4, po.TCP.HeaderLen())
	}
	if vh.NeedsCsum() && (int(vh.CsumStart) != po.L4 || vh.CsumOffset != wire.TCPChecksumOff) {
		tb.Errorf("checksum start %d offset %d do not point at the TCP checksum", vh.CsumStart, vh.CsumOffset)
	}
	if vh.IsGSO() && int(vh.HdrLen) != po.L4+po.TCP.HeaderLen() {
		tb.Errorf("HdrLen %d, headers end at %d", vh.HdrLen, po.L4+po.TCP.HeaderLen())
	}
}

func TestShimTranslatesASuperFrameOnce(t *testing.T) {
	const n = 64000 // 64052 bytes of IPv4: the largest round size under 64 KiB
	cases := []struct {
		name string
		isnB wire.Seq
		cwr  bool
	}{
		{"plain", 0x1000, false},
		{"translated-seq-wraps-inside", 0x7ffffaf4, false}, // + SeqDelta + 1 = 2^32 - 1000
		{"server-seq-wraps-inside", 0xffffff00, true},
	}
	for _, tc := range cases {
		sc := newShimConn(t, ShimConfig{}, tc.isnB, 0xfffffff8, nil)
		// The request is acknowledged: the super-frame is only translated.
		sc.h.input(PortHost, sc.srv.seg(wire.TCPFlagACK, sc.srv.nxt, sc.srv.rcvNxt, nil), t0)
		sc.srv.tsVal = 0xffffff80 // + TSOffset wraps
		flags := uint8(wire.TCPFlagACK | wire.TCPFlagPSH)
		if tc.cwr {
			flags |= wire.TCPFlagCWR
		}
		payload := superPayload(n)
		f := sc.srv.seg(flags, sc.srv.nxt, sc.srv.rcvNxt, payload)
		sent := decodeTCP(t, f)
		vh := toPartial(t, f, superMSS)
		if tc.cwr {
			vh.GSOType |= wire.GSOECN
		}
		toClient, toFE := sentFrames(sc.h.inputVNet(PortHost, f, vh, t0+ms))
		if len(toClient) != 1 || len(toFE) != 0 {
			t.Fatalf("%s: %d frames to the client, %d to the front-end; want the super-frame once", tc.name, len(toClient), len(toFE))
		}
		out := toClient[0]
		if out.Port != PortWire || out.VNet != vh {
			t.Errorf("%s: sent on %v with %+v, want the wire with %+v", tc.name, out.Port, out.VNet, vh)
		}
		checkHeadersKeptTheirLengths(t, f, out.Data, out.VNet)
		var p wire.Packet
		wire.Parse(out.Data, &p)
		if got, want := p.TCP.Checksum(), wire.PartialChecksum(vipA, clientIP, len(p.TCP)); got != want {
			t.Errorf("%s: partial checksum %#04x, want the translated pseudo-header's sum %#04x", tc.name, got, want)
		}
		val, ecr, _ := sent.ts()
		segs := segmentLikeLinux(t, out.Data, out.VNet)
		if len(segs) != (n+superMSS-1)/superMSS {
			t.Fatalf("%s: %d segments", tc.name, len(segs))
		}
		for i, seg := range segs {
			lo := i * superMSS
			want := uint8(wire.TCPFlagACK)
			if i == len(segs)-1 {
				want |= wire.TCPFlagPSH
			}
			if i == 0 && tc.cwr {
				want |= wire.TCPFlagCWR
			}
			expectTCP(t, seg, ethTo(routerMAC), from(vipA, webPort), to(clientIP, testRequestPort),
				seqIs(sent.seq()+wire.Seq(sc.sp.SeqDelta)+wire.Seq(lo)), ackIs(sent.ack()), flagsAre(want),
				tsIs(val+sc.sp.TSOffset, ecr), windowIs(4000), payloadIs(payload[lo:min(lo+superMSS, n)]))
		}
		// A link without vnet headers cuts it in software, checksums
		// computed in full: the same frames, byte for byte.
		sw, err := wire.SegmentTCP4(out.Data, out.VNet, make([]byte, 2*len(out.Data)), nil)
		if err != nil || len(sw) != len(segs) {
			t.Fatalf("%s: wire.SegmentTCP4: %d segments, %v", tc.name, len(sw), err)
		}
		for i := range sw {
			if !bytes.Equal(sw[i], segs[i]) {
				t.Errorf("%s: segment %d differs between wire.SegmentTCP4 and the kernel's way", tc.name, i)
			}
		}
		if st := sc.h.sh.Stats(); st.Translated != 2 || st.TranslatedBytes != n {
			t.Errorf("%s: Translated %d, TranslatedBytes %d; want 2 and %d", tc.name, st.Translated, st.TranslatedBytes, n)
		}
		sc.h.checkCounters()
	}
}

// TestShimKeepsAPartialChecksumPartial: a reply that is not a super-frame
// but whose checksum was left to the device, as veths and TAPs hand them
// over, including a pure ACK and timestamps at an odd offset.
func TestShimKeepsAPartialChecksumPartial(t *testing.T) {
	for _, isnB := range []wire.Seq{0x1000, 0x7ffffedc, 0xfffffff0} {
		sc := newShimConn(t, ShimConfig{}, isnB, 0xfffffff8, nil)
		sc.srv.tsVal = 0xfffffff0
		odd := []byte{wire.OptNOP, wire.OptTimestamps, 10, 0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 7, wire.OptEOL}
		frames := [][]byte{
			sc.srv.seg(wire.TCPFlagACK, sc.srv.nxt, sc.srv.rcvNxt, nil),
			sc.srv.reply(bytes.Repeat([]byte("p"), 701)),
			sc.srv.frame(wire.TCPFlagACK|wire.TCPFlagPSH, sc.srv.nxt, sc.srv.rcvNxt, odd, []byte("odd")),
		}
		for i, f := range frames {
			sent := decodeTCP(t, f)
			vh := toPartial(t, f, 0)
			toClient, _ := sentFrames(sc.h.inputVNet(PortHost, f, vh, t0+ms))
			if len(toClient) != 1 || toClient[0].VNet != vh {
				t.Fatalf("isn %#x frame %d: %d frames to the client (%+v)", uint32(isnB), i, len(toClient), toClient)
			}
			checkHeadersKeptTheirLengths(t, f, toClient[0].Data, vh)
			val, ecr, _ := sent.ts()
			seg := segmentLikeLinux(t, toClient[0].Data, vh)[0]
			sw := append([]byte(nil), toClient[0].Data...)
			if err := wire.CompleteChecksum(sw, vh); err != nil || !bytes.Equal(sw, seg) {
				t.Errorf("isn %#x frame %d: wire.CompleteChecksum (%v) differs from the device's way", uint32(isnB), i, err)
			}
			expectTCP(t, seg, from(vipA, webPort), to(clientIP, testRequestPort),
				seqIs(sent.seq()+wire.Seq(sc.sp.SeqDelta)), tsIs(val+sc.sp.TSOffset, ecr), windowIs(4000),
				payloadIs(sent.payload()))
		}
		sc.h.checkCounters()
	}
}

// TestShimCopiesASuperFrameHeaderWithFullChecksums: before the request is
// acknowledged the front-end gets a header-only copy; from a super-frame
// with a partial checksum it is an ordinary frame: complete checksums, no
// payload, the zero vnet header.
func TestShimCopiesASuperFrameHeaderWithFullChecksums(t *testing.T) {
	sc := newShimConn(t, ShimConfig{}, 0xfffffff0, 0x2000, nil)
	f := sc.srv.reply(superPayload(20000))
	orig := decodeTCP(t, f)
	vh := toPartial(t, f, superMSS)
	toClient, toFE := sentFrames(sc.h.inputVNet(PortHost, f, vh, t0))
	if len(toClient) != 1 || len(toFE) != 1 {
		t.Fatalf("%d frames to the client, %d to the front-end", len(toClient), len(toFE))
	}
	if toFE[0].VNet != (wire.VNetHdr{}) || toClient[0].VNet != vh {
		t.Errorf("copy's header %+v, want zero; translated frame's %+v, want %+v", toFE[0].VNet, toClient[0].VNet, vh)
	}
	expectTCP(t, toFE[0].Data, ethTo(feMAC), from(backendIP, webPort), to(handoffIP, shimHandoffPort),
		seqIs(orig.seq()), ackIs(orig.ack()), flagsAre(orig.flags()), payloadIs(nil))
	segs := segmentLikeLinux(t, toClient[0].Data, vh)
	expectTCP(t, segs[0], seqIs(orig.seq()+wire.Seq(sc.sp.SeqDelta)), payloadIs(orig.payload()[:superMSS]))
	sc.h.checkCounters()
}

// TestShimAccountsForASuperFrameAsForItsSegments feeds one shim a response
// as a super-frame and another the same response as the segments the
// kernel would have sent without TSO: the reports must be identical.
func TestShimAccountsForASuperFrameAsForItsSegments(t *testing.T) {
	type result struct {
		bytes, translated uint64
		service           time.Duration
		end               uint32
	}
	run := func(super bool, head []byte, bodyLen int) result {
		sc := newShimConn(t, ShimConfig{ResponseQuiet: 20 * time.Millisecond}, 0xffffc000, 0x2000, nil)
		h, srv := sc.h, sc.srv
		arrive := t0 + 100*ms
		h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, []byte("GET / HTTP/1.1\r\nHost: h\r\n\r\n")), arrive)
		srv.rcvNxt = sc.cliSeq // the kernel acknowledges what it received
		f := srv.reply(append(append([]byte(nil), head...), superPayload(bodyLen)...))
		end := srv.nxt
		vh := toPartial(t, f, superMSS)
		var evs []Event
		if super {
			evs = append(evs, h.inputVNet(PortHost, f, vh, arrive+5*ms).Events...)
		} else {
			for _, seg := range segmentLikeLinux(t, f, vh) {
				evs = append(evs, h.input(PortHost, seg, arrive+5*ms).Events...)
			}
		}
		// The client acknowledges the first segment only, then all.
		ackFirst := sc.fromFrontEnd(wire.TCPFlagACK, end-wire.Seq(len(head)+bodyLen-superMSS), nil)
		evs = append(evs, h.input(PortWire, ackFirst, arrive+6*ms).Events...)
		evs = append(evs, h.tick(arrive+40*ms).Events...)
		if len(evs) == 0 {
			evs = append(evs, h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK, end, nil), arrive+50*ms).Events...)
			evs = append(evs, h.tick(arrive+70*ms).Events...)
		}
		if len(evs) != 1 || evs[0].Kind != EvResponseDone {
			t.Fatalf("super %v: events %+v, want one EvResponseDone", super, evs)
		}
		if h.sh.Active() != 0 {
			t.Errorf("super %v: Active() = %d", super, h.sh.Active())
		}
		if uint32(end) != evs[0].ResponseEnd {
			t.Errorf("super %v: ResponseEnd %#x, want %#x", super, evs[0].ResponseEnd, uint32(end))
		}
		h.checkCounters()
		return result{evs[0].Bytes, h.sh.Stats().TranslatedBytes, evs[0].ServiceTime, evs[0].ResponseEnd}
	}
	const body = 30000
	known := []byte("HTTP/1.1 200 OK\r\nContent-Length: 30000\r\n\r\n")
	unknown := []byte("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n") // ends by the quiet rule
	for _, head := range [][]byte{known, unknown} {
		seg, sup := run(false, head, body), run(true, head, body)
		if sup != seg || sup.bytes != uint64(len(head)+body) {
			t.Errorf("head %q: super-frame %+v, segments %+v, want %d bytes", head, sup, seg, len(head)+body)
		}
		// The response with a length ends with its last byte sent, before
		// any ACK; the other once the whole of it is acknowledged.
		if want := 5 * time.Millisecond; sup.service != want {
			t.Errorf("head %q: service time %v, want %v", head, sup.service, want)
		}
	}
}

// TestShimPassesSuperFramesAndGROFramesWhole: frames the shim does not
// translate pass with their header, super-frames included, and a GRO'd
// request from the wire counts with all its bytes.
func TestShimPassesSuperFramesAndGROFramesWhole(t *testing.T) {
	sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, nil)
	h, srv := sc.h, sc.srv

	other := *srv
	other.peerPort++
	otherSuper := other.reply(superPayload(30000))
	otherVH := toPartial(t, otherSuper, superMSS)
	gro := sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, superPayload(3000))
	groVH := wire.VNetHdr{Flags: wire.VNetFlagDataValid, GSOType: wire.GSOTCPv4, GSOSize: superMSS, HdrLen: 66}
	broken := append([]byte(nil), otherSuper[:100]...) // IPv4 length beyond the frame
	for _, c := range []struct {
		name  string
		port  Port
		frame []byte
		vh    wire.VNetHdr
	}{
		{"super-frame-of-another-connection", PortHost, otherSuper, otherVH},
		{"gro-request", PortWire, gro, groVH},
		{"malformed", PortHost, broken, otherVH},
	} {
		out := h.inputVNet(c.port, c.frame, c.vh, t0+ms)
		want := PortWire
		if c.port == PortWire {
			want = PortHost
		}
		if len(out.Frames) != 1 || out.Frames[0].Port != want || out.Frames[0].VNet != c.vh || !bytes.Equal(out.Frames[0].Data, c.frame) {
			t.Errorf("%s: not passed whole with its header: %d frames", c.name, len(out.Frames))
		}
	}
	if h.sh.Active() != 1 {
		t.Fatalf("Active() = %d after the GRO'd request", h.sh.Active())
	}
	// The server answers; the front-end then resends the request's second
	// half, which the GRO'd frame held: a retransmission, not a new request.
	h.input(PortHost, srv.reply([]byte("HTTP/1.1 200 OK\r\n")), t0+2*ms)
	sc.cliSeq -= 1552
	if out := h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, make([]byte, 1552)), t0+3*ms); len(out.Events) != 0 {
		t.Fatalf("resent request bytes ended the response: %+v", out.Events)
	}
	// The next request does.
	out := h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, []byte("GET /")), t0+4*ms)
	onlyEvent(t, out, EvResponseDone)
	h.checkCounters()
}

// TestShimDropsRepliesWhoseVNetHeaderDoesNotFit: a header that would make
// the device checksum or cut the translated frame wrongly is not sent at
// all, and the reply does not leave untranslated either.
func TestShimDropsRepliesWhoseVNetHeaderDoesNotFit(t *testing.T) {
	sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, nil)
	f := sc.srv.reply(superPayload(5000))
	good := toPartial(t, f, superMSS)
	cases := []struct {
		name string
		mod  func(*wire.VNetHdr)
	}{
		{"checksum-start-elsewhere", func(v *wire.VNetHdr) { v.CsumStart = 14 }},
		{"checksum-offset-elsewhere", func(v *wire.VNetHdr) { v.CsumOffset = 6 }},
		{"gso-without-partial-checksum", func(v *wire.VNetHdr) { v.Flags = 0 }},
		{"gso-udp", func(v *wire.VNetHdr) { v.GSOType = wire.GSOUDP }},
		{"gso-tcpv6", func(v *wire.VNetHdr) { v.GSOType = wire.GSOTCPv6 }},
		{"gso-size-zero", func(v *wire.VNetHdr) { v.GSOSize = 0 }},
	}
	for i, c := range cases {
		vh := good
		c.mod(&vh)
		if out := sc.h.inputVNet(PortHost, f, vh, t0); len(out.Frames) != 0 {
			t.Errorf("%s: %d frames out", c.name, len(out.Frames))
		}
		if st := sc.h.sh.Stats(); st.BadVNet != uint64(i+1) {
			t.Errorf("%s: BadVNet = %d, want %d", c.name, st.BadVNet, i+1)
		}
	}
	if out := sc.h.inputVNet(PortHost, f, good, t0); len(out.Frames) != 2 {
		t.Errorf("the same reply with a fitting header: %d frames out, want the reply and a copy", len(out.Frames))
	}
	sc.h.checkCounters()
}
