package backend

// Control datagrams taken off the wire (worker.go, wireControl): the
// agent gets them exactly as it gets those of the control socket, in the
// pass that read them, and before the frame that follows them.

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

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
	f := make([]byte, 14+20+8+len(b))
	eth := wire.Ethernet(f)
	eth.SetDst(testTAPMAC)
	eth.SetSrc(testFEMAC)
	eth.SetEtherType(wire.EtherTypeIPv4)
	ip := wire.IPv4(f[14:])
	ip[0], ip[8], ip[9] = 0x45, 64, wire.ProtoUDP
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(b)))
	ip.SetSrc(feControl.Addr().As4())
	ip.SetDst(backendAddr.As4())
	ip.SetChecksum(ip[:20].ComputeChecksum())
	u := f[14+20:]
	binary.BigEndian.PutUint16(u, feControl.Port())
	binary.BigEndian.PutUint16(u[2:], testControlPort)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(b)))
	copy(u[8:], b)
	binary.BigEndian.PutUint16(u[6:], ^wire.Fold(wire.Sum(u, wire.PseudoHeaderSum(ip.Src(), ip.Dst(), wire.ProtoUDP, uint16(len(u))))))
	return f
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
	var mine, theirs uint16
	for p := uint16(40000); mine == 0 || theirs == 0; p++ {
		if shardOf(&proto.Splice{BackendPort: 80, HandoffPort: p}, 2) == 0 {
			mine = p
		} else {
			theirs = p
		}
	}

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
