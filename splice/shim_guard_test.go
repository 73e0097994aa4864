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
	if err := h.sh.AddSplice(&unseen, t0); err == nil {
		t.Errorf("AddSplice accepted a Splice for a connection the shim never saw")
	}

	ssh := shimSplice(isnF + 101)
	ssh.RequestID, ssh.BackendPort = 43, 22
	h.input(PortHost, kernelSynAck(&ssh, isnB, isnF), t0) // a real ssh handshake
	if err := h.sh.AddSplice(&ssh, t0); err == nil {
		t.Errorf("AddSplice accepted a Splice for port 22")
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
	if _, err := install(1, 30001, 0x51000, 0x52000); err == nil {
		t.Errorf("a RequestID in use for another tuple was accepted")
	}
	// Request 2 of the new front-end reuses the handoff port of the old
	// request 2: the kernel took a new handshake there, so the old
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
	if err := h.sh.AddSplice(&old, now+ms); err == nil {
		t.Errorf("a replayed Splice was accepted between the victim's handshake and its Splice")
	}
	if err := h.sh.AddSplice(&victim, now+ms); err != nil {
		t.Fatalf("the victim's Splice: %v", err)
	}
	if err := h.sh.AddSplice(&old, now+2*ms); err == nil {
		t.Errorf("a replayed Splice was accepted after the victim's")
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
	if err := h.sh.AddSplice(&old, now+20*s1); err == nil {
		t.Errorf("a replayed Splice was accepted with no handshake on its tuple")
	}
	if err := h.sh.AddSplice(&victim, now+20*s1); err == nil {
		t.Errorf("a replayed Splice was accepted for a handshake 20 s old")
	}
	if h.sh.Entries() != 0 {
		t.Errorf("Entries() = %d", h.sh.Entries())
	}
	h.checkCounters()
}

var _ = errors.Is
