package splice

import (
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// The engine's side of the link's SYN answer, without the program (its
// test, which needs root: fe_linksyn_link_test.go).

// TestASYNTheLinkAnswersGetsNoSecondSYNACK: told that the link answers,
// the engine sends nothing for Linux's SYN and counts it, still answers
// a SYN the program leaves to it, and the client's final ACK to the
// cookie makes a flow as before.
func TestASYNTheLinkAnswersGetsNoSecondSYNACK(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.LinkAnswersSYNs = true })
	own := newFE(t, nil)
	c := newClient(1234, 0xabcdef01, fullOffer(77))
	now := t0 + 5*ms
	if out := h.input(c.syn(), now); len(out.Frames) != 0 {
		t.Fatalf("the engine answered a SYN the link answers: %d frames", len(out.Frames))
	}
	if st := h.fe.Stats(); st.SynCookiesByLink != 1 || st.SynCookiesSent != 0 {
		t.Errorf("SynCookiesByLink %d, SynCookiesSent %d; want 1, 0", st.SynCookiesByLink, st.SynCookiesSent)
	}
	// The SYN-ACK the link sent is the one this engine sends alone.
	sa := expectTCP(t, onlyFrame(t, own.input(c.syn(), now)), flagsAre(wire.TCPFlagSYN|wire.TCPFlagACK))
	c.isnF, c.rcvNxt = sa.seq(), sa.seq()+1
	c.peerTS, _, c.ts = sa.ts()
	if out := h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil), now+ms); len(out.Frames) != 0 || h.fe.Flows() != 1 {
		t.Fatalf("the final ACK: %d frames, %d flows; want none and 1", len(out.Frames), h.fe.Flows())
	}
	// A Fast Open SYN is the engine's to answer.
	fo := newClient(1235, 7, fullOffer(77))
	fo.offer.FastOpen = true
	expectTCP(t, onlyFrame(t, h.input(fo.syn(), now)), flagsAre(wire.TCPFlagSYN|wire.TCPFlagACK))
	h.checkCounters()
}

// TestTheLinksSYNsPassTheSYNTimeLimits: a SYN the link answered cannot be
// refused at the SYN (its SYN-ACK is out), so the per-source limit
// counts it against nothing and applies at its final ACK, which gets the
// RST as the limits say; a SYN the engine answers is refused at the SYN
// as before.
func TestTheLinksSYNsPassTheSYNTimeLimits(t *testing.T) {
	for _, link := range []bool{false, true} {
		h := newFE(t, func(c *FrontEndConfig) { c.MaxFlowsPerSource = 1; c.LinkAnswersSYNs = link })
		now := t0
		first := newClient(1000, 100, fullOffer(1))
		if link {
			h.input(first.syn(), now)
			sa := expectTCP(t, onlyFrame(t, newFE(t, nil).input(first.syn(), now)))
			first.isnF, first.rcvNxt = sa.seq(), sa.seq()+1
			first.peerTS, _, first.ts = sa.ts()
			h.input(first.seg(wire.TCPFlagACK, first.nxt, first.rcvNxt, nil), now)
		} else {
			first.handshake(t, h, now)
		}
		second := newClient(1001, 200, fullOffer(1))
		out := h.input(second.syn(), now)
		st := h.fe.Stats()
		switch {
		case !link && (len(out.Frames) != 0 || st.RefusedSYNSource != 1):
			t.Errorf("engine's SYN over the limit: %d frames, %d refused; want none and 1", len(out.Frames), st.RefusedSYNSource)
		case link && (len(out.Frames) != 0 || st.RefusedSYNSource != 0 || st.SynCookiesByLink != 2):
			t.Errorf("link's SYN over the limit: %d frames, %d refused, %d by the link; want none, 0, 2", len(out.Frames), st.RefusedSYNSource, st.SynCookiesByLink)
		}
		if !link {
			continue
		}
		sa := expectTCP(t, onlyFrame(t, newFE(t, nil).input(second.syn(), now)))
		second.isnF, second.rcvNxt = sa.seq(), sa.seq()+1
		second.peerTS, _, second.ts = sa.ts()
		expectTCP(t, onlyFrame(t, h.input(second.seg(wire.TCPFlagACK, second.nxt, second.rcvNxt, nil), now)), flagsAre(wire.TCPFlagRST))
		if st := h.fe.Stats(); st.RefusedAcceptSource != 1 || h.fe.Flows() != 1 {
			t.Errorf("the final ACK over the limit: %d refused, %d flows; want 1 and 1", st.RefusedAcceptSource, h.fe.Flows())
		}
	}
}
