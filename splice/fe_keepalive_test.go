package splice

import (
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// keepAliveConn is a spliced connection whose first request was a plain
// GET, so the front-end tracks the request boundaries that follow.
func keepAliveConn(t *testing.T) (*splicedConn, wire.Seq) {
	p := defaultSpliceParams()
	p.request = []byte("GET /first HTTP/1.1\r\nHost: www.example.test\r\n\r\n")
	sc := connectSpliced(t, p)
	return sc, sc.c.nxt
}

func admit(t *testing.T, sc *splicedConn) *Output {
	t.Helper()
	sc.now += ms
	return sc.h.call(func(out *Output) {
		if err := sc.h.fe.Admit(sc.id, sc.now, out); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFollowUpRequestIsHeldUntilAdmitted: a second request on a spliced
// connection does not reach the back-end until the daemon admits it; its
// ACK information does, at once, in a header-only copy.
func TestFollowUpRequestIsHeldUntilAdmitted(t *testing.T) {
	sc, next := keepAliveConn(t)
	c := sc.c
	second := []byte("GET /second HTTP/1.1\r\nHost: www.example.test\r\n\r\n")
	sc.now += ms
	seg := c.data(second)
	out := sc.h.input(seg, sc.now)
	expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), seqIs(next), payloadIs(nil),
		ackIs(c.rcvNxt-wire.Seq(sc.sp.SeqDelta)))
	ev := onlyEvent(t, out, EvRequest)
	if !ev.FollowUp || ev.Request.Path != "/second" || ev.Backend != testBackend.ID {
		t.Fatalf("event %+v", ev)
	}
	// The client retransmits while the request waits: nothing more goes out
	// but the ACK information.
	sc.now += ms
	out = sc.h.input(append([]byte(nil), seg...), sc.now)
	expectTCP(t, onlyFrame(t, out), payloadIs(nil))
	if len(eventsOf(out, EvRequest)) != 0 {
		t.Fatal("a retransmitted follow-up was reported twice")
	}
	out = admit(t, sc)
	expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), seqIs(next), payloadIs(second))
	// After admission a retransmission is forwarded like any old segment.
	sc.now += ms
	expectTCP(t, onlyFrame(t, sc.h.input(append([]byte(nil), seg...), sc.now)), seqIs(next), payloadIs(second))
	if st := sc.h.fe.Stats(); st.FollowUps != 1 || st.Requests != 2 {
		t.Errorf("FollowUps %d, Requests %d", st.FollowUps, st.Requests)
	}
	sc.h.checkCounters()
}

// TestPipelinedFollowUpsAreAdmittedOneAtATime: two requests in one
// segment become two scheduling decisions.
func TestPipelinedFollowUpsAreAdmittedOneAtATime(t *testing.T) {
	sc, next := keepAliveConn(t)
	a := "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
	b := "GET /b HTTP/1.1\r\nHost: h\r\n\r\n"
	sc.now += ms
	out := sc.h.input(sc.c.data([]byte(a+b)), sc.now)
	if ev := onlyEvent(t, out, EvRequest); ev.Request.Path != "/a" {
		t.Fatalf("first event for %q", ev.Request.Path)
	}
	out = admit(t, sc)
	expectTCP(t, onlyFrame(t, out), seqIs(next), payloadIs([]byte(a)))
	if ev := onlyEvent(t, out, EvRequest); ev.Request.Path != "/b" {
		t.Fatalf("second event for %q", ev.Request.Path)
	}
	out = admit(t, sc)
	expectTCP(t, onlyFrame(t, out), seqIs(next+wire.Seq(len(a))), payloadIs([]byte(b)))
	if err := sc.h.fe.Admit(sc.id, sc.now, &Output{}); err != ErrNotWaiting {
		t.Errorf("third Admit: %v, want ErrNotWaiting", err)
	}
}

// TestFollowUpBodyAfterAdmissionIsForwarded: a follow-up with a body; the
// part of the body that comes after admission is forwarded directly, and
// the request after it is held again.
func TestFollowUpBodyAfterAdmissionIsForwarded(t *testing.T) {
	sc, next := keepAliveConn(t)
	c := sc.c
	head := "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 20\r\n\r\n"
	sc.now += ms
	onlyEvent(t, sc.h.input(c.data([]byte(head+"0123456789")), sc.now), EvRequest)
	out := admit(t, sc)
	expectTCP(t, onlyFrame(t, out), seqIs(next), payloadIs([]byte(head+"0123456789")))
	sc.now += ms
	rest := c.data([]byte("abcdefghij"))
	expectTCP(t, onlyFrame(t, sc.h.input(rest, sc.now)), payloadIs([]byte("abcdefghij")))
	sc.now += ms
	out = sc.h.input(c.data([]byte("GET /after HTTP/1.1\r\nHost: h\r\n\r\n")), sc.now)
	expectTCP(t, onlyFrame(t, out), payloadIs(nil))
	if ev := onlyEvent(t, out, EvRequest); ev.Request.Path != "/after" {
		t.Fatalf("event for %q", ev.Request.Path)
	}
}

// TestFollowUpsAreFollowedOrAnswered: a malformed follow-up is held, not
// forwarded, and counted (it is answered in the stream once the response
// ends: fe_followup_adversarial_test.go); a chunked follow-up is followed
// to its end, and the request after it is held for the scheduler again.
func TestFollowUpsAreFollowedOrAnswered(t *testing.T) {
	sc, _ := keepAliveConn(t)
	sc.now += ms
	bad := []byte("BROKEN\x00 REQUEST\r\n\r\n")
	out := sc.h.input(sc.c.data(bad), sc.now)
	expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), payloadIs(nil))
	if len(out.Events) != 0 {
		t.Fatalf("malformed follow-up: events %+v", out.Events)
	}

	sc2, next2 := keepAliveConn(t)
	chunked := "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
	sc2.now += ms
	onlyEvent(t, sc2.h.input(sc2.c.data([]byte(chunked+"5\r\nhello\r\n")), sc2.now), EvRequest)
	out = admit(t, sc2)
	expectTCP(t, onlyFrame(t, out), seqIs(next2), payloadIs([]byte(chunked+"5\r\nhello\r\n")))
	sc2.now += ms
	out = sc2.h.input(sc2.c.data([]byte("0\r\n\r\nGET / HTTP/1.1\r\nHost: other\r\n\r\n")), sc2.now)
	expectTCP(t, onlyFrame(t, out), payloadIs([]byte("0\r\n\r\n")))
	if ev := onlyEvent(t, out, EvRequest); ev.Request.Host != "other" {
		t.Fatalf("event %+v", ev)
	}
	st, st2 := sc.h.fe.Stats(), sc2.h.fe.Stats()
	if st.FollowUpsUnfollowable != 1 || st2.ChunkedBodies != 1 {
		t.Errorf("unfollowable %d, chunked %d", st.FollowUpsUnfollowable, st2.ChunkedBodies)
	}
}
