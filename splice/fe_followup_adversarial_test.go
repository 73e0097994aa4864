package splice

import (
	"strings"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// Issue 9, "Requests that skip the scheduler": whatever the client sends
// on a spliced connection, no request reaches the back-end without an
// EvRequest and an Admit, and what the front-end cannot follow is
// answered in the stream and closed rather than forwarded.

const (
	chunkedHead = "POST /c HTTP/1.1\r\nHost: www.example.test\r\nTransfer-Encoding: chunked\r\n\r\n"
	chunkedBody = "5;ext=1\r\nhello\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nTrailer: x\r\n\r\n"
	victimReq   = "GET /admin HTTP/1.1\r\nHost: victim.example.test\r\n\r\n"
)

// chunkedConn is a spliced connection whose first request is chunked;
// body is the part of the body that came with the head.
func chunkedConn(t *testing.T, body string) (*splicedConn, wire.Seq) {
	t.Helper()
	p := defaultSpliceParams()
	p.request = []byte(chunkedHead + body)
	sc := connectSpliced(t, p)
	return sc, sc.c.nxt
}

// sendSplit sends b from the client in segments cut at the given offsets.
func (sc *splicedConn) sendSplit(b []byte, cuts ...int) []*Output {
	var outs []*Output
	start := 0
	for _, end := range append(cuts, len(b)) {
		if end <= start {
			continue
		}
		sc.now += ms
		out := sc.h.input(sc.c.data(b[start:end]), sc.now)
		outs = append(outs, cloneOutput(out))
		start = end
	}
	return outs
}

// cloneOutput keeps frames and events of an Output the harness will reuse.
func cloneOutput(out *Output) *Output {
	c := &Output{}
	for _, ev := range out.Events {
		if ev.Request != nil {
			r := *ev.Request
			ev.Request = &r
		}
		c.Events = append(c.Events, ev)
	}
	for _, f := range copyFrames(out) {
		c.Frames = append(c.Frames, OutFrame{Port: PortWire, Data: f})
	}
	return c
}

// toBackendPayload collects the payload the outputs sent on C2, and fails
// on any segment that is not at the expected sequence number.
func toBackendPayload(t *testing.T, start wire.Seq, outs ...*Output) []byte {
	t.Helper()
	var got []byte
	for _, out := range outs {
		for _, f := range out.Frames {
			s := decodeTCP(t, f.Data)
			if !s.ip.DstIP.Equal(backendIP[:]) || len(s.payload()) == 0 {
				continue
			}
			if want := start + wire.Seq(len(got)); s.seq() != want {
				t.Fatalf("C2 segment at %d, want %d (after %q)", s.seq()-start, want-start, got)
			}
			got = append(got, s.payload()...)
		}
	}
	return got
}

func requests(outs ...*Output) []Event {
	var evs []Event
	for _, out := range outs {
		evs = append(evs, eventsOf(out, EvRequest)...)
	}
	return evs
}

// TestAdversarialChunkedRequestDoesNotEndScheduling: after a chunked first
// request, a request for another Host is held for the scheduler like any
// follow-up, and its bytes reach the back-end only when admitted.
func TestAdversarialChunkedRequestDoesNotEndScheduling(t *testing.T) {
	sc, next := chunkedConn(t, chunkedBody)
	out := sc.sendSplit([]byte(victimReq))[0]
	if got := toBackendPayload(t, next, out); len(got) != 0 {
		t.Fatalf("follow-up after a chunked request forwarded unscheduled: %q", got)
	}
	ev := onlyEvent(t, out, EvRequest)
	if !ev.FollowUp || ev.Request.Host != "victim.example.test" {
		t.Fatalf("event %+v", ev)
	}
	if got := toBackendPayload(t, next, admit(t, sc)); string(got) != victimReq {
		t.Fatalf("admitted %q", got)
	}
	if st := sc.h.fe.Stats(); st.FollowUps != 1 || st.ChunkedBodies != 1 {
		t.Errorf("FollowUps %d, ChunkedBodies %d", st.FollowUps, st.ChunkedBodies)
	}
	sc.h.checkCounters()
}

// TestAdversarialChunkedBodySplitAnywhere: a chunked body that arrives
// after the splice, with the next request behind it, cut into two
// segments at every byte boundary and also sent byte by byte: exactly the
// body is forwarded, the next request waits for its admission.
func TestAdversarialChunkedBodySplitAnywhere(t *testing.T) {
	stream := []byte(chunkedBody + victimReq)
	check := func(t *testing.T, cuts ...int) {
		sc, next := chunkedConn(t, "")
		outs := sc.sendSplit(stream, cuts...)
		if got := toBackendPayload(t, next, outs...); string(got) != chunkedBody {
			t.Fatalf("cuts %v: forwarded %q, want the body only", cuts, got)
		}
		evs := requests(outs...)
		if len(evs) != 1 || evs[0].Request.Host != "victim.example.test" || !evs[0].FollowUp {
			t.Fatalf("cuts %v: events %+v", cuts, evs)
		}
		got := toBackendPayload(t, next+wire.Seq(len(chunkedBody)), admit(t, sc))
		if string(got) != victimReq {
			t.Fatalf("cuts %v: admitted %q", cuts, got)
		}
	}
	for cut := 1; cut < len(stream); cut++ {
		check(t, cut)
	}
	var every []int
	for i := 1; i < len(stream); i++ {
		every = append(every, i)
	}
	check(t, every...)
}

// TestAdversarialChunkedFollowUpSplitAnywhere: the same for a chunked
// follow-up request, whose body partly waits with its head and partly
// comes after the admission.
func TestAdversarialChunkedFollowUpSplitAnywhere(t *testing.T) {
	stream := []byte(chunkedHead + chunkedBody + victimReq)
	for cut := len(chunkedHead); cut < len(stream); cut++ {
		sc, next := keepAliveConn(t)
		outs := sc.sendSplit(stream[:cut])
		if evs := requests(outs...); len(evs) != 1 || evs[0].Request.Path != "/c" {
			t.Fatalf("cut %d: events %+v", cut, evs)
		}
		outs = []*Output{cloneOutput(admit(t, sc))}
		outs = append(outs, sc.sendSplit(stream[cut:])...)
		if got := toBackendPayload(t, next, outs...); string(got) != chunkedHead+chunkedBody {
			t.Fatalf("cut %d: forwarded %q", cut, got)
		}
		if evs := requests(outs...); len(evs) != 1 || evs[0].Request.Host != "victim.example.test" {
			t.Fatalf("cut %d: events %+v", cut, evs)
		}
	}
}

// TestAdversarialChunkedBodyWithPipelinedRequestBeforeSplice: the whole
// chunked request and the next one arrive before the handoff; the
// front-end hands over the first only.
func TestAdversarialChunkedBodyWithPipelinedRequestBeforeSplice(t *testing.T) {
	h := newFE(t, nil)
	p := defaultSpliceParams()
	c := newClient(testRequestPort, p.clientISN, p.offer)
	now := p.start
	c.handshake(t, h, now)
	now += ms
	out := h.input(c.data([]byte(chunkedHead+chunkedBody+victimReq)), now)
	ack := expectTCP(t, onlyFrame(t, out), flagsAre(wire.TCPFlagACK))
	if want := p.clientISN + 1 + wire.Seq(len(chunkedHead+chunkedBody)); ack.ack() != want {
		t.Fatalf("front-end acknowledged up to %d, want the end of the chunked request %d",
			ack.ack()-p.clientISN-1, want-p.clientISN-1)
	}
	if ev := onlyEvent(t, out, EvRequest); ev.Request.Path != "/c" {
		t.Fatalf("event %+v", ev)
	}
}

// expectAnswerAfterResponse ends the back-end's response (size bytes),
// lets the client acknowledge it, and expects C2 reset and the answer
// status from the end of the response, then FIN.
func expectAnswerAfterResponse(t *testing.T, sc *splicedConn, status int) {
	t.Helper()
	sc.srv.reply(make([]byte, 100))
	respEnd := sc.srv.nxt + wire.Seq(sc.sp.SeqDelta)
	if out := sc.responseEnded(t, sc.srv.nxt); len(out.Frames) != 0 {
		t.Fatalf("%d frames before the client acknowledged the response", len(out.Frames))
	}
	out := sc.clientAck(respEnd)
	var answer []byte
	var rst, fin bool
	for _, b := range copyFrames(out) {
		s := decodeTCP(t, b)
		if s.ip.DstIP.Equal(backendIP[:]) {
			expectTCP(t, b, flagsAre(wire.TCPFlagRST), payloadIs(nil))
			rst = true
			continue
		}
		expectTCP(t, b, to(clientIP, testRequestPort), seqIs(respEnd+wire.Seq(len(answer))))
		answer = append(answer, s.payload()...)
		fin = fin || s.flags()&wire.TCPFlagFIN != 0
	}
	if !rst || !fin || !strings.HasPrefix(string(answer), "HTTP/1.1 "+itoa(status)+" ") ||
		!strings.Contains(string(answer), "\r\nConnection: close\r\n") {
		t.Fatalf("C2 reset %v, FIN %v, answer %q: want %d and a close", rst, fin, answer, status)
	}
	if ev := onlyEvent(t, out, EvAnswered); ev.Status != status {
		t.Fatalf("EvAnswered %+v", ev)
	}
}

func itoa(n int) string {
	return string(rune('0'+n/100)) + string(rune('0'+n/10%10)) + string(rune('0'+n%10))
}

// unparsableFollowUp sends bad after a tracked first request and expects
// nothing of it on C2 and no event, then the answer status after the
// response, then nothing more forwarded.
func unparsableFollowUp(t *testing.T, bad []byte, status int) {
	t.Helper()
	sc, next := keepAliveConn(t)
	outs := sc.sendSplit(bad, len(bad)/2)
	if got := toBackendPayload(t, next, outs...); len(got) != 0 {
		t.Fatalf("unparsable follow-up forwarded: %q", got)
	}
	if evs := requests(outs...); len(evs) != 0 {
		t.Fatalf("events %+v", evs)
	}
	// More requests behind it go nowhere either.
	out := sc.sendSplit([]byte(victimReq))[0]
	if got := toBackendPayload(t, next, out); len(got) != 0 || len(requests(out)) != 0 {
		t.Fatalf("request after an unparsable one: forwarded %q, events %+v", got, out.Events)
	}
	expectAnswerAfterResponse(t, sc, status)
	sc.h.checkCounters()
}

// TestAdversarialBareLFFollowUpIsAnswered400: a follow-up head with bare
// LF line endings is never forwarded (a server that takes LF could read a
// different request in it); the client gets 400 after the response.
func TestAdversarialBareLFFollowUpIsAnswered400(t *testing.T) {
	unparsableFollowUp(t, []byte("GET /x HTTP/1.1\nHost: victim.example.test\n\n"), 400)
}

// TestAdversarialMalformedFollowUpIsAnswered400: any other syntax error.
func TestAdversarialMalformedFollowUpIsAnswered400(t *testing.T) {
	unparsableFollowUp(t, []byte("BROKEN\x00 REQUEST\r\n\r\n"), 400)
}

// TestAdversarialOversizedFollowUpHeadIs431: a follow-up head over MaxHead.
func TestAdversarialOversizedFollowUpHeadIs431(t *testing.T) {
	big := "GET /x HTTP/1.1\r\nHost: victim.example.test\r\nX-Pad: " + strings.Repeat("p", 9000) + "\r\n\r\n"
	sc, next := keepAliveConn(t)
	var outs []*Output
	for off := 0; off < len(big); off += 1400 {
		outs = append(outs, sc.sendSplit([]byte(big[off:min(off+1400, len(big))]))...)
	}
	if got := toBackendPayload(t, next, outs...); len(got) != 0 || len(requests(outs...)) != 0 {
		t.Fatalf("oversized follow-up: forwarded %d bytes, events %+v", len(got), requests(outs...))
	}
	expectAnswerAfterResponse(t, sc, 431)
}

// TestAdversarialIncompleteFollowUpAtFINIsAnswered400: a partial head and
// the client's FIN: the partial head does not reach the back-end.
func TestAdversarialIncompleteFollowUpAtFINIsAnswered400(t *testing.T) {
	sc, next := keepAliveConn(t)
	sc.now += ms
	part := []byte("GET /x HTTP/1.1\r\nHost: vic")
	out := sc.h.input(sc.c.seg(wire.TCPFlagACK|wire.TCPFlagFIN, sc.c.nxt, sc.c.rcvNxt, part), sc.now)
	sc.c.nxt += wire.Seq(len(part)) + 1
	if got := toBackendPayload(t, next, cloneOutput(out)); len(got) != 0 {
		t.Fatalf("partial head forwarded: %q", got)
	}
	expectAnswerAfterResponse(t, sc, 400)
}

// TestAdversarialMalformedChunkedBodyIsAnswered400: a chunked body that
// breaks the grammar after the splice: nothing from the bad segment on is
// forwarded, the client gets 400 after the response.
func TestAdversarialMalformedChunkedBodyIsAnswered400(t *testing.T) {
	sc, next := chunkedConn(t, "5\r\nhello\r\n")
	bad := []byte("3\nabc\r\n0\r\n\r\n" + victimReq)
	out := sc.sendSplit(bad)[0]
	if got := toBackendPayload(t, next, out); len(got) != 0 || len(requests(out)) != 0 {
		t.Fatalf("malformed chunked body: forwarded %q, events %+v", got, out.Events)
	}
	expectAnswerAfterResponse(t, sc, 400)
}

// TestAdversarialMalformedChunkedBodyBeforeSpliceIs400: the front-end
// still holds the request: it answers 400 and schedules nothing.
func TestAdversarialMalformedChunkedBodyBeforeSpliceIs400(t *testing.T) {
	h := newFE(t, nil)
	p := defaultSpliceParams()
	c := newClient(testRequestPort, p.clientISN, p.offer)
	now := p.start
	c.handshake(t, h, now)
	now += ms
	out := h.input(c.data([]byte(chunkedHead+"5\r\nhelloX\r\n0\r\n\r\n")), now)
	if len(eventsOf(out, EvRequest)) != 0 {
		t.Fatalf("a request with a malformed chunked body was scheduled: %+v", out.Events)
	}
	if ev := onlyEvent(t, out, EvAnswered); ev.Status != 400 {
		t.Fatalf("EvAnswered %+v", ev)
	}
}

// TestAdversarialChunkedBodyBeforeSpliceSplitAnywhere: the chunked body
// and the request behind it arrive while the first request is queued, cut
// at every byte boundary: the front-end acknowledges and hands over the
// chunked request only; the request behind it is scheduled on its own.
func TestAdversarialChunkedBodyBeforeSpliceSplitAnywhere(t *testing.T) {
	stream := []byte(chunkedBody + victimReq)
	for cut := 1; cut < len(stream); cut++ {
		h := newFE(t, nil)
		p := defaultSpliceParams()
		c := newClient(testRequestPort, p.clientISN, p.offer)
		now := p.start
		c.handshake(t, h, now)
		now += ms
		id := c.sendRequest(t, h, []byte(chunkedHead), now)
		var lastAck wire.Seq
		var frames [][]byte
		for _, piece := range [][]byte{stream[:cut], stream[cut:]} {
			now += ms
			frames = append(frames, c.data(piece))
			out := h.input(frames[len(frames)-1], now)
			if len(eventsOf(out, EvRequest)) != 0 {
				t.Fatalf("cut %d: a request scheduled before the splice", cut)
			}
			lastAck = expectTCP(t, onlyFrame(t, out), flagsAre(wire.TCPFlagACK)).ack()
		}
		if want := p.clientISN + 1 + wire.Seq(len(chunkedHead+chunkedBody)); lastAck != want {
			t.Fatalf("cut %d: acknowledged %d bytes, want %d", cut, lastAck-p.clientISN-1, want-p.clientISN-1)
		}
		now += ms
		syn := expectTCP(t, onlyFrame(t, h.call(func(out *Output) {
			if err := h.fe.Dispatch(id, testBackend, now, out); err != nil {
				t.Fatal(err)
			}
		})), flagsAre(wire.TCPFlagSYN))
		srv := newServer(p.backendISN, p.answer)
		now += ms
		h.input(srv.synAck(syn), now)
		now += ms
		out := cloneOutput(h.call(func(out *Output) {
			if err := h.fe.SpliceAcked(id, now, out); err != nil {
				t.Fatal(err)
			}
		}))
		var sent []byte
		for _, f := range out.Frames {
			s := decodeTCP(t, f.Data)
			if end := s.seq() - p.clientISN - 1 + wire.Seq(len(s.payload())); int(end) > len(sent) {
				sent = append(sent[:s.seq()-p.clientISN-1], s.payload()...)
			}
		}
		if string(sent) != chunkedHead+chunkedBody {
			t.Fatalf("cut %d: C2 got %q", cut, sent)
		}
		evs := eventsOf(out, EvRequest)
		if cut > len(chunkedBody) {
			// The second piece started past what the front-end took of
			// the first (the chunked request's end): it was dropped, and
			// the client resends it.
			now += ms
			evs = append(evs, eventsOf(cloneOutput(h.input(frames[1], now)), EvRequest)...)
		}
		if len(evs) != 1 || evs[0].Request.Host != "victim.example.test" || !evs[0].FollowUp {
			// The frames past the chunked request were held during the
			// handoff and replayed after it.
			t.Fatalf("cut %d: events %+v", cut, evs)
		}
	}
}

// TestAdversarialChunkedBodyGapIsNotForwarded: inside a chunked body a
// segment past a loss waits for the bytes before it: it could hold the
// body's end and the next request.
func TestAdversarialChunkedBodyGapIsNotForwarded(t *testing.T) {
	sc, next := chunkedConn(t, "")
	stream := []byte(chunkedBody + victimReq)
	cut := len(chunkedBody) - 4
	first := sc.c.data(stream[:cut])
	second := sc.c.data(stream[cut:])
	sc.now += ms
	out := cloneOutput(sc.h.input(second, sc.now))
	if got := toBackendPayload(t, next, out); len(got) != 0 || len(out.Frames) != 1 {
		t.Fatalf("segment past a gap: forwarded %q in %d frames", got, len(out.Frames))
	}
	sc.now += ms
	out1 := cloneOutput(sc.h.input(first, sc.now))
	sc.now += ms
	out2 := cloneOutput(sc.h.input(second, sc.now))
	if got := toBackendPayload(t, next, out1, out2); string(got) != chunkedBody {
		t.Fatalf("forwarded %q", got)
	}
	if evs := requests(out1, out2); len(evs) != 1 || evs[0].Request.Host != "victim.example.test" {
		t.Fatalf("events %+v", evs)
	}
}

// TestAdversarialMalformedChunkedFollowUpIsAnswered400: a chunked
// follow-up whose body is already malformed when it is admitted: none of
// it goes out, the client gets 400 after the previous response.
func TestAdversarialMalformedChunkedFollowUpIsAnswered400(t *testing.T) {
	sc, next := keepAliveConn(t)
	out := sc.sendSplit([]byte(chunkedHead + "5\r\nhello\n\r\n0\r\n\r\n"))[0]
	onlyEvent(t, out, EvRequest)
	if got := toBackendPayload(t, next, cloneOutput(admit(t, sc))); len(got) != 0 {
		t.Fatalf("admitted a malformed chunked request: %q", got)
	}
	expectAnswerAfterResponse(t, sc, 400)
	if st := sc.h.fe.Stats(); st.FollowUpsUnfollowable != 1 || st.FollowUpsRefused != 1 {
		t.Errorf("unfollowable %d, refused %d", st.FollowUpsUnfollowable, st.FollowUpsRefused)
	}
}

// TestFollowingChunkedRequestsAllocatesNothing: forwarding a chunked body
// segment by segment, and a keep-alive cycle of chunked follow-ups (held,
// reported, admitted, their end found), allocate nothing once warm.
func TestFollowingChunkedRequestsAllocatesNothing(t *testing.T) {
	sc, _ := chunkedConn(t, "7fffffff\r\n")
	const runs = 200
	frames := make([][]byte, runs+1)
	for i := range frames {
		frames[i] = sc.c.data(make([]byte, fullPayload))
	}
	before := sc.h.fe.Stats().ForwardedFrames
	var out Output
	i := 0
	allocs := testing.AllocsPerRun(runs, func() {
		out.Reset()
		sc.now += ms
		sc.h.fe.Input(frames[i], sc.now, &out)
		i++
	})
	if allocs != 0 {
		t.Errorf("forwarding a chunked body segment: %v allocations", allocs)
	}
	if n := sc.h.fe.Stats().ForwardedFrames - before; n != runs+1 {
		t.Errorf("forwarded %d frames, want %d: the path measured is not forwarding", n, runs+1)
	}

	ka, _ := keepAliveConn(t)
	req := []byte(chunkedHead + chunkedBody)
	frames = frames[:0]
	for range runs + 1 {
		frames = append(frames, ka.c.data(req))
	}
	before = ka.h.fe.Stats().ChunkedBodies
	i = 0
	allocs = testing.AllocsPerRun(runs, func() {
		out.Reset()
		ka.now += ms
		ka.h.fe.Input(frames[i], ka.now, &out)
		if len(out.Events) != 1 {
			t.Fatalf("request %d: %d events", i, len(out.Events))
		}
		out.Reset()
		if err := ka.h.fe.Admit(ka.id, ka.now, &out); err != nil || len(out.Frames) != 1 {
			t.Fatalf("request %d: Admit %v, %d frames", i, err, len(out.Frames))
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("a chunked follow-up request: %v allocations", allocs)
	}
	if n := ka.h.fe.Stats().ChunkedBodies - before; n != runs+1 {
		t.Errorf("%d chunked bodies followed, want %d", n, runs+1)
	}
}
