package splice

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// Tests of the Splice sent with C2's SYN (issue 7): fe_atsyn.go and
// shim_atsyn.go. Each runs the front-end engine and the shim engine on
// the same frames, since what matters is that both compute the same
// numbers from the one SYN-ACK.

// atSYNDispatch dispatches id with SpliceAtSYN on: the SYN is the only
// frame, and the Splice comes with it.
func atSYNDispatch(t *testing.T, h *feHarness, id FlowID, now Time) (*seen, proto.Splice) {
	t.Helper()
	out := h.call(func(out *Output) {
		if err := h.fe.Dispatch(id, testBackend, now, out); err != nil {
			t.Fatal(err)
		}
	})
	syn := expectTCP(t, onlyFrame(t, out), flagsAre(wire.TCPFlagSYN))
	return syn, onlyEvent(t, out, EvSplice).Splice
}

func atSYNOn(c *FrontEndConfig) { c.SpliceAtSYN = true }

const us = Time(time.Microsecond)

// shimKey is the shim's key of the C2 tuple sp names.
func shimKey(sp *proto.Splice) fourTuple {
	return fourTuple{srcIP: wire.IP4From(sp.BackendIP), dstIP: wire.IP4From(sp.HandoffIP), srcPort: sp.BackendPort, dstPort: sp.HandoffPort}
}

func TestSpliceSentWithTheSYNGivesTheNumbersOfTheSynAck(t *testing.T) {
	offers := map[string]func(*wire.SynOptions){
		"linux":     func(*wire.SynOptions) {},
		"no-ts":     func(o *wire.SynOptions) { o.TS = false },
		"no-wscale": func(o *wire.SynOptions) { o.WScale = -1 },
		"no-sack":   func(o *wire.SynOptions) { o.SACKPermitted = false },
	}
	// The SYN-ACK comes in the dispatch's millisecond, in the next one,
	// or 3 ms later: our clock has moved past what the Splice fixed.
	delays := []Time{100 * us, 1500 * us, 3*ms + 200*us}
	for name, mod := range offers {
		for _, delay := range delays {
			h := newFE(t, atSYNOn)
			offer := fullOffer(0x7ffffff0)
			mod(&offer)
			c := newClient(40010, 0xcafe0000, offer)
			id := queuedRequest(t, h, c, shortRequest)
			dispatched := t0 + 2*ms + 300*us
			syn, m := atSYNDispatch(t, h, id, dispatched)
			want := proto.Splice{
				RequestID: uint64(id),
				ClientIP:  clientIP.Addr(), ClientPort: c.port, VIP: vipA.Addr(), VIPPort: webPort,
				HandoffIP: handoffIP.Addr(), HandoffPort: uint16(syn.tcp.SrcPort),
				BackendIP: backendIP.Addr(), BackendPort: webPort,
				SeqDelta:         uint32(c.isnF),
				TSOffset:         tsClock(dispatched) + 1,
				Flags:            proto.SpliceAtSYN,
				ClientNextHopMAC: routerMAC,
				RequestEnd:       uint32(c.isn + 1 + wire.Seq(len(shortRequest))),
			}
			if offer.TS {
				want.Flags |= proto.SpliceTimestamps
			}
			if offer.SACKPermitted {
				want.Flags |= proto.SpliceSACK
			}
			if offer.WScale >= 0 {
				want.Flags |= proto.SpliceWindowScale
				want.WScaleFrontend = uint8(h.cfg.WScale)
			}
			if !reflect.DeepEqual(m, want) {
				t.Fatalf("%s: Splice with the SYN\n%+v\nwant\n%+v", name, m, want)
			}

			// Until the SYN-ACK, our own TSvals stay below what the
			// shim will map it to.
			f := h.fe.byID[id]
			if got := f.ownTSval(dispatched + 5*ms); got != m.TSOffset-1 {
				t.Errorf("%s: TSval while connecting %d, want %d", name, got, m.TSOffset-1)
			}

			// The shim takes the Splice before its SYN-ACK and completes
			// it from the SYN-ACK as that passes.
			sh := newShim(t, ShimConfig{})
			if err := sh.sh.AddSplice(&m, dispatched); !errors.Is(err, ErrSpliceAwaitsSynAck) {
				t.Fatalf("%s: AddSplice before the SYN-ACK: %v", name, err)
			}
			srv := newServer(0x00001234, wire.SynOptions{MSS: 1400, WScale: 9, SACKPermitted: true, TS: true, TSVal: 0xfff00000})
			at := dispatched + delay
			sa := srv.synAck(syn)
			out := sh.input(PortHost, sa, at)
			if len(out.Frames) != 1 || string(out.Frames[0].Data) != string(sa) || out.Frames[0].Port != PortWire {
				t.Fatalf("%s: the SYN-ACK did not pass to the wire unchanged", name)
			}
			if ev := onlyEvent(t, out, EvSpliceInstalled); ev.RequestID != m.RequestID || ev.Detail != "" {
				t.Errorf("%s: %+v, want the Splice installed", name, ev)
			}
			ent := sh.sh.entries[shimKey(&m)]
			if ent == nil {
				t.Fatalf("%s: no entry after the SYN-ACK", name)
			}

			// The front-end gets the SYN-ACK: no second Splice, nothing
			// sent before the SpliceAck, and the same numbers.
			out = h.input(sa, at)
			if len(out.Frames) != 0 || len(eventsOf(out, EvSplice)) != 0 {
				t.Fatalf("%s: SYN-ACK answered with %d frames, %d Splices", name, len(out.Frames), len(eventsOf(out, EvSplice)))
			}
			if ent.seqDelta != f.seqDelta || ent.seqDelta != uint32(c.isnF-srv.isn) {
				t.Errorf("%s: seqDelta shim %#x, front-end %#x, want %#x", name, ent.seqDelta, f.seqDelta, uint32(c.isnF-srv.isn))
			}
			if ent.ts != f.tsB || ent.ts != offer.TS || f.tsB && ent.tsOffset != f.tsOffset {
				t.Errorf("%s: timestamps shim %v %#x, front-end %v %#x", name, ent.ts, ent.tsOffset, f.tsB, f.tsOffset)
			}
			wantShift := 0
			if offer.WScale >= 0 {
				wantShift = 9 - h.cfg.WScale
			}
			if ent.scaled != (offer.WScale >= 0) || ent.wsShift != wantShift {
				t.Errorf("%s: window scaling %v shift %d, want shift %d", name, ent.scaled, ent.wsShift, wantShift)
			}
			// Design trap 2 as for a Splice sent after the SYN-ACK: the
			// SYN-ACK's TSval translated runs exactly one ahead of our
			// own TSval then, however late it came.
			if f.tsB {
				if got, own := srv.tsVal+ent.tsOffset, f.ownTSval(at); got != own+1 {
					t.Errorf("%s, SYN-ACK after %v: translated TSval %d, our own %d: want one ahead", name, delay, got, own)
				}
			}
			if lagged := h.fe.Stats().SplicesAtSYNLagged; (offer.TS && tsClock(at) > tsClock(dispatched)) != (lagged == 1) {
				t.Errorf("%s, SYN-ACK after %v: SplicesAtSYNLagged %d", name, delay, lagged)
			}

			// The SpliceAck sends the request, completing the handshake.
			out = h.call(func(out *Output) {
				if err := h.fe.SpliceAcked(id, at+50*us, out); err != nil {
					t.Fatal(err)
				}
			})
			expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), seqIs(c.isn+1), ackIs(srv.isn+1),
				payloadIs([]byte(shortRequest)))
			h.checkCounters()
			sh.checkCounters()
		}
	}
}

func TestSpliceAckBeforeTheSynAckSendsTheRequestWithIt(t *testing.T) {
	for _, held := range []bool{false, true} {
		h := newFE(t, atSYNOn)
		c := newClient(40011, 0x10000000, fullOffer(77))
		id := queuedRequest(t, h, c, shortRequest)
		syn, _ := atSYNDispatch(t, h, id, t0+2*ms)
		// The shim's SpliceAck overtook the SYN-ACK (both leave it in
		// one pass): the controller confirms while C2 is connecting.
		out := h.call(func(out *Output) {
			var err error
			if held {
				err = h.fe.HoldSplice(id, t0+2*ms+200*us)
			} else {
				err = h.fe.SpliceAcked(id, t0+2*ms+200*us, out)
			}
			if err != nil {
				t.Fatal(err)
			}
		})
		if len(out.Frames) != 0 {
			t.Fatalf("held %v: %d frames before C2 is up", held, len(out.Frames))
		}
		srv := newServer(0x0badf00d, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})
		out = h.input(srv.synAck(syn), t0+2*ms+300*us)
		if held {
			// Waiting for a slot: C2 stays up, the request held.
			if len(out.Frames) != 0 {
				t.Fatalf("held: %d frames at the SYN-ACK", len(out.Frames))
			}
			out = h.call(func(out *Output) {
				if err := h.fe.SpliceAcked(id, t0+5*ms, out); err != nil {
					t.Fatal(err)
				}
			})
		}
		expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), seqIs(c.isn+1), ackIs(srv.isn+1),
			flagsAre(wire.TCPFlagACK|wire.TCPFlagPSH), payloadIs([]byte(shortRequest)))
		if st := h.fe.Stats(); st.HandoffsDone != 1 || st.SplicesAtSYN != 1 {
			t.Errorf("held %v: HandoffsDone %d, SplicesAtSYN %d", held, st.HandoffsDone, st.SplicesAtSYN)
		}
		h.checkCounters()
	}
}

func TestSpliceWaitsForTheSynAckWhenTheRequestIsNotWhole(t *testing.T) {
	h := newFE(t, atSYNOn)
	c := newClient(40012, 0x20000000, fullOffer(9))
	// A body still coming: RequestEnd would move before the SYN-ACK.
	id := queuedRequest(t, h, c, "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc")
	syn := dispatch(t, h, id, t0+2*ms) // the SYN alone
	srv := newServer(0x1000, wire.SynOptions{MSS: 1460, TS: true, TSVal: 5})
	sp := onlyEvent(t, h.input(srv.synAck(syn), t0+3*ms), EvSplice).Splice
	if sp.Flags&proto.SpliceAtSYN != 0 || h.fe.Stats().SplicesAtSYN != 0 {
		t.Errorf("a request not yet whole went with the SYN: %+v", sp)
	}
}

// atSYNSplice is shimSplice as the front-end sends it with the SYN, for a
// kernel whose SYN-ACK will carry ISN isnB and TSval tsB (kernelSynAck's).
func atSYNSplice(sp proto.Splice, isnB wire.Seq, tsB uint32) proto.Splice {
	m := sp
	m.Flags |= proto.SpliceAtSYN
	m.SeqDelta = sp.SeqDelta + uint32(isnB)
	m.TSOffset = sp.TSOffset + tsB
	m.WScaleBackend = 0
	return m
}

func TestShimCompletesASpliceSentWithTheSYNInEitherOrder(t *testing.T) {
	const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0x1000)
	classic := shimSplice(isnC + 1 + 100)
	m := atSYNSplice(classic, isnB, 0xffffff00)
	sa := kernelSynAck(&classic, isnB, isnC)
	for _, synAckFirst := range []bool{false, true} {
		h := newShim(t, ShimConfig{})
		if synAckFirst {
			h.input(PortHost, sa, t0)
			if err := h.sh.AddSplice(&m, t0+ms); err != nil {
				t.Fatalf("SYN-ACK first: AddSplice: %v", err)
			}
		} else {
			if err := h.sh.AddSplice(&m, t0); !errors.Is(err, ErrSpliceAwaitsSynAck) {
				t.Fatalf("AddSplice before the SYN-ACK: %v", err)
			}
			if h.sh.Entries() != 0 {
				t.Fatal("an entry before the SYN-ACK")
			}
			// Sent again while it waits: still waiting, one record.
			if err := h.sh.AddSplice(&m, t0+ms/2); !errors.Is(err, ErrSpliceAwaitsSynAck) || len(h.sh.atSYN.byTuple) != 1 {
				t.Fatalf("resent while waiting: %v, %d waiting", err, len(h.sh.atSYN.byTuple))
			}
			onlyEvent(t, h.input(PortHost, sa, t0+ms), EvSpliceInstalled)
		}
		// The entry is the one the classic Splice would have made.
		ref := newShim(t, ShimConfig{})
		ref.input(PortHost, sa, t0)
		if err := ref.sh.AddSplice(&classic, t0+ms); err != nil {
			t.Fatal(err)
		}
		got, want := h.sh.entries[shimKey(&m)], ref.sh.entries[shimKey(&m)]
		if got == nil || got.seqDelta != want.seqDelta || got.tsOffset != want.tsOffset || got.wsShift != want.wsShift ||
			got.ts != want.ts || got.scaled != want.scaled || got.reqEnd != want.reqEnd || got.hostShift != want.hostShift {
			t.Fatalf("SYN-ACK first %v: entry %+v, want %+v", synAckFirst, got, want)
		}
		// Sent again once installed: acknowledged again, entry kept.
		if err := h.sh.AddSplice(&m, t0+2*ms); err != nil || h.sh.entries[shimKey(&m)] != got || h.sh.Stats().Splices != 1 {
			t.Errorf("SYN-ACK first %v: resent after install: %v, Splices %d", synAckFirst, err, h.sh.Stats().Splices)
		}
		// A reply leaves translated exactly as with the classic Splice.
		reply := c2FromHost(&classic, wire.TCPFlagACK|wire.TCPFlagPSH, isnB+1, isnC+101, []byte("HTTP/1.1 200 OK\r\n\r\n"))
		a, b := copyFrames(h.input(PortHost, reply, t0+3*ms)), copyFrames(ref.input(PortHost, reply, t0+3*ms))
		if len(a) == 0 || len(a) != len(b) || string(a[0]) != string(b[0]) {
			t.Errorf("SYN-ACK first %v: reply translated differently from the classic Splice's", synAckFirst)
		}
		h.checkCounters()
	}
}

func TestShimSpliceSentWithTheSYNWaitsOnlyForItsOwnSynAck(t *testing.T) {
	const isnB, isnC = wire.Seq(0x70000000), wire.Seq(0x1000)
	classic := shimSplice(isnC + 1 + 100)
	m := atSYNSplice(classic, isnB, 0xffffff00)
	h := newShim(t, ShimConfig{HandshakeWindow: 3 * time.Second})
	if err := h.sh.AddSplice(&m, t0); !errors.Is(err, ErrSpliceAwaitsSynAck) {
		t.Fatal(err)
	}
	// The SYN-ACK of an earlier connection on the tuple (another ISN
	// acknowledged) does not complete it.
	if out := h.input(PortHost, kernelSynAck(&classic, isnB, isnC+5000), t0+ms); len(eventsOf(out, EvSpliceInstalled)) != 0 || h.sh.Entries() != 0 {
		t.Fatal("completed by another connection's SYN-ACK")
	}
	if out := h.input(PortHost, kernelSynAck(&classic, isnB, isnC), t0+2*ms); len(eventsOf(out, EvSpliceInstalled)) != 1 {
		t.Fatal("its own SYN-ACK did not complete it")
	}
	// One that waited longer than the handshake window is forgotten.
	h2 := newShim(t, ShimConfig{HandshakeWindow: 3 * time.Second})
	h2.sh.AddSplice(&m, t0)
	if out := h2.input(PortHost, kernelSynAck(&classic, isnB, isnC), t0+4*s1); len(eventsOf(out, EvSpliceInstalled)) != 0 {
		t.Error("completed after the handshake window")
	}
}

func TestShimRefusesSplicesSentWithTheSYNThatCannotBeRight(t *testing.T) {
	classic := shimSplice(0x1000 + 101)
	cases := map[string]func(*proto.Splice){
		"kernel's window scale named": func(m *proto.Splice) { m.WScaleBackend = 7 },
		"not a web port":              func(m *proto.Splice) { m.BackendPort = 22 },
	}
	for name, mod := range cases {
		h := newShim(t, ShimConfig{})
		m := atSYNSplice(classic, 0x70000000, 0xffffff00)
		mod(&m)
		err := h.sh.AddSplice(&m, t0)
		if err == nil || errors.Is(err, ErrSpliceAwaitsSynAck) || h.sh.Stats().SplicesRefused != 1 {
			t.Errorf("%s: AddSplice %v, SplicesRefused %d", name, err, h.sh.Stats().SplicesRefused)
		}
	}
	// The wait is bounded: the oldest is pushed out and counted.
	h := newShim(t, ShimConfig{MaxHandshakes: 2})
	for port := uint16(0); port < 3; port++ {
		m := atSYNSplice(classic, 0x70000000, 0xffffff00)
		m.HandoffPort += port
		m.RequestID += uint64(port)
		h.sh.AddSplice(&m, t0)
	}
	if st := h.sh.Stats(); st.AtSYNWaited != 3 || st.AtSYNEvicted != 1 || len(h.sh.atSYN.byTuple) != 2 {
		t.Errorf("AtSYNWaited %d, AtSYNEvicted %d, %d waiting; want 3, 1, 2", st.AtSYNWaited, st.AtSYNEvicted, len(h.sh.atSYN.byTuple))
	}
}

// TestClientSegmentsOfASpliceSentWithTheSYNAreTranslatedByItsNumbers: on
// a connection whose Splice went with the SYN, client ACKs, SACK blocks
// and TS echoes reach the back-end in its own numbers, with the numbers
// the shim completed (connectSpliced takes them from the engine as the
// shim's would be: TestSpliceSentWithTheSYNGivesTheNumbersOfTheSynAck
// shows the two agree).
func TestClientSegmentsOfASpliceSentWithTheSYNAreTranslatedByItsNumbers(t *testing.T) {
	p := defaultSpliceParams()
	p.request = []byte(shortRequest)
	p.mod = atSYNOn
	sc := connectSpliced(t, p)
	if sc.h.fe.Stats().SplicesAtSYN != 1 {
		t.Fatal("the Splice did not go with the SYN")
	}
	c := sc.c
	for i, ack := range []wire.Seq{c.isnF + 1, c.isnF + 700, c.isnF + 1400} {
		c.tsVal++
		c.peerTS = p.answer.TSVal + uint32(i) + sc.sp.TSOffset // echoing translated back-end TSvals
		sc.now += ms
		sc.forward(t, c.seg(wire.TCPFlagACK, c.nxt, ack, nil, wire.SACKBlock{Left: ack + 100, Right: ack + 200}))
	}
}

// TestFeedbackBeforeTheSynAckIsKept: the Feedback of a request that went
// with the SYN may reach the front-end before the SYN-ACK does; its
// response's end is kept and counts once the flow is spliced, so that a
// client closing then finds C2 idle (fe_pool.go).
func TestFeedbackBeforeTheSynAckIsKept(t *testing.T) {
	h := newFE(t, atSYNOn)
	c := newClient(40011, 0x10000000, fullOffer(77))
	id := queuedRequest(t, h, c, shortRequest)
	syn, _ := atSYNDispatch(t, h, id, t0+2*ms)
	h.call(func(out *Output) {
		if err := h.fe.SpliceAcked(id, t0+2*ms+100*us, out); err != nil {
			t.Fatal(err)
		}
	})
	srv := newServer(0x0badf00d, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})
	const respLen = 100
	h.call(func(out *Output) {
		if err := h.fe.ResponseEnded(id, ResponseEnd{Seq: uint32(srv.isn + 1 + respLen)}, t0+2*ms+200*us, out); err != nil {
			t.Fatalf("Feedback before the SYN-ACK: %v", err)
		}
	})
	h.input(srv.synAck(syn), t0+2*ms+300*us)
	f := h.fe.byID[id]
	if f == nil || f.state != stSpliced || !f.respEndKnown || f.respPending != 0 || f.respEnd != f.isnF+1+respLen {
		t.Fatalf("after the SYN-ACK: %+v", f)
	}
	h.checkCounters()
}
