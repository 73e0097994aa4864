package splice

// Adversarial tests of the bounds on the front-end's state (issue 9,
// "Unbounded state"). Floods are hand-built frames fed straight to the
// engine through a rawPeer, without the checker's decoding, so that a
// hundred thousand connections take seconds.

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// rawPeer drives many connections from one client address with as little
// work per frame as the engine's own: frames are built with wire.TCPFrame
// and what comes back is read with wire.Parse.
type rawPeer struct {
	tb  testing.TB
	fe  *FrontEnd
	src wire.IP4
	out Output
	pkt wire.Packet
	buf []byte
}

func newRawPeer(tb testing.TB, fe *FrontEnd, src wire.IP4) *rawPeer {
	return &rawPeer{tb: tb, fe: fe, src: src, buf: make([]byte, 2048)}
}

// conn names the n-th connection of the peer: ports 1024.. on each VIP in
// turn, so 120,000 connections have distinct tuples.
func (r *rawPeer) conn(n int) (vip wire.IP4, port uint16, isn wire.Seq) {
	vip = vipA
	if n/60000%2 == 1 {
		vip = vipB
	}
	return vip, uint16(1024 + n%60000), wire.Seq(0x1000_0000 + uint32(n)*7919)
}

func (r *rawPeer) send(tf wire.TCPFrame, now Time) *Output {
	b := r.buf[:tf.Len()]
	tf.Encode(b)
	r.out.Reset()
	r.fe.Input(b, now, &r.out)
	return &r.out
}

// syn sends connection n's SYN and returns the cookie, or false when it
// got no SYN-ACK.
func (r *rawPeer) syn(n int, now Time) (wire.Seq, bool) {
	vip, port, isn := r.conn(n)
	out := r.send(wire.TCPFrame{SrcMAC: routerMAC, DstMAC: feMAC, Src: r.src, Dst: vip,
		SrcPort: port, DstPort: webPort, Seq: isn, Flags: wire.TCPFlagSYN, Window: 65535,
		Options: []byte{wire.OptMSS, 4, 0x05, 0xb4}}, now)
	if len(out.Frames) == 0 {
		return 0, false
	}
	if len(out.Frames) != 1 || wire.Parse(out.Frames[0].Data, &r.pkt) != nil ||
		r.pkt.TCP.Flags() != wire.TCPFlagSYN|wire.TCPFlagACK {
		r.tb.Fatalf("connection %d: SYN answered with %d frames", n, len(out.Frames))
	}
	return r.pkt.TCP.Seq(), true
}

// ack completes connection n's handshake with payload (if any) on the
// final ACK.
func (r *rawPeer) ack(n int, cookie wire.Seq, payload []byte, now Time) *Output {
	vip, port, isn := r.conn(n)
	return r.send(wire.TCPFrame{SrcMAC: routerMAC, DstMAC: feMAC, Src: r.src, Dst: vip,
		SrcPort: port, DstPort: webPort, Seq: isn + 1, Ack: cookie + 1,
		Flags: wire.TCPFlagACK | wire.TCPFlagPSH, Window: 502, Payload: payload}, now)
}

// connect runs connection n's handshake with payload on the final ACK; it
// reports whether a flow took it (no RST came back).
func (r *rawPeer) connect(n int, payload []byte, now Time) bool {
	cookie, ok := r.syn(n, now)
	if !ok {
		return false
	}
	out := r.ack(n, cookie, payload, now)
	for _, f := range out.Frames {
		if wire.Parse(f.Data, &r.pkt) == nil && r.pkt.TCP.Has(wire.TCPFlagRST) {
			return false
		}
	}
	return true
}

// expireAll runs every timer up to limit.
func expireAll(tb testing.TB, fe *FrontEnd, limit Time) {
	var out Output
	for i := 0; ; i++ {
		next := fe.NextDeadline()
		if next == Never || next > limit {
			return
		}
		out.Reset()
		fe.Tick(next, &out)
		if i > 10_000_000 {
			tb.Fatalf("timers still due after %d ticks", i)
		}
	}
}

// A partial head, as the flood sent: the request line and a
// header, never finished.
var partialHead = []byte("GET /index.html HTTP/1.1\r\nHost: www.example.test\r\nUser-Agent: flood\r\n")

func TestAdversarialFloodFromOneSourceIsCappedWhileAnotherIsServed(t *testing.T) {
	h := newFE(t, nil)
	fe := h.fe
	attacker := newRawPeer(t, fe, clientIP)
	const flood = 100_000
	accepted := 0
	now := t0
	for n := 0; n < flood; n++ {
		now += 10 * Time(time.Microsecond)
		if attacker.connect(n, partialHead, now) {
			accepted++
		}
	}
	limit := h.cfg.MaxFlowsPerSource
	st := fe.Stats()
	t.Logf("%d connections from one source: %d accepted, %d SYNs refused, %d flows", flood, accepted, st.RefusedSYNSource, fe.Flows())
	if accepted != limit || fe.Flows() != limit {
		t.Fatalf("accepted %d connections from one source (%d flows), want the per-source limit %d", accepted, fe.Flows(), limit)
	}
	if st.RefusedSYNSource != flood-uint64(limit) || st.Drops[dropOverLimit] != st.RefusedSYNSource {
		t.Errorf("RefusedSYNSource = %d, over-limit drops %d, want %d", st.RefusedSYNSource, st.Drops[dropOverLimit], flood-limit)
	}

	// Another client is served as if nothing happened.
	c := newClient(50000, 0x5000_0000, fullOffer(77))
	c.ip = ip4("198.19.8.8")
	c.handshake(t, h, now)
	id := c.sendRequest(t, h, []byte("GET / HTTP/1.1\r\nHost: www.example.test\r\n\r\n"), now+ms)
	if f := fe.byID[id]; f == nil || f.state != stQueued {
		t.Fatalf("second source's request not queued")
	}

	// Everything of the flood goes at its deadlines.
	expireAll(t, fe, now+Time(h.cfg.FlowLifetime)+s1)
	if fe.Flows() != 0 || len(fe.sources) != 0 {
		t.Errorf("%d flows, %d sources left after the flood's lifetime", fe.Flows(), len(fe.sources))
	}
	h.checkTables()
}

func TestAdversarialCookieAckOverTheLimitIsReset(t *testing.T) {
	// Globally, only when no flow can be evicted: here every flow has its
	// request queued.
	fullHead := []byte("GET / HTTP/1.1\r\nHost: www.example.test\r\n\r\n")
	for _, tc := range []struct {
		name    string
		mod     func(*FrontEndConfig)
		head    []byte
		counter func(FrontEndStats) uint64
	}{
		{"per-source", func(c *FrontEndConfig) { c.MaxFlowsPerSource = 100 }, partialHead,
			func(s FrontEndStats) uint64 { return s.RefusedAcceptSource }},
		{"global", func(c *FrontEndConfig) { c.MaxFlows = 100; c.MaxFlowsPerSource = -1 }, fullHead,
			func(s FrontEndStats) uint64 { return s.RefusedAcceptFlows }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFE(t, tc.mod)
			p := newRawPeer(t, h.fe, clientIP)
			cookie, ok := p.syn(0, t0) // answered while there is room
			if !ok {
				t.Fatal("first SYN not answered")
			}
			for n := 1; n <= 100; n++ {
				if !p.connect(n, tc.head, t0+ms) {
					t.Fatalf("connection %d refused below the limit", n)
				}
			}
			if _, ok := p.syn(101, t0+ms); ok {
				t.Fatalf("SYN over the limit answered")
			}
			out := p.ack(0, cookie, partialHead, t0+2*ms)
			rst := expectTCP(t, onlyFrame(t, out), to(clientIP, 1024), flagsAre(wire.TCPFlagRST))
			if rst.seq() != cookie+1 {
				t.Errorf("RST at %#x, want the ACK number %#x", uint32(rst.seq()), uint32(cookie+1))
			}
			if got := tc.counter(h.fe.Stats()); got != 1 || h.fe.Flows() != 100 {
				t.Errorf("refusal counted %d, %d flows", got, h.fe.Flows())
			}
			h.checkTables()
		})
	}
}

func TestAdversarialSilentClientIsFreedAtTheHeadDeadline(t *testing.T) {
	h, c := acceptedClient(t, nil)
	head := t0 + 10*s1 // the default head timeout after the handshake at t0
	if out := h.tick(head - 1); len(out.Frames) != 0 || h.fe.Flows() != 1 {
		t.Fatalf("acted before the head deadline")
	}
	out := h.tick(head)
	rst := expectTCP(t, onlyFrame(t, out), to(c.ip, c.port), flagsAre(wire.TCPFlagRST|wire.TCPFlagACK))
	if rst.seq() != c.isnF+1 {
		t.Errorf("RST at %#x, want the client's rcv_nxt %#x", uint32(rst.seq()), uint32(c.isnF+1))
	}
	if ev := onlyEvent(t, out, EvClosed); ev.Reason != CloseTimeout {
		t.Errorf("closed as %v", ev.Reason)
	}
	if h.fe.Flows() != 0 {
		t.Fatalf("a silent client's flow outlives its head deadline: %d flows", h.fe.Flows())
	}
	if h.fe.NextDeadline() != Never && h.fe.timers.len() > 1 {
		t.Errorf("%d timers left", h.fe.timers.len())
	}
	h.checkCounters()
}

func TestAdversarialPartialHeadClientIsFreedAtTheFlowLifetime(t *testing.T) {
	h, c := acceptedClient(t, nil)
	h.input(c.data([]byte("GET / HTTP/1.1\r\n")), t0+ms)
	// It gets its 408 at the head deadline, never acknowledges it, and
	// the answer's retransmissions and linger may not keep it past the
	// lifetime (30 s from the handshake).
	if ev := eventsOf(h.tick(t0+10*s1), EvAnswered); len(ev) != 1 || ev[0].Status != 408 {
		t.Fatalf("no 408 at the head deadline")
	}
	lifetime := t0 + 30*s1
	h.drain(t0+10*s1, lifetime-1)
	if h.fe.Flows() != 1 {
		t.Fatalf("flow gone before its lifetime")
	}
	_, evs := h.drain(lifetime-1, lifetime)
	if h.fe.Flows() != 0 {
		t.Fatalf("a flow that was never handed off outlives FlowLifetime: %d flows", h.fe.Flows())
	}
	if closed := eventsOf(&Output{Events: evs}, EvClosed); len(closed) != 1 {
		t.Errorf("events %+v, want one EvClosed", evs)
	}
	if st := h.fe.Stats(); st.LifetimeExpired != 1 {
		t.Errorf("LifetimeExpired = %d", st.LifetimeExpired)
	}
	h.checkCounters()
}

// memHeap is the live heap after two forced collections.
func memHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func TestAdversarialFloodMemoryReturnsAfterExpiry(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 connections")
	}
	// Per-source limits off: this test is about what 100,000 flows leave
	// behind, whoever makes them.
	h := newFE(t, func(c *FrontEndConfig) { c.MaxFlowsPerSource = -1 })
	fe := h.fe
	p := newRawPeer(t, fe, clientIP)
	// A front-end that has served: the spare records and buffers are at
	// their working size before the baseline is taken.
	now := t0
	for n := 0; n < 2000; n++ {
		p.connect(n, partialHead, now)
	}
	now += 60 * s1
	expireAll(t, fe, now)
	start := memHeap()

	const flood = 100_000
	for n := 0; n < flood; n++ {
		now += 10 * Time(time.Microsecond)
		if !p.connect(n, partialHead, now) {
			t.Fatalf("connection %d refused", n)
		}
	}
	peak := memHeap()
	if fe.Flows() != flood {
		t.Fatalf("%d flows", fe.Flows())
	}
	now += 60 * s1
	expireAll(t, fe, now)
	if fe.Flows() != 0 {
		t.Fatalf("%d flows left", fe.Flows())
	}
	end := memHeap()
	t.Logf("heap: %d KiB at the start, %d KiB with %d flows (%d B each), %d KiB after they expired; %d tables rebuilt",
		start>>10, peak>>10, flood, (peak-start)/flood, end>>10, fe.Stats().TablesRebuilt)
	if end > start+start/10 {
		t.Errorf("heap %d KiB after the flood, more than 10%% above the %d KiB before it", end>>10, start>>10)
	}
	runtime.KeepAlive(fe)
}

// spliceRaw takes connection n of p through the whole handoff to back-end
// b with a one-segment request; the back-end acknowledges it in the
// shim's copy. It returns the flow and its handoff port, or the error of
// Dispatch.
func spliceRaw(t *testing.T, p *rawPeer, n int, b Backend, now Time) (FlowID, uint16, error) {
	t.Helper()
	req := []byte("GET / HTTP/1.1\r\nHost: www.example.test\r\n\r\n")
	cookie, ok := p.syn(n, now)
	if !ok {
		return 0, 0, errNoSynAck
	}
	out := p.ack(n, cookie, req, now)
	var id FlowID
	for _, ev := range out.Events {
		if ev.Kind == EvRequest {
			id = ev.Flow
		}
	}
	if id == 0 {
		t.Fatalf("connection %d: no request", n)
	}
	p.out.Reset()
	if err := p.fe.Dispatch(id, b, now, &p.out); err != nil {
		return id, 0, err
	}
	if wire.Parse(p.out.Frames[0].Data, &p.pkt) != nil {
		t.Fatal("C2 SYN does not parse")
	}
	hport := p.pkt.TCP.SrcPort()
	_, _, isn := p.conn(n)
	bISN := wire.Seq(0x7000_0000 + uint32(n))
	bIP := wire.IP4From(b.IP)
	srv := func(flags uint8, seq, ack wire.Seq) *Output {
		return p.send(wire.TCPFrame{SrcMAC: b.MAC, DstMAC: feMAC, Src: bIP, Dst: handoffIP,
			SrcPort: b.Port, DstPort: hport, Seq: seq, Ack: ack, Flags: flags, Window: 1000,
			Options: []byte{wire.OptMSS, 4, 0x05, 0xb4}}, now)
	}
	if out := srv(wire.TCPFlagSYN|wire.TCPFlagACK, bISN, isn+1); len(out.Events) != 1 || out.Events[0].Kind != EvSplice {
		t.Fatalf("connection %d: C2 SYN-ACK gave %+v", n, out.Events)
	}
	p.out.Reset()
	if err := p.fe.SpliceAcked(id, now, &p.out); err != nil {
		t.Fatal(err)
	}
	// The shim's copy of the back-end's ACK of the request.
	srv(wire.TCPFlagACK, bISN+1, isn+1+wire.Seq(len(req)))
	return id, hport, nil
}

var errNoSynAck = errors.New("SYN not answered")

// serverFIN feeds the shim's copy of the back-end's FIN closing an idle
// keep-alive connection after a 100-byte response.
func serverFIN(p *rawPeer, n int, b Backend, hport uint16, now Time) {
	_, _, isn := p.conn(n)
	bISN := wire.Seq(0x7000_0000 + uint32(n))
	req := len("GET / HTTP/1.1\r\nHost: www.example.test\r\n\r\n")
	p.send(wire.TCPFrame{SrcMAC: b.MAC, DstMAC: feMAC, Src: wire.IP4From(b.IP), Dst: handoffIP,
		SrcPort: b.Port, DstPort: hport, Seq: bISN + 101, Ack: isn + 1 + wire.Seq(req),
		Flags: wire.TCPFlagACK | wire.TCPFlagFIN, Window: 1000}, now)
}

// quietTicks runs the timers up to until and counts the RSTs they send.
func quietTicks(fe *FrontEnd, until Time) (rsts int) {
	var out Output
	var pkt wire.Packet
	for fe.NextDeadline() <= until {
		out.Reset()
		fe.Tick(fe.NextDeadline(), &out)
		for _, f := range out.Frames {
			if wire.Parse(f.Data, &pkt) == nil && pkt.TCP.Has(wire.TCPFlagRST) {
				rsts++
			}
		}
	}
	return rsts
}

// 41,000 idle keep-alive connections from one address, which the
// back-end closes and the client then leaves idle: one address holds at
// most MaxPortsPerSource handoff ports (the rest get a 503 at once), other
// clients are served meanwhile, and the ports come back HalfCloseTimeout
// after the back-end's FIN instead of after the 15-minute idle timeout.
func TestAdversarialIdleKeepAliveConnectionsDoNotExhaustHandoffPorts(t *testing.T) {
	if testing.Short() {
		t.Skip("41,000 connections")
	}
	h := newFE(t, nil)
	fe := h.fe
	attacker := newRawPeer(t, fe, clientIP)
	const conns = 41_000
	now := t0
	spliced, portRefused, synRefused := 0, 0, 0
	for n := 0; n < conns; n++ {
		id, hport, err := spliceRaw(t, attacker, n, testBackend, now)
		switch err {
		case nil:
			spliced++
			serverFIN(attacker, n, testBackend, hport, now) // the back-end's keep-alive timeout
		case ErrSourcePorts:
			// What the controller does with a failed Dispatch.
			portRefused++
			attacker.out.Reset()
			if err := fe.Reject(id, 503, "dispatch-failed", time.Second, now, &attacker.out); err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(attacker.out.Frames[0].Data, []byte("503 Service Unavailable")) {
				t.Fatal("no 503")
			}
		case errNoSynAck:
			synRefused++ // its refused flows, unacknowledged, hold its pre-handoff places
		default:
			t.Fatalf("connection %d: %v", n, err)
		}
		now += 10 * Time(time.Microsecond)
	}
	t.Logf("%d idle keep-alive connections from one address: %d handed off, %d answered 503 (port limit), %d SYNs unanswered (flow limit)",
		conns, spliced, portRefused, synRefused)
	if spliced != h.cfg.MaxPortsPerSource || fe.Stats().RefusedPortsSource != uint64(portRefused) || portRefused == 0 {
		t.Fatalf("%d connections hold ports, want MaxPortsPerSource %d", spliced, h.cfg.MaxPortsPerSource)
	}

	// Another client still gets a port.
	other := newRawPeer(t, fe, ip4("198.19.8.8"))
	if _, _, err := spliceRaw(t, other, 0, testBackend, now); err != nil {
		t.Fatalf("second source: %v", err)
	}

	// The attacker's clients stay silent after the back-end's FIN: their
	// ports come back, each connection reset on both sides.
	quiet := now + Time(h.cfg.HalfCloseTimeout)
	rsts := quietTicks(fe, quiet)
	if st := fe.Stats(); st.HalfClosedReleased != uint64(spliced) || st.HandoffPorts != 1 {
		t.Fatalf("after the quiet time: %d released, %d ports held, want %d released and 1 (the other client's)",
			st.HalfClosedReleased, st.HandoffPorts, spliced)
	}
	if rsts < 2*spliced {
		t.Errorf("%d RSTs, want one to each client and one to the back-end per connection", rsts)
	}
	h.checkTables()
	// The address may hand off again once its refused flows are gone.
	quietTicks(fe, now+Time(h.cfg.FlowLifetime))
	if _, _, err := spliceRaw(t, attacker, conns, testBackend, now+Time(h.cfg.FlowLifetime)); err != nil {
		t.Errorf("after the release: %v", err)
	}
}

// Without the per-source limit, 41,000 idle connections fill a back-end's
// whole port range (41,000 ports), and are released as above. Each
// back-end has a range of its own: another back-end is served meanwhile.
func TestAdversarialPortRangeIsReleasedAfterTheBackendsFIN(t *testing.T) {
	if testing.Short() {
		t.Skip("41,000 connections")
	}
	h := newFE(t, func(c *FrontEndConfig) { c.MaxPortsPerSource = -1 })
	fe := h.fe
	p := newRawPeer(t, fe, clientIP)
	span := int(h.cfg.HandoffPortLast-h.cfg.HandoffPortFirst) + 1
	now := t0
	ports := map[uint16]bool{}
	for n := 0; n < span; n++ {
		_, hport, err := spliceRaw(t, p, n, testBackend, now)
		if err != nil {
			t.Fatalf("connection %d: %v", n, err)
		}
		ports[hport] = true
		serverFIN(p, n, testBackend, hport, now)
		now += 10 * Time(time.Microsecond)
	}
	if len(ports) != span {
		t.Fatalf("%d distinct ports for %d connections", len(ports), span)
	}
	if _, _, err := spliceRaw(t, p, span, testBackend, now); err != ErrNoPorts {
		t.Fatalf("dispatch with the range full: %v, want ErrNoPorts", err)
	}
	second := testBackend
	second.ID, second.IP = 8, otherIP.Addr()
	if _, _, err := spliceRaw(t, p, span+1, second, now); err != nil {
		t.Fatalf("another back-end while the first's range is full: %v", err)
	}
	quietTicks(fe, now+Time(h.cfg.HalfCloseTimeout))
	if st := fe.Stats(); st.HalfClosedReleased != uint64(span) {
		t.Fatalf("%d released, want %d", st.HalfClosedReleased, span)
	}
	later := now + Time(h.cfg.FlowLifetime)
	quietTicks(fe, later)
	if _, _, err := spliceRaw(t, p, span+2, testBackend, later); err != nil {
		t.Errorf("after the release: %v", err)
	}
}

func TestHalfClosedConnectionIsResetOnBothSidesAndItsPortFreed(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	h, c, srv := sc.h, sc.c, sc.srv
	// The back-end acknowledges the request and closes (keep-alive
	// timeout); the client acknowledges the FIN and says nothing more.
	h.input(srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, srv.nxt, srv.rcvNxt, nil), sc.now+ms)
	finAck := c.isnF + 1 + 1 // client-facing: the FIN of an empty response
	sc.now += 2 * ms
	h.input(c.seg(wire.TCPFlagACK, c.nxt, finAck, nil), sc.now)
	quiet := sc.now + Time(h.cfg.HalfCloseTimeout)
	if out := h.tick(quiet - 1); len(out.Frames) != 0 {
		t.Fatalf("acted before the client was quiet for HalfCloseTimeout")
	}
	out := h.tick(quiet)
	var toClient, toBackend *seen
	for _, f := range copyFrames(out) {
		s := decodeTCP(t, f)
		if s.ip.DstIP.Equal(backendIP.Addr().AsSlice()) {
			toBackend = expectTCP(t, f, from(handoffIP, sc.sp.HandoffPort), flagsAre(wire.TCPFlagRST))
		} else {
			toClient = expectTCP(t, f, to(c.ip, c.port), flagsAre(wire.TCPFlagRST|wire.TCPFlagACK))
		}
	}
	if toClient == nil || toBackend == nil {
		t.Fatalf("frames %d, want a RST to each side", len(out.Frames))
	}
	if toClient.seq() != finAck {
		t.Errorf("client RST at %#x, want its rcv_nxt %#x", uint32(toClient.seq()), uint32(finAck))
	}
	if toBackend.seq() != c.isn+1+wire.Seq(len(sc.h.fe.byID[sc.id].buf)) && toBackend.seq() != srv.rcvNxt {
		t.Errorf("back-end RST at %#x, want its rcv_nxt %#x", uint32(toBackend.seq()), uint32(srv.rcvNxt))
	}
	if len(h.fe.byC2) != 0 {
		t.Errorf("handoff port still held")
	}
	// A late client segment is not forwarded to the freed port.
	late := h.input(c.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c.nxt, finAck, nil), quiet+ms)
	for _, f := range late.Frames {
		if bytes.Equal(f.Data[30:34], backendIP[:]) {
			t.Errorf("late client segment forwarded to the back-end after the port was freed")
		}
	}
	h.drain(quiet+ms, Never-1)
	if h.fe.Flows() != 0 {
		t.Errorf("%d flows", h.fe.Flows())
	}
	h.checkCounters()
}

// A client whose window is closed is stalled, not idle: the back-end's
// window probes keep it, however long they back off, and the
// half-close timeout does not reset it.
func TestHalfClosedClientWithAZeroWindowIsKept(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	h, c, srv := sc.h, sc.c, sc.srv
	h.input(srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, srv.nxt, srv.rcvNxt, nil), sc.now+ms)
	sc.now += 2 * ms
	var ts [2]uint32 = [2]uint32{c.tsVal, c.peerTS}
	h.input(frame(wire.TCPFrame{SrcMAC: routerMAC, DstMAC: feMAC, Src: c.ip, Dst: c.vip, SrcPort: c.port, DstPort: c.vport,
		Seq: c.nxt, Ack: c.isnF + 1, Flags: wire.TCPFlagACK, Window: 0, Options: segOpts(&ts)}), sc.now)
	h.tick(sc.now + Time(h.cfg.HalfCloseTimeout) + s1)
	if h.fe.Stats().HalfClosedReleased != 0 || len(h.fe.byC2) != 1 {
		t.Fatalf("a stalled client was reset after the half-close timeout")
	}
	h.checkCounters()
}

// The timer heap's backing slice follows a flood down.
func TestTimerHeapShrinksAfterAFlood(t *testing.T) {
	var d deadlines
	for i := 0; i < 100_000; i++ {
		d.push(Time(i), uint64(i))
	}
	peak := d.h.Cap()
	for {
		if _, ok := d.popDue(Never - 1); !ok {
			break
		}
	}
	if d.h.Cap() >= shrinkMinCap {
		t.Errorf("backing slice of %d entries left after popping all of %d (peak capacity %d)", d.h.Cap(), 100_000, peak)
	}
}

// With the table full of flows that never finish their head, a new
// client gets in: the oldest of them is evicted (reset) to make room.
func TestAdversarialFullTableEvictsTheOldestHeadlessFlow(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.MaxFlows = 100; c.MaxFlowsPerSource = -1 })
	attacker := newRawPeer(t, h.fe, clientIP)
	for n := 0; n < 100; n++ {
		if !attacker.connect(n, partialHead, t0+Time(n)*ms) {
			t.Fatalf("connection %d refused below the limit", n)
		}
	}
	c := newClient(50000, 0x5000_0000, fullOffer(77))
	c.ip = ip4("198.19.8.8")
	now := t0 + s1
	sa := expectTCP(t, onlyFrame(t, h.input(c.syn(), now)), flagsAre(wire.TCPFlagSYN|wire.TCPFlagACK))
	c.isnF, c.rcvNxt = sa.seq(), sa.seq()+1
	c.peerTS, _, c.ts = sa.ts()
	out := h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil), now)
	// The attacker's first connection (port 1024) is reset and reported.
	expectTCP(t, onlyFrame(t, out), to(clientIP, 1024), flagsAre(wire.TCPFlagRST|wire.TCPFlagACK))
	if ev := onlyEvent(t, out, EvClosed); ev.Reason != CloseTimeout {
		t.Errorf("evicted flow closed as %v", ev.Reason)
	}
	id := c.sendRequest(t, h, []byte("GET / HTTP/1.1\r\nHost: www.example.test\r\n\r\n"), now+ms)
	if f := h.fe.byID[id]; f == nil || f.state != stQueued {
		t.Fatalf("the new client's request is not queued")
	}
	if st := h.fe.Stats(); st.Evicted != 1 || h.fe.Flows() != 100 {
		t.Errorf("Evicted = %d, %d flows", st.Evicted, h.fe.Flows())
	}
	// The next eviction takes the next oldest, never the queued request.
	for n := 100; n < 300; n++ {
		attacker.connect(n, partialHead, now+2*ms)
	}
	if f := h.fe.byID[id]; f == nil || f.state != stQueued {
		t.Fatalf("a queued request was evicted")
	}
	if st := h.fe.Stats(); st.Evicted != 201 || h.fe.Flows() != 100 {
		t.Errorf("Evicted = %d, %d flows", st.Evicted, h.fe.Flows())
	}
	h.drain(now, now+60*s1)
	if h.fe.Flows() != 0 || h.fe.reading.Len() != 0 {
		t.Errorf("%d flows, %d reading entries left", h.fe.Flows(), h.fe.reading.Len())
	}
	h.checkTables()
}

// A connection both ends closed keeps its handoff port through its
// linger, but no longer counts against its source's limit.
func TestClosedConnectionsDoNotCountAgainstTheSourcesPorts(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.MaxPortsPerSource = 2 })
	p := newRawPeer(t, h.fe, clientIP)
	now := t0
	req := len("GET / HTTP/1.1\r\nHost: www.example.test\r\n\r\n")
	for n := 0; n < 2; n++ {
		_, hport, err := spliceRaw(t, p, n, testBackend, now)
		if err != nil {
			t.Fatal(err)
		}
		serverFIN(p, n, testBackend, hport, now)
		if n == 0 { // the client closes too
			vip, port, isn := p.conn(n)
			cookie := h.fe.flows[fourTuple{clientIP, vip, port, webPort}].isnF
			p.send(wire.TCPFrame{SrcMAC: routerMAC, DstMAC: feMAC, Src: clientIP, Dst: vip, SrcPort: port, DstPort: webPort,
				Seq: isn + 1 + wire.Seq(req), Ack: cookie + 1 + 101 + 1, Flags: wire.TCPFlagACK | wire.TCPFlagFIN, Window: 502}, now)
		}
	}
	// The closed connection stops counting when its timer next runs (at
	// once if it was due later than its linger; here its retransmission
	// timer, due first, is left to fire).
	now += s1
	h.tick(now)
	if _, _, err := spliceRaw(t, p, 2, testBackend, now); err != nil {
		t.Fatalf("third connection with one of two closed: %v", err)
	}
	if _, _, err := spliceRaw(t, p, 3, testBackend, now); err != ErrSourcePorts {
		t.Fatalf("fourth connection: %v, want ErrSourcePorts", err)
	}
	if st := h.fe.Stats(); st.HandoffPorts != 3 {
		t.Errorf("%d handoff ports held, want 3 (the closed one lingers)", st.HandoffPorts)
	}
	h.checkTables()
}

// Requests waiting in the scheduler's queues are bounded there, so they do
// not count against their address's flows: a busy client may have many
// queued. Heads still coming do.
func TestQueuedRequestsDoNotCountAgainstTheSourcesFlows(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.MaxFlowsPerSource = 10 })
	p := newRawPeer(t, h.fe, clientIP)
	full := []byte("GET / HTTP/1.1\r\nHost: www.example.test\r\n\r\n")
	for n := 0; n < 50; n++ {
		if !p.connect(n, full, t0) {
			t.Fatalf("queued request %d refused", n)
		}
	}
	for n := 50; n < 60; n++ {
		if !p.connect(n, partialHead, t0) {
			t.Fatalf("partial head %d refused below the limit", n)
		}
	}
	if _, ok := p.syn(60, t0); ok {
		t.Fatalf("SYN answered with 10 heads still coming")
	}
	if h.fe.Flows() != 60 {
		t.Errorf("%d flows", h.fe.Flows())
	}
	h.checkTables()
}
