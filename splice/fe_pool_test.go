package splice

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// Pooled handoff connections, both engines in memory (fe_pool.go,
// shim_pool.go): a C2 that served one client serves the next.

func pooling(c *FrontEndConfig) { c.PoolC2 = true }

// answer has the server send resp on l's C2 and the client take it, and
// hands the shim's report of its end to the front-end, as the daemon
// does with the Feedback.
func (l *splicedLoop) answer(c *testClient, id FlowID, resp []byte) *seen {
	l.t.Helper()
	n := l.loopNet
	n.now += ms
	n.fromServer(l.srv.reply(resp))
	s := l.clientGetsOn(c, n.takeClient())
	done := onlyEvent(l.t, &Output{Events: n.shEvents}, EvResponseDone)
	n.shEvents = nil
	if done.RequestID != uint64(id) {
		l.t.Fatalf("response reported for request %d, want %d", done.RequestID, id)
	}
	n.routeFE(n.fe.call(func(out *Output) {
		if err := n.fe.fe.ResponseEnded(id, endOf(done), n.now, out); err != nil {
			l.t.Fatal(err)
		}
	}))
	return s
}

// clientGetsOn checks that the one frame in fs comes from the VIP to c
// and lets c take it.
func (l *splicedLoop) clientGetsOn(c *testClient, fs [][]byte) *seen {
	l.t.Helper()
	s := expectTCP(l.t, one(l.t, fs), ethTo(routerMAC), from(vipA, webPort), to(c.ip, c.port))
	c.receive(s)
	return s
}

// closeToPool has c, which has everything, close: the front-end pools
// the C2 and answers the client's FIN itself. newAck says the FIN brings
// the client's ACK of the last reply, which the server must then get:
// it is owed, for a next request to carry, and goes alone after
// PoolAckDelay since none comes (oweAck); an ACK the server already has
// goes nowhere. It returns the front-end's FIN.
func (l *splicedLoop) closeToPool(c *testClient, newAck bool) *seen {
	l.t.Helper()
	fin := l.closeToPoolOwing(c, newAck)
	if newAck {
		n, srv := l.loopNet, l.srv
		n.routeFE(n.fe.tick(n.now)) // PoolAckDelay (1 ms) has passed
		ack := expectTCP(l.t, one(l.t, n.takeServer()), flagsAre(wire.TCPFlagACK), seqIs(srv.rcvNxt), ackIs(srv.nxt), payloadIs(nil))
		srv.receive(ack)
	}
	return fin
}

// closeToPoolOwing is closeToPool up to the owed ACK: the front-end's
// timer has not run yet.
func (l *splicedLoop) closeToPoolOwing(c *testClient, newAck bool) *seen {
	l.t.Helper()
	n := l.loopNet
	n.now += ms
	c.tsVal += 3
	n.fromClient(c.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c.nxt, c.rcvNxt, nil))
	// The server gets the last ACK, later, never the FIN.
	if fs := n.takeServer(); len(fs) != 0 {
		l.t.Fatalf("a FIN (new ACK %v) sent %d frames to the server at once", newAck, len(fs))
	}
	fin := expectTCP(l.t, one(l.t, n.takeClient()), from(vipA, webPort), to(c.ip, c.port),
		flagsAre(wire.TCPFlagACK|wire.TCPFlagFIN), seqIs(c.rcvNxt), ackIs(c.nxt+1))
	if v, _, _ := fin.ts(); int32(v-c.peerTS) < 0 {
		t := l.t
		t.Errorf("the front-end's FIN has TSval %#x, behind the %#x the client has seen: PAWS drops it", v, c.peerTS)
	}
	c.nxt++ // its FIN
	c.receive(fin)
	c.rcvNxt++
	n.now += ms
	n.fromClient(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil))
	if len(n.toClient) != 0 || len(n.toServer) != 0 {
		l.t.Fatalf("the client's last ACK moved %d frames to it, %d to the server", len(n.toClient), len(n.toServer))
	}
	return fin
}

// connect brings c through the handshake and its request req: the
// front-end reports the request. It returns the flow and every TSval the
// front-end sent c.
func (l *splicedLoop) connect(c *testClient, req []byte) (FlowID, []uint32) {
	l.t.Helper()
	n := l.loopNet
	n.feEvents = nil
	n.fromClient(c.syn())
	sa := l.clientGetsOn(c, n.takeClient())
	c.isnF, c.rcvNxt, c.ts = sa.seq(), sa.seq()+1, true
	v, _, _ := sa.ts()
	tsvals := []uint32{v}
	n.now += ms
	c.tsVal++
	n.fromClient(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil))
	n.now += ms
	n.fromClient(c.data(req))
	for _, f := range n.takeClient() {
		s := expectTCP(l.t, f, to(c.ip, c.port))
		c.receive(s)
		v, _, _ := s.ts()
		tsvals = append(tsvals, v)
	}
	id := onlyEvent(l.t, &Output{Events: n.feEvents}, EvRequest).Flow
	n.feEvents = nil
	return id, tsvals
}

// poolFirstClient has the server answer the loop's first client with
// resp and that client close: its C2 goes to the pool.
func (l *splicedLoop) poolFirstClient(resp []byte) {
	l.t.Helper()
	l.answer(l.c, l.id, resp)
	l.closeToPool(l.c, true)
}

// dispatchOnPool brings c through its handshake and request req, and
// dispatches it: onto the pooled C2, whose Splice it returns.
func (l *splicedLoop) dispatchOnPool(c *testClient, req []byte) (FlowID, proto.Splice) {
	l.t.Helper()
	n := l.loopNet
	id, _ := l.connect(c, req)
	n.now += ms
	n.routeFE(n.fe.call(func(out *Output) {
		if err := n.fe.fe.Dispatch(id, testBackend, n.now, out); err != nil {
			l.t.Fatal(err)
		}
	}))
	sp := onlyEvent(l.t, &Output{Events: n.feEvents}, EvSplice).Splice
	n.feEvents = nil
	return id, sp
}

// installAndSend installs sp at the shim and lets flow id's request go:
// it returns the request as the server got it.
func (l *splicedLoop) installAndSend(id FlowID, sp proto.Splice) *seen {
	l.t.Helper()
	n := l.loopNet
	if err := n.shim.sh.AddSplice(&sp, n.now); err != nil {
		l.t.Fatal(err)
	}
	n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.SpliceAcked(id, n.now, out) }))
	s := expectTCP(l.t, one(l.t, n.takeServer()), seqIs(l.srv.rcvNxt))
	l.srv.receive(s)
	return s
}

func TestPooledC2ServesTheNextClient(t *testing.T) {
	l := newSplicedLoopWith(t, pooling)
	n, srv, c1 := l.loopNet, l.srv, l.c
	l.answer(c1, l.id, []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"))
	c2Tuple := l.fe.fe.byID[l.id].c2Key()
	lastC2TS := c1.tsVal + 3 // the FIN's, which C2 carried in the last ACK
	l.closeToPool(c1, true)
	if ev := eventsOf(&Output{Events: n.feEvents}, EvClosed); len(ev) != 1 || ev[0].Reason != CloseFIN || ev[0].Flow != l.id || ev[0].Timeline.Reused {
		t.Errorf("first client's close: events %+v, want its EvClosed fin, C2 not reused", n.feEvents)
	}
	if n.fe.fe.PooledC2s() != 1 {
		t.Fatalf("%d pooled C2s after the first client closed, want 1", n.fe.fe.PooledC2s())
	}

	// A second client, whose clock is far behind the first's (the
	// server's PAWS check) and whose ISN is anywhere.
	c2 := newClient(41001, 0x4000_0000, fullOffer(5))
	req2 := []byte("GET /second HTTP/1.1\r\nHost: loop.test\r\n\r\n")
	id2, feTSvals := l.connect(c2, req2)
	n.now += ms
	n.routeFE(n.fe.call(func(out *Output) {
		if err := n.fe.fe.Dispatch(id2, testBackend, n.now, out); err != nil {
			t.Fatal(err)
		}
	}))
	if len(n.toServer) != 0 {
		t.Fatalf("dispatching on a pooled C2 sent %d frames to the server (a SYN?)", len(n.toServer))
	}
	ev := onlyEvent(t, &Output{Events: n.feEvents}, EvSplice)
	n.feEvents = nil
	sp := ev.Splice
	if !sp.Reuse.On || sp.HandoffPort != c2Tuple.hport || sp.Reuse.ServerNext != uint32(srv.nxt) || sp.Reuse.FrontNext != uint32(srv.rcvNxt) {
		t.Fatalf("Splice %+v: want a reuse of port %d at server %#x, request %#x", sp, c2Tuple.hport, uint32(srv.nxt), uint32(srv.rcvNxt))
	}
	if err := n.shim.sh.AddSplice(&sp, n.now); err != nil {
		t.Fatal(err)
	}
	n.routeFE(n.fe.call(func(out *Output) {
		if err := n.fe.fe.SpliceAcked(id2, n.now, out); err != nil {
			t.Fatal(err)
		}
	}))
	// The request goes on C2 where the first client's bytes ended, with a
	// TSval after the last one C2 carried.
	rs := expectTCP(t, one(t, n.takeServer()), seqIs(srv.rcvNxt), ackIs(srv.nxt), payloadIs(req2))
	reqTS, _, _ := rs.ts()
	if int32(reqTS-lastC2TS) <= 0 {
		t.Errorf("second request's TSval %#x is not after C2's last %#x: the server's PAWS drops it", reqTS, lastC2TS)
	}
	tsShift := reqTS - c2.tsVal // the client's clock onto C2's
	srv.receive(rs)

	// The response reaches the second client in its own numbers.
	srv.tsVal += 40
	resp2 := []byte("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
	got := l.answer(c2, id2, resp2)
	expectTCP(t, got.raw, seqIs(c2.isnF+1), ackIs(c2.nxt), payloadIs(resp2))
	val, ecr, _ := got.ts()
	if ecr != c2.tsVal {
		t.Errorf("reply echoes TSval %#x, want the second client's own %#x", ecr, c2.tsVal)
	}
	for _, v := range feTSvals {
		if int32(val-v) < 0 {
			t.Errorf("reply TSval %#x is behind the front-end's %#x: PAWS drops it", val, v)
		}
	}
	// Its ACK reaches the server in C2's numbers, echoing the server's
	// own TSval.
	n.now += ms
	c2.tsVal++
	n.fromClient(c2.seg(wire.TCPFlagACK, c2.nxt, c2.rcvNxt, nil))
	expectTCP(t, one(t, n.takeServer()), seqIs(srv.rcvNxt), ackIs(srv.nxt), tsIs(c2.tsVal+tsShift, srv.tsVal))

	// The second client closes too: the same C2 goes back to the pool.
	// Its timeline says C2 was reused: no C2 SYN, the handshake's steps
	// at Dispatch.
	n.feEvents = nil
	l.closeToPool(c2, false)
	if ev := eventsOf(&Output{Events: n.feEvents}, EvClosed); len(ev) != 1 || ev[0].Flow != id2 || !ev[0].Timeline.Reused || ev[0].Timeline.C2SYNs != 0 {
		t.Errorf("second client's close: events %+v, want its EvClosed with a reused C2 and no C2 SYN", n.feEvents)
	}
	st := n.fe.fe.Stats()
	if st.C2Pooled != 2 || st.C2Reused != 1 || n.fe.fe.PooledC2s() != 1 {
		t.Errorf("pooled %d, reused %d, in the pool %d; want 2, 1, 1", st.C2Pooled, st.C2Reused, n.fe.fe.PooledC2s())
	}
	if ss := n.shim.sh.Stats(); ss.SplicesReused != 1 || ss.Splices != 2 {
		t.Errorf("shim: %d splices, %d reused; want 2, 1", ss.Splices, ss.SplicesReused)
	}

	// Idle for PoolIdle, it is reset at the server's rcv_nxt, and both
	// engines forget it.
	n.now += 31 * s1
	n.routeFE(n.fe.tick(n.now))
	expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagRST), seqIs(srv.rcvNxt))
	if n.fe.fe.PooledC2s() != 0 || n.fe.fe.Stats().C2PoolExpired != 1 {
		t.Errorf("after PoolIdle: %d pooled, %d expired", n.fe.fe.PooledC2s(), n.fe.fe.Stats().C2PoolExpired)
	}
	for i := 0; i < 4; i++ {
		n.now += 5 * s1
		n.routeFE(n.fe.tick(n.now))
		n.routeShim(n.shim.tick(n.now))
	}
	if n.fe.fe.Flows() != 0 || n.shim.sh.Entries() != 0 || n.fe.fe.NextDeadline() != Never {
		t.Errorf("after the linger: %d flows, %d shim entries, next deadline %v", n.fe.fe.Flows(), n.shim.sh.Entries(), n.fe.fe.NextDeadline())
	}
	n.fe.checkCounters()
	n.shim.checkCounters()
}

// TestC2NotPooledUnlessIdle: a client FIN that comes before it
// acknowledged the response, or with no pooling configured, closes C2 as
// before: the FIN goes to the server.
func TestC2NotPooledUnlessIdle(t *testing.T) {
	for _, c := range []struct {
		name  string
		mod   func(*FrontEndConfig)
		acked bool
	}{
		{"response unacknowledged", pooling, false}, // the Feedback came first: now or never
		{"pooling off", nil, true},
		{"pool full", func(c *FrontEndConfig) { c.PoolC2, c.PoolPerBackend = true, -1 }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newSplicedLoopWith(t, c.mod)
			n, c1 := l.loopNet, l.c
			l.answer(c1, l.id, []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"))
			ack := c1.rcvNxt
			if !c.acked {
				ack--
			}
			n.now += ms
			n.fromClient(c1.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c1.nxt, ack, nil))
			expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagACK|wire.TCPFlagFIN))
			if len(n.toClient) != 0 || n.fe.fe.PooledC2s() != 0 {
				t.Errorf("%d frames to the client, %d pooled", len(n.toClient), n.fe.fe.PooledC2s())
			}
		})
	}
}

// TestPooledC2ClosedByItsServer: the server's FIN on a pooled C2 (its
// keep-alive timeout) reaches the front-end in the shim's copy; the
// front-end resets C2, which frees the server's socket, and forgets it.
// A next request opens a new C2.
func TestPooledC2ClosedByItsServer(t *testing.T) {
	l := newSplicedLoopWith(t, pooling)
	n, srv, c1 := l.loopNet, l.srv, l.c
	l.answer(c1, l.id, []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	l.closeToPool(c1, true)
	n.now += 10 * s1
	n.fromServer(srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, srv.nxt, srv.rcvNxt, nil))
	n.takeClient() // the shim still names the last client, which ignores it
	expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagRST), seqIs(srv.rcvNxt))
	if n.fe.fe.PooledC2s() != 0 || n.fe.fe.Stats().C2PoolClosedByServer != 1 {
		t.Fatalf("%d pooled, %d closed by the server", n.fe.fe.PooledC2s(), n.fe.fe.Stats().C2PoolClosedByServer)
	}
	c2 := newClient(41001, 0x4000_0000, fullOffer(5))
	id2, _ := l.connect(c2, []byte("GET / HTTP/1.1\r\nHost: h\r\n\r\n"))
	n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.Dispatch(id2, testBackend, n.now, out) }))
	expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagSYN), seqIs(c2.isn))
}

// TestPooledC2ServesOnlyMatchingClients: C2's options were its first
// client's; a client that offered other ones gets a C2 of its own.
func TestPooledC2ServesOnlyMatchingClients(t *testing.T) {
	for _, c := range []struct {
		name  string
		offer wire.SynOptions
		reuse bool
	}{
		{"same options", fullOffer(5), true},
		{"no SACK", wire.SynOptions{MSS: 1460, WScale: 7, TS: true, TSVal: 5}, false},
		{"another scale", wire.SynOptions{MSS: 1460, WScale: 6, SACKPermitted: true, TS: true, TSVal: 5}, false},
		{"smaller MSS", wire.SynOptions{MSS: 1200, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newSplicedLoopWith(t, pooling)
			n := l.loopNet
			l.answer(l.c, l.id, []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
			l.closeToPool(l.c, true)
			c2 := newClient(41001, 0x4000_0000, c.offer)
			id2, _ := l.connect(c2, []byte("GET / HTTP/1.1\r\nHost: h\r\n\r\n"))
			n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.Dispatch(id2, testBackend, n.now, out) }))
			toServer := n.takeServer()
			if reused := len(toServer) == 0; reused != c.reuse {
				t.Errorf("reused %v (%d frames to the server), want %v", reused, len(toServer), c.reuse)
			}
		})
	}
}

// TestPooledC2RequestWaitsForItsSplice: on a reused C2 the request goes
// only after the SpliceAck, and a Splice the shim refuses (the C2 was
// not idle there) leaves the client a 503 it may retry: nothing reached
// the server.
func TestPooledC2RequestWaitsForItsSplice(t *testing.T) {
	l := newSplicedLoopWith(t, pooling)
	n := l.loopNet
	l.answer(l.c, l.id, []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	l.closeToPool(l.c, true)
	c2 := newClient(41001, 0x4000_0000, fullOffer(5))
	id2, _ := l.connect(c2, []byte("GET / HTTP/1.1\r\nHost: h\r\n\r\n"))
	n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.Dispatch(id2, testBackend, n.now, out) }))
	onlyEvent(t, &Output{Events: n.feEvents}, EvSplice)
	n.now += 3 * s1
	n.routeFE(n.fe.tick(n.now))
	if len(n.toServer) != 1 {
		t.Fatalf("%d frames to the server after the Splice went unanswered, want C2's reset", len(n.toServer))
	}
	expectTCP(t, n.toServer[0], flagsAre(wire.TCPFlagRST))
	ans := l.clientGetsOn(c2, n.takeClient())
	if !bytes.HasPrefix(ans.payload(), []byte("HTTP/1.1 503")) {
		t.Errorf("client got %q, want a 503", ans.payload())
	}
}

// TestClientFINWaitsForTheFeedback: the client, which has the response
// straight from the shim, often closes before the shim's Feedback
// reaches the front-end. Its FIN waits for it (the server gets the FIN's
// ACK at once), and C2 is pooled when it comes; without it, the FIN goes
// to C2 after PoolFINWait, and the connection closes as without a pool.
func TestClientFINWaitsForTheFeedback(t *testing.T) {
	for _, feedback := range []bool{true, false} {
		l := newSplicedLoopWith(t, pooling)
		n, srv, c1 := l.loopNet, l.srv, l.c
		n.now += ms
		n.fromServer(srv.reply([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")))
		l.clientGetsOn(c1, n.takeClient())
		done := onlyEvent(t, &Output{Events: n.shEvents}, EvResponseDone)
		n.now += ms
		c1.tsVal++
		n.fromClient(c1.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c1.nxt, c1.rcvNxt, nil))
		expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagACK), ackIs(srv.nxt))
		if len(n.toClient) != 0 {
			t.Fatalf("the held FIN was answered before the Feedback")
		}
		n.now += 5 * ms
		n.fromClient(c1.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c1.nxt, c1.rcvNxt, nil)) // sent again: still held
		if len(n.toClient)+len(n.toServer) != 0 {
			t.Fatalf("the FIN sent again moved %d frames", len(n.toClient)+len(n.toServer))
		}
		if feedback {
			n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.ResponseEnded(l.id, endOf(done), n.now, out) }))
			expectTCP(t, one(t, n.takeClient()), flagsAre(wire.TCPFlagACK|wire.TCPFlagFIN), ackIs(c1.nxt+1))
			if n.fe.fe.PooledC2s() != 1 {
				t.Errorf("%d pooled after the Feedback, want 1", n.fe.fe.PooledC2s())
			}
			continue
		}
		n.now += 20 * ms
		n.routeFE(n.fe.tick(n.now))
		expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagACK|wire.TCPFlagFIN), seqIs(srv.rcvNxt), ackIs(srv.nxt))
		if st := n.fe.fe.Stats(); st.C2PoolFINsReleased != 1 || n.fe.fe.PooledC2s() != 0 {
			t.Errorf("%d FINs released, %d pooled; want 1, 0", st.C2PoolFINsReleased, n.fe.fe.PooledC2s())
		}
		// The server closes too, and the connection ends as ever.
		n.fromServer(srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, srv.nxt, srv.rcvNxt+1, nil))
		expectTCP(t, one(t, n.takeClient()), flagsAre(wire.TCPFlagACK|wire.TCPFlagFIN))
		n.fromClient(c1.seg(wire.TCPFlagACK, c1.nxt+1, c1.rcvNxt+1, nil))
		expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagACK))
		n.feEvents = nil
		for i := 0; i < 4; i++ {
			n.now += 5 * s1
			n.routeFE(n.fe.tick(n.now))
			n.routeShim(n.shim.tick(n.now))
		}
		if n.fe.fe.Flows() != 0 || n.shim.sh.Entries() != 0 {
			t.Errorf("after the linger: %d flows, %d shim entries", n.fe.fe.Flows(), n.shim.sh.Entries())
		}
	}
}

// TestPooledC2ForAClientThatAskedToClose: a client's "Connection: close"
// is blanked in the request the server gets, so that it keeps C2 open.
// When the server announces keep-alive, the shim writes close into the
// response and says so in the Feedback, and the front-end closes the
// client's side at once, as the server would have (the client is not
// left in TIME-WAIT); C2 is pooled once the client acknowledged the
// response, the server getting that ACK. When the server announces
// nothing, the client may go on as on any keep-alive connection: asking
// again, it is served; staying quiet, it is closed after PoolCloseWait.
func TestPooledC2ForAClientThatAskedToClose(t *testing.T) {
	req, atServer := closeRequest, closeRequestAtServer
	keepAlive := []byte("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi")
	closed := []byte("HTTP/1.1 200 OK\r\nConnection: close     \r\nContent-Length: 2\r\n\r\nhi")
	silent := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")

	for _, feedbackFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("server says keep-alive, Feedback first %v", feedbackFirst), func(t *testing.T) {
			l := newSplicedLoopAsking(t, pooling, req, atServer)
			n, c1, srv := l.loopNet, l.c, l.srv
			// The shim ends the response with a FIN, as the server would
			// have; the server sent none.
			n.now += ms
			n.fromServer(srv.reply(keepAlive))
			got := l.clientGetsOn(c1, n.takeClient())
			expectTCP(t, got.raw, flagsAre(wire.TCPFlagACK|wire.TCPFlagPSH|wire.TCPFlagFIN), payloadIs(closed))
			c1.rcvNxt++ // its FIN
			done := onlyEvent(t, &Output{Events: n.shEvents}, EvResponseDone)
			n.shEvents = nil
			if !done.CloseSent || !done.FINSent {
				t.Fatalf("Feedback %+v: want CloseSent and FINSent", done)
			}
			feedback := func() {
				n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.ResponseEnded(l.id, endOf(done), n.now, out) }))
			}
			if feedbackFirst {
				feedback()
				if len(n.toClient)+len(n.toServer) != 0 {
					t.Fatalf("the Feedback sent %d frames to the client, %d to the server", len(n.toClient), len(n.toServer))
				}
			}
			// The client acknowledges everything and closes.
			n.now += ms
			c1.tsVal++
			n.fromClient(c1.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c1.nxt, c1.rcvNxt, nil))
			// The server gets the ACK of its last byte, not of a FIN: at
			// once while C2 waits for the Feedback; else C2 is pooled with
			// the ACK owed to it, for a next request to carry, and with
			// none it goes alone after PoolAckDelay.
			if feedbackFirst {
				if len(n.toServer) != 0 {
					t.Fatalf("the ACK that pooled C2 went at once")
				}
				n.now += ms
				n.routeFE(n.fe.tick(n.now))
			}
			expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagACK), seqIs(srv.rcvNxt), ackIs(srv.nxt))
			if !feedbackFirst {
				if len(n.toClient) != 0 {
					t.Fatalf("the client's FIN was answered before the Feedback")
				}
				feedback()
			}
			expectTCP(t, one(t, n.takeClient()), flagsAre(wire.TCPFlagACK), seqIs(c1.rcvNxt), ackIs(c1.nxt+1))
			if n.fe.fe.PooledC2s() != 1 || n.fe.fe.Stats().C2PoolClosedForClient != 1 {
				t.Errorf("%d pooled, %d closed for the client; want 1, 1", n.fe.fe.PooledC2s(), n.fe.fe.Stats().C2PoolClosedForClient)
			}
			if ev := eventsOf(&Output{Events: n.feEvents}, EvClosed); len(ev) != 1 || ev[0].Reason != CloseFIN {
				t.Errorf("events %+v, want one EvClosed fin", n.feEvents)
			}
			// The client never has to resend its FIN, nor the front-end its own.
			n.now += s1
			n.routeFE(n.fe.tick(n.now))
			if len(n.toClient)+len(n.toServer) != 0 {
				t.Errorf("%d frames to the client, %d to the server after the close", len(n.toClient), len(n.toServer))
			}
		})
	}
	for _, quiet := range []bool{true, false} {
		t.Run(fmt.Sprintf("server says nothing, client quiet %v", quiet), func(t *testing.T) {
			l := newSplicedLoopAsking(t, pooling, req, atServer)
			n, c1 := l.loopNet, l.c
			if got := l.answer(c1, l.id, silent); !bytes.Equal(got.payload(), silent) {
				t.Fatalf("client got %q", got.payload())
			}
			n.now += ms
			c1.tsVal++
			n.fromClient(c1.seg(wire.TCPFlagACK, c1.nxt, c1.rcvNxt, nil))
			n.takeServer()
			n.now += 20 * ms
			n.routeFE(n.fe.tick(n.now))
			if len(n.toClient) != 0 {
				t.Fatal("closed at once for a client its response did not tell to close")
			}
			if !quiet {
				n.fromClient(c1.data([]byte("GET /again HTTP/1.1\r\nHost: loop.test\r\n\r\n")))
				if ev := onlyEvent(t, &Output{Events: n.feEvents}, EvRequest); !ev.FollowUp {
					t.Errorf("the second request is not a follow-up: %+v", ev)
				}
				n.now += 2 * s1
				n.routeFE(n.fe.tick(n.now))
				if len(n.toClient) != 0 || n.fe.fe.PooledC2s() != 0 {
					t.Fatalf("closed under a client asking again: %d frames, %d pooled", len(n.toClient), n.fe.fe.PooledC2s())
				}
				return
			}
			n.now += s1
			n.routeFE(n.fe.tick(n.now))
			expectTCP(t, one(t, n.takeClient()), flagsAre(wire.TCPFlagACK|wire.TCPFlagFIN), seqIs(c1.rcvNxt), ackIs(c1.nxt))
			if n.fe.fe.PooledC2s() != 1 {
				t.Errorf("%d pooled, want 1", n.fe.fe.PooledC2s())
			}
		})
	}
}

// endOf is what the Feedback of ev tells the front-end.
func endOf(ev Event) ResponseEnd {
	return ResponseEnd{Seq: ev.ResponseEnd, CloseSent: ev.CloseSent, FINSent: ev.FINSent}
}

// TestClosingClientWithAFullPool: with no room in the pool when the
// response ends, the client's side is taken all the same (the shim's FIN
// is out) and C2 is reset at the server's rcv_nxt, its response over.
func TestClosingClientWithAFullPool(t *testing.T) {
	req, atServer := closeRequest, closeRequestAtServer
	l := newSplicedLoopAsking(t, func(c *FrontEndConfig) { c.PoolC2, c.PoolPerBackend = true, -1 }, req, atServer)
	n, c1, srv := l.loopNet, l.c, l.srv
	n.now += ms
	n.fromServer(srv.reply([]byte("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")))
	expectTCP(t, one(t, n.takeClient()), flagsAre(wire.TCPFlagACK|wire.TCPFlagPSH|wire.TCPFlagFIN))
	c1.rcvNxt = srv.nxt + wire.Seq(l.fe.fe.byID[l.id].seqDelta) + 1
	done := onlyEvent(t, &Output{Events: n.shEvents}, EvResponseDone)
	n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.ResponseEnded(l.id, endOf(done), n.now, out) }))
	expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagRST), seqIs(srv.rcvNxt))
	n.now += ms
	c1.tsVal++
	n.fromClient(c1.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c1.nxt, c1.rcvNxt, nil))
	expectTCP(t, one(t, n.takeClient()), flagsAre(wire.TCPFlagACK), ackIs(c1.nxt+1))
	if len(n.toServer) != 0 || n.fe.fe.PooledC2s() != 0 {
		t.Errorf("%d frames to the server, %d pooled", len(n.toServer), n.fe.fe.PooledC2s())
	}
}

// TestPooledC2EarlyRequestWaitsAtTheShim: the controller may send the
// request on a pooled C2 with its Splice (Reuse.Early). The request
// carries the reuse option, and the shim, which may read it before the
// Splice, holds it for that Splice instead of taking it for the last
// client's; the server's ACK of it, copied to the front-end, is the
// front-end's proof that the Splice is in (EvSpliceTaken, once).
func TestPooledC2EarlyRequestWaitsAtTheShim(t *testing.T) {
	l := newSplicedLoopWith(t, pooling)
	n, srv := l.loopNet, l.srv
	l.poolFirstClient([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"))
	c2 := newClient(41001, 0x4000_0000, fullOffer(5))
	req2 := []byte("GET /early HTTP/1.1\r\nHost: loop.test\r\n\r\n")
	id2, sp := l.dispatchOnPool(c2, req2)
	sp.Reuse.Early = true
	// The request leaves before the shim has the Splice.
	n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.SpliceAcked(id2, n.now, out) }))
	if len(n.toServer) != 0 || len(n.toClient) != 0 {
		t.Fatalf("the early request reached the server (%d frames) or the last client (%d) before its Splice", len(n.toServer), len(n.toClient))
	}
	if st := n.shim.sh.Stats(); st.HeldForReuse != 1 {
		t.Fatalf("%d requests held for their Splice, want 1", st.HeldForReuse)
	}
	if err := n.shim.sh.AddSplice(&sp, n.now); err != nil {
		t.Fatal(err)
	}
	n.routeShim(n.shim.tick(n.now))
	rs := expectTCP(t, one(t, n.takeServer()), seqIs(srv.rcvNxt), payloadIs(req2))
	srv.receive(rs)
	// The server's ACK, copied to the front-end, stands for the SpliceAck.
	n.now += ms
	n.fromServer(srv.seg(wire.TCPFlagACK, srv.nxt, srv.rcvNxt, nil))
	if ev := eventsOf(&Output{Events: n.feEvents}, EvSpliceTaken); len(ev) != 1 || ev[0].Flow != id2 {
		t.Fatalf("events %+v, want one EvSpliceTaken for flow %d", n.feEvents, id2)
	}
	n.feEvents = nil
	l.clientGetsOn(c2, n.takeClient()) // the ACK, translated for the second client
	got := l.answer(c2, id2, []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly"))
	expectTCP(t, got.raw, seqIs(c2.isnF+1), payloadIs([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly")))
	if ev := eventsOf(&Output{Events: n.feEvents}, EvSpliceTaken); len(ev) != 0 {
		t.Errorf("EvSpliceTaken again: %+v", ev)
	}
}

// TestShimHoldsOnlyRequestsMarkedForAnotherSplice: a segment with the
// reuse option of the Splice already in passes; one naming another is
// held, and dropped when no Splice moves the C2 within the handshake
// window.
func TestShimHoldsOnlyRequestsMarkedForAnotherSplice(t *testing.T) {
	sc, _, _ := idleC2(t, ShimConfig{})
	h, srv := sc.h, sc.srv
	m := reuseFor(sc, 60)
	if err := h.sh.AddSplice(&m, t0+10*ms); err != nil {
		t.Fatal(err)
	}
	marked := func(delta, tsOff uint32) []byte {
		opt := []byte{rewriteOptKind, reuseOptLen, 0x51, 0x53, byte(delta >> 24), byte(delta >> 16), byte(delta >> 8), byte(delta), byte(tsOff >> 24), byte(tsOff >> 16), byte(tsOff >> 8), byte(tsOff)}
		return frame(wire.TCPFrame{SrcMAC: feMAC, DstMAC: backendMAC, Src: handoffIP, Dst: backendIP,
			SrcPort: shimHandoffPort, DstPort: webPort, Seq: sc.cliSeq, Ack: srv.nxt, Flags: wire.TCPFlagACK | wire.TCPFlagPSH,
			Window: 300, Options: opt, Payload: request(60)})
	}
	if out := h.input(PortWire, marked(m.Reuse.ClientDelta, m.Reuse.ClientTSOffset), t0+11*ms); len(out.Frames) != 1 || out.Frames[0].Port != PortHost {
		t.Errorf("a request marked for the Splice in place: %d frames out", len(out.Frames))
	}
	if out := h.input(PortWire, marked(m.Reuse.ClientDelta+1, 7), t0+12*ms); len(out.Frames) != 0 {
		t.Errorf("a request marked for another Splice passed")
	}
	h.tick((t0 + 13*ms).Add(DefaultHandshakeWindow))
	if st := h.sh.Stats(); st.HeldForReuse != 1 || st.HeldExpired != 1 {
		t.Errorf("held for reuse %d, expired %d; want 1, 1", st.HeldForReuse, st.HeldExpired)
	}
}

// TestFollowUpOnAPooledC2GoesOnC2sClock: a keep-alive client served on a
// pooled C2 asks again; the follow-up, held until admitted and then sent
// by the front-end itself, carries the client's TSval on C2's clock (the
// server's PAWS check drops one on the client's own, and the request
// never arrives) at C2's sequence numbers.
func TestFollowUpOnAPooledC2GoesOnC2sClock(t *testing.T) {
	l := newSplicedLoopWith(t, pooling)
	n, srv := l.loopNet, l.srv
	l.poolFirstClient([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"))
	c2 := newClient(41001, 0x4000_0000, fullOffer(5))
	id2, sp := l.dispatchOnPool(c2, []byte("GET /1 HTTP/1.1\r\nHost: loop.test\r\n\r\n"))
	firstTS, _, _ := l.installAndSend(id2, sp).ts()
	l.answer(c2, id2, []byte("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1"))
	// The follow-up: held, reported, admitted, sent by the front-end.
	n.now += ms
	c2.tsVal += 10
	follow := []byte("GET /2 HTTP/1.1\r\nHost: loop.test\r\n\r\n")
	n.fromClient(c2.data(follow))
	n.takeServer() // the segment's ACK, sent on at once
	if ev := eventsOf(&Output{Events: n.feEvents}, EvRequest); len(ev) != 1 || !ev[0].FollowUp {
		t.Fatalf("events %+v, want one follow-up request", n.feEvents)
	}
	n.feEvents = nil
	n.routeFE(n.fe.call(func(out *Output) {
		if err := n.fe.fe.Admit(id2, n.now, out); err != nil {
			t.Fatal(err)
		}
	}))
	got := expectTCP(t, one(t, n.takeServer()), seqIs(srv.rcvNxt), payloadIs(follow))
	if v, _, _ := got.ts(); v != firstTS+10 {
		t.Errorf("the follow-up's TSval %#x, want C2's %#x (the client's + its offset)", v, firstTS+10)
	}
}

// TestPooledC2ServerSendsAsFarAsTheLastClientsWindow: the server on a
// pooled C2 sends the next client as much as the last client's window
// allowed, before it hears of the new client's own; the new client's
// ACKs of those bytes are real, and reach the server. (They were
// refused as acknowledging what cannot have been sent, and a 1 MB
// download stalled after 130 KB in the lab.)
func TestPooledC2ServerSendsAsFarAsTheLastClientsWindow(t *testing.T) {
	l := newSplicedLoopWith(t, pooling)
	n, srv := l.loopNet, l.srv
	l.c.window = 0xffff // << 7: 8 MB
	l.poolFirstClient([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"))
	c2 := newClient(41001, 0x4000_0000, fullOffer(5)) // its window: 502 << 7, 64 KB
	id2, sp := l.dispatchOnPool(c2, []byte("GET /big HTTP/1.1\r\nHost: loop.test\r\n\r\n"))
	l.installAndSend(id2, sp)
	for i := range 3 {
		n.fromServer(srv.reply(bytes.Repeat([]byte{byte('a' + i)}, 60000)))
		l.clientGetsOn(c2, n.takeClient())
		n.takeServer()
	}
	n.now += ms
	c2.tsVal++
	n.fromClient(c2.seg(wire.TCPFlagACK, c2.nxt, c2.rcvNxt, nil))
	expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagACK), ackIs(srv.nxt))
	if st := n.fe.fe.Stats(); st.Drops[dropAckOutOfRange] != 0 {
		t.Errorf("%d client ACKs refused as out of range", st.Drops[dropAckOutOfRange])
	}
}

// TestPooledC2sDroppedWhenTheirBackEndRestarts: a back-end that
// restarted lost its shim's entries, so its pooled C2s are reset (at the
// server's rcv_nxt, freeing its socket) and forgotten, and the next
// request opens a new C2; another back-end's pool is not touched.
func TestPooledC2sDroppedWhenTheirBackEndRestarts(t *testing.T) {
	l := newSplicedLoopWith(t, pooling)
	n, srv, c1 := l.loopNet, l.srv, l.c
	l.answer(c1, l.id, []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	l.closeToPool(c1, true)
	var dropped int
	n.routeFE(n.fe.call(func(out *Output) { dropped = n.fe.fe.DropPool(testBackend.ID+1, n.now, out) }))
	if dropped != 0 || len(n.toServer) != 0 || n.fe.fe.PooledC2s() != 1 {
		t.Fatalf("another back-end's restart: %d dropped, %d frames, %d pooled", dropped, len(n.toServer), n.fe.fe.PooledC2s())
	}
	n.routeFE(n.fe.call(func(out *Output) { dropped = n.fe.fe.DropPool(testBackend.ID, n.now, out) }))
	expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagRST), seqIs(srv.rcvNxt))
	if dropped != 1 || n.fe.fe.PooledC2s() != 0 || n.fe.fe.Stats().C2PoolDropped != 1 {
		t.Fatalf("its restart: %d dropped, %d pooled, %d counted", dropped, n.fe.fe.PooledC2s(), n.fe.fe.Stats().C2PoolDropped)
	}
	c2 := newClient(41001, 0x4000_0000, fullOffer(5))
	id2, _ := l.connect(c2, []byte("GET / HTTP/1.1\r\nHost: h\r\n\r\n"))
	n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.Dispatch(id2, testBackend, n.now, out) }))
	expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagSYN), seqIs(c2.isn))
	n.fe.checkCounters()
}

// TestPooledC2sNextRequestCarriesTheOwedAck: the client's last ACK of a
// pooled C2's response is not sent by itself when a next request takes
// the C2 before PoolAckDelay passed (here: before the front-end's timer
// ran): the request's own ACK field acknowledges the response, and no
// ACK goes alone after it.
func TestPooledC2sNextRequestCarriesTheOwedAck(t *testing.T) {
	l := newSplicedLoopWith(t, pooling)
	n, srv := l.loopNet, l.srv
	l.answer(l.c, l.id, []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"))
	respEnd := srv.nxt
	l.closeToPoolOwing(l.c, true)
	if st := n.fe.fe.Stats(); st.C2AcksDeferred != 1 || n.fe.fe.NextDeadline() == Never {
		t.Fatalf("%d ACKs owed, next deadline %v: want 1, its due time", st.C2AcksDeferred, n.fe.fe.NextDeadline())
	}
	c2 := newClient(41001, 0x4000_0000, fullOffer(5))
	id2, sp := l.dispatchOnPool(c2, []byte("GET /second HTTP/1.1\r\nHost: loop.test\r\n\r\n"))
	req := l.installAndSend(id2, sp)
	if req.ack() != respEnd {
		t.Errorf("the request acknowledges %#x, want the last response's end %#x", uint32(req.ack()), uint32(respEnd))
	}
	n.now += 10 * ms
	n.routeFE(n.fe.tick(n.now))
	if fs := n.takeServer(); len(fs) != 0 {
		t.Errorf("%d frames to the server after the request carried the ACK", len(fs))
	}
	if st := n.fe.fe.Stats(); st.C2AcksCarried != 1 || st.C2AcksSentAlone != 0 {
		t.Errorf("ACKs carried %d, sent alone %d: want 1, 0", st.C2AcksCarried, st.C2AcksSentAlone)
	}
	n.fe.checkCounters()
}

// TestPooledC2OwedAckGoesWhileTheRequestWaits: a request on a reused C2
// that waits for a back-end slot (HoldSplice) does not keep the owed ACK
// from the server past PoolAckDelay: it goes alone on C2, at the
// server's next byte, with a TSval after the last C2 carried; the request
// follows when the slot comes.
func TestPooledC2OwedAckGoesWhileTheRequestWaits(t *testing.T) {
	l := newSplicedLoopWith(t, pooling)
	n, srv := l.loopNet, l.srv
	l.answer(l.c, l.id, []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"))
	l.closeToPoolOwing(l.c, true)
	lastTS := l.c.tsVal
	c2 := newClient(41001, 0x4000_0000, fullOffer(5))
	id2, sp := l.dispatchOnPool(c2, []byte("GET /second HTTP/1.1\r\nHost: loop.test\r\n\r\n"))
	if err := n.shim.sh.AddSplice(&sp, n.now); err != nil {
		t.Fatal(err)
	}
	if err := n.fe.fe.HoldSplice(id2, n.now); err != nil {
		t.Fatal(err)
	}
	n.now += ms
	n.routeFE(n.fe.tick(n.now))
	ack := expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagACK), seqIs(srv.rcvNxt), ackIs(srv.nxt), payloadIs(nil))
	if v, ecr, _ := ack.ts(); int32(v-lastTS) <= 0 || ecr != srv.tsVal {
		t.Errorf("owed ACK TS %#x echoing %#x: want after the last client's %#x, echoing the server's %#x", v, ecr, lastTS, srv.tsVal)
	}
	srv.receive(ack)
	if st := n.fe.fe.Stats(); st.C2AcksSentAlone != 1 {
		t.Errorf("%d ACKs sent alone, want 1", st.C2AcksSentAlone)
	}
	n.now += ms
	n.routeFE(n.fe.tick(n.now))
	if fs := n.takeServer(); len(fs) != 0 {
		t.Fatalf("%d more frames to the server while the request waits", len(fs))
	}
	n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.SpliceAcked(id2, n.now, out) }))
	expectTCP(t, one(t, n.takeServer()), seqIs(srv.rcvNxt), ackIs(srv.nxt))
	n.fe.checkCounters()
}

// TestRefusedReuseGoesOnANewC2: a Splice reusing a pooled C2 the shim no
// longer knows (it restarted) is refused; the front-end resets that C2
// at the server's rcv_nxt and dispatches the flow again on a new C2 (a
// SYN with the client's ISN, a Splice without Reuse), whether the
// request had waited for the SpliceAck or gone early with the Splice.
// A flow whose server had the request is not dispatched again.
func TestRefusedReuseGoesOnANewC2(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprintf("early %v", early), func(t *testing.T) {
			l := newSplicedLoopWith(t, pooling)
			n, srv := l.loopNet, l.srv
			l.poolFirstClient([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"))
			for _, ent := range n.shim.sh.entries {
				n.shim.sh.remove(ent) // the shim restarted
			}
			c2 := newClient(41001, 0x4000_0000, fullOffer(5))
			id2, sp := l.dispatchOnPool(c2, []byte("GET /second HTTP/1.1\r\nHost: loop.test\r\n\r\n"))
			if err := n.shim.sh.AddSplice(&sp, n.now); !errors.Is(err, ErrSpliceNotIdle) {
				t.Fatalf("AddSplice of a reuse the shim does not know: %v", err)
			}
			if early {
				n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.SpliceAcked(id2, n.now, out) }))
				n.takeServer() // the marked request, which nothing holds now
			}
			n.now += ms
			n.routeFE(n.fe.call(func(o *Output) {
				if err := n.fe.fe.RedispatchRefused(id2, false, n.now, o); err != nil {
					t.Fatal(err)
				}
			}))
			fs := n.takeServer()
			if len(fs) != 2 {
				t.Fatalf("%d frames to the server, want the old C2's RST and the new one's SYN", len(fs))
			}
			expectTCP(t, fs[0], flagsAre(wire.TCPFlagRST), seqIs(srv.rcvNxt), from(handoffIP, sp.HandoffPort))
			syn := expectTCP(t, fs[1], flagsAre(wire.TCPFlagSYN), seqIs(c2.isn))
			if uint16(syn.tcp.SrcPort) == sp.HandoffPort {
				t.Errorf("the new C2 took the refused one's port %d", sp.HandoffPort)
			}
			if f := n.fe.fe.byID[id2]; f.state != stConnecting || f.reused || f.cliTSOff != 0 || f.rw.on {
				t.Errorf("flow after the redispatch: state %v, reused %v, TS offset %d, rewrite %v: want a new C2's", f.state, f.reused, f.cliTSOff, f.rw.on)
			}
			st := n.fe.fe.Stats()
			if st.C2ReusesRefused != 1 || st.HandoffsDone != 1 || n.fe.fe.PooledC2s() != 0 {
				t.Errorf("refused %d, handoffs done %d, pooled %d: want 1, 1 (the first client's), 0", st.C2ReusesRefused, st.HandoffsDone, n.fe.fe.PooledC2s())
			}
			// The new C2 serves the client as any would.
			srv2 := newServer(0x7000_0000, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 900})
			n.now += ms
			n.fromServer(srv2.synAck(syn))
			sp2 := onlyEvent(t, &Output{Events: n.feEvents}, EvSplice).Splice
			n.feEvents = nil
			l.srv = srv2
			req := l.installAndSend(id2, sp2)
			if !bytes.Contains(req.payload(), []byte("GET /second")) {
				t.Fatalf("the server got %q on the new C2", req.payload())
			}
			resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
			if got := l.answer(c2, id2, resp); !bytes.Equal(got.payload(), resp) {
				t.Errorf("the client got %q", got.payload())
			}
			n.fe.checkCounters()
		})
	}
	t.Run("server had the request", func(t *testing.T) {
		l := newSplicedLoopWith(t, pooling)
		n := l.loopNet
		l.poolFirstClient([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"))
		c2 := newClient(41001, 0x4000_0000, fullOffer(5))
		id2, sp := l.dispatchOnPool(c2, []byte("GET /second HTTP/1.1\r\nHost: loop.test\r\n\r\n"))
		l.installAndSend(id2, sp)
		n.fromServer(l.srv.seg(wire.TCPFlagACK, l.srv.nxt, l.srv.rcvNxt, nil)) // its ACK of the request
		n.routeFE(n.fe.call(func(o *Output) {
			if err := n.fe.fe.RedispatchRefused(id2, false, n.now, o); !errors.Is(err, ErrFlowState) {
				t.Errorf("RedispatchRefused after the server's ACK: %v, want ErrFlowState", err)
			}
		}))
	})
}

// TestPooledC2AckAtOnceWithoutADelay: with PoolAckDelay negative the
// ACK that pools C2 goes to the server at once, at its next byte, with
// a TSval after the client's.
func TestPooledC2AckAtOnceWithoutADelay(t *testing.T) {
	l := newSplicedLoopWith(t, func(c *FrontEndConfig) { pooling(c); c.PoolAckDelay = -1 })
	n, srv, c := l.loopNet, l.srv, l.c
	l.answer(c, l.id, []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"))
	n.now += ms
	c.tsVal += 3
	n.fromClient(c.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c.nxt, c.rcvNxt, nil))
	ack := expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagACK), seqIs(srv.rcvNxt), ackIs(srv.nxt), payloadIs(nil))
	if v, ecr, _ := ack.ts(); int32(v-c.tsVal) < 0 || ecr != srv.tsVal {
		t.Errorf("ACK TS %#x echoing %#x: want from %#x on, echoing the server's %#x", v, ecr, c.tsVal, srv.tsVal)
	}
	if st := n.fe.fe.Stats(); st.C2AcksDeferred != 0 || n.fe.fe.PooledC2s() != 1 {
		t.Errorf("%d ACKs deferred, %d pooled: want 0, 1", st.C2AcksDeferred, n.fe.fe.PooledC2s())
	}
	n.fe.checkCounters()
}

// A request whose client asked to close, as the client sends it and as
// the server gets it, the option blanked (closeAsAsked).
var (
	closeRequest         = []byte("GET /c HTTP/1.1\r\nHost: loop.test\r\nConnection: close\r\n\r\n")
	closeRequestAtServer = []byte("GET /c HTTP/1.1\r\nHost: loop.test\r\nConnection:      \r\n\r\n")
)

// closingClientServed splices closeRequest, the server's clock run
// ahead by clockAhead, and serves a keep-alive response that the shim
// ends with a FIN; the client has it. It returns the loop, the shim's
// EvResponseDone (taken from the loop) and the response as the client
// saw it.
func closingClientServed(t *testing.T, clockAhead uint32) (*splicedLoop, Event, *seen) {
	t.Helper()
	l := newSplicedLoopAsking(t, pooling, closeRequest, closeRequestAtServer)
	n, c1, srv := l.loopNet, l.c, l.srv
	n.now += ms
	srv.tsVal += clockAhead
	n.fromServer(srv.reply([]byte("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi")))
	resp := l.clientGetsOn(c1, n.takeClient())
	c1.rcvNxt++ // the shim's FIN
	done := onlyEvent(t, &Output{Events: n.shEvents}, EvResponseDone)
	n.shEvents = nil
	return l, done, resp
}

// TestPooledC2TakesBackTheAckOfItsPass: a client that asked to close
// acknowledges the response (and the shim's FIN) with a pure ACK, which
// the front-end forwards; the shim's Feedback comes in the same pass of
// the daemon, after it. The ACK, still in the pass's output, is taken
// back (its frame left without Data) and owed to the pooled C2 instead:
// the next request carries it and the server never gets it by itself.
// In a later pass it is too late: the ACK went, and nothing is owed.
func TestPooledC2TakesBackTheAckOfItsPass(t *testing.T) {
	for _, samePass := range []bool{true, false} {
		t.Run(fmt.Sprintf("same pass %v", samePass), func(t *testing.T) {
			l, done, _ := closingClientServed(t, 0)
			n, c1, srv := l.loopNet, l.c, l.srv
			respEnd := srv.nxt
			n.now += ms
			c1.tsVal++
			ack := c1.seg(wire.TCPFlagACK, c1.nxt, c1.rcvNxt, nil)
			feedback := func(out *Output) { n.fe.fe.ResponseEnded(l.id, endOf(done), n.now, out) }
			if samePass {
				n.routeFE(n.fe.call(func(out *Output) {
					n.fe.fe.Input(ack, n.now, out)
					n.fe.inputs++
					if len(out.Frames) != 1 || out.Frames[0].Data == nil {
						t.Fatalf("the client's ACK: %d frames", len(out.Frames))
					}
					feedback(out)
					if out.Frames[0].Data != nil {
						t.Errorf("the ACK is still in the pass's frames after the Feedback pooled C2")
					}
				}))
			} else {
				n.fromClient(ack)
				expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagACK), ackIs(respEnd+1-1))
				n.routeFE(n.fe.call(feedback))
			}
			if len(n.toServer) != 0 || n.fe.fe.PooledC2s() != 1 {
				t.Fatalf("%d frames to the server, %d pooled: want none, 1", len(n.toServer), n.fe.fe.PooledC2s())
			}
			st := n.fe.fe.Stats()
			if want := map[bool]uint64{true: 1, false: 0}[samePass]; st.C2AcksTakenBack != want || st.C2AcksDeferred != want {
				t.Fatalf("ACKs taken back %d, deferred %d: want %d each", st.C2AcksTakenBack, st.C2AcksDeferred, want)
			}
			// The client closes; the front-end, whose FIN is out, answers.
			n.now += ms
			c1.tsVal++
			n.fromClient(c1.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c1.nxt, c1.rcvNxt, nil))
			expectTCP(t, one(t, n.takeClient()), flagsAre(wire.TCPFlagACK), ackIs(c1.nxt+1))
			if len(n.toServer) != 0 {
				t.Fatalf("the client's FIN sent %d frames to the server", len(n.toServer))
			}
			// The next client's request carries the ACK (or needs none).
			c2 := newClient(41001, 0x4000_0000, fullOffer(5))
			id2, sp := l.dispatchOnPool(c2, []byte("GET /second HTTP/1.1\r\nHost: loop.test\r\n\r\n"))
			if r := l.installAndSend(id2, sp); r.ack() != respEnd {
				t.Errorf("the next request acknowledges %#x, want the response's end %#x", uint32(r.ack()), uint32(respEnd))
			}
			n.now += 10 * ms
			n.routeFE(n.fe.tick(n.now))
			if fs := n.takeServer(); len(fs) != 0 {
				t.Errorf("%d frames to the server after the request", len(fs))
			}
			if st := n.fe.fe.Stats(); st.C2AcksSentAlone != 0 {
				t.Errorf("%d ACKs sent alone", st.C2AcksSentAlone)
			}
			n.fe.checkCounters()
		})
	}
}

// TestAnswerAfterTheShimsFINKeepsUpWithTheResponsesClock: the front-end
// answers the client's FIN after a response the shim ended with a FIN,
// whose Feedback came before the client's ACK of it. The response's
// TSvals (the server's clock, translated) run ahead of the front-end's
// own clock here, as on a C2 that waited in the pool; the front-end's ACK
// must not carry a TSval behind the one the client echoes, or the client
// drops it (PAWS) and sends its FIN again after its timeout. (Measured
// in the lab before the fix: a third of the clients sent their FIN two
// or three times, 200 ms apart.)
func TestAnswerAfterTheShimsFINKeepsUpWithTheResponsesClock(t *testing.T) {
	l, done, resp := closingClientServed(t, 100_000) // 100 s of the server's clock the front-end's has not seen
	n, c1 := l.loopNet, l.c
	respTS, _, _ := resp.ts()
	n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.ResponseEnded(l.id, endOf(done), n.now, out) }))
	n.now += ms
	c1.tsVal++
	n.fromClient(c1.seg(wire.TCPFlagACK, c1.nxt, c1.rcvNxt, nil)) // echoes respTS
	n.takeServer()
	c1.tsVal++
	n.fromClient(c1.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c1.nxt, c1.rcvNxt, nil))
	ack := expectTCP(t, one(t, n.takeClient()), flagsAre(wire.TCPFlagACK), ackIs(c1.nxt+1))
	if v, _, _ := ack.ts(); int32(v-respTS) < 0 {
		t.Errorf("the ACK of the client's FIN carries TSval %#x, behind the response's %#x that the client echoed", v, respTS)
	}
}
