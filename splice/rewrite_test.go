package splice

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// Request rewriting (issue 10): hand-built packets for every rule of
// rewrite.go.

// withTarget returns req with the path of its request-target replaced
// (the query stays): what the back-end must receive.
func withTarget(req []byte, path string) []byte {
	at, n := targetSpan(req)
	out := append([]byte(nil), req[:at]...)
	out = append(out, path...)
	return append(out, req[at+n:]...)
}

// targetSpan is where the path of req's (origin-form) target lies.
func targetSpan(req []byte) (at, n int) {
	at = bytes.IndexByte(req, ' ') + 1
	return at, bytes.IndexAny(req[at:], "? ")
}

// rewriteOptionOf returns the rewrite option a C2 segment carries.
func rewriteOptionOf(s *seen) (rewriteRec, bool) {
	o, ok := s.option(layers.TCPOptionKind(rewriteOptKind))
	if !ok || len(o.OptionData) != rewriteOptLen-2 || binary.BigEndian.Uint16(o.OptionData) != rewriteOptExID {
		return rewriteRec{}, false
	}
	t := make(wire.TCP, wire.TCPMinHeaderLen+rewriteOptLen)
	t[12] = byte(len(t)/4) << 4
	t[20], t[21] = rewriteOptKind, rewriteOptLen
	copy(t[22:], o.OptionData)
	return parseRewriteOption(t, 20), true
}

func TestRewriteRecordMapsBothWaysAcrossWrap(t *testing.T) {
	// Old target 8 bytes, new 20, 5 bytes before it already offset by -3,
	// all across 2^32.
	startC := wire.Seq(0xfffffffc)
	r := rewriteRec{on: true, startC: startC, endC: startC + 8, before: ^uint32(2)} // -3
	r.startB = startC + wire.Seq(r.before)
	r.endB = r.startB + 20
	r.after = r.before + 12
	for _, tc := range []struct {
		c, b wire.Seq
	}{
		{startC - 100, startC - 103},
		{startC, startC - 3},
		{startC + 8, startC + 8 + 9}, // endC -> endB
		{startC + 1000, startC + 1009},
	} {
		if got := r.toB(tc.c); got != tc.b {
			t.Errorf("toB(%#x) = %#x, want %#x", uint32(tc.c), uint32(got), uint32(tc.b))
		}
		if got := r.toC(tc.b, true); got != tc.c {
			t.Errorf("toC(%#x) = %#x, want %#x", uint32(tc.b), uint32(got), uint32(tc.c))
		}
	}
	// Inside the old target a client number is never put below the new
	// one's end; inside the new target a back-end number claims no more
	// than startC as an ACK (floor) and no less than endC as a left edge.
	if got := r.toB(startC + 3); got != r.endB {
		t.Errorf("toB inside the old target = %#x, want endB %#x", uint32(got), uint32(r.endB))
	}
	if got := r.toC(r.startB+7, true); got != startC {
		t.Errorf("floor toC inside the new target = %#x, want %#x", uint32(got), uint32(startC))
	}
	if got := r.toC(r.startB+7, false); got != startC+8 {
		t.Errorf("ceil toC inside the new target = %#x, want %#x", uint32(got), uint32(startC+8))
	}
	var off rewriteRec
	if off.toB(5) != 5 || off.toC(5, true) != 5 {
		t.Error("no rewrite must map every number to itself")
	}
}

func TestRewriteOptionRoundTripsAndIsBlankedWithAnExactChecksum(t *testing.T) {
	r := rewriteRec{on: true, startB: 0xfffffff0, endB: 0x10, before: 3, after: 0xfffffff0}
	r.startC, r.endC = r.startB-3, r.endB+0x10
	var ob [40]byte
	n := wire.EncodeTS(ob[:], 1, 2)
	n += putRewriteOption(ob[n:], &r)
	b := frame(wire.TCPFrame{SrcMAC: routerMAC, DstMAC: feMAC, Src: clientIP, Dst: vipA,
		SrcPort: 1, DstPort: 80, Seq: 1, Ack: 1, Flags: wire.TCPFlagACK, Window: 1,
		Options: ob[:n], Payload: []byte("x")})
	var p wire.Packet
	if err := wire.Parse(b, &p); err != nil {
		t.Fatal(err)
	}
	off := findRewriteOption(p.TCP)
	if off < 0 {
		t.Fatal("option not found")
	}
	if got := parseRewriteOption(p.TCP, off); got != r {
		t.Fatalf("parsed %+v, want %+v", got, r)
	}
	blankQSOption(p.TCP, off, rewriteOptLen)
	if findRewriteOption(p.TCP) >= 0 {
		t.Fatal("option still there after blanking")
	}
	if ok, why := checksumsExact(b); !ok {
		t.Fatal(why)
	}
	// Another ExID, a wrong length, an option running off the header:
	// not ours.
	for _, opts := range [][]byte{
		{rewriteOptKind, rewriteOptLen, 0xf9, 0x89, 16: 0, 17: 0, 18: 0, 19: 0},
		{rewriteOptKind, 8, 0x51, 0x53, 0, 0, 0, 0},
		{wire.OptNOP, wire.OptNOP, wire.OptNOP, rewriteOptKind, rewriteOptLen, 0x51, 0x53, 0},
	} {
		fb := frame(wire.TCPFrame{Src: clientIP, Dst: vipA, Flags: wire.TCPFlagACK, Options: opts})
		if err := wire.Parse(fb, &p); err != nil {
			t.Fatal(err)
		}
		if findRewriteOption(p.TCP) >= 0 {
			t.Errorf("options % x taken for a rewrite option", opts)
		}
	}
}

// connectRewritten is connectSpliced with the first request's target
// rewritten: the back-end receives the new target, the Splice says
// where, and the back-end's ACK copy acknowledges the rewritten request.
func connectRewritten(tb testing.TB, p spliceParams, target string) *splicedConn {
	tb.Helper()
	h := newFE(tb, p.mod)
	c := newClient(testRequestPort, p.clientISN, p.offer)
	now := p.start
	c.handshake(tb, h, now)
	now += ms
	c.tsVal++
	id := c.sendRequest(tb, h, p.request, now)
	if err := h.fe.Rewrite(id, []byte(target)); err != nil {
		tb.Fatal(err)
	}
	now += ms
	syn := expectTCP(tb, onlyFrame(tb, h.call(func(out *Output) {
		if err := h.fe.Dispatch(id, testBackend, now, out); err != nil {
			tb.Fatal(err)
		}
	})), seqIs(p.clientISN), flagsAre(wire.TCPFlagSYN))
	srv := newServer(p.backendISN, p.answer)
	now += ms
	ev := onlyEvent(tb, h.input(srv.synAck(syn), now), EvSplice)
	now += ms
	out := h.call(func(out *Output) {
		if err := h.fe.SpliceAcked(id, now, out); err != nil {
			tb.Fatal(err)
		}
	})
	var got []byte
	for _, f := range copyFrames(out) {
		s := expectTCP(tb, f, to(backendIP, webPort))
		got = append(got, s.payload()...)
		srv.receive(s)
	}
	if want := withTarget(p.request, target); !bytes.Equal(got, want) {
		tb.Fatalf("request on C2 %q, want %q", got, want)
	}
	now += ms
	if out := h.input(srv.seg(wire.TCPFlagACK, srv.nxt, srv.rcvNxt, nil), now); len(out.Frames) != 0 {
		tb.Fatalf("back-end ACK copy answered with %d frames", len(out.Frames))
	}
	return &splicedConn{h: h, c: c, srv: srv, id: id, sp: ev.Splice, now: now}
}

// clientVariants are the client SYNs of issue 2's variants.
func clientVariants() map[string]wire.SynOptions {
	full := fullOffer(5000)
	noTS, noSACK, noWS := full, full, full
	noTS.TS = false
	noSACK.SACKPermitted = false
	noWS.WScale = -1
	return map[string]wire.SynOptions{"full": full, "timestamps-off": noTS, "sack-off": noSACK, "wscale-off": noWS}
}

// TestRewrittenFirstRequestShiftsTheClientsSequenceNumbersOnC2: the
// first request goes to the back-end with the new target; the Splice
// carries the offset; every later client segment reaches C2 at its
// sequence number plus the offset, with the ACK number and SACK edges
// (which name reply bytes) translated by seqDelta alone, and exact
// checksums. Targets longer and shorter, with every client variant, and
// with the client's numbers wrapping inside the target.
func TestRewrittenFirstRequestShiftsTheClientsSequenceNumbersOnC2(t *testing.T) {
	for name, offer := range clientVariants() {
		for _, tc := range []struct {
			isn    wire.Seq
			target string
		}{
			{0x10000000, "/tree2/upload"},
			{0xfffffff8, "/u"}, // the target crosses 2^32; the offset is negative
		} {
			t.Run(name+tc.target, func(t *testing.T) {
				p := defaultSpliceParams()
				p.offer, p.clientISN = offer, tc.isn
				p.request = []byte("POST /upload?x=1&y=2 HTTP/1.1\r\nHost: www.example.test\r\nContent-Length: 1000000000\r\n\r\n")
				sc := connectRewritten(t, p, tc.target)
				at, oldLen := targetSpan(p.request)
				delta := uint32(len(tc.target) - oldLen)
				sp := sc.sp
				start := tc.isn + 1 + wire.Seq(at)
				if sp.Flags&proto.SpliceRewrite == 0 || sp.RewriteStart != uint32(start) ||
					sp.RewriteEnd != uint32(start)+uint32(len(tc.target)) || sp.RequestOffset != delta ||
					sp.RequestEnd != uint32(tc.isn+1)+uint32(len(p.request))+delta {
					t.Fatalf("Splice %+v, want the target at %#x, offset %d", sp, uint32(start), int32(delta))
				}
				c := sc.c
				body := bytes.Repeat([]byte("b"), 300)
				sc.now += ms
				c.tsVal++
				seg := c.data(body)
				fwd := expectTCP(t, onlyFrame(t, sc.h.input(seg, sc.now)), to(backendIP, webPort),
					seqIs(c.nxt-300+wire.Seq(delta)), ackIs(c.rcvNxt-wire.Seq(sp.SeqDelta)), payloadIs(body))
				sc.srv.receive(fwd)
				if sc.srv.rcvNxt != c.nxt+wire.Seq(delta) {
					t.Fatalf("back-end's rcv_nxt %#x, want %#x", uint32(sc.srv.rcvNxt), uint32(c.nxt+wire.Seq(delta)))
				}
				// A pure ACK with a SACK block of reply bytes.
				sc.now += ms
				if offer.SACKPermitted {
					blk := wire.SACKBlock{Left: c.rcvNxt + 100, Right: c.rcvNxt + 200}
					s := expectTCP(t, onlyFrame(t, sc.h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil, blk), sc.now)),
						seqIs(c.nxt+wire.Seq(delta)), ackIs(c.rcvNxt-wire.Seq(sp.SeqDelta)))
					d := wire.Seq(sp.SeqDelta)
					if got := s.sackBlocks(); len(got) != 1 || got[0].Left != blk.Left-d || got[0].Right != blk.Right-d {
						t.Errorf("SACK on C2 %v, want %#x-%#x", got, uint32(blk.Left-d), uint32(blk.Right-d))
					}
				} else {
					expectTCP(t, onlyFrame(t, sc.h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil), sc.now)),
						seqIs(c.nxt+wire.Seq(delta)))
				}
				if st := sc.h.fe.Stats(); st.Rewrites != 1 {
					t.Errorf("Rewrites %d, want 1", st.Rewrites)
				}
				sc.h.checkCounters()
			})
		}
	}
}

// TestClientRetransmissionOfTheReplacedTargetIsAbsorbed: the client
// resends a segment holding its old target (here all its first request
// and body bytes after it): the bytes around the target go on in the
// back-end's numbers, the target's are not forwarded.
func TestClientRetransmissionOfTheReplacedTargetIsAbsorbed(t *testing.T) {
	p := defaultSpliceParams()
	target := "/tree1/upload"
	sc := connectRewritten(t, p, target)
	c := sc.c
	at, oldLen := targetSpan(p.request)
	delta := wire.Seq(len(target) - oldLen)
	body := []byte("0123456789")
	whole := append(append([]byte(nil), p.request...), body...)
	c.nxt += wire.Seq(len(body))
	sc.now += ms
	out := sc.h.input(c.seg(wire.TCPFlagACK|wire.TCPFlagPSH, c.isn+1, c.rcvNxt, whole), sc.now)
	fs := copyFrames(out)
	if len(fs) != 2 {
		t.Fatalf("%d frames, want the bytes before and after the target", len(fs))
	}
	expectTCP(t, fs[0], seqIs(c.isn+1), payloadIs(whole[:at]))
	expectTCP(t, fs[1], seqIs(c.isn+1+wire.Seq(at+oldLen)+delta), payloadIs(whole[at+oldLen:]))
	// A segment of nothing but old-target bytes: its ACK goes on, at the
	// end of what reached C2, never below it.
	sc.now += ms
	out = sc.h.input(c.seg(wire.TCPFlagACK, c.isn+1+wire.Seq(at), c.rcvNxt, p.request[at:at+oldLen]), sc.now)
	expectTCP(t, onlyFrame(t, out), seqIs(c.nxt+delta), payloadIs(nil), ackIs(c.rcvNxt-wire.Seq(sc.sp.SeqDelta)))
	if st := sc.h.fe.Stats(); st.RewriteAbsorbed != 2 {
		t.Errorf("RewriteAbsorbed %d, want 2", st.RewriteAbsorbed)
	}
	sc.h.checkCounters()
}

// TestClientCannotSetTheOffsets: a rewrite option in a client's own
// segment is blanked before the segment reaches C2, checksum exact.
func TestClientCannotSetTheOffsets(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	c := sc.c
	r := rewriteRec{on: true, startB: c.nxt, endB: c.nxt + 5, after: 1000}
	var ob [40]byte
	n := wire.EncodeTS(ob[:], c.tsVal, c.peerTS)
	n += putRewriteOption(ob[n:], &r)
	sc.now += ms
	out := sc.h.input(c.frame(wire.TCPFlagACK, c.nxt, c.rcvNxt, ob[:n], []byte("body")), sc.now)
	s := expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), payloadIs([]byte("body")))
	if _, ok := rewriteOptionOf(s); ok {
		t.Fatal("the client's rewrite option reached the back-end")
	}
}

// followUpConn is a keep-alive connection whose first request's target
// was rewritten (offset d1), with a follow-up waiting.
func followUpConn(t *testing.T, offer wire.SynOptions, isn wire.Seq) (sc *splicedConn, d1 wire.Seq, second []byte) {
	t.Helper()
	p := defaultSpliceParams()
	p.offer, p.clientISN = offer, isn
	p.request = []byte("GET /first HTTP/1.1\r\nHost: www.example.test\r\n\r\n")
	sc = connectRewritten(t, p, "/tree3/first")
	d1 = wire.Seq(len("/tree3/first") - len("/first"))
	second = []byte("GET /second/page HTTP/1.1\r\nHost: www.example.test\r\n\r\n")
	sc.now += ms
	out := sc.h.input(sc.c.data(second), sc.now)
	if ev := onlyEvent(t, out, EvRequest); !ev.FollowUp {
		t.Fatalf("event %+v", ev)
	}
	return sc, d1, second
}

// TestRewrittenFollowUpChangesTheOffsetMidConnection: a follow-up with
// its target rewritten goes on C2 after the first's offset, carrying the
// rewrite option that tells the shim the new correction point; later
// client bytes move by the new offset; the request timer resends the new
// target from the front-end's copy until the back-end acknowledges it.
func TestRewrittenFollowUpChangesTheOffsetMidConnection(t *testing.T) {
	for name, offer := range clientVariants() {
		t.Run(name, func(t *testing.T) {
			sc, d1, second := followUpConn(t, offer, 0xffffff80)
			c := sc.c
			next := c.nxt - wire.Seq(len(second))
			target := "/tree1/second/page"
			if err := sc.h.fe.Rewrite(sc.id, []byte(target)); err != nil {
				t.Fatal(err)
			}
			out := admit(t, sc)
			want := withTarget(second, target)
			fs := copyFrames(out)
			var got []byte
			at, oldLen := targetSpan(second)
			d2 := d1 + wire.Seq(len(target)-oldLen)
			seq := next + d1
			for _, f := range fs {
				s := expectTCP(t, f, to(backendIP, webPort), seqIs(seq))
				r, ok := rewriteOptionOf(s)
				if !ok {
					t.Fatal("a segment with new-target bytes lacks the rewrite option")
				}
				wantR := rewriteRec{on: true, startC: next + wire.Seq(at), endC: next + wire.Seq(at+oldLen),
					startB: next + wire.Seq(at) + d1, endB: next + wire.Seq(at+len(target)) + d1,
					before: uint32(d1), after: uint32(d2)}
				if r != wantR {
					t.Fatalf("rewrite option %+v, want %+v", r, wantR)
				}
				got = append(got, s.payload()...)
				seq += wire.Seq(len(s.payload()))
				sc.srv.receive(s)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("follow-up on C2 %q, want %q", got, want)
			}
			// The back-end has not acknowledged it: the timer resends the
			// new target, and only it, from the front-end's copy.
			sc.now += 250 * ms
			out = sc.h.tick(sc.now)
			s := expectTCP(t, onlyFrame(t, out), seqIs(next+wire.Seq(at)+d1), payloadIs([]byte(target)))
			if _, ok := rewriteOptionOf(s); !ok {
				t.Fatal("the resent target lacks the rewrite option")
			}
			// The back-end's ACK (in the shim's copy) ends that.
			sc.now += ms
			sc.h.input(sc.srv.seg(wire.TCPFlagACK, sc.srv.nxt, sc.srv.rcvNxt, nil), sc.now)
			sc.now += 5 * s1
			if out := sc.h.tick(sc.now); len(out.Frames) != 0 {
				t.Fatalf("%d frames after the back-end acknowledged the target", len(out.Frames))
			}
			// The next client bytes go by the new offset.
			sc.now += ms
			expectTCP(t, onlyFrame(t, sc.h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil), sc.now)), seqIs(c.nxt+d2))
			if st := sc.h.fe.Stats(); st.Rewrites != 2 || st.RewriteResent != 1 {
				t.Errorf("Rewrites %d, RewriteResent %d, want 2, 1", st.Rewrites, st.RewriteResent)
			}
			sc.h.checkCounters()
		})
	}
}

// TestRewriteWaitsForTheLastRewrittenTarget: while the back-end has not
// acknowledged the last rewritten target, a follow-up is not rewritten
// (only one correction point is kept); the caller admits it as it is.
func TestRewriteWaitsForTheLastRewrittenTarget(t *testing.T) {
	sc, _, second := followUpConn(t, fullOffer(5000), 0x10000000)
	if err := sc.h.fe.Rewrite(sc.id, []byte("/t/second")); err != nil {
		t.Fatal(err)
	}
	admit(t, sc)
	third := []byte("GET /third HTTP/1.1\r\nHost: www.example.test\r\n\r\n")
	sc.now += ms
	onlyEvent(t, sc.h.input(sc.c.data(third), sc.now), EvRequest)
	if err := sc.h.fe.Rewrite(sc.id, []byte("/t/third")); !errors.Is(err, ErrRewriteBusy) {
		t.Fatalf("Rewrite with the last target unacknowledged: %v, want ErrRewriteBusy", err)
	}
	// Admitted as it is, it goes on after the second's offset, and the
	// second's target is still the front-end's to resend.
	d1 := len("/tree3/first") - len("/first")
	d2 := d1 + len("/t/second") - len("/second/page")
	third0 := sc.c.nxt - wire.Seq(len(third))
	expectTCP(t, onlyFrame(t, admit(t, sc)), seqIs(third0+wire.Seq(d2)), payloadIs(third))
	at, _ := targetSpan(second)
	targetB := third0 - wire.Seq(len(second)) + wire.Seq(at+d1)
	sc.now += s1
	var resent bool
	for _, f := range copyFrames(sc.h.tick(sc.now)) {
		s := expectTCP(t, f, to(backendIP, webPort))
		resent = resent || string(s.payload()) == "/t/second" && s.seq() == targetB
	}
	if !resent {
		t.Error("the unacknowledged rewritten target was not resent")
	}
	for _, bad := range []string{"/bad path", "/q?x", "relative", "", "/\x7f"} {
		if err := sc.h.fe.Rewrite(sc.id, []byte(bad)); !errors.Is(err, ErrBadPath) {
			t.Errorf("Rewrite with path %q: %v, want ErrBadPath", bad, err)
		}
	}
	if err := sc.h.fe.Rewrite(sc.id+1000, []byte("/x")); !errors.Is(err, ErrNoFlow) {
		t.Errorf("Rewrite of no flow: %v", err)
	}
}

// serverSeg is a reply on sc's C2 with the given ACK number and SACK
// blocks of request bytes.
func (sc *shimConn) serverSeg(ack wire.Seq, payload []byte, sack ...wire.SACKBlock) []byte {
	s := sc.srv
	b := s.frame(wire.TCPFlagACK, s.nxt, ack, segOpts(&[2]uint32{s.tsVal, s.peerTS}, sack...), payload)
	s.nxt += wire.Seq(len(payload))
	return b
}

// TestShimTranslatesTheAckAndSACKOfARewrittenRequest: with the rewrite a
// Splice names, the back-end's ACK numbers and SACK edges reach the
// client in its own numbers, across 2^32, checksums exact: an ACK inside
// the new target as its start, a SACK block inside it as an empty block.
func TestShimTranslatesTheAckAndSACKOfARewrittenRequest(t *testing.T) {
	isnC := wire.Seq(0xfffffff0)
	start := isnC + 1 + 4 // "GET " ... the target crosses 2^32
	const newLen, oldLen = 20, 8
	sc := newShimConn(t, ShimConfig{}, 0x1000, isnC, func(sp *proto.Splice) {
		sp.Flags |= proto.SpliceRewrite
		sp.RewriteStart, sp.RewriteEnd, sp.RequestOffset = uint32(start), uint32(start+newLen), newLen-oldLen
	})
	end := sc.srv.rcvNxt // RequestEnd, in the back-end's numbers
	endC := end - (newLen - oldLen)
	for _, tc := range []struct {
		name    string
		ack     wire.Seq
		sack    []wire.SACKBlock
		wantAck wire.Seq
		want    []wire.SACKBlock
	}{
		{"before the target", start - 2, nil, start - 2, nil},
		{"inside the target", start + 5, nil, start, nil},
		{"past the target", end, []wire.SACKBlock{{Left: end + 10, Right: end + 30}, {Left: start + 1, Right: start + 9}},
			endC, []wire.SACKBlock{{Left: endC + 10, Right: endC + 30}, {Left: start + oldLen, Right: start + oldLen}}},
		{"block from inside the target on", start + newLen, []wire.SACKBlock{{Left: start + 3, Right: start + newLen + 7}},
			start + oldLen, []wire.SACKBlock{{Left: start + oldLen, Right: start + oldLen + 7}}},
	} {
		toClient, _ := framesOn(t, sc.h.input(PortHost, sc.serverSeg(tc.ack, []byte("data"), tc.sack...), t0))
		if len(toClient) != 1 {
			t.Fatalf("%s: %d frames to the client", tc.name, len(toClient))
		}
		s := expectTCP(t, toClient[0], to(clientIP, testRequestPort), ackIs(tc.wantAck))
		if got := s.sackBlocks(); len(got) != len(tc.want) || len(got) > 0 && !equalBlocks(got, tc.want) {
			t.Errorf("%s: SACK %v, want %v", tc.name, got, tc.want)
		}
	}
	sc.h.checkCounters()
}

func equalBlocks(a, b []wire.SACKBlock) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestShimLearnsAFollowUpsOffsetFromTheRewriteOption: the front-end's
// segment carrying a rewritten follow-up's target reaches the kernel
// unchanged, and its option moves the shim's correction point before the
// kernel can acknowledge the new bytes; the kernel's replies are copied
// to the front-end again until one acknowledges the new target; a
// resent option changes nothing, an older one is ignored.
func TestShimLearnsAFollowUpsOffsetFromTheRewriteOption(t *testing.T) {
	sc := newShimConn(t, ShimConfig{}, 0x1000, 0xffffff00, nil)
	h := sc.h
	sc.cliSeq = sc.srv.rcvNxt // the first request was all handed over
	_, toFE := framesOn(t, h.input(PortHost, sc.serverSeg(sc.srv.rcvNxt, nil), t0))
	if len(toFE) != 1 {
		t.Fatal("no copy of the ACK of the first request")
	}
	next := sc.cliSeq
	r := rewriteRec{on: true, startC: next + 4, endC: next + 4 + 8, startB: next + 4, endB: next + 4 + 20, after: 12}
	var ob [40]byte
	n := wire.EncodeTS(ob[:], sc.cliTS, sc.srv.tsVal)
	n += putRewriteOption(ob[n:], &r)
	seg := frame(wire.TCPFrame{
		SrcMAC: feMAC, DstMAC: backendMAC,
		Src: handoffIP, Dst: backendIP, SrcPort: shimHandoffPort, DstPort: webPort,
		Seq: next, Ack: sc.srv.nxt, Flags: wire.TCPFlagACK | wire.TCPFlagPSH, Window: 300,
		Options: ob[:n], Payload: bytes.Repeat([]byte("r"), 40),
	})
	for i := 0; i < 2; i++ { // the second time a retransmission
		out := h.input(PortWire, seg, t0+ms)
		if len(out.Frames) != 1 || out.Frames[0].Port != PortHost || !bytes.Equal(out.Frames[0].Data, seg) {
			t.Fatal("the rewritten request did not pass to the kernel unchanged")
		}
	}
	if st := h.sh.Stats(); st.Rewrites != 1 {
		t.Fatalf("Rewrites %d, want 1", st.Rewrites)
	}
	// The kernel acknowledges part of the new target: the client hears
	// only up to its old target's start, the front-end gets a copy.
	toClient, toFE := framesOn(t, h.input(PortHost, sc.serverSeg(next+10, nil), t0+2*ms))
	expectTCP(t, toClient[0], ackIs(next+4))
	if len(toFE) != 1 {
		t.Fatal("no copy while the new target is unacknowledged")
	}
	toClient, toFE = framesOn(t, h.input(PortHost, sc.serverSeg(next+40, []byte("HTTP/1.1 200 OK\r\n")), t0+3*ms))
	expectTCP(t, toClient[0], ackIs(next+40-12))
	if len(toFE) != 1 {
		t.Fatal("no copy of the ACK of the new target")
	}
	toClient, toFE = framesOn(t, h.input(PortHost, sc.serverSeg(next+40, []byte("more")), t0+4*ms))
	if len(toFE) != 0 || len(toClient) != 1 {
		t.Fatalf("%d copies after the new target was acknowledged", len(toFE))
	}
	// An option naming an older point (a replay, a stale copy) is ignored.
	old := rewriteRec{on: true, startB: next - 50, endB: next - 40, after: 3}
	var ob2 [40]byte
	n = wire.EncodeTS(ob2[:], sc.cliTS, sc.srv.tsVal)
	n += putRewriteOption(ob2[n:], &old)
	stale := frame(wire.TCPFrame{
		SrcMAC: feMAC, DstMAC: backendMAC,
		Src: handoffIP, Dst: backendIP, SrcPort: shimHandoffPort, DstPort: webPort,
		Seq: next + 40, Ack: sc.srv.nxt, Flags: wire.TCPFlagACK, Window: 300, Options: ob2[:n],
	})
	h.input(PortWire, stale, t0+5*ms)
	toClient, _ = framesOn(t, h.input(PortHost, sc.serverSeg(next+40, nil), t0+6*ms))
	expectTCP(t, toClient[0], ackIs(next+40-12))
	if st := h.sh.Stats(); st.Rewrites != 1 || st.RewritesStale != 1 {
		t.Errorf("Rewrites %d, RewritesStale %d, want 1, 1", st.Rewrites, st.RewritesStale)
	}
	h.checkCounters()
}

// TestShimRefusesARewriteOutsideTheRequest: a Splice whose new target
// does not lie within the request it hands over is refused.
func TestShimRefusesARewriteOutsideTheRequest(t *testing.T) {
	h := newShim(t, ShimConfig{})
	isnC := wire.Seq(0x2000)
	sp := shimSplice(isnC + 1 + 100)
	sp.Flags |= proto.SpliceRewrite
	sp.RewriteStart, sp.RewriteEnd, sp.RequestOffset = uint32(isnC+1+90), uint32(isnC+1+120), 5
	h.input(PortHost, kernelSynAck(&sp, 0x1000, isnC), t0)
	if err := h.sh.AddSplice(&sp, t0); !errors.Is(err, ErrSpliceInconsistent) {
		t.Fatalf("AddSplice: %v, want ErrSpliceInconsistent", err)
	}
	if st := h.sh.Stats(); st.RewritesRefused != 1 || st.SplicesRefused != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestRewrittenConnectionsForwardAndTranslateWithoutAllocating: the
// per-packet paths of a rewritten connection -- a client segment shifted
// onto C2, a reply whose ACK and SACK the shim moves back -- allocate
// nothing, and did run.
func TestRewrittenConnectionsForwardAndTranslateWithoutAllocating(t *testing.T) {
	sc := connectRewritten(t, defaultSpliceParams(), "/tree2/upload")
	c := sc.c
	tmpl := c.seg(wire.TCPFlagACK|wire.TCPFlagPSH, c.nxt, c.rcvNxt, make([]byte, 1000))
	frame := make([]byte, len(tmpl))
	var out Output
	now := sc.now
	before := sc.h.fe.Stats().ForwardedFrames
	if allocs := testing.AllocsPerRun(200, func() {
		copy(frame, tmpl)
		out.Reset()
		now += ms
		sc.h.fe.Input(frame, now, &out)
	}); allocs != 0 {
		t.Errorf("forwarding on a rewritten connection: %v allocations", allocs)
	}
	if sc.h.fe.Stats().ForwardedFrames-before < 200 {
		t.Fatal("the forwarding path did not run")
	}

	sh := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, func(sp *proto.Splice) {
		sp.Flags |= proto.SpliceRewrite
		sp.RewriteStart, sp.RewriteEnd, sp.RequestOffset = 0x2005, 0x2010, 3
	})
	reply := sh.serverSeg(sh.srv.rcvNxt, make([]byte, 1000), wire.SACKBlock{Left: sh.srv.rcvNxt + 10, Right: sh.srv.rcvNxt + 20})
	rb := make([]byte, len(reply))
	tr := sh.h.sh.Stats().Translated
	if allocs := testing.AllocsPerRun(200, func() {
		copy(rb, reply)
		out.Reset()
		sh.h.sh.Input(PortHost, rb, t0, &out)
	}); allocs != 0 {
		t.Errorf("translating a reply of a rewritten request: %v allocations", allocs)
	}
	if sh.h.sh.Stats().Translated-tr < 200 {
		t.Fatal("the translating path did not run")
	}
}

// FuzzRewriteOption feeds the option walk arbitrary option bytes: it
// never reads past the header, finds an option only where one of ours
// lies whole, and blanking it keeps the checksum exact.
func FuzzRewriteOption(f *testing.F) {
	r := rewriteRec{on: true, startB: 1, endB: 9, after: 3}
	var ob [40]byte
	n := wire.EncodeTS(ob[:], 1, 2)
	n += putRewriteOption(ob[n:], &r)
	f.Add(ob[:n])
	f.Add([]byte{wire.OptNOP, rewriteOptKind, rewriteOptLen, 0x51, 0x53})
	f.Add([]byte{rewriteOptKind, 0})
	f.Fuzz(func(t *testing.T, opts []byte) {
		opts = opts[:min(len(opts), 40)&^3]
		b := frame(wire.TCPFrame{SrcMAC: routerMAC, DstMAC: feMAC, Src: clientIP, Dst: vipA,
			SrcPort: 1, DstPort: 80, Seq: 1, Ack: 1, Flags: wire.TCPFlagACK, Window: 1,
			Options: opts, Payload: []byte("xyz")})
		var p wire.Packet
		if wire.Parse(b, &p) != nil {
			return
		}
		off := findRewriteOption(p.TCP)
		if off < 0 {
			return
		}
		if off+rewriteOptLen > p.TCP.HeaderLen() || p.TCP[off] != rewriteOptKind || p.TCP[off+1] != rewriteOptLen {
			t.Fatalf("option found at %d in header of %d: % x", off, p.TCP.HeaderLen(), p.TCP.Options())
		}
		parseRewriteOption(p.TCP, off)
		blankQSOption(p.TCP, off, rewriteOptLen)
		if ok, why := checksumsExact(b); !ok {
			t.Fatal(why)
		}
	})
}

// TestShimTranslatesARewrittenRequestsAckInAPartialChecksumFrame: a reply
// the kernel left to checksum offload gets its ACK and SACK moved into
// the client's numbers with the checksum field left a partial sum, which
// the device then completes exactly.
func TestShimTranslatesARewrittenRequestsAckInAPartialChecksumFrame(t *testing.T) {
	isnC := wire.Seq(0xfffffff8)
	start := isnC + 1 + 4
	sc := newShimConn(t, ShimConfig{}, 0x1000, isnC, func(sp *proto.Splice) {
		sp.Flags |= proto.SpliceRewrite
		sp.RewriteStart, sp.RewriteEnd, sp.RequestOffset = uint32(start), uint32(start+30), 22
	})
	end := sc.srv.rcvNxt
	f := sc.serverSeg(end, bytes.Repeat([]byte("p"), 501), wire.SACKBlock{Left: end + 5, Right: end + 9})
	vh := toPartial(t, f, 0)
	toClient, _ := sentFrames(sc.h.inputVNet(PortHost, f, vh, t0+ms))
	if len(toClient) != 1 || toClient[0].VNet != vh {
		t.Fatalf("%d frames to the client", len(toClient))
	}
	seg := segmentLikeLinux(t, toClient[0].Data, vh)[0]
	s := expectTCP(t, seg, to(clientIP, testRequestPort), ackIs(end-22))
	if b := s.sackBlocks(); len(b) != 1 || b[0].Left != end+5-22 || b[0].Right != end+9-22 {
		t.Errorf("SACK %v", b)
	}
}
