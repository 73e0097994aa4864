package splice

import (
	"bytes"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// loopNet joins a scripted client, a FrontEnd, a Shim and a scripted
// server in memory: frames go where their destination MAC (or the shim's
// port) sends them, until nothing is left moving.
type loopNet struct {
	t        *testing.T
	fe       *feHarness
	shim     *shimHarness
	now      Time
	toClient [][]byte
	toServer [][]byte
	feEvents []Event
	shEvents []Event
	// holdFE keeps the shim's frames for the front-end in heldFE until
	// releaseFE, so that the client's answer to a reply can reach the
	// front-end before the shim's copy of it.
	holdFE bool
	heldFE [][]byte
}

// releaseFE hands the front-end the shim's frames held for it.
func (n *loopNet) releaseFE() {
	held := n.heldFE
	n.heldFE = nil
	for _, f := range held {
		n.routeFE(n.fe.input(f, n.now))
	}
}

func (n *loopNet) routeFE(out *Output) {
	n.feEvents = append(n.feEvents, out.Events...)
	for _, f := range copyFrames(out) {
		switch wire.Ethernet(f).Dst() {
		case backendMAC:
			n.routeShim(n.shim.input(PortWire, f, n.now))
		case routerMAC:
			n.toClient = append(n.toClient, f)
		default:
			n.t.Fatalf("front-end sent a frame to %v", wire.Ethernet(f).Dst())
		}
	}
}

func (n *loopNet) routeShim(out *Output) {
	n.shEvents = append(n.shEvents, out.Events...)
	for _, f := range out.Frames {
		b := append([]byte(nil), f.Data...)
		switch {
		case f.Port == PortHost:
			n.toServer = append(n.toServer, b)
		case wire.Ethernet(b).Dst() == feMAC && n.holdFE:
			n.heldFE = append(n.heldFE, b)
		case wire.Ethernet(b).Dst() == feMAC:
			n.routeFE(n.fe.input(b, n.now))
		case wire.Ethernet(b).Dst() == routerMAC:
			n.toClient = append(n.toClient, b)
		default:
			n.t.Fatalf("shim sent a frame to %v", wire.Ethernet(b).Dst())
		}
	}
}

func (n *loopNet) fromClient(f []byte) { n.routeFE(n.fe.input(f, n.now)) }
func (n *loopNet) fromServer(f []byte) { n.routeShim(n.shim.input(PortHost, f, n.now)) }

// takeClient returns and forgets the frames the client received.
func (n *loopNet) takeClient() [][]byte { fs := n.toClient; n.toClient = nil; return fs }
func (n *loopNet) takeServer() [][]byte { fs := n.toServer; n.toServer = nil; return fs }

// closedAfterLinger runs both engines' timers past the linger of a
// connection both sides closed with FIN, and checks that both forgot it,
// the front-end reporting a FIN close, and that nothing else moved.
func (n *loopNet) closedAfterLinger() {
	t := n.t
	t.Helper()
	for i := 0; i < 4; i++ {
		n.now += 5 * s1
		n.routeFE(n.fe.tick(n.now))
		n.routeShim(n.shim.tick(n.now))
	}
	if n.fe.fe.Flows() != 0 || n.shim.sh.Entries() != 0 {
		t.Errorf("after the linger: %d flows, %d shim entries", n.fe.fe.Flows(), n.shim.sh.Entries())
	}
	if ev := eventsOf(&Output{Events: n.feEvents}, EvClosed); len(ev) != 1 || ev[0].Reason != CloseFIN {
		t.Errorf("front-end events %+v, want one EvClosed fin", n.feEvents)
	}
	if len(n.toClient) != 0 || len(n.toServer) != 0 {
		t.Errorf("stray frames (a resent request, a challenge): %d to the client, %d to the server", len(n.toClient), len(n.toServer))
	}
}

// one asserts exactly one frame arrived.
func one(t *testing.T, fs [][]byte) []byte {
	t.Helper()
	if len(fs) != 1 {
		t.Fatalf("%d frames arrived, want 1", len(fs))
	}
	return fs[0]
}

// splicedLoop is a loopNet with one client connection spliced: the
// front-end answered the handshake, read the request, opened C2 and
// handed over; the server has the request.
type splicedLoop struct {
	*loopNet
	c        *testClient
	srv      *testServer
	id       FlowID
	req      []byte
	feTSvals []uint32 // every TSval the front-end itself sent the client
}

// clientGets checks that fs come from the VIP to the client and lets
// the client take them.
func (l *splicedLoop) clientGets(fs [][]byte) []*seen {
	l.t.Helper()
	var ss []*seen
	for _, f := range fs {
		s := expectTCP(l.t, f, ethTo(routerMAC), from(vipA, webPort), to(clientIP, l.c.port))
		l.c.receive(s)
		ss = append(ss, s)
	}
	return ss
}

func newSplicedLoop(t *testing.T) *splicedLoop { return newSplicedLoopWith(t, nil) }

// newSplicedLoopWith is newSplicedLoop with the front-end's
// configuration adjusted by mod.
func newSplicedLoopWith(t *testing.T, mod func(*FrontEndConfig)) *splicedLoop {
	return newSplicedLoopAsking(t, mod, nil, nil)
}

// newSplicedLoopAsking is newSplicedLoopWith for the request req (nil:
// the usual one), which reaches the server as atServer (nil: as it is).
func newSplicedLoopAsking(t *testing.T, mod func(*FrontEndConfig), req, atServer []byte) *splicedLoop {
	t.Helper()
	n := &loopNet{t: t, fe: newFE(t, mod), shim: newShim(t, ShimConfig{}), now: t0}
	l := &splicedLoop{loopNet: n, c: newClient(41000, 0xfffffe00, fullOffer(123456)),
		srv: newServer(0x00000100, wire.SynOptions{MSS: 1460, WScale: 9, SACKPermitted: true, TS: true, TSVal: 0xfffffff0})}
	c, srv := l.c, l.srv

	// Handshake and request, answered by the front-end itself.
	n.fromClient(c.syn())
	sa := l.clientGets(n.takeClient())[0]
	c.isnF, c.rcvNxt, c.ts = sa.seq(), sa.seq()+1, true
	v, _, _ := sa.ts()
	l.feTSvals = append(l.feTSvals, v)
	n.now += ms
	c.tsVal++
	n.fromClient(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil))
	l.req = []byte("GET /loop HTTP/1.1\r\nHost: loop.test\r\n\r\n")
	if req != nil {
		l.req = req
	}
	if atServer == nil {
		atServer = l.req
	}
	n.now += ms
	n.fromClient(c.data(l.req))
	for _, s := range l.clientGets(n.takeClient()) {
		v, _, _ := s.ts()
		l.feTSvals = append(l.feTSvals, v)
	}
	l.id = onlyEvent(t, &Output{Events: n.feEvents}, EvRequest).Flow
	n.feEvents = nil

	// Dispatch: the C2 SYN crosses the shim untouched.
	n.now += ms
	n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.Dispatch(l.id, testBackend, n.now, out) }))
	syn := expectTCP(t, one(t, n.takeServer()), seqIs(c.isn))
	n.now += ms
	n.fromServer(srv.synAck(syn))
	for _, f := range n.takeServer() {
		srv.receive(decodeTCP(t, f)) // the C2 ACK
	}
	ev := onlyEvent(t, &Output{Events: n.feEvents}, EvSplice)
	n.feEvents = nil

	// The control message is slow: nothing reaches the server meanwhile,
	// so no reply can get ahead of the translation.
	for i := 0; i < 5; i++ {
		n.now += 10 * ms
		n.routeFE(n.fe.tick(n.now))
		n.routeShim(n.shim.tick(n.now))
	}
	if len(n.toServer) != 0 || len(n.toClient) != 0 {
		t.Fatalf("%d frames to the server, %d to the client before the splice was acknowledged", len(n.toServer), len(n.toClient))
	}
	if err := n.shim.sh.AddSplice(&ev.Splice, n.now); err != nil {
		t.Fatal(err)
	}
	n.routeFE(n.fe.call(func(out *Output) { n.fe.fe.SpliceAcked(l.id, n.now, out) }))
	var got []byte
	for _, f := range n.takeServer() {
		s := decodeTCP(t, f)
		srv.receive(s)
		got = append(got, s.payload()...)
	}
	if !bytes.Equal(got, atServer) {
		t.Fatalf("server received %q, want %q", got, atServer)
	}
	return l
}

func TestWholeLoopInMemory(t *testing.T) {
	l := newSplicedLoop(t)
	n, c, srv, id, feTSvals, clientGets := l.loopNet, l.c, l.srv, l.id, l.feTSvals, l.clientGets

	// The server answers straight to the client through the shim; its
	// clock wraps past 2^32 on the way.
	body := [][]byte{[]byte("HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n"), bytes.Repeat([]byte("b"), 1000), bytes.Repeat([]byte("c"), 1000)}
	var replies []*seen
	for _, b := range body {
		n.now += 2 * ms
		srv.tsVal += 7
		n.fromServer(srv.reply(b))
		replies = append(replies, clientGets(n.takeClient())...)
	}
	if len(n.feEvents) != 0 || len(n.toServer) != 0 {
		t.Fatalf("the front-end reacted to the shim's copies: %+v", n.feEvents)
	}
	seq := c.isnF + 1
	for i, r := range replies {
		expectTCP(t, r.raw, seqIs(seq), ackIs(c.nxt), payloadIs(body[i]), windowIs(1000<<9>>7))
		seq += wire.Seq(len(body[i]))
		v, _, _ := r.ts()
		for _, fv := range feTSvals {
			if int32(v-fv) < 0 {
				t.Errorf("reply %d: TSval %#x is older than the front-end's %#x: PAWS drops it", i, v, fv)
			}
		}
	}

	// The client acknowledges with a SACK of the last block: the server
	// sees both in its own numbers.
	n.now += ms
	c.tsVal++
	end := c.isnF + 1 + wire.Seq(len(body[0])+2000)
	n.fromClient(c.seg(wire.TCPFlagACK, c.nxt, end-1000, nil, wire.SACKBlock{Left: end - 1000 + 500, Right: end}))
	ack := expectTCP(t, one(t, n.takeServer()), ackIs(srv.nxt-1000), tsIs(c.tsVal, srv.tsVal))
	if sb := ack.sackBlocks(); len(sb) != 1 || sb[0].Left != srv.nxt-500 || sb[0].Right != srv.nxt {
		t.Errorf("server sees SACK %v, want %#x-%#x", sb, uint32(srv.nxt-500), uint32(srv.nxt))
	}
	n.now += ms
	n.fromClient(c.seg(wire.TCPFlagACK, c.nxt, end, nil))
	expectTCP(t, one(t, n.takeServer()), ackIs(srv.nxt))

	// The response is reported once the connection goes quiet.
	n.now += 25 * ms
	n.routeShim(n.shim.tick(n.now))
	done := onlyEvent(t, &Output{Events: n.shEvents}, EvResponseDone)
	if done.RequestID != uint64(id) || done.Bytes != 2000+uint64(len(body[0])) || done.ServiceTime != 6*time.Millisecond {
		t.Errorf("EvResponseDone %+v", done)
	}

	// Both close; everything is forgotten after the linger.
	n.now += ms
	n.fromServer(srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, srv.nxt, srv.rcvNxt, nil))
	expectTCP(t, one(t, n.takeClient()), flagsAre(wire.TCPFlagACK|wire.TCPFlagFIN), seqIs(end))
	n.fromClient(c.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c.nxt, end+1, nil))
	expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagACK|wire.TCPFlagFIN), ackIs(srv.nxt+1))
	n.closedAfterLinger()
	n.fe.checkCounters()
	n.shim.checkCounters()
}

// The shim sends the client its reply before the front-end its copy
// (shim_translate.go), so the client's answer may reach the front-end
// first: its ACK of the reply that acknowledges the request, its FIN after
// the server's. The front-end takes both and the copies after them, and
// the connection ends as when the copies come first: nothing resent,
// nothing dropped, a clean close after the linger.
func TestFrontEndTakesTheShimsCopiesAfterTheClientsAnswer(t *testing.T) {
	l := newSplicedLoop(t)
	n, c, srv := l.loopNet, l.c, l.srv
	n.holdFE = true

	// The first reply acknowledges the request; the client answers it
	// before the front-end learns the request is acknowledged.
	n.now += ms
	n.fromServer(srv.reply([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")))
	l.clientGets(n.takeClient())
	if len(n.heldFE) != 1 {
		t.Fatalf("%d copies for the front-end, want the one of the request's ACK", len(n.heldFE))
	}
	n.now += ms
	n.fromClient(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil))
	expectTCP(t, one(t, n.takeServer()), ackIs(srv.nxt))
	n.releaseFE()

	// The server closes; the client's FIN, acknowledging the server's,
	// comes before the copy of that FIN.
	n.now += ms
	n.fromServer(srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, srv.nxt, srv.rcvNxt, nil))
	expectTCP(t, one(t, n.takeClient()), flagsAre(wire.TCPFlagACK|wire.TCPFlagFIN))
	if len(n.heldFE) != 1 {
		t.Fatalf("%d copies for the front-end, want the one of the server's FIN", len(n.heldFE))
	}
	n.now += ms
	n.fromClient(c.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c.nxt, c.rcvNxt+1, nil))
	expectTCP(t, one(t, n.takeServer()), flagsAre(wire.TCPFlagACK|wire.TCPFlagFIN), ackIs(srv.nxt+1))
	n.releaseFE()
	n.holdFE = false

	n.closedAfterLinger()
	if st := n.fe.fe.Stats(); st.Retransmits != 0 {
		t.Errorf("the front-end resent the request %d times", st.Retransmits)
	}
	n.fe.checkCounters()
	n.shim.checkCounters()
}
