package splice

// Scripted peers: a client and a back-end web server that send the
// segments a kernel would, with numbers the test chooses, and a fixture
// that walks one connection through the whole handoff.

import (
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// testClient is a client connection to a VIP as the client's kernel keeps
// it. Its frames reach the front-end from the router's MAC.
type testClient struct {
	ip    wire.IP4
	port  uint16
	vip   wire.IP4
	vport uint16
	isn   wire.Seq
	offer wire.SynOptions // the SYN's options; offer.TSVal is the first TSval
	tsVal uint32          // the client's timestamp clock: TSval of its next segment

	// Learned from the front-end.
	isnF   wire.Seq
	ts     bool   // timestamps negotiated
	peerTS uint32 // last TSval received, echoed in TSecr
	nxt    wire.Seq
	rcvNxt wire.Seq
	window uint16 // the window it offers (502 when zero)
}

func newClient(port uint16, isn wire.Seq, offer wire.SynOptions) *testClient {
	return &testClient{ip: clientIP, port: port, vip: vipA, vport: webPort, isn: isn,
		offer: offer, tsVal: offer.TSVal, nxt: isn + 1}
}

// fullOffer is what a Linux client offers.
func fullOffer(tsVal uint32) wire.SynOptions {
	return wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: tsVal}
}

func (c *testClient) frame(flags uint8, seq, ack wire.Seq, opts, payload []byte) []byte {
	win := c.window
	if win == 0 {
		win = 502
	}
	return frame(wire.TCPFrame{
		SrcMAC: routerMAC, DstMAC: feMAC,
		Src: c.ip, Dst: c.vip, SrcPort: c.port, DstPort: c.vport,
		Seq: seq, Ack: ack, Flags: flags, Window: win,
		Options: opts, Payload: payload,
	})
}

func (c *testClient) syn() []byte {
	return c.frame(wire.TCPFlagSYN, c.isn, 0, synOpts(c.offer), nil)
}

// seg builds a segment with the connection's timestamp (if negotiated)
// and the SACK blocks given.
func (c *testClient) seg(flags uint8, seq, ack wire.Seq, payload []byte, sack ...wire.SACKBlock) []byte {
	var ts *[2]uint32
	if c.ts {
		ts = &[2]uint32{c.tsVal, c.peerTS}
	}
	return c.frame(flags, seq, ack, segOpts(ts, sack...), payload)
}

// data sends payload at nxt, acknowledging rcvNxt, and advances nxt.
func (c *testClient) data(payload []byte) []byte {
	b := c.seg(wire.TCPFlagACK|wire.TCPFlagPSH, c.nxt, c.rcvNxt, payload)
	c.nxt += wire.Seq(len(payload))
	return b
}

// receive takes in a segment from the VIP side: remembers its timestamp.
func (c *testClient) receive(s *seen) {
	if v, _, ok := s.ts(); ok {
		c.peerTS = v
	}
	if end := s.seq() + wire.Seq(len(s.payload())); c.rcvNxt.LessThan(end) {
		c.rcvNxt = end
	}
}

// handshake sends the SYN and the final ACK; it returns the SYN-ACK.
func (c *testClient) handshake(tb testing.TB, h *feHarness, now Time) *seen {
	tb.Helper()
	sa := expectTCP(tb, onlyFrame(tb, h.input(c.syn(), now)),
		from(c.vip, c.vport), to(c.ip, c.port), ackIs(c.isn+1),
		flagsAre(wire.TCPFlagSYN|wire.TCPFlagACK))
	c.isnF = sa.seq()
	c.rcvNxt = c.isnF + 1
	c.peerTS, _, c.ts = sa.ts()
	if out := h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil), now); len(out.Frames) != 0 {
		tb.Fatalf("final handshake ACK answered with %d frames", len(out.Frames))
	}
	return sa
}

// sendRequest sends req in one segment and expects the front-end to
// acknowledge it and report the request.
func (c *testClient) sendRequest(tb testing.TB, h *feHarness, req []byte, now Time) FlowID {
	tb.Helper()
	out := h.input(c.data(req), now)
	ack := expectTCP(tb, onlyFrame(tb, out), ackIs(c.nxt), flagsAre(wire.TCPFlagACK))
	c.receive(ack)
	return onlyEvent(tb, out, EvRequest).Flow
}

// testServer is the back-end kernel's end of C2. Its frames come from the
// back-end's MAC (the one the front-end was given at Dispatch: in the
// daemons, the TAP's, which the shim's wire side carries unchanged)
// addressed to the front-end's MAC.
type testServer struct {
	ip       wire.IP4
	port     uint16
	peer     wire.IP4
	peerPort uint16
	isn      wire.Seq
	answer   wire.SynOptions // SYN-ACK options (TS filled in when the SYN had them)
	tsVal    uint32          // server timestamp clock
	ts       bool
	peerTS   uint32
	nxt      wire.Seq
	rcvNxt   wire.Seq
}

func newServer(isn wire.Seq, answer wire.SynOptions) *testServer {
	return &testServer{ip: backendIP, port: webPort, peer: handoffIP, isn: isn,
		answer: answer, tsVal: answer.TSVal, nxt: isn + 1}
}

func (s *testServer) frame(flags uint8, seq, ack wire.Seq, opts, payload []byte) []byte {
	return frame(wire.TCPFrame{
		SrcMAC: testBackend.MAC, DstMAC: feMAC,
		Src: s.ip, Dst: s.peer, SrcPort: s.port, DstPort: s.peerPort,
		Seq: seq, Ack: ack, Flags: flags, Window: 1000,
		Options: opts, Payload: payload,
	})
}

// synAck answers the C2 SYN syn as a kernel would: timestamps only if the
// SYN carried them, window scale only if offered.
func (s *testServer) synAck(syn *seen) []byte {
	s.peerPort = uint16(syn.tcp.SrcPort)
	s.rcvNxt = syn.seq() + 1
	o := s.answer
	if v, _, ok := syn.ts(); ok && o.TS {
		s.ts = true
		s.peerTS = v
		o.TSVal, o.TSEcr = s.tsVal, v
	} else {
		o.TS = false
	}
	if _, ok := syn.option(layers.TCPOptionKindWindowScale); !ok {
		o.WScale = -1
	}
	if _, ok := syn.option(layers.TCPOptionKindSACKPermitted); !ok {
		o.SACKPermitted = false
	}
	return s.frame(wire.TCPFlagSYN|wire.TCPFlagACK, s.isn, s.rcvNxt, synOpts(o), nil)
}

func (s *testServer) seg(flags uint8, seq, ack wire.Seq, payload []byte) []byte {
	var ts *[2]uint32
	if s.ts {
		ts = &[2]uint32{s.tsVal, s.peerTS}
	}
	return s.frame(flags, seq, ack, segOpts(ts), payload)
}

// reply sends payload at nxt and advances nxt.
func (s *testServer) reply(payload []byte) []byte {
	b := s.seg(wire.TCPFlagACK|wire.TCPFlagPSH, s.nxt, s.rcvNxt, payload)
	s.nxt += wire.Seq(len(payload))
	return b
}

// receive takes in a C2 segment from the client side.
func (s *testServer) receive(x *seen) {
	if v, _, ok := x.ts(); ok {
		s.peerTS = v
	}
	if end := x.seq() + wire.Seq(len(x.payload())); s.rcvNxt.LessThan(end) {
		s.rcvNxt = end
	}
}

// spliceParams picks the numbers of a spliced connection.
type spliceParams struct {
	start      Time
	clientISN  wire.Seq
	backendISN wire.Seq
	offer      wire.SynOptions // client SYN; offer.TSVal = first client TSval
	answer     wire.SynOptions // back-end SYN-ACK; answer.TSVal = first server TSval
	request    []byte
	mod        func(*FrontEndConfig)
}

func defaultSpliceParams() spliceParams {
	return spliceParams{
		start:      t0,
		clientISN:  0x10000000,
		backendISN: 0x70000000,
		offer:      fullOffer(5000),
		answer:     wire.SynOptions{MSS: 1460, WScale: 9, SACKPermitted: true, TS: true, TSVal: 900000},
		// A request whose body runs on: later client bytes are body and
		// are forwarded as they come (keep-alive follow-ups have their
		// own tests in fe_keepalive_test.go).
		request: []byte("POST /upload HTTP/1.1\r\nHost: www.example.test\r\nContent-Length: 1000000000\r\n\r\n"),
	}
}

// splicedConn is one connection after the whole handoff: the back-end has
// acknowledged the request, client packets are forwarded.
type splicedConn struct {
	h   *feHarness
	c   *testClient
	srv *testServer
	id  FlowID
	sp  proto.Splice
	now Time
}

const testRequestPort = 40000

// connectSpliced runs a connection through handshake, request, dispatch,
// C2 setup and SpliceAcked, each step at 1 ms after the previous.
func connectSpliced(tb testing.TB, p spliceParams) *splicedConn {
	tb.Helper()
	h := newFE(tb, p.mod)
	c := newClient(testRequestPort, p.clientISN, p.offer)
	return connectSplicedOn(tb, h, c, p)
}

func connectSplicedOn(tb testing.TB, h *feHarness, c *testClient, p spliceParams) *splicedConn {
	tb.Helper()
	now := p.start
	c.handshake(tb, h, now)
	now += ms
	c.tsVal++
	id := c.sendRequest(tb, h, p.request, now)
	now += ms
	out := h.call(func(out *Output) {
		if err := h.fe.Dispatch(id, testBackend, now, out); err != nil {
			tb.Fatal(err)
		}
	})
	syn := expectTCP(tb, onlyFrame(tb, out), seqIs(p.clientISN), flagsAre(wire.TCPFlagSYN))
	if h.cfg.SpliceAtSYN {
		onlyEvent(tb, out, EvSplice) // the Splice goes with the SYN (fe_atsyn.go)
	}
	srv := newServer(p.backendISN, p.answer)
	now += ms
	out = h.input(srv.synAck(syn), now)
	var sp proto.Splice
	if h.cfg.SpliceAtSYN {
		if len(eventsOf(out, EvSplice)) != 0 {
			tb.Fatal("a second Splice at the SYN-ACK")
		}
		sp = h.fe.spliceMessage(h.fe.byID[id]) // what the shim completes it to
	} else {
		sp = onlyEvent(tb, out, EvSplice).Splice
	}
	if len(out.Frames) != 0 { // the request's first segment completes the handshake
		tb.Fatalf("%d frames for the back-end's SYN-ACK, want none", len(out.Frames))
	}
	now += ms
	out = h.call(func(out *Output) {
		if err := h.fe.SpliceAcked(id, now, out); err != nil {
			tb.Fatal(err)
		}
	})
	var got []byte
	for _, f := range copyFrames(out) {
		s := expectTCP(tb, f, to(backendIP, webPort))
		got = append(got, s.payload()...)
		srv.receive(s)
	}
	if string(got) != string(p.request) {
		tb.Fatalf("request on C2 %q, want %q", got, p.request)
	}
	// The shim's header-only copy of the back-end's ACK of the request.
	now += ms
	if out := h.input(srv.seg(wire.TCPFlagACK, srv.nxt, srv.rcvNxt, nil), now); len(out.Frames) != 0 {
		tb.Fatalf("back-end ACK copy answered with %d frames", len(out.Frames))
	}
	return &splicedConn{h: h, c: c, srv: srv, id: id, sp: sp, now: now}
}
