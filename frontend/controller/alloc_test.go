package controller

// A connection per request through the real engine and the controller,
// with the back-end's shim faked: the segments its kernel and shim send
// the front-end, and its control messages. The daemon's pass in between
// (engine Input, HandleEvents, timers, Control) must allocate nothing
// once warm: wrk -H "Connection: close" is this cycle thousands of times
// a second.

import (
	"net/netip"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

var (
	cycleVIP      = wire.IP4From(netip.MustParseAddr("198.18.0.100"))
	cycleHandoff  = wire.IP4From(netip.MustParseAddr("198.18.0.101"))
	cycleClient   = wire.IP4From(netip.MustParseAddr("198.18.0.10"))
	cycleFEMAC    = wire.MAC{2, 0, 0, 0, 0, 0xfe}
	cycleCliMAC   = wire.MAC{2, 0, 0, 0, 0, 0x10}
	cycleRequest  = []byte("GET /data/1K HTTP/1.1\r\nHost: A.example\r\nUser-Agent: wrk\r\nConnection: close\r\n\r\n")
	cycleRespSize = wire.Seq(1024 + 230) // what the server sent the client directly, headers and 1 KiB
)

// cycleRig is an engine and a controller driven the way the daemon's loop
// drives them, one input at a time.
type cycleRig struct {
	t    testing.TB
	eng  *splice.FrontEnd
	ctrl *Controller
	out  Output
	now  splice.Time

	frame [2048]byte // the input being built
	pkt   wire.Packet
	opts  wire.TCPOptions
	ob    [40]byte
	// The fake shim's messages, one of each reused as a daemon's Codec
	// reuses its decoded messages.
	ack proto.SpliceAck
	fb  proto.Feedback

	cycles, failed int
}

func newCycleRig(t testing.TB) *cycleRig {
	t.Helper()
	return newCycleRigWith(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 10000}))
}

// newCycleRigWith is newCycleRig with the controller configured by cfg.
func newCycleRigWith(t testing.TB, cfg Config) *cycleRig {
	t.Helper()
	ecfg := splice.FrontEndConfig{MAC: cycleFEMAC, VIPs: []netip.Addr{cycleVIP.Addr()}, Ports: []uint16{80},
		HandoffAddr: cycleHandoff.Addr(), Linger: 20 * time.Millisecond}
	for i := range ecfg.CookieSecret {
		ecfg.CookieSecret[i] = byte(3*i + 1)
	}
	eng, err := splice.NewFrontEnd(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &cycleRig{t: t, eng: eng, now: t0}
	r.ctrl, err = New(cfg, eng, r.now)
	if err != nil {
		t.Fatal(err)
	}
	r.control(&proto.Register{BackendID: 1, IP: backendIP(1), MAC: [6]byte{2, 0, 0, 0, 0, 0x21},
		ControlPort: 7401, WebPorts: []uint16{80}, Capacity: 16, Incarnation: 1})
	return r
}

// timers runs what is due, as the daemon's finish does.
func (r *cycleRig) timers() {
	if r.eng.NextDeadline() <= r.now {
		r.eng.Tick(r.now, &r.out.Engine)
		r.ctrl.HandleEvents(r.now, &r.out)
	}
	if r.ctrl.NextDeadline() <= r.now {
		r.ctrl.Tick(r.now, &r.out)
	}
}

// input is one pass with one frame, 100 us after the last.
func (r *cycleRig) input(tf *wire.TCPFrame) {
	r.now += splice.Time(100 * time.Microsecond)
	n := tf.Encode(r.frame[:])
	r.out.Reset()
	r.eng.Input(r.frame[:n], r.now, &r.out.Engine)
	r.ctrl.HandleEvents(r.now, &r.out)
	r.timers()
}

// control is one pass with one control datagram from the shim.
func (r *cycleRig) control(m proto.Message) {
	r.now += splice.Time(100 * time.Microsecond)
	r.out.Reset()
	r.ctrl.Control(shimAddr, m, r.now, &r.out)
	r.timers()
}

// sent finds the pass's frame to dst:port with all of flags set.
func (r *cycleRig) sent(dst wire.IP4, port uint16, flags uint8) (wire.TCP, bool) {
	for _, f := range r.out.Engine.Frames {
		if wire.Parse(f.Data, &r.pkt) != nil || r.pkt.Kind != wire.KindTCP {
			continue
		}
		if t := r.pkt.TCP; r.pkt.IP.Dst() == dst && t.DstPort() == port && t.Flags()&flags == flags {
			return t, true
		}
	}
	return nil, false
}

// splice is the RequestID of the pass's Splice datagram.
func (r *cycleRig) splice() (uint64, bool) {
	for _, d := range r.out.Datagrams {
		if m, ok := d.Msg.(*proto.Splice); ok && d.To == backendCtl(1) {
			return m.RequestID, true
		}
	}
	return 0, false
}

// cycle is one client's connection: handshake, request, handoff, the
// response's end and the close. It reports whether every step happened.
func (r *cycleRig) cycle(i int) bool {
	r.cycles++
	port := uint16(10000 + i%20000)
	isn := wire.Seq(uint32(i)*7919 + 1)
	tsC := uint32(i) * 10
	cli := wire.TCPFrame{SrcMAC: cycleCliMAC, DstMAC: cycleFEMAC, Src: cycleClient, Dst: cycleVIP,
		SrcPort: port, DstPort: 80, Window: 502}
	so := wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: tsC}
	cli.Seq, cli.Flags, cli.Options = isn, wire.TCPFlagSYN, r.ob[:so.Encode(r.ob[:])]
	r.input(&cli)
	synAck, ok := r.sent(cycleClient, port, wire.TCPFlagSYN|wire.TCPFlagACK)
	if !ok || wire.ParseOptions(synAck, &r.opts) != nil {
		return false
	}
	isnF, tsF := synAck.Seq(), r.opts.TSVal

	// The final ACK carries the request: the controller dispatches it
	// and the engine opens C2.
	cli.Seq, cli.Ack, cli.Flags = isn+1, isnF+1, wire.TCPFlagACK|wire.TCPFlagPSH
	cli.Options, cli.Payload = r.ob[:wire.EncodeTS(r.ob[:], tsC+1, tsF)], cycleRequest
	r.input(&cli)
	c2, ok := r.sent(backendIP1, 80, wire.TCPFlagSYN)
	if !ok || c2.Seq() != isn {
		return false
	}
	hport := c2.SrcPort()

	// The back-end's SYN-ACK: the engine asks for the Splice (and with
	// EarlyRequest the GET goes with it).
	isnB := wire.Seq(uint32(i)*104729 + 5)
	srv := wire.TCPFrame{SrcMAC: wire.MAC{2, 0, 0, 0, 0, 0x21}, DstMAC: cycleFEMAC, Src: backendIP1, Dst: cycleHandoff,
		SrcPort: 80, DstPort: hport, Seq: isnB, Ack: isn + 1, Flags: wire.TCPFlagSYN | wire.TCPFlagACK, Window: 65160}
	sa := wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 777, TSEcr: tsC + 1}
	srv.Options = r.ob[:sa.Encode(r.ob[:])]
	r.input(&srv)
	id, ok := r.splice()
	if !ok {
		return false
	}
	req, early := r.sent(backendIP1, 80, wire.TCPFlagACK)
	if early != r.ctrl.cfg.EarlyRequest {
		return false
	}

	// The shim confirms; the request goes on C2 now if it did not yet.
	r.ack = proto.SpliceAck{RequestID: id, BackendID: 1, OK: true}
	r.control(&r.ack)
	if !early {
		req, ok = r.sent(backendIP1, 80, wire.TCPFlagACK)
	}
	if !ok || len(req.Payload()) != len(cycleRequest) {
		return false
	}

	// The shim's header-only copy of the server's last segment: it has
	// the request and closes after the response, which went straight to
	// the client. Then the response's Feedback.
	srv.Seq, srv.Ack, srv.Flags = isnB+1+cycleRespSize, isn+1+wire.Seq(len(cycleRequest)), wire.TCPFlagACK|wire.TCPFlagFIN
	srv.Options = r.ob[:wire.EncodeTS(r.ob[:], 778, tsC+1)]
	r.input(&srv)
	r.fb = proto.Feedback{BackendID: 1, RequestID: id, ServiceTime: time.Millisecond, ResponseBytes: uint64(cycleRespSize),
		ResponseEnd: uint32(isnB + 1 + cycleRespSize)}
	r.control(&r.fb)

	// The client has the response and closes: its FIN goes on to C2.
	cli.Seq, cli.Ack, cli.Flags = isn+1+wire.Seq(len(cycleRequest)), isnF+1+cycleRespSize+1, wire.TCPFlagACK|wire.TCPFlagFIN
	cli.Options, cli.Payload = r.ob[:wire.EncodeTS(r.ob[:], tsC+2, tsF+1)], nil
	r.input(&cli)
	if _, ok := r.sent(backendIP1, 80, wire.TCPFlagFIN); !ok {
		return false
	}
	return true
}

var backendIP1 = wire.IP4From(backendIP(1))

// TestConnectionPerRequestAllocatesNothing runs the cycle until the
// engine's and controller's tables, free lists and interned strings are
// warm, then measures it: the front-end's whole handoff, engine and
// controller, allocates nothing per request. The counters prove every
// measured request was handed off, served and its connection closed and
// forgotten.
func TestConnectionPerRequestAllocatesNothing(t *testing.T) {
	testConnectionPerRequestAllocatesNothing(t, newCycleRig(t))
}

func testConnectionPerRequestAllocatesNothing(t *testing.T, r *cycleRig) {
	i := 0
	run := func() {
		if !r.cycle(i) {
			r.failed++
		}
		i++
	}
	for range 500 {
		run()
	}
	before := r.eng.Stats()
	servedBefore := r.customer("A").Served
	const runs = 300
	allocs := testing.AllocsPerRun(runs, run)
	if allocs != 0 {
		t.Errorf("a connection per request: %v allocations per request", allocs)
	}
	if r.failed != 0 {
		t.Fatalf("%d of %d cycles did not go through every step", r.failed, r.cycles)
	}
	after := r.eng.Stats()
	measured := uint64(runs + 1) // AllocsPerRun runs once more to warm up
	if got := after.HandoffsDone - before.HandoffsDone; got != measured {
		t.Errorf("%d handoffs done while measuring, want %d", got, measured)
	}
	if got := r.customer("A").Served - servedBefore; got != measured {
		t.Errorf("%d requests served while measuring, want %d", got, measured)
	}
	// Connections close and are forgotten as they go: only those inside
	// their linger are left, and once it passed, none.
	if n := r.eng.Flows(); n > 100 {
		t.Errorf("%d flows left in the engine after %d connections: they are not freed", n, i)
	}
	for range 3 {
		r.now += splice.Time(time.Second)
		r.out.Reset()
		r.timers()
	}
	if e, c := r.eng.Flows(), r.ctrl.Flows(); e != 0 || c != 0 {
		t.Errorf("after the linger %d flows are left in the engine, %d in the controller", e, c)
	}
}

func (r *cycleRig) customer(name string) CustomerStatus {
	for _, c := range r.ctrl.Status(r.now).Customers {
		if c.Name == name {
			return c
		}
	}
	r.t.Fatalf("no customer %q", name)
	return CustomerStatus{}
}

// BenchmarkConnectionPerRequest is the cycle above: what the front-end's
// pure cores (engine and controller, no system calls) cost per request
// on a new connection.
func BenchmarkConnectionPerRequest(b *testing.B) {
	r := newCycleRig(b)
	i := 0
	for range 500 {
		r.cycle(i)
		i++
	}
	b.ReportAllocs()
	for b.Loop() {
		if !r.cycle(i) {
			r.failed++
		}
		i++
	}
	if r.failed != 0 {
		b.Fatalf("%d of %d cycles did not go through every step", r.failed, r.cycles)
	}
}
