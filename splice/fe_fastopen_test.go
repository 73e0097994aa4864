package splice

import (
	"errors"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// fastOpenKernel answers a C2 SYN as a Linux server with Fast Open does:
// with a cookie when the SYN asked for one, and, for a SYN carrying data
// and the cookie it gave, acknowledging the data with the SYN.
type fastOpenKernel struct{ srv *testServer }

func (k *fastOpenKernel) answer(t *testing.T, synFrame []byte) []byte {
	t.Helper()
	syn := decodeTCP(t, synFrame)
	sa := decodeTCP(t, k.srv.synAck(syn))
	var cookie []byte
	o, asked := syn.option(layers.TCPOptionKind(wire.OptFastOpen))
	switch {
	case asked && len(o.OptionData) == 0:
		cookie = testCookie
	case asked && string(o.OptionData) == string(testCookie) && len(syn.payload()) > 0:
		k.srv.rcvNxt += wire.Seq(len(syn.payload()))
	}
	opts := append([]byte(nil), sa.tcp.Contents[wire.TCPMinHeaderLen:]...)
	if cookie != nil {
		opts = append(opts, wire.OptNOP, wire.OptNOP, wire.OptFastOpen, byte(2+len(cookie)))
		opts = append(opts, cookie...)
	}
	return k.srv.frame(wire.TCPFlagSYN|wire.TCPFlagACK, k.srv.isn, k.srv.rcvNxt, opts, nil)
}

// dispatchCarrying queues c's short request on h and hands it to
// testBackend at now with the request carried: the output holds C2's SYN
// and the Splice.
func dispatchCarrying(t *testing.T, h *feHarness, c *testClient, now Time) (FlowID, *Output) {
	t.Helper()
	id := queuedRequest(t, h, c, shortRequest)
	return id, h.call(func(out *Output) {
		if err := h.fe.DispatchCarrying(id, testBackend, now, out); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRequestInTheSYNEndToEnd runs two handoffs of a carried request
// through a front-end and a shim with Fast Open on, to a kernel that takes
// it: the first SYN asks for a cookie and the request follows the SYN-ACK
// as before; the second SYN carries the request, the SYN-ACK acknowledges
// it, and the front-end takes that SYN-ACK as the end of the handshake
// and of the request: it sends nothing, now or at its retransmission
// timeout. A front-end without FastOpen asks for nothing.
func TestRequestInTheSYNEndToEnd(t *testing.T) {
	sh := fastOpenShim(t)
	h := newFE(t, func(c *FrontEndConfig) { c.SpliceAtSYN, c.FastOpen = true, true })
	for i, wantInSYN := range []bool{false, true} {
		now := t0 + Time(i)*10*ms
		isnC := wire.Seq(0x30000000 + i*0x1000000)
		c := newClient(40020+uint16(i), isnC, fullOffer(9))
		id, out := dispatchCarrying(t, h, c, now)
		synFrame := onlyFrame(t, out)
		if o, ok := decodeTCP(t, synFrame).option(layers.TCPOptionKind(wire.OptFastOpen)); !ok || len(o.OptionData) != 0 {
			t.Fatalf("handoff %d: the SYN of a carried request asks for no cookie", i)
		}
		m := onlyEvent(t, out, EvSplice).Splice
		m.Request = append([]byte(nil), m.Request...)
		h.call(func(out *Output) {
			if err := h.fe.SpliceAcked(id, now, out); err != nil {
				t.Fatal(err)
			}
		})
		if err := sh.sh.AddSplice(&m, now); !errors.Is(err, ErrSpliceAwaitsSynAck) {
			t.Fatalf("handoff %d: AddSplice: %v", i, err)
		}
		toHost := onlyFrame(t, sh.input(PortWire, synFrame, now))
		if got := len(decodeTCP(t, toHost).payload()) > 0; got != wantInSYN {
			t.Fatalf("handoff %d: the request in the SYN %v, want %v", i, got, wantInSYN)
		}
		k := &fastOpenKernel{newServer(0x0badf00d, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})}
		crossed := copyFrames(sh.input(PortHost, k.answer(t, toHost), now+ms))
		if len(crossed) != 1 {
			t.Fatalf("handoff %d: %d frames for the SYN-ACK at the shim", i, len(crossed))
		}
		if out := h.input(crossed[0], now+ms); len(out.Frames) != 0 {
			t.Fatalf("handoff %d: the front-end answered the SYN-ACK with %d frames", i, len(out.Frames))
		}
		last := expectTCP(t, onlyFrame(t, sh.tick(now+ms)), seqIs(isnC+1+wire.Seq(len(shortRequest))*b2s(wantInSYN)))
		if wantInSYN && len(last.payload()) != 0 {
			t.Fatalf("the shim sent the request again after the kernel took it with the SYN")
		}
		if !wantInSYN {
			// The kernel acknowledges the request the shim sent.
			h.input(k.srv.seg(wire.TCPFlagACK, k.srv.isn+1, isnC+1+wire.Seq(len(shortRequest)), nil), now+ms)
		}
		st := h.fe.Stats()
		if st.HandoffsDone != uint64(i+1) || st.RequestsInSYN != uint64(i) {
			t.Fatalf("handoff %d: done %d, in the SYN %d", i, st.HandoffsDone, st.RequestsInSYN)
		}
		if wantInSYN {
			// Nothing to resend: the SYN-ACK acknowledged the request.
			if out := h.tick(now + ms + Time(h.cfg.RTOMin) + ms); len(out.Frames) != 0 {
				t.Fatalf("%d frames at the retransmission timeout", len(out.Frames))
			}
		}
	}
	if st := sh.sh.Stats(); st.FastOpenAccepted != 1 || st.FastOpenCookies != 1 {
		t.Errorf("shim: accepted %d, cookies %d; want 1, 1", st.FastOpenAccepted, st.FastOpenCookies)
	}

	off := newFE(t, atSYNOn)
	id := queuedRequest(t, off, newClient(40030, 0x30000000, fullOffer(9)), shortRequest)
	out := off.call(func(out *Output) {
		if err := off.fe.DispatchCarrying(id, testBackend, t0, out); err != nil {
			t.Fatal(err)
		}
	})
	if _, ok := decodeTCP(t, onlyFrame(t, out)).option(layers.TCPOptionKind(wire.OptFastOpen)); ok {
		t.Error("a front-end without FastOpen asked for a cookie")
	}
}

// A SYN-ACK that acknowledges more than the SYN is taken only for a
// request the front-end's Splice carried, and only up to its end: for a
// request it sends itself the back-end cannot have it yet.
func TestSynAckAcknowledgingTheRequestOnlyWhenCarried(t *testing.T) {
	for _, carry := range []bool{false, true} {
		h := newFE(t, func(c *FrontEndConfig) { c.SpliceAtSYN, c.FastOpen = true, true })
		c := newClient(40040, 0x30000000, fullOffer(9))
		id := queuedRequest(t, h, c, shortRequest)
		out := h.call(func(out *Output) {
			dispatch := h.fe.Dispatch
			if carry {
				dispatch = h.fe.DispatchCarrying
			}
			if err := dispatch(id, testBackend, t0, out); err != nil {
				t.Fatal(err)
			}
		})
		syn := decodeTCP(t, onlyFrame(t, out))
		srv := newServer(0x0badf00d, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})
		srv.synAck(syn)
		for _, extra := range []int{len(shortRequest) + 1, len(shortRequest)} {
			ack := syn.seq() + 1 + wire.Seq(extra)
			h.input(srv.frame(wire.TCPFlagSYN|wire.TCPFlagACK, srv.isn, ack, synOpts(wire.SynOptions{MSS: 1460, WScale: 7}), nil), t0+ms)
			established := h.fe.Stats().RequestsInSYN == 1
			if want := carry && extra == len(shortRequest); established != want {
				t.Fatalf("carry %v, SYN-ACK acknowledging %d bytes past the SYN: taken %v, want %v", carry, extra, established, want)
			}
		}
	}
}

func b2s(b bool) wire.Seq {
	if b {
		return 1
	}
	return 0
}

// A segment with data from the back-end before its SYN-ACK (a reply that
// overtook it, passed untranslated by a shim that could not hold it) is
// not the challenge ACK of a TIME-WAIT: the front-end drops it rather
// than reset the connection the back-end just took the request on.
func TestDataBeforeTheSynAckIsNotAChallengeAck(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.SpliceAtSYN, c.FastOpen = true, true })
	id := queuedRequest(t, h, newClient(40050, 0x30000000, fullOffer(9)), shortRequest)
	out := h.call(func(out *Output) {
		if err := h.fe.DispatchCarrying(id, testBackend, t0, out); err != nil {
			t.Fatal(err)
		}
	})
	syn := decodeTCP(t, onlyFrame(t, out))
	srv := newServer(0x0badf00d, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})
	srv.synAck(syn)
	reqEnd := syn.seq() + 1 + wire.Seq(len(shortRequest))
	if out := h.input(srv.frame(wire.TCPFlagACK|wire.TCPFlagPSH, srv.isn+1, reqEnd, nil, []byte("HTTP/1.1 200 OK\r\n")), t0+ms); len(out.Frames) != 0 {
		t.Fatalf("the front-end answered a reply before the SYN-ACK with %d frames", len(out.Frames))
	}
	if st := h.fe.Stats(); st.HandoffTimeWaitResets != 0 {
		t.Errorf("%d TIME-WAIT resets", st.HandoffTimeWaitResets)
	}
}

// TestNoFastOpenForAClientWindowBelowTwoSegments: a carried request goes
// in C2's SYN (the SYN asks for a cookie) only when the client's window
// holds two of its full segments; below, a kernel making its socket from
// the SYN would size its segments for a window 128 times larger and the
// download would crawl (fastOpenFits).
func TestNoFastOpenForAClientWindowBelowTwoSegments(t *testing.T) {
	cases := []struct {
		window uint16 // raw, client scale 7, MSS 1460
		want   bool
	}{
		{10, false}, // 1280 bytes: a 4 KiB receive buffer
		{22, false}, // 2816 < 2920
		{23, true},  // 2944
		{502, true},
	}
	for i, tc := range cases {
		h := newFE(t, func(c *FrontEndConfig) { c.SpliceAtSYN, c.FastOpen = true, true })
		c := newClient(40200+uint16(i), wire.Seq(0x31000000+i), fullOffer(9))
		c.window = tc.window
		id := queuedRequest(t, h, c, shortRequest)
		out := h.call(func(out *Output) {
			if err := h.fe.DispatchCarrying(id, testBackend, t0+2*ms, out); err != nil {
				t.Fatal(err)
			}
		})
		syn := decodeTCP(t, onlyFrame(t, out))
		_, asked := syn.option(layers.TCPOptionKind(wire.OptFastOpen))
		if asked != tc.want {
			t.Errorf("client window %d<<7: the SYN asks for Fast Open %v, want %v", tc.window, asked, tc.want)
		}
		ev := spliceEvent(t, out)
		if implicit := ev.Splice.Flags&proto.SpliceImplicitAck != 0; implicit != asked {
			t.Errorf("client window %d<<7: Splice asks for an implicit ack %v for a SYN that asks for Fast Open %v", tc.window, implicit, asked)
		}
		if want := min(uint32(tc.window)<<7, 65535); uint32(syn.tcp.Window) != want {
			t.Errorf("client window %d<<7: SYN window %d, want %d", tc.window, syn.tcp.Window, want)
		}
	}
}

// The Splice of a request not carried says the SYN does not ask for Fast
// Open, so the daemon sends it behind the SYN as before.
func TestSpliceOfAnUncarriedRequestIsNotMarkedFastOpen(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.SpliceAtSYN, c.FastOpen = true, true })
	c := newClient(40250, 0x31800000, fullOffer(9))
	id := queuedRequest(t, h, c, shortRequest)
	out := h.call(func(out *Output) {
		if err := h.fe.Dispatch(id, testBackend, t0+2*ms, out); err != nil {
			t.Fatal(err)
		}
	})
	syn := decodeTCP(t, onlyFrame(t, out))
	if _, asked := syn.option(layers.TCPOptionKind(wire.OptFastOpen)); asked {
		t.Fatal("the SYN of a request its Splice does not carry asks for Fast Open")
	}
	if ev := spliceEvent(t, out); ev.Splice.Flags&(proto.SpliceRequest|proto.SpliceImplicitAck) != 0 {
		t.Fatalf("EvSplice flags %#x; want no SpliceRequest or SpliceImplicitAck", ev.Splice.Flags)
	}
}

// The Splice of a SYN that asks for Fast Open asks the shim for no
// SpliceAck when the kernel takes the request in the SYN
// (proto.SpliceImplicitAck), and such a SYN-ACK is reported as the
// acknowledgement (EvSpliceTaken); a SYN-ACK that acknowledges only the
// SYN (a cookie the kernel no longer takes) is not, the shim's SpliceAck
// then comes as before.
func TestASYNACKThatTakesTheRequestInTheSYNAcknowledgesTheSplice(t *testing.T) {
	for i, inSYN := range []bool{true, false} {
		h := newFE(t, func(c *FrontEndConfig) { c.SpliceAtSYN, c.FastOpen = true, true })
		c := newClient(40260+uint16(i), wire.Seq(0x31900000+i), fullOffer(9))
		id := queuedRequest(t, h, c, shortRequest)
		out := h.call(func(out *Output) {
			if err := h.fe.DispatchCarrying(id, testBackend, t0+2*ms, out); err != nil {
				t.Fatal(err)
			}
		})
		if ev := spliceEvent(t, out); ev.Splice.Flags&proto.SpliceImplicitAck == 0 {
			t.Fatalf("the Splice of a Fast Open SYN has flags %#x, want SpliceImplicitAck", ev.Splice.Flags)
		}
		syn := decodeTCP(t, onlyFrame(t, out))
		srv := newServer(0x0badf00d, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})
		sa := decodeTCP(t, srv.synAck(syn))
		if inSYN {
			srv.rcvNxt += wire.Seq(len(shortRequest))
		}
		out = h.input(srv.frame(wire.TCPFlagSYN|wire.TCPFlagACK, srv.isn, srv.rcvNxt, sa.tcp.Contents[wire.TCPMinHeaderLen:], nil), t0+3*ms)
		var taken []Event
		for _, ev := range out.Events {
			if ev.Kind == EvSpliceTaken {
				taken = append(taken, ev)
			}
		}
		switch {
		case inSYN && (len(taken) != 1 || taken[0].Flow != id || taken[0].Backend != testBackend.ID):
			t.Fatalf("SYN-ACK taking the request in the SYN: EvSpliceTaken %+v, want one for flow %d, back-end %d", taken, id, testBackend.ID)
		case !inSYN && len(taken) != 0:
			t.Fatalf("SYN-ACK of the SYN alone: EvSpliceTaken %+v, want none", taken)
		}
	}
}

// spliceEvent is out's one EvSplice.
func spliceEvent(t *testing.T, out *Output) Event {
	t.Helper()
	var found []Event
	for _, ev := range out.Events {
		if ev.Kind == EvSplice {
			found = append(found, ev)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d EvSplice events, want 1", len(found))
	}
	return found[0]
}

// TestAClosedFastOpenHandoffNoLongerCountsAgainstItsSource: once both
// sides of a handoff whose request went in the SYN have closed, its port
// no longer counts against the client's MaxPortsPerSource, though the
// flow keeps it through the linger. The SYN-ACK that completes such a
// handoff leaves the dispatch's timer (a second away) in place, and the
// FINs only ever move a timer earlier; the count must follow the FINs,
// not the timer: under load (7,000 connections a second from one wrk
// client) the closed connections of that second held 4,096 ports and
// half the requests got a 503.
func TestAClosedFastOpenHandoffNoLongerCountsAgainstItsSource(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.SpliceAtSYN, c.FastOpen, c.MaxPortsPerSource = true, true, 1 })
	c := newClient(40300, 0x32000000, fullOffer(9))
	id := queuedRequest(t, h, c, shortRequest)
	synFrame := onlyFrame(t, h.call(func(out *Output) {
		if err := h.fe.DispatchCarrying(id, testBackend, t0+2*ms, out); err != nil {
			t.Fatal(err)
		}
	}))
	h.call(func(out *Output) {
		if err := h.fe.SpliceAcked(id, t0+2*ms, out); err != nil {
			t.Fatal(err)
		}
	})
	syn := decodeTCP(t, synFrame)
	srv := newServer(0x0badf00d, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})
	sa := decodeTCP(t, srv.synAck(syn))
	srv.rcvNxt += wire.Seq(len(shortRequest)) // the kernel took the request with the SYN
	h.input(srv.frame(wire.TCPFlagSYN|wire.TCPFlagACK, srv.isn, srv.rcvNxt, sa.tcp.Contents[wire.TCPMinHeaderLen:], nil), t0+3*ms)
	if st := h.fe.Stats(); st.RequestsInSYN != 1 || st.HandoffsDone != 1 {
		t.Fatalf("in the SYN %d, done %d; want 1, 1", st.RequestsInSYN, st.HandoffsDone)
	}
	second := func(port uint16, now Time) error {
		c2 := newClient(port, wire.Seq(0x33000000+uint32(port)), fullOffer(9))
		c2.handshake(t, h, now)
		id2 := c2.sendRequest(t, h, []byte(shortRequest), now+ms)
		var err error
		h.call(func(out *Output) { err = h.fe.Dispatch(id2, testBackend, now+2*ms, out) })
		return err
	}
	if err := second(40301, t0+4*ms); !errors.Is(err, ErrSourcePorts) {
		t.Fatalf("a second handoff while the first is open: %v, want ErrSourcePorts", err)
	}
	// The back-end's FIN (the shim's header-only copy), then the client's.
	h.input(srv.seg(wire.TCPFlagFIN|wire.TCPFlagACK, srv.nxt, srv.rcvNxt, nil), t0+8*ms)
	h.input(c.seg(wire.TCPFlagFIN|wire.TCPFlagACK, c.nxt, c.rcvNxt, nil), t0+9*ms)
	if err := second(40302, t0+10*ms); err != nil {
		t.Fatalf("a handoff after the first closed: %v", err)
	}
}
