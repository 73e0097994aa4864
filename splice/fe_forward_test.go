package splice

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

// wantForwarded lists the checks for a client segment c sent and the
// front-end forwarded onto C2 of sc: addresses, ports and MACs are C2's,
// everything naming reply bytes moves by SeqDelta or TSOffset, and the
// rest is untouched.
func wantForwarded(sc *splicedConn, sent *seen) []check {
	sp := sc.sp
	ack := sent.ack()
	if sent.tcp.ACK {
		ack -= wire.Seq(sp.SeqDelta)
	}
	cs := []check{
		ethFrom(feMAC), ethTo(backendMAC),
		from(handoffIP, sp.HandoffPort), to(backendIP, sp.BackendPort),
		seqIs(sent.seq()), ackIs(ack),
		flagsAre(sent.flags()), windowIs(sent.tcp.Window), payloadIs(sent.payload()),
	}
	if val, ecr, ok := sent.ts(); ok {
		if ecr != 0 {
			ecr -= sp.TSOffset
		}
		cs = append(cs, tsIs(val, ecr))
	}
	blocks := sent.sackBlocks()
	cs = append(cs, func(tb testing.TB, s *seen) {
		tb.Helper()
		got := s.sackBlocks()
		if len(got) != len(blocks) {
			tb.Fatalf("%d SACK blocks forwarded, sent %d", len(got), len(blocks))
		}
		for i, b := range blocks {
			d := wire.Seq(sp.SeqDelta)
			if got[i].Left != b.Left-d || got[i].Right != b.Right-d {
				tb.Errorf("SACK block %d: %#x-%#x, want %#x-%#x", i,
					uint32(got[i].Left), uint32(got[i].Right), uint32(b.Left-d), uint32(b.Right-d))
			}
		}
	})
	return cs
}

// forward sends a client frame on a spliced connection and checks its
// translation.
func (sc *splicedConn) forward(tb testing.TB, f []byte) *seen {
	tb.Helper()
	sent := decodeTCP(tb, f)
	out := sc.h.input(f, sc.now)
	return expectTCP(tb, onlyFrame(tb, out), wantForwarded(sc, sent)...)
}

func TestForwardedClientSegmentsAreTranslatedOntoC2(t *testing.T) {
	wrap := defaultSpliceParams()
	// A cookie secret that puts the front-end's ISN just below 2^32; client
	// and back-end ISNs are chosen so every number space wraps (trap 5).
	wrap.clientISN = 0xffffffe0
	wrap.backendISN = 0xffffff00
	wrap.mod = withCookieISNAbove(t, 0xff000000, wrap)

	nearTS := defaultSpliceParams()
	nearTS.offer.TSVal = 0xfffffff8 // the client's clock wraps (trap 2)
	nearTS.answer.TSVal = 0xfffffffa

	cases := []struct {
		name string
		p    spliceParams
	}{
		{"ordinary", defaultSpliceParams()},
		{"sequence-wrap", wrap},
		{"timestamps-near-2^32", nearTS},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := connectSpliced(t, tc.p)
			c, sp := sc.c, sc.sp
			delta := wire.Seq(sp.SeqDelta)
			acks := []wire.Seq{c.isnF + 1, c.isnF + 1000, c.isnF + 0x10000}
			if tc.name == "sequence-wrap" {
				// Client-facing ACKs around both wrap points: where the
				// client's number passes 2^32 and where the back-end's does.
				acks = append(acks, 0xfffffffe, 0xffffffff, 0, 1, delta-1, delta, delta+1, delta+0x10000)
			}
			// The client acknowledges replies in order, as far as its
			// window let the back-end send: ACKs of bytes never sent are
			// not forwarded (fe_validate.go). It walks its window forward
			// to the far ones.
			slices.SortFunc(acks, func(a, b wire.Seq) int { return cmp.Compare(uint32(a-c.isnF), uint32(b-c.isnF)) })
			c.window = 65535
			walked := 0
			const step = 4 << 20
			for acked := c.isnF + 1; ; {
				sc.now += ms
				sc.forward(t, c.seg(wire.TCPFlagACK, c.nxt, acked, nil))
				walked++
				if uint32(acks[len(acks)-1]-acked) <= step {
					break
				}
				acked += step
			}
			for i, ack := range acks {
				c.tsVal++
				srvTS := tc.p.answer.TSVal + uint32(i) - 3 // echoes around the server clock's wrap
				c.peerTS = srvTS + sp.TSOffset
				sack := []wire.SACKBlock{{Left: ack + 100, Right: ack + 1548}, {Left: ack - 0x20, Right: ack - 1}}
				f := c.seg(wire.TCPFlagACK|wire.TCPFlagPSH, c.nxt, ack, []byte("pipelined bytes"), sack...)
				c.nxt += 15
				sc.now += ms
				fwd := sc.forward(t, f)
				if v, ecr, _ := fwd.ts(); v != c.tsVal || ecr != srvTS && c.peerTS != 0 {
					t.Errorf("ack %#x: TSval %#x TSecr %#x, want %#x %#x", uint32(ack), v, ecr, c.tsVal, srvTS)
				}
			}
			// A pure ACK, a FIN, no SACK.
			sc.now += ms
			sc.forward(t, c.seg(wire.TCPFlagACK, c.nxt, c.isnF+5, nil))
			sc.forward(t, c.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c.nxt, c.isnF+5, nil))
			st := sc.h.fe.Stats()
			if st.ForwardedFrames != uint64(walked+len(acks)+2) || st.ForwardedBytes != uint64(15*len(acks)) {
				t.Errorf("ForwardedFrames %d, ForwardedBytes %d", st.ForwardedFrames, st.ForwardedBytes)
			}
			sc.h.checkCounters()
		})
	}
}

func TestForwardingKeepsChecksumsExactForRandomNumbers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := defaultSpliceParams()
	p.backendISN = wire.Seq(rng.Uint32())
	p.clientISN = wire.Seq(rng.Uint32())
	// The default request's body runs on for 10^9 bytes: every segment
	// in the first 2^29 of them is body and is forwarded when its (random) numbers are in the
	// windows (fe_validate.go): random ones within them, with random
	// ISNs, make random numbers on C2.
	sc := connectSpliced(t, p)
	c := sc.c
	c.window = 65535
	sc.forward(t, c.seg(wire.TCPFlagACK, c.nxt, c.isnF+1, nil))
	for i := 0; i < 500; i++ {
		c.tsVal, c.peerTS = rng.Uint32(), rng.Uint32()
		c.ts = rng.IntN(4) != 0
		n := rng.IntN(4)
		if !c.ts {
			n = rng.IntN(5)
		}
		sack := make([]wire.SACKBlock, n)
		for k := range sack {
			sack[k] = wire.SACKBlock{Left: wire.Seq(rng.Uint32()), Right: wire.Seq(rng.Uint32())}
		}
		payload := make([]byte, rng.IntN(200))
		for k := range payload {
			payload[k] = byte(rng.Uint32())
		}
		sc.now += ms
		seq := c.nxt + wire.Seq(rng.IntN(8<<20)) - 4<<20
		ack := c.isnF + 1 + wire.Seq(rng.IntN(4<<20))
		sc.forward(t, c.seg(wire.TCPFlagACK, seq, ack, payload, sack...))
		if t.Failed() {
			t.Fatalf("segment %d", i)
		}
	}
}

func TestSplicedFlowTimerHeapDoesNotGrowPerPacket(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	for i := 0; i < 1000; i++ {
		sc.now += ms
		sc.h.input(sc.c.data([]byte("x")), sc.now)
	}
	// Each forwarded packet extends the idle deadline; that must not leave
	// an entry per packet in the timer heap (see deadlines).
	if n := sc.h.fe.timers.len(); n > 8 {
		t.Errorf("timer heap holds %d entries after 1000 packets on one flow", n)
	}
	// The idle timeout still counts from the last packet.
	idle := Time(sc.h.cfg.IdleTimeout)
	sc.h.drain(sc.now, sc.now+idle-1)
	if sc.h.fe.Flows() != 1 {
		t.Fatalf("flow gone before its idle timeout")
	}
	_, evs := sc.h.drain(sc.now, sc.now+idle)
	if ev := eventsOf(&Output{Events: evs}, EvClosed); len(ev) != 1 || ev[0].Reason != CloseAborted {
		t.Errorf("events %+v at the idle timeout, want EvClosed aborted", evs)
	}
}

func TestAbortResetsBothEndsAtTheClientsNextSequence(t *testing.T) {
	for _, clientAcked := range []bool{false, true} {
		sc := connectSpliced(t, defaultSpliceParams())
		c := sc.c
		want := c.isnF + 1 // nothing of the reply reached the client yet
		if clientAcked {
			want = c.isnF + 1 + 5000
			sc.now += ms
			sc.forward(t, c.seg(wire.TCPFlagACK, c.nxt, want, nil))
		}
		out := sc.h.call(func(out *Output) {
			if err := sc.h.fe.Abort(sc.id, sc.now+ms, out); err != nil {
				t.Fatal(err)
			}
		})
		fs := copyFrames(out)
		if len(fs) != 2 {
			t.Fatalf("client acked %v: %d frames, want RSTs to both ends", clientAcked, len(fs))
		}
		expectTCP(t, fs[0], to(backendIP, webPort), from(handoffIP, sc.sp.HandoffPort), flagsAre(wire.TCPFlagRST),
			seqIs(wire.Seq(sc.sp.RequestEnd)))
		expectTCP(t, fs[1], to(clientIP, c.port), from(vipA, webPort), ethTo(routerMAC),
			flagsAre(wire.TCPFlagRST|wire.TCPFlagACK), seqIs(want))
		if ev := onlyEvent(t, out, EvClosed); ev.Reason != CloseAborted || ev.Backend != testBackend.ID {
			t.Errorf("event %+v", ev)
		}
	}
}

// icmpFragNeeded builds the ICMP a router on the client's path sends the
// VIP about a reply segment VIP:80 -> client with sequence number seq.
func icmpFragNeeded(c *testClient, seq wire.Seq) []byte {
	reply := frame(wire.TCPFrame{
		SrcMAC: feMAC, DstMAC: routerMAC, Src: c.vip, Dst: c.ip, SrcPort: c.vport, DstPort: c.port,
		Seq: seq, Ack: c.nxt, Flags: wire.TCPFlagACK, Window: 100, Payload: make([]byte, 1400),
	})
	inner := reply[14 : 14+20+8]
	b := make([]byte, 14+20+8+len(inner))
	eth := wire.Ethernet(b)
	eth.SetSrc(routerMAC)
	eth.SetDst(feMAC)
	eth.SetEtherType(wire.EtherTypeIPv4)
	ip := wire.IPv4(b[14:])
	ip[0], ip[8], ip[9] = 0x45, 64, wire.ProtoICMP
	ip[2], ip[3] = byte((len(b)-14)>>8), byte(len(b)-14)
	copy(ip[12:16], routerIP[:])
	copy(ip[16:20], c.vip[:])
	ip.SetChecksum(ip.ComputeChecksum())
	icmp := ip[20:]
	icmp[0], icmp[1] = 3, 4               // destination unreachable, fragmentation needed
	icmp[6], icmp[7] = 1300>>8, 1300&0xff // next-hop MTU
	copy(icmp[8:], inner)
	c16 := naiveFinish(naiveSum(icmp, 0))
	icmp[2], icmp[3] = byte(c16>>8), byte(c16)
	return b
}

func TestICMPFragNeededForAReplyReachesTheBackendInC2Numbers(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	replySeq := sc.c.isnF + 1 + 2896
	out := sc.h.input(icmpFragNeeded(sc.c, replySeq), sc.now+ms)
	b := onlyFrame(t, out)
	eth := wire.Ethernet(b)
	if eth.Src() != feMAC || eth.Dst() != backendMAC {
		t.Errorf("ICMP forwarded %v -> %v", eth.Src(), eth.Dst())
	}
	ip := wire.IPv4(b[14:])
	if ip.Src() != routerIP || ip.Dst() != backendIP || ip.Protocol() != wire.ProtoICMP {
		t.Errorf("outer header %v -> %v proto %d", ip.Src(), ip.Dst(), ip.Protocol())
	}
	if got, want := ip.Checksum(), ipChecksum(ip[:20]); got != want {
		t.Errorf("outer IP checksum %#x, recompute %#x", got, want)
	}
	icmp := ip[20:ip.TotalLen()]
	if naiveFinish(naiveSum(icmp, 0)) != 0 {
		t.Errorf("ICMP checksum does not verify")
	}
	if icmp[0] != 3 || icmp[1] != 4 || icmp[6] != 1300>>8 || icmp[7] != 1300&0xff {
		t.Errorf("ICMP header changed: % x", icmp[:8])
	}
	inner := wire.IPv4(icmp[8:])
	if inner.Src() != backendIP || inner.Dst() != handoffIP {
		t.Errorf("embedded header %v -> %v, want %v -> %v", inner.Src(), inner.Dst(), backendIP, handoffIP)
	}
	if got, want := inner.Checksum(), ipChecksum(inner[:20]); got != want {
		t.Errorf("embedded IP checksum %#x, recompute %#x", got, want)
	}
	tcp := wire.TCP(inner[20:28:28])
	if tcp.SrcPort() != webPort || tcp.DstPort() != sc.sp.HandoffPort {
		t.Errorf("embedded ports %d -> %d", tcp.SrcPort(), tcp.DstPort())
	}
	if got, want := tcp.Seq(), replySeq-wire.Seq(sc.sp.SeqDelta); got != want {
		t.Errorf("embedded seq %#x, want the back-end's %#x", uint32(got), uint32(want))
	}
	if sc.h.fe.Stats().ICMPForwarded != 1 {
		t.Errorf("ICMPForwarded = %d", sc.h.fe.Stats().ICMPForwarded)
	}

	// About a connection the front-end does not know: dropped.
	stranger := *sc.c
	stranger.port++
	if out := sc.h.input(icmpFragNeeded(&stranger, 1), sc.now+ms); len(out.Frames) != 0 {
		t.Errorf("forwarded ICMP about an unknown connection")
	}
	sc.h.checkCounters()
}

// TestSynOnLingeringTupleStartsANewConnection: a client that reuses the
// tuple of a flow kept for stragglers gets a new connection, whether the
// engine sees its SYN or, when the link answered it and hid it
// (AFPacketConfig.Protocol), only the cookie's final ACK.
func TestSynOnLingeringTupleStartsANewConnection(t *testing.T) {
	for _, hidden := range []bool{false, true} {
		name := "seen"
		if hidden {
			name = "hidden"
		}
		t.Run(name+"/answered", func(t *testing.T) {
			h, c := acceptedClient(t, nil)
			out := h.input(c.data([]byte("BAD\x01\r\n\r\n")), t0+ms)
			body, _ := answerOf(t, &Output{Frames: out.Frames[1:]}, c)
			h.input(c.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c.nxt, c.isnF+2+wire.Seq(len(body)), nil), t0+2*ms)
			if h.fe.byID[1].state != stLinger {
				t.Fatalf("flow in state %v, want linger", h.fe.byID[1].state)
			}
			// A straggler of the old connection is the old one's.
			h.input(c.seg(wire.TCPFlagACK, c.nxt+1, c.isnF+2+wire.Seq(len(body)), nil), t0+2*ms)
			if f := h.fe.byID[1]; f == nil || f.state != stLinger {
				t.Fatalf("a straggler of the old connection ended its lingering flow")
			}
			reuse(t, h, c, t0+3*ms, hidden)
		})
		t.Run(name+"/spliced-reset", func(t *testing.T) {
			sc := connectSpliced(t, defaultSpliceParams())
			sc.forward(t, sc.c.seg(wire.TCPFlagRST, sc.c.nxt, 0, nil))
			reuse(t, sc.h, sc.c, sc.now+ms, hidden)
		})
		t.Run(name+"/spliced-both-fins", func(t *testing.T) {
			sc := connectSpliced(t, defaultSpliceParams())
			c, srv := sc.c, sc.srv
			sc.forward(t, c.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c.nxt, c.isnF+1, nil))
			// The shim's copy of the server's FIN.
			sc.h.input(srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, srv.nxt, c.nxt+1, nil), sc.now+ms)
			reuse(t, sc.h, c, sc.now+2*ms, hidden)
		})
	}
}

// reuse sends a SYN with a new ISN on c's tuple and expects a new
// connection that works. hidden: the SYN goes to a twin engine, as if the
// link answered it and h never saw it.
func reuse(t *testing.T, h *feHarness, old *testClient, now Time, hidden bool) {
	t.Helper()
	oldPort := map[uint16]bool{}
	for k := range h.fe.byC2 {
		oldPort[k.hport] = true
	}
	c := newClient(old.port, old.isn+0x01000000, old.offer)
	answerer := h
	if hidden {
		answerer = newFE(t, nil)
	}
	sa := decodeTCP(t, onlyFrame(t, answerer.input(c.syn(), now)))
	if !sa.tcp.SYN || !sa.tcp.ACK || sa.ack() != c.isn+1 {
		t.Fatalf("new SYN on a lingering tuple answered with flags %#x ack %#x", sa.flags(), uint32(sa.ack()))
	}
	c.isnF, c.rcvNxt = sa.seq(), sa.seq()+1
	c.peerTS, _, c.ts = sa.ts() // our clock, carrying the cookie's option bits
	h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil), now)
	id := c.sendRequest(t, h, []byte(shortRequest), now+ms)
	if f := h.fe.byID[id]; f == nil || f.syn.clientISN != c.isn {
		t.Fatalf("request went to a flow with client ISN %#x, want the new %#x", uint32(f.syn.clientISN), uint32(c.isn))
	}
	syn := dispatch(t, h, id, now+2*ms)
	if oldPort[uint16(syn.tcp.SrcPort)] {
		t.Errorf("new C2 reuses handoff port %d of a live flow", syn.tcp.SrcPort)
	}
	if _, ok := syn.option(layers.TCPOptionKindTimestamps); !ok {
		t.Errorf("new C2 SYN lost the timestamps")
	}
	h.checkCounters()
}

func TestForwardingTranslatesUnalignedOptions(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	c, sp := sc.c, sc.sp
	ack := c.isnF + 100
	edge := func(s wire.Seq) []byte { return []byte{byte(s >> 24), byte(s >> 16), byte(s >> 8), byte(s)} }
	// One NOP, timestamps at an odd offset, SACK straight after: every
	// field the front-end rewrites starts on an odd byte.
	opts := []byte{wire.OptNOP, wire.OptTimestamps, 10, 0, 0, 0, 9}
	opts = append(opts, edge(wire.Seq(c.peerTS))...)
	opts = append(opts, wire.OptSACK, 10)
	opts = append(opts, edge(ack+10)...)
	opts = append(opts, edge(ack+20)...)
	opts = append(opts, wire.OptEOL, wire.OptEOL, wire.OptEOL)
	f := c.frame(wire.TCPFlagACK, c.nxt, ack, opts, nil)
	fwd := sc.forward(t, f)
	if v, ecr, _ := fwd.ts(); v != 9 || ecr != c.peerTS-sp.TSOffset {
		t.Errorf("TSval %d TSecr %#x", v, ecr)
	}

	// Duplicate timestamps cannot be translated safely: dropped, counted.
	dup := append(segOpts(&[2]uint32{1, 2}), segOpts(&[2]uint32{3, 4})...)
	if out := sc.h.input(c.frame(wire.TCPFlagACK, c.nxt, ack, dup, nil), sc.now); len(out.Frames) != 0 {
		t.Errorf("forwarded a segment with two timestamp options")
	}
	if d := sc.h.fe.Stats().Drops[dropBadOptions]; d != 1 {
		t.Errorf("bad-options drops = %d, want 1", d)
	}
}
