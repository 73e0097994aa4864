package splice

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// Pooled C2s, the shim's side (shim_pool.go): a C2 that served one
// client, idle since, is moved to the next by a Splice with Reuse.On.

var client2IP = ip4("198.19.7.8")

const (
	client2Port  = 40001
	client2ISN   = wire.Seq(0x9000_0000)
	client2TSval = uint32(5)
	// The C2's TSvals for the second client run from here (the server's
	// PAWS check wants them above the first client's, 7).
	c2TSForClient2 = uint32(0x4000_0000)
)

// request is an HTTP request head of exactly n bytes.
func request(n int) []byte {
	b := []byte("GET /a HTTP/1.1\r\nHost: h\r\nX-Pad: ")
	b = append(b, bytes.Repeat([]byte("p"), n-len(b)-4)...)
	return append(b, "\r\n\r\n"...)
}

// idleC2 is a shimConn whose first request (100 bytes) was served and
// acknowledged both ways: a C2 the front-end may pool. It returns where
// the first response started.
func idleC2(t *testing.T, cfg ShimConfig) (sc *shimConn, respStart wire.Seq, resp []byte) {
	sc, respStart, resp = servedC2(t, cfg)
	sc.h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK, sc.srv.nxt, nil), t0+3*ms)
	return sc, respStart, resp
}

// servedC2 is idleC2 before the client's ACK of the response reached
// the shim.
func servedC2(t *testing.T, cfg ShimConfig) (sc *shimConn, respStart wire.Seq, resp []byte) {
	t.Helper()
	sc = newShimConn(t, cfg, 0x1000, 0x2000, nil)
	h, srv := sc.h, sc.srv
	now := t0 + ms
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, request(100)), now)
	h.input(PortHost, srv.seg(wire.TCPFlagACK, srv.nxt, srv.rcvNxt, nil), now)
	resp = []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
	respStart = srv.nxt
	if ev := onlyEvent(t, h.input(PortHost, srv.reply(resp), now+ms), EvResponseDone); ev.RequestID != sc.sp.RequestID {
		t.Fatalf("first response reported for request %d", ev.RequestID)
	}
	return sc, respStart, resp
}

// reuseFor is the Splice that moves sc's C2 to the second client, for a
// request of reqLen bytes.
func reuseFor(sc *shimConn, reqLen int) proto.Splice {
	m := sc.sp
	m.RequestID = sc.sp.RequestID + 1
	m.ClientIP, m.ClientPort = client2IP.Addr(), client2Port
	m.SeqDelta = 0x1234_5678
	m.TSOffset = 0x7000_0000
	m.Reuse = proto.SpliceReuse{On: true,
		ServerNext: uint32(sc.srv.nxt), FrontNext: uint32(sc.cliSeq),
		ClientDelta:    uint32(sc.cliSeq - (client2ISN + 1)),
		ClientTSOffset: c2TSForClient2 - client2TSval,
	}
	m.RequestEnd = uint32(sc.cliSeq) + uint32(reqLen)
	return m
}

func TestShimMovesAnIdleC2ToTheNextClient(t *testing.T) {
	sc, respStart, resp := idleC2(t, ShimConfig{})
	h, srv := sc.h, sc.srv
	m := reuseFor(sc, 60)
	now := t0 + 10*ms
	if err := h.sh.AddSplice(&m, now); err != nil {
		t.Fatal(err)
	}
	if err := h.sh.AddSplice(&m, now); err != nil { // resent: a no-op
		t.Fatalf("resent reuse Splice: %v", err)
	}
	// The front-end sends the second client's request on C2, shifted
	// into C2's numbers and TS clock.
	sc.cliTS = client2TSval + m.Reuse.ClientTSOffset
	out := h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, request(60)), now)
	if len(out.Frames) != 1 || out.Frames[0].Port != PortHost {
		t.Fatalf("request: %d frames out", len(out.Frames))
	}
	srv.rcvNxt, srv.peerTS = sc.cliSeq, sc.cliTS
	ackSent := srv.seg(wire.TCPFlagACK, srv.nxt, srv.rcvNxt, nil)
	toClient, toFE := framesOn(t, h.input(PortHost, ackSent, now+ms))
	if len(toClient) != 1 || len(toFE) != 1 {
		t.Fatalf("ACK of the request: %d to the client, %d copies", len(toClient), len(toFE))
	}
	// Everything the server says of the request moves back into the
	// second client's numbers; its own numbers into the front-end's.
	want := func(sent []byte) []check {
		s := decodeTCP(t, sent)
		val, ecr, _ := s.ts()
		return []check{
			ethTo(routerMAC), from(vipA, webPort), to(client2IP, client2Port),
			seqIs(s.seq() + wire.Seq(m.SeqDelta)), ackIs(s.ack() - wire.Seq(m.Reuse.ClientDelta)),
			tsIs(val+m.TSOffset, ecr-m.Reuse.ClientTSOffset), payloadIs(s.payload()),
		}
	}
	got := expectTCP(t, toClient[0], want(ackSent)...)
	if _, ecr, _ := got.ts(); ecr != client2TSval {
		t.Errorf("TSecr %d, want the client's own %d", ecr, client2TSval)
	}
	if got.ack() != client2ISN+1+60 {
		t.Errorf("ACK %#x, want the client's %#x", uint32(got.ack()), uint32(client2ISN+1+60))
	}
	// A SACK block names request bytes too.
	sacked := srv.frame(wire.TCPFlagACK, srv.nxt, srv.rcvNxt-20, segOpts(&[2]uint32{srv.tsVal, srv.peerTS},
		wire.SACKBlock{Left: srv.rcvNxt - 10, Right: srv.rcvNxt}), nil)
	s := expectTCP(t, onlyFrame(t, h.input(PortHost, sacked, now+ms)), ackIs(client2ISN+1+40))
	if blocks := sackBlocks(s); len(blocks) != 1 || blocks[0] != (wire.SACKBlock{Left: client2ISN + 1 + 50, Right: client2ISN + 1 + 60}) {
		t.Errorf("SACK blocks %v, want the second client's 51-61", blocks)
	}
	// The server's retransmission of the first client's response, sent
	// before it had that client's last ACK, goes to nobody.
	old := srv.seg(wire.TCPFlagACK|wire.TCPFlagPSH, respStart, srv.rcvNxt, resp)
	if out := h.input(PortHost, old, now+2*ms); len(out.Frames) != 0 || len(out.Events) != 0 {
		t.Errorf("the last client's reply: %d frames, %d events", len(out.Frames), len(out.Events))
	}
	// The response is reported for the second request.
	reply := srv.reply([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	out = h.input(PortHost, reply, now+3*ms)
	ev := onlyEvent(t, out, EvResponseDone)
	if ev.RequestID != m.RequestID || ev.ResponseEnd != uint32(srv.nxt) {
		t.Errorf("response reported as %+v, want request %d ending at %d", ev, m.RequestID, uint32(srv.nxt))
	}
	expectTCP(t, onlyFrame(t, out), want(reply)...)
	// And the replies that follow the new one are no longer suspect.
	if h.sh.entries[sc.h.sh.byReq[m.RequestID].key].epochOn {
		t.Error("the epoch rule still holds after the new client's first reply")
	}
	st := h.sh.Stats()
	if st.SplicesReused != 1 || st.RepliesOfLastClient != 1 || st.Splices != 2 || st.Entries != 1 {
		t.Errorf("stats: reused %d, last client's replies %d, splices %d, entries %d",
			st.SplicesReused, st.RepliesOfLastClient, st.Splices, st.Entries)
	}
	if h.sh.byReq[sc.sp.RequestID] != nil {
		t.Error("the first request's ID still names the entry")
	}
	h.checkCounters()
}

// sackBlocks are the SACK blocks of s.
func sackBlocks(s *seen) []wire.SACKBlock {
	var bs []wire.SACKBlock
	for _, o := range s.tcp.Options {
		if o.OptionType != 5 {
			continue
		}
		for d := o.OptionData; len(d) >= 8; d = d[8:] {
			bs = append(bs, wire.SACKBlock{Left: wire.Seq(be32(d)), Right: wire.Seq(be32(d[4:]))})
		}
	}
	return bs
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// TestShimMovesOnlyAnIdleC2: a C2 that is busy, closing, not where the
// Splice says, or not there at all stays with its client, and the
// refusal says why.
func TestShimMovesOnlyAnIdleC2(t *testing.T) {
	for _, c := range []struct {
		name string
		prep func(sc *shimConn, m *proto.Splice)
		want error
	}{
		{"request in service", func(sc *shimConn, m *proto.Splice) {
			sc.h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, sc.srv.nxt, request(50)), t0+5*ms)
		}, ErrSpliceNotIdle},
		{"another response", func(sc *shimConn, m *proto.Splice) {
			sc.h.input(PortHost, sc.srv.reply([]byte("HTTP/1.1 200 OK\r\n")), t0+5*ms)
			m.Reuse.ServerNext = uint32(sc.srv.nxt)
		}, ErrSpliceNotIdle},
		{"server's FIN", func(sc *shimConn, m *proto.Splice) {
			sc.h.input(PortHost, sc.srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, sc.srv.nxt, sc.srv.rcvNxt, nil), t0+5*ms)
		}, ErrSpliceNotIdle},
		{"client's FIN", func(sc *shimConn, m *proto.Splice) {
			sc.h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagFIN, sc.srv.nxt, nil), t0+5*ms)
		}, ErrSpliceNotIdle},
		{"another server position", func(sc *shimConn, m *proto.Splice) { m.Reuse.ServerNext++ }, ErrSpliceNotIdle},
		{"another request position", func(sc *shimConn, m *proto.Splice) { m.Reuse.FrontNext-- }, ErrSpliceNotIdle},
		{"no request", func(sc *shimConn, m *proto.Splice) { m.RequestEnd = m.Reuse.FrontNext }, ErrSpliceNotIdle},
		{"timestamps off", func(sc *shimConn, m *proto.Splice) { m.Flags &^= proto.SpliceTimestamps }, ErrSpliceNotIdle},
		{"another back-end scale", func(sc *shimConn, m *proto.Splice) { m.WScaleBackend = 3 }, ErrSpliceNotIdle},
		{"no such C2", func(sc *shimConn, m *proto.Splice) { m.HandoffPort++ }, ErrSpliceNotIdle},
		{"not a web port", func(sc *shimConn, m *proto.Splice) { m.BackendPort = 22 }, ErrSpliceNotWebPort},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc, _, _ := idleC2(t, ShimConfig{})
			m := reuseFor(sc, 60)
			c.prep(sc, &m)
			before := sc.h.sh.Stats()
			err := sc.h.sh.AddSplice(&m, t0+10*ms)
			if !errors.Is(err, c.want) {
				t.Fatalf("AddSplice: %v, want %v", err, c.want)
			}
			st := sc.h.sh.Stats()
			if st.SplicesRefused != before.SplicesRefused+1 || st.SplicesReused != 0 {
				t.Errorf("refused %d -> %d, reused %d", before.SplicesRefused, st.SplicesRefused, st.SplicesReused)
			}
			if sc.h.sh.byReq[sc.sp.RequestID] == nil || sc.h.sh.byReq[m.RequestID] != nil {
				t.Error("the refused Splice moved the entry")
			}
			sc.h.checkCounters()
		})
	}
}

// TestShimTakesTheLastClientsTranslationOutOfTheKernel: with the
// kernel's reply fast path, moving a C2 deletes the last client's entry
// there before anything else; the new client's shifts the server's ACKs
// and TS echoes into its numbers and leaves the last client's replies to
// the shim (SeqFloor).
func TestShimTakesTheLastClientsTranslationOutOfTheKernel(t *testing.T) {
	sc, _, _ := idleC2(t, ShimConfig{KernelFastPath: true, KernelEcho: true})
	h := sc.h
	h.out.Reset()
	h.sh.TakeFastPaths(&h.out)
	if len(h.out.FastPaths) == 0 || h.out.FastPaths[len(h.out.FastPaths)-1].Delete {
		t.Fatalf("the first client's connection has no entry in the kernel: %+v", h.out.FastPaths)
	}
	m := reuseFor(sc, 60)
	if err := h.sh.AddSplice(&m, t0+10*ms); err != nil {
		t.Fatal(err)
	}
	h.out.Reset()
	h.sh.TakeFastPaths(&h.out)
	if fp := h.out.FastPaths; len(fp) != 1 || !fp[0].Delete {
		t.Fatalf("fast-path commands at the move: %+v, want the one delete", fp)
	}
	sc.cliTS = client2TSval + m.Reuse.ClientTSOffset
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, sc.srv.nxt, request(60)), t0+10*ms)
	sc.srv.rcvNxt = sc.cliSeq
	h.input(PortHost, sc.srv.reply([]byte("HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n")), t0+11*ms)
	h.out.Reset()
	h.sh.TakeFastPaths(&h.out)
	fp := h.out.FastPaths
	if len(fp) == 0 || fp[len(fp)-1].Delete {
		t.Fatalf("fast-path commands after the new client's first reply: %+v, want a put", fp)
	}
	put := fp[len(fp)-1]
	want := wire.FastPathEntry{Client: client2IP.Addr().As4(), CPort: client2Port, SeqDelta: m.SeqDelta, TSOffset: m.TSOffset,
		Shift: true, AckDelta: m.Reuse.ClientDelta, TSEcrDelta: m.Reuse.ClientTSOffset, SeqFloor: wire.Seq(m.Reuse.ServerNext)}
	got := put.Entry
	if put.Delete || got.Client != want.Client || got.CPort != want.CPort || got.SeqDelta != want.SeqDelta || got.TSOffset != want.TSOffset ||
		!got.Shift || got.AckDelta != want.AckDelta || got.TSEcrDelta != want.TSEcrDelta || got.SeqFloor != want.SeqFloor {
		t.Errorf("the new client's entry %+v, want %+v", got, want)
	}
}

// TestShimWritesCloseIntoTheResponsesOfAClientThatAskedToClose: the
// front-end took the client's "Connection: close" out of the request
// (Splice.CloseResponses); the shim writes it into the response's
// "Connection: keep-alive", in place, the checksum exact, a partial
// checksum left partial; a head without the field stays as it is. The
// kernel's fast path may not send such a connection's first replies.
func TestShimWritesCloseIntoTheResponsesOfAClientThatAskedToClose(t *testing.T) {
	for _, partial := range []bool{false, true} {
		sc := newShimConn(t, ShimConfig{KernelFastPath: true, KernelEcho: true}, 0x1000, 0x2000,
			func(m *proto.Splice) { m.CloseResponses = true })
		h, srv := sc.h, sc.srv
		h.out.Reset()
		h.sh.TakeFastPaths(&h.out)
		for _, u := range h.out.FastPaths {
			if !u.Delete && u.Entry.Echo {
				t.Fatalf("the kernel may echo the first reply of a response whose head needs rewriting: %+v", u.Entry)
			}
		}
		h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, request(100)), t0+ms)
		head := "HTTP/1.1 200 OK\r\nServer: nginx\r\nConnection: keep-alive\r\nContent-Length: 4\r\n\r\nbody"
		want := "HTTP/1.1 200 OK\r\nServer: nginx\r\nConnection: close     \r\nContent-Length: 4\r\n\r\nbody"
		f := srv.reply([]byte(head))
		var vh wire.VNetHdr
		if partial {
			vh = toPartial(t, f, 0)
		}
		out := h.inputVNet(PortHost, f, vh, t0+2*ms)
		var toClient [][]byte
		for _, o := range out.Frames {
			if wire.IPv4(o.Data[14:]).Dst() != handoffIP {
				b := append([]byte(nil), o.Data...)
				completeLikeDevice(b, o.VNet) // what the device sends
				toClient = append(toClient, b)
			}
		}
		got := expectTCP(t, one(t, toClient), payloadIs([]byte(want)))
		if ok, why := checksumsExact(got.raw); !ok {
			t.Errorf("partial %v: checksum not exact after the rewrite: %s", partial, why)
		}
		if st := h.sh.Stats(); st.ResponsesClosed != 1 || st.ResponsesNotClosed != 0 {
			t.Errorf("closed %d, not closed %d", st.ResponsesClosed, st.ResponsesNotClosed)
		}
	}
}

// TestShimEndsAClosingResponseWithAFIN: the response to a client told to
// close ends, at its last byte, with a FIN the server never sent (and a
// retransmission of that segment carries it again); the client's ACK of
// the FIN reaches the server as an ACK of its last byte; the Feedback
// says so.
func TestShimEndsAClosingResponseWithAFIN(t *testing.T) {
	for _, partial := range []bool{false, true} {
		sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, func(m *proto.Splice) { m.CloseResponses = true })
		h, srv := sc.h, sc.srv
		h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, request(100)), t0+ms)
		head := []byte("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1000\r\n\r\n")
		first := srv.reply(head)
		last := srv.reply(bytes.Repeat([]byte("x"), 1000))
		end := srv.nxt
		send := func(f []byte, at Time) (*seen, *Output) {
			var vh wire.VNetHdr
			if partial {
				vh = toPartial(t, f, 0)
			}
			out := h.inputVNet(PortHost, f, vh, at)
			for _, o := range out.Frames {
				if wire.IPv4(o.Data[14:]).Dst() == client2IP || wire.IPv4(o.Data[14:]).Dst() == clientIP {
					b := append([]byte(nil), o.Data...)
					completeLikeDevice(b, o.VNet)
					if ok, why := checksumsExact(b); !ok {
						t.Errorf("partial %v: %s", partial, why)
					}
					return decodeTCP(t, b), out
				}
			}
			t.Fatalf("no frame to the client")
			return nil, nil
		}
		s1, _ := send(first, t0+2*ms)
		if s1.tcp.FIN {
			t.Errorf("the response's first segment carries a FIN")
		}
		s2, out := send(last, t0+3*ms)
		if !s2.tcp.FIN {
			t.Errorf("partial %v: the response's last segment carries no FIN", partial)
		}
		if ev := onlyEvent(t, out, EvResponseDone); !ev.CloseSent || !ev.FINSent || ev.ResponseEnd != uint32(end) {
			t.Errorf("Feedback %+v: want CloseSent, FINSent at %d", ev, uint32(end))
		}
		if s3, _ := send(last, t0+300*ms); !s3.tcp.FIN {
			t.Errorf("the retransmitted last segment lost its FIN")
		}
		// The client's ACK of the FIN, as the front-end translates it.
		out = h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK, end+1, nil), t0+4*ms)
		if len(out.Frames) != 1 || out.Frames[0].Port != PortHost {
			t.Fatalf("the client's ACK: %d frames", len(out.Frames))
		}
		got := expectTCP(t, out.Frames[0].Data, ackIs(end))
		if ok, why := checksumsExact(got.raw); !ok {
			t.Errorf("the ACK moved back: %s", why)
		}
	}
}

// TestShimResetsIdleC2sForANewFrontEnd: when a new front-end starts, the
// C2s the one before kept idle are reset in the kernel (a RST from the
// handoff address at the server's rcv_nxt, to the host's MAC) and
// forgotten; a C2 with a request in service is left to end as it would.
func TestShimResetsIdleC2sForANewFrontEnd(t *testing.T) {
	cfg := ShimConfig{HostMAC: backendMAC}
	sc, _, _ := idleC2(t, cfg)
	h := sc.h
	h.out.Reset()
	if n := h.sh.ResetIdle(t0+10*ms, &h.out); n != 1 || len(h.out.Frames) != 1 || h.out.Frames[0].Port != PortHost {
		t.Fatalf("ResetIdle reset %d, %d frames out, want 1 to the host", n, len(h.out.Frames))
	}
	h.frames++
	expectTCP(t, h.out.Frames[0].Data, flagsAre(wire.TCPFlagRST), seqIs(sc.srv.rcvNxt), ethTo(backendMAC),
		from(handoffIP, shimHandoffPort), to(backendIP, webPort))
	if h.sh.Entries() != 0 || h.sh.Stats().IdleResetForNewFrontEnd != 1 {
		t.Errorf("%d entries left, %d counted reset", h.sh.Entries(), h.sh.Stats().IdleResetForNewFrontEnd)
	}
	h.checkCounters()

	busy, _, _ := idleC2(t, cfg)
	busy.h.input(PortWire, busy.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, busy.srv.nxt, request(50)), t0+5*ms)
	busy.h.out.Reset()
	if n := busy.h.sh.ResetIdle(t0+10*ms, &busy.h.out); n != 0 || len(busy.h.out.Frames) != 0 || busy.h.sh.Entries() != 1 {
		t.Errorf("a C2 with a request in service: %d reset, %d frames, %d entries left", n, len(busy.h.out.Frames), busy.h.sh.Entries())
	}
}

// TestShimResetsIdleC2sInTupleOrder: ResetIdle writes its RSTs in the
// order of the handoff ports, whatever order the C2s came in and however
// the entries map iterates, so that a replay of the same inputs writes
// the same frames.
func TestShimResetsIdleC2sInTupleOrder(t *testing.T) {
	h := newShim(t, ShimConfig{HostMAC: backendMAC})
	ports := []uint16{20007, 20002, 20009, 20001, 20005, 20003}
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
	now := t0
	for i, port := range ports {
		isnB, isnF := wire.Seq(0x10000*(i+1)), wire.Seq(0x20000*(i+1))
		sp := guardSplice(uint64(i+1), port, isnF)
		h.input(PortHost, kernelSynAck(&sp, isnB, isnF), now)
		if err := h.sh.AddSplice(&sp, now); err != nil {
			t.Fatal(err)
		}
		h.input(PortWire, c2FromWire(&sp, wire.TCPFlagACK|wire.TCPFlagPSH, isnF+1, isnB+1, request(100)), now)
		h.input(PortHost, c2FromHost(&sp, wire.TCPFlagACK, isnB+1, isnF+101, nil), now)
		h.input(PortHost, c2FromHost(&sp, wire.TCPFlagACK|wire.TCPFlagPSH, isnB+1, isnF+101, resp), now)
		h.input(PortWire, c2FromWire(&sp, wire.TCPFlagACK, isnF+101, isnB+1+wire.Seq(len(resp)), nil), now)
		now += ms
	}
	h.out.Reset()
	if n := h.sh.ResetIdle(now, &h.out); n != len(ports) || len(h.out.Frames) != len(ports) {
		t.Fatalf("ResetIdle reset %d with %d frames, want %d", n, len(h.out.Frames), len(ports))
	}
	h.frames += uint64(len(ports))
	want := slices.Sorted(slices.Values(ports))
	for i, f := range h.out.Frames {
		expectTCP(t, f.Data, flagsAre(wire.TCPFlagRST), from(handoffIP, want[i]), to(backendIP, webPort))
	}
	if h.sh.Entries() != 0 {
		t.Errorf("%d entries left", h.sh.Entries())
	}
	h.checkCounters()
}
