package backend

// Control datagrams taken off the wire (worker.go, wireControl): the
// agent gets them exactly as it gets those of the control socket, in the
// pass that read them, and before the frame that follows them.

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

const testControlPort = 7401

var (
	testTAPMAC = wire.MAC{2, 0, 0, 0x99, 0, 2} // the back-end kernel's, as the rig's TAPMAC
	testFEMAC  = wire.MAC{2, 0, 0, 0x99, 0, 1}
	// feControl is where the rig's front-end sends from on the wire.
	feControl = netip.AddrPortFrom(feAddr, 7400)
)

// ctlWireFrame is datagram b from the front-end's control socket to the
// back-end's control port as it crosses the wire: Ethernet, IPv4 and UDP
// headers with both checksums.
func ctlWireFrame(b []byte) []byte {
	f := wire.UDPFrame{SrcMAC: testFEMAC, DstMAC: testTAPMAC, Src: feControl.Addr().As4(), Dst: backendAddr.As4(),
		SrcPort: feControl.Port(), DstPort: testControlPort, Payload: b}
	buf := make([]byte, f.Len())
	f.Encode(buf)
	return buf
}

// deliverWire has worker 0 read datagrams off the wire, each in a frame
// of its own, as its pass would, and asserts the shard took every one
// (none went on to the host).
func deliverWire(t *testing.T, d *Daemon, _ *net.UDPConn, dgs ...[]byte) {
	t.Helper()
	w0 := d.workers[0]
	for _, b := range dgs {
		before := w0.shim.Stats().ControlTaken
		w0.out.Reset()
		w0.inputWire(ctlWireFrame(b), wire.VNetHdr{}, ms(1))
		if len(w0.out.Frames) != 0 || len(w0.out.Control) != 0 || w0.shim.Stats().ControlTaken != before+1 {
			t.Fatalf("a control datagram off the wire: %d frames out, %d datagrams left, taken %d -> %d",
				len(w0.out.Frames), len(w0.out.Control), before, w0.shim.Stats().ControlTaken)
		}
	}
	w0.flushControl() // the end of the pass
}

// controlPaths are the two ways a datagram reaches the agent: the
// kernel's control socket, and the wire (taken by shard 0).
var controlPaths = []struct {
	name    string
	deliver func(t *testing.T, d *Daemon, fe *net.UDPConn, dgs ...[]byte)
}{
	{"socket", deliver},
	{"wire", deliverWire},
}

// TestWireSpliceInstalledAndAcknowledged: a Splice off the wire is
// installed in the shard that owns its connection and acknowledged, like
// one from the socket; and the request right behind it, in the same read
// batch, reaches the host at once instead of being held for its Splice.
func TestWireSpliceInstalledAndAcknowledged(t *testing.T) {
	d := newTestWorkers(t, 2)
	fe, codec := d.attachTestControl(t)
	w0, w1 := d.workers[0], d.workers[1]
	mine, theirs := handoffPortsOfShards()

	// Worker 0's own shard: the Splice, then its request, in one batch.
	sp := testSplice(7, mine)
	w0.kernelSynAck(sp, ms(1))
	b, _ := codec.Append(nil, sp)
	req := wire.TCPFrame{SrcMAC: testFEMAC, DstMAC: testTAPMAC, Src: sp.HandoffIP.As4(), Dst: sp.BackendIP.As4(),
		SrcPort: sp.HandoffPort, DstPort: sp.BackendPort, Seq: wire.Seq(sp.RequestEnd), Ack: 0x1001,
		Flags: wire.TCPFlagACK | wire.TCPFlagPSH, Window: 502, Payload: []byte("GET / HTTP/1.1\r\n\r\n")}
	reqFrame := make([]byte, req.Len())
	req.Encode(reqFrame)
	w0.out.Reset()
	w0.inputWire(ctlWireFrame(b), wire.VNetHdr{}, ms(2))
	w0.inputWire(reqFrame, wire.VNetHdr{}, ms(2))
	w0.flushControl()
	if a := recvAck(t, fe); !a.OK || a.RequestID != 7 {
		t.Fatalf("ack %+v, want OK for request 7", a)
	}
	st := w0.shim.Stats()
	if w0.shim.Entries() != 1 || st.ControlTaken != 1 || st.HeldRequests != 0 || st.EarlyRequests != 0 ||
		len(w0.out.Frames) != 1 || w0.out.Frames[0].Port != splice.PortHost {
		t.Fatalf("entries %d, %d frames out, stats %+v: want the splice in place and its request passed to the host",
			w0.shim.Entries(), len(w0.out.Frames), st)
	}

	// Another shard's: installed there, then acknowledged by worker 0.
	sp = testSplice(8, theirs)
	w1.kernelSynAck(sp, ms(3))
	b, _ = codec.Append(nil, sp)
	w0.out.Reset()
	w0.inputWire(ctlWireFrame(b), wire.VNetHdr{}, ms(3))
	if w1.shim.Entries() != 0 {
		t.Fatal("installed before the owning shard read its mail")
	}
	w1.readMail(ms(3))
	w0.readMail(ms(3))
	w0.flushControl()
	if a := recvAck(t, fe); !a.OK || a.RequestID != 8 {
		t.Fatalf("ack %+v, want OK for request 8", a)
	}
	if w1.shim.Entries() != 1 || w0.shim.Entries() != 1 || d.agent.Stats().Splices != 2 {
		t.Fatalf("entries %d and %d, agent %+v", w0.shim.Entries(), w1.shim.Entries(), d.agent.Stats())
	}
}

// A datagram the kernel would have dropped (here a bad UDP checksum)
// never reaches the agent: not even as a refusal.
func TestWireControlBrokenDatagramNeverReachesTheAgent(t *testing.T) {
	d := newTestWorkers(t, 1)
	_, codec := d.attachTestControl(t)
	w0 := d.workers[0]
	b, _ := codec.Append(nil, &proto.Keepalive{BackendID: 3, Incarnation: 5, Seq: 1})
	f := ctlWireFrame(b)
	f[len(f)-1] ^= 1
	w0.out.Reset()
	w0.inputWire(f, wire.VNetHdr{}, ms(1))
	if st, sh := d.agent.Stats(), w0.shim.Stats(); st.Echoes != 0 || st.BadMessages != 0 ||
		sh.ControlBadChecksum != 1 || len(w0.out.Frames) != 0 {
		t.Fatalf("agent %+v, shim %+v, %d frames out", st, sh, len(w0.out.Frames))
	}
}

// frontEndHost is a shim engine standing for the front-end's host: it
// takes a frame the back-end built for the front-end's control port only
// if its kernel would deliver it (addresses, lengths, checksums), and
// returns the datagram.
func frontEndHost(t *testing.T, f []byte) []byte {
	t.Helper()
	h, err := splice.NewShim(splice.ShimConfig{HostIP: feAddr, WebPorts: []uint16{80},
		ControlPort: feControl.Port(), HostMAC: testFEMAC})
	if err != nil {
		t.Fatal(err)
	}
	var out splice.Output
	h.Input(splice.PortWire, f, ms(1), &out)
	if len(out.Control) != 1 || out.Control[0].From != netip.AddrPortFrom(backendAddr, testControlPort) ||
		out.Control[0].SrcMAC != testTAPMAC {
		t.Fatalf("the front-end's host did not take the frame: %d datagrams, stats %+v", len(out.Control), h.Stats())
	}
	return out.Control[0].Payload
}

// sentOnWire returns the messages worker 0 queued for the wire, decoded
// as the front-end would, and forgets the frames as writeWire does.
func sentOnWire(t *testing.T, w *worker) []proto.Message {
	t.Helper()
	var ms []proto.Message
	for _, f := range w.wireFrames {
		_, m, err := proto.Unmarshal(testKey, frontEndHost(t, f))
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	w.wireWritten()
	return ms
}

// TestControlAnsweredOnTheWire: once a datagram from the front-end's
// control address came off the wire and authenticated, worker 0 answers
// on the wire, in a frame the front-end's host takes (addresses, ports
// and both checksums right) with the datagram the socket would have
// sent; Register, and everything once the front-end's MAC is stale or
// the pass's buffers are gone, goes through the socket.
func TestControlAnsweredOnTheWire(t *testing.T) {
	d := newTestWorkers(t, 1)
	_, codec := d.attachTestControl(t)
	d.cfg.Frontend = feControl
	w0 := d.workers[0]

	// Nothing heard yet: the socket.
	w0.send(&proto.Keepalive{BackendID: 3, Incarnation: 5, Seq: 1}, ms(1))
	if w0.ctlOut.socket != 1 || w0.ctlOut.wire != 0 || d.ctl.Queued() != 1 {
		t.Fatalf("sent %d on the wire, %d on the socket before the front-end was heard", w0.ctlOut.wire, w0.ctlOut.socket)
	}
	w0.flushControl()

	// A forged datagram from the front-end's address teaches nothing.
	forged, _ := codec.Append(nil, &proto.Keepalive{BackendID: 3, Incarnation: 5, Seq: 0})
	forged[len(forged)-1] ^= 1
	deliverWire(t, d, nil, forged)
	if w0.ctlOut.known || len(w0.wireFrames) != 0 {
		t.Fatal("a forged datagram taught the front-end's MAC")
	}

	// A Splice off the wire is acknowledged on the wire, ahead of any
	// frame of the pass.
	sp := testSplice(9, 40001)
	w0.kernelSynAck(sp, ms(2))
	b, _ := codec.Append(nil, sp)
	deliverWire(t, d, nil, b)
	got := sentOnWire(t, w0)
	if len(got) != 1 {
		t.Fatalf("%d messages on the wire, want the SpliceAck", len(got))
	}
	if a, ok := got[0].(*proto.SpliceAck); !ok || !a.OK || a.RequestID != 9 {
		t.Fatalf("sent %+v on the wire, want an OK SpliceAck for request 9", got[0])
	}

	// Register never goes on the wire; a keepalive does, until the MAC
	// is stale.
	w0.send(&proto.Register{BackendID: 3, IP: backendAddr, ControlPort: testControlPort, WebPorts: []uint16{80},
		Capacity: 5, Incarnation: 5}, ms(3))
	w0.send(&proto.Keepalive{BackendID: 3, Incarnation: 5, Seq: 2}, ms(3))
	w0.flushControl()
	if got := sentOnWire(t, w0); len(got) != 1 || got[0].Type() != proto.TypeKeepalive {
		t.Fatalf("sent %v on the wire, want the Keepalive only", got)
	}
	w0.send(&proto.Keepalive{BackendID: 3, Incarnation: 5, Seq: 3}, ms(2).Add(wireControlFresh+time.Millisecond))
	w0.flushControl()
	if len(w0.wireFrames) != 0 || w0.ctlOut.wire != 2 || w0.ctlOut.socket != 3 {
		t.Fatalf("%d frames queued, %d sent on the wire and %d on the socket; want the stale one on the socket",
			len(w0.wireFrames), w0.ctlOut.wire, w0.ctlOut.socket)
	}

	// A pass that runs out of frame buffers sends the rest on the socket.
	deliverWire(t, d, nil, mustAppend(t, codec, &proto.Keepalive{BackendID: 3, Incarnation: 5, Seq: 4}))
	sentOnWire(t, w0) // the echo teaches the MAC again and is not answered (Seq != 0)
	for i := range wireControlFrames + 2 {
		w0.send(&proto.Keepalive{BackendID: 3, Incarnation: 5, Seq: uint64(10 + i)}, ms(4))
	}
	w0.flushControl()
	if len(w0.wireFrames) != wireControlFrames || w0.ctlOut.socket != 5 {
		t.Fatalf("%d frames queued for the wire, %d datagrams on the socket; want %d and 5", len(w0.wireFrames), w0.ctlOut.socket, wireControlFrames)
	}
	if got := sentOnWire(t, w0); len(got) != wireControlFrames {
		t.Fatalf("%d messages on the wire", len(got))
	}
	w0.send(&proto.Keepalive{BackendID: 3, Incarnation: 5, Seq: 100}, ms(5))
	w0.flushControl()
	if len(w0.wireFrames) != 1 {
		t.Fatal("the frame buffers were not free again once written")
	}
}

// A datagram from another address than the front-end's control address,
// even a genuine one, does not decide where the answers go.
func TestControlAnswersGoToTheConfiguredFrontEnd(t *testing.T) {
	d := newTestWorkers(t, 1)
	_, codec := d.attachTestControl(t) // the front-end: a socket on loopback, not feControl
	w0 := d.workers[0]
	sp := testSplice(9, 40001)
	w0.kernelSynAck(sp, ms(1))
	deliverWire(t, d, nil, mustAppend(t, codec, sp))
	if w0.ctlOut.known || len(w0.wireFrames) != 0 || w0.ctlOut.socket != 1 {
		t.Fatalf("an answer to a datagram from %v went on the wire (front-end %v)", feControl, d.cfg.Frontend)
	}
}

// The frame is exactly what a kernel would send: checked field by field.
func TestBuildControlFrame(t *testing.T) {
	payload := []byte("sealed")
	f := buildControlFrame(make([]byte, controlFrameHeaders+len(payload)+10), testTAPMAC, testFEMAC,
		netip.AddrPortFrom(backendAddr, testControlPort), feControl, 0x1234, payload)
	var p wire.Packet
	if err := wire.Parse(f, &p); err != nil || p.Kind != wire.KindIPv4 || len(f) != controlFrameHeaders+len(payload) {
		t.Fatalf("parse: %v, kind %d, %d bytes", err, p.Kind, len(f))
	}
	ip := p.IP
	if p.Eth.Src() != testTAPMAC || p.Eth.Dst() != testFEMAC || ip.ID() != 0x1234 || ip.TTL() != 64 ||
		binary.BigEndian.Uint16(ip[6:]) != 0x4000 || ip.Src() != backendAddr.As4() || ip.Dst() != feAddr.As4() {
		t.Fatalf("headers: %v -> %v, %v -> %v, id %#x ttl %d flags %#x", p.Eth.Src(), p.Eth.Dst(), ip.Src(), ip.Dst(),
			ip.ID(), ip.TTL(), binary.BigEndian.Uint16(ip[6:]))
	}
	if got := frontEndHost(t, f); string(got) != "sealed" {
		t.Fatalf("payload %q", got)
	}
}

func mustAppend(t *testing.T, c *proto.Codec, m proto.Message) []byte {
	t.Helper()
	b, err := c.Append(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWireSpliceSentWithTheSYNAcknowledgedWhenItsSynAckPasses: a Splice
// sent with C2's SYN waits in the shard that owns its connection and is
// acknowledged by worker 0 once the kernel's SYN-ACK has completed it
// there, in worker 0's own shard and in another's.
func TestWireSpliceSentWithTheSYNAcknowledgedWhenItsSynAckPasses(t *testing.T) {
	d := newTestWorkers(t, 2)
	fe, codec := d.attachTestControl(t)
	w0, w1 := d.workers[0], d.workers[1]
	mine, theirs := handoffPortsOfShards()
	for i, w := range []*worker{w0, w1} {
		port := mine
		if w == w1 {
			port = theirs
		}
		id := uint64(30 + i)
		sp := testSplice(id, port)
		sp.Flags |= proto.SpliceAtSYN
		sp.SeqDelta += 0x1000 // ISN_f, as the SYN-ACK's ISN 0x1000 resolves it
		b, _ := codec.Append(nil, sp)
		w0.out.Reset()
		w0.inputWire(ctlWireFrame(b), wire.VNetHdr{}, ms(int64(10*i+1)))
		w1.readMail(ms(int64(10*i + 1)))
		w0.readMail(ms(int64(10*i + 1)))
		if w.shim.Entries() != 0 || w.shim.Stats().AtSYNWaited != 1 || d.agent.Stats().SplicesAtSYN != uint64(i+1) {
			t.Fatalf("shard %d before the SYN-ACK: %d entries, shim %+v, agent %+v", w.id, w.shim.Entries(), w.shim.Stats(), d.agent.Stats())
		}
		w.inputKernelSynAck(sp, ms(int64(10*i+2)))
		w.passEvents(ms(int64(10*i+2)), false)
		w0.readMail(ms(int64(10*i + 2)))
		w0.flushControl()
		if a := recvAck(t, fe); !a.OK || a.RequestID != id {
			t.Fatalf("shard %d: ack %+v, want OK for request %d", w.id, a, id)
		}
		if ent := w.shim.Entries(); ent != 1 || w.shim.Stats().AtSYNCompleted != 1 {
			t.Fatalf("shard %d after the SYN-ACK: %d entries, shim %+v", w.id, ent, w.shim.Stats())
		}
	}
}
