package splice

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// TestGenuineClientResetBehindTheFrontEndsViewEndsTheFlow: a client that
// really reset, at an older sequence number than the front-end saw last
// (its kernel resets at the back-end's last ACK), is challenged, and the
// RST it sends in answer, at the challenge's ACK number, closes the flow.
func TestGenuineClientResetBehindTheFrontEndsViewEndsTheFlow(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	h, c := sc.h, sc.c
	// The client sent 100 more body bytes the back-end has not
	// acknowledged, then its application aborted.
	sc.now += ms
	sc.forward(t, c.data(make([]byte, 100)))
	out := h.input(c.seg(wire.TCPFlagRST, c.nxt-100, 0, nil), sc.now)
	ch := expectChallengeToClient(t, out, c, c.nxt)
	// The client has no connection any more: a RST at the ACK number.
	out = h.input(c.frame(wire.TCPFlagRST, ch.ack(), 0, nil, nil), sc.now+ms)
	if ev := eventsOf(out, EvClosed); len(ev) != 1 || ev[0].Reason != CloseRST {
		t.Fatalf("events %+v, want EvClosed rst", out.Events)
	}
	expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), flagsAre(wire.TCPFlagRST), seqIs(c.nxt))
	h.checkCounters()
}

// TestChallengeAcksCanBeSwitchedOff: a negative limit sends none, and
// counts each as held back.
func TestChallengeAcksCanBeSwitchedOff(t *testing.T) {
	h, c := acceptedClient(t, func(cfg *FrontEndConfig) { cfg.ChallengeACKLimit = -1 })
	expectNothing(t, h.input(c.seg(wire.TCPFlagRST, c.nxt+10, 0, nil), t0+ms), "in-window RST")
	if st := h.fe.Stats(); st.ChallengeAcks != 0 || st.ChallengeAcksLimited != 1 || st.Drops[dropRSTInWindow] != 1 {
		t.Errorf("ChallengeAcks %d, limited %d, rst-in-window %d", st.ChallengeAcks, st.ChallengeAcksLimited, st.Drops[dropRSTInWindow])
	}
}

// TestAnswerBudgetVariesAroundTheLimit: each second's budget lies in
// [limit/2, 3*limit/2), differs between seconds and averages the limit.
func TestAnswerBudgetVariesAroundTheLimit(t *testing.T) {
	var secret [32]byte
	secret[0] = 9
	sum, distinct := 0, map[int]bool{}
	const limit, seconds = 1000, 2000
	for s := int64(0); s < seconds; s++ {
		b := answerBudget(&secret, s, limit)
		if b < limit/2 || b >= limit*3/2 {
			t.Fatalf("second %d: budget %d", s, b)
		}
		sum += b
		distinct[b] = true
	}
	if mean := sum / seconds; mean < limit*95/100 || mean > limit*105/100 {
		t.Errorf("mean budget %d, want about %d", mean, limit)
	}
	if len(distinct) < seconds/4 {
		t.Errorf("%d distinct budgets in %d seconds", len(distinct), seconds)
	}
	if b := answerBudget(&secret, 5, 1); b != 1 {
		t.Errorf("limit 1: budget %d", b)
	}
}

// TestValidClientSegmentsKeepFlowingAfterTheWindowGrows: the bounds move
// with the client's ACKs and windows, so a long response acknowledged
// step by step, with a window that grows, is forwarded throughout.
func TestValidClientSegmentsKeepFlowingAfterTheWindowGrows(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	c := sc.c
	ack := c.isnF + 1
	for i := 0; i < 2000; i++ {
		c.window = uint16(min(502+i*32, 65535))
		ack += wire.Seq(int(c.window) << 7 / 2) // half the window each time: 2000 windows' worth
		sc.now += ms
		sc.forward(t, c.seg(wire.TCPFlagACK, c.nxt, ack, nil))
	}
	if st := sc.h.fe.Stats(); st.ChallengeAcks != 0 || st.ForwardedFrames != 2000 {
		t.Errorf("ChallengeAcks %d, forwarded %d of 2000", st.ChallengeAcks, st.ForwardedFrames)
	}
}

// FuzzFrontEndValidation sends one segment on a spliced connection, from
// the client or as the back-end, with numbers at fuzzed offsets from the
// ones the peer would use (and fuzzed options and payload, so accepted
// segments exercise the translation too). Whatever it is: every frame out parses with
// exact checksums, only a RST at exactly the expected number closes the
// flow, a segment with an ACK out of range moves no record, nothing goes
// to the back-end for a segment that failed the checks, and the flow
// ends once its timers ran.
func FuzzFrontEndValidation(f *testing.F) {
	for _, fromBackend := range []bool{false, true} {
		f.Add(uint8(wire.TCPFlagRST), int32(0), int32(0), uint16(502), []byte(nil), []byte(nil), fromBackend)
		f.Add(uint8(wire.TCPFlagRST), int32(1), int32(0), uint16(502), []byte(nil), []byte(nil), fromBackend)
		f.Add(uint8(wire.TCPFlagRST|wire.TCPFlagACK), int32(-1), int32(0), uint16(0), []byte(nil), []byte(nil), fromBackend)
		f.Add(uint8(wire.TCPFlagRST), int32(1<<31-1), int32(0), uint16(502), []byte(nil), []byte(nil), fromBackend)
		f.Add(uint8(wire.TCPFlagACK), int32(0), int32(64256), uint16(502), []byte(nil), []byte(nil), fromBackend)
		f.Add(uint8(wire.TCPFlagACK), int32(0), int32(64258), uint16(502), []byte(nil), []byte(nil), fromBackend)
		f.Add(uint8(wire.TCPFlagACK|wire.TCPFlagFIN), int32(0), int32(-70000), uint16(65535), []byte(nil), []byte(nil), fromBackend)
		f.Add(uint8(wire.TCPFlagSYN), int32(0), int32(0), uint16(1), []byte(nil), []byte(nil), fromBackend)
		f.Add(uint8(wire.TCPFlagPSH), int32(0), int32(0), uint16(1), []byte(nil), []byte(nil), fromBackend)
		f.Add(uint8(wire.TCPFlagACK|wire.TCPFlagPSH), int32(-3), int32(100), uint16(502),
			segOpts(&[2]uint32{9, 7}, wire.SACKBlock{Left: 5, Right: 9}), []byte("body"), fromBackend)
	}
	f.Fuzz(func(t *testing.T, flags uint8, seqOff, ackOff int32, window uint16, opts, payload []byte, fromBackend bool) {
		sc := connectSpliced(t, defaultSpliceParams())
		h, c, srv := sc.h, sc.c, sc.srv
		fl := onlyFlow(t, h)
		cliAck, reqUna := fl.cliAck, fl.reqUna
		expected := c.nxt
		tf := wire.TCPFrame{SrcMAC: routerMAC, DstMAC: feMAC, Src: clientIP, Dst: vipA,
			SrcPort: c.port, DstPort: webPort, Ack: c.isnF + 1}
		if fromBackend {
			expected = srv.nxt
			tf = wire.TCPFrame{SrcMAC: testBackend.MAC, DstMAC: feMAC, Src: backendIP, Dst: handoffIP,
				SrcPort: webPort, DstPort: sc.sp.HandoffPort, Ack: c.nxt}
		}
		tf.Seq, tf.Ack, tf.Flags, tf.Window = expected+wire.Seq(seqOff), tf.Ack+wire.Seq(ackOff), flags, window
		tf.Options, tf.Payload = fuzzOptions(opts), payload[:min(len(payload), 1400)]
		ackInRange := tf.Ack.InRange(cliAck-wire.Seq(fl.ck.cliMaxWin), fl.ck.replyEdge+1)
		drops := func() (n uint64) {
			for _, d := range h.fe.Stats().Drops {
				n += d
			}
			return n
		}
		before := drops()
		out := h.input(frame(tf), sc.now+ms)
		checkEmitted(t, out, true)
		refused := drops() != before
		rst := flags&wire.TCPFlagRST != 0
		if len(eventsOf(out, EvClosed)) > 0 && !(rst && seqOff == 0) {
			t.Fatalf("flags %#x seq %+d closed the flow", flags, seqOff)
		}
		if fl.cliAck != cliAck && (fromBackend || !ackInRange || refused) {
			t.Fatalf("flags %#x ack %+d moved the client's ACK record", flags, ackOff)
		}
		if fl.reqUna != reqUna && refused {
			t.Fatalf("flags %#x ack %+d moved the request record without passing the checks", flags, ackOff)
		}
		for _, fr := range copyFrames(out) {
			s := decodeTCP(t, fr)
			toBackend := s.ip.DstIP.Equal(backendIP[:])
			switch {
			case refused && toBackend && !(fromBackend && rst && s.flags() == wire.TCPFlagACK):
				t.Fatalf("flags %#x seq %+d ack %+d: refused, yet %#x sent to the back-end", flags, seqOff, ackOff, s.flags())
			case refused && !toBackend && (fromBackend || s.flags() != wire.TCPFlagACK):
				t.Fatalf("flags %#x seq %+d ack %+d: refused, yet %#x sent to the client", flags, seqOff, ackOff, s.flags())
			}
		}
		h.checkCounters()
		drainFE(t, h, sc.now+ms)
	})
}

// FuzzC2SynAckMSS: whatever MSS the back-end's SYN-ACK announces (0 to
// 65535) and however long the request, the request goes out whole on C2
// in segments that fit max(min(MSS, client's MSS), minMSS), and no more of
// them than that size allows.
func FuzzC2SynAckMSS(f *testing.F) {
	for _, m := range []uint16{0, 1, 11, 12, 13, 52, 63, 64, 65, 536, 1460, 65535} {
		f.Add(m, uint16(3000), true)
	}
	f.Add(uint16(12), uint16(8000), false)
	f.Fuzz(func(t *testing.T, mss, size uint16, ts bool) {
		h := newFE(t, nil)
		offer := fullOffer(9)
		offer.TS = ts
		c := newClient(40400, 0x47000000, offer)
		req := bigRequest(max(64, int(size)%(8<<10)))
		id := queuedRequest(t, h, c, req)
		syn := dispatch(t, h, id, t0+2*ms)
		srv := newServer(0x48000000, wire.SynOptions{})
		sa := synAckWithMSS(srv, syn, mss)
		if !ts {
			srv.ts = false
			sa = srv.frame(wire.TCPFlagSYN|wire.TCPFlagACK, srv.isn, srv.rcvNxt,
				[]byte{wire.OptMSS, 4, byte(mss >> 8), byte(mss)}, nil)
		}
		onlyEvent(t, h.input(sa, t0+3*ms), EvSplice)
		out := h.call(func(out *Output) {
			if err := h.fe.SpliceAcked(id, t0+4*ms, out); err != nil {
				t.Fatal(err)
			}
		})
		opt := 0
		if ts {
			opt = wire.TSOptionLen
		}
		eff := int(max(min(mss, c.offer.MSS), minMSS)) - opt
		if max := len(req)/eff + 1; len(out.Frames) > max {
			t.Fatalf("MSS %d: %d segments for %d bytes, want at most %d", mss, len(out.Frames), len(req), max)
		}
		var got []byte
		for _, fr := range out.Frames {
			var p wire.Packet
			if err := wire.Parse(fr.Data, &p); err != nil {
				t.Fatal(err)
			}
			if n := len(p.TCP.Payload()); n == 0 || n > eff {
				t.Fatalf("MSS %d: a segment of %d bytes, room for %d", mss, n, eff)
			}
			got = append(got, p.TCP.Payload()...)
		}
		if string(got) != req {
			t.Fatalf("MSS %d: request on C2 differs (%d bytes of %d)", mss, len(got), len(req))
		}
		// Retransmission segments the same way.
		out = h.tick(t0 + 4*ms + Time(time.Second))
		if len(out.Frames) == 0 || len(out.Frames) > len(req)/eff+1 {
			t.Fatalf("MSS %d: retransmission in %d segments", mss, len(out.Frames))
		}
	})
}

// TestRefusingForgedSegmentsAllocatesNothing: a flood of forged segments
// costs no allocation, whether dropped silently, challenged, or held back
// by the rate limit; the counters prove each run took the refusing path.
func TestRefusingForgedSegmentsAllocatesNothing(t *testing.T) {
	p := defaultSpliceParams()
	p.mod = func(cfg *FrontEndConfig) { cfg.ChallengeACKLimit = 100 }
	sc := connectSpliced(t, p)
	c := sc.c
	hp := sc.sp.HandoffPort
	cases := []struct {
		name   string
		tmpl   []byte
		reason dropReason
	}{
		{"blind RST", c.seg(wire.TCPFlagRST, c.nxt+1<<31, 0, nil), dropRSTOutOfWindow},
		{"in-window RST", c.seg(wire.TCPFlagRST, c.nxt+100, 0, nil), dropRSTInWindow},
		{"made-up ACK", c.seg(wire.TCPFlagACK, c.nxt, c.isnF+0x40000000, nil), dropAckOutOfRange},
		{"SYN", c.syn(), dropSynInFlow},
		{"spoofed C2 RST", backendFrame(backendMAC, hp, wire.TCPFlagRST, sc.srv.nxt+1<<31, 0, nil), dropRSTOutOfWindow},
		{"C2 RST in window", backendFrame(backendMAC, hp, wire.TCPFlagRST, sc.srv.nxt+100, 0, nil), dropRSTInWindow},
		{"unused handoff port", backendFrame(backendMAC, hp+1, wire.TCPFlagACK, 1, 2, nil), dropNoFlow},
	}
	fe := sc.h.fe
	now := sc.now
	var out Output
	for _, tc := range cases {
		frame := make([]byte, len(tc.tmpl))
		before := fe.Stats().Drops[tc.reason]
		allocs := testing.AllocsPerRun(200, func() {
			copy(frame, tc.tmpl)
			out.Reset()
			now += ms
			fe.Input(frame, now, &out)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations", tc.name, allocs)
		}
		if n := fe.Stats().Drops[tc.reason] - before; n != 201 {
			t.Errorf("%s: %d %s drops, want 201: the path measured is not the refusing one", tc.name, n, DropReasonName(int(tc.reason)))
		}
	}
	if st := fe.Stats(); st.ChallengeAcks == 0 || st.ChallengeAcksLimited == 0 {
		t.Errorf("ChallengeAcks %d, limited %d: both paths should have run", st.ChallengeAcks, st.ChallengeAcksLimited)
	}
	if f := fe.byID[sc.id]; f == nil || f.state != stSpliced {
		t.Fatalf("flow gone or moved on")
	}
}

// TestStaleC2ResetsAreBoundedPerHandoff: a bare ACK to a connecting
// handoff port is taken for an old connection's challenge ACK (the
// back-end's TIME_WAIT on a reused port, the normal case under load) and
// answered at once with a RST and the SYN again; anyone who knows the
// port can provoke that, so a handoff answers at most MaxRetries of them
// and drops the rest.
func TestStaleC2ResetsAreBoundedPerHandoff(t *testing.T) {
	h := newFE(t, nil)
	c := newClient(40500, 0x49000000, fullOffer(9))
	syn := dispatch(t, h, queuedRequest(t, h, c, shortRequest), t0+2*ms)
	hp := uint16(syn.tcp.SrcPort)
	frames := 0
	for i := 0; i < 100; i++ {
		frames += len(h.input(backendFrame(backendMAC, hp, wire.TCPFlagACK, wire.Seq(i), wire.Seq(7*i), nil), t0+3*ms+Time(i)*ms).Frames)
	}
	retries := h.fe.cfg.MaxRetries
	if frames != 2*retries {
		t.Errorf("%d frames for 100 bare ACKs, want a RST and a SYN for each of the first %d", frames, retries)
	}
	if n := len(h.input(backendFrame(backendMAC, hp, wire.TCPFlagACK, 1, 2, nil), t0+3*ms+challengeGap).Frames); n != 0 {
		t.Errorf("%d frames a gap later, want none: the handoff used its answers", n)
	}
	if st := h.fe.Stats(); st.Drops[dropUnexpected] != uint64(101-retries) {
		t.Errorf("%d bare ACKs dropped, want %d", st.Drops[dropUnexpected], 101-retries)
	}
	h.checkCounters()
}

// TestAbortedFlowResetsTheClientAtItsOwnAck: Abort's RST goes to a
// spliced client at its latest ACK; a client that had received more than
// it acknowledged finds it in the window but not exact and answers with
// a challenge ACK (RFC 5961). The front-end answers that with a RST at
// its ACK number, which the client takes, even with the back-end gone.
func TestAbortedFlowResetsTheClientAtItsOwnAck(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	h, c := sc.h, sc.c
	acked := c.isnF + 1 + 2000
	sc.now += ms
	sc.forward(t, c.seg(wire.TCPFlagACK, c.nxt, acked, nil))
	out := h.call(func(out *Output) {
		if err := h.fe.Abort(sc.id, sc.now, out); err != nil {
			t.Fatal(err)
		}
	})
	expectTCP(t, copyFrames(out)[1], to(clientIP, c.port), flagsAre(wire.TCPFlagRST|wire.TCPFlagACK), seqIs(acked))
	// The client had 1000 bytes more than it acknowledged: its challenge.
	out = h.input(c.seg(wire.TCPFlagACK, c.nxt, acked+1000, nil), sc.now+ms)
	expectTCP(t, onlyFrame(t, out), to(clientIP, c.port), ethTo(routerMAC), flagsAre(wire.TCPFlagRST), seqIs(acked+1000))
	if len(out.Events) != 0 {
		t.Errorf("events %+v", out.Events)
	}
	// A segment that fails the checks gets no RST, only the usual
	// challenge.
	for _, f := range copyFrames(h.input(c.seg(wire.TCPFlagACK, c.nxt+1<<31, acked+1000, nil), sc.now+ms)) {
		expectTCP(t, f, flagsAre(wire.TCPFlagACK))
	}
	h.checkCounters()
}
