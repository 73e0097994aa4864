package frontend

import (
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
)

// The control socket against an attacker on the LAN (issue 9): recorded
// datagrams sent again, reflected back, or made with another back-end's
// key change nothing, and refusing them costs no allocation. These tests
// hand datagrams to the daemon's own receive path (controlDatagram, what
// readControl does with each datagram it reads) without running the
// loop, so every step is deterministic; TestControlFloodDoesNotCrowdOut
// goes through the socket.

func newControlRig(t *testing.T) *rig {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "frontend.yaml")
	writeConfig(t, cfgPath, "100")
	return newRig(t, cfgPath)
}

func (r *rig) shimAddr() netip.AddrPort { return r.shim.LocalAddr().(*net.UDPAddr).AddrPort() }

// deliver hands datagram b from the shim's address to the front-end at
// now and returns what the controller answered.
func (r *rig) deliver(b []byte, now splice.Time) []controller.Datagram {
	return r.deliverFrom(r.shimAddr(), b, now)
}

func (r *rig) deliverFrom(from netip.AddrPort, b []byte, now splice.Time) []controller.Datagram {
	out := &r.d.shards[0].out
	out.Reset()
	r.d.controlDatagram(b, from, nil, now, out)
	return out.Datagrams
}

// encode seals m as the rig's back-end 1 does, without sending it.
func (r *rig) encode(m proto.Message) []byte {
	r.t.Helper()
	b, err := r.codec.Append(nil, m)
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

func (r *rig) register(inc uint64) *proto.Register {
	return &proto.Register{BackendID: 1, IP: loopback, MAC: serverMAC, ControlPort: r.shimAddr().Port(), Capacity: 5, Incarnation: inc}
}

// tick runs the controller's timers at now.
func (r *rig) tick(now splice.Time) []controller.Datagram {
	out := &r.d.shards[0].out
	out.Reset()
	r.d.ctrl.Tick(now, out)
	return out.Datagrams
}

func (r *rig) alive() bool {
	st := r.d.ctrl.Status(0)
	return len(st.Backends) == 1 && st.Backends[0].Alive
}

func (r *rig) refusals() map[string]uint64 { return r.d.status().ControlRefused }

const second = splice.Time(time.Second)

func types(dgs []controller.Datagram) []string {
	var s []string
	for _, d := range dgs {
		s = append(s, d.Msg.Type().String())
	}
	return s
}

// A recorded Register or Keepalive sent again does not revive a dead
// back-end (with the starting code each did, and the Register was
// answered).
func TestAdversarialReplayedRegisterAndKeepalive(t *testing.T) {
	r := newControlRig(t)
	register := r.encode(r.register(9))
	keepalive := r.encode(&proto.Keepalive{BackendID: 1, Incarnation: 9, Seq: 1})
	if got := types(r.deliver(register, second)); len(got) != 1 || got[0] != "RegisterAck" {
		t.Fatalf("Register answered with %v", got)
	}
	if got := types(r.deliver(keepalive, second)); len(got) != 1 || got[0] != "Keepalive" {
		t.Fatalf("Keepalive answered with %v", got)
	}
	r.tick(3 * second)
	r.tick(4 * second)
	if r.alive() {
		t.Fatal("the silent back-end is still alive")
	}
	for _, dg := range [][]byte{register, keepalive} {
		if got := r.deliver(dg, 4*second); len(got) != 0 || r.alive() {
			t.Fatalf("a replayed datagram was answered (%v) or revived the back-end", types(got))
		}
	}
	if n := r.refusals()["replay"]; n != 2 {
		t.Fatalf("refusals %v, want 2 replays", r.refusals())
	}
	r.deliver(r.encode(&proto.Keepalive{BackendID: 1, Incarnation: 9, Seq: 2}), 4*second)
	if !r.alive() {
		t.Fatal("a fresh Keepalive did not revive the back-end")
	}
}

// After the back-end restarted, its earlier run's Register sent again
// does not pass for another restart (with the starting code it did: the
// front-end took the old incarnation back, reset the connections and
// then ignored the live shim's keepalives).
func TestAdversarialOldRegisterAfterRestart(t *testing.T) {
	r := newControlRig(t)
	old := r.encode(r.register(9))
	r.deliver(old, second)
	key, _ := proto.DeriveKey(r.d.cfg.Key, 1)
	restarted, err := proto.NewBackEndCodec(1, key, 10)
	if err != nil {
		t.Fatal(err)
	}
	r.codec = restarted
	r.deliver(r.encode(r.register(10)), 2*second)
	if got := r.deliver(old, 2*second); len(got) != 0 {
		t.Fatalf("the earlier run's Register was answered: %v", types(got))
	}
	if n := r.refusals()["stale"]; n != 1 {
		t.Fatalf("refusals %v, want 1 stale", r.refusals())
	}
	if got := types(r.deliver(r.encode(&proto.Keepalive{BackendID: 1, Incarnation: 10, Seq: 1}), 2*second)); len(got) != 1 {
		t.Fatalf("the live shim's Keepalive got %v, want its echo", got)
	}
}

// The front-end's own probe reflected back to it is not the back-end's
// answer: the silent back-end still dies (with the starting code the
// reflection counted as a sign of life and as its report of no requests
// in service, freeing its slots).
func TestAdversarialReflectedProbe(t *testing.T) {
	r := newControlRig(t)
	r.deliver(r.encode(r.register(9)), second)
	probes := r.tick(3 * second)
	if got := types(probes); len(got) != 1 || got[0] != "Keepalive" {
		t.Fatalf("no probe: %v", got)
	}
	probe, err := r.d.ctl.codec.Append(nil, probes[0].Msg) // as the loop sends it
	if err != nil {
		t.Fatal(err)
	}
	if got := r.deliver(probe, 3*second); len(got) != 0 {
		t.Fatalf("the reflected probe was answered: %v", types(got))
	}
	r.tick(4 * second)
	if r.alive() {
		t.Fatal("the reflected probe kept the silent back-end alive")
	}
	if n := r.refusals()["direction"]; n != 1 {
		t.Fatalf("refusals %v, want 1 for direction", r.refusals())
	}
}

// A back-end's key speaks for that back-end only: back-end 2's key
// cannot register, or keep alive, back-end 1 (the starting code had one
// key for all).
func TestAdversarialOtherBackendsKey(t *testing.T) {
	r := newControlRig(t)
	key2, _ := proto.DeriveKey(r.d.cfg.Key, 2)
	forged, err := proto.Marshal(key2, proto.Header{Direction: proto.ToFrontend, Incarnation: 9, Seq: 1}, r.register(9))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.deliver(forged, second); len(got) != 0 || len(r.d.ctrl.Status(0).Backends) != 0 {
		t.Fatalf("back-end 2's key registered back-end 1: %v", types(got))
	}
	if n := r.refusals()["auth"]; n != 1 {
		t.Fatalf("refusals %v, want 1 auth", r.refusals())
	}
}

// A genuine, fresh datagram from another address than the one its
// back-end registered is refused by the controller.
func TestAdversarialControlFromAnotherSource(t *testing.T) {
	r := newControlRig(t)
	r.deliver(r.encode(r.register(9)), second)
	elsewhere := netip.MustParseAddrPort("127.0.0.2:7401")
	if got := r.deliverFrom(elsewhere, r.encode(&proto.Keepalive{BackendID: 1, Incarnation: 9, Seq: 1}), second); len(got) != 0 {
		t.Fatalf("a Keepalive from %v was echoed", elsewhere)
	}
	if n := r.refusals()["source-address"]; n != 1 {
		t.Fatalf("refusals %v", r.refusals())
	}
}

// Refusing a datagram allocates nothing, whatever makes it bad, and each
// kind is counted under its reason; /metrics shows the counts.
func TestAdversarialRefusedControlCostsNothing(t *testing.T) {
	r := newControlRig(t)
	r.deliver(r.encode(r.register(9)), second)
	r.d.ctl.bad = 10 // past the first few, which are logged
	const runs = 100
	fresh := func(m proto.Message) func() []byte {
		return func() []byte { return r.encode(m) }
	}
	same := func(b []byte) func() []byte { return func() []byte { return b } }
	forged := r.encode(&proto.Keepalive{BackendID: 1, Incarnation: 9})
	forged[len(forged)-1] ^= 1
	v2 := r.encode(&proto.Keepalive{BackendID: 1, Incarnation: 9})
	v2[2] = 2
	replayed := r.encode(&proto.Keepalive{BackendID: 1, Incarnation: 9})
	r.deliver(replayed, second)
	reflected, _ := r.d.ctl.codec.Append(nil, &proto.Keepalive{BackendID: 1, Incarnation: 9})
	elsewhere := netip.MustParseAddrPort("127.0.0.2:7401")
	for _, tc := range []struct {
		reason string
		from   netip.AddrPort
		next   func() []byte
	}{
		{"auth", r.shimAddr(), same(forged)},
		{"version", r.shimAddr(), same(v2)},
		{"replay", r.shimAddr(), same(replayed)},
		{"direction", r.shimAddr(), same(reflected)},
		{"short", r.shimAddr(), same([]byte("not a control message"))},
		{"source-address", elsewhere, fresh(&proto.Keepalive{BackendID: 1, Incarnation: 9})},
	} {
		dgs := make([][]byte, runs+1)
		for i := range dgs {
			dgs[i] = tc.next()
		}
		before := r.refusals()[tc.reason]
		i := 0
		n := testing.AllocsPerRun(runs, func() {
			out := &r.d.shards[0].out
			out.Reset()
			r.d.controlDatagram(dgs[i], tc.from, nil, 2*second, out)
			i++
		})
		if n != 0 {
			t.Errorf("%s: %v allocations per refusal", tc.reason, n)
		}
		if got := r.refusals()[tc.reason] - before; got != runs+1 {
			t.Errorf("%s: %d refusals counted, want %d", tc.reason, got, runs+1)
		}
	}
	st := r.d.status()
	if m := renderMetrics(t, &st); !strings.Contains(m, `qsplice_frontend_control_refused_total{reason="replay"} 101`) {
		t.Errorf("metrics lack the replay refusals:\n%s", m)
	}
}

// A flood of forged datagrams on the control socket does not keep a
// genuine Register from being answered: refusals happen in the loop as
// the datagrams are read, before anything is queued.
func TestControlFloodDoesNotCrowdOut(t *testing.T) {
	r := newControlRig(t)
	stop := r.run()
	defer stop()
	forged := r.encode(&proto.Keepalive{BackendID: 1, Incarnation: 9})
	forged[len(forged)-1] ^= 1
	for range 200 {
		r.sendRaw(forged)
	}
	r.sendCtl(r.register(9))
	if ack := recvCtl[*proto.RegisterAck](r); ack.Incarnation != 9 {
		t.Fatalf("RegisterAck %+v", ack)
	}
	st, ok := r.d.Snapshot()
	if !ok || st.ControlRefused["auth"] == 0 {
		t.Fatalf("refusals %v", st.ControlRefused)
	}
	t.Logf("%d forged datagrams refused before the Register was answered", st.ControlRefused["auth"])
}
