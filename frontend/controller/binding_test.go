package controller

import (
	"net/netip"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// Binding (issue 9): a genuine, fresh message that does not fit the
// back-end it comes from changes nothing. With the starting code each of
// these messages acted.

// twoBackends registers back-ends 1 and 2 and splices flow 1 onto 1 and
// flow 2 onto 2.
func twoBackends(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := newHarness(t, cfg)
	h.register(1, 1, 1, t0)
	h.register(2, 1, 1, t0)
	h.request(1, "A.example", t0)
	h.request(2, "A.example", t0)
	if h.eng.flows[1].backend != 1 || h.eng.flows[2].backend != 2 {
		t.Fatalf("flows went to back-ends %d and %d", h.eng.flows[1].backend, h.eng.flows[2].backend)
	}
	h.eng.takeCalls()
	return h
}

func refused(h *harness, reason string) uint64 { return h.c.Status(h.c.now).ControlRefused[reason] }

// One back-end's Feedback naming another's request does not end it.
func TestAdversarialFeedbackForAnotherBackendsRequest(t *testing.T) {
	h := twoBackends(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.spliced(1, t0+ms)
	h.eng.takeCalls()
	h.control(&proto.Feedback{BackendID: 2, RequestID: h.c.requestID(1), ServiceTime: time.Millisecond}, t0+2*ms)
	if b := h.backend(1); b.InService != 1 || b.Served != 0 {
		t.Fatalf("back-end 1 after back-end 2's Feedback for its request: %+v", b)
	}
	if h.backend(2).Served != 0 || refused(h, "foreign-request") != 1 {
		t.Fatalf("back-end 2 %+v, refusals %v", h.backend(2), h.c.Status(t0).ControlRefused)
	}
	h.feedback(1, time.Millisecond, t0+3*ms) // its own back-end's still counts
	if b := h.backend(1); b.InService != 0 || b.Served != 1 {
		t.Fatalf("back-end 1 after its own Feedback: %+v", b)
	}
}

// One back-end's SpliceAck for another's Splice sends no request.
func TestAdversarialSpliceAckForAnotherBackendsRequest(t *testing.T) {
	h := twoBackends(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.connected(1, t0+ms)
	h.control(&proto.SpliceAck{BackendID: 2, RequestID: h.c.requestID(1), OK: true}, t0+2*ms)
	h.wantCalls()
	h.control(&proto.SpliceAck{BackendID: 2, RequestID: h.c.requestID(1), OK: false, Reason: "no"}, t0+2*ms)
	h.wantCalls() // nor does a refusal abort it
	if refused(h, "foreign-request") != 2 {
		t.Fatalf("refusals %v", h.c.Status(t0).ControlRefused)
	}
	h.spliceAck(1, t0+3*ms)
	h.wantCalls("splice-acked 1")
}

// A back-end's messages count only from the address it registered: a
// Keepalive from elsewhere does not revive it once dead, a Register from
// elsewhere does not move or restart it.
func TestAdversarialControlFromAnotherAddress(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.register(1, 1, 5, t0)
	h.tick(t0 + 2*sec)
	h.tick(t0 + 3*sec) // silent, probed, dead
	if h.backend(1).Alive {
		t.Fatal("back-end 1 still alive")
	}
	elsewhere := netip.MustParseAddrPort("198.18.0.99:7401")
	h.controlFrom(elsewhere, &proto.Keepalive{BackendID: 1, Incarnation: 5, Seq: 9}, t0+3*sec)
	if h.backend(1).Alive || refused(h, "source-address") != 1 {
		t.Fatalf("a Keepalive from %v revived back-end 1 (refusals %v)", elsewhere, h.c.Status(t0).ControlRefused)
	}
	out := h.controlFrom(elsewhere, &proto.Register{BackendID: 1, IP: backendIP(1), ControlPort: 7401, Capacity: 1, Incarnation: 6}, t0+3*sec)
	if len(out.Datagrams) != 0 || h.backend(1).Alive || refused(h, "register-address") != 1 {
		t.Fatalf("a Register from %v was taken: %v", elsewhere, datagrams(out))
	}
	h.control(&proto.Keepalive{BackendID: 1, Incarnation: 5, Seq: 10}, t0+3*sec)
	if !h.backend(1).Alive {
		t.Fatal("its own Keepalive did not revive back-end 1")
	}
}

// A Register of an older incarnation than the one registered is refused:
// it does not reset the back-end's connections as a restart would.
func TestAdversarialOlderRegisterDoesNotRestart(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.register(1, 1, 7, t0)
	h.request(1, "A.example", t0)
	h.spliced(1, t0+ms)
	h.eng.takeCalls()
	h.register(1, 1, 6, t0+2*ms)
	h.wantCalls()
	if b := h.backend(1); b.InService != 1 || refused(h, "older-incarnation") != 1 {
		t.Fatalf("back-end %+v, refusals %v", b, h.c.Status(t0).ControlRefused)
	}
	h.register(1, 1, 8, t0+3*ms) // a real restart still resets
	h.wantCalls("abort 1", "drop-pool b1")
}

// RequestIDs carry the run's prefix: the same flow has another RequestID
// in the next run of the front-end, and a message naming a RequestID of
// the earlier run does not touch this run's flow of the same number.
func TestAdversarialRequestIDsAcrossRestarts(t *testing.T) {
	run := func(prefix uint32) (*harness, uint64) {
		cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
		cfg.RequestIDPrefix = prefix
		h := newHarness(t, cfg)
		h.register(1, 1, 1, t0)
		h.request(1, "A.example", t0)
		out := h.connected(1, t0+ms)
		return h, out.Datagrams[0].Msg.(*proto.Splice).RequestID
	}
	first, firstID := run(0x1234abcd)
	second, secondID := run(0x9e3779b9)
	if firstID == secondID || firstID>>32 != 0x1234abcd || uint32(firstID) != 1 {
		t.Fatalf("RequestIDs of flow 1: %#x in one run, %#x in the next", firstID, secondID)
	}
	_ = first
	second.spliceAck(1, t0+2*ms)
	second.eng.takeCalls()
	second.control(&proto.Feedback{BackendID: 1, RequestID: firstID, ServiceTime: time.Millisecond}, t0+3*ms)
	second.control(&proto.SpliceAck{BackendID: 1, RequestID: firstID, OK: false}, t0+3*ms)
	second.wantCalls()
	if b := second.backend(1); b.InService != 1 || b.Served != 0 || refused(second, "foreign-request") != 2 {
		t.Fatalf("back-end %+v, refusals %v", b, second.c.Status(t0).ControlRefused)
	}
}

// flowOf finds a flow again from the low 32 bits of its RequestID, also
// once flow ids passed 2^32.
func TestFlowOfAcrossTheLowBitsWrap(t *testing.T) {
	h := newHarness(t, Config{RequestIDPrefix: 7})
	for _, tc := range []struct{ last, flow splice.FlowID }{
		{10, 3}, {1<<32 + 5, 1<<32 + 2}, {1<<32 + 5, 1<<32 - 3}, {3<<32 + 1, 3<<32 + 1},
	} {
		h.c.lastFlow = tc.last
		got, ok := h.c.flowOf(h.c.requestID(tc.flow))
		if !ok || got != tc.flow {
			t.Errorf("last %d: flowOf(requestID(%d)) = %d, %v", tc.last, tc.flow, got, ok)
		}
	}
	if _, ok := h.c.flowOf(8<<32 | 3); ok {
		t.Error("a RequestID with another prefix was taken")
	}
}
