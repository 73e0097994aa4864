package splice

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// delayedAck is a front-end that holds a lone request head's ACK back for
// 40 ms, with a client through the handshake at t0.
func delayedAck(t *testing.T) (*feHarness, *testClient) {
	t.Helper()
	h := newFE(t, func(c *FrontEndConfig) { c.RequestAckDelay = 40 * time.Millisecond })
	c := newClient(40011, 0x11110000, fullOffer(50))
	c.handshake(t, h, t0)
	return h, c
}

// request sends a whole head in one segment at now and returns its flow;
// no frame may answer it.
func requestNoAck(t *testing.T, h *feHarness, c *testClient, now Time) FlowID {
	t.Helper()
	c.tsVal++
	out := h.input(c.data([]byte(shortRequest)), now)
	if len(out.Frames) != 0 {
		t.Fatalf("%d frames answered a lone request head, want none (its ACK waits)", len(out.Frames))
	}
	return onlyEvent(t, out, EvRequest).Flow
}

// TestRequestAckIsCarriedByTheResponse: handed off at once, the request
// is acknowledged by the response (the shim's translation of the
// back-end's ACK); the client, acknowledging response bytes, shows it got
// one, so when the 40 ms pass the front-end sends nothing.
func TestRequestAckIsCarriedByTheResponse(t *testing.T) {
	h, c := delayedAck(t)
	id := requestNoAck(t, h, c, t0+ms)
	syn := dispatch(t, h, id, t0+2*ms)
	srv := newServer(0x22220000, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true})
	if out := h.input(srv.synAck(syn), t0+3*ms); len(out.Frames) != 0 {
		t.Fatalf("%d frames for the SYN-ACK", len(out.Frames))
	}
	out := h.call(func(out *Output) {
		if err := h.fe.SpliceAcked(id, t0+4*ms, out); err != nil {
			t.Fatal(err)
		}
	})
	expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), flagsAre(wire.TCPFlagACK|wire.TCPFlagPSH))
	// The shim sent the client 1000 response bytes, acknowledging the
	// request; the client acknowledges them.
	c.tsVal++
	c.peerTS = 1
	out = h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt+1000, nil), t0+5*ms)
	expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), flagsAre(wire.TCPFlagACK)) // forwarded on C2
	if out := h.tick(t0 + 41*ms); len(out.Frames) != 0 {
		t.Fatalf("%d frames at the ACK's deadline after the client acknowledged response bytes", len(out.Frames))
	}
	if st := h.fe.Stats(); st.RequestAcksSaved != 1 || st.RequestAcksDelayed != 0 {
		t.Errorf("saved %d, delayed %d; want 1 and 0", st.RequestAcksSaved, st.RequestAcksDelayed)
	}
	h.checkCounters()
}

// TestRequestAckSentWhenNoResponseCame: a request still queued at 40 ms
// gets its ACK then, exactly once, and the queue's own deadline is not
// moved by it: the flow stays queued.
func TestRequestAckSentWhenNoResponseCame(t *testing.T) {
	h, c := delayedAck(t)
	id := requestNoAck(t, h, c, t0+ms)
	if out := h.tick(t0 + 40*ms); len(out.Frames) != 0 {
		t.Fatalf("%d frames before the ACK's deadline", len(out.Frames))
	}
	out := h.tick(t0 + 41*ms)
	expectTCP(t, onlyFrame(t, out), to(clientIP, c.port), ackIs(c.nxt), flagsAre(wire.TCPFlagACK))
	if out := h.tick(t0 + 2000*ms); len(out.Frames) != 0 {
		t.Fatalf("%d frames after the owed ACK went", len(out.Frames))
	}
	if f := h.fe.byID[id]; f == nil || f.state != stQueued {
		t.Fatalf("flow %d left the queue at the ACK's timer", id)
	}
	if st := h.fe.Stats(); st.RequestAcksDelayed != 1 || st.RequestAcksSaved != 0 {
		t.Errorf("delayed %d, saved %d; want 1 and 0", st.RequestAcksDelayed, st.RequestAcksSaved)
	}
	// Dispatched later, the handoff runs as usual.
	dispatch(t, h, id, t0+3000*ms)
	h.checkCounters()
}

// TestRequestAckRidesOnAnAnswer: a request the daemon refuses before the
// delay passes is answered at once; the answer acknowledges the request,
// and no separate ACK follows.
func TestRequestAckRidesOnAnAnswer(t *testing.T) {
	h, c := delayedAck(t)
	id := requestNoAck(t, h, c, t0+ms)
	out := h.call(func(out *Output) {
		if err := h.fe.Reject(id, 503, "queue full", time.Second, t0+2*ms, out); err != nil {
			t.Fatal(err)
		}
	})
	expectTCP(t, out.Frames[0].Data, to(clientIP, c.port), ackIs(c.nxt))
	if out := h.tick(t0 + 41*ms); len(out.Frames) != 0 {
		t.Fatalf("%d frames at the ACK's deadline after the answer carried it", len(out.Frames))
	}
}

// TestRequestAckAtOnceWhenItCannotWait: a head in two segments (the
// client has two in flight and probes after 2 ms), or one with the
// client's FIN, is acknowledged at once.
func TestRequestAckAtOnceWhenItCannotWait(t *testing.T) {
	h, c := delayedAck(t)
	req := []byte(shortRequest)
	expectTCP(t, onlyFrame(t, h.input(c.data(req[:10]), t0+ms)), ackIs(c.nxt))
	out := h.input(c.data(req[10:]), t0+2*ms)
	expectTCP(t, onlyFrame(t, out), ackIs(c.nxt))
	onlyEvent(t, out, EvRequest)

	h, c = delayedAck(t)
	c.tsVal++
	b := c.seg(wire.TCPFlagACK|wire.TCPFlagPSH|wire.TCPFlagFIN, c.nxt, c.rcvNxt, req)
	c.nxt += wire.Seq(len(req)) + 1
	out = h.input(b, t0+ms)
	expectTCP(t, onlyFrame(t, out), ackIs(c.nxt))
	onlyEvent(t, out, EvRequest)
}
