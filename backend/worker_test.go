package backend

import (
	"bytes"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

// newTestWorkers returns n workers with shards and pollers but no links:
// enough for the mailboxes, hand-overs and installs, which touch no link.
// Shard 0 takes control datagrams off the wire, as the daemon's does.
func newTestWorkers(t *testing.T, n int) *Daemon {
	t.Helper()
	d := &Daemon{cfg: Config{Addr: backendAddr, ControlPort: testControlPort}, mac: testTAPMAC, done: make(chan struct{}),
		log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	d.agent = NewAgent(AgentConfig{ID: 3})
	for i := range n {
		shim, err := splice.NewShim(d.testShimConfig(i, 0))
		if err != nil {
			t.Fatal(err)
		}
		p, err := link.NewPoller()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		w := &worker{d: d, id: i, shim: shim, poller: p, free: make(chan *handoff, handoffBufs)}
		w.loop.Store(w)
		for range handoffBufs {
			w.free <- &handoff{buf: make([]byte, 2048), home: w.free}
		}
		if i == 0 {
			w.agent = d.agent
		}
		d.workers = append(d.workers, w)
	}
	return d
}

// testShimConfig is shard i's configuration as newWorker makes it, with
// the given linger (0: the default).
func (d *Daemon) testShimConfig(i int, linger time.Duration) splice.ShimConfig {
	cfg := splice.ShimConfig{HostIP: backendAddr, WebPorts: []uint16{80}, Linger: linger}
	if i == 0 {
		cfg.ControlPort, cfg.HostMAC = d.cfg.ControlPort, d.mac
	}
	return cfg
}

// woken reports whether w's poller has a wake-up pending.
func woken(t *testing.T, w *worker) bool {
	t.Helper()
	var ready [4]uint32
	n, err := w.poller.Wait(0, ready[:])
	if err != nil {
		t.Fatal(err)
	}
	return n == 1 && ready[0] == link.WakeToken
}

func TestHandOverReachesTheOwningShard(t *testing.T) {
	d := newTestWorkers(t, 2)
	w0, w1 := d.workers[0], d.workers[1]
	f := tcpFrame(80, 40001)
	vh := wire.VNetHdr{Flags: 1, CsumStart: 34, CsumOffset: 16}

	// A busy owner is not woken (it reads its box every pass); a
	// sleeping one is.
	w0.handOver(1, f, vh)
	if woken(t, w1) {
		t.Fatal("a busy worker was woken")
	}
	w1.asleep.Store(true)
	w0.handOver(1, f, vh)
	if !woken(t, w1) {
		t.Fatal("a sleeping worker was not woken")
	}
	w1.asleep.Store(false)

	w1.out.Reset()
	w1.readMail(ms(1))
	if len(w1.out.Frames) != 2 || len(w1.held) != 2 {
		t.Fatalf("owner produced %d frames holding %d buffers, want 2 and 2", len(w1.out.Frames), len(w1.held))
	}
	for _, of := range w1.out.Frames {
		if of.Port != splice.PortWire || !bytes.Equal(of.Data, f) || of.VNet != vh {
			t.Fatalf("owner sent %v %x %+v, want the host frame passed to the wire with its vnet header", of.Port, of.Data, of.VNet)
		}
	}
	if st := w1.shim.Stats(); st.HostToWire != 2 {
		t.Fatalf("shard 1 stats %+v", st)
	}
	if got := w0.handoffs.Load(); got != 2 || len(w0.free) != handoffBufs-2 {
		t.Fatalf("handed over %d, %d buffers free", got, len(w0.free))
	}
	// The buffers go home once the owner's output is written.
	for _, h := range w1.held {
		h.home <- h
	}
	w1.held = w1.held[:0]
	if len(w0.free) != handoffBufs {
		t.Fatalf("%d buffers back home, want %d", len(w0.free), handoffBufs)
	}

	// An owner that does not keep up costs frames, not memory.
	for range handoffBufs + 3 {
		w0.handOver(1, f, vh)
	}
	if lost := w0.handoffLost.Load(); lost != 3 {
		t.Fatalf("%d frames dropped, want 3", lost)
	}
	// A frame larger than the buffers is dropped, not cut.
	w1.readMail(ms(2))
	for _, h := range w1.held {
		h.home <- h
	}
	w0.handOver(1, make([]byte, 4096), vh)
	if lost := w0.handoffLost.Load(); lost != 4 {
		t.Fatalf("%d frames dropped, want 4", lost)
	}
}

// TestHandOverTakesTwoBatchesBeforeTheOwnerReads: while the shards are
// gathered the loop reads a shard's whole TAP batch before it runs the
// owner's pass, which gives the buffers back; with the kernel's flow
// table full (short connections, drivers/net/tun.c keeps 4096 flows for
// 3 s) every frame of a batch can be another worker's. Two batches in
// flight lose nothing; the next frame is the first dropped.
func TestHandOverTakesTwoBatchesBeforeTheOwnerReads(t *testing.T) {
	d := newTestWorkers(t, 2)
	w0 := d.workers[0]
	f := tcpFrame(80, 40001)
	for range 2 * batchFrames {
		w0.handOver(1, f, wire.VNetHdr{})
	}
	if lost, done := w0.handoffLost.Load(), w0.handoffs.Load(); lost != 0 || done != 2*batchFrames {
		t.Fatalf("two batches handed over: %d passed, %d dropped; want %d and 0", done, lost, 2*batchFrames)
	}
	w0.handOver(1, f, wire.VNetHdr{})
	if lost := w0.handoffLost.Load(); lost != 1 {
		t.Fatalf("one more frame: %d dropped, want 1", lost)
	}
}

// TestSpliceInstalledInItsShardThenAcknowledged: worker 0's agent sends a
// Splice to the shard that owns the connection, which installs it and
// reports back; only then does worker 0 acknowledge it.
func TestSpliceInstalledInItsShardThenAcknowledged(t *testing.T) {
	d := newTestWorkers(t, 2)
	fe, _ := d.attachTestControl(t)
	w0, w1 := d.workers[0], d.workers[1]
	other, owner := handoffPortsOfShards()
	w0.aout.Reset()
	w1.kernelSynAck(testSplice(7, owner), ms(1))
	w0.aout.Install = append(w0.aout.Install, *testSplice(7, owner))
	w0.carryOut(ms(1))
	if len(w0.aout.Send) != 0 || w0.shim.Entries() != 0 {
		t.Fatalf("worker 0 acknowledged (%d) or installed (%d) a splice it does not own", len(w0.aout.Send), w0.shim.Entries())
	}
	w1.readMail(ms(2))
	if w1.shim.Entries() != 1 {
		t.Fatal("the owning shard did not install the splice")
	}
	w0.readMail(ms(3))
	w0.flushControl() // the end of the pass
	if a := recvAck(t, fe); !a.OK || a.RequestID != 7 {
		t.Fatalf("ack %+v, want OK for request 7", a)
	}

	// A Splice for worker 0's own shard is installed and acknowledged in
	// the same pass.
	w0.aout.Reset()
	w0.kernelSynAck(testSplice(8, other), ms(4))
	w0.aout.Install = append(w0.aout.Install, *testSplice(8, other))
	w0.carryOut(ms(4))
	if w0.shim.Entries() != 1 {
		t.Fatal("worker 0 did not install the splice of its own shard")
	}
	w0.flushControl()
	if a := recvAck(t, fe); !a.OK || a.RequestID != 8 {
		t.Fatalf("ack %+v, want OK for request 8", a)
	}

	// Another shard's finished response becomes Feedback on worker 0,
	// with the requests in service summed over the shards.
	w1.active.Store(2)
	w0.active.Store(1)
	w0.post(mail{kind: mailEvent, ev: splice.Event{Kind: splice.EvResponseDone, RequestID: 7, Bytes: 10}})
	w0.readMail(ms(5))
	w0.flushControl()
	m := recvMsg(t, fe)
	if fb, ok := m.(*proto.Feedback); !ok || fb.RequestID != 7 || fb.Concurrency != 3 || fb.BackendID != 3 {
		t.Fatalf("sent %+v, want Feedback for request 7 with concurrency 3", m)
	}
}

// kernelSynAck feeds w's shard the kernel's SYN-ACK of the C2 connection
// m names, as it crosses the shim before the front-end sends m: the shim
// takes a Splice only for a handshake it saw. Its ACK makes m's
// RequestEnd the end of an empty request.
func (w *worker) kernelSynAck(m *proto.Splice, now splice.Time) {
	w.inputKernelSynAck(m, now)
	w.out.Reset()
}

// inputKernelSynAck is kernelSynAck leaving what the shim made of it
// (the frame passed on, events) in w.out.
func (w *worker) inputKernelSynAck(m *proto.Splice, now splice.Time) {
	tf := wire.TCPFrame{Src: m.BackendIP.As4(), Dst: m.HandoffIP.As4(), SrcPort: m.BackendPort, DstPort: m.HandoffPort,
		Seq: 0x1000, Ack: wire.Seq(m.RequestEnd), Flags: wire.TCPFlagSYN | wire.TCPFlagACK, Window: 64240}
	f := make([]byte, tf.Len())
	tf.Encode(f)
	w.out.Reset()
	w.shim.Input(splice.PortHost, f, now, &w.out)
}

// handoffPortsOfShards returns, of two shards, a handoff port whose
// Splice (back-end port 80) shard 0 owns and one shard 1 owns.
func handoffPortsOfShards() (shard0, shard1 uint16) {
	for p := uint16(40000); shard0 == 0 || shard1 == 0; p++ {
		if shardOf(&proto.Splice{BackendPort: 80, HandoffPort: p}, 2) == 0 {
			shard0 = p
		} else {
			shard1 = p
		}
	}
	return shard0, shard1
}

// attachTestControl gives worker 0 a control socket on loopback and
// returns the socket playing the front-end.
func (d *Daemon) attachTestControl(t *testing.T) (*net.UDPConn, *proto.Codec) {
	t.Helper()
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(lo))
	if err != nil {
		t.Fatal(err)
	}
	fe, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(lo))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); fe.Close() })
	d.cfg.ID, d.cfg.Key, d.cfg.Frontend = 3, testKey, fe.LocalAddr().(*net.UDPAddr).AddrPort()
	d.incarnation = 5
	if err := d.workers[0].attachControl(conn); err != nil {
		t.Fatal(err)
	}
	codec, err := proto.NewFrontEndCodec(testMaster, 1)
	if err != nil {
		t.Fatal(err)
	}
	return fe, codec
}

func recvMsg(t *testing.T, c *net.UDPConn) proto.Message {
	t.Helper()
	buf := make([]byte, proto.MaxDatagram)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	_, m, err := proto.Unmarshal(testKey, buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func recvAck(t *testing.T, c *net.UDPConn) *proto.SpliceAck {
	t.Helper()
	m := recvMsg(t, c)
	a, ok := m.(*proto.SpliceAck)
	if !ok {
		t.Fatalf("got %T, want a SpliceAck", m)
	}
	return a
}

// TestControlSocketReadInTheLoop: datagrams on the control socket are
// read by worker 0's pass when its poller reports them, good and bad.
func TestControlSocketReadInTheLoop(t *testing.T) {
	d := newTestWorkers(t, 1)
	fe, codec := d.attachTestControl(t)
	w0 := d.workers[0]
	to := d.ctl.LocalAddr()
	w0.kernelSynAck(testSplice(9, 40001), ms(1))
	b, _ := codec.Append(nil, testSplice(9, 40001))
	fe.WriteToUDPAddrPort(b, to)
	fe.WriteToUDPAddrPort([]byte("garbage"), to)
	var ready [4]uint32
	n, err := w0.poller.Wait(2*time.Second, ready[:])
	if err != nil || n != 1 || ready[0] != tokControl {
		t.Fatalf("poller: %d %v %v, want the control token", n, ready[:n], err)
	}
	w0.readControl(ms(1))
	w0.flushControl() // the end of the pass
	if a := recvAck(t, fe); !a.OK || a.RequestID != 9 {
		t.Fatalf("ack %+v", a)
	}
	st := d.agent.Stats()
	if st.Splices != 1 || st.BadMessages != 1 || w0.shim.Entries() != 1 {
		t.Fatalf("agent stats %+v, %d entries", st, w0.shim.Entries())
	}
}
