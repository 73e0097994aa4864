package splice

import (
	"errors"
	"strings"
	"testing"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

const carriedReq = "GET /data/1K HTTP/1.1\r\nHost: h\r\n\r\n"

// carriedSplice is a Splice sent with the SYN that carries carriedReq,
// the first bytes after the client's ISN isnC.
func carriedSplice(isnB, isnC wire.Seq) (classic, m proto.Splice) {
	classic = shimSplice(isnC + 1 + wire.Seq(len(carriedReq)))
	m = atSYNSplice(classic, isnB, 0xffffff00)
	m.Flags |= proto.SpliceRequest
	m.Request = []byte(carriedReq)
	m.RequestWindow, m.RequestTSVal = 502, 0x01020304
	return classic, m
}

// TestShimSendsTheRequestCarriedInItsSplice: the segment the shim sends
// its host for the front-end is the handshake's third segment and the
// request at once, exactly as the front-end would have sent it: the
// front-end's addresses (the SYN-ACK's, reversed), the byte after the
// SYN, the SYN-ACK acknowledged, the front-end's window and TSval, the
// SYN-ACK's TSval echoed, exact checksums; and it goes in the pass that
// completed the Splice (its Tick), in either order of Splice and
// SYN-ACK. The entry takes it as the request arriving.
func TestShimSendsTheRequestCarriedInItsSplice(t *testing.T) {
	const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0xfffffff0) // the request wraps
	classic, m := carriedSplice(isnB, isnC)
	sa := kernelSynAck(&classic, isnB, isnC)
	for _, synAckFirst := range []bool{false, true} {
		h := newShim(t, ShimConfig{})
		buf := append([]byte(nil), m.Request...)
		mm := m
		mm.Request = buf
		if synAckFirst {
			h.input(PortHost, sa, t0)
			if err := h.sh.AddSplice(&mm, t0+ms); err != nil {
				t.Fatalf("SYN-ACK first: AddSplice: %v", err)
			}
		} else {
			if err := h.sh.AddSplice(&mm, t0); !errors.Is(err, ErrSpliceAwaitsSynAck) {
				t.Fatalf("AddSplice before the SYN-ACK: %v", err)
			}
			copy(buf, "XXXX") // the datagram's buffer, reused: the shim kept a copy
			out := h.input(PortHost, sa, t0+ms)
			onlyEvent(t, out, EvSpliceInstalled)
			if fs := copyFrames(out); len(fs) != 1 {
				t.Fatalf("%d frames with the SYN-ACK, want it alone", len(fs))
			}
		}
		if got := h.sh.NextDeadline(); got > t0+ms {
			t.Fatalf("next deadline %d: the request waits beyond this pass", got)
		}
		out := h.tick(t0 + ms)
		if len(out.Frames) != 1 || out.Frames[0].Port != PortHost {
			t.Fatalf("SYN-ACK first %v: Tick sent %d frames, want the request to the host", synAckFirst, len(out.Frames))
		}
		expectTCP(t, out.Frames[0].Data,
			ethFrom(feMAC), ethTo(hostMAC),
			from(wire.IP4From(m.HandoffIP), m.HandoffPort), to(wire.IP4From(m.BackendIP), m.BackendPort),
			seqIs(isnC+1), ackIs(isnB+1), flagsAre(wire.TCPFlagACK|wire.TCPFlagPSH),
			windowIs(502), tsIs(0x01020304, 0xffffff00), payloadIs([]byte(carriedReq)))
		if st := h.sh.Stats(); st.CarriedRequests != 1 || st.HeldReleased != 1 || h.sh.Active() != 1 {
			t.Errorf("SYN-ACK first %v: carried %d, released %d, active %d; want 1, 1, 1", synAckFirst, st.CarriedRequests, st.HeldReleased, h.sh.Active())
		}
		// Sent once: a resend of the Splice sends nothing more.
		h.sh.AddSplice(&mm, t0+2*ms)
		if out := h.tick(t0 + 2*ms); len(out.Frames) != 0 {
			t.Errorf("SYN-ACK first %v: %d frames after a resend", synAckFirst, len(out.Frames))
		}
		h.checkCounters()
	}
}

// Without timestamps on C2 the segment has no option.
func TestShimCarriedRequestWithoutTimestamps(t *testing.T) {
	const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0x1000)
	classic, m := carriedSplice(isnB, isnC)
	classic.Flags &^= proto.SpliceTimestamps
	m.Flags &^= proto.SpliceTimestamps
	h := newShim(t, ShimConfig{})
	h.sh.AddSplice(&m, t0)
	h.input(PortHost, kernelSynAck(&classic, isnB, isnC), t0+ms)
	out := h.tick(t0 + ms)
	if len(out.Frames) != 1 {
		t.Fatalf("%d frames, want the request", len(out.Frames))
	}
	s := expectTCP(t, out.Frames[0].Data, seqIs(isnC+1), payloadIs([]byte(carriedReq)))
	if _, _, ok := s.ts(); ok || len(s.raw) != 54+len(carriedReq) {
		t.Errorf("segment of %d bytes with timestamps %v, want %d without", len(s.raw), ok, 54+len(carriedReq))
	}
}

// A resend of the Splice without its request (the controller strips it)
// that replaced the first while it waited: the request still goes, as
// its RequestID's.
func TestShimCarriedRequestSurvivesAResendWithoutIt(t *testing.T) {
	const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0x1000)
	classic, m := carriedSplice(isnB, isnC)
	h := newShim(t, ShimConfig{})
	h.sh.AddSplice(&m, t0)
	resend := m
	resend.Flags &^= proto.SpliceRequest
	resend.Request = nil
	h.sh.AddSplice(&resend, t0+ms/2)
	h.input(PortHost, kernelSynAck(&classic, isnB, isnC), t0+ms)
	if out := h.tick(t0 + ms); len(out.Frames) != 1 {
		t.Fatalf("%d frames, want the request", len(out.Frames))
	}
}

// The shim sends a carried request only for its own handshake and
// Splice: not when the bytes do not end at RequestEnd right after the
// SYN the kernel answered, not another Splice's on the tuple, not when
// the Splice is refused; and one that finds no room is not sent (the
// front-end sends it again). Nothing reaches the host in these cases.
func TestShimDoesNotSendACarriedRequestThatDoesNotFit(t *testing.T) {
	const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0x1000)
	t.Run("bytes short of RequestEnd", func(t *testing.T) {
		classic, m := carriedSplice(isnB, isnC)
		m.Request = m.Request[:len(m.Request)-1]
		h := newShim(t, ShimConfig{})
		h.sh.AddSplice(&m, t0)
		onlyEvent(t, h.input(PortHost, kernelSynAck(&classic, isnB, isnC), t0+ms), EvSpliceInstalled)
		if out := h.tick(t0 + ms); len(out.Frames) != 0 || h.sh.Stats().CarriedRefused != 1 {
			t.Fatalf("%d frames, refused %d", len(out.Frames), h.sh.Stats().CarriedRefused)
		}
	})
	t.Run("another connection's on the tuple", func(t *testing.T) {
		classic, m := carriedSplice(isnB, isnC)
		h := newShim(t, ShimConfig{})
		h.sh.AddSplice(&m, t0)
		// A later Splice for the tuple, not carrying, replaces it.
		other := m
		other.RequestID++
		other.Flags &^= proto.SpliceRequest
		other.Request = nil
		h.sh.AddSplice(&other, t0+ms/2)
		h.input(PortHost, kernelSynAck(&classic, isnB, isnC), t0+ms)
		if out := h.tick(t0 + ms); len(out.Frames) != 0 {
			t.Fatalf("%d frames: the earlier Splice's request went on the later connection", len(out.Frames))
		}
	})
	t.Run("refused", func(t *testing.T) {
		classic, m := carriedSplice(isnB, isnC)
		classic.BackendPort, m.BackendPort = 22, 22 // not a web port
		h := newShim(t, ShimConfig{})
		if err := h.sh.AddSplice(&m, t0); err == nil || errors.Is(err, ErrSpliceAwaitsSynAck) {
			t.Fatalf("AddSplice: %v, want a refusal", err)
		}
		h.input(PortHost, kernelSynAck(&classic, isnB, isnC), t0+ms)
		if out := h.tick(t0 + ms); len(out.Frames) != 0 || h.sh.held.n != 0 {
			t.Fatalf("%d frames, %d slots taken for a refused Splice", len(out.Frames), h.sh.held.n)
		}
	})
	t.Run("no room", func(t *testing.T) {
		classic, m := carriedSplice(isnB, isnC)
		h := newShim(t, ShimConfig{})
		for i := range h.sh.held.slots {
			h.sh.held.slots[i].inUse, h.sh.held.slots[i].at = true, t0
		}
		h.sh.held.n = len(h.sh.held.slots)
		h.sh.AddSplice(&m, t0)
		h.input(PortHost, kernelSynAck(&classic, isnB, isnC), t0+ms)
		if st := h.sh.Stats(); st.CarriedNoRoom != 1 || st.CarriedRequests != 0 {
			t.Fatalf("no room %d, carried %d", st.CarriedNoRoom, st.CarriedRequests)
		}
	})
}

// TestCarriedRequestIsTheSegmentTheFrontEndWouldSend: a request the
// front-end lets go at once (DispatchCarrying, SpliceAcked at dispatch)
// travels in its Splice; the front-end sends nothing at the SYN-ACK, and
// the segment the shim builds from the Splice and the SYN-ACK is, byte
// for byte, the one the front-end sends after a classic SpliceAck. If
// the back-end never acknowledges it (the shim could not send it), the
// front-end's retransmission timer sends it from its own copy.
func TestCarriedRequestIsTheSegmentTheFrontEndWouldSend(t *testing.T) {
	run := func(carry bool) ([]byte, *feHarness, *testServer) {
		h := newFE(t, atSYNOn)
		c := newClient(40013, 0x30000000, fullOffer(9))
		id := queuedRequest(t, h, c, shortRequest)
		out := h.call(func(out *Output) {
			var err error
			if carry {
				err = h.fe.DispatchCarrying(id, testBackend, t0+2*ms, out)
			} else {
				err = h.fe.Dispatch(id, testBackend, t0+2*ms, out)
			}
			if err != nil {
				t.Fatal(err)
			}
		})
		syn := expectTCP(t, onlyFrame(t, out), flagsAre(wire.TCPFlagSYN))
		m := onlyEvent(t, out, EvSplice).Splice
		if got := m.Flags&proto.SpliceRequest != 0; got != carry || carry && string(m.Request) != shortRequest {
			t.Fatalf("carry %v: Splice carries the request %v (%q)", carry, got, m.Request)
		}
		srv := newServer(0x0badf00d, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})
		synAck := srv.synAck(syn)
		if !carry {
			h.input(synAck, t0+3*ms)
			out = h.call(func(out *Output) {
				if err := h.fe.SpliceAcked(id, t0+3*ms, out); err != nil {
					t.Fatal(err)
				}
			})
			return append([]byte(nil), onlyFrame(t, out)...), h, srv
		}
		// The controller lets it go at once.
		if out := h.call(func(out *Output) {
			if err := h.fe.SpliceAcked(id, t0+2*ms, out); err != nil {
				t.Fatal(err)
			}
		}); len(out.Frames) != 0 {
			t.Fatalf("%d frames before C2 is up", len(out.Frames))
		}
		sh := newShim(t, ShimConfig{})
		decoded := m
		decoded.Request = append([]byte(nil), m.Request...)
		if err := sh.sh.AddSplice(&decoded, t0+2*ms); !errors.Is(err, ErrSpliceAwaitsSynAck) {
			t.Fatalf("AddSplice: %v", err)
		}
		crossed := copyFrames(sh.input(PortHost, synAck, t0+3*ms))
		if len(crossed) != 1 {
			t.Fatalf("%d frames for the SYN-ACK at the shim", len(crossed))
		}
		if out := h.input(crossed[0], t0+3*ms); len(out.Frames) != 0 {
			t.Fatalf("the front-end answered the SYN-ACK with %d frames: the shim sends the request", len(out.Frames))
		}
		out = sh.tick(t0 + 3*ms)
		if len(out.Frames) != 1 || out.Frames[0].Port != PortHost {
			t.Fatalf("the shim's pass sent %d frames, want the request to its host", len(out.Frames))
		}
		return append([]byte(nil), out.Frames[0].Data...), h, srv
	}
	classic, _, _ := run(false)
	carried, h, srv := run(true)
	if string(carried) != string(classic) {
		t.Fatalf("the shim's segment differs from the front-end's:\n shim %x\n  fe  %x", carried, classic)
	}
	st := h.fe.Stats()
	if st.RequestsCarried != 1 || st.HandedOffBytes != uint64(len(shortRequest)) || st.HandoffsDone != 1 {
		t.Errorf("carried %d, handed off %d bytes, done %d", st.RequestsCarried, st.HandedOffBytes, st.HandoffsDone)
	}
	// No ACK of it came back: the retransmission timer sends it.
	out := h.tick(t0 + 3*ms + Time(h.cfg.RTOMin) + ms)
	expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), ackIs(srv.isn+1), payloadIs([]byte(shortRequest)))
}

// DispatchCarrying carries only what one Splice can: a whole request
// without the client's FIN, at most proto.MaxSpliceRequest bytes (Dispatch
// never carries: TestCarriedRequestIsTheSegmentTheFrontEndWouldSend).
func TestDispatchCarryingCarriesOnlyWhatFits(t *testing.T) {
	long := "GET /" + strings.Repeat("a", proto.MaxSpliceRequest) + " HTTP/1.1\r\nHost: h\r\n\r\n"
	for _, c := range []struct {
		name  string
		req   string
		carry bool
		fin   bool
	}{
		{"fits", shortRequest, true, false},
		{"over MaxSpliceRequest", long, false, false},
		{"with the client's FIN", shortRequest, false, true},
	} {
		h := newFE(t, func(cfg *FrontEndConfig) { cfg.SpliceAtSYN = true; cfg.MaxHead = 4096 })
		cl := newClient(40014, 0x40000000, fullOffer(9))
		var id FlowID
		if c.fin {
			cl.handshake(t, h, t0)
			out := h.input(cl.seg(wire.TCPFlagACK|wire.TCPFlagPSH|wire.TCPFlagFIN, cl.nxt, cl.rcvNxt, []byte(c.req)), t0+ms)
			id = onlyEvent(t, out, EvRequest).Flow
		} else {
			id = queuedRequest(t, h, cl, c.req)
		}
		out := h.call(func(out *Output) {
			if err := h.fe.DispatchCarrying(id, testBackend, t0+2*ms, out); err != nil {
				t.Fatal(err)
			}
		})
		m := onlyEvent(t, out, EvSplice).Splice
		if got := m.Flags&proto.SpliceRequest != 0; got != c.carry {
			t.Errorf("%s: carried %v, want %v", c.name, got, c.carry)
		}
	}
}
