package splice

// The shim against an attacker on the back-end's Ethernet segment: it may
// send any frame with any addresses, and replay any control datagram it
// captured. A Splice is taken only for a C2 handshake the shim has just
// seen the kernel answer, a RequestID names one entry at a time, and only
// segments the kernel would accept change what the shim knows.

import (
	"errors"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// kernelSynAck is the back-end kernel's SYN-ACK on sp's C2 tuple: its ISN
// isnB, answering the front-end's SYN whose ISN was isnF, with the options
// sp says were negotiated (window scale WScaleBackend when scaling was
// offered, timestamps when they were answered).
func kernelSynAck(sp *proto.Splice, isnB, isnF wire.Seq) []byte {
	o := wire.SynOptions{MSS: 1460, WScale: -1, SACKPermitted: sp.Flags&proto.SpliceSACK != 0}
	if sp.Flags&proto.SpliceWindowScale != 0 {
		o.WScale = int(sp.WScaleBackend)
	}
	if sp.Flags&proto.SpliceTimestamps != 0 {
		o.TS, o.TSVal, o.TSEcr = true, 0xffffff00, 7
	}
	return frame(wire.TCPFrame{
		SrcMAC: hostMAC, DstMAC: feMAC,
		Src: wire.IP4From(sp.BackendIP), Dst: wire.IP4From(sp.HandoffIP),
		SrcPort: sp.BackendPort, DstPort: sp.HandoffPort,
		Seq: isnB, Ack: isnF + 1, Flags: wire.TCPFlagSYN | wire.TCPFlagACK, Window: 64240,
		Options: synOpts(o),
	})
}

// c2FromWire is a segment on sp's C2 tuple arriving from the wire, as the
// front-end (or someone using its addresses) sends it.
func c2FromWire(sp *proto.Splice, flags uint8, seq, ack wire.Seq, payload []byte) []byte {
	return frame(wire.TCPFrame{
		SrcMAC: feMAC, DstMAC: backendMAC,
		Src: wire.IP4From(sp.HandoffIP), Dst: wire.IP4From(sp.BackendIP),
		SrcPort: sp.HandoffPort, DstPort: sp.BackendPort,
		Seq: seq, Ack: ack, Flags: flags, Window: 300, Payload: payload,
	})
}

// c2FromHost is the kernel's segment on sp's C2 tuple.
func c2FromHost(sp *proto.Splice, flags uint8, seq, ack wire.Seq, payload []byte) []byte {
	return frame(wire.TCPFrame{
		SrcMAC: hostMAC, DstMAC: feMAC,
		Src: wire.IP4From(sp.BackendIP), Dst: wire.IP4From(sp.HandoffIP),
		SrcPort: sp.BackendPort, DstPort: sp.HandoffPort,
		Seq: seq, Ack: ack, Flags: flags, Window: 1000, Payload: payload,
	})
}

// passedToHost asserts that out is the frame in, passed to the kernel
// unchanged: the kernel applies its own checks (and challenge ACKs).
func passedToHost(t *testing.T, out *Output, in []byte, what string) {
	t.Helper()
	if len(out.Frames) != 1 || out.Frames[0].Port != PortHost || string(out.Frames[0].Data) != string(in) {
		t.Errorf("%s: not passed to the kernel unchanged (%d frames)", what, len(out.Frames))
	}
}

// replyGoesTo feeds a server reply on sc's connection and asserts that it
// leaves translated towards the client, and nothing else leaves.
func replyGoesTo(t *testing.T, sc *shimConn, now Time, what string) {
	t.Helper()
	toClient, _ := framesOn(t, sc.h.input(PortHost, sc.srv.reply([]byte("HTTP/1.1 200 OK\r\n")), now))
	if len(toClient) != 1 {
		t.Fatalf("%s: the reply left as %d frames towards the client", what, len(toClient))
	}
	expectTCP(t, toClient[0], from(vipA, webPort), to(clientIP, testRequestPort), ethTo(routerMAC))
}

// TestAdversarialWireResetNeedsTheExactSequence: a RST claiming to come
// from the front-end's handoff address ends the splice only at the exact
// sequence number the kernel expects (RFC 5961 3.2). Any other RST still
// goes to the kernel, which challenges it, and the shim keeps translating:
// before, a blind RST made the shim forget the splice after the linger and
// the next reply left in the back-end's own numbers.
func TestAdversarialWireResetNeedsTheExactSequence(t *testing.T) {
	linger := 2 * s1
	sc := newShimConn(t, ShimConfig{Linger: time.Duration(linger)}, 0x1000, 0x2000, nil)
	h, srv := sc.h, sc.srv
	now := t0 + 100*ms
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, make([]byte, 100)), now)
	srv.rcvNxt = sc.cliSeq
	h.input(PortHost, srv.seg(wire.TCPFlagACK, srv.nxt, srv.rcvNxt, nil), now) // the kernel acknowledges the request
	rcvNxt := sc.cliSeq
	for _, off := range []uint32{1 << 31, 0x40000000, 1, 99, 1000, 0xffffffff, 0xffff0000} {
		rst := c2FromWire(&sc.sp, wire.TCPFlagRST, rcvNxt+wire.Seq(off), 0, nil)
		passedToHost(t, h.input(PortWire, rst, now), rst, "blind RST")
		rsta := c2FromWire(&sc.sp, wire.TCPFlagRST|wire.TCPFlagACK, rcvNxt+wire.Seq(off), srv.nxt, nil)
		passedToHost(t, h.input(PortWire, rsta, now), rsta, "blind RST+ACK")
	}
	now += 3 * linger
	h.tick(now)
	if h.sh.Entries() != 1 {
		t.Fatalf("Entries() = %d after blind RSTs and the linger", h.sh.Entries())
	}
	replyGoesTo(t, sc, now, "after blind RSTs")
	if st := h.sh.Stats(); st.WireRSTRefused != 14 {
		t.Errorf("WireRSTRefused = %d, want 14", st.WireRSTRefused)
	}

	// The client's own RST lands at the kernel's rcv_nxt: that one ends
	// the splice, after the linger for stragglers.
	rst := c2FromWire(&sc.sp, wire.TCPFlagRST, rcvNxt, 0, nil)
	passedToHost(t, h.input(PortWire, rst, now), rst, "exact RST")
	h.tick(now + linger)
	if h.sh.Entries() != 0 {
		t.Errorf("Entries() = %d after an exact RST and the linger", h.sh.Entries())
	}
	h.checkCounters()
}

// TestAdversarialWireSegmentsOutsideTheWindowChangeNothing: data, FINs and
// ACKs on a spliced tuple that the kernel would not accept (outside its
// receive window, or acknowledging reply bytes never sent) pass to the
// kernel but neither start a request's service time, nor close the
// connection, nor end a response.
func TestAdversarialWireSegmentsOutsideTheWindowChangeNothing(t *testing.T) {
	linger := 2 * s1
	sc := newShimConn(t, ShimConfig{Linger: time.Duration(linger), ResponseQuiet: 20 * time.Millisecond}, 0x1000, 0x2000, nil)
	h, srv := sc.h, sc.srv
	now := t0 + 100*ms
	far := sc.cliSeq + 1<<31

	// Request bytes far outside the window: no request in service.
	junk := c2FromWire(&sc.sp, wire.TCPFlagACK|wire.TCPFlagPSH, far, srv.nxt, []byte("GET / HTTP/1.1\r\n\r\n"))
	passedToHost(t, h.input(PortWire, junk, now), junk, "out-of-window data")
	if h.sh.Active() != 0 {
		t.Errorf("Active() = %d after out-of-window data", h.sh.Active())
	}

	// A real request and a response without a length in its head.
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, make([]byte, 100)), now)
	srv.rcvNxt = sc.cliSeq
	h.input(PortHost, srv.reply([]byte("HTTP/1.1 200 OK\r\n\r\nbody")), now)
	if h.sh.Active() != 1 {
		t.Fatalf("Active() = %d after the request", h.sh.Active())
	}
	// An ACK for reply bytes the server never sent does not drain the
	// response, whatever its sequence number.
	for _, ack := range []wire.Seq{srv.nxt + 1, srv.nxt + 1<<20, srv.nxt + 1<<31} {
		h.input(PortWire, c2FromWire(&sc.sp, wire.TCPFlagACK, sc.cliSeq, ack, nil), now)
	}
	if out := h.tick(now + s1); len(out.Events) != 0 || h.sh.Active() != 1 {
		t.Errorf("forged ACKs ended the response: %+v, Active %d", out.Events, h.sh.Active())
	}
	// A FIN outside the window and the server's FIN: not both FINs.
	h.input(PortWire, c2FromWire(&sc.sp, wire.TCPFlagACK|wire.TCPFlagFIN, far, srv.nxt, nil), now)
	h.input(PortWire, c2FromWire(&sc.sp, wire.TCPFlagSYN, far, 0, nil), now)
	h.input(PortHost, srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, srv.nxt, srv.rcvNxt, nil), now)
	srv.nxt++
	h.tick(now + 3*linger)
	if h.sh.Entries() != 1 {
		t.Fatalf("a forged FIN closed the splice: Entries() = %d", h.sh.Entries())
	}
	if st := h.sh.Stats(); st.WireOutOfWindow != 6 {
		t.Errorf("WireOutOfWindow = %d, want 6", st.WireOutOfWindow)
	}
	h.checkCounters()
}

// TestAdversarialSpliceForAConnectionTheShimNeverSawIsRefused: a Splice
// must name a C2 connection whose handshake the shim has just seen the
// kernel answer, on a port the back-end serves. Before, any Splice for
// this host was installed, port 22 included, and the shim then rewrote
// that connection's traffic towards whoever the Splice named.
func TestAdversarialSpliceForAConnectionTheShimNeverSawIsRefused(t *testing.T) {
	h := newShim(t, ShimConfig{})
	const isnB, isnF = 0x1000, 0x2000

	unseen := shimSplice(isnF + 101)
	if err := h.sh.AddSplice(&unseen, t0); !errors.Is(err, ErrSpliceNoHandshake) {
		t.Errorf("AddSplice for a connection the shim never saw: %v, want ErrSpliceNoHandshake", err)
	}

	ssh := shimSplice(isnF + 101)
	ssh.RequestID, ssh.BackendPort = 43, 22
	h.input(PortHost, kernelSynAck(&ssh, isnB, isnF), t0) // a real ssh handshake
	if err := h.sh.AddSplice(&ssh, t0); !errors.Is(err, ErrSpliceNotWebPort) {
		t.Errorf("AddSplice for port 22: %v, want ErrSpliceNotWebPort", err)
	}
	if h.sh.Entries() != 0 {
		t.Fatalf("Entries() = %d after refused Splices", h.sh.Entries())
	}

	// The same Splice once the kernel answered its handshake is taken.
	h.input(PortHost, kernelSynAck(&unseen, isnB, isnF), t0+ms)
	if err := h.sh.AddSplice(&unseen, t0+2*ms); err != nil {
		t.Errorf("AddSplice after the handshake: %v", err)
	}
	if h.sh.Entries() != 1 {
		t.Errorf("Entries() = %d, want 1", h.sh.Entries())
	}
	st := h.sh.Stats()
	if st.SplicesRefused != 2 || st.RefusedNoHandshake != 1 || st.RefusedNotWebPort != 1 || st.Handshakes != 1 {
		t.Errorf("stats %+v", st)
	}
	h.checkCounters()
}

// TestAdversarialRequestIDReuseAfterRestartLeaksNothing: a restarted
// front-end numbers its requests from 1 again. A Splice whose RequestID
// names a live entry for another tuple is refused; one for a tuple whose
// old entry is still there (the kernel accepted a new handshake on it)
// replaces that entry and frees its slot. Before, the second Splice took
// over the RequestID and the first entry was never found by its timers
// again: it stayed, with its slot, forever.
func TestAdversarialRequestIDReuseAfterRestartLeaksNothing(t *testing.T) {
	h := newShim(t, ShimConfig{Linger: time.Second, IdleTimeout: time.Minute})
	now := t0
	install := func(id uint64, hport uint16, isnB, isnF wire.Seq) (*proto.Splice, error) {
		sp := shimSplice(isnF + 101)
		sp.RequestID, sp.HandoffPort = id, hport
		h.input(PortHost, kernelSynAck(&sp, isnB, isnF), now)
		return &sp, h.sh.AddSplice(&sp, now)
	}
	// The first front-end: requests 1, 2 and 3, each in service.
	for id := uint64(1); id <= 3; id++ {
		isnF := wire.Seq(0x10000 * id)
		sp, err := install(id, uint16(20000+id), wire.Seq(0x7000*id), isnF)
		if err != nil {
			t.Fatal(err)
		}
		h.input(PortWire, c2FromWire(sp, wire.TCPFlagACK|wire.TCPFlagPSH, isnF+1, wire.Seq(0x7000*id)+1, make([]byte, 100)), now)
	}
	if h.sh.Active() != 3 {
		t.Fatalf("Active() = %d, want 3", h.sh.Active())
	}

	// It restarts and hands off request 1 again, on another port.
	now += 10 * s1
	if _, err := install(1, 30001, 0x51000, 0x52000); !errors.Is(err, ErrSpliceRequestInUse) {
		t.Errorf("a RequestID in use for another tuple: %v, want ErrSpliceRequestInUse", err)
	}
	// Request 2 of the new front-end reuses the handoff port of the old
	// request 2, same RequestID, same tuple, new numbers: not a resent
	// Splice. The kernel took a new handshake there, so the old
	// connection is gone, and so are its entry and its slot.
	if _, err := install(2, 20002, 0x61000, 0x62000); err != nil {
		t.Errorf("a new handshake on a tuple with an old entry: %v", err)
	}
	// And request 9 reuses the port of the old request 3.
	if _, err := install(9, 20003, 0x71000, 0x72000); err != nil {
		t.Errorf("a new handshake on a tuple with an old entry: %v", err)
	}
	if h.sh.Active() != 1 || h.sh.Entries() != 3 {
		t.Errorf("Active() = %d, Entries() = %d, want 1 and 3", h.sh.Active(), h.sh.Entries())
	}
	if st := h.sh.Stats(); st.RefusedRequestInUse != 1 || st.SplicesReplaced != 2 {
		t.Errorf("RefusedRequestInUse %d, SplicesReplaced %d, want 1 and 2", st.RefusedRequestInUse, st.SplicesReplaced)
	}
	h.checkCounters()

	// Every entry goes when its timers run; no slot is left.
	for i := 0; h.sh.NextDeadline() != Never && i < 100; i++ {
		now = max(now, h.sh.NextDeadline())
		h.tick(now)
	}
	if h.sh.Entries() != 0 || h.sh.Active() != 0 {
		t.Errorf("after every timer ran: Entries() = %d, Active() = %d", h.sh.Entries(), h.sh.Active())
	}
	h.checkCounters()
}

// TestAdversarialReplayedSpliceForAReusedHandoffPortIsRefused: an old
// Splice, captured and replayed when the front-end reuses its handoff port
// for another client, must not take over the new connection, neither
// before the new Splice arrives nor after it, nor once the handshake it
// would need is old. Before, the replay replaced the victim's entry and
// the victim's response went to the attacker.
func TestAdversarialReplayedSpliceForAReusedHandoffPortIsRefused(t *testing.T) {
	h := newShim(t, ShimConfig{Linger: time.Second})
	attacker := ip4("198.19.66.66")
	old := shimSplice(0x5000 + 101)
	old.RequestID, old.ClientIP = 7, attacker.Addr()
	h.input(PortHost, kernelSynAck(&old, 0x1000, 0x5000), t0)
	if err := h.sh.AddSplice(&old, t0); err != nil {
		t.Fatal(err)
	}
	// The attacker's connection ends; its entry lingers out.
	h.input(PortHost, c2FromHost(&old, wire.TCPFlagRST, 0x1001, 0, nil), t0+s1)
	h.tick(t0 + 10*s1)
	if h.sh.Entries() != 0 {
		t.Fatalf("Entries() = %d after the linger", h.sh.Entries())
	}

	// A minute later the front-end reuses the handoff port for a victim.
	now := t0 + 60*s1
	victim := shimSplice(0x90000000 + 101)
	victim.RequestID = 8
	const isnB = 0x70000000
	h.input(PortHost, kernelSynAck(&victim, isnB, 0x90000000), now)
	if err := h.sh.AddSplice(&old, now+ms); !errors.Is(err, ErrSpliceInconsistent) {
		t.Errorf("a replayed Splice between the victim's handshake and its Splice: %v, want ErrSpliceInconsistent", err)
	}
	if err := h.sh.AddSplice(&victim, now+ms); err != nil {
		t.Fatalf("the victim's Splice: %v", err)
	}
	if err := h.sh.AddSplice(&old, now+2*ms); !errors.Is(err, ErrSpliceNoHandshake) {
		t.Errorf("a replayed Splice after the victim's: %v, want ErrSpliceNoHandshake", err)
	}
	reply := c2FromHost(&victim, wire.TCPFlagACK|wire.TCPFlagPSH, isnB+1, 0x90000000+101, []byte("HTTP/1.1 200 OK\r\nSet-Cookie: s=1\r\n\r\n"))
	toClient, _ := framesOn(t, h.input(PortHost, reply, now+3*ms))
	if len(toClient) != 1 {
		t.Fatalf("the victim's reply left as %d frames", len(toClient))
	}
	expectTCP(t, toClient[0], to(clientIP, testRequestPort))

	// The victim's connection ends too; the replay long after, with no
	// new handshake on the tuple, finds nothing to take.
	h.input(PortHost, c2FromHost(&victim, wire.TCPFlagRST, isnB+1+37, 0, nil), now+s1)
	h.tick(now + 10*s1)
	if err := h.sh.AddSplice(&old, now+20*s1); !errors.Is(err, ErrSpliceNoHandshake) {
		t.Errorf("a replayed Splice with no handshake on its tuple: %v, want ErrSpliceNoHandshake", err)
	}
	// A handshake nobody sent a Splice for is good for HandshakeWindow.
	victim.RequestID = 9
	h.input(PortHost, kernelSynAck(&victim, isnB, 0x90000000), now+30*s1)
	if err := h.sh.AddSplice(&victim, now+36*s1); !errors.Is(err, ErrSpliceStaleHandshake) {
		t.Errorf("a Splice 6 s after its handshake: %v, want ErrSpliceStaleHandshake", err)
	}
	if h.sh.Entries() != 0 {
		t.Errorf("Entries() = %d", h.sh.Entries())
	}
	h.checkCounters()
}

// guardSplice is request id's Splice for a C2 from handoff port hport,
// whose front-end ISN was isnF, handing over a 100-byte request.
func guardSplice(id uint64, hport uint16, isnF wire.Seq) proto.Splice {
	sp := shimSplice(isnF + 101)
	sp.RequestID, sp.HandoffPort = id, hport
	return sp
}

func TestShimHandshakeTableEvictsTheOldestAndForgetsOldOnes(t *testing.T) {
	h := newShim(t, ShimConfig{MaxHandshakes: 4, HandshakeWindow: 2 * time.Second})
	var sps []proto.Splice
	for i := range 6 {
		sp := guardSplice(uint64(i+1), uint16(21000+i), wire.Seq(0x1000*(i+1)))
		h.input(PortHost, kernelSynAck(&sp, 0x500, wire.Seq(0x1000*(i+1))), t0+Time(i)*ms)
		sps = append(sps, sp)
	}
	if st := h.sh.Stats(); st.Handshakes != 6 || st.HandshakesEvicted != 2 {
		t.Errorf("Handshakes %d, HandshakesEvicted %d, want 6 and 2", st.Handshakes, st.HandshakesEvicted)
	}
	if len(h.sh.handshakes.byTuple) != 4 {
		t.Errorf("%d handshakes held, want 4", len(h.sh.handshakes.byTuple))
	}
	for i := range sps {
		err := h.sh.AddSplice(&sps[i], t0+10*ms)
		if wantErr := i < 2; (err != nil) != wantErr {
			t.Errorf("Splice %d: %v, want refused %v", i, err, wantErr)
		}
	}
	// Consumed records leave dead slots, and old ones go without counting
	// as evicted: the table drains as the next handshakes come.
	later := t0 + 5*s1
	for i := range 4 {
		sp := guardSplice(uint64(i+20), uint16(22000+i), 0x9000)
		h.input(PortHost, kernelSynAck(&sp, 0x500, 0x9000), later)
	}
	if st := h.sh.Stats(); st.HandshakesEvicted != 2 || len(h.sh.handshakes.byTuple) != 4 {
		t.Errorf("HandshakesEvicted %d, %d held, want 2 and 4", st.HandshakesEvicted, len(h.sh.handshakes.byTuple))
	}
	// A retransmitted SYN-ACK refreshes its record; it does not take a
	// second one.
	sp := guardSplice(30, 22000, 0x9000)
	h.input(PortHost, kernelSynAck(&sp, 0x500, 0x9000), later+s1)
	if len(h.sh.handshakes.byTuple) != 4 {
		t.Errorf("%d handshakes held after a retransmitted SYN-ACK", len(h.sh.handshakes.byTuple))
	}
	if err := h.sh.AddSplice(&sp, later+s1+2*s1); err != nil {
		t.Errorf("Splice within the window of a refreshed handshake: %v", err)
	}
	// Frames that are not the kernel's SYN-ACK on a web port record nothing.
	before := h.sh.Stats().Handshakes
	other := guardSplice(40, 23000, 0x9000)
	other.BackendPort = 8080
	h.input(PortHost, kernelSynAck(&other, 0x500, 0x9000), later)
	syn := c2FromWire(&sp, wire.TCPFlagSYN, 0x9000, 0, nil)
	h.input(PortWire, syn, later)
	if h.sh.Stats().Handshakes != before {
		t.Errorf("a SYN-ACK from another port or a SYN from the wire was recorded")
	}
	h.checkCounters()
}

func TestAddSpliceRefusesNumbersThatContradictTheHandshake(t *testing.T) {
	const isnB = 0x1000
	var isnF wire.Seq = 0xfffffff0 // the request end wraps
	cases := []struct {
		name string
		mod  func(*proto.Splice)
	}{
		{"request-end-behind-the-isn", func(sp *proto.Splice) { sp.RequestEnd = uint32(isnF) }},
		{"request-end-far-ahead", func(sp *proto.Splice) { sp.RequestEnd = uint32(isnF + 1 + 2<<20) }},
		{"timestamps-not-answered", func(sp *proto.Splice) { sp.Flags |= proto.SpliceTimestamps }},
		{"other-window-scale", func(sp *proto.Splice) { sp.WScaleBackend = 3 }},
	}
	for _, tc := range cases {
		h := newShim(t, ShimConfig{MaxRequestAhead: 1 << 20})
		good := guardSplice(1, 20001, isnF)
		good.RequestEnd = uint32(isnF + 1 + 1<<20) // the largest request taken
		syn := good
		syn.Flags &^= proto.SpliceTimestamps // the kernel answers no timestamps
		good.Flags &^= proto.SpliceTimestamps
		h.input(PortHost, kernelSynAck(&syn, isnB, isnF), t0)
		bad := good
		tc.mod(&bad)
		if err := h.sh.AddSplice(&bad, t0); !errors.Is(err, ErrSpliceInconsistent) {
			t.Errorf("%s: %v, want ErrSpliceInconsistent", tc.name, err)
		}
		// A refused Splice leaves the handshake for the real one.
		if err := h.sh.AddSplice(&good, t0+ms); err != nil {
			t.Errorf("%s: the consistent Splice after it: %v", tc.name, err)
		}
		if st := h.sh.Stats(); st.RefusedInconsistent != 1 || st.SplicesRefused != 1 || st.Splices != 1 {
			t.Errorf("%s: stats %+v", tc.name, st)
		}
	}
}

func TestShimSpliceTableIsBounded(t *testing.T) {
	h := newShim(t, ShimConfig{MaxEntries: 2})
	install := func(id uint64, hport uint16, isnF wire.Seq) error {
		sp := guardSplice(id, hport, isnF)
		h.input(PortHost, kernelSynAck(&sp, 0x500, isnF), t0)
		return h.sh.AddSplice(&sp, t0)
	}
	for id := range uint64(2) {
		if err := install(id+1, uint16(20001+id), 0x1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := install(3, 20003, 0x1000); !errors.Is(err, ErrShimFull) {
		t.Errorf("a third Splice with MaxEntries 2: %v, want ErrShimFull", err)
	}
	// A new connection on a held tuple takes its entry's place.
	if err := install(4, 20001, 0x8000); err != nil {
		t.Errorf("a Splice replacing an entry in a full table: %v", err)
	}
	if st := h.sh.Stats(); h.sh.Entries() != 2 || st.RefusedFull != 1 || st.SplicesReplaced != 1 {
		t.Errorf("Entries() = %d, stats %+v", h.sh.Entries(), st)
	}
	h.checkCounters()
}

func TestShimEntryEndsAtItsLifetime(t *testing.T) {
	sc := newShimConn(t, ShimConfig{MaxLifetime: time.Minute, IdleTimeout: 15 * time.Minute}, 0x1000, 0x2000, nil)
	h, srv := sc.h, sc.srv
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, make([]byte, 100)), t0)
	srv.rcvNxt = sc.cliSeq
	now := t0
	for range 5 { // a busy connection: a packet every 10 s
		now += 10 * s1
		h.input(PortHost, srv.reply([]byte("x")), now)
		h.tick(now)
	}
	if h.sh.Entries() != 1 {
		t.Fatalf("entry gone before its lifetime")
	}
	ev := onlyEvent(t, h.tick(t0+60*s1), EvResponseDone)
	if ev.RequestID != 42 || h.sh.Entries() != 0 || h.sh.Active() != 0 {
		t.Errorf("event %+v, Entries() %d, Active() %d", ev, h.sh.Entries(), h.sh.Active())
	}
	if st := h.sh.Stats(); st.ExpiredLifetime != 1 || st.Expired != 1 {
		t.Errorf("ExpiredLifetime %d, Expired %d", st.ExpiredLifetime, st.Expired)
	}
	h.checkCounters()
}

// TestShimKernelIsTheAuthorityOnResets: a RST from the wire at the
// expected sequence ends the splice, unless the kernel goes on sending
// on the connection (it did not take the RST); the kernel's own RST ends
// it whatever comes after.
func TestShimKernelIsTheAuthorityOnResets(t *testing.T) {
	linger := 2 * s1
	sc := newShimConn(t, ShimConfig{Linger: time.Duration(linger)}, 0x1000, 0x2000, nil)
	h, srv := sc.h, sc.srv
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, make([]byte, 100)), t0)
	// A RST at the end of the request seen, which the kernel has not
	// acknowledged yet; the kernel answers with a challenge ACK anyway.
	h.input(PortWire, c2FromWire(&sc.sp, wire.TCPFlagRST, sc.cliSeq, 0, nil), t0)
	replyGoesTo(t, sc, t0+ms, "the kernel's next segment")
	h.tick(t0 + 3*linger)
	if h.sh.Entries() != 1 || h.sh.Stats().ResetsCancelled != 1 {
		t.Fatalf("Entries() = %d, ResetsCancelled %d", h.sh.Entries(), h.sh.Stats().ResetsCancelled)
	}
	// The kernel's RST is final: nothing after it brings the splice back.
	now := t0 + 3*linger
	h.input(PortHost, srv.seg(wire.TCPFlagRST|wire.TCPFlagACK, srv.nxt, srv.rcvNxt, nil), now)
	h.input(PortWire, c2FromWire(&sc.sp, wire.TCPFlagRST, sc.cliSeq, 0, nil), now)
	h.tick(now + linger)
	if h.sh.Entries() != 0 {
		t.Errorf("Entries() = %d after the kernel's RST and the linger", h.sh.Entries())
	}
	h.checkCounters()
}

func TestResentSpliceKeepsTheEntry(t *testing.T) {
	sc := newShimConn(t, ShimConfig{}, 0x1000, 0x2000, nil)
	h := sc.h
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, sc.srv.nxt, make([]byte, 100)), t0)
	// The ack was lost and the front-end sends the Splice again; its
	// handshake is consumed, and the Splice is still a no-op.
	if err := h.sh.AddSplice(&sc.sp, t0+s1); err != nil {
		t.Fatalf("resent Splice: %v", err)
	}
	if h.sh.Active() != 1 || h.sh.Entries() != 1 || h.sh.Stats().Splices != 1 {
		t.Errorf("Active() %d, Entries() %d, Splices %d", h.sh.Active(), h.sh.Entries(), h.sh.Stats().Splices)
	}
}

// TestShimGuardAllocatesNothing: recording the kernel's SYN-ACKs (with the
// table turning over) and judging wire segments on a spliced tuple are on
// the packet path.
func TestShimGuardAllocatesNothing(t *testing.T) {
	const n = 512
	sc := newShimConn(t, ShimConfig{MaxHandshakes: 64}, 0x1000, 0x2000, nil)
	synAcks := make([][]byte, n)
	for i := range synAcks {
		sp := guardSplice(uint64(100+i), uint16(30000+i), wire.Seq(i))
		synAcks[i] = kernelSynAck(&sp, 0x500, wire.Seq(i))
	}
	frame := make([]byte, 2048)
	var out Output
	now := t0
	feed := func(port Port, f []byte) {
		copy(frame, f)
		out.Reset()
		now += ms
		sc.h.sh.Input(port, frame[:len(f)], now, &out)
	}
	for _, f := range synAcks { // the map reaches its working size
		feed(PortHost, f)
	}
	before := sc.h.sh.Stats()
	i := 0
	allocs := testing.AllocsPerRun(200, func() {
		feed(PortHost, synAcks[i%n])
		i++
	})
	if allocs != 0 {
		t.Errorf("recording a handshake: %v allocations", allocs)
	}
	if got := sc.h.sh.Stats().Handshakes - before.Handshakes; got != 201 {
		t.Errorf("%d handshakes recorded, want 201: the path measured is not recording", got)
	}

	good := sc.fromFrontEnd(wire.TCPFlagACK, sc.srv.nxt, nil)
	bad := c2FromWire(&sc.sp, wire.TCPFlagRST, sc.cliSeq+1<<30, 0, nil)
	for _, f := range [][]byte{good, bad} {
		before = sc.h.sh.Stats()
		allocs = testing.AllocsPerRun(200, func() { feed(PortWire, f) })
		after := sc.h.sh.Stats()
		if allocs != 0 {
			t.Errorf("a wire segment on a spliced tuple: %v allocations", allocs)
		}
		if after.WireToHost-before.WireToHost != 201 {
			t.Errorf("%d frames passed, want 201", after.WireToHost-before.WireToHost)
		}
	}
	if st := sc.h.sh.Stats(); st.WireRSTRefused != 201 || sc.h.sh.Entries() != 1 {
		t.Errorf("WireRSTRefused %d, Entries() %d: the refusing path was not measured", st.WireRSTRefused, sc.h.sh.Entries())
	}
}

// FuzzShimGuard drives one shim with a program of kernel SYN-ACKs,
// Splices, segments from either side on a few C2 tuples and the passing of
// time. Whatever the order, the tables stay within their bounds and
// consistent (one entry per RequestID, each found by its tuple), nothing
// is counted twice, every frame out parses with exact checksums, and once
// every timer ran nothing is left: no entry, no slot.
func FuzzShimGuard(f *testing.F) {
	// A handshake and its Splice, the request, a reply, a blind RST, a
	// restart's reused RequestID, a long wait.
	f.Add([]byte{0, 0, 1, 2, 0, 0, 1, 0, 0, 2, 0, 0, 2, 0, 0x18, 0, 0, 40, 3, 0, 0x18, 0, 0, 20,
		2, 0, 0x04, 0x80, 0, 0, 0, 1, 3, 4, 0, 0, 1, 1, 0, 2, 0, 0, 4, 0, 0xff, 0, 0, 0})
	f.Add([]byte{0, 3, 9, 9, 1, 0, 1, 3, 0, 0, 0, 0, 2, 3, 0x04, 0, 0, 0, 3, 3, 0x04, 0, 0, 0, 4, 0, 200, 0, 0, 0})
	// A Splice sent with the SYN, before its SYN-ACK and after one.
	f.Add([]byte{1, 1, 0, 0, 4, 0, 0, 1, 7, 1, 0, 9, 1, 2, 0, 0, 4, 0, 0, 2, 7, 2, 0, 9, 2, 2, 0, 0x18, 0, 40, 3, 1, 0x18, 0, 0, 20, 4, 0, 20, 0, 0, 0})
	f.Fuzz(func(t *testing.T, prog []byte) {
		h := newShim(t, ShimConfig{MaxHandshakes: 3, MaxEntries: 3, Linger: time.Second,
			IdleTimeout: time.Minute, MaxLifetime: 10 * time.Minute, HandshakeWindow: time.Second})
		type conn struct{ isnB, isnF wire.Seq }
		var conns [4]conn
		now := t0
		for len(prog) >= 6 {
			op, i, a, b, c, d := prog[0]%6, int(prog[1]%4), prog[2], prog[3], prog[4], prog[5]
			prog = prog[6:]
			sp := guardSplice(uint64(b%4+1), uint16(20001+i), conns[i].isnF)
			if c&1 != 0 {
				sp.Flags &^= proto.SpliceTimestamps
			}
			if c&2 != 0 {
				sp.BackendPort = 22
			}
			var out *Output
			switch op {
			case 0: // the kernel's SYN-ACK: a new connection on tuple i
				conns[i] = conn{wire.Seq(a) << 24, wire.Seq(b)<<24 | wire.Seq(d)}
				sp := guardSplice(1, uint16(20001+i), conns[i].isnF)
				out = h.input(PortHost, kernelSynAck(&sp, conns[i].isnB, conns[i].isnF), now)
			case 1: // a Splice, maybe for the last handshake on tuple i
				if d&1 != 0 {
					sp.RequestEnd += uint32(a) << 16
				}
				if c&4 != 0 { // sent with the SYN (shim_atsyn.go), before or after its SYN-ACK
					sp = atSYNSplice(sp, conns[i].isnB, 0xffffff00)
				}
				h.sh.AddSplice(&sp, now)
			case 2: // a segment from the wire, near the stream or not
				seq := conns[i].isnF + 1 + wire.Seq(int8(b))*100
				if d&1 != 0 {
					seq += wire.Seq(d) << 24
				}
				out = h.input(PortWire, c2FromWire(&sp, a&0x3f, seq, conns[i].isnB+1+wire.Seq(int8(c)), make([]byte, d%64)), now)
			case 3: // the kernel's segment
				flags := a & 0x3f &^ wire.TCPFlagSYN
				out = h.input(PortHost, c2FromHost(&sp, flags, conns[i].isnB+1+wire.Seq(b)*50, conns[i].isnF+1+wire.Seq(c)*50, make([]byte, d%64)), now)
			case 4:
				now += Time(a) * 100 * ms
				out = h.tick(now)
			case 5:
				now += Time(a) * ms
			}
			if out != nil {
				checkEmitted(t, out, true)
			}
			checkShimTables(t, h)
		}
		drainShim(t, h, now)
	})
}

// checkShimTables asserts the shim's tables are within their bounds and
// agree with each other.
func checkShimTables(t *testing.T, h *shimHarness) {
	t.Helper()
	h.checkCounters()
	sh := h.sh
	if len(sh.entries) > sh.cfg.MaxEntries || len(sh.handshakes.byTuple) > sh.cfg.MaxHandshakes ||
		sh.handshakes.n > len(sh.handshakes.ring) || len(sh.atSYN.byTuple) > sh.cfg.MaxHandshakes || sh.atSYN.n > len(sh.atSYN.ring) {
		t.Fatalf("%d entries, %d handshakes in %d slots: over the bounds", len(sh.entries), len(sh.handshakes.byTuple), sh.handshakes.n)
	}
	inService := 0
	for id, ent := range sh.byReq {
		if ent.requestID != id || sh.entries[ent.key] != ent {
			t.Fatalf("entry of request %d is not the one its tuple finds", id)
		}
		if ent.inService {
			inService++
		}
	}
	if inService != sh.active {
		t.Fatalf("%d entries in service, Active() = %d", inService, sh.active)
	}
}
