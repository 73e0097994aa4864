package splice

// The adversarial suite for TCP validation (issue 9): an attacker on the
// same Ethernet segment sends hand-built segments that claim to come from
// a client or from a back-end. Each test here failed on the engine before
// RFC 5961 validation (fe_validate.go) and passes with it.

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// clientStates lists the flow states a client segment can find, each
// built from scratch by setup: the harness, the client (c.nxt is its next
// sequence number, c.rcvNxt what it acknowledges) and the time.
var clientStates = []struct {
	name  string
	state flowState
	setup func(t *testing.T) (*feHarness, *testClient, Time)
}{
	{"reading", stReading, func(t *testing.T) (*feHarness, *testClient, Time) {
		h, c := acceptedClient(t, nil)
		expectTCP(t, onlyFrame(t, h.input(c.data([]byte("GET / HTTP/1.1\r\n")), t0+ms)), ackIs(c.nxt))
		return h, c, t0 + ms
	}},
	{"queued", stQueued, func(t *testing.T) (*feHarness, *testClient, Time) {
		h := newFE(t, nil)
		c := newClient(40100, 0x31000000, fullOffer(9))
		queuedRequest(t, h, c, shortRequest)
		return h, c, t0 + ms
	}},
	{"connecting", stConnecting, func(t *testing.T) (*feHarness, *testClient, Time) {
		h := newFE(t, nil)
		c := newClient(40101, 0x32000000, fullOffer(9))
		dispatch(t, h, queuedRequest(t, h, c, shortRequest), t0+2*ms)
		return h, c, t0 + 2*ms
	}},
	{"splice-wait", stSpliceWait, func(t *testing.T) (*feHarness, *testClient, Time) {
		h := newFE(t, nil)
		c := newClient(40102, 0x33000000, fullOffer(9))
		syn := dispatch(t, h, queuedRequest(t, h, c, shortRequest), t0+2*ms)
		srv := newServer(0x44000000, wire.SynOptions{MSS: 1460, WScale: 7, TS: true, TSVal: 1})
		onlyEvent(t, h.input(srv.synAck(syn), t0+3*ms), EvSplice)
		return h, c, t0 + 3*ms
	}},
	{"spliced", stSpliced, func(t *testing.T) (*feHarness, *testClient, Time) {
		sc := connectSpliced(t, defaultSpliceParams())
		return sc.h, sc.c, sc.now
	}},
	{"answering", stAnswering, func(t *testing.T) (*feHarness, *testClient, Time) {
		h, c := acceptedClient(t, nil)
		out := h.input(c.data([]byte("BAD\x01\r\n\r\n")), t0+ms)
		onlyEvent(t, eventsOfOutput(out), EvAnswered)
		return h, c, t0 + ms
	}},
	{"linger", stLinger, func(t *testing.T) (*feHarness, *testClient, Time) {
		h, c := acceptedClient(t, nil)
		out := h.input(c.data([]byte("BAD\x01\r\n\r\n")), t0+ms)
		body, _ := answerOf(t, &Output{Frames: out.Frames[1:]}, c)
		h.input(c.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c.nxt, c.isnF+2+wire.Seq(len(body)), nil), t0+2*ms)
		c.nxt++
		return h, c, t0 + 2*ms
	}},
}

// onlyFlow returns the harness's single flow.
func onlyFlow(t *testing.T, h *feHarness) *flow {
	t.Helper()
	if len(h.fe.byID) != 1 {
		t.Fatalf("%d flows, want 1", len(h.fe.byID))
	}
	for _, f := range h.fe.byID {
		return f
	}
	return nil
}

// expectChallengeToClient asserts out holds exactly one frame, an ACK to
// the client that names nxt as the next sequence number the front-end
// expects: the real client, if it sent the RST, answers it with a RST at
// exactly that number.
func expectChallengeToClient(t *testing.T, out *Output, c *testClient, nxt wire.Seq) *seen {
	t.Helper()
	if len(out.Events) != 0 {
		t.Errorf("events %+v for a segment that must change nothing", out.Events)
	}
	return expectTCP(t, onlyFrame(t, out), from(c.vip, c.vport), to(c.ip, c.port), ethTo(routerMAC),
		flagsAre(wire.TCPFlagACK), ackIs(nxt))
}

// expectNothing asserts a segment left no trace but a counter.
func expectNothing(t *testing.T, out *Output, what string) {
	t.Helper()
	if len(out.Frames) != 0 || len(out.Events) != 0 {
		t.Errorf("%s: %d frames and events %+v, want nothing", what, len(out.Frames), out.Events)
	}
}

// TestAdversarialBlindClientRSTInEveryState: a RST claiming the client's
// tuple closes a flow only at exactly the sequence number the front-end
// expects next (RFC 5961 section 3). In the window but not exact, it gets
// a challenge ACK; outside it, nothing. Before, a spliced flow closed
// whatever the number (2^31 off worked) and a flow being read accepted a
// RST 40,000 bytes past rcv_nxt.
func TestAdversarialBlindClientRSTInEveryState(t *testing.T) {
	for _, st := range clientStates {
		t.Run(st.name, func(t *testing.T) {
			h, c, now := st.setup(t)
			f := onlyFlow(t, h)
			if f.state != st.state {
				t.Fatalf("set-up left the flow %v, want %v", f.state, st.state)
			}
			before := h.fe.Stats()
			now += ms
			expectNothing(t, h.input(c.seg(wire.TCPFlagRST, c.nxt+1<<31, 0, nil), now), "RST 2^31 off")
			expectNothing(t, h.input(c.seg(wire.TCPFlagRST|wire.TCPFlagACK, c.nxt-1<<30, c.rcvNxt, nil), now), "RST 2^30 behind")
			ch := expectChallengeToClient(t, h.input(c.seg(wire.TCPFlagRST, c.nxt+40000, 0, nil), now), c, c.nxt)
			if f.state != st.state || h.fe.byID[f.id] != f {
				t.Fatalf("flow %v after blind RSTs, want it %v", f.state, st.state)
			}
			after := h.fe.Stats()
			if d := after.Drops[dropRSTOutOfWindow] - before.Drops[dropRSTOutOfWindow]; d != 2 {
				t.Errorf("rst-out-of-window drops = %d, want 2", d)
			}
			if d := after.Drops[dropRSTInWindow] - before.Drops[dropRSTInWindow]; d != 1 {
				t.Errorf("rst-in-window drops = %d, want 1", d)
			}
			if n := after.ChallengeAcks - before.ChallengeAcks; n != 1 {
				t.Errorf("ChallengeAcks = %d, want 1", n)
			}
			// The real client, had it sent the RST, answers the challenge
			// with a RST at its ACK number: that one is taken.
			out := h.input(c.seg(wire.TCPFlagRST, ch.ack(), 0, nil), now+ms)
			if st.state == stLinger {
				expectNothing(t, out, "exact RST on a lingering flow")
				return
			}
			if ev := eventsOf(out, EvClosed); len(ev) != 1 || ev[0].Reason != CloseRST {
				t.Errorf("exact RST: events %+v, want EvClosed rst", out.Events)
			}
			if f.state != stLinger {
				t.Errorf("flow %v after the exact RST, want linger", f.state)
			}
			h.checkCounters()
		})
	}
}

// TestAdversarialSynOnAnEstablishedFlowGetsAChallengeAck: a SYN on the
// tuple of a live connection is answered with a challenge ACK (RFC 5961
// section 4) and changes nothing; before, it was dropped silently. A SYN
// on a closed, lingering tuple still starts a new connection
// (TestSynOnLingeringTupleStartsANewConnection).
func TestAdversarialSynOnAnEstablishedFlowGetsAChallengeAck(t *testing.T) {
	for _, st := range clientStates {
		if st.state == stLinger {
			continue
		}
		t.Run(st.name, func(t *testing.T) {
			h, c, now := st.setup(t)
			f := onlyFlow(t, h)
			for _, seq := range []wire.Seq{c.isn, c.nxt, c.nxt + 12345, c.nxt + 1<<31} {
				now += challengeGap // one challenge per flow per gap
				attacker := *c
				attacker.isn = seq
				expectChallengeToClient(t, h.input(attacker.syn(), now), c, c.nxt)
			}
			if f.state != st.state || h.fe.byID[f.id] != f {
				t.Fatalf("flow %v after SYNs, want it %v", f.state, st.state)
			}
			if d := h.fe.Stats().Drops[dropSynInFlow]; d != 4 {
				t.Errorf("syn-in-flow drops = %d, want 4", d)
			}
			h.checkCounters()
		})
	}
}

// TestAdversarialChallengeAcksAreRateLimited: challenge ACKs are an answer
// an attacker can provoke (RFC 5961 section 7). A flow answers at most
// once per challengeGap, however many segments provoke it; and the engine
// sends at most about ChallengeACKLimit a second across all flows, with a
// budget that varies from second to second so that counting them tells an
// attacker little about other flows. Before, no challenge ACK was sent
// and the first in-window RST closed the flow.
func TestAdversarialChallengeAcksAreRateLimited(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	h, c := sc.h, sc.c
	now := sc.now + s1
	challenges := 0
	const sent = 5000
	for i := 0; i < sent; i++ {
		challenges += len(h.input(c.seg(wire.TCPFlagRST, c.nxt+wire.Seq(1+i%1000), 0, nil), now+Time(i)*Time(time.Microsecond)).Frames)
	}
	if challenges != 1 {
		t.Errorf("%d challenge ACKs for %d in-window RSTs on one flow within %v, want 1", challenges, sent, Time(sent)*Time(time.Microsecond))
	}
	if f := onlyFlow(t, h); f.state != stSpliced {
		t.Fatalf("flow %v, want spliced", f.state)
	}
	expectChallengeToClient(t, h.input(c.seg(wire.TCPFlagRST, c.nxt+7, 0, nil), now+challengeGap), c, c.nxt)
	if st := h.fe.Stats(); st.ChallengeAcks != 2 || st.ChallengeAcksLimited != sent-1 {
		t.Errorf("ChallengeAcks %d, ChallengeAcksLimited %d", st.ChallengeAcks, st.ChallengeAcksLimited)
	}
	h.checkCounters()

	// Many flows, one in-window RST each, within a second.
	const limit, flows = 1000, 3000
	// From one client address, so past the per-source flow cap
	// (limits.go), which is not what this measures.
	h2 := newFE(t, func(c *FrontEndConfig) { c.MaxFlowsPerSource = -1 })
	var cs []*testClient
	for i := 0; i < flows; i++ {
		c := newClient(uint16(10000+i), wire.Seq(0x1000000*i), fullOffer(9))
		c.handshake(t, h2, t0)
		cs = append(cs, c)
	}
	challenges = 0
	for i, c := range cs {
		challenges += len(h2.input(c.seg(wire.TCPFlagRST, c.nxt+5, 0, nil), t0+s1+Time(i)*Time(100*time.Microsecond)).Frames)
	}
	if challenges < limit/2 || challenges >= limit*3/2 {
		t.Errorf("%d challenge ACKs for in-window RSTs on %d flows within a second, want about %d", challenges, flows, limit)
	}
	if st := h2.fe.Stats(); st.ChallengeAcks != uint64(challenges) || st.ChallengeAcksLimited != uint64(flows-challenges) {
		t.Errorf("ChallengeAcks %d, ChallengeAcksLimited %d; sent %d of %d", st.ChallengeAcks, st.ChallengeAcksLimited, challenges, flows)
	}
	// The next second brings a new budget.
	expectChallengeToClient(t, h2.input(cs[flows-1].seg(wire.TCPFlagRST, cs[flows-1].nxt+9, 0, nil), t0+2*s1), cs[flows-1], cs[flows-1].nxt)
	h2.checkCounters()
}

// TestAdversarialAckForDataNeverSentMovesNothing: an ACK for reply bytes
// that cannot have been sent (beyond every window the client offered), or
// far below what the client acknowledged, is dropped with a challenge ACK
// (RFC 5961 section 5) and moves no record: a later Abort still resets
// the client at its real rcv_nxt. Before, one such ACK moved the record
// and the Abort's RST missed.
func TestAdversarialAckForDataNeverSentMovesNothing(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	h, c := sc.h, sc.c
	real := c.isnF + 1 + 3000
	sc.now += ms
	sc.forward(t, c.seg(wire.TCPFlagACK, c.nxt, real, nil))
	for _, ack := range []wire.Seq{real + 0x10000000, real + 1<<31 - 1, real - 0x10000000} {
		sc.now += challengeGap
		ch := expectChallengeToClient(t, h.input(c.seg(wire.TCPFlagACK|wire.TCPFlagPSH, c.nxt, ack, []byte("body")), sc.now), c, c.nxt)
		// The spliced challenge must not pass for an ACK of the back-end:
		// its sequence number is just below the client's window.
		if ch.seq() != real-1 {
			t.Errorf("challenge seq %#x, want %#x", uint32(ch.seq()), uint32(real-1))
		}
	}
	if d := h.fe.Stats().Drops[dropAckOutOfRange]; d != 3 {
		t.Errorf("ack-out-of-range drops = %d, want 3", d)
	}
	out := h.call(func(out *Output) {
		if err := h.fe.Abort(sc.id, sc.now+ms, out); err != nil {
			t.Fatal(err)
		}
	})
	fs := copyFrames(out)
	if len(fs) != 2 {
		t.Fatalf("%d frames, want RSTs to both ends", len(fs))
	}
	expectTCP(t, fs[1], to(clientIP, c.port), flagsAre(wire.TCPFlagRST|wire.TCPFlagACK), seqIs(real))

	// Before the splice the front-end's own numbers are the range: an
	// ACK of bytes it never sent does not get its data taken.
	h2, c2 := acceptedClient(t, nil)
	out = h2.input(c2.seg(wire.TCPFlagACK|wire.TCPFlagPSH, c2.nxt, c2.rcvNxt+100, []byte(shortRequest)), t0+ms)
	expectChallengeToClient(t, out, c2, c2.nxt)
	if f := onlyFlow(t, h2); len(f.buf) != 0 || f.rcvNxt != c2.nxt {
		t.Errorf("took %d bytes with a bad ACK", len(f.buf))
	}
	h.checkCounters()
	h2.checkCounters()
}

// TestAdversarialInjectedDuplicateAcksAreNotAStorm: 10,000 identical ACKs
// with made-up numbers are dropped (and challenged, within the rate
// limit), not counted as the client's half of an ACK storm, so they do
// not reset both ends. Before, they tripped the detector.
func TestAdversarialInjectedDuplicateAcksAreNotAStorm(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	h, c := sc.h, sc.c
	forged := c.seg(wire.TCPFlagACK, c.nxt+0x40000000, c.isnF+0x50000000, nil)
	var resets, toBackend, challenges int
	for i := 0; i < defaultStormLimit+100; i++ {
		out := h.input(forged, sc.now+Time(i)*Time(10*time.Microsecond))
		for _, f := range copyFrames(out) {
			switch s := decodeTCP(t, f); {
			case s.tcp.RST:
				resets++
			case s.ip.DstIP.Equal(backendIP[:]):
				toBackend++
			default:
				expectTCP(t, f, to(clientIP, c.port), flagsAre(wire.TCPFlagACK), ackIs(c.nxt))
				challenges++
			}
		}
	}
	st := h.fe.Stats()
	if st.AckStorms != 0 || resets != 0 || toBackend != 0 {
		t.Errorf("%d made-up ACKs: %d storms, %d resets, %d frames to the back-end; want none",
			defaultStormLimit+100, st.AckStorms, resets, toBackend)
	}
	if challenges == 0 || uint64(challenges) != st.ChallengeAcks || st.Drops[dropOutOfWindow] != defaultStormLimit+100 {
		t.Errorf("%d challenge ACKs (counted %d), %d out-of-window drops", challenges, st.ChallengeAcks, st.Drops[dropOutOfWindow])
	}
	if f := onlyFlow(t, h); f.state != stSpliced {
		t.Fatalf("flow %v, want spliced", f.state)
	}
	h.checkCounters()
}

// backendFrame builds a segment from the back-end's address and port to
// a handoff port, from MAC src.
func backendFrame(src wire.MAC, hport uint16, flags uint8, seq, ack wire.Seq, opts []byte) []byte {
	return frame(wire.TCPFrame{
		SrcMAC: src, DstMAC: feMAC, Src: backendIP, Dst: handoffIP, SrcPort: webPort, DstPort: hport,
		Seq: seq, Ack: ack, Flags: flags, Window: 1000, Options: opts,
	})
}

// TestAdversarialSpoofedBackendRSTNeedsTheBackendsSequence: a RST on C2
// ends the flow only at the sequence number the back-end must use next
// (the client's rcv_nxt, in the back-end's numbers); in the window it
// gets a challenge ACK on C2, outside it nothing. Before, any sequence
// number closed the flow.
func TestAdversarialSpoofedBackendRSTNeedsTheBackendsSequence(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	h, c, srv := sc.h, sc.c, sc.srv
	hp := sc.sp.HandoffPort
	sc.now += ms
	expectNothing(t, h.input(backendFrame(backendMAC, hp, wire.TCPFlagRST, srv.nxt+1<<31, 0, nil), sc.now), "RST 2^31 off")
	expectNothing(t, h.input(backendFrame(backendMAC, hp, wire.TCPFlagRST|wire.TCPFlagACK, srv.nxt-1<<30, c.nxt, nil), sc.now), "RST far behind")
	out := h.input(backendFrame(backendMAC, hp, wire.TCPFlagRST, srv.nxt+2000, 0, nil), sc.now)
	ch := expectTCP(t, onlyFrame(t, out), ethTo(backendMAC), from(handoffIP, hp), to(backendIP, webPort),
		flagsAre(wire.TCPFlagACK), seqIs(c.nxt), ackIs(srv.nxt))
	if f := onlyFlow(t, h); f.state != stSpliced || len(out.Events) != 0 {
		t.Fatalf("flow %v, events %+v after spoofed RSTs", f.state, out.Events)
	}
	// The back-end, had it reset, answers the challenge at its ACK number.
	out = h.input(backendFrame(backendMAC, hp, wire.TCPFlagRST, ch.ack(), 0, nil), sc.now+ms)
	if ev := eventsOf(out, EvClosed); len(ev) != 1 || ev[0].Reason != CloseRST {
		t.Errorf("exact back-end RST: events %+v, want EvClosed rst", out.Events)
	}
	h.checkCounters()

	// While C2 is being set up: a RST that does not acknowledge our SYN
	// does not fail the handoff, nor does one off the back-end's ISN once
	// its SYN-ACK came.
	h2 := newFE(t, nil)
	c2 := newClient(40200, 0x20000000, fullOffer(9))
	syn := dispatch(t, h2, queuedRequest(t, h2, c2, shortRequest), t0+2*ms)
	hp2 := uint16(syn.tcp.SrcPort)
	expectNothing(t, h2.input(backendFrame(backendMAC, hp2, wire.TCPFlagRST, 0x1234, 0, nil), t0+3*ms), "RST without ACK in SYN-SENT")
	expectNothing(t, h2.input(backendFrame(backendMAC, hp2, wire.TCPFlagRST|wire.TCPFlagACK, 0, c2.isn+77, nil), t0+3*ms), "RST with a wrong ACK in SYN-SENT")
	srv2 := newServer(0x66000000, wire.SynOptions{MSS: 1460, TS: true, TSVal: 5})
	onlyEvent(t, h2.input(srv2.synAck(syn), t0+4*ms), EvSplice)
	expectNothing(t, h2.input(backendFrame(backendMAC, hp2, wire.TCPFlagRST, srv2.isn+1<<31, 0, nil), t0+5*ms), "RST 2^31 off in splice-wait")
	expectTCP(t, onlyFrame(t, h2.input(backendFrame(backendMAC, hp2, wire.TCPFlagRST, srv2.isn+500, 0, nil), t0+5*ms)),
		to(backendIP, webPort), flagsAre(wire.TCPFlagACK), seqIs(c2.isn+1), ackIs(srv2.isn+1))
	if f := onlyFlow(t, h2); f.state != stSpliceWait {
		t.Fatalf("flow %v after spoofed RSTs, want splice-wait", f.state)
	}
	h2.checkCounters()
}

// TestAdversarialHandoffPortsGiveNoOracle: segments to a handoff port
// nobody uses are dropped silently, exactly as segments to a live port
// that fail its checks: an attacker cannot tell which ports are live.
// Before, an unused port answered RST and a live one stayed silent.
func TestAdversarialHandoffPortsGiveNoOracle(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	h := sc.h
	live := sc.sp.HandoffPort
	unused := live + 1
	probes := []struct {
		flags    uint8
		seq, ack wire.Seq
	}{
		{wire.TCPFlagACK, 0x1000, 0x2000},
		{wire.TCPFlagSYN | wire.TCPFlagACK, 0x1000, 0x2000},
		{wire.TCPFlagFIN | wire.TCPFlagACK, 0x1000, 0x2000},
		{wire.TCPFlagRST, 0x1000, 0},
		{wire.TCPFlagSYN, 0x1000, 0},
	}
	before := h.fe.Stats()
	for _, port := range []uint16{unused, live} {
		for _, p := range probes {
			sc.now += ms
			expectNothing(t, h.input(backendFrame(backendMAC, port, p.flags, p.seq, p.ack, nil), sc.now),
				fmt.Sprintf("probe %#x to port %d", p.flags, port))
		}
	}
	after := h.fe.Stats()
	var drops uint64
	for i := range after.Drops {
		drops += after.Drops[i] - before.Drops[i]
	}
	if drops != uint64(2*len(probes)) {
		t.Errorf("%d drops counted for %d probes", drops, 2*len(probes))
	}
	if f := onlyFlow(t, h); f.state != stSpliced || f.srvFin {
		t.Errorf("flow %v (server FIN %v) after probes", f.state, f.srvFin)
	}
	h.checkCounters()
}

// TestAdversarialBackendSegmentsMustComeFromItsMAC: the back-end's own
// numbers from another MAC than the one Dispatch named are not the
// back-end's.
func TestAdversarialBackendSegmentsMustComeFromItsMAC(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	h, srv := sc.h, sc.srv
	sc.now += ms
	expectNothing(t, h.input(backendFrame(routerMAC, sc.sp.HandoffPort, wire.TCPFlagRST, srv.nxt, 0, nil), sc.now), "exact RST from another MAC")
	if d := h.fe.Stats().Drops[dropC2Spoofed]; d != 1 {
		t.Errorf("c2-spoofed drops = %d, want 1", d)
	}
	if f := onlyFlow(t, h); f.state != stSpliced {
		t.Fatalf("flow %v, want spliced", f.state)
	}
	h.checkCounters()
}

// synAckWithMSS is the back-end's SYN-ACK to syn announcing mss (0 too)
// and timestamps, so the request's segments carry a 12-byte option.
func synAckWithMSS(srv *testServer, syn *seen, mss uint16) []byte {
	srv.peerPort = uint16(syn.tcp.SrcPort)
	srv.rcvNxt = syn.seq() + 1
	v, _, _ := syn.ts()
	srv.ts, srv.peerTS = true, v
	opts := []byte{wire.OptMSS, 4, byte(mss >> 8), byte(mss), wire.OptNOP, wire.OptNOP, wire.OptTimestamps, 10}
	opts = binary.BigEndian.AppendUint32(opts, srv.tsVal)
	opts = binary.BigEndian.AppendUint32(opts, v)
	return srv.frame(wire.TCPFlagSYN|wire.TCPFlagACK, srv.isn, srv.rcvNxt, opts, nil)
}

// TestAdversarialBackendMSSNeitherPanicsNorLoops: a SYN-ACK on C2 with a
// tiny MSS made the front-end panic (MSS below the timestamp option's 12
// bytes: a negative segment size) or loop until out of memory (MSS 12:
// empty segments for ever). The MSS is clamped to a floor, and the request
// goes out whole in a bounded number of segments for every MSS.
func TestAdversarialBackendMSSNeitherPanicsNorLoops(t *testing.T) {
	// Every value around the floor and the option sizes, then a sample
	// (FuzzC2SynAckMSS covers the rest).
	var mssValues []uint16
	for m := 0; m <= 100; m++ {
		mssValues = append(mssValues, uint16(m))
	}
	for m := 101; m <= 600; m += 37 {
		mssValues = append(mssValues, uint16(m))
	}
	mssValues = append(mssValues, 1000, 1460, 8960, 65495, 65535)
	req := bigRequest(1500)
	for _, mss := range mssValues {
		h := newFE(t, nil)
		c := newClient(40300, 0x45000000, fullOffer(9))
		id := queuedRequest(t, h, c, req)
		syn := dispatch(t, h, id, t0+2*ms)
		srv := newServer(0x46000000, wire.SynOptions{})
		onlyEvent(t, h.input(synAckWithMSS(srv, syn, mss), t0+3*ms), EvSplice)
		out := h.call(func(out *Output) {
			if err := h.fe.SpliceAcked(id, t0+4*ms, out); err != nil {
				t.Fatal(err)
			}
		})
		eff := int(max(min(mss, c.offer.MSS), minMSS))
		maxSegs := len(req)/(eff-wire.TSOptionLen) + 1
		if len(out.Frames) > maxSegs {
			t.Fatalf("MSS %d: %d segments for a %d-byte request, want at most %d", mss, len(out.Frames), len(req), maxSegs)
		}
		var got []byte
		for _, f := range copyFrames(out) {
			s := expectTCP(t, f, to(backendIP, webPort))
			if len(s.payload()) == 0 || len(s.payload())+wire.TSOptionLen > eff {
				t.Fatalf("MSS %d: a segment of %d bytes", mss, len(s.payload()))
			}
			got = append(got, s.payload()...)
		}
		if string(got) != req {
			t.Fatalf("MSS %d: request on C2 differs (%d bytes of %d)", mss, len(got), len(req))
		}
	}
}
