package splice

import (
	"bytes"
	"strings"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// acceptedClient returns a harness with one client through the handshake
// at t0.
func acceptedClient(t *testing.T, mod func(*FrontEndConfig)) (*feHarness, *testClient) {
	t.Helper()
	h := newFE(t, mod)
	c := newClient(40001, 0xfffffff0, fullOffer(100)) // request bytes wrap past 2^32
	c.handshake(t, h, t0)
	return h, c
}

func TestRequestHeadSplitAcrossSegmentsYieldsOneRequest(t *testing.T) {
	h, c := acceptedClient(t, nil)
	parts := []string{"GET /shop/cart?item=4 HT", "TP/1.1\r\nHo", "st: shop.example.test:80\r\nCookie: s=1\r\n", "\r\n"}
	var evs []Event
	for i, p := range parts {
		out := h.input(c.data([]byte(p)), t0+Time(i+1)*ms)
		expectTCP(t, onlyFrame(t, out), ackIs(c.nxt), seqIs(c.isnF+1), flagsAre(wire.TCPFlagACK),
			tsIs(tsClock(t0+Time(i+1)*ms), c.tsVal))
		evs = append(evs, out.Events...)
	}
	if len(evs) != 1 || evs[0].Kind != EvRequest {
		t.Fatalf("events %+v, want one EvRequest", evs)
	}
	r := evs[0].Request
	if r.Host != "shop.example.test" || r.Path != "/shop/cart" || r.Method != "GET" ||
		r.Cookie != "s=1" || r.Port != webPort || r.HeadLen != len(strings.Join(parts, "")) {
		t.Errorf("request %+v", r)
	}
	if h.fe.Stats().Requests != 1 {
		t.Errorf("Requests = %d", h.fe.Stats().Requests)
	}
	h.checkCounters()
}

func TestOutOfOrderSegmentGetsDuplicateAckAndIsNotBuffered(t *testing.T) {
	h, c := acceptedClient(t, nil)
	first, second := []byte("GET /a HTTP/1.1\r\n"), []byte("Host: b\r\n\r\n")
	gap := c.seg(wire.TCPFlagACK|wire.TCPFlagPSH, c.nxt+wire.Seq(len(first)), c.rcvNxt, second)
	out := h.input(gap, t0+ms)
	expectTCP(t, onlyFrame(t, out), ackIs(c.isn+1), flagsAre(wire.TCPFlagACK))
	if len(out.Events) != 0 {
		t.Errorf("events for an out-of-order segment: %+v", out.Events)
	}
	if d := h.fe.Stats().Drops[dropOutOfWindow]; d != 1 {
		t.Errorf("out-of-window drops = %d, want 1", d)
	}
	// The hole filled: the ACK covers only the first part, so the second
	// was not kept, and the client's retransmission completes the head.
	out = h.input(c.data(first), t0+2*ms)
	expectTCP(t, onlyFrame(t, out), ackIs(c.isn+1+wire.Seq(len(first))))
	if len(out.Events) != 0 {
		t.Fatalf("request reported from the first part alone")
	}
	out = h.input(c.data(second), t0+3*ms)
	if ev := onlyEvent(t, eventsOfOutput(out), EvRequest); ev.Request.Host != "b" {
		t.Errorf("Host %q", ev.Request.Host)
	}
	// A retransmission of old bytes is answered with an ACK and ignored.
	out = h.input(c.seg(wire.TCPFlagACK|wire.TCPFlagPSH, c.isn+1, c.rcvNxt, first), t0+4*ms)
	expectTCP(t, onlyFrame(t, out), ackIs(c.nxt))
	if f := h.fe.byID[1]; len(f.buf) != len(first)+len(second) {
		t.Errorf("buffered %d bytes, want %d", len(f.buf), len(first)+len(second))
	}
	h.checkCounters()
}

// eventsOfOutput narrows an Output to its events for onlyEvent.
func eventsOfOutput(out *Output) *Output { return &Output{Events: out.Events} }

// answerOf collects the front-end's own answer from out: its payload, and
// whether the last segment carried FIN.
func answerOf(t *testing.T, out *Output, c *testClient) (payload []byte, fin bool) {
	t.Helper()
	seq := c.isnF + 1
	for _, f := range copyFrames(out) {
		s := expectTCP(t, f, from(c.vip, c.vport), to(c.ip, c.port), ethTo(routerMAC), seqIs(seq), ackIs(c.nxt))
		payload = append(payload, s.payload()...)
		seq += wire.Seq(len(s.payload()))
		fin = s.tcp.FIN
	}
	return payload, fin
}

func TestOversizedHeadIsAnswered431(t *testing.T) {
	h, c := acceptedClient(t, func(cfg *FrontEndConfig) { cfg.MaxHead = 1024 })
	head := "GET / HTTP/1.1\r\nX-Fill: " + strings.Repeat("a", 1100)
	out := h.input(c.data([]byte(head)), t0+ms)
	if ev := eventsOf(out, EvAnswered); len(ev) != 1 || ev[0].Status != 431 {
		t.Fatalf("events %+v, want EvAnswered 431", out.Events)
	}
	// The first frame acknowledges the head; the answer follows.
	expectTCP(t, out.Frames[0].Data, ackIs(c.nxt), seqIs(c.isnF+1), flagsAre(wire.TCPFlagACK))
	out.Frames = out.Frames[1:]
	body, fin := answerOf(t, out, c)
	if !bytes.HasPrefix(body, []byte("HTTP/1.1 431 Request Header Fields Too Large\r\n")) || !fin {
		t.Errorf("answer %q (FIN %v)", body, fin)
	}
	if h.fe.Stats().Answered[answeredIndex(431)] != 1 {
		t.Errorf("Answered[431] = %d", h.fe.Stats().Answered[answeredIndex(431)])
	}
}

func TestMalformedHeadIsAnswered400(t *testing.T) {
	h, c := acceptedClient(t, nil)
	out := h.input(c.data([]byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 TLS, not HTTP\r\n\r\n")), t0+ms)
	if ev := eventsOf(out, EvAnswered); len(ev) != 1 || ev[0].Status != 400 {
		t.Fatalf("events %+v, want EvAnswered 400", out.Events)
	}
	out.Frames = out.Frames[1:]
	body, fin := answerOf(t, out, c)
	if !bytes.HasPrefix(body, []byte("HTTP/1.1 400 Bad Request\r\n")) || !fin ||
		!bytes.Contains(body, []byte("\r\nConnection: close\r\n")) {
		t.Errorf("answer %q (FIN %v)", body, fin)
	}
}

func TestHeadTimeoutIsAnswered408(t *testing.T) {
	h, c := acceptedClient(t, nil)
	h.input(c.data([]byte("GET / HTTP/1.1\r\n")), t0+ms)
	if out := h.tick(t0 + Time(h.cfg.HeadTimeout) - 1); len(out.Frames) != 0 {
		t.Fatalf("answered %d frames before the head timeout", len(out.Frames))
	}
	out := h.tick(t0 + Time(h.cfg.HeadTimeout))
	if ev := eventsOf(out, EvAnswered); len(ev) != 1 || ev[0].Status != 408 {
		t.Fatalf("events %+v, want EvAnswered 408", out.Events)
	}
	body, fin := answerOf(t, out, c)
	if !bytes.HasPrefix(body, []byte("HTTP/1.1 408 Request Timeout\r\n")) || !fin {
		t.Errorf("answer %q (FIN %v)", body, fin)
	}
}

func TestAnswerIsRetransmittedUntilAcknowledgedThenFlowIsFreedAfterLinger(t *testing.T) {
	h, c := acceptedClient(t, nil)
	start := t0 + ms
	out := h.input(c.data([]byte("BROKEN\x00\r\n\r\n")), start)
	out.Frames = out.Frames[1:]
	first, fin := answerOf(t, out, c)
	if !fin || len(first) == 0 {
		t.Fatalf("no answer with FIN")
	}

	// Retransmissions back off: RTOMin, then 2*RTOMin after that.
	rto := Time(h.cfg.RTOMin)
	if out := h.tick(start + rto - 1); len(out.Frames) != 0 {
		t.Fatalf("retransmitted before the RTO")
	}
	again, fin := answerOf(t, h.tick(start+rto), c)
	if !bytes.Equal(again, first) || !fin {
		t.Fatalf("retransmission %q (FIN %v), want %q", again, fin, first)
	}
	if out := h.tick(start + rto + 2*rto - 1); len(out.Frames) != 0 {
		t.Fatalf("second retransmission came without backoff")
	}
	if again, _ := answerOf(t, h.tick(start+3*rto), c); !bytes.Equal(again, first) {
		t.Fatalf("second retransmission %q", again)
	}
	if r := h.fe.Stats().Retransmits; r != 2 {
		t.Errorf("Retransmits = %d, want 2", r)
	}

	// A partial ACK: the rest is resent from there.
	acked := c.isnF + 1 + 10
	ackAt := start + 3*rto + ms
	h.input(c.seg(wire.TCPFlagACK, c.nxt, acked, nil), ackAt)
	out = h.tick(ackAt + rto)
	if len(out.Frames) == 0 {
		t.Fatalf("no retransmission after a partial ACK")
	}
	s := expectTCP(t, out.Frames[0].Data, seqIs(acked))
	if !bytes.Equal(s.payload(), first[10:]) {
		t.Errorf("resent %q, want %q", s.payload(), first[10:])
	}

	// The client acknowledges everything including our FIN.
	done := ackAt + rto + ms
	out = h.input(c.seg(wire.TCPFlagACK, c.nxt, c.isnF+1+wire.Seq(len(first))+1, nil), done)
	if ev := onlyEvent(t, out, EvClosed); ev.Reason != CloseAnswered {
		t.Errorf("closed with %v, want answered", ev.Reason)
	}
	if out := h.tick(done + 10*rto); len(out.Frames) != 0 {
		t.Errorf("retransmitted %d frames after the final ACK", len(out.Frames))
	}
	// The client's FIN during the linger is acknowledged.
	fin2 := c.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c.nxt, c.isnF+2+wire.Seq(len(first)), nil)
	expectTCP(t, onlyFrame(t, h.input(fin2, done+ms)), ackIs(c.nxt+1), flagsAre(wire.TCPFlagACK))

	if h.fe.Flows() != 1 {
		t.Fatalf("Flows() = %d during the linger", h.fe.Flows())
	}
	h.tick(done + Time(h.cfg.Linger) - 1)
	if h.fe.Flows() != 1 {
		t.Fatalf("flow freed before the linger ended")
	}
	h.tick(done + Time(h.cfg.Linger))
	if h.fe.Flows() != 0 {
		t.Errorf("Flows() = %d after the linger", h.fe.Flows())
	}
	h.checkCounters()
}

func TestUnacknowledgedAnswerGivesUpAfterMaxRetries(t *testing.T) {
	h, c := acceptedClient(t, func(cfg *FrontEndConfig) { cfg.MaxRetries = 2 })
	h.input(c.data([]byte("NOT HTTP AT ALL\r\n\r\n")), t0+ms)
	now, evs := h.drain(t0+ms, t0+Time(h.cfg.Linger)) // retransmit until giving up
	closed := eventsOf(&Output{Events: evs}, EvClosed)
	if r := h.fe.Stats().Retransmits; r != 2 {
		t.Errorf("Retransmits = %d, want MaxRetries = 2", r)
	}
	if len(closed) != 1 || closed[0].Reason != CloseTimeout {
		t.Errorf("events %+v, want one EvClosed timeout", evs)
	}
	h.drain(now, Never-1)
	if h.fe.Flows() != 0 {
		t.Errorf("Flows() = %d", h.fe.Flows())
	}
	h.checkCounters()
}

func TestClientClosingWithoutAByteIsClosedQuietly(t *testing.T) {
	h, c := acceptedClient(t, nil)
	out := h.input(c.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c.nxt, c.rcvNxt, nil), t0+ms)
	if len(eventsOf(out, EvAnswered)) != 0 || len(eventsOf(out, EvRequest)) != 0 {
		t.Errorf("events %+v for a connection that sent nothing", out.Events)
	}
	var fin *seen
	for _, f := range copyFrames(out) {
		s := expectTCP(t, f, ackIs(c.nxt+1), payloadIs(nil))
		if s.tcp.FIN {
			fin = s
		}
	}
	if fin == nil {
		t.Fatalf("no FIN back")
	}
	h.input(c.seg(wire.TCPFlagACK, c.nxt+1, fin.seq()+1, nil), t0+2*ms)
	h.drain(t0+2*ms, Never-1)
	if h.fe.Flows() != 0 || h.fe.Stats().Answered != [6]uint64{} {
		t.Errorf("Flows() = %d, Answered %v", h.fe.Flows(), h.fe.Stats().Answered)
	}
	h.checkCounters()
}
