package splice

import (
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// waitingFollowUp is a spliced keep-alive connection with a second request
// held for the scheduler, and the back-end's response to the first one
// (size bytes, sent straight to the client, so the front-end never saw it).
func waitingFollowUp(t *testing.T, size int) (sc *splicedConn, next wire.Seq, respEnd wire.Seq) {
	sc, next = keepAliveConn(t)
	sc.now += ms
	onlyEvent(t, sc.h.input(sc.c.data([]byte("GET /second HTTP/1.1\r\nHost: www.example.test\r\n\r\n")), sc.now), EvRequest)
	sc.srv.reply(make([]byte, size))
	return sc, next, sc.srv.nxt + wire.Seq(sc.sp.SeqDelta)
}

func (sc *splicedConn) refuse(t *testing.T, status int, retry time.Duration) *Output {
	t.Helper()
	sc.now += ms
	return sc.h.call(func(out *Output) {
		if err := sc.h.fe.RejectFollowUp(sc.id, status, "queue-full", retry, sc.now, out); err != nil {
			t.Fatal(err)
		}
	})
}

func (sc *splicedConn) responseEnded(t *testing.T, backendSeq wire.Seq) *Output {
	t.Helper()
	sc.now += ms
	return sc.h.call(func(out *Output) {
		if err := sc.h.fe.ResponseEnded(sc.id, ResponseEnd{Seq: uint32(backendSeq)}, sc.now, out); err != nil {
			t.Fatal(err)
		}
	})
}

// clientAck sends a pure ACK of the reply stream up to ack.
func (sc *splicedConn) clientAck(ack wire.Seq) *Output {
	sc.now += ms
	sc.c.tsVal++
	return sc.h.input(sc.c.seg(wire.TCPFlagACK, sc.c.nxt, ack, nil), sc.now)
}

// TestRefusedFollowUpIsAnsweredInItsStream: the answer waits until the
// previous response is over and the client has all of it; then C2 is
// reset before the refused request and the client gets a 503 with
// Retry-After from the end of the response, with a timestamp no older
// than the back-end's, and the connection closes.
func TestRefusedFollowUpIsAnsweredInItsStream(t *testing.T) {
	sc, next, respEnd := waitingFollowUp(t, 1000)
	c := sc.c
	if out := sc.refuse(t, 503, 2*time.Second); len(out.Frames) != 0 {
		t.Fatalf("refusal sent %d frames while the response is still going", len(out.Frames))
	}
	if out := sc.responseEnded(t, sc.srv.nxt); len(out.Frames) != 0 {
		t.Fatalf("%d frames before the client acknowledged the response", len(out.Frames))
	}
	// The back-end's timestamps, as the client saw them, run ahead of the
	// front-end's clock.
	c.peerTS = tsClock(sc.now) + 5000
	out := sc.clientAck(respEnd - 100)
	expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), ackIs(respEnd-100-wire.Seq(sc.sp.SeqDelta)), payloadIs(nil))

	out = sc.clientAck(respEnd)
	var answer []byte
	var rst, fin bool
	for _, b := range copyFrames(out) {
		s := decodeTCP(t, b)
		if s.ip.DstIP.Equal(backendIP[:]) {
			expectTCP(t, b, to(backendIP, webPort), seqIs(next), flagsAre(wire.TCPFlagRST))
			rst = true
			continue
		}
		expectTCP(t, b, from(vipA, webPort), to(clientIP, testRequestPort), ackIs(c.nxt),
			seqIs(respEnd+wire.Seq(len(answer))))
		if v, e, ok := s.ts(); !ok || v < c.peerTS || e != c.tsVal {
			t.Errorf("answer timestamps %d/%d (ok %v): want TSval >= %d and TSecr %d", v, e, ok, c.peerTS, c.tsVal)
		}
		answer = append(answer, s.payload()...)
		fin = s.flags()&wire.TCPFlagFIN != 0
	}
	if !rst || !fin {
		t.Fatalf("C2 reset %v, FIN %v: want both", rst, fin)
	}
	if !strings.HasPrefix(string(answer), "HTTP/1.1 503 ") || !strings.Contains(string(answer), "\r\nRetry-After: 2\r\n") ||
		!strings.Contains(string(answer), "\r\nConnection: close\r\n") {
		t.Fatalf("answer %q", answer)
	}
	if ev := onlyEvent(t, out, EvAnswered); ev.Status != 503 {
		t.Errorf("EvAnswered status %d", ev.Status)
	}
	// The client acknowledges the answer and its FIN: the flow lingers,
	// closed on behalf of the back-end it was spliced to.
	out = sc.clientAck(respEnd + wire.Seq(len(answer)) + 1)
	if ev := onlyEvent(t, out, EvClosed); ev.Reason != CloseAnswered || ev.Backend != testBackend.ID {
		t.Errorf("EvClosed %+v", ev)
	}
	if st := sc.h.fe.Stats(); st.FollowUpsRefused != 1 || st.FollowUpsReset != 0 {
		t.Errorf("refused %d, reset %d", st.FollowUpsRefused, st.FollowUpsReset)
	}
	sc.h.checkCounters()
}

// TestRefusalAfterTheResponseEndedGoesAtOnce: the end already known and
// acknowledged, the refusal is answered in the same call; a 429 carries
// no Retry-After.
func TestRefusalAfterTheResponseEndedGoesAtOnce(t *testing.T) {
	sc, _, respEnd := waitingFollowUp(t, 10)
	sc.responseEnded(t, sc.srv.nxt)
	sc.clientAck(respEnd)
	out := sc.refuse(t, 429, 0)
	if len(out.Frames) != 2 {
		t.Fatalf("%d frames, want the C2 reset and the answer", len(out.Frames))
	}
	s := expectTCP(t, out.Frames[1].Data, to(clientIP, testRequestPort), seqIs(respEnd))
	if a := string(s.payload()); !strings.HasPrefix(a, "HTTP/1.1 429 ") || strings.Contains(a, "Retry-After") {
		t.Fatalf("answer %q", a)
	}
}

// TestRefusalWaitsForEveryPipelinedResponse: with two requests at the
// back-end, the end of the first is not where the answer goes.
func TestRefusalWaitsForEveryPipelinedResponse(t *testing.T) {
	sc, _ := keepAliveConn(t)
	a := "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
	b := "GET /b HTTP/1.1\r\nHost: h\r\n\r\n"
	sc.now += ms
	sc.h.input(sc.c.data([]byte(a+b)), sc.now)
	admit(t, sc) // /a goes to the back-end; /b waits
	sc.srv.reply(make([]byte, 300))
	firstEnd := sc.srv.nxt
	sc.srv.reply(make([]byte, 300))
	delta := wire.Seq(sc.sp.SeqDelta)
	sc.refuse(t, 503, time.Second)
	sc.responseEnded(t, firstEnd)
	if out := sc.clientAck(firstEnd + delta); len(out.Frames) != 1 {
		t.Fatalf("%d frames after the first response: the second is still going", len(out.Frames))
	}
	sc.responseEnded(t, sc.srv.nxt)
	out := sc.clientAck(sc.srv.nxt + delta)
	if len(out.Frames) != 2 {
		t.Fatalf("%d frames, want the C2 reset and the answer", len(out.Frames))
	}
	expectTCP(t, out.Frames[1].Data, to(clientIP, testRequestPort), seqIs(sc.srv.nxt+delta))
}

// TestRefusalWithoutAResponseEndIsReset: if the end never becomes known,
// the connection is reset after RefuseWait, at the client's rcv_nxt.
func TestRefusalWithoutAResponseEndIsReset(t *testing.T) {
	sc, _, respEnd := waitingFollowUp(t, 10)
	sc.refuse(t, 503, time.Second)
	sc.clientAck(respEnd) // progress: the wait runs from here
	acked := sc.now
	if out := sc.h.tick(acked + Time(sc.h.fe.cfg.RefuseWait) - ms); len(out.Frames) != 0 {
		t.Fatalf("reset %d frames before RefuseWait", len(out.Frames))
	}
	out := sc.h.tick(acked + Time(sc.h.fe.cfg.RefuseWait))
	var toClient *seen
	for _, b := range copyFrames(out) {
		if s := decodeTCP(t, b); s.ip.DstIP.Equal(clientIP[:]) {
			toClient = s
		}
	}
	if toClient == nil || toClient.flags()&wire.TCPFlagRST == 0 || toClient.seq() != respEnd {
		t.Fatalf("no RST to the client at %#x: %+v", uint32(respEnd), out.Frames)
	}
	if st := sc.h.fe.Stats(); st.FollowUpsReset != 1 || st.FollowUpsRefused != 0 {
		t.Errorf("reset %d, refused %d", st.FollowUpsReset, st.FollowUpsRefused)
	}
}

// TestRejectFollowUpNeedsAWaitingRequest: a flow with nothing held
// cannot be refused (the daemon resets it instead).
func TestRejectFollowUpNeedsAWaitingRequest(t *testing.T) {
	sc, _ := keepAliveConn(t)
	if err := sc.h.fe.RejectFollowUp(sc.id, 503, "x", 0, sc.now, &Output{}); err != ErrNotWaiting {
		t.Fatalf("err %v, want ErrNotWaiting", err)
	}
	if err := sc.h.fe.RejectFollowUp(sc.id+100, 503, "x", 0, sc.now, &Output{}); err != ErrNoFlow {
		t.Fatalf("err %v, want ErrNoFlow", err)
	}
}
