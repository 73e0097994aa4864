package splice

import (
	"slices"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// timelineOf returns what the EvClosed of out says of flow id.
func timelineOf(t *testing.T, out *Output, id FlowID) FlowTimeline {
	t.Helper()
	ev := onlyEvent(t, out, EvClosed)
	if ev.Flow != id {
		t.Fatalf("EvClosed for flow %d, want %d", ev.Flow, id)
	}
	return ev.Timeline
}

// TestTimelineStampsEveryStepTheEngineSeesAtItsExactTime drives one
// connection through the handoff at hand-picked times, a retransmitted
// SYN, request (from the client), C2 SYN and request (on C2) included,
// and checks the timeline its EvClosed carries: each step at the time of
// its first occurrence, and each retransmission counted and marked at its
// time.
func TestTimelineStampsEveryStepTheEngineSeesAtItsExactTime(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.Timelines = true })
	p := defaultSpliceParams()
	p.request = []byte(shortRequest)
	c := newClient(testRequestPort, p.clientISN, p.offer)

	h.input(c.syn(), t0)
	sa := expectTCP(t, onlyFrame(t, h.input(c.syn(), t0+2*ms)), flagsAre(wire.TCPFlagSYN|wire.TCPFlagACK))
	c.isnF = sa.seq()
	c.rcvNxt = c.isnF + 1
	c.peerTS, _, c.ts = sa.ts()
	if out := h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil), t0+5*ms); len(out.Frames) != 0 {
		t.Fatalf("final handshake ACK answered with %d frames", len(out.Frames))
	}
	c.tsVal++
	id := c.sendRequest(t, h, p.request, t0+9*ms)
	c.tsVal++
	h.input(c.seg(wire.TCPFlagACK|wire.TCPFlagPSH, c.nxt-wire.Seq(len(p.request)), c.rcvNxt, p.request), t0+11*ms) // as if our ACK was lost
	syn := dispatch(t, h, id, t0+14*ms)
	h.tick((t0 + 14*ms).Add(h.cfg.HandoffTimeout)) // the C2 SYN again: not a new step
	srv := newServer(p.backendISN, p.answer)
	onlyEvent(t, h.input(srv.synAck(syn), t0+1020*ms), EvSplice)
	h.call(func(out *Output) {
		if err := h.fe.SpliceAcked(id, t0+1027*ms, out); err != nil {
			t.Fatal(err)
		}
	})
	if resent := h.tick((t0 + 1027*ms).Add(h.cfg.RTOMin)); len(resent.Frames) == 0 { // not acknowledged: sent again
		t.Fatal("the request was not retransmitted")
	}
	srv.rcvNxt += wire.Seq(len(p.request))
	h.input(srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, srv.nxt, srv.rcvNxt, nil), t0+1240*ms) // the shim's copy of the server's FIN
	c.tsVal++
	out := h.input(c.seg(wire.TCPFlagRST, c.nxt, 0, nil), t0+1250*ms)
	tl := timelineOf(t, out, id)

	want := map[FlowStep]Time{
		StepSYN:          t0,
		StepCookieACK:    t0 + 5*ms,
		StepHeadComplete: t0 + 9*ms,
		StepC2SYN:        t0 + 14*ms,
		StepC2SYNACK:     t0 + 1020*ms,
		StepRequestSent:  t0 + 1027*ms,
		StepClose:        t0 + 1240*ms,
	}
	for s := range NumFlowSteps {
		got, ok := tl.Get(s)
		if !ok || got != want[s] {
			t.Errorf("%v at %v (stamped %v), want %v", s, time.Duration(got-t0), ok, time.Duration(want[s]-t0))
		}
	}
	if tl.SYNs != 2 || tl.C2SYNs != 2 || tl.RequestResends != 1 {
		t.Errorf("SYNs %d, C2 SYNs %d, request resends %d: want 2, 2, 1 (one retransmission each)", tl.SYNs, tl.C2SYNs, tl.RequestResends)
	}
	// Each retransmission at its time, in order.
	wantMarks := []RetxMark{
		{At: t0 + 2*ms, Kind: RetxSYN}, // placed when the cookie ACK made the flow
		{At: t0 + 11*ms, Kind: RetxClientData},
		{At: (t0 + 14*ms).Add(h.cfg.HandoffTimeout), Kind: RetxC2SYN},
		{At: (t0 + 1027*ms).Add(h.cfg.RTOMin), Kind: RetxRequest},
	}
	if got := tl.Marks(); !slices.Equal(got, wantMarks) || int(tl.NumRetx) != len(wantMarks) {
		t.Errorf("retransmissions %v (%d seen), want %v", got, tl.NumRetx, wantMarks)
	}
	if tl.RequestBytes != uint32(len(p.request)) {
		t.Errorf("RequestBytes %d, want %d", tl.RequestBytes, len(p.request))
	}
}

// TestTimelineWithoutTheSYNTableHasNoSYNStep: with Timelines off the
// engine keeps nothing per SYN (cookies stay stateless), so the SYN step
// is missing while the others are still stamped; with it on, a SYN whose
// slot a later SYN took is missing too, and nothing grows.
func TestTimelineWithoutTheSYNTableHasNoSYNStep(t *testing.T) {
	h := newFE(t, nil)
	if h.fe.syns != nil {
		t.Fatal("SYN table allocated with Timelines off")
	}
	sc := connectSplicedOn(t, h, newClient(testRequestPort, 0x10000000, fullOffer(5000)), defaultSpliceParams())
	sc.c.tsVal++
	out := h.input(sc.c.seg(wire.TCPFlagRST, sc.c.nxt, 0, nil), sc.now+ms)
	tl := timelineOf(t, out, sc.id)
	if _, ok := tl.Get(StepSYN); ok || tl.SYNs != 0 {
		t.Errorf("SYN stamped (SYNs %d) with Timelines off", tl.SYNs)
	}
	if at, ok := tl.Get(StepCookieACK); !ok || at != t0 {
		t.Errorf("cookie ACK at %v (%v), want t0", at, ok)
	}

	var tab synTable = newSynTable(true)
	a := fourTuple{srcIP: clientIP, dstIP: vipA, srcPort: 1000, dstPort: 80}
	tab.noteSYN(a, 1, t0)
	// Find another tuple in the same slot: it takes the slot over.
	b := a
	for b.srcPort = 1001; tab.slot(b) != tab.slot(a); b.srcPort++ {
	}
	tab.noteSYN(b, 2, t0+ms)
	if s := tab.slot(a); s.key == a || s.key != b || s.at != t0+ms || s.n != 1 {
		t.Errorf("slot after a colliding SYN: %+v", *s)
	}
	if len(tab) != synSlots {
		t.Errorf("table of %d slots, want %d", len(tab), synSlots)
	}
}

// TestShimReportsTheFirstResponseByteFromTheRequestsArrival: the shim's
// EvResponseDone says when the response's first byte came, relative to
// the request's first byte reaching the shim, on the shim's own clock; a
// retransmitted request moves neither end.
func TestShimReportsTheFirstResponseByteFromTheRequestsArrival(t *testing.T) {
	sc := newShimConn(t, ShimConfig{ResponseQuiet: 20 * time.Millisecond}, 0x1000, 0x2000, nil)
	h, srv := sc.h, sc.srv
	arrive := t0 + 100*ms
	req := []byte("GET /data/1000 HTTP/1.1\r\nHost: h\r\n\r\n")
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, req), arrive)
	sc.cliSeq -= wire.Seq(len(req))
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, req), arrive+4*ms) // resent
	head := []byte("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
	h.input(PortHost, srv.reply(append(head, make([]byte, 500)...)), arrive+15*ms)
	ev := onlyEvent(t, h.input(PortHost, srv.reply(make([]byte, 500)), arrive+21*ms), EvResponseDone)
	if ev.FirstByte != 15*time.Millisecond || ev.ServiceTime != 21*time.Millisecond {
		t.Errorf("FirstByte %v ServiceTime %v, want 15ms and 21ms", ev.FirstByte, ev.ServiceTime)
	}
}
