package backend

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

// requestCycle is everything one spliced request sends through the shim's
// workers, built before the measurement: the kernel's SYN-ACK, the
// front-end's Splice datagram, the handed-over request from the wire, the
// kernel's reply (a whole response: its head announces the length) and
// its RST, which starts the linger after which the entry goes.
type requestCycle struct {
	id                 uint64
	shard              int
	synAck, req, reply []byte
	rst                []byte
	splice             []byte // the Splice datagram, sealed by the front-end
	spliceFrame        []byte // the same datagram as it crosses the wire
}

const (
	cycleRequest = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	cycleReply   = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"
)

func newRequestCycle(t *testing.T, fe *proto.Codec, id uint64, port uint16, shards int) requestCycle {
	t.Helper()
	m := testSplice(id, port)
	isnB := wire.Seq(0x1000)
	frame := func(tf wire.TCPFrame) []byte {
		b := make([]byte, tf.Len())
		tf.Encode(b)
		return b
	}
	host := wire.TCPFrame{Src: m.BackendIP.As4(), Dst: m.HandoffIP.As4(), SrcPort: m.BackendPort, DstPort: m.HandoffPort,
		Window: 64240}
	c := requestCycle{id: id, shard: shardOf(m, shards)}
	synAck := host
	synAck.Seq, synAck.Ack, synAck.Flags = isnB, wire.Seq(m.RequestEnd), wire.TCPFlagSYN|wire.TCPFlagACK
	c.synAck = frame(synAck)
	c.req = frame(wire.TCPFrame{Src: m.HandoffIP.As4(), Dst: m.BackendIP.As4(), SrcPort: m.HandoffPort, DstPort: m.BackendPort,
		Seq: wire.Seq(m.RequestEnd), Ack: isnB + 1, Flags: wire.TCPFlagACK | wire.TCPFlagPSH, Window: 64240,
		Payload: []byte(cycleRequest)})
	reply := host
	reply.Seq, reply.Ack, reply.Flags = isnB+1, wire.Seq(m.RequestEnd)+wire.Seq(len(cycleRequest)), wire.TCPFlagACK|wire.TCPFlagPSH
	reply.Payload = []byte(cycleReply)
	c.reply = frame(reply)
	rst := host
	rst.Seq, rst.Ack, rst.Flags = isnB+1+wire.Seq(len(cycleReply)), reply.Ack, wire.TCPFlagACK|wire.TCPFlagRST
	c.rst = frame(rst)
	var err error
	if c.splice, err = fe.Append(nil, m); err != nil {
		t.Fatal(err)
	}
	c.spliceFrame = ctlWireFrame(c.splice)
	return c
}

// TestRequestCycleAllocatesNothing drives two workers (worker 0 with the
// control socket and the agent) through whole requests, half of them in
// each shard: the Splice datagram in, installed in its shard, the
// SpliceAck out, the request and the reply through the shard, the
// Feedback out, the entry expired after its linger. After a warm-up a
// request allocates nothing, and each one really ran: the front-end
// receives its OK ack and its Feedback, and the shard forgets it. The
// Splice comes through the control socket, or off the wire.
func TestRequestCycleAllocatesNothing(t *testing.T) {
	for _, path := range []string{"socket", "wire"} {
		t.Run(path, func(t *testing.T) { testRequestCycleAllocatesNothing(t, path == "wire") })
	}
}

func testRequestCycleAllocatesNothing(t *testing.T, offWire bool) {
	const warm, runs = 64, 200
	d := newTestWorkers(t, 2)
	for i, w := range d.workers {
		shim, err := splice.NewShim(d.testShimConfig(i, 10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		w.shim = shim
	}
	fe, feCodec := d.attachTestControl(t)
	w0 := d.workers[0]
	to := d.ctl.LocalAddr()
	if offWire {
		// The Splices come off the wire from the front-end's control
		// address, so the answers go back on the wire.
		d.cfg.Frontend = feControl
	}

	cycles := make([]requestCycle, warm+runs+1)
	for i := range cycles {
		cycles[i] = newRequestCycle(t, feCodec, uint64(100+i), uint16(40000+i), len(d.workers))
	}
	shards := [2]int{}
	for _, c := range cycles {
		shards[c.shard]++
	}
	if shards[0] == 0 || shards[1] == 0 {
		t.Fatalf("requests per shard %v: both paths must run", shards)
	}
	scratch := make([]byte, 2048)
	rbuf := make([]byte, proto.MaxDatagram)
	if err := fe.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var failed string
	fail := func(msg string) {
		if failed == "" {
			failed = msg
		}
	}
	// recv reads the next datagram at the front-end: the type and
	// request it names (0, 0 for anything else).
	recv := func() (proto.Type, uint64) {
		var b []byte
		if offWire {
			// The one frame the pass queued for the wire, its
			// datagram as the front-end's kernel would deliver it.
			if len(w0.wireFrames) != 1 {
				fail("not one control frame queued for the wire")
				return 0, 0
			}
			b = w0.wireFrames[0][controlFrameHeaders:]
			defer w0.wireWritten()
		} else {
			n, _, err := fe.ReadFromUDPAddrPort(rbuf)
			if err != nil {
				fail("front-end read: " + err.Error())
				return 0, 0
			}
			b = rbuf[:n]
		}
		m, err := feCodec.Decode(b)
		switch m := m.(type) {
		case *proto.SpliceAck:
			if !m.OK {
				fail("splice refused: " + m.Reason)
			}
			return m.Type(), m.RequestID
		case *proto.Feedback:
			if m.ResponseBytes != uint64(len(cycleReply)) {
				fail("feedback with the wrong byte count")
			}
			return m.Type(), m.RequestID
		}
		if err != nil {
			fail("front-end decode: " + err.Error())
		}
		return 0, 0
	}
	input := func(w *worker, port splice.Port, f []byte, now splice.Time) {
		n := copy(scratch, f) // the shard translates in place
		w.out.Reset()
		w.shim.Input(port, scratch[:n], now, &w.out)
	}
	next := 0
	now := ms(1000)
	cycle := func() {
		c := &cycles[next]
		next++
		now = now.Add(100 * time.Millisecond)
		w := d.workers[c.shard]
		input(w, splice.PortHost, c.synAck, now)
		if offWire {
			w0.out.Reset()
			w0.inputWire(c.spliceFrame, wire.VNetHdr{}, now)
		} else {
			if _, err := fe.WriteToUDPAddrPort(c.splice, to); err != nil {
				fail(err.Error())
			}
			w0.readControl(now)
		}
		d.workers[1].readMail(now)
		w0.readMail(now)
		w0.flushControl()
		if typ, id := recv(); typ != proto.TypeSpliceAck || id != c.id {
			fail("no SpliceAck for the request")
		}
		input(w, splice.PortWire, c.req, now)
		input(w, splice.PortHost, c.reply, now.Add(time.Millisecond))
		if len(w.out.Frames) == 0 || w.out.Frames[len(w.out.Frames)-1].Port != splice.PortWire {
			fail("the reply did not leave for the client")
		}
		w.publishActive()
		w.passEvents(now, true) // worker 0: the Feedback, as flush hands it over first
		w.passEvents(now, false)
		w0.readMail(now)
		w0.flushControl()
		if typ, id := recv(); typ != proto.TypeFeedback || id != c.id {
			fail("no Feedback for the request")
		}
		input(w, splice.PortHost, c.rst, now.Add(2*time.Millisecond))
		w.out.Reset()
		w.shim.Tick(now.Add(50*time.Millisecond), &w.out)
		if w.shim.Entries() != 0 {
			fail("the entry outlived its linger")
		}
	}
	for range warm {
		cycle()
	}
	allocs := testing.AllocsPerRun(runs, cycle)
	if failed != "" {
		t.Fatal(failed)
	}
	if next != len(cycles) {
		t.Fatalf("ran %d cycles, want %d", next, len(cycles))
	}
	st := d.agent.Stats()
	spliced := d.workers[0].shim.Stats().Splices + d.workers[1].shim.Stats().Splices
	if st.Splices != uint64(len(cycles)) || st.Feedbacks != uint64(len(cycles)) || spliced != uint64(len(cycles)) {
		t.Fatalf("agent %+v, %d splices installed, want %d of each", st, spliced, len(cycles))
	}
	if taken := w0.shim.Stats().ControlTaken; offWire != (taken == uint64(len(cycles))) {
		t.Fatalf("%d Splices taken off the wire, of %d", taken, len(cycles))
	}
	if sent := w0.ctlOut.wire; offWire != (sent == 2*uint64(len(cycles))) {
		t.Fatalf("%d datagrams sent on the wire for %d requests", sent, len(cycles))
	}
	t.Logf("%.2f allocations per request", allocs)
	if allocs != 0 {
		t.Errorf("a request cycle allocates %.2f times, want 0", allocs)
	}
}

// TestAgentTimersAllocateNothing: the agent's periodic work, a Keepalive
// sent and its echo taken, and a probe answered, allocates nothing once
// warm.
func TestAgentTimersAllocateNothing(t *testing.T) {
	r := newAgentRig(t, 0)
	r.control(&proto.RegisterAck{BackendID: testID, Incarnation: testInc, KeepaliveInterval: time.Second}, ms(0))
	now := ms(0)
	echo := &proto.Keepalive{BackendID: testID, Incarnation: testInc}
	sentKA := 0
	step := func() {
		now = now.Add(time.Second)
		r.tick(now)
		for _, m := range r.out.Send {
			if ka, ok := m.(*proto.Keepalive); ok {
				sentKA++
				echo.Seq = ka.Seq
			}
		}
		r.control(echo, now)
		echo.Seq = 0 // a probe
		r.control(echo, now)
		sentKA += len(r.out.Send)
	}
	for range 8 {
		step()
	}
	allocs := testing.AllocsPerRun(100, step)
	if sentKA != 2*109 || !r.a.Registered() {
		t.Fatalf("%d keepalives sent, registered %v; want two a second, registered", sentKA, r.a.Registered())
	}
	if allocs != 0 {
		t.Errorf("a keepalive period allocates %.2f times, want 0", allocs)
	}
}

// TestRefusedControlDatagramsAllocateNothing: anyone on the segment can
// send the control socket datagrams; refusing them (garbage, a forged
// tag, a replay) costs a count, and past the first few log lines nothing
// else. On the socket and off the wire.
func TestRefusedControlDatagramsAllocateNothing(t *testing.T) {
	for _, path := range []string{"socket", "wire"} {
		t.Run(path, func(t *testing.T) { testRefusedControlDatagramsAllocateNothing(t, path == "wire") })
	}
}

func testRefusedControlDatagramsAllocateNothing(t *testing.T, offWire bool) {
	d := newTestWorkers(t, 1)
	fe, feCodec := d.attachTestControl(t)
	w0 := d.workers[0]
	to := d.ctl.LocalAddr()
	good, err := feCodec.Append(nil, &proto.Keepalive{BackendID: 3, Incarnation: 5, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	forged := append([]byte(nil), good...)
	forged[len(forged)-1] ^= 1
	bad := [][]byte{[]byte("garbage"), forged, good} // good: accepted once, then a replay
	frames := make([][]byte, len(bad))
	for i, b := range bad {
		frames[i] = ctlWireFrame(b)
	}
	i := 0
	refuse := func() {
		if offWire {
			w0.out.Reset()
			w0.inputWire(frames[i%len(frames)], wire.VNetHdr{}, ms(1))
			i++
			return
		}
		if _, err := fe.WriteToUDPAddrPort(bad[i%len(bad)], to); err != nil {
			t.Error(err)
		}
		i++
		w0.readControl(ms(1))
	}
	for range 30 { // the first refusals are logged
		refuse()
	}
	before := d.agent.Stats()
	allocs := testing.AllocsPerRun(300, refuse)
	after := d.agent.Stats()
	if got := after.BadMessages - before.BadMessages; got != 301 {
		t.Fatalf("%d datagrams refused, want 301", got)
	}
	for _, reason := range []string{"auth", "replay"} {
		if after.Refused[reason] <= before.Refused[reason] {
			t.Errorf("no datagram refused for %q: %v", reason, after.Refused)
		}
	}
	if taken := w0.shim.Stats().ControlTaken; offWire != (taken == 331) {
		t.Fatalf("%d datagrams taken off the wire", taken)
	}
	if allocs != 0 {
		t.Errorf("a refused control datagram allocates %.2f times, want 0", allocs)
	}
}
