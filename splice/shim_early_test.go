package splice

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// Early requests (shim_early.go): the front-end may send a safe request
// with its Splice, so the request, or even a reply, can cross the shim
// before the Splice is installed.

// earlyConn is a C2 whose SYN-ACK crossed the shim at t0 and whose
// Splice has not come yet; install adds it.
func earlyConn(t *testing.T, cfg ShimConfig) *shimConn {
	t.Helper()
	const isnB, isnC = 0x1000, 0x2000
	h := newShim(t, cfg)
	srv := newServer(isnB, wire.SynOptions{})
	srv.peerPort, srv.ts, srv.tsVal, srv.peerTS = shimHandoffPort, true, 0xffffff00, 7
	srv.rcvNxt = isnC + 1 + 100
	sp := shimSplice(srv.rcvNxt)
	h.input(PortHost, kernelSynAck(&sp, isnB, isnC), t0)
	return &shimConn{h: h, srv: srv, sp: sp, cliSeq: isnC + 1, cliTS: 7}
}

func (sc *shimConn) install(t *testing.T, now Time) {
	t.Helper()
	if err := sc.h.sh.AddSplice(&sc.sp, now); err != nil {
		t.Fatal(err)
	}
}

// A request that crossed before its Splice is in service from its
// arrival once the Splice comes: the Feedback's service time starts
// there, not at the Splice.
func TestShimMeasuresARequestThatCameBeforeItsSplice(t *testing.T) {
	sc := earlyConn(t, ShimConfig{ResponseQuiet: 20 * time.Millisecond})
	h, srv := sc.h, sc.srv
	arrive := t0 + ms
	req := sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, make([]byte, 100))
	if f := onlyFrame(t, h.input(PortWire, req, arrive)); string(f) != string(req) {
		t.Fatal("the request did not pass to the host unchanged")
	}
	if h.sh.Active() != 0 || h.sh.Stats().EarlyRequests != 1 {
		t.Fatalf("before the Splice: active %d, early requests %d", h.sh.Active(), h.sh.Stats().EarlyRequests)
	}
	sc.install(t, arrive+2*ms)
	if h.sh.Active() != 1 {
		t.Fatalf("Active() = %d after the Splice of a request already in", h.sh.Active())
	}
	if toClient, _ := framesOn(t, h.input(PortHost, srv.reply(make([]byte, 1000)), arrive+5*ms)); len(toClient) != 1 {
		t.Fatalf("the reply after the Splice: %d frames to the client", len(toClient))
	}
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK, srv.nxt, nil), arrive+6*ms)
	ev := onlyEvent(t, h.tick(arrive+26*ms), EvResponseDone)
	if ev.ServiceTime != 5*time.Millisecond || ev.Bytes != 1000 {
		t.Errorf("event %+v, want 5ms from the request's arrival, 1000 bytes", ev)
	}
	h.checkCounters()
}

// A reply ready before the Splice is dropped, not sent untranslated
// towards the front-end; the kernel's pure ACK passes as before; the
// reply sent again after the Splice is translated.
func TestShimDropsRepliesThatComeBeforeTheSplice(t *testing.T) {
	sc := earlyConn(t, ShimConfig{})
	h, srv := sc.h, sc.srv
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, srv.nxt, make([]byte, 100)), t0+ms)
	ack := srv.seg(wire.TCPFlagACK, srv.nxt, srv.rcvNxt, nil)
	if f := onlyFrame(t, h.input(PortHost, ack, t0+ms)); string(f) != string(ack) {
		t.Fatal("the kernel's pure ACK did not pass unchanged")
	}
	body := make([]byte, 700)
	first := srv.reply(body)
	if out := h.input(PortHost, first, t0+2*ms); len(out.Frames) != 0 {
		t.Fatalf("a reply before the Splice left: %d frames", len(out.Frames))
	}
	fin := srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, srv.nxt, srv.rcvNxt, nil)
	if out := h.input(PortHost, fin, t0+2*ms); len(out.Frames) != 0 {
		t.Fatalf("a FIN before the Splice left: %d frames", len(out.Frames))
	}
	if got := h.sh.Stats().RepliesBeforeSplice; got != 2 {
		t.Fatalf("RepliesBeforeSplice = %d, want 2", got)
	}
	sc.install(t, t0+3*ms)
	toClient, toFE := framesOn(t, h.input(PortHost, first, t0+200*ms)) // the kernel's retransmission
	if len(toClient) != 1 || len(toFE) != 1 {
		t.Fatalf("the reply sent again: %d frames to the client, %d copies to the front-end; want 1 and 1", len(toClient), len(toFE))
	}
	var p wire.Packet
	if err := wire.Parse(toClient[0], &p); err != nil || p.IP.Dst() != clientIP || len(p.TCP.Payload()) != len(body) {
		t.Fatalf("translated reply: %v, to %v, %d bytes", err, p.IP.Dst(), len(p.TCP.Payload()))
	}
	h.checkCounters()
}

// Only a segment that continues the handshake exactly starts an early
// request: one at another sequence number, or acknowledging anything
// but the kernel's SYN-ACK, changes nothing (an attacker who guessed the
// tuple cannot start a measurement).
func TestShimTakesOnlyAnEarlyRequestThatContinuesTheHandshake(t *testing.T) {
	for _, c := range []struct {
		name  string
		seq   wire.Seq // added to the request's first byte
		ack   wire.Seq // added to the kernel's ISN + 1
		flags uint8
	}{
		{"sequence after the first byte", 1, 0, wire.TCPFlagACK | wire.TCPFlagPSH},
		{"sequence before it", 0xffffffff, 0, wire.TCPFlagACK | wire.TCPFlagPSH},
		{"acknowledging more", 0, 1, wire.TCPFlagACK | wire.TCPFlagPSH},
		{"no ACK", 0, 0, wire.TCPFlagPSH},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := earlyConn(t, ShimConfig{})
			h, srv := sc.h, sc.srv
			sc.cliSeq += c.seq
			h.input(PortWire, sc.fromFrontEnd(c.flags, srv.nxt+c.ack, make([]byte, 100)), t0+ms)
			sc.install(t, t0+2*ms)
			if h.sh.Active() != 0 || h.sh.Stats().EarlyRequests != 0 {
				t.Fatalf("active %d, early requests %d", h.sh.Active(), h.sh.Stats().EarlyRequests)
			}
		})
	}
}

// Replies pass as ever on a tuple whose handshake the shim does not hold:
// too old, or never seen (a connection to the host that is not a
// handoff).
func TestShimPassesRepliesOfTuplesWithoutARecentHandshake(t *testing.T) {
	sc := earlyConn(t, ShimConfig{HandshakeWindow: time.Second})
	h, srv := sc.h, sc.srv
	reply := srv.reply(make([]byte, 300))
	if f := onlyFrame(t, h.input(PortHost, reply, t0.Add(time.Second)+1)); string(f) != string(reply) {
		t.Fatal("a reply after the handshake window did not pass unchanged")
	}
	other := newServer(0x5000, wire.SynOptions{})
	other.peerPort = shimHandoffPort + 1
	reply = other.reply(make([]byte, 300))
	if f := onlyFrame(t, h.input(PortHost, reply, t0+ms)); string(f) != string(reply) {
		t.Fatal("a reply on a tuple without a handshake did not pass unchanged")
	}
	if got := h.sh.Stats().RepliesBeforeSplice; got != 0 {
		t.Fatalf("RepliesBeforeSplice = %d", got)
	}
	h.checkCounters()
}
