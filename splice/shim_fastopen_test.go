package splice

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

var testCookie = []byte{0xc0, 0x0c, 0x1e, 0x01, 0x02, 0x03, 0x04, 0x05}

// foSYN is the front-end's C2 SYN for sp's tuple with ISN isnC, asking
// for a Fast Open cookie when ask.
func foSYN(sp *proto.Splice, isnC wire.Seq, ask bool) []byte {
	return frame(wire.TCPFrame{
		SrcMAC: feMAC, DstMAC: backendMAC,
		Src: wire.IP4From(sp.HandoffIP), Dst: wire.IP4From(sp.BackendIP),
		SrcPort: sp.HandoffPort, DstPort: sp.BackendPort,
		Seq: isnC, Flags: wire.TCPFlagSYN, Window: 65535,
		Options: synOpts(wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 0x01020300, FastOpen: ask}),
	})
}

// foSynAck is the kernel's SYN-ACK on sp's tuple acknowledging ack, with
// cookie (none when nil) after the options kernelSynAck gives.
func foSynAck(sp *proto.Splice, isnB, ack wire.Seq, cookie []byte) []byte {
	o := wire.SynOptions{MSS: 1460, WScale: int(sp.WScaleBackend), SACKPermitted: true, TS: true, TSVal: 0xffffff00, TSEcr: 0x01020300}
	opts := synOpts(o)
	if cookie != nil {
		opts = append(opts, wire.OptFastOpen, byte(2+len(cookie)))
		opts = append(opts, cookie...)
		for len(opts)%4 != 0 {
			opts = append(opts, wire.OptNOP)
		}
	}
	return frame(wire.TCPFrame{
		SrcMAC: hostMAC, DstMAC: feMAC,
		Src: wire.IP4From(sp.BackendIP), Dst: wire.IP4From(sp.HandoffIP),
		SrcPort: sp.BackendPort, DstPort: sp.HandoffPort,
		Seq: isnB, Ack: ack, Flags: wire.TCPFlagSYN | wire.TCPFlagACK, Window: 64240, Options: opts,
	})
}

// foConn is one handoff on port with RequestID id: the Splice that
// carries its request (as the agent decodes it) and the classic one it
// stands for.
func foConn(port uint16, id uint64, isnB, isnC wire.Seq) (classic, m proto.Splice) {
	classic, m = carriedSplice(isnB, isnC)
	classic.HandoffPort, m.HandoffPort = port, port
	classic.RequestID, m.RequestID = id, id
	m.Request = append([]byte(nil), m.Request...)
	return classic, m
}

func fastOpenShim(t *testing.T) *shimHarness {
	return newShim(t, ShimConfig{FastOpen: true})
}

// learnCookie runs a first handoff whose SYN asks for a cookie: the SYN
// passes as it came (the shim has none yet), the kernel's SYN-ACK brings
// one, and the request goes after it as any carried request.
func learnCookie(t *testing.T, h *shimHarness, now Time) {
	t.Helper()
	const isnB, isnC = wire.Seq(0x50000000), wire.Seq(0x9000)
	classic, m := foConn(shimHandoffPort+100, 100, isnB, isnC)
	m.Flags |= proto.SpliceImplicitAck
	if err := h.sh.AddSplice(&m, now); !errors.Is(err, ErrSpliceAwaitsSynAck) {
		t.Fatalf("AddSplice: %v", err)
	}
	syn := foSYN(&classic, isnC, true)
	passedToHost(t, h.input(PortWire, syn, now), syn, "a SYN asking for a cookie the shim does not have")
	// The kernel took no request in this SYN: the Splice is acknowledged
	// as any, though it asked for an implicit acknowledgement.
	if ev := onlyEvent(t, h.input(PortHost, foSynAck(&classic, isnB, isnC+1, testCookie), now), EvSpliceInstalled); ev.FastOpen {
		t.Fatal("a SYN-ACK of the SYN alone reported as taking the request in the SYN")
	}
	out := h.tick(now)
	expectTCP(t, onlyFrame(t, out), seqIs(isnC+1), payloadIs([]byte(carriedReq)))
	if st := h.sh.Stats(); st.FastOpenCookies != 1 || st.FastOpenSent != 0 {
		t.Fatalf("after the first handoff: %d cookies learnt, %d SYNs sent with a request; want 1, 0", st.FastOpenCookies, st.FastOpenSent)
	}
}

// TestShimPutsTheCarriedRequestInTheSYN: once the kernel gave a cookie for
// the front-end's address, a SYN that asks for one and whose Splice is in
// place goes to the host with the cookie and the request, its other
// options as they came; the SYN-ACK that acknowledges the request
// completes the Splice, the segment left to send is the handshake's last
// ACK, and the request is in service from the SYN's time.
func TestShimPutsTheCarriedRequestInTheSYN(t *testing.T) {
	h := fastOpenShim(t)
	learnCookie(t, h, t0)
	const isnB = wire.Seq(0x70000000)
	isnC := wire.Seq(0xfffffff0) // the request wraps
	classic, m := foConn(shimHandoffPort, 42, isnB, isnC)
	m.Flags |= proto.SpliceImplicitAck
	if err := h.sh.AddSplice(&m, t0+ms); !errors.Is(err, ErrSpliceAwaitsSynAck) {
		t.Fatalf("AddSplice: %v", err)
	}
	copy(m.Request, "XXXX") // the datagram's buffer, reused
	s := expectTCP(t, onlyFrame(t, h.input(PortWire, foSYN(&classic, isnC, true), t0+2*ms)),
		ethFrom(feMAC), ethTo(backendMAC), from(handoffIP, shimHandoffPort), to(backendIP, webPort),
		seqIs(isnC), flagsAre(wire.TCPFlagSYN), windowIs(65535), tsIs(0x01020300, 0), payloadIs([]byte(carriedReq)))
	if o, ok := s.option(layers.TCPOptionKind(wire.OptFastOpen)); !ok || !bytes.Equal(o.OptionData, testCookie) {
		t.Fatalf("Fast Open option %v %x, want the cookie %x", ok, o.OptionData, testCookie)
	}
	for _, k := range []layers.TCPOptionKind{layers.TCPOptionKindMSS, layers.TCPOptionKindWindowScale, layers.TCPOptionKindSACKPermitted} {
		if _, ok := s.option(k); !ok {
			t.Errorf("the SYN lost its option %v", k)
		}
	}
	out := h.input(PortHost, foSynAck(&classic, isnB, isnC+1+wire.Seq(len(carriedReq)), nil), t0+3*ms)
	if ev := onlyEvent(t, out, EvSpliceInstalled); !ev.FastOpen || ev.Detail != "" {
		t.Fatalf("EvSpliceInstalled %+v: want it installed, the request taken in the SYN (no SpliceAck to send)", ev)
	}
	if fs := copyFrames(out); len(fs) != 1 {
		t.Fatalf("%d frames with the SYN-ACK, want it alone", len(fs))
	}
	out = h.tick(t0 + 3*ms)
	expectTCP(t, onlyFrame(t, out), ethFrom(feMAC), ethTo(hostMAC),
		seqIs(isnC+1+wire.Seq(len(carriedReq))), ackIs(isnB+1), flagsAre(wire.TCPFlagACK),
		windowIs(502), tsIs(0x01020304, 0xffffff00), payloadIs(nil))
	ent := h.sh.entries[shimKey(&classic)]
	if ent == nil || !ent.inService || ent.reqStart != t0+2*ms || ent.reqNxt != isnC+1+wire.Seq(len(carriedReq)) {
		t.Fatalf("entry %+v: want the request in service since the SYN", ent)
	}
	if st := h.sh.Stats(); st.FastOpenSent != 1 || st.FastOpenAccepted != 1 || st.FastOpenRefused != 0 || h.sh.Active() != 2 {
		t.Errorf("sent %d, accepted %d, refused %d, active %d; want 1, 1, 0, 2", st.FastOpenSent, st.FastOpenAccepted, st.FastOpenRefused, h.sh.Active())
	}
	// The SYN-ACK told the front-end the request arrived: the first reply
	// goes to the client alone, with no header-only copy to the front-end;
	// the server's FIN still gets one.
	srv := newServer(isnB, wire.SynOptions{})
	srv.peerPort, srv.ts, srv.tsVal, srv.peerTS = shimHandoffPort, true, 0xffffff01, 0x01020304
	srv.rcvNxt = isnC + 1 + wire.Seq(len(carriedReq))
	toClient, toFE := framesOn(t, h.input(PortHost, srv.reply(make([]byte, 500)), t0+4*ms))
	if len(toClient) != 1 || len(toFE) != 0 {
		t.Errorf("the first reply: %d frames to the client, %d to the front-end; want 1 and 0", len(toClient), len(toFE))
	}
	if _, toFE := framesOn(t, h.input(PortHost, srv.seg(wire.TCPFlagFIN|wire.TCPFlagACK, srv.nxt, srv.rcvNxt, nil), t0+5*ms)); len(toFE) != 1 {
		t.Errorf("the server's FIN: %d copies to the front-end, want 1", len(toFE))
	}
	h.checkCounters()
}

// A SYN that comes before its Splice waits for it (at most fastOpenHold):
// the Splice's arrival has the next Tick send it with the request; a SYN
// whose Splice does not come in time passes as it came.
func TestShimHoldsTheSYNForItsSplice(t *testing.T) {
	const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0x1000)
	for _, spliceComes := range []bool{true, false} {
		h := fastOpenShim(t)
		learnCookie(t, h, t0)
		classic, m := foConn(shimHandoffPort, 42, isnB, isnC)
		syn := foSYN(&classic, isnC, true)
		if out := h.input(PortWire, syn, t0+ms); len(out.Frames) != 0 {
			t.Fatalf("%d frames for a SYN whose Splice has not come", len(out.Frames))
		}
		if got := h.sh.NextDeadline(); got != t0+ms+Time(fastOpenHold) {
			t.Fatalf("next deadline %d, want the hold's end %d", got, t0+ms+Time(fastOpenHold))
		}
		if !spliceComes {
			if out := h.tick(t0 + ms + Time(fastOpenHold) - 1); len(out.Frames) != 0 {
				t.Fatal("the SYN left before its hold ended")
			}
			passedToHost(t, h.tick(t0+ms+Time(fastOpenHold)), syn, "a SYN whose Splice did not come")
			if st := h.sh.Stats(); st.FastOpenHeld != 1 || st.FastOpenHeldExpired != 1 || st.FastOpenSent != 0 {
				t.Errorf("held %d, expired %d, sent %d; want 1, 1, 0", st.FastOpenHeld, st.FastOpenHeldExpired, st.FastOpenSent)
			}
			h.checkCounters()
			continue
		}
		h.sh.AddSplice(&m, t0+ms+ms/4)
		if got := h.sh.NextDeadline(); got > t0+ms+ms/4 {
			t.Fatalf("next deadline %d: the SYN waits beyond the Splice's pass", got)
		}
		expectTCP(t, onlyFrame(t, h.tick(t0+ms+ms/4)), seqIs(isnC), flagsAre(wire.TCPFlagSYN), payloadIs([]byte(carriedReq)))
		if st := h.sh.Stats(); st.FastOpenHeld != 1 || st.FastOpenHeldExpired != 0 || st.FastOpenSent != 1 || h.sh.fo.nSYN != 0 {
			t.Errorf("held %d, expired %d, sent %d, still held %d; want 1, 0, 1, 0", st.FastOpenHeld, st.FastOpenHeldExpired, st.FastOpenSent, h.sh.fo.nSYN)
		}
		// Its Splice did not ask for an implicit acknowledgement: the
		// daemon acknowledges it although the kernel took the request.
		sa := foSynAck(&classic, isnB, isnC+1+wire.Seq(len(carriedReq)), nil)
		if ev := onlyEvent(t, h.input(PortHost, sa, t0+2*ms), EvSpliceInstalled); ev.FastOpen {
			t.Fatal("a Splice without SpliceImplicitAck reported as needing no SpliceAck")
		}
		h.checkCounters()
	}
}

// When the kernel does not take the request with the SYN (its SYN-ACK
// acknowledges the SYN only), the request goes after it as a carried
// request does; a cookie in that SYN-ACK replaces the one kept, and none
// at all means the server no longer takes Fast Open: the next SYN passes
// as it came.
func TestShimSendsTheRequestAfterASynAckThatDidNotTakeIt(t *testing.T) {
	newCookie := []byte{9, 9, 9, 9}
	for _, answer := range [][]byte{newCookie, nil} {
		h := fastOpenShim(t)
		learnCookie(t, h, t0)
		const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0x1000)
		classic, m := foConn(shimHandoffPort, 42, isnB, isnC)
		h.sh.AddSplice(&m, t0+ms)
		h.input(PortWire, foSYN(&classic, isnC, true), t0+ms)
		h.input(PortHost, foSynAck(&classic, isnB, isnC+1, answer), t0+2*ms)
		expectTCP(t, onlyFrame(t, h.tick(t0+2*ms)), seqIs(isnC+1), ackIs(isnB+1),
			flagsAre(wire.TCPFlagACK|wire.TCPFlagPSH), payloadIs([]byte(carriedReq)))
		if st := h.sh.Stats(); st.FastOpenRefused != 1 || st.FastOpenAccepted != 0 {
			t.Errorf("refused %d, accepted %d; want 1, 0", st.FastOpenRefused, st.FastOpenAccepted)
		}
		// The next handoff.
		classic2, m2 := foConn(shimHandoffPort+1, 43, isnB, isnC)
		h.sh.AddSplice(&m2, t0+3*ms)
		syn := foSYN(&classic2, isnC, true)
		out := h.input(PortWire, syn, t0+3*ms)
		if answer == nil {
			passedToHost(t, out, syn, "a SYN after the server stopped taking Fast Open")
			continue
		}
		s := expectTCP(t, onlyFrame(t, out), payloadIs([]byte(carriedReq)))
		if o, _ := s.option(layers.TCPOptionKind(wire.OptFastOpen)); !bytes.Equal(o.OptionData, newCookie) {
			t.Errorf("cookie %x, want the kernel's new one %x", o.OptionData, newCookie)
		}
		h.checkCounters()
	}
}

// Only a SYN that asks for a cookie is concerned, and only with
// ShimConfig.FastOpen; the table of held SYNs is bounded, the SYNs beyond
// it pass at once.
func TestShimFastOpenOnlyWhereAsked(t *testing.T) {
	const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0x1000)
	h := fastOpenShim(t)
	learnCookie(t, h, t0)
	classic, m := foConn(shimHandoffPort, 42, isnB, isnC)
	h.sh.AddSplice(&m, t0+ms)
	syn := foSYN(&classic, isnC, false)
	passedToHost(t, h.input(PortWire, syn, t0+ms), syn, "a SYN that does not ask for a cookie")

	off := newShim(t, ShimConfig{})
	classic0, m0 := foConn(shimHandoffPort+100, 100, isnB, isnC)
	off.sh.AddSplice(&m0, t0)
	off.input(PortWire, foSYN(&classic0, isnC, true), t0)
	off.input(PortHost, foSynAck(&classic0, isnB, isnC+1, testCookie), t0)
	off.tick(t0)
	syn = foSYN(&classic, isnC, true)
	off.sh.AddSplice(&m, t0+ms)
	passedToHost(t, off.input(PortWire, syn, t0+ms), syn, "a SYN at a shim without FastOpen")
	if st := off.sh.Stats(); st.FastOpenCookies != 0 {
		t.Errorf("a shim without FastOpen learnt %d cookies", st.FastOpenCookies)
	}

	for i := range maxHeldSYNs + 1 {
		c, _ := foConn(shimHandoffPort+200+uint16(i), uint64(200+i), isnB, isnC)
		syn := foSYN(&c, isnC, true)
		out := h.input(PortWire, syn, t0+2*ms)
		if i < maxHeldSYNs && len(out.Frames) != 0 {
			t.Fatalf("SYN %d not held", i)
		}
		if i == maxHeldSYNs {
			passedToHost(t, out, syn, "a SYN beyond the held table")
		}
	}
	if st := h.sh.Stats(); st.FastOpenHeld != maxHeldSYNs || st.FastOpenHeldFull != 1 {
		t.Errorf("held %d, not held %d; want %d, 1", st.FastOpenHeld, st.FastOpenHeldFull, maxHeldSYNs)
	}
	if out := h.tick(t0 + 2*ms + Time(fastOpenHold)); len(out.Frames) != maxHeldSYNs {
		t.Errorf("%d SYNs passed at the hold's end, want %d", len(out.Frames), maxHeldSYNs)
	}
	h.checkCounters()
}

// TestAdversarialFastOpenHoldsAreBoundedAndLoseNothing: an attacker on the
// segment who spoofs the front-end's address floods the shim with SYNs
// asking for a cookie. The shim holds at most maxHeldSYNs of them, never
// longer than fastOpenHold, and passes every one to its kernel (which
// answers them as it would have); the front-end's own handoff in the
// middle of the flood still gets through, its request in the SYN when a
// hold is free, after the SYN-ACK when not.
func TestAdversarialFastOpenHoldsAreBoundedAndLoseNothing(t *testing.T) {
	const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0x1000)
	h := fastOpenShim(t)
	learnCookie(t, h, t0)
	toHost := 0
	count := func(out *Output) {
		for _, f := range out.Frames {
			if f.Port == PortHost {
				toHost++
			}
		}
	}
	const flood = 1000
	for i := range flood {
		c, _ := foConn(uint16(30000+i), uint64(1000+i), isnB, isnC)
		count(h.input(PortWire, foSYN(&c, isnC+wire.Seq(i), true), t0+ms+Time(i)*Time(time.Microsecond)))
		if h.sh.fo.nSYN > maxHeldSYNs {
			t.Fatalf("%d SYNs held", h.sh.fo.nSYN)
		}
		if i%100 == 0 {
			count(h.tick(t0 + ms + Time(i)*Time(time.Microsecond)))
		}
	}
	// The front-end's handoff, its SYN ahead of its Splice and the table
	// full of the attacker's SYNs.
	classic, m := foConn(shimHandoffPort, 42, isnB, isnC)
	syn := foSYN(&classic, isnC, true)
	passedToHost(t, h.input(PortWire, syn, t0+2*ms), syn, "the front-end's SYN with the held table full")
	h.sh.AddSplice(&m, t0+2*ms)
	count(h.input(PortHost, foSynAck(&classic, isnB, isnC+1, nil), t0+2*ms))
	out := h.tick(t0 + 2*ms)
	count(out)
	if d := h.sh.NextDeadline(); d > t0+2*ms+Time(fastOpenHold) {
		t.Errorf("next deadline %d: a held SYN would wait past its hold", d)
	}
	count(h.tick(t0 + 3*ms + Time(fastOpenHold)))
	if h.sh.fo.nSYN != 0 || toHost != flood+1 {
		t.Fatalf("%d SYNs still held, %d of the flood's %d and the request reached the kernel", h.sh.fo.nSYN, toHost, flood)
	}
	if st := h.sh.Stats(); st.CarriedRequests != 2 || st.FastOpenSent != 0 {
		t.Errorf("carried %d, sent in the SYN %d; want 2 (with the first handoff's), 0", st.CarriedRequests, st.FastOpenSent)
	}
}

// A carried request goes only in the SYN it continues: a SYN on the same
// tuple with another ISN (a new connection there while an older one's
// Splice still waits) passes as it came.
func TestShimPutsARequestOnlyInItsOwnSYN(t *testing.T) {
	const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0x1000)
	h := fastOpenShim(t)
	learnCookie(t, h, t0)
	classic, m := foConn(shimHandoffPort, 42, isnB, isnC)
	h.sh.AddSplice(&m, t0+ms)
	other := foSYN(&classic, isnC+0x10000, true)
	passedToHost(t, h.input(PortWire, other, t0+ms), other, "the SYN of another connection on the tuple")
	if st := h.sh.Stats(); st.FastOpenSent != 0 {
		t.Errorf("%d SYNs sent with a request", st.FastOpenSent)
	}
}

// synWithRequest is a shim that learnt a Fast Open cookie and then took
// the Splice and the SYN, with the request, of connection 42 (back-end
// ISN isnB, client ISN isnC): the kernel has the request, and its
// SYN-ACK is still to come. It returns the Splice and the request's end.
func synWithRequest(t *testing.T, isnB, isnC wire.Seq) (*shimHarness, proto.Splice, wire.Seq) {
	t.Helper()
	h := fastOpenShim(t)
	learnCookie(t, h, t0)
	classic, m := foConn(shimHandoffPort, 42, isnB, isnC)
	h.sh.AddSplice(&m, t0+ms)
	h.input(PortWire, foSYN(&classic, isnC, true), t0+ms)
	return h, classic, isnC + 1 + wire.Seq(len(carriedReq))
}

// With several workers the server's first reply can reach the shim
// before the kernel's SYN-ACK (which the tun driver put on another
// worker's queue): the reply waits for the SYN-ACK and leaves translated,
// to the client, never to the front-end as it came.
func TestShimHoldsAReplyThatBeatsItsSynAck(t *testing.T) {
	const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0x1000)
	h, classic, reqEnd := synWithRequest(t, isnB, isnC)
	reply := c2FromHost(&classic, wire.TCPFlagACK|wire.TCPFlagPSH, isnB+1, reqEnd, []byte("HTTP/1.1 200 OK\r\n\r\n"))
	if out := h.input(PortHost, reply, t0+ms+ms/10); len(out.Frames) != 0 {
		t.Fatalf("a reply before its SYN-ACK left as %d frames", len(out.Frames))
	}
	if d := h.sh.NextDeadline(); d != t0+ms+ms/10+Time(earlyReplyHold) {
		t.Fatalf("next deadline %d, want the reply's hold to end at %d", d, t0+ms+ms/10+Time(earlyReplyHold))
	}
	onlyEvent(t, h.input(PortHost, foSynAck(&classic, isnB, reqEnd, nil), t0+ms+ms/5), EvSpliceInstalled)
	out := h.tick(t0 + ms + ms/5)
	var toClient [][]byte
	for _, f := range out.Frames {
		switch {
		case f.Port == PortHost:
			expectTCP(t, f.Data, flagsAre(wire.TCPFlagACK), payloadIs(nil)) // the handshake's last ACK
		case wire.IPv4(f.Data[14:]).Dst() == handoffIP:
			// The header copy the front-end gets of what is sent while
			// the request is unacknowledged.
			expectTCP(t, f.Data, from(backendIP, webPort), payloadIs(nil))
		default:
			toClient = append(toClient, f.Data)
		}
	}
	if len(toClient) != 1 {
		t.Fatalf("Tick sent %d frames to the client, want the reply", len(toClient))
	}
	expectTCP(t, toClient[0], from(vipA, webPort), to(clientIP, testRequestPort), payloadIs([]byte("HTTP/1.1 200 OK\r\n\r\n")))
	if st := h.sh.Stats(); st.FastOpenRepliesHeld != 1 || st.FastOpenRepliesDropped != 0 {
		t.Errorf("replies held %d, dropped %d; want 1, 0", st.FastOpenRepliesHeld, st.FastOpenRepliesDropped)
	}
	h.checkCounters()

	// A reply whose SYN-ACK never comes is dropped at the hold's end.
	classic2, m2 := foConn(shimHandoffPort+1, 43, isnB, isnC)
	h.sh.AddSplice(&m2, t0+2*ms)
	h.input(PortWire, foSYN(&classic2, isnC, true), t0+2*ms)
	h.input(PortHost, c2FromHost(&classic2, wire.TCPFlagACK|wire.TCPFlagPSH, isnB+1, reqEnd, []byte("x")), t0+2*ms)
	if out := h.tick(t0 + 2*ms + Time(earlyReplyHold)); len(out.Frames) != 0 || h.sh.Stats().FastOpenRepliesDropped != 1 {
		t.Errorf("at the hold's end: %d frames, %d dropped; want 0, 1", len(out.Frames), h.sh.Stats().FastOpenRepliesDropped)
	}
}

// TestTheServersFINLeavesAfterTheRepliesHeldBeforeIt: the server's
// replies came before their SYN-ACK and wait (holdEarlyReply); the
// SYN-ACK installs the Splice, and the server's FIN comes next, before
// any Tick. The replies leave before the FIN, in the pass that read it,
// and the response they make is reported whole. Left to the Tick, the
// FIN left first (the lab's client saw it ahead of the data and answered
// with SACKs), and the engine, which had then seen the FIN's sequence
// number, took the replies for ones sent again: the response was never
// reported (the front-end's timeline test, 1 run in 5 with offloads off).
func TestTheServersFINLeavesAfterTheRepliesHeldBeforeIt(t *testing.T) {
	const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0x1000)
	h, classic, reqEnd := synWithRequest(t, isnB, isnC)
	head := []byte("HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n")
	body := []byte("abcdefgh")
	seq := isnB + 1
	for _, b := range [][]byte{head, body} {
		if out := h.input(PortHost, c2FromHost(&classic, wire.TCPFlagACK|wire.TCPFlagPSH, seq, reqEnd, b), t0+ms+ms/10); len(out.Frames) != 0 {
			t.Fatalf("a reply before its SYN-ACK left as %d frames", len(out.Frames))
		}
		seq += wire.Seq(len(b))
	}
	onlyEvent(t, h.input(PortHost, foSynAck(&classic, isnB, reqEnd, nil), t0+ms+ms/5), EvSpliceInstalled)
	out := h.input(PortHost, c2FromHost(&classic, wire.TCPFlagACK|wire.TCPFlagFIN, seq, reqEnd, nil), t0+ms+ms/4)
	var toClient [][]byte
	for _, f := range out.Frames {
		if f.Port == PortWire && wire.IPv4(f.Data[14:]).Dst() == clientIP {
			toClient = append(toClient, f.Data)
		}
	}
	if len(toClient) != 3 {
		t.Fatalf("%d frames to the client, want the head, the body and the FIN", len(toClient))
	}
	expectTCP(t, toClient[0], payloadIs(head))
	expectTCP(t, toClient[1], payloadIs(body))
	expectTCP(t, toClient[2], flagsAre(wire.TCPFlagACK|wire.TCPFlagFIN), payloadIs(nil))
	var done []Event
	for _, ev := range out.Events {
		if ev.Kind == EvResponseDone {
			done = append(done, ev)
		}
	}
	if len(done) != 1 || done[0].Bytes != uint64(len(head)+len(body)) || done[0].ResponseEnd != uint32(seq) {
		t.Fatalf("responses reported %+v, want one of %d bytes ending at %d", done, len(head)+len(body), uint32(seq))
	}
	h.checkCounters()
}

// TestShimHoldsTheRepliesOfManyConnectionsAtOnce: sixteen connections
// opened together, each reply ahead of its SYN-ACK (the tun driver's
// flow table put the SYN-ACKs on another worker's queue): every reply is
// held, none dropped, and each leaves translated, to its client, once
// its SYN-ACK came. With four slots twelve of them were dropped.
func TestShimHoldsTheRepliesOfManyConnectionsAtOnce(t *testing.T) {
	const isnB, isnC, conns = wire.Seq(0x70000000), wire.Seq(0x1000), 16
	h := fastOpenShim(t)
	learnCookie(t, h, t0)
	reqEnd := isnC + 1 + wire.Seq(len(carriedReq))
	body := []byte("HTTP/1.1 200 OK\r\n\r\n")
	var splices [conns]proto.Splice
	for i := range conns {
		classic, m := foConn(shimHandoffPort+uint16(i), 42+uint64(i), isnB, isnC)
		splices[i] = classic
		h.sh.AddSplice(&m, t0+ms)
		h.input(PortWire, foSYN(&classic, isnC, true), t0+ms)
		if out := h.input(PortHost, c2FromHost(&classic, wire.TCPFlagACK|wire.TCPFlagPSH, isnB+1, reqEnd, body), t0+ms); len(out.Frames) != 0 {
			t.Fatalf("connection %d: a reply before its SYN-ACK left as %d frames", i, len(out.Frames))
		}
	}
	if st := h.sh.Stats(); st.FastOpenRepliesHeld != conns || st.FastOpenRepliesDropped != 0 {
		t.Fatalf("replies held %d, dropped %d; want %d, 0", st.FastOpenRepliesHeld, st.FastOpenRepliesDropped, conns)
	}
	toClients := 0
	for i := range conns {
		h.input(PortHost, foSynAck(&splices[i], isnB, reqEnd, nil), t0+2*ms)
		for _, f := range h.tick(t0 + 2*ms).Frames {
			if f.Port == PortWire && wire.IPv4(f.Data[14:]).Dst() == clientIP {
				expectTCP(t, f.Data, from(vipA, webPort), payloadIs(body))
				toClients++
			}
		}
	}
	if toClients != conns {
		t.Errorf("%d replies reached their clients, want %d", toClients, conns)
	}
	h.checkCounters()
}

// TestShimLearnsTheFrontEndsSYNTookTheRequestFromALateCopy: with the
// kernel taking SYNs from the wire, the kernel's SYN-ACK can cross the
// shim before it reads its copy of the front-end's SYN, and the Splice
// that carried the request can be lost, its resend carrying none. The
// copy read after the SYN-ACK then tells the shim that the SYN-ACK's ACK
// covers the request; the kernel's SYN-ACK sent again keeps that; and the
// entry the resent Splice makes has the request in service from the
// first SYN-ACK, so its response is reported. Without the copy's
// correction the response was never reported, and the front-end's slot
// for it leaked until reconciliation.
func TestShimLearnsTheFrontEndsSYNTookTheRequestFromALateCopy(t *testing.T) {
	const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0x1000)
	h := newShim(t, ShimConfig{FastOpen: true, KernelSYNs: true})
	learnCookie(t, h, t0)
	classic, m := foConn(shimHandoffPort, 42, isnB, isnC)
	reqEnd := isnC + 1 + wire.Seq(len(carriedReq))
	syn := frame(wire.TCPFrame{
		SrcMAC: feMAC, DstMAC: backendMAC,
		Src: wire.IP4From(classic.HandoffIP), Dst: wire.IP4From(classic.BackendIP),
		SrcPort: classic.HandoffPort, DstPort: classic.BackendPort,
		Seq: isnC, Flags: wire.TCPFlagSYN, Window: 65535,
		Options: synOpts(wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 0x01020300}),
		Payload: []byte(carriedReq),
	})
	synAck := foSynAck(&classic, isnB, reqEnd, nil)
	const synAckAt = t0 + 10*ms
	h.input(PortHost, synAck, synAckAt)
	if out := h.input(PortWire, syn, synAckAt+ms/10); len(out.Frames) != 0 {
		t.Fatalf("the shim wrote %d frames for the copy of a SYN the kernel took", len(out.Frames))
	}
	if st := h.sh.Stats(); st.FastOpenFromFrontEnd != 1 {
		t.Fatalf("after the late copy: %d requests known taken in the front-end's SYN, want 1", st.FastOpenFromFrontEnd)
	}
	// The front-end's last ACK was lost: the kernel sends its SYN-ACK again.
	h.input(PortHost, synAck, synAckAt+ms)
	m.Flags &^= proto.SpliceRequest
	m.Request = nil
	if err := h.sh.AddSplice(&m, synAckAt+2*ms); err != nil {
		t.Fatalf("AddSplice of the resend: %v", err)
	}
	reply := c2FromHost(&classic, wire.TCPFlagACK|wire.TCPFlagPSH, isnB+1, reqEnd, []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	const repliedAt = synAckAt + 3*ms
	out := h.input(PortHost, reply, repliedAt)
	if ev := onlyEvent(t, out, EvResponseDone); ev.RequestID != 42 || ev.ServiceTime != time.Duration(repliedAt-synAckAt) {
		t.Errorf("response of request %d in %v, want request 42's in %v (from the first SYN-ACK)", ev.RequestID, ev.ServiceTime, time.Duration(repliedAt-synAckAt))
	}
	if st := h.sh.Stats(); st.FastOpenFromFrontEnd != 1 {
		t.Errorf("%d requests known taken in the front-end's SYN, want 1", st.FastOpenFromFrontEnd)
	}
	h.checkCounters()
}
