package splice

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// queuedRequest takes a client through the handshake and a complete
// request at t0 and t0+ms; it returns the flow.
func queuedRequest(t *testing.T, h *feHarness, c *testClient, req string) FlowID {
	t.Helper()
	c.handshake(t, h, t0)
	c.tsVal += 3
	return c.sendRequest(t, h, []byte(req), t0+ms)
}

func dispatch(t *testing.T, h *feHarness, id FlowID, now Time) *seen {
	t.Helper()
	return expectTCP(t, onlyFrame(t, h.call(func(out *Output) {
		if err := h.fe.Dispatch(id, testBackend, now, out); err != nil {
			t.Fatal(err)
		}
	})))
}

const shortRequest = "GET /x HTTP/1.1\r\nHost: h\r\n\r\n"

func TestDispatchOpensC2WithClientISNAndOnlyTheOptionsTheClientOffered(t *testing.T) {
	cases := []struct {
		name    string
		offer   wire.SynOptions
		wantMSS uint16 // the client's MSS as the cookie could carry it
	}{
		{"linux", fullOffer(5), 1460},
		{"mss-rounded-down", wire.SynOptions{MSS: 1300, WScale: -1}, 1220},
		{"no-mss", wire.SynOptions{WScale: -1}, 536},
		{"sack-ws", wire.SynOptions{MSS: 1460, WScale: 3, SACKPermitted: true}, 1460},
		{"ts-only", wire.SynOptions{MSS: 1452, WScale: -1, TS: true, TSVal: 0xfffffffe}, 1440},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFE(t, nil)
			c := newClient(40002, 0x0badcafe, tc.offer)
			id := queuedRequest(t, h, c, shortRequest)
			syn := dispatch(t, h, id, t0+2*ms)
			expectTCP(t, syn.raw, ethFrom(feMAC), ethTo(backendMAC), to(backendIP, webPort),
				seqIs(c.isn), ackIs(0), flagsAre(wire.TCPFlagSYN))
			if !syn.ip.SrcIP.Equal(handoffIP[:]) {
				t.Errorf("C2 from %v, want the handoff address %v", syn.ip.SrcIP, handoffIP)
			}
			if p := uint16(syn.tcp.SrcPort); p < h.cfg.HandoffPortFirst || p > h.cfg.HandoffPortLast {
				t.Errorf("C2 source port %d outside the handoff range", p)
			}
			mss, ok := syn.option(layers.TCPOptionKindMSS)
			if !ok || binary.BigEndian.Uint16(mss.OptionData) != tc.wantMSS {
				t.Errorf("MSS option %v, want %d", mss.OptionData, tc.wantMSS)
			}
			ws, ok := syn.option(layers.TCPOptionKindWindowScale)
			if ok != (tc.offer.WScale >= 0) || ok && int(ws.OptionData[0]) != tc.offer.WScale {
				t.Errorf("window scale %v (present %v), client offered %d", ws.OptionData, ok, tc.offer.WScale)
			}
			if _, ok := syn.option(layers.TCPOptionKindSACKPermitted); ok != tc.offer.SACKPermitted {
				t.Errorf("SACK-permitted present %v, client offered %v", ok, tc.offer.SACKPermitted)
			}
			val, ecr, ok := syn.ts()
			if ok != tc.offer.TS {
				t.Errorf("timestamps present %v, client offered %v", ok, tc.offer.TS)
			} else if ok && (val != c.tsVal || ecr != 0) {
				t.Errorf("TSval %#x TSecr %#x, want the client's latest %#x and 0", val, ecr, c.tsVal)
			}
		})
	}
}

// TestC2SynAckGivesSpliceAndTheRequestCompletesTheHandshake: the
// back-end's SYN-ACK yields the Splice with the translation numbers and
// no frame; the request's first segment, once the shim confirmed, is what
// completes the back-end's handshake (one frame less per request).
func TestC2SynAckGivesSpliceAndTheRequestCompletesTheHandshake(t *testing.T) {
	for _, clientWS := range []int{7, -1} {
		h := newFE(t, nil)
		offer := fullOffer(0x7ffffff0)
		offer.WScale = clientWS
		c := newClient(40003, 0xcafe0000, offer)
		id := queuedRequest(t, h, c, shortRequest)
		syn := dispatch(t, h, id, t0+2*ms)
		srv := newServer(0x00001234, wire.SynOptions{MSS: 1400, WScale: 9, SACKPermitted: true, TS: true, TSVal: 0xfff00000})
		at := t0 + 3*ms
		out := h.input(srv.synAck(syn), at)
		if len(out.Frames) != 0 {
			t.Fatalf("%d frames for the SYN-ACK, want none: the request carries the ACK", len(out.Frames))
		}
		sp := onlyEvent(t, out, EvSplice).Splice
		want := proto.Splice{
			RequestID: uint64(id),
			ClientIP:  clientIP.Addr(), ClientPort: c.port, VIP: vipA.Addr(), VIPPort: webPort,
			HandoffIP: handoffIP.Addr(), HandoffPort: uint16(syn.tcp.SrcPort),
			BackendIP: backendIP.Addr(), BackendPort: webPort,
			SeqDelta:         uint32(c.isnF - srv.isn),
			TSOffset:         tsClock(at) + 1 - srv.tsVal,
			Flags:            proto.SpliceTimestamps | proto.SpliceSACK,
			ClientNextHopMAC: routerMAC,
			RequestEnd:       uint32(c.isn + 1 + wire.Seq(len(shortRequest))),
		}
		if clientWS >= 0 {
			want.Flags |= proto.SpliceWindowScale
			want.WScaleBackend, want.WScaleFrontend = 9, uint8(h.cfg.WScale)
		}
		if !reflect.DeepEqual(sp, want) {
			t.Errorf("client wscale %d: Splice\n%+v\nwant\n%+v", clientWS, sp, want)
		}
		// The back-end's SYN-ACK TSval, translated, is past everything the
		// front-end sent the client (design trap 2).
		if got := srv.tsVal + sp.TSOffset; int32(got-c.peerTS) <= 0 {
			t.Errorf("translated TSval %d does not follow the front-end's %d", got, c.peerTS)
		}
		// Nothing goes on C2 before the shim confirms: no reply can
		// overtake the Splice message.
		if out := h.tick(at + Time(h.cfg.RTOMin)*2); len(out.Frames) != 0 {
			t.Errorf("sent %d frames before SpliceAcked", len(out.Frames))
		}
		acked := at + Time(h.cfg.RTOMin)*2 + ms
		out = h.call(func(out *Output) {
			if err := h.fe.SpliceAcked(id, acked, out); err != nil {
				t.Fatal(err)
			}
		})
		expectTCP(t, onlyFrame(t, out), ethTo(backendMAC), from(handoffIP, uint16(syn.tcp.SrcPort)),
			to(backendIP, webPort), seqIs(c.isn+1), ackIs(srv.isn+1), flagsAre(wire.TCPFlagACK|wire.TCPFlagPSH),
			tsIs(c.tsVal, srv.tsVal))
		h.checkCounters()
	}
}

// bigRequest is a head of about n bytes.
func bigRequest(n int) string {
	const head = "GET /big HTTP/1.1\r\nHost: h\r\nX-Pad: "
	return head + strings.Repeat("p", n-len(head)-4) + "\r\n\r\n"
}

func TestSpliceAckedSendsTheRequestExactlyAndRetransmitsUntilTheShimCopyAcksIt(t *testing.T) {
	h := newFE(t, nil)
	offer := fullOffer(50)
	offer.MSS = 536
	c := newClient(40004, 0xfffff000, offer)
	req := bigRequest(3000)
	c.handshake(t, h, t0)
	for i := 0; i < len(req); i += 1000 { // three segments
		h.input(c.data([]byte(req[i:min(i+1000, len(req))])), t0+ms)
	}
	id := onlyEvent(t, eventsOfOutput(&h.out), EvRequest).Flow
	syn := dispatch(t, h, id, t0+2*ms)
	srv := newServer(0x40000000, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 1})
	h.input(srv.synAck(syn), t0+3*ms)

	sent := t0 + 4*ms
	collect := func(out *Output, from wire.Seq) []byte {
		t.Helper()
		var got []byte
		seq := from
		for _, f := range copyFrames(out) {
			s := expectTCP(t, f, ethTo(backendMAC), to(backendIP, webPort), seqIs(seq), ackIs(srv.isn+1),
				tsIs(c.tsVal, srv.tsVal))
			if n := len(s.payload()); n > 536-wire.TSOptionLen {
				t.Errorf("segment of %d bytes exceeds the client's MSS", n)
			}
			got = append(got, s.payload()...)
			seq += wire.Seq(len(s.payload()))
		}
		return got
	}
	out := h.call(func(out *Output) {
		if err := h.fe.SpliceAcked(id, sent, out); err != nil {
			t.Fatal(err)
		}
	})
	if got := collect(out, c.isn+1); string(got) != req {
		t.Fatalf("C2 carried %d bytes, want the %d-byte request exactly", len(got), len(req))
	}
	rto := Time(h.cfg.RTOMin)
	if out := h.tick(sent + rto - 1); len(out.Frames) != 0 {
		t.Fatalf("retransmitted before the RTO")
	}
	if got := collect(h.tick(sent+rto), c.isn+1); string(got) != req {
		t.Fatalf("retransmission carried %d bytes, want the whole request", len(got))
	}
	// The shim's copy acknowledges the first 1000 bytes: the next
	// retransmission starts there.
	part := c.isn + 1 + 1000
	h.input(srv.seg(wire.TCPFlagACK, srv.nxt, part, nil), sent+rto+ms)
	if got := collect(h.tick(sent+3*rto), part); string(got) != req[1000:] {
		t.Fatalf("retransmission after a partial ACK carried %d bytes, want %d", len(got), len(req)-1000)
	}
	// The copy acknowledging RequestEnd ends it.
	end := c.isn + 1 + wire.Seq(len(req))
	h.input(srv.seg(wire.TCPFlagACK, srv.nxt, end, nil), sent+3*rto+ms)
	if out := h.tick(sent + 100*rto); len(out.Frames) != 0 {
		t.Errorf("resent %d frames after the back-end acknowledged the request", len(out.Frames))
	}
	st := h.fe.Stats()
	if st.HandoffsDone != 1 || st.Retransmits != 2 || st.HandedOffBytes != uint64(2*len(req)+len(req)-1000) {
		t.Errorf("HandoffsDone %d, Retransmits %d, HandedOffBytes %d", st.HandoffsDone, st.Retransmits, st.HandedOffBytes)
	}
	h.checkCounters()
}

func TestPipelinedRequestWhileQueuedIsNotHandedOverWithTheFirst(t *testing.T) {
	h := newFE(t, nil)
	c := newClient(40005, 0x20000000, fullOffer(9))
	id := queuedRequest(t, h, c, shortRequest)
	firstEnd := c.nxt
	second := "GET /second HTTP/1.1\r\nHost: h\r\n\r\n"
	// Pipelined while queued: the second request must be scheduled on its
	// own, so the front-end neither acknowledges nor hands it over; it
	// keeps the frame for after the splice.
	expectTCP(t, onlyFrame(t, h.input(c.data([]byte(second)), t0+2*ms)), ackIs(firstEnd))
	syn := dispatch(t, h, id, t0+3*ms)
	srv := newServer(0x30000000, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 1})
	sp := onlyEvent(t, h.input(srv.synAck(syn), t0+4*ms), EvSplice).Splice
	if sp.RequestEnd != uint32(firstEnd) {
		t.Errorf("RequestEnd %#x, want %#x (the first request only)", sp.RequestEnd, uint32(firstEnd))
	}
	out := h.call(func(out *Output) { h.fe.SpliceAcked(id, t0+5*ms, out) })
	var got []byte
	for _, f := range copyFrames(out) {
		got = append(got, expectTCP(t, f).payload()...)
	}
	if string(got) != shortRequest {
		t.Errorf("C2 carried %q, want the first request only", got)
	}
	ev := onlyEvent(t, out, EvRequest)
	if !ev.FollowUp || ev.Request.Path != "/second" {
		t.Fatalf("event %+v, want the second request as a follow-up", ev)
	}
	out = h.call(func(out *Output) {
		if err := h.fe.Admit(id, t0+6*ms, out); err != nil {
			t.Fatal(err)
		}
	})
	expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), seqIs(firstEnd), payloadIs([]byte(second)))
	h.checkCounters()
}

func TestClientFramesDuringSpliceWaitAreHeldBoundedThenForwarded(t *testing.T) {
	h := newFE(t, func(cfg *FrontEndConfig) { cfg.HoldFrames = 2 })
	c := newClient(40006, 0x50000000, fullOffer(9))
	post := "POST /u HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n"
	id := queuedRequest(t, h, c, post)
	syn := dispatch(t, h, id, t0+2*ms)
	srv := newServer(0x60000000, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 1})
	h.input(srv.synAck(syn), t0+3*ms)

	// Body bytes of the request arrive while the shim is being told.
	parts := []string{strings.Repeat("a", 30), strings.Repeat("b", 30), strings.Repeat("c", 40)}
	var held [][]byte
	for i, p := range parts {
		f := c.data([]byte(p))
		held = append(held, f)
		if out := h.input(f, t0+4*ms+Time(i)); len(out.Frames) != 0 {
			t.Fatalf("client frame %d during the splice wait produced %d frames", i, len(out.Frames))
		}
	}
	if d := h.fe.Stats().Drops[dropHoldFull]; d != 1 {
		t.Errorf("hold-full drops = %d, want 1", d)
	}
	out := h.call(func(out *Output) { h.fe.SpliceAcked(id, t0+5*ms, out) })
	frames := copyFrames(out)
	if len(frames) != 3 {
		t.Fatalf("%d frames after SpliceAcked, want the request and 2 held frames", len(frames))
	}
	expectTCP(t, frames[0], payloadIs([]byte(post)))
	for i, f := range frames[1:] {
		orig := decodeTCP(t, held[i])
		expectTCP(t, f, ethFrom(feMAC), ethTo(backendMAC), from(handoffIP, uint16(syn.tcp.SrcPort)),
			to(backendIP, webPort), seqIs(orig.seq()), ackIs(srv.isn+1), payloadIs([]byte(parts[i])))
	}
	h.checkCounters()
}

func TestBackendRefusingC2GetsTheClientA503(t *testing.T) {
	h := newFE(t, nil)
	c := newClient(40007, 0x1, fullOffer(9))
	id := queuedRequest(t, h, c, shortRequest)
	syn := dispatch(t, h, id, t0+2*ms)
	srv := newServer(0, wire.SynOptions{})
	srv.peerPort = uint16(syn.tcp.SrcPort)
	out := h.input(srv.frame(wire.TCPFlagRST|wire.TCPFlagACK, 0, c.isn+1, nil, nil), t0+3*ms)
	if ev := eventsOf(out, EvClosed); len(ev) != 1 || ev[0].Reason != CloseHandoffFailed || ev[0].Backend != testBackend.ID {
		t.Errorf("events %+v, want EvClosed handoff-failed", out.Events)
	}
	if ev := eventsOf(out, EvAnswered); len(ev) != 1 || ev[0].Status != 503 {
		t.Errorf("events %+v, want EvAnswered 503", out.Events)
	}
	body, fin := answerOf(t, out, c)
	if !bytes.HasPrefix(body, []byte("HTTP/1.1 503 ")) || !bytes.Contains(body, []byte("Retry-After: 1\r\n")) || !fin {
		t.Errorf("answer %q", body)
	}
	if len(h.fe.byC2) != 0 {
		t.Errorf("handoff port still taken")
	}
}

func TestUnansweredC2SynIsRetriedThenAnswered503(t *testing.T) {
	h := newFE(t, nil)
	c := newClient(40008, 0x1, fullOffer(9))
	id := queuedRequest(t, h, c, shortRequest)
	first := dispatch(t, h, id, t0+2*ms)
	now := t0 + 2*ms
	for i := 1; i <= 3; i++ {
		now += Time(h.cfg.HandoffTimeout) << (i - 1)
		again := expectTCP(t, onlyFrame(t, h.tick(now)), flagsAre(wire.TCPFlagSYN), seqIs(c.isn))
		if !bytes.Equal(again.tcp.Options[0].OptionData, first.tcp.Options[0].OptionData) || again.tcp.SrcPort != first.tcp.SrcPort {
			t.Errorf("retry %d differs from the first SYN", i)
		}
	}
	out := h.tick(now + Time(h.cfg.HandoffTimeout)<<3)
	if ev := eventsOf(out, EvAnswered); len(ev) != 1 || ev[0].Status != 503 {
		t.Errorf("events %+v after the last retry, want EvAnswered 503", out.Events)
	}
}

func TestChallengeAckToC2SynIsResetAndTheSynSentAgain(t *testing.T) {
	h := newFE(t, nil)
	c := newClient(40009, 0x77777777, fullOffer(9))
	id := queuedRequest(t, h, c, shortRequest)
	syn := dispatch(t, h, id, t0+2*ms)
	// The back-end still has an old connection on this tuple and answers
	// the SYN with an ACK of that one (RFC 5961).
	old := newServer(0x12345, wire.SynOptions{})
	old.peerPort = uint16(syn.tcp.SrcPort)
	out := h.input(old.frame(wire.TCPFlagACK, 0x12345, 0x99999999, nil, nil), t0+3*ms)
	fs := copyFrames(out)
	if len(fs) != 2 {
		t.Fatalf("%d frames, want a RST and the SYN again", len(fs))
	}
	expectTCP(t, fs[0], to(backendIP, webPort), from(handoffIP, old.peerPort), flagsAre(wire.TCPFlagRST), seqIs(0x99999999))
	expectTCP(t, fs[1], to(backendIP, webPort), from(handoffIP, old.peerPort), flagsAre(wire.TCPFlagSYN), seqIs(c.isn))
	// The fresh SYN-ACK then completes C2 as usual.
	srv := newServer(0x40, wire.SynOptions{MSS: 1460, TS: true, TSVal: 3})
	onlyEvent(t, h.input(srv.synAck(decodeTCP(t, fs[1])), t0+4*ms), EvSplice)
}

// TestHeldSpliceSendsTheRequestOnlyWhenReleased: a connection set up
// ahead of its back-end slot (HoldSplice) keeps the request back, and
// the splice-confirmation deadline no longer applies; SpliceAcked then
// sends it. How long it may wait is the caller's: Reject refuses it with
// C2 reset and the caller's answer; only the idle timeout backs that up.
func TestHeldSpliceSendsTheRequestOnlyWhenReleased(t *testing.T) {
	h := newFE(t, func(cfg *FrontEndConfig) { cfg.IdleTimeout = time.Minute })
	c := newClient(40007, 0x50000000, fullOffer(9))
	req := "GET /held HTTP/1.1\r\nHost: h\r\n\r\n"
	id := heldConnection(t, h, c, 0x60000000, req)
	// Well past the splice-confirmation deadline (3 x HandoffTimeout):
	// nothing happens.
	if out := h.tick(t0 + 4*ms + Time(50*time.Second)); len(out.Frames) != 0 {
		t.Fatalf("held connection produced %d frames before its idle timeout", len(out.Frames))
	}
	out := h.call(func(out *Output) {
		if err := h.fe.SpliceAcked(id, t0+Time(51*time.Second), out); err != nil {
			t.Fatal(err)
		}
	})
	expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), payloadIs([]byte(req)))
	if err := h.fe.Reject(id, 503, "too late", time.Second, t0+Time(52*time.Second), &Output{}); !errors.Is(err, ErrFlowState) {
		t.Errorf("Reject of a connection whose request was sent: %v, want ErrFlowState", err)
	}

	// A second connection refused while held: C2 reset, the caller's
	// answer to the client, and the back-end part reported closed.
	c2 := newClient(40008, 0x51000000, fullOffer(9))
	id2 := heldConnection(t, h, c2, 0x61000000, req)
	out = h.call(func(out *Output) {
		if err := h.fe.Reject(id2, 503, "no slot", 2*time.Second, t0+Time(time.Second), out); err != nil {
			t.Fatalf("Reject refused a held connection: %v", err)
		}
	})
	if rst, answer := heldOutcome(t, out, "HTTP/1.1 503 ", "Retry-After: 2\r\n"); !rst || !answer {
		t.Fatalf("after Reject: C2 reset %v, 503 to the client %v; want both", rst, answer)
	}
	if evs := eventsOf(out, EvClosed); len(evs) != 1 || evs[0].Backend != testBackend.ID || evs[0].Reason != CloseHandoffFailed {
		t.Errorf("closed events %+v, want one for the back-end, handoff-failed", evs)
	}
	if err := h.fe.HoldSplice(id2, t0+Time(5*time.Second)); err != ErrFlowState {
		t.Errorf("HoldSplice on an answered flow: %v, want ErrFlowState", err)
	}

	// A third held past the idle timeout gets a 503 from the engine.
	c3 := newClient(40009, 0x52000000, fullOffer(9))
	heldConnection(t, h, c3, 0x62000000, req)
	if rst, answer := heldOutcome(t, h.tick(t0+4*ms+Time(time.Minute)), "HTTP/1.1 503 ", ""); !rst || !answer {
		t.Fatalf("after the idle timeout: C2 reset %v, 503 to the client %v; want both", rst, answer)
	}
}

// heldOutcome reports whether out resets C2 and answers the client with a
// payload that starts with status and contains header.
func heldOutcome(t *testing.T, out *Output, status, header string) (rst, answer bool) {
	t.Helper()
	for _, f := range copyFrames(out) {
		s := decodeTCP(t, f)
		switch {
		case s.ip.DstIP.Equal(backendIP[:]) && s.flags()&wire.TCPFlagRST != 0:
			rst = true
		case s.ip.DstIP.Equal(clientIP[:]) && strings.HasPrefix(string(s.payload()), status) &&
			strings.Contains(string(s.payload()), header):
			answer = true
		}
	}
	return rst, answer
}

// heldConnection takes a request from c through dispatch and C2 set-up
// (the back-end's ISN given) and holds it ready at t0+4ms.
func heldConnection(t *testing.T, h *feHarness, c *testClient, backendISN wire.Seq, req string) FlowID {
	t.Helper()
	id := queuedRequest(t, h, c, req)
	syn := dispatch(t, h, id, t0+2*ms)
	srv := newServer(backendISN, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 1})
	h.input(srv.synAck(syn), t0+3*ms)
	if err := h.fe.HoldSplice(id, t0+4*ms); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestC2SYNOffersTheClientsWindow: the SYN to the back-end offers the
// window the client last offered, in bytes, as a SYN carries it (never
// scaled, at most 65535). A kernel taking a request in the SYN keeps that
// window as the largest it has seen; 65535 there starved a client with a
// 4 KiB receive buffer (one small segment per persist timeout).
func TestC2SYNOffersTheClientsWindow(t *testing.T) {
	cases := []struct {
		name   string
		wscale int
		window uint16 // the client's raw window in its last segment
		want   uint16
	}{
		{"tiny-buffer", 7, 10, 1280},
		{"scaled-below-max", 7, 502, 64256},
		{"scaled-above-max", 7, 1000, 65535},
		{"unscaled", -1, 4096, 4096},
		{"scale-0", 0, 1400, 1400},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFE(t, nil)
			offer := fullOffer(3)
			offer.WScale = tc.wscale
			c := newClient(40100+uint16(i), wire.Seq(0x7000000+i), offer)
			c.window = tc.window
			id := queuedRequest(t, h, c, shortRequest)
			syn := dispatch(t, h, id, t0+2*ms)
			if syn.flags() != wire.TCPFlagSYN {
				t.Fatalf("dispatch sent flags %#x, want a SYN", syn.flags())
			}
			if got := syn.tcp.Window; got != tc.want {
				t.Errorf("C2 SYN window %d, want %d (client window %d, scale %d)", got, tc.want, tc.window, tc.wscale)
			}
		})
	}
}
