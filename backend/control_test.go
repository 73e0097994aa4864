package backend

import (
	"net"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
)

// The shim's control socket against an attacker on the LAN (issue 9):
// with the starting code a recorded Splice was installed again whenever
// it was sent, so once its handoff port was reused for another client's
// connection that client's response went to the recorded client. Now a
// Splice is taken once, from the running front-end only; the shim's own
// datagrams reflected back and Splices sealed with another back-end's
// key are refused too.

// deliver sends datagrams to worker 0's control socket and has it read
// them, as its pass would.
func deliver(t *testing.T, d *Daemon, fe *net.UDPConn, dgs ...[]byte) {
	t.Helper()
	for _, b := range dgs {
		if _, err := fe.WriteToUDPAddrPort(b, d.ctl.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	w0 := d.workers[0]
	var ready [4]uint32
	deadline := time.Now().Add(5 * time.Second)
	for read := 0; read < len(dgs); {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d datagrams read", read, len(dgs))
		}
		if _, err := w0.poller.Wait(time.Second, ready[:]); err != nil {
			t.Fatal(err)
		}
		before := d.agent.Stats()
		w0.readControl(ms(1))
		w0.flushControl()
		after := d.agent.Stats()
		read += int(after.Splices-before.Splices) + int(after.BadMessages-before.BadMessages) +
			int(after.Echoes-before.Echoes) + int(after.Registrations-before.Registrations) + int(after.Stale-before.Stale)
	}
}

// Each test runs over both paths a datagram takes to the agent: the
// kernel's control socket, and the wire, where shard 0 takes it
// (wirecontrol_test.go). The wire path applies the same checks.

func TestAdversarialReplayedSplice(t *testing.T) {
	for _, path := range controlPaths {
		t.Run(path.name, func(t *testing.T) { testReplayedSplice(t, path.deliver) })
	}
}

func testReplayedSplice(t *testing.T, deliver func(t *testing.T, d *Daemon, fe *net.UDPConn, dgs ...[]byte)) {
	d := newTestWorkers(t, 1)
	fe, codec := d.attachTestControl(t)
	d.workers[0].kernelSynAck(testSplice(9, 40001), ms(1))
	recorded, err := codec.Append(nil, testSplice(9, 40001))
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, d, fe, recorded)
	if a := recvAck(t, fe); !a.OK || a.RequestID != 9 {
		t.Fatalf("ack %+v", a)
	}
	deliver(t, d, fe, recorded)
	st := d.agent.Stats()
	if st.Splices != 1 || st.Refused["replay"] != 1 {
		t.Fatalf("a recorded Splice sent again reached the agent: %+v", st)
	}

	// The front-end restarts; its earlier run's Splices are dead, even
	// those the shim never saw.
	unseen, _ := codec.Append(nil, testSplice(10, 40002))
	restarted, err := proto.NewFrontEndCodec(testMaster, 2)
	if err != nil {
		t.Fatal(err)
	}
	ack, _ := restarted.Append(nil, &proto.RegisterAck{BackendID: 3, Incarnation: 5, KeepaliveInterval: time.Second})
	deliver(t, d, fe, ack, unseen)
	if st := d.agent.Stats(); st.Splices != 1 || st.Refused["stale"] != 1 {
		t.Fatalf("a Splice of the front-end's earlier run was taken: %+v", st)
	}
}

// The shim's own SpliceAck reflected back, and a Splice sealed for
// back-end 4 (or with its key), do not reach the agent.
func TestAdversarialReflectedAndForeignAtTheShim(t *testing.T) {
	for _, path := range controlPaths {
		t.Run(path.name, func(t *testing.T) { testReflectedAndForeign(t, path.deliver) })
	}
}

func testReflectedAndForeign(t *testing.T, deliver func(t *testing.T, d *Daemon, fe *net.UDPConn, dgs ...[]byte)) {
	d := newTestWorkers(t, 1)
	fe, codec := d.attachTestControl(t)
	key4, _ := proto.DeriveKey(testMaster, 4)
	own, _ := d.workers[0].codec.Append(nil, &proto.SpliceAck{BackendID: 3, RequestID: 1, OK: true})
	for4, _ := codec.Append(nil, func() *proto.Splice { s := testSplice(11, 40003); s.BackendID = 4; return s }())
	with4, _ := proto.Marshal(key4, proto.Header{Direction: proto.ToBackend, Incarnation: 7, Seq: 1}, testSplice(12, 40004))
	deliver(t, d, fe, own, for4, with4)
	st := d.agent.Stats()
	if st.Splices != 0 || st.Refused["direction"] != 1 || st.Refused["peer"] != 1 || st.Refused["auth"] != 1 {
		t.Fatalf("agent stats %+v", st)
	}
}
