package splice

import (
	"net/netip"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// Early requests (shim_early.go): the front-end may send a safe request
// with its Splice, so the request, or even a reply, can cross the shim
// before the Splice is installed.

// earlyConn is a C2 whose SYN-ACK crossed the shim at t0 and whose
// Splice, for a request of reqLen bytes, has not come yet; install adds
// it.
func earlyConn(t *testing.T, cfg ShimConfig, reqLen int) *shimConn {
	t.Helper()
	const isnB, isnC = 0x1000, 0x2000
	h := newShim(t, cfg)
	srv := newServer(isnB, wire.SynOptions{})
	srv.peerPort, srv.ts, srv.tsVal, srv.peerTS = shimHandoffPort, true, 0xffffff00, 7
	srv.rcvNxt = isnC + 1 + wire.Seq(reqLen)
	sp := shimSplice(srv.rcvNxt)
	h.input(PortHost, kernelSynAck(&sp, isnB, isnC), t0)
	return &shimConn{h: h, srv: srv, sp: sp, cliSeq: isnC + 1, cliTS: 7}
}

func (sc *shimConn) install(t *testing.T, now Time) {
	t.Helper()
	if err := sc.h.sh.AddSplice(&sc.sp, now); err != nil {
		t.Fatal(err)
	}
}

// A request segment that comes before its Splice is held; the Tick after
// the Splice passes it to the host unchanged, and the request is in
// service from then: the server cannot answer before the shim
// translates.
func TestShimHoldsARequestUntilItsSplice(t *testing.T) {
	sc := earlyConn(t, ShimConfig{ResponseQuiet: 20 * time.Millisecond}, 100)
	h, srv := sc.h, sc.srv
	req := sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, make([]byte, 100))
	if out := h.input(PortWire, req, t0+ms); len(out.Frames) != 0 {
		t.Fatalf("the request before its Splice left at once: %d frames", len(out.Frames))
	}
	if st := h.sh.Stats(); st.HeldRequests != 1 || h.sh.Active() != 0 {
		t.Fatalf("held %d, active %d", st.HeldRequests, h.sh.Active())
	}
	if got, want := h.sh.NextDeadline(), t0.Add(DefaultHandshakeWindow)+ms+1; got != want {
		t.Fatalf("next deadline %v, want the hold's end %v", got, want)
	}
	sc.install(t, t0+2*ms)
	if got := h.sh.NextDeadline(); got > t0+2*ms {
		t.Fatalf("next deadline %v after the Splice: the held request waits", got)
	}
	release := t0 + 2*ms
	if f := onlyFrame(t, h.tick(release)); string(f) != string(req) {
		t.Fatal("the held request did not pass to the host unchanged")
	}
	if st := h.sh.Stats(); st.HeldReleased != 1 || h.sh.Active() != 1 || h.sh.NextDeadline() <= release {
		t.Fatalf("released %d, active %d, next deadline %v", st.HeldReleased, h.sh.Active(), h.sh.NextDeadline())
	}
	sc.serveAndWantServiceTime(t, release+3*ms, 3*time.Millisecond, "from the request's release")
}

// serveAndWantServiceTime has the server send a 1,000-byte reply at at,
// which must leave translated, the client acknowledge it 1 ms later, and
// checks the Feedback's service time once the quiet period (20 ms) is
// over.
func (sc *shimConn) serveAndWantServiceTime(t *testing.T, at Time, want time.Duration, since string) {
	t.Helper()
	h, srv := sc.h, sc.srv
	if toClient, _ := framesOn(t, h.input(PortHost, srv.reply(make([]byte, 1000)), at)); len(toClient) != 1 {
		t.Fatalf("the reply after the Splice: %d frames to the client", len(toClient))
	}
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK, srv.nxt, nil), at+ms)
	ev := onlyEvent(t, h.tick(at+21*ms), EvResponseDone)
	if ev.ServiceTime != want || ev.Bytes != 1000 {
		t.Errorf("event %+v, want %v %s, 1000 bytes", ev, want, since)
	}
	h.checkCounters()
}

// A held request whose Splice never comes is dropped when the handshake
// window is over (the front-end resets that connection), and the pool's
// slot is free again.
func TestShimDropsAHeldRequestWhoseSpliceNeverCame(t *testing.T) {
	sc := earlyConn(t, ShimConfig{HandshakeWindow: time.Second}, 100)
	h, srv := sc.h, sc.srv
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, make([]byte, 100)), t0)
	end := t0.Add(time.Second)
	if out := h.tick(end); len(out.Frames) != 0 || h.sh.Stats().HeldExpired != 0 {
		t.Fatalf("at the window's end: %d frames, %d expired", len(out.Frames), h.sh.Stats().HeldExpired)
	}
	if out := h.tick(end + 1); len(out.Frames) != 0 || h.sh.Stats().HeldExpired != 1 || h.sh.NextDeadline() != Never {
		t.Fatalf("after the window: %d frames, %d expired, next deadline %v", len(out.Frames), h.sh.Stats().HeldExpired, h.sh.NextDeadline())
	}
	if h.sh.held.n != 0 {
		t.Fatalf("%d slots still taken", h.sh.held.n)
	}
}

// Only a segment that acknowledges the kernel's SYN-ACK exactly and lies
// within the request bytes a Splice may announce is held; others pass
// to the host at once (which answers them).
func TestShimHoldsOnlySegmentsThatContinueTheHandshake(t *testing.T) {
	for _, c := range []struct {
		name  string
		seq   wire.Seq // added to the request's first byte
		ack   wire.Seq // added to the kernel's ISN + 1
		flags uint8
	}{
		{"acknowledging more", 0, 1, wire.TCPFlagACK | wire.TCPFlagPSH},
		{"no ACK", 0, 0, wire.TCPFlagPSH},
		{"before the first byte", 0xffffffff, 0, wire.TCPFlagACK | wire.TCPFlagPSH},
		{"past MaxRequestAhead", 1 << 20, 0, wire.TCPFlagACK | wire.TCPFlagPSH},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := earlyConn(t, ShimConfig{}, 100)
			h, srv := sc.h, sc.srv
			sc.cliSeq += c.seq
			seg := sc.fromFrontEnd(c.flags, srv.nxt+c.ack, make([]byte, 100))
			if f := onlyFrame(t, h.input(PortWire, seg, t0+ms)); string(f) != string(seg) {
				t.Fatal("the segment did not pass unchanged")
			}
			if h.sh.Stats().HeldRequests != 0 {
				t.Fatal("held")
			}
		})
	}
}

// One tuple holds at most heldPerTuple segments; more pass, counted.
func TestShimHoldsABoundedNumberOfSegmentsPerTuple(t *testing.T) {
	sc := earlyConn(t, ShimConfig{}, 100*(heldPerTuple+1))
	h, srv := sc.h, sc.srv
	for i := 0; i < heldPerTuple; i++ {
		if out := h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK, srv.nxt, make([]byte, 100)), t0+ms); len(out.Frames) != 0 {
			t.Fatalf("segment %d passed", i)
		}
	}
	if out := h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK, srv.nxt, make([]byte, 100)), t0+ms); len(out.Frames) != 1 {
		t.Fatalf("segment %d past the bound: %d frames", heldPerTuple, len(out.Frames))
	}
	if st := h.sh.Stats(); st.HeldRequests != heldPerTuple || st.HeldFull != 1 {
		t.Fatalf("held %d, full %d", st.HeldRequests, st.HeldFull)
	}
	sc.install(t, t0+2*ms)
	if out := h.tick(t0 + 2*ms); len(out.Frames) != heldPerTuple {
		t.Fatalf("released %d frames, want %d", len(out.Frames), heldPerTuple)
	}
}

// Holding and releasing take nothing from the heap: the slots are the
// pool's, the copies the Output's. Each run holds the request on a fresh
// handshake and releases it to the entry a Splice installed before.
func TestShimHoldsAndReleasesWithoutAllocating(t *testing.T) {
	sc := earlyConn(t, ShimConfig{}, 100)
	h, srv := sc.h, sc.srv
	synAck := kernelSynAck(&sc.sp, 0x1000, 0x2000)
	req := sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, make([]byte, 100))
	sc.install(t, t0)
	key := fourTuple{srcIP: backendIP, dstIP: handoffIP, srcPort: webPort, dstPort: shimHandoffPort}
	ent := h.sh.entries[key]
	var out Output
	now := t0 + ms
	run := func() {
		delete(h.sh.entries, key)
		out.Reset()
		h.sh.Input(PortHost, synAck, now, &out)
		h.sh.Input(PortWire, req, now, &out)
		h.sh.entries[key] = ent
		h.sh.held.release = true // as AddSplice does
		h.sh.Tick(now, &out)
	}
	run()
	before := h.sh.Stats().HeldReleased
	allocs := testing.AllocsPerRun(100, run)
	if released := h.sh.Stats().HeldReleased - before; allocs != 0 || released != 101 {
		t.Fatalf("%v allocations per hold and release (%d released in 101 runs)", allocs, released)
	}
}

// When a request segment cannot be held (too large for a slot: a GRO'd
// super-frame, or a jumbo frame), it passes, and the handshake record
// notes it: once the Splice comes the request is in service from its
// arrival, so its Feedback's service time starts there.
func TestShimMeasuresARequestThatCameBeforeItsSplice(t *testing.T) {
	sc := earlyConn(t, ShimConfig{ResponseQuiet: 20 * time.Millisecond}, 3000)
	h, srv := sc.h, sc.srv
	arrive := t0 + ms
	req := sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, make([]byte, 3000))
	if f := onlyFrame(t, h.input(PortWire, req, arrive)); string(f) != string(req) {
		t.Fatal("the request did not pass to the host unchanged")
	}
	if h.sh.Active() != 0 || h.sh.Stats().EarlyRequests != 1 {
		t.Fatalf("before the Splice: active %d, early requests %d", h.sh.Active(), h.sh.Stats().EarlyRequests)
	}
	sc.install(t, arrive+2*ms)
	if h.sh.Active() != 1 {
		t.Fatalf("Active() = %d after the Splice of a request already in", h.sh.Active())
	}
	sc.serveAndWantServiceTime(t, arrive+5*ms, 5*time.Millisecond, "from the request's arrival")
}

// A reply ready before the Splice is dropped, not sent untranslated
// towards the front-end; the kernel's pure ACK passes as before; the
// reply sent again after the Splice is translated.
func TestShimDropsRepliesThatComeBeforeTheSplice(t *testing.T) {
	sc := earlyConn(t, ShimConfig{}, 3000)
	h, srv := sc.h, sc.srv
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, make([]byte, 3000)), t0+ms) // too large to hold
	ack := srv.seg(wire.TCPFlagACK, srv.nxt, srv.rcvNxt, nil)
	if f := onlyFrame(t, h.input(PortHost, ack, t0+ms)); string(f) != string(ack) {
		t.Fatal("the kernel's pure ACK did not pass unchanged")
	}
	body := make([]byte, 700)
	first := srv.reply(body)
	if out := h.input(PortHost, first, t0+2*ms); len(out.Frames) != 0 {
		t.Fatalf("a reply before the Splice left: %d frames", len(out.Frames))
	}
	fin := srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, srv.nxt, srv.rcvNxt, nil)
	if out := h.input(PortHost, fin, t0+2*ms); len(out.Frames) != 0 {
		t.Fatalf("a FIN before the Splice left: %d frames", len(out.Frames))
	}
	if got := h.sh.Stats().RepliesBeforeSplice; got != 2 {
		t.Fatalf("RepliesBeforeSplice = %d, want 2", got)
	}
	sc.install(t, t0+3*ms)
	toClient, toFE := framesOn(t, h.input(PortHost, first, t0+200*ms)) // the kernel's retransmission
	if len(toClient) != 1 || len(toFE) != 1 {
		t.Fatalf("the reply sent again: %d frames to the client, %d copies to the front-end; want 1 and 1", len(toClient), len(toFE))
	}
	var p wire.Packet
	if err := wire.Parse(toClient[0], &p); err != nil || p.IP.Dst() != clientIP || len(p.TCP.Payload()) != len(body) {
		t.Fatalf("translated reply: %v, to %v, %d bytes", err, p.IP.Dst(), len(p.TCP.Payload()))
	}
	h.checkCounters()
}

// Only a segment that continues the handshake exactly starts an early
// request that was not held: one at another sequence number, or
// acknowledging anything but the kernel's SYN-ACK, changes nothing (an
// attacker who guessed the tuple cannot start a measurement).
func TestShimTakesOnlyAnEarlyRequestThatContinuesTheHandshake(t *testing.T) {
	for _, c := range []struct {
		name  string
		seq   wire.Seq // added to the request's first byte
		ack   wire.Seq // added to the kernel's ISN + 1
		flags uint8
	}{
		{"sequence after the first byte", 1, 0, wire.TCPFlagACK | wire.TCPFlagPSH},
		{"sequence before it", 0xffffffff, 0, wire.TCPFlagACK | wire.TCPFlagPSH},
		{"acknowledging more", 0, 1, wire.TCPFlagACK | wire.TCPFlagPSH},
		{"no ACK", 0, 0, wire.TCPFlagPSH},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := earlyConn(t, ShimConfig{}, 3000)
			h, srv := sc.h, sc.srv
			sc.cliSeq += c.seq
			h.input(PortWire, sc.fromFrontEnd(c.flags, srv.nxt+c.ack, make([]byte, 3000)), t0+ms)
			sc.install(t, t0+2*ms)
			if h.sh.Active() != 0 || h.sh.Stats().EarlyRequests != 0 {
				t.Fatalf("active %d, early requests %d", h.sh.Active(), h.sh.Stats().EarlyRequests)
			}
		})
	}
}

// Replies pass as ever on a tuple whose handshake the shim does not hold:
// too old, or never seen (a connection to the host that is not a
// handoff).
func TestShimPassesRepliesOfTuplesWithoutARecentHandshake(t *testing.T) {
	sc := earlyConn(t, ShimConfig{HandshakeWindow: time.Second}, 100)
	h, srv := sc.h, sc.srv
	reply := srv.reply(make([]byte, 300))
	if f := onlyFrame(t, h.input(PortHost, reply, t0.Add(time.Second)+1)); string(f) != string(reply) {
		t.Fatal("a reply after the handshake window did not pass unchanged")
	}
	other := newServer(0x5000, wire.SynOptions{})
	other.peerPort = shimHandoffPort + 1
	reply = other.reply(make([]byte, 300))
	if f := onlyFrame(t, h.input(PortHost, reply, t0+ms)); string(f) != string(reply) {
		t.Fatal("a reply on a tuple without a handshake did not pass unchanged")
	}
	if got := h.sh.Stats().RepliesBeforeSplice; got != 0 {
		t.Fatalf("RepliesBeforeSplice = %d", got)
	}
	h.checkCounters()
}

// directClient is a client of the host's own address at ip: its SYN-ACK,
// request and reply cross the shim like a handoff's, but no Splice ever
// comes for them.
func directClient(t *testing.T, h *shimHarness, ip wire.IP4, now Time) (req, reply []byte) {
	t.Helper()
	const isnB, isnC = 0x5000, 0x6000
	synAck := frame(wire.TCPFrame{
		SrcMAC: hostMAC, DstMAC: routerMAC, Src: backendIP, Dst: ip, SrcPort: webPort, DstPort: 50000,
		Seq: isnB, Ack: isnC + 1, Flags: wire.TCPFlagSYN | wire.TCPFlagACK, Window: 64240,
		Options: synOpts(wire.SynOptions{MSS: 1460, WScale: -1}),
	})
	if f := onlyFrame(t, h.input(PortHost, synAck, now)); string(f) != string(synAck) {
		t.Fatal("the direct client's SYN-ACK did not pass unchanged")
	}
	req = frame(wire.TCPFrame{
		SrcMAC: routerMAC, DstMAC: backendMAC, Src: ip, Dst: backendIP, SrcPort: 50000, DstPort: webPort,
		Seq: isnC + 1, Ack: isnB + 1, Flags: wire.TCPFlagACK | wire.TCPFlagPSH, Window: 500, Payload: []byte(shortRequest),
	})
	reply = frame(wire.TCPFrame{
		SrcMAC: hostMAC, DstMAC: routerMAC, Src: backendIP, Dst: ip, SrcPort: webPort, DstPort: 50000,
		Seq: isnB + 1, Ack: isnC + 1 + wire.Seq(len(shortRequest)), Flags: wire.TCPFlagACK | wire.TCPFlagPSH,
		Window: 500, Payload: make([]byte, 100),
	})
	return req, reply
}

// A client that connects to the host's own address is not a handoff:
// once the shim knows the front-end's handoff address, from its
// configuration or from a Splice, the client's SYN-ACK is no handshake,
// so its request passes at once instead of waiting for a Splice that
// never comes (the handshake window, 5 s), and its reply passes instead of
// being dropped as one before its Splice. Before the shim knows any
// handoff address it records every SYN-ACK, as it did.
func TestShimTakesNoHandshakeOfAClientOfTheHostsOwnAddress(t *testing.T) {
	direct := wire.IP4{198, 18, 0, 10}
	for _, c := range []struct {
		name     string
		cfg      ShimConfig
		splice   bool // a Splice from the front-end came first
		recorded bool
	}{
		{"configured", ShimConfig{HandoffAddrs: []netip.Addr{handoffIP.Addr()}}, false, false},
		{"learnt", ShimConfig{}, true, false},
		{"nothing known yet", ShimConfig{}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := earlyConn(t, c.cfg, 100)
			h := sc.h
			if c.splice {
				sc.install(t, t0+ms)
			}
			req, reply := directClient(t, h, direct, t0+2*ms)
			st := h.sh.Stats()
			if c.recorded {
				if st.HandshakesNotHandoff != 0 {
					t.Fatalf("%d SYN-ACKs taken for a client's own, want none before a handoff address is known", st.HandshakesNotHandoff)
				}
				return
			}
			if st.HandshakesNotHandoff != 1 || st.Handshakes != 1 {
				t.Fatalf("handshakes recorded %d, not a handoff's %d; want 1 (the handoff's) and 1", st.Handshakes, st.HandshakesNotHandoff)
			}
			if f := onlyFrame(t, h.input(PortWire, req, t0+3*ms)); string(f) != string(req) {
				t.Fatal("the direct client's request did not pass at once")
			}
			if f := onlyFrame(t, h.input(PortHost, reply, t0+4*ms)); string(f) != string(reply) {
				t.Fatal("the reply to the direct client did not pass unchanged")
			}
			if st := h.sh.Stats(); st.HeldRequests != 0 || st.RepliesBeforeSplice != 0 || st.EarlyRequests != 0 {
				t.Errorf("held %d, replies before a Splice %d, early requests %d: the direct client was taken for a handoff",
					st.HeldRequests, st.RepliesBeforeSplice, st.EarlyRequests)
			}
			h.checkCounters()
		})
	}
}

// The learnt handoff addresses are bounded: past maxLearntHandoffs the
// shim takes every address for a handoff again rather than refuse the
// Splices of a front-end it has no room for; configured ones learn none.
func TestShimLearnsABoundedSetOfHandoffAddresses(t *testing.T) {
	var h handoffAddrs
	h.learning = true
	other := wire.IP4{198, 19, 1, 1}
	for i := range maxLearntHandoffs {
		h.learn(wire.IP4{198, 19, 0, byte(i)})
		h.learn(wire.IP4{198, 19, 0, byte(i)})
	}
	if len(h.addrs) != maxLearntHandoffs || h.has(other) {
		t.Fatalf("%d learnt, other address a handoff %v; want %d and false", len(h.addrs), h.has(other), maxLearntHandoffs)
	}
	h.learn(wire.IP4{198, 19, 0, 200})
	if !h.overflow || !h.has(other) {
		t.Fatal("past the bound, not every address counts")
	}
	cfg, err := newHandoffAddrs([]netip.Addr{handoffIP.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	cfg.learn(other)
	if cfg.has(other) || !cfg.has(handoffIP) {
		t.Fatal("configured addresses learnt another or lost their own")
	}
	if _, err := newHandoffAddrs([]netip.Addr{netip.MustParseAddr("2001:db8::1")}); err == nil {
		t.Fatal("an IPv6 handoff address was taken")
	}
}
