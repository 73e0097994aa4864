package splice

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

const shimHandoffPort = 20001

// shimSplice is a Splice message as the front-end would send it for a
// C2 whose back-end ISN is isnB and whose request ends at reqEnd.
func shimSplice(reqEnd wire.Seq) proto.Splice {
	return proto.Splice{
		RequestID: 42,
		ClientIP:  clientIP.Addr(), ClientPort: testRequestPort,
		VIP: vipA.Addr(), VIPPort: webPort,
		HandoffIP: handoffIP.Addr(), HandoffPort: shimHandoffPort,
		BackendIP: backendIP.Addr(), BackendPort: webPort,
		SeqDelta:         0x80000123,
		TSOffset:         0xfff00000,
		Flags:            proto.SpliceTimestamps | proto.SpliceSACK | proto.SpliceWindowScale,
		WScaleBackend:    9,
		WScaleFrontend:   7,
		ClientNextHopMAC: routerMAC,
		RequestEnd:       uint32(reqEnd),
	}
}

// shimConn is a spliced C2 as the shim sees it: the server on the host
// side, the front-end's handoff end on the wire side.
type shimConn struct {
	h   *shimHarness
	srv *testServer
	sp  proto.Splice
	// cliSeq is the next request-direction sequence number (client ISN
	// space, which C2 shares).
	cliSeq wire.Seq
	cliTS  uint32
}

func newShimConn(t testing.TB, cfg ShimConfig, isnB, isnC wire.Seq, mod func(*proto.Splice)) *shimConn {
	t.Helper()
	h := newShim(t, cfg)
	srv := newServer(isnB, wire.SynOptions{})
	srv.peerPort, srv.ts, srv.tsVal, srv.peerTS = shimHandoffPort, true, 0xffffff00, 7
	srv.rcvNxt = isnC + 1 + 100
	sp := shimSplice(srv.rcvNxt)
	if mod != nil {
		mod(&sp)
	}
	// The kernel's SYN-ACK crosses the shim before the front-end can send
	// the Splice: the shim accepts a Splice only for a handshake it saw.
	h.input(PortHost, kernelSynAck(&sp, isnB, isnC), t0)
	if err := h.sh.AddSplice(&sp, t0); err != nil {
		t.Fatal(err)
	}
	return &shimConn{h: h, srv: srv, sp: sp, cliSeq: isnC + 1, cliTS: 7}
}

// fromFrontEnd builds a C2 segment the front-end sends to the server.
func (sc *shimConn) fromFrontEnd(flags uint8, ack wire.Seq, payload []byte) []byte {
	b := frame(wire.TCPFrame{
		SrcMAC: feMAC, DstMAC: backendMAC,
		Src: handoffIP, Dst: backendIP, SrcPort: shimHandoffPort, DstPort: webPort,
		Seq: sc.cliSeq, Ack: ack, Flags: flags, Window: 300,
		Options: segOpts(&[2]uint32{sc.cliTS, sc.srv.tsVal}), Payload: payload,
	})
	sc.cliSeq += wire.Seq(len(payload))
	return b
}

// wantTranslated lists the checks for the server segment sent, after the
// shim turned it into a segment from the VIP to the client.
func (sc *shimConn) wantTranslated(sent *seen, window uint16) []check {
	val, ecr, _ := sent.ts()
	return []check{
		ethTo(routerMAC), from(vipA, webPort), to(clientIP, testRequestPort),
		seqIs(sent.seq() + wire.Seq(sc.sp.SeqDelta)), ackIs(sent.ack()), flagsAre(sent.flags()),
		tsIs(val+sc.sp.TSOffset, ecr), windowIs(window), payloadIs(sent.payload()),
	}
}

// framesOn splits out's frames into those for the client (translated)
// and those for the front-end's handoff address (copies).
func framesOn(t *testing.T, out *Output) (toClient, toFE [][]byte) {
	t.Helper()
	for _, f := range copyFrames(out) {
		if wire.IPv4(f[14:]).Dst() == handoffIP {
			toFE = append(toFE, f)
		} else {
			toClient = append(toClient, f)
		}
	}
	return toClient, toFE
}

func TestShimPassesEverythingElseByteIdentical(t *testing.T) {
	sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, nil)
	h := sc.h
	other := *sc.srv
	other.peerPort++ // another connection of the same server: not spliced
	unrelated := frame(wire.TCPFrame{SrcMAC: routerMAC, DstMAC: backendMAC, Src: clientIP, Dst: backendIP,
		SrcPort: 5000, DstPort: 22, Seq: 1, Flags: wire.TCPFlagSYN})
	badIP := append([]byte(nil), unrelated...)
	badIP[14+10] ^= 0xff // IPv4 header checksum
	synAck := sc.srv.frame(wire.TCPFlagSYN|wire.TCPFlagACK, sc.srv.isn, sc.cliSeq,
		synOpts(wire.SynOptions{MSS: 1460, WScale: 9, TS: true, TSVal: 1, TSEcr: 2}), nil)
	cases := []struct {
		name  string
		port  Port
		frame []byte
	}{
		{"arp", PortWire, arpRequest(routerMAC, routerIP, backendIP)},
		{"ipv6", PortHost, append([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x86, 0xdd}, make([]byte, 60)...)},
		{"short", PortWire, []byte{1, 2, 3}},
		{"bad-ip-checksum", PortHost, badIP}, // from the wire it is dropped (ingress.go)
		{"unrelated-inbound", PortWire, unrelated},
		{"other-connection-reply", PortHost, other.seg(wire.TCPFlagACK, other.nxt, 5, []byte("reply"))},
		{"retransmitted-syn-ack", PortHost, synAck},
		{"request-on-c2", PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, sc.srv.nxt, []byte("GET /"))},
		{"icmp-from-host", PortHost, icmpFragNeeded(newClient(1, 1, fullOffer(1)), 1)},
	}
	for _, tc := range cases {
		out := h.input(tc.port, tc.frame, t0)
		if len(out.Frames) != 1 {
			t.Errorf("%s: %d frames out", tc.name, len(out.Frames))
			continue
		}
		want := PortWire
		if tc.port == PortWire {
			want = PortHost
		}
		if f := out.Frames[0]; f.Port != want || !bytes.Equal(f.Data, tc.frame) {
			t.Errorf("%s: frame changed or went to the %v port", tc.name, f.Port)
		}
	}
	st := h.sh.Stats()
	if st.Translated != 0 || st.Malformed != 2 {
		t.Errorf("Translated %d, Malformed %d", st.Translated, st.Malformed)
	}
	h.checkCounters()
}

func TestShimTranslatesSplicedReplies(t *testing.T) {
	for _, isnB := range []wire.Seq{0x1000, 0x7ffffedc, 0xfffffff0} { // the last two wrap after adding SeqDelta or data
		sc := newShimConn(t, ShimConfig{}, isnB, 0xfffffff8, nil)
		// The server acknowledges the whole request; from then on replies
		// are only translated, never copied to the front-end.
		_, toFE := framesOn(t, sc.h.input(PortHost, sc.srv.seg(wire.TCPFlagACK, sc.srv.nxt, sc.srv.rcvNxt, nil), t0))
		if len(toFE) != 1 {
			t.Fatalf("no copy of the ACK of the request")
		}
		for i := 0; i < 3; i++ {
			sc.srv.tsVal += 0x80 // crosses 2^32
			f := sc.srv.reply(bytes.Repeat([]byte{byte('a' + i)}, 700))
			out := sc.h.input(PortHost, f, t0+Time(i)*ms)
			b := onlyFrame(t, out)
			if out.Frames[0].Port != PortWire {
				t.Errorf("translated reply sent to the %v port", out.Frames[0].Port)
			}
			expectTCP(t, b, sc.wantTranslated(decodeTCP(t, f), 4000)...)
		}
		if st := sc.h.sh.Stats(); st.Translated != 4 || st.TranslatedBytes != 2100 || st.CopiesToFrontEnd != 1 {
			t.Errorf("stats %+v", st)
		}
		sc.h.checkCounters()
	}
}

func TestRescaleWindowClampsAndNeverClosesAnOpenWindow(t *testing.T) {
	cases := []struct {
		win   uint16
		shift int
		want  uint16
	}{
		{1000, 2, 4000},
		{16383, 2, 65532},
		{16384, 2, 65535}, // clamped
		{65535, 14, 65535},
		{1, 14, 16384},
		{5000, 0, 5000},
		{0, 3, 0},
		{0, -3, 0},   // a closed window stays closed
		{1, -7, 1},   // never rounded down to zero
		{127, -7, 1}, // never rounded down to zero
		{128, -7, 1},
		{256, -7, 2},
		{65535, -14, 3},
		{65535, -1, 32767},
	}
	for _, c := range cases {
		if got := rescaleWindow(c.win, c.shift); got != c.want {
			t.Errorf("rescaleWindow(%d, %d) = %d, want %d", c.win, c.shift, got, c.want)
		}
	}

	// Through the shim: back-end shift 0, front-end shift 7.
	sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, func(sp *proto.Splice) {
		sp.WScaleBackend, sp.WScaleFrontend = 0, 7
	})
	f := sc.srv.reply([]byte("x")) // window 1000 >> 7 = 7
	toClient, _ := framesOn(t, sc.h.input(PortHost, f, t0))
	expectTCP(t, toClient[0], windowIs(7))
	small := sc.srv.frame(wire.TCPFlagACK, sc.srv.nxt, sc.srv.rcvNxt, nil, nil)
	wire.TCP(small[34:]).SetWindowUpdate(100)
	toClient, _ = framesOn(t, sc.h.input(PortHost, small, t0))
	expectTCP(t, toClient[0], windowIs(1))

	// No window scaling negotiated with the client: windows pass as they are.
	sc = newShimConn(t, ShimConfig{}, 0x1000, 0x2000, func(sp *proto.Splice) { sp.Flags &^= proto.SpliceWindowScale })
	toClient, _ = framesOn(t, sc.h.input(PortHost, sc.srv.reply([]byte("x")), t0))
	expectTCP(t, toClient[0], windowIs(1000))
}

func TestShimCopiesHeadersToTheFrontEndUntilTheRequestIsAcked(t *testing.T) {
	sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, nil)
	reqEnd := wire.Seq(sc.sp.RequestEnd)
	checkCopy := func(orig []byte, copy []byte) {
		t.Helper()
		o := decodeTCP(t, orig)
		expectTCP(t, copy, ethTo(feMAC), from(backendIP, webPort), to(handoffIP, shimHandoffPort),
			seqIs(o.seq()), ackIs(o.ack()), flagsAre(o.flags()), payloadIs(nil))
		if len(copy) < 60 {
			t.Errorf("copy of %d bytes is shorter than the Ethernet minimum", len(copy))
		}
	}
	step := func(f []byte, wantCopy bool) {
		t.Helper()
		out := sc.h.input(PortHost, f, t0)
		toClient, toFE := framesOn(t, out)
		if len(toClient) != 1 {
			t.Fatalf("%d translated frames", len(toClient))
		}
		if wantCopy != (len(toFE) == 1) || len(toFE) > 1 {
			t.Fatalf("%d copies to the front-end, want copy %v", len(toFE), wantCopy)
		}
		if wantCopy {
			checkCopy(f, toFE[0])
			// The client's frame leaves first: on a veth the receiver of
			// the first frame of a batch may take the shim's CPU before
			// the next one leaves, and the client is the one waiting.
			if len(out.Frames) != 2 || wire.IPv4(out.Frames[0].Data[14:]).Dst() != clientIP {
				t.Errorf("the copy to the front-end went before the client's frame")
			}
		}
	}
	// The server acknowledges part of the request and already replies.
	sc.srv.rcvNxt = reqEnd - 50
	step(sc.srv.reply([]byte("HTTP/1.1 200 OK\r\n")), true)
	sc.srv.rcvNxt = reqEnd
	step(sc.srv.reply([]byte("Content-Length: 0\r\n")), true) // this one tells the front-end
	step(sc.srv.reply([]byte("\r\n")), false)
	step(sc.srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, sc.srv.nxt, reqEnd, nil), true)
	step(sc.srv.seg(wire.TCPFlagRST|wire.TCPFlagACK, sc.srv.nxt+1, reqEnd, nil), true)
	if st := sc.h.sh.Stats(); st.CopiesToFrontEnd != 4 {
		t.Errorf("CopiesToFrontEnd = %d, want 4", st.CopiesToFrontEnd)
	}
	sc.h.checkCounters()
}

func TestAddSpliceRejectsASpliceForAnotherBackend(t *testing.T) {
	h := newShim(t, ShimConfig{})
	sp := shimSplice(1)
	sp.BackendIP = otherIP.Addr()
	if err := h.sh.AddSplice(&sp, t0); !errors.Is(err, ErrSpliceMismatch) {
		t.Errorf("AddSplice for %v: %v, want ErrSpliceMismatch", otherIP, err)
	}
	sp = shimSplice(1)
	sp.VIP = netip.Addr{}
	if err := h.sh.AddSplice(&sp, t0); err == nil {
		t.Errorf("AddSplice accepted a Splice without a VIP")
	}
	if h.sh.Entries() != 0 {
		t.Errorf("Entries() = %d", h.sh.Entries())
	}
}

func TestShimReportsServiceTimeAfterTheQuietPeriod(t *testing.T) {
	sc := newShimConn(t, ShimConfig{ResponseQuiet: 20 * time.Millisecond}, 0x1000, 0x2000, nil)
	h, srv := sc.h, sc.srv
	arrive := t0 + 100*ms
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, make([]byte, 100)), arrive)
	if h.sh.Active() != 1 {
		t.Fatalf("Active() = %d after the request arrived", h.sh.Active())
	}
	h.input(PortHost, srv.reply(make([]byte, 1000)), arrive+5*ms)
	h.input(PortHost, srv.reply(make([]byte, 500)), arrive+8*ms)
	// The client acknowledges everything (its ACK, translated, on C2).
	drained := arrive + 9*ms
	if out := h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK, srv.nxt, nil), drained); len(out.Events) != 0 {
		t.Fatalf("events before the quiet period: %+v", out.Events)
	}
	if out := h.tick(drained + 20*ms - 1); len(out.Events) != 0 {
		t.Fatalf("events before the quiet period ended: %+v", out.Events)
	}
	ev := onlyEvent(t, h.tick(drained+20*ms), EvResponseDone)
	if ev.RequestID != 42 || ev.ServiceTime != 8*time.Millisecond || ev.Bytes != 1500 {
		t.Errorf("event %+v, want request 42, 8ms, 1500 bytes", ev)
	}
	if h.sh.Active() != 0 {
		t.Errorf("Active() = %d after the response", h.sh.Active())
	}
	if h.sh.Entries() != 1 {
		t.Errorf("keep-alive connection lost its entry")
	}
	h.checkCounters()
}

func TestShimEntryLeavesAfterLinger(t *testing.T) {
	linger := 3 * s1
	cases := []struct {
		name  string
		close func(sc *shimConn, now Time)
	}{
		{"both-fins", func(sc *shimConn, now Time) {
			sc.h.input(PortHost, sc.srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, sc.srv.nxt, sc.cliSeq, nil), now)
			sc.h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagFIN, sc.srv.nxt+1, nil), now)
		}},
		{"client-rst", func(sc *shimConn, now Time) {
			sc.h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagRST, 0, nil), now)
		}},
		{"server-rst", func(sc *shimConn, now Time) {
			sc.h.input(PortHost, sc.srv.seg(wire.TCPFlagRST|wire.TCPFlagACK, sc.srv.nxt, sc.cliSeq, nil), now)
		}},
	}
	for _, tc := range cases {
		sc := newShimConn(t, ShimConfig{Linger: time.Duration(linger)}, 0x1000, 0x2000, nil)
		closed := t0 + 10*s1
		tc.close(sc, closed)
		sc.h.tick(closed + linger - 1)
		if sc.h.sh.Entries() != 1 {
			t.Errorf("%s: entry gone before the linger ended", tc.name)
		}
		sc.h.tick(closed + linger)
		if sc.h.sh.Entries() != 0 {
			t.Errorf("%s: Entries() = %d after the linger", tc.name, sc.h.sh.Entries())
		}
		sc.h.checkCounters()
	}

	// One FIN only: the entry stays until the idle timeout.
	sc := newShimConn(t, ShimConfig{Linger: time.Duration(linger), IdleTimeout: time.Minute}, 0x1000, 0x2000, nil)
	sc.h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagFIN, sc.srv.nxt, nil), t0)
	sc.h.tick(t0 + 10*linger)
	if sc.h.sh.Entries() != 1 {
		t.Errorf("half-closed entry gone after %v", 10*linger)
	}
	sc.h.tick(t0 + 60*s1)
	if sc.h.sh.Entries() != 0 {
		t.Errorf("idle entry still there after the idle timeout")
	}
}

func TestRetransmittedRequestDoesNotSplitTheServiceTime(t *testing.T) {
	sc := newShimConn(t, ShimConfig{ResponseQuiet: 20 * time.Millisecond}, 0x1000, 0x2000, nil)
	h, srv := sc.h, sc.srv
	arrive := t0 + 100*ms
	req := make([]byte, 100)
	first := sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, req)
	h.input(PortWire, first, arrive)
	h.input(PortHost, srv.reply(make([]byte, 1000)), arrive+5*ms)
	// The front-end did not see the ACK of the request in time and sends
	// it again: the same bytes, not a new request.
	if out := h.input(PortWire, first, arrive+6*ms); len(out.Events) != 0 {
		t.Errorf("a retransmitted request produced events %+v", out.Events)
	}
	h.input(PortHost, srv.reply(make([]byte, 500)), arrive+8*ms)
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK, srv.nxt, nil), arrive+9*ms)
	ev := onlyEvent(t, h.tick(arrive+9*ms+20*ms), EvResponseDone)
	if ev.ServiceTime != 8*time.Millisecond || ev.Bytes != 1500 {
		t.Errorf("event %+v, want one response of 1500 bytes in 8ms", ev)
	}
	if h.sh.Active() != 0 {
		t.Errorf("Active() = %d", h.sh.Active())
	}
	// A new request on the keep-alive connection is one.
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, req), arrive+s1)
	if h.sh.Active() != 1 {
		t.Errorf("Active() = %d after a second request", h.sh.Active())
	}
}

func TestShimTranslatesUnalignedTimestamps(t *testing.T) {
	sc := newShimConn(t, ShimConfig{}, 0xfffffff0, 0x2000, nil)
	// Timestamps without the NOP padding, at an odd offset after a
	// single NOP, then padding: the update is not 16-bit aligned.
	opts := []byte{wire.OptNOP, wire.OptTimestamps, 10, 0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 7, wire.OptEOL}
	f := sc.srv.frame(wire.TCPFlagACK|wire.TCPFlagPSH, sc.srv.nxt, sc.srv.rcvNxt, opts, []byte("odd"))
	toClient, _ := framesOn(t, sc.h.input(PortHost, f, t0))
	expectTCP(t, toClient[0], tsIs(0xfffffff0+sc.sp.TSOffset, 7), seqIs(sc.srv.nxt+wire.Seq(sc.sp.SeqDelta)))
}

// TestShimEndsAResponseWhereItsHeadSaid: with Content-Length in the
// response head, the request is served when the server has sent exactly
// that many bytes; long pauses with everything acknowledged in between
// (a slow client) do not end it early.
func TestShimEndsAResponseWhereItsHeadSaid(t *testing.T) {
	sc := newShimConn(t, ShimConfig{ResponseQuiet: 20 * time.Millisecond}, 0x1000, 0x2000, nil)
	h, srv := sc.h, sc.srv
	arrive := t0 + 100*ms
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, []byte("GET /data/3000 HTTP/1.1\r\nHost: h\r\n\r\n")), arrive)
	head := []byte("HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n")
	now := arrive + 2*ms
	h.input(PortHost, srv.reply(append(head, make([]byte, 1000)...)), now)
	for i := 0; i < 2; i++ {
		// Everything so far acknowledged, then a long pause.
		now += ms
		if out := h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK, srv.nxt, nil), now); len(out.Events) != 0 {
			t.Fatalf("response ended at %d bytes: %+v", 1000*(i+1), out.Events)
		}
		now += 500 * ms
		if out := h.tick(now); len(out.Events) != 0 {
			t.Fatalf("response ended during a pause: %+v", out.Events)
		}
		if i == 0 {
			h.input(PortHost, srv.reply(make([]byte, 1000)), now)
		}
	}
	ev := onlyEvent(t, h.input(PortHost, srv.reply(make([]byte, 1000)), now), EvResponseDone)
	if ev.ServiceTime != now.Sub(arrive) || ev.Bytes != uint64(len(head)+3000) {
		t.Errorf("event %+v, want service %v and %d bytes", ev, now.Sub(arrive), len(head)+3000)
	}
	if h.sh.Active() != 0 {
		t.Errorf("Active() = %d", h.sh.Active())
	}
}

// TestRetransmittedTailDoesNotSwallowTheNextRequest reproduces a slot
// leak seen in the lab: the server retransmits the tail of a response
// that was already reported; the client acknowledges it; much later a
// keep-alive request arrives and, before its answer, a timer runs. The
// next response must still be reported.
func TestRetransmittedTailDoesNotSwallowTheNextRequest(t *testing.T) {
	sc := newShimConn(t, ShimConfig{ResponseQuiet: 20 * time.Millisecond}, 0x1000, 0x2000, nil)
	h, srv := sc.h, sc.srv
	now := t0 + 100*ms
	req := []byte("GET /a HTTP/1.1\r\nHost: h\r\n\r\n")
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, req), now)
	srv.rcvNxt = sc.cliSeq // the kernel acknowledges what it received
	head := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n")
	now += ms
	h.input(PortHost, srv.reply(append(head, make([]byte, 1000)...)), now)
	tail := srv.reply(make([]byte, 1000))
	onlyEvent(t, h.input(PortHost, append([]byte(nil), tail...), now), EvResponseDone)
	now += 40 * ms
	h.input(PortHost, tail, now) // the server retransmits the tail
	now += ms
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK, srv.nxt, nil), now)
	now += 1000 * ms
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, req), now)
	srv.rcvNxt = sc.cliSeq
	if h.sh.Active() != 1 {
		t.Fatalf("Active() = %d after the second request", h.sh.Active())
	}
	now += 5 * ms
	if out := h.tick(now); len(out.Events) != 0 || h.sh.Active() != 1 {
		t.Fatalf("a timer ended the second request before its answer: %+v, Active %d", out.Events, h.sh.Active())
	}
	now += 2 * ms
	h.input(PortHost, srv.reply(append(head, make([]byte, 1000)...)), now)
	onlyEvent(t, h.input(PortHost, srv.reply(make([]byte, 1000)), now), EvResponseDone)
	if h.sh.Active() != 0 {
		t.Errorf("Active() = %d", h.sh.Active())
	}
}
