package splice

import (
	"bytes"
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

// linuxSYNs are the option areas of the SYNs Linux sends, one for each
// combination of what it offers (tcp_options_write's order), and the
// offer the test client encodes them from.
var linuxSYNs = []struct {
	name         string
	ts, sack, ws bool
	opts         []byte
}{
	{"MSS,SACKOK,TS,NOP,WS", true, true, true, []byte{2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 9, 0, 0, 0, 0, 1, 3, 3, 7}},
	{"MSS,NOP,NOP,TS,NOP,WS", true, false, true, []byte{2, 4, 5, 0xb4, 1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 0, 1, 3, 3, 7}},
	{"MSS,NOP,NOP,SACKOK,NOP,WS", false, true, true, []byte{2, 4, 5, 0xb4, 1, 1, 4, 2, 1, 3, 3, 7}},
	{"MSS,SACKOK,TS", true, true, false, []byte{2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 9, 0, 0, 0, 0}},
	{"MSS,NOP,NOP,TS", true, false, false, []byte{2, 4, 5, 0xb4, 1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 0}},
	{"MSS", false, false, false, []byte{2, 4, 5, 0xb4}},
	{"MSS,NOP,WS", false, false, true, []byte{2, 4, 5, 0xb4, 1, 3, 3, 7}},
	{"MSS,NOP,NOP,SACKOK", false, true, false, []byte{2, 4, 5, 0xb4, 1, 1, 4, 2}},
}

// linuxOffer is the offer whose encoding (wire.SynOptions.Encode, which
// lays options out as Linux does) is linuxSYNs[i].opts.
func linuxOffer(i int) wire.SynOptions {
	l := linuxSYNs[i]
	o := wire.SynOptions{MSS: 1460, WScale: -1, SACKPermitted: l.sack, TS: l.ts, TSVal: 9}
	if l.ws {
		o.WScale = 7
	}
	return o
}

// TestLinkAnswersSYNClauseByClause asks the rule of frames that each
// meet or break one clause: the SYN of each of Linux's eight layouts is
// answered, anything else is left to the engine. Every frame parses and
// its options parse, as the rule is only asked of such SYNs.
func TestLinkAnswersSYNClauseByClause(t *testing.T) {
	build := func(flags uint8, opts, payload []byte) []byte {
		c := newClient(40000, 0x51000000, wire.SynOptions{})
		return c.frame(flags, c.isn, 0, opts, payload)
	}
	full := linuxSYNs[0].opts
	type tc struct {
		name  string
		frame []byte
		want  bool
	}
	var cases []tc
	for i, l := range linuxSYNs {
		if got := synOpts(linuxOffer(i)); !bytes.Equal(got, l.opts) {
			t.Fatalf("%s: the client encodes % x", l.name, got)
		}
		cases = append(cases, tc{"Linux " + l.name, build(wire.TCPFlagSYN, l.opts, nil), true})
	}
	withEOL := append(append([]byte(nil), full[:16]...), 0, 0, 0, 0) // TS and EOL where the window scale was
	cases = append(cases, []tc{
		// Flags: SYN alone of FIN, SYN, RST and ACK; the others do not count.
		{"ECN setup (SYN, ECE, CWR)", build(wire.TCPFlagSYN|wire.TCPFlagECE|wire.TCPFlagCWR, full, nil), true},
		{"SYN+FIN", build(wire.TCPFlagSYN|wire.TCPFlagFIN, full, nil), false},
		{"SYN+RST", build(wire.TCPFlagSYN|wire.TCPFlagRST, full, nil), false},
		{"SYN+ACK", build(wire.TCPFlagSYN|wire.TCPFlagACK, full, nil), false},
		// The frame ends where IPv4 says.
		{"a trailing byte", append(build(wire.TCPFlagSYN, full, nil), 0), false},
		{"Ethernet padding of a short SYN", append(build(wire.TCPFlagSYN, linuxSYNs[5].opts, nil), 0, 0), false},
		// An IPv4 header without options (the engine drops them anyway).
		{"IPv4 options", withIPOptions(build(wire.TCPFlagSYN, full, nil), []byte{1, 1, 1, 0}), false},
		// No payload, options as long as the SYN-ACK's.
		{"payload", build(wire.TCPFlagSYN, full, []byte("GET")), false},
		{"MSS and NOPs to 8 bytes", build(wire.TCPFlagSYN, []byte{2, 4, 5, 0xb4, 1, 1, 1, 1}, nil), false},
		{"MSS and EOL to 8 bytes", build(wire.TCPFlagSYN, []byte{2, 4, 5, 0xb4, 0, 0, 0, 0}, nil), false},
		{"timestamps and SACK, EOL for the window scale", build(wire.TCPFlagSYN, withEOL, nil), false},
		{"no options", build(wire.TCPFlagSYN, nil, nil), false},
		{"no MSS", build(wire.TCPFlagSYN, []byte{1, 1, 4, 2}, nil), false},
		{"SACK blocks", build(wire.TCPFlagSYN, []byte{2, 4, 5, 0xb4, 1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2}, nil), false},
		{"Fast Open cookie", build(wire.TCPFlagSYN, []byte{2, 4, 5, 0xb4, 1, 1, 34, 10, 1, 2, 3, 4, 5, 6, 7, 8}, nil), false},
		// As long as the SYN-ACK's options, but not only Linux's kinds in
		// Linux's places.
		{"Fast Open cookie request", build(wire.TCPFlagSYN, []byte{2, 4, 5, 0xb4, 34, 2, 4, 2}, nil), false},
		{"an unknown option", build(wire.TCPFlagSYN, []byte{2, 4, 5, 0xb4, 254, 2, 4, 2}, nil), false},
		{"NOPs in place of the MSS", build(wire.TCPFlagSYN, []byte{1, 1, 1, 1, 1, 1, 4, 2}, nil), false},
		{"window scale before the MSS", build(wire.TCPFlagSYN, []byte{1, 3, 3, 7, 2, 4, 5, 0xb4}, nil), false},
		{"NOPs after the timestamps", build(wire.TCPFlagSYN, []byte{2, 4, 5, 0xb4, 8, 10, 0, 0, 0, 9, 0, 0, 0, 0, 1, 1}, nil), false},
		{"SACK-permitted after the MSS, NOPs after it", build(wire.TCPFlagSYN, []byte{2, 4, 5, 0xb4, 4, 2, 1, 1}, nil), false},
	}...)
	for _, c := range cases {
		var p wire.Packet
		if err := wire.Parse(c.frame, &p); err != nil || p.Kind != wire.KindTCP {
			t.Fatalf("%s: %v", c.name, err)
		}
		var o wire.TCPOptions
		if err := wire.ParseOptions(p.TCP, &o); err != nil {
			t.Fatalf("%s: the options do not parse: %v", c.name, err)
		}
		if got := linkAnswersSYN(&p, &o); got != c.want {
			t.Errorf("%s: linkAnswersSYN %v, want %v", c.name, got, c.want)
		}
	}
}

// TestEachLinuxSYNIsTheLinks: told that the link answers, the engine
// sends nothing for the SYN of each of Linux's layouts and counts it;
// the client's final ACK to the cookie the engine would have sent (an
// engine alone, same secret, same time) makes a flow whose timeline
// starts at the SYN. The engine alone answers each as before.
func TestEachLinuxSYNIsTheLinks(t *testing.T) {
	for i, l := range linuxSYNs {
		t.Run(l.name, func(t *testing.T) {
			h := newFE(t, func(c *FrontEndConfig) { c.LinkAnswersSYNs, c.Timelines = true, true })
			own := newFE(t, nil)
			c := newClient(2000+uint16(i), 0x1000*wire.Seq(i+1), linuxOffer(i))
			synAt := t0 + 5*ms
			if out := h.input(c.syn(), synAt); len(out.Frames) != 0 {
				t.Fatalf("the engine answered a SYN the link answers: %d frames", len(out.Frames))
			}
			if st := h.fe.Stats(); st.SynCookiesByLink != 1 || st.SynCookiesSent != 0 {
				t.Errorf("SynCookiesByLink %d, SynCookiesSent %d; want 1, 0", st.SynCookiesByLink, st.SynCookiesSent)
			}
			sa := expectTCP(t, onlyFrame(t, own.input(c.syn(), synAt)), flagsAre(wire.TCPFlagSYN|wire.TCPFlagACK), ackIs(c.isn+1))
			if st := own.fe.Stats(); st.SynCookiesByLink != 0 || st.SynCookiesSent != 1 {
				t.Errorf("the engine alone: SynCookiesByLink %d, SynCookiesSent %d; want 0, 1", st.SynCookiesByLink, st.SynCookiesSent)
			}
			c.isnF, c.rcvNxt = sa.seq(), sa.seq()+1
			c.peerTS, _, c.ts = sa.ts()
			if c.ts != l.ts {
				t.Fatalf("the SYN-ACK has timestamps: %v, want %v", c.ts, l.ts)
			}
			if out := h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil), synAt+3*ms); len(out.Frames) != 0 || h.fe.Flows() != 1 {
				t.Fatalf("the final ACK: %d frames, %d flows; want none and 1", len(out.Frames), h.fe.Flows())
			}
			for _, f := range h.fe.byID {
				if f.tl.Have&(1<<StepSYN) == 0 || f.tl.At[StepSYN] != synAt {
					t.Errorf("the flow's timeline: SYN stamped %v at %v, want at %v", f.tl.Have&(1<<StepSYN) != 0, f.tl.At[StepSYN], synAt)
				}
			}
			h.checkCounters()
			own.checkCounters()
		})
	}
}

// TestTheEngineAnswersTheSYNsTheLinkLeaves: for each SYN the program
// leaves to the engine, the engine told that the link answers sends the
// SYN-ACK, byte for byte, that it sends alone, and counts none for the
// link.
func TestTheEngineAnswersTheSYNsTheLinkLeaves(t *testing.T) {
	c := newClient(3000, 0x7000, fullOffer(9))
	full := synOpts(fullOffer(9))
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"payload", c.frame(wire.TCPFlagSYN, c.isn, 0, full, []byte("GET / HTTP/1.1\r\n"))},
		{"SACK blocks", c.frame(wire.TCPFlagSYN, c.isn, 0, []byte{2, 4, 5, 0xb4, 1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2}, nil)},
		{"Fast Open cookie request", c.frame(wire.TCPFlagSYN, c.isn, 0, []byte{2, 4, 5, 0xb4, 34, 2, 4, 2}, nil)},
		{"Fast Open cookie", c.frame(wire.TCPFlagSYN, c.isn, 0, []byte{2, 4, 5, 0xb4, 1, 1, 34, 10, 1, 2, 3, 4, 5, 6, 7, 8}, nil)},
		{"an unknown option", c.frame(wire.TCPFlagSYN, c.isn, 0, []byte{2, 4, 5, 0xb4, 254, 2, 4, 2}, nil)},
		{"a trailing byte", append(c.syn(), 0)},
		{"SYN+FIN", c.frame(wire.TCPFlagSYN|wire.TCPFlagFIN, c.isn, 0, full, nil)},
		{"MSS and NOPs to 8 bytes", c.frame(wire.TCPFlagSYN, c.isn, 0, []byte{2, 4, 5, 0xb4, 1, 1, 1, 1}, nil)},
		{"window scale before the MSS", c.frame(wire.TCPFlagSYN, c.isn, 0, []byte{1, 3, 3, 7, 2, 4, 5, 0xb4}, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFE(t, func(c *FrontEndConfig) { c.LinkAnswersSYNs = true })
			own := newFE(t, nil)
			want := onlyFrame(t, own.input(tc.frame, t0))
			expectTCP(t, want, flagsAre(wire.TCPFlagSYN|wire.TCPFlagACK))
			if got := onlyFrame(t, h.input(tc.frame, t0)); !bytes.Equal(got, want) {
				t.Errorf("told the link answers, the engine sent\n% x\nalone\n% x", got, want)
			}
			if st := h.fe.Stats(); st.SynCookiesByLink != 0 || st.SynCookiesSent != 1 {
				t.Errorf("SynCookiesByLink %d, SynCookiesSent %d; want 0, 1", st.SynCookiesByLink, st.SynCookiesSent)
			}
			h.checkCounters()
		})
	}
}

// TestASYNTheLinkLeavesIsStillRefusedOverTheLimit: with the link
// answering, a SYN it leaves to the engine (Fast Open) meets the
// SYN-time limits as before.
func TestASYNTheLinkLeavesIsStillRefusedOverTheLimit(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.MaxFlowsPerSource = 1; c.LinkAnswersSYNs = true })
	first := newClient(1000, 100, wire.SynOptions{MSS: 1460, WScale: -1, FastOpen: true})
	first.handshake(t, h, t0)
	second := newClient(1001, 200, first.offer)
	if out := h.input(second.syn(), t0+ms); len(out.Frames) != 0 {
		t.Fatalf("a SYN over the limit: %d frames", len(out.Frames))
	}
	if st := h.fe.Stats(); st.RefusedSYNSource != 1 || st.SynCookiesByLink != 0 {
		t.Errorf("RefusedSYNSource %d, SynCookiesByLink %d; want 1, 0", st.RefusedSYNSource, st.SynCookiesByLink)
	}
	h.checkCounters()
}

// TestASYNTheLinkAnswersInAFlowIsCounted: the program answers a SYN on a
// tuple that already has a flow (it knows no flows), and the engine
// counts it as the link's whatever the flow makes of it: the counter is
// what the program sent, not what the engine would have.
func TestASYNTheLinkAnswersInAFlowIsCounted(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.LinkAnswersSYNs = true })
	c := newClient(5000, 0x5000, fullOffer(5))
	h.input(c.syn(), t0)
	sa := expectTCP(t, onlyFrame(t, newFE(t, nil).input(c.syn(), t0)))
	c.isnF, c.rcvNxt = sa.seq(), sa.seq()+1
	c.peerTS, _, c.ts = sa.ts()
	h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil), t0+ms)
	if h.fe.Flows() != 1 {
		t.Fatalf("%d flows after the handshake, want 1", h.fe.Flows())
	}
	h.input(c.syn(), t0+2*ms)
	if st := h.fe.Stats(); st.SynCookiesByLink != 2 || st.SynCookiesSent != 0 || h.fe.Flows() != 1 {
		t.Errorf("SynCookiesByLink %d, SynCookiesSent %d, %d flows; want 2, 0, 1", st.SynCookiesByLink, st.SynCookiesSent, h.fe.Flows())
	}
	h.checkCounters()
}
