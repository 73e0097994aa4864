package splice

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// A keep-alive connection through both engines in memory (loopNet) whose
// requests are rewritten or not at random: the back-end must receive
// exactly the rewritten stream, byte for byte wherever a segment lands,
// and the client exactly the responses, with every ACK in its own numbers.

type rewriteScenario struct {
	offer    wire.SynOptions
	isn, isB wire.Seq
	reqs     []rewriteReq
}

type rewriteReq struct {
	path, target string // target "" keeps the client's path
	query        string // "?..." or ""
	chunk        int    // the client's segment size
	resend       bool   // the client resends its request's segments after the response
	lose         bool   // every C2 data segment of the handoff or admission is lost
}

// runRewriteScenario drives sc and fails tb on the first discrepancy.
func runRewriteScenario(tb testing.TB, sc rewriteScenario) {
	t, ok := tb.(*testing.T)
	if !ok {
		tb.Fatal("needs a *testing.T")
	}
	n := &loopNet{t: t, fe: newFE(tb, nil), shim: newShim(tb, ShimConfig{}), now: t0}
	c := newClient(41000, sc.isn, sc.offer)
	srv := newServer(sc.isB, wire.SynOptions{MSS: 1460, WScale: 9, SACKPermitted: true, TS: true, TSVal: 0xfffff000})

	// The back-end's stream, from isn+1: expected, received (rcvd[i]
	// is valid where has[i]), and its in-order length.
	var want, rcvd []byte
	var has []bool
	got := 0
	base := sc.isn + 1
	srvGets := func() {
		for _, f := range n.takeServer() {
			s := expectTCP(tb, f, to(backendIP, webPort))
			if v, _, ok := s.ts(); ok {
				srv.peerTS = v
			}
			p := s.payload()
			off := int(int32(s.seq() - base))
			if len(p) == 0 {
				continue
			}
			if off < 0 || off+len(p) > len(want) {
				tb.Fatalf("back-end segment at offset %d+%d; expects %d bytes", off, len(p), len(want))
			}
			for len(rcvd) < len(want) {
				rcvd, has = append(rcvd, 0), append(has, false)
			}
			for i, b := range p {
				if want[off+i] != b || has[off+i] && rcvd[off+i] != b {
					tb.Fatalf("back-end byte %d is %q, want %q (stream so far %q)", off+i, b, want[off+i], rcvd[:got])
				}
				rcvd[off+i], has[off+i] = b, true
			}
			for got < len(has) && has[got] {
				got++
			}
			srv.rcvNxt = base + wire.Seq(got)
		}
	}
	var resp, cliGot []byte
	clientGets := func() {
		for _, f := range n.takeClient() {
			s := expectTCP(tb, f, from(vipA, webPort), to(clientIP, c.port))
			if c.nxt.LessThan(s.ack()) {
				tb.Fatalf("the client is acknowledged %#x, past what it sent (%#x)", uint32(s.ack()), uint32(c.nxt))
			}
			if p := s.payload(); len(p) > 0 {
				if s.seq() != c.rcvNxt {
					tb.Fatalf("reply at %#x, client expects %#x", uint32(s.seq()), uint32(c.rcvNxt))
				}
				cliGot = append(cliGot, p...)
			}
			c.receive(s)
		}
	}

	// route delivers the front-end's frames, all but its C2 data
	// segments if lose is set.
	route := func(out *Output, lose bool) {
		if lose {
			kept := out.Frames[:0]
			for _, f := range out.Frames {
				if wire.Ethernet(f.Data).Dst() != backendMAC || len(decodeTCP(tb, f.Data).payload()) == 0 {
					kept = append(kept, f)
				}
			}
			out.Frames = kept
		}
		n.routeFE(out)
	}

	n.fromClient(c.syn())
	sa := decodeTCP(tb, one(t, n.takeClient()))
	c.isnF, c.rcvNxt = sa.seq(), sa.seq()+1
	c.peerTS, _, c.ts = sa.ts()
	n.fromClient(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil))
	var id FlowID
	for k, r := range sc.reqs {
		tb.Logf("request %d: %+v", k, r)
		req := []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: www.example.test\r\n\r\n", r.path+r.query))
		start := c.nxt
		var segs [][]byte
		for off := 0; off < len(req); off += r.chunk {
			n.now += ms
			c.tsVal++
			seg := c.data(req[off:min(off+r.chunk, len(req))])
			segs = append(segs, seg)
			n.fromClient(seg)
			clientGets()
		}
		var ev *Event
		for i := range n.feEvents {
			if n.feEvents[i].Kind == EvRequest {
				ev = &n.feEvents[i]
			}
		}
		if ev == nil || ev.Request.Path != r.path {
			tb.Fatalf("request %d: events %+v", k, n.feEvents)
		}
		id = ev.Flow
		n.feEvents = nil
		onC2 := req
		if r.target != "" {
			if err := n.fe.fe.Rewrite(id, []byte(r.target)); err != nil {
				tb.Fatalf("request %d: Rewrite: %v", k, err)
			}
			onC2 = withTarget(req, r.target)
		}
		want = append(want, onC2...)
		n.now += ms
		if k == 0 {
			n.routeFE(n.fe.call(func(out *Output) {
				if err := n.fe.fe.Dispatch(id, testBackend, n.now, out); err != nil {
					tb.Fatal(err)
				}
			}))
			syn := decodeTCP(tb, one(t, n.takeServer()))
			n.fromServer(srv.synAck(syn))
			sp := onlyEvent(tb, &Output{Events: n.feEvents}, EvSplice).Splice
			n.feEvents = nil
			if err := n.shim.sh.AddSplice(&sp, n.now); err != nil {
				tb.Fatal(err)
			}
			route(n.fe.call(func(out *Output) { n.fe.fe.SpliceAcked(id, n.now, out) }), r.lose)
		} else {
			route(n.fe.call(func(out *Output) {
				if err := n.fe.fe.Admit(id, n.now, out); err != nil {
					tb.Fatal(err)
				}
			}), r.lose)
		}
		srvGets()
		clientGets()
		if r.lose {
			// The front-end resends what only it has; the client what
			// nobody acknowledged (for a follow-up, all but the target).
			// NextDeadline may be an earlier, stale time: tick until the
			// resend comes.
			// Only the front-end's own bytes (a first request, a new
			// target) have a timer; the client resends the rest.
			owns := k == 0 || r.target != ""
			for i := 0; owns && i < 4 && len(n.toServer) == 0; i++ {
				n.now = max(n.now, n.fe.fe.NextDeadline())
				n.routeFE(n.fe.tick(n.now))
			}
			if owns && len(n.toServer) == 0 {
				tb.Fatalf("request %d: the front-end did not resend its bytes", k)
			}
			srvGets()
			for _, s := range segs {
				n.now += ms
				n.fromClient(s)
				srvGets()
				clientGets()
			}
		}
		if got != len(want) {
			tb.Fatalf("request %d: the back-end has %d bytes in order, want %d", k, got, len(want))
		}
		// The response acknowledges the whole request: in the client's
		// numbers, exactly what it sent.
		body := bytes.Repeat([]byte{byte('a' + k)}, 100+k)
		r1 := append([]byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(body))), body...)
		resp = append(resp, r1...)
		n.now += ms
		srv.tsVal += 3
		n.fromServer(srv.reply(r1))
		clientGets()
		if sa := c.rcvNxt; sa != c.isnF+1+wire.Seq(len(resp)) {
			tb.Fatalf("request %d: client at %#x after the response", k, uint32(sa))
		}
		last := decodeTCP(tb, srv.reply(nil)) // what the back-end's next ACK says, in its numbers
		if wantAck := base + wire.Seq(len(want)); last.ack() != wantAck {
			tb.Fatalf("request %d: back-end ACK %#x, want %#x", k, uint32(last.ack()), uint32(wantAck))
		}
		// A pure ACK from the server, seen by the client in its numbers.
		n.fromServer(srv.seg(wire.TCPFlagACK, srv.nxt, srv.rcvNxt, nil))
		fs := n.takeClient()
		if len(fs) != 1 {
			tb.Fatalf("request %d: %d frames for the back-end's ACK", k, len(fs))
		}
		expectTCP(tb, fs[0], ackIs(c.nxt))
		// The client acknowledges the response.
		n.now += ms
		c.tsVal++
		n.fromClient(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil))
		srvGets()
		if r.resend {
			// Spurious retransmissions of every segment of the request:
			// whatever reaches the back-end matches its stream.
			for _, s := range segs {
				n.now += ms
				n.fromClient(s)
				srvGets()
				clientGets()
			}
		}
		_ = start
	}
	if !bytes.Equal(cliGot, resp) {
		tb.Fatalf("the client received %q, want %q", cliGot, resp)
	}
	if !bytes.Equal(rcvd, want) {
		tb.Fatalf("the back-end received %q, want %q", rcvd, want)
	}
	n.fe.checkCounters()
	n.shim.checkCounters()
}

// TestKeepAliveConnectionWithRewrittenRequestsInMemory: three requests
// on one connection, the first and third rewritten (one target longer,
// one shorter), with each client variant, the client's numbers wrapping.
func TestKeepAliveConnectionWithRewrittenRequestsInMemory(t *testing.T) {
	for name, offer := range clientVariants() {
		t.Run(name, func(t *testing.T) {
			runRewriteScenario(t, rewriteScenario{offer: offer, isn: 0xffffff00, isB: 0x7fffffff, reqs: []rewriteReq{
				{path: "/img/a.jpg", query: "?size=2", target: "/tree2/img/a.jpg", chunk: 1000, resend: true},
				{path: "/img/b.jpg", chunk: 7, resend: true},
				{path: "/a/very/long/path/of/the/full/tree.html", target: "/t1/x.html", chunk: 13, resend: true},
				{path: "/lost", target: "/tree1/lost/again", chunk: 30, lose: true},
			}})
		})
	}
}

// FuzzRewrittenRequestStreams runs random request streams with random
// rewrites, segment sizes and retransmissions through both engines.
func FuzzRewrittenRequestStreams(f *testing.F) {
	f.Add(uint64(1), uint32(0xffffff00), uint8(0))
	f.Add(uint64(2), uint32(0x7ffffff0), uint8(1))
	f.Add(uint64(3), uint32(12345), uint8(2))
	f.Add(uint64(4), uint32(0xfffffffe), uint8(3))
	f.Fuzz(func(t *testing.T, seed uint64, isn uint32, variant uint8) {
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		offer := fullOffer(rng.Uint32())
		switch variant % 4 {
		case 1:
			offer.TS = false
		case 2:
			offer.SACKPermitted = false
		case 3:
			offer.WScale = -1
		}
		path := func() string {
			b := make([]byte, 1+rng.IntN(60))
			for i := range b {
				b[i] = "abcdefgh/.-_0123456789"[rng.IntN(22)]
			}
			return "/" + string(b)
		}
		sc := rewriteScenario{offer: offer, isn: wire.Seq(isn), isB: wire.Seq(rng.Uint32())}
		for range 1 + rng.IntN(6) {
			r := rewriteReq{path: path(), query: []string{"", "?a=1", "?x"}[rng.IntN(3)], chunk: 1 + rng.IntN(120), resend: rng.IntN(3) == 0, lose: rng.IntN(4) == 0}
			if rng.IntN(2) == 0 {
				r.target = "/tree" + fmt.Sprint(rng.IntN(4)) + path()
			}
			sc.reqs = append(sc.reqs, r)
		}
		runRewriteScenario(t, sc)
	})
}
