package controller

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// A request goes to the registered back-end, its Splice to that back-end's
// shim, and its request on C2 once the shim confirms; a second one waits
// for the slot and goes when the Feedback frees it.
func TestRequestDispatchedSplicedServed(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.method = "POST" // unsafe: it waits for the SpliceAck (TestSafeRequestGoesWithItsSplice)
	out := h.register(1, 1, 7, t0)
	if got := datagrams(out); len(got) != 1 || got[0] != "RegisterAck->198.18.0.21" {
		t.Fatalf("register answered %v", got)
	}
	if ack := out.Datagrams[0].Msg.(*proto.RegisterAck); ack.Incarnation != 7 || ack.KeepaliveInterval != time.Second {
		t.Errorf("RegisterAck %+v", ack)
	}
	h.request(1, "A.example", t0+ms)
	h.wantCalls("dispatch 1 b1")
	h.request(2, "A.example", t0+ms)
	h.wantCalls() // one slot, no handoff ahead: it waits
	if st := h.c.Status(t0 + ms); st.Queue != 1 || st.Flows != 2 {
		t.Fatalf("queue %d, flows %d; want 1 and 2", st.Queue, st.Flows)
	}
	out = h.connected(1, t0+2*ms)
	if got := datagrams(out); len(got) != 1 || got[0] != "Splice->198.18.0.21" {
		t.Fatalf("EvSplice sent %v", got)
	}
	h.spliceAck(1, t0+3*ms)
	h.wantCalls("splice-acked 1")
	if b := h.backend(1); b.InService != 1 || b.Active != 1 || b.MeanHandoffMs != 2 {
		t.Fatalf("back-end after the splice: %+v", b)
	}
	h.feedback(1, 20*time.Millisecond, t0+25*ms)
	h.wantCalls("dispatch 2 b1")
	a := h.customer("A", t0+25*ms)
	if a.Offered != 2 || a.Admitted != 2 || a.Served != 1 || a.Queued != 0 {
		t.Errorf("customer A: %+v", a)
	}
	if b := h.backend(1); b.Served != 1 || b.InService != 0 || b.Active != 1 || b.MeanSlotMs != 22 || b.MeanSlotExcessMs != 2 {
		t.Errorf("back-end after the Feedback: %+v", b)
	}
	// The connection closes long after: the controller forgets it.
	h.closed(1, splice.CloseFIN, t0+10*sec)
	if b := h.backend(1); b.Closed != 1 || h.c.Status(t0+10*sec).Flows != 1 {
		t.Errorf("after the close: %+v, %d flows", b, h.c.Status(t0+10*sec).Flows)
	}
}

// The Splice of a SYN that asks for Fast Open says so
// (proto.SpliceImplicitAck), which sends it ahead of the SYN
// (Daemon.sendDatagrams); a resend, long after the SYN and without the
// request, does not (bit 6 without bit 5 does not encode).
func TestOnlyTheFirstSpliceOfAFastOpenSYNGoesAheadOfIt(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	cfg.KeepaliveInterval = time.Hour
	h := newHarness(t, cfg)
	h.method = "POST"
	h.register(1, 5, 1, t0)
	ahead := func(out *Output) []bool {
		var got []bool
		for _, d := range out.Datagrams {
			if m, ok := d.Msg.(*proto.Splice); ok {
				got = append(got, m.Flags&proto.SpliceImplicitAck != 0)
			}
		}
		return got
	}
	for flow, fastOpen := range map[splice.FlowID]bool{1: true, 2: false} {
		h.request(flow, "A.example", t0)
		h.eng.flows[flow].state = "splice-wait"
		m := proto.Splice{RequestID: uint64(flow), Flags: proto.SpliceAtSYN}
		if fastOpen {
			m.Flags |= proto.SpliceRequest | proto.SpliceImplicitAck
			m.Request = []byte("POST / HTTP/1.1\r\n\r\n")
		}
		out := h.event(splice.Event{Kind: splice.EvSplice, Flow: flow, Backend: 1, Splice: m}, t0)
		if got := ahead(out); !slices.Equal(got, []bool{fastOpen}) {
			t.Fatalf("flow %d (Fast Open %v): Splices ahead of the SYN %v", flow, fastOpen, got)
		}
	}
	if got := ahead(h.tick(t0 + 250*ms)); !slices.Equal(got, []bool{false, false}) {
		t.Fatalf("resent Splices ahead of the SYN %v, want two, neither", got)
	}
}

// A lost Splice is sent again every SpliceRetry, SpliceTries times in
// all; a late ack is still taken, a duplicate one ignored.
func TestSpliceResentUntilAcknowledged(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	cfg.SpliceTries = 4
	cfg.KeepaliveInterval = time.Hour // no liveness probes in the way
	h := newHarness(t, cfg)
	h.method = "POST" // waits for the ack (TestEarlyRequestRefusedOrNeverConfirmedIsReset)
	h.register(1, 5, 1, t0)
	h.request(1, "A.example", t0)
	h.connected(1, t0)
	if got := h.c.NextDeadline(); got != t0+250*ms {
		t.Fatalf("next deadline %v after the Splice, want its resend at +250 ms", got-t0)
	}
	splices := func(out *Output) (n int) {
		for _, d := range out.Datagrams {
			if d.Msg.Type() == proto.TypeSplice {
				n++
			}
		}
		return n
	}
	if n := splices(h.tick(t0 + 249*ms)); n != 0 {
		t.Fatalf("resent %d before the retry time", n)
	}
	for i, at := range []splice.Time{250 * ms, 500 * ms, 750 * ms} {
		if n := splices(h.tick(t0 + at)); n != 1 {
			t.Fatalf("resend %d at %v: %d Splices", i+1, at, n)
		}
	}
	if n := splices(h.tick(t0 + sec)); n != 0 {
		t.Fatalf("sent %d Splices after SpliceTries", n)
	}
	if got := h.c.NextDeadline(); got < t0+splice.Time(time.Hour) {
		t.Fatalf("a deadline at %v after the last try", got-t0)
	}
	h.spliceAck(1, t0+1100*ms) // late, but welcome
	h.wantCalls("dispatch 1 b1", "splice-acked 1")
	h.spliceAck(1, t0+1200*ms) // a duplicate
	h.wantCalls()
	// An ack for a Splice resent once stops the resending.
	h.request(2, "A.example", t0+2*sec)
	h.connected(2, t0+2*sec)
	h.tick(t0 + 2250*ms)
	h.spliceAck(2, t0+2300*ms)
	if n := splices(h.tick(t0 + 2500*ms)); n != 0 {
		t.Fatalf("resent an acknowledged Splice %d times", n)
	}
	h.wantCalls("dispatch 2 b1", "splice-acked 2")
	// A shim that refuses the splice: the connection is reset.
	h.request(3, "A.example", t0+3*sec)
	h.connected(3, t0+3*sec)
	out := h.control(&proto.SpliceAck{RequestID: 3, BackendID: 1, OK: false, Reason: "no room"}, t0+3*sec)
	h.wantCalls("dispatch 3 b1", "abort 3")
	if !hasLog(out, "shim refused splice") || h.c.Status(t0+3*sec).Flows != 2 {
		t.Errorf("refused splice: logs %v, %d flows", out.Logs, h.c.Status(t0+3*sec).Flows)
	}
}

// A back-end silent for 1.25 keepalive intervals is probed; unanswered
// half an interval later it is dead: its connections are reset, their
// requests refunded, and nothing goes to it until it registers again.
func TestBackendDeathRefundsAndReregistration(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.register(1, 2, 1, t0)
	h.register(2, 3, 1, t0)
	for f := splice.FlowID(1); f <= 4; f++ {
		h.request(f, "A.example", t0+ms)
	}
	h.wantCalls("dispatch 1 b1", "dispatch 2 b2", "dispatch 3 b1", "dispatch 4 b2")
	for f := splice.FlowID(1); f <= 4; f++ {
		h.spliced(f, t0+2*ms)
	}
	h.eng.takeCalls()
	chargedBefore := h.customer("A", t0+2*ms).Charged
	// Back-end 2 keeps talking; back-end 1 falls silent after its
	// SpliceAcks at t0+2ms.
	h.control(&proto.Keepalive{BackendID: 2, Incarnation: 1, Seq: 1, Concurrency: 2}, t0+sec)
	probeAt := t0 + 2*ms + splice.Time(1250*time.Millisecond) + 1
	if got := h.c.NextDeadline(); got != probeAt {
		t.Fatalf("next deadline at %v, want back-end 1's probe at %v", got-t0, probeAt-t0)
	}
	out := h.tick(probeAt)
	if got := datagrams(out); len(got) != 1 || got[0] != "Keepalive->198.18.0.21" {
		t.Fatalf("probe: %v", got)
	}
	deadAt := probeAt + splice.Time(500*time.Millisecond) + 1
	if got := h.c.NextDeadline(); got != deadAt {
		t.Fatalf("next deadline at %v, want the probe's timeout at %v", got-t0, deadAt-t0)
	}
	h.tick(deadAt - 1)
	h.wantCalls()
	out = h.tick(deadAt)
	h.wantCalls("abort 1", "abort 3")
	if !hasLog(out, "back-end dead") {
		t.Errorf("no log of the death: %v", out.Logs)
	}
	b := h.backend(1)
	if b.Alive || b.Deaths != 1 || b.Active != 0 || b.InService != 0 || b.Closed != 2 {
		t.Fatalf("dead back-end: %+v", b)
	}
	a := h.customer("A", deadAt)
	if a.Refunded != 2 || h.c.Status(deadAt).Refunds != 2 || math.Abs(chargedBefore-a.Charged-2) > 1e-9 {
		t.Fatalf("refunds: customer %d, total %d, charged %.2f -> %.2f; want 2 requests given back",
			a.Refunded, h.c.Status(deadAt).Refunds, chargedBefore, a.Charged)
	}
	// New requests go to back-end 2 only, until it is full.
	h.request(5, "A.example", deadAt+ms)
	h.request(6, "A.example", deadAt+ms)
	h.wantCalls("dispatch 5 b2")
	// Back-end 1 registers again and takes the waiting request.
	h.register(1, 2, 1, deadAt+2*ms)
	h.wantCalls("dispatch 6 b1")
	if b := h.backend(1); !b.Alive || b.Active != 1 {
		t.Errorf("re-registered back-end: %+v", b)
	}
}

// A keepalive from a back-end declared dead brings it back; a
// keepalive of another incarnation is not answered, so its shim
// registers again.
func TestKeepaliveEchoAndRevival(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.register(1, 2, 5, t0)
	out := h.control(&proto.Keepalive{BackendID: 1, Incarnation: 5, Seq: 9, Concurrency: 1}, t0+sec)
	if got := datagrams(out); len(got) != 1 || out.Datagrams[0].Msg.(*proto.Keepalive).Seq != 9 {
		t.Fatalf("keepalive echo: %v", got)
	}
	if out := h.control(&proto.Keepalive{BackendID: 1, Incarnation: 4, Seq: 10}, t0+sec); len(out.Datagrams) != 0 {
		t.Fatalf("answered another incarnation's keepalive: %v", datagrams(out))
	}
	h.tick(t0 + 3*sec) // probe
	h.tick(t0 + 4*sec) // dead
	if h.backend(1).Alive {
		t.Fatal("silent back-end still alive")
	}
	h.request(1, "A.example", t0+4*sec)
	h.wantCalls()
	out = h.control(&proto.Keepalive{BackendID: 1, Incarnation: 5, Seq: 11}, t0+5*sec)
	h.wantCalls("dispatch 1 b1")
	if !h.backend(1).Alive || !hasLog(out, "alive again") {
		t.Errorf("revived back-end: %+v, logs %v", h.backend(1), out.Logs)
	}
	if peak := h.backend(1).PeakReported; peak != 1 {
		t.Errorf("peak reported concurrency %d, want 1", peak)
	}
}

// A shim that registers with a new incarnation lost its splices: the
// connections through it are reset and refunded, and it is used again.
func TestBackendRestartResetsItsConnections(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.register(1, 2, 1, t0)
	h.request(1, "A.example", t0)
	h.spliced(1, t0+ms)
	h.request(2, "A.example", t0+ms) // being handed off
	h.eng.takeCalls()
	out := h.register(1, 2, 2, t0+sec)
	h.wantCalls("abort 1", "abort 2", "drop-pool b1") // and the C2s pooled for it
	if !hasLog(out, "restarted") || h.customer("A", t0+sec).Refunded != 2 {
		t.Errorf("restart: logs %v, refunded %d", out.Logs, h.customer("A", t0+sec).Refunded)
	}
	h.request(3, "A.example", t0+sec)
	h.wantCalls("dispatch 3 b1")
	if b := h.backend(1); b.Active != 1 || b.InService != 0 {
		t.Errorf("after the restart: %+v", b)
	}
}

// With handoffs ahead, a confirmed splice that finds no free slot waits
// ready and takes the next one; a client that leaves while it waits is
// forgotten and refunded; one that waits past SlotWait gets a 503.
func TestHandoffAheadWaitsReady(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	cfg.HandoffAhead = 1
	cfg.SlotWait = 2 * time.Second
	cfg.KeepaliveInterval = time.Hour
	h := newHarness(t, cfg)
	h.register(1, 1, 1, t0)
	for f := splice.FlowID(1); f <= 3; f++ {
		h.request(f, "A.example", t0)
	}
	h.wantCalls("dispatch 1 b1", "dispatch 2 b1") // one slot and one ahead
	h.spliced(1, t0+ms)
	h.connected(2, t0+2*ms)
	h.spliceAck(2, t0+3*ms)
	h.wantCalls("splice-acked 1", "hold 2")
	if b := h.backend(1); b.Ready != 1 || b.HeldHandoffs != 1 || b.InService != 1 || b.Active != 2 {
		t.Fatalf("with one waiting ready: %+v", b)
	}
	// The client of flow 2 leaves while it waits: its place goes to 3.
	h.closed(2, splice.CloseRST, t0+4*ms)
	h.wantCalls("dispatch 3 b1")
	if b, a := h.backend(1), h.customer("A", t0+4*ms); b.Ready != 0 || a.Refunded != 1 {
		t.Fatalf("after the client left: ready %d, refunded %d", b.Ready, a.Refunded)
	}
	h.connected(3, t0+5*ms)
	h.spliceAck(3, t0+6*ms)
	h.wantCalls("hold 3")
	if got, want := h.c.NextDeadline(), t0+6*ms+2*sec; got != want {
		t.Fatalf("next deadline %v, want the slot wait's end %v", got-t0, want-t0)
	}
	// The slot frees in time for 3: it goes at once, before anything new.
	h.request(4, "A.example", t0+sec)
	h.feedback(1, 20*time.Millisecond, t0+sec)
	h.wantCalls("splice-acked 3", "dispatch 4 b1")
	if b := h.backend(1); b.Ready != 0 || b.InService != 1 {
		t.Fatalf("after the Feedback: %+v", b)
	}
	// 4 waits ready past SlotWait: 503, refunded.
	h.connected(4, t0+sec+ms)
	h.spliceAck(4, t0+sec+ms)
	h.wantCalls("hold 4")
	h.tick(t0 + 3*sec)
	h.wantCalls()
	h.tick(t0 + 3*sec + ms)
	h.wantCalls("reject 4 503")
	a := h.customer("A", t0+3*sec)
	if a.Rejected["slot-wait"] != 1 || a.Refunded != 2 || h.backend(1).Ready != 0 || h.backend(1).Active != 1 {
		t.Errorf("after the slot wait: %+v, back-end %+v", a, h.backend(1))
	}
}

// A connection waiting ready that the engine no longer holds (it never
// reported it closed) is reset when its slot wait ends, or forgotten if
// the engine forgot it too: nothing is left counted on the back-end.
func TestSlotWaitForAFlowTheEngineLost(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	cfg.HandoffAhead = 2
	cfg.KeepaliveInterval = time.Hour
	h := newHarness(t, cfg)
	h.register(1, 1, 1, t0)
	for f := splice.FlowID(1); f <= 3; f++ {
		h.request(f, "A.example", t0)
	}
	h.spliced(1, t0)
	for f := splice.FlowID(2); f <= 3; f++ {
		h.connected(f, t0)
		h.spliceAck(f, t0)
	}
	h.eng.takeCalls()
	h.eng.flows[2].state = "spliced" // moved on unreported
	delete(h.eng.flows, 3)           // gone unreported
	h.tick(t0 + 5*sec)
	h.wantCalls("reject 2 503", "abort 2", "reject 3 503", "abort 3")
	if b := h.backend(1); b.Ready != 0 || b.Active != 1 || h.c.Flows() != 1 {
		t.Errorf("after the slot waits: %+v, %d flows", b, h.c.Flows())
	}
}

// The credit scheduler charges a request by the service time its
// back-end measured: twice the typical time costs two credits.
func TestFeedbackCorrectsTheCharge(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	cfg.Credit.TypicalService = 20 * time.Millisecond
	h := newHarness(t, cfg)
	h.register(1, 5, 1, t0)
	h.request(1, "A.example", t0)
	h.request(2, "A.example", t0)
	h.spliced(1, t0+ms)
	h.spliced(2, t0+ms)
	h.feedback(1, 40*time.Millisecond, t0+50*ms)
	h.feedback(2, 10*time.Millisecond, t0+50*ms)
	if got := h.customer("A", t0+50*ms).Charged; math.Abs(got-2.5) > 1e-9 {
		t.Errorf("charged %.3f credits for 40 ms + 10 ms at 20 ms typical, want 2.5", got)
	}
	// A request whose connection closes before its Feedback is charged
	// what it cost when the Feedback comes after the close, within
	// lateFeedbackWait (with echoes the client can close before the shim
	// reported: latefeedback.go) ...
	h.request(3, "A.example", t0+sec)
	h.spliced(3, t0+sec)
	h.closed(3, splice.CloseFIN, t0+sec+ms)
	if a := h.customer("A", t0+sec+ms); math.Abs(a.Charged-3.5) > 1e-9 || a.Served != 2 {
		t.Errorf("closed before its Feedback: charged %.3f, served %d; want 3.5 (one at dispatch) and 2", a.Charged, a.Served)
	}
	h.feedback(3, 100*time.Millisecond, t0+sec+2*ms)
	if a := h.customer("A", t0+sec+2*ms); math.Abs(a.Charged-7.5) > 1e-9 || a.Served != 3 {
		t.Errorf("after its Feedback came late: charged %.3f, served %d; want 7.5 and 3", a.Charged, a.Served)
	}
	// ... and as one normal request when none comes by then; a Feedback
	// after that changes nothing.
	h.request(4, "A.example", t0+2*sec)
	h.spliced(4, t0+2*sec)
	h.closed(4, splice.CloseRST, t0+2*sec+ms)
	if d := h.c.NextDeadline(); d != t0+2*sec+ms+splice.Time(lateFeedbackWait) {
		t.Fatalf("next deadline %d, want the wait's end %d", d, t0+2*sec+ms+splice.Time(lateFeedbackWait))
	}
	h.tick(t0 + 2*sec + ms + splice.Time(lateFeedbackWait))
	h.feedback(4, 100*time.Millisecond, t0+3*sec+2*ms)
	if a := h.customer("A", t0+3*sec+2*ms); math.Abs(a.Charged-8.5) > 1e-9 || a.Served != 3 {
		t.Errorf("after a close with no Feedback in time: charged %.3f, served %d; want 8.5 and 3", a.Charged, a.Served)
	}
	if st := h.c.Status(t0 + 3*sec + 2*ms); st.LateFeedbacks != 1 || st.LateUnreported != 1 {
		t.Errorf("late feedbacks %d, unreported %d; want 1 and 1", st.LateFeedbacks, st.LateUnreported)
	}
}

// Queue full and an unknown customer get 503, a customer over its cap
// 429, and a request that waits past the queue timeout 503 too.
func TestRefusals(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100, QueueCap: 1},
		sched.CustomerSpec{Name: "B", Cap: 1})
	cfg.Credit.Default = ""
	cfg.Credit.QueueTimeout = 100 * time.Millisecond
	h := newHarness(t, cfg)
	h.request(1, "A.example", t0) // the one place in A's queue
	h.request(2, "A.example", t0)
	h.wantCalls("reject 2 503")
	h.request(3, "B.example", t0)
	h.request(4, "B.example", t0)
	h.wantCalls("reject 4 429")
	h.request(5, "Z.example", t0)
	h.wantCalls("reject 5 503")
	if got, want := h.c.NextDeadline(), t0+100*ms+1; got != want {
		t.Fatalf("next deadline %v, want the queue timeout at %v", got-t0, want-t0)
	}
	h.tick(t0 + 100*ms)
	h.wantCalls()
	h.tick(t0 + 100*ms + 1)
	h.wantCalls("reject 1 503", "reject 3 503")
	a, b, z := h.customer("A", t0), h.customer("B", t0), h.customer("Z", t0)
	if a.Rejected["queue-full"] != 1 || a.Rejected["queue-timeout"] != 1 || b.Rejected["over-cap"] != 1 ||
		b.Rejected["queue-timeout"] != 1 || z.Rejected["unknown-customer"] != 1 {
		t.Errorf("rejections: A %v, B %v, Z %v", a.Rejected, b.Rejected, z.Rejected)
	}
	if st := h.c.Status(t0 + sec); st.Queue != 0 || a.Refunded != 0 {
		t.Errorf("%d still queued, %d refunded (never charged)", st.Queue, a.Refunded)
	}
	// A port without a listener answers 503 too.
	h.requestOn(7, 8080, "A.example", "/", t0+sec)
	h.wantCalls("reject 7 503")
}

// The scheduler hands a request out only once some back-end has room for
// its queue's ports; one whose own port has none waits at the head of
// its queue, charged, and expires from there with its charge refunded.
func TestQueueHeadWaitsForAPortsBackend(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	cfg.Ports = []uint16{80, 81}
	cfg.Listeners = []Listener{{Port: 80, Policy: "credit"}, {Port: 81, Policy: "credit"}}
	cfg.Credit.QueueTimeout = 100 * time.Millisecond
	h := newHarness(t, cfg)
	h.control(&proto.Register{BackendID: 1, IP: backendIP(1), ControlPort: 7401, WebPorts: []uint16{81}, Capacity: 1, Incarnation: 1}, t0)
	h.requestOn(1, 80, "A.example", "/", t0)
	h.wantCalls()
	if st, a := h.c.Status(t0), h.customer("A", t0); st.Queue != 1 || a.Queued != 1 || a.Charged != 1 {
		t.Fatalf("queue %d, A %+v: want one request at the head, charged", st.Queue, a)
	}
	h.requestOn(2, 81, "A.example", "/", t0+ms) // behind the head
	h.wantCalls()
	h.tick(t0 + 100*ms + 1)
	h.wantCalls("reject 1 503", "dispatch 2 b1")
	if a := h.customer("A", t0+100*ms); a.Rejected["queue-timeout"] != 1 || a.Refunded != 1 || a.Queued != 0 {
		t.Errorf("after the head's timeout: %+v", a)
	}
}

// The daemon decodes every datagram into its Codec's one message per
// type: a Register's ports must be copied, not kept, or the next Register
// decoded would change where requests may go.
func TestRegisterKeepsNoReferenceToTheMessage(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	cfg.Ports = []uint16{80, 81}
	cfg.Listeners = []Listener{{Port: 80, Policy: "credit"}, {Port: 81, Policy: "credit"}}
	h := newHarness(t, cfg)
	ports := []uint16{81}
	h.control(&proto.Register{BackendID: 1, IP: backendIP(1), ControlPort: 7401, WebPorts: ports, Capacity: 2, Incarnation: 1}, t0)
	ports[0] = 80 // the Codec's storage, refilled by a later Register
	h.out.Reset()
	if err := h.c.Reload(cfg, t0, &h.out); err != nil { // tells the dispatcher the ports again
		t.Fatal(err)
	}
	h.requestOn(1, 81, "A.example", "/", t0)
	h.requestOn(2, 80, "A.example", "/", t0)
	h.wantCalls("dispatch 1 b1") // and 2 waits: b1 serves no port 80
}

// A request whose client left while it was queued is dropped when the
// scheduler releases it, its charge refunded; one that expires is
// counted, not answered.
func TestClientLeavesWhileQueued(t *testing.T) {
	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	cfg.Credit.QueueTimeout = time.Second
	h := newHarness(t, cfg)
	h.request(1, "A.example", t0)
	h.request(2, "A.example", t0)
	h.request(3, "A.example", t0)
	h.closed(1, splice.CloseRST, t0+ms)
	h.closed(2, splice.CloseRST, t0+ms)
	h.register(1, 1, 1, t0+2*ms)
	h.wantCalls("dispatch 3 b1")
	a := h.customer("A", t0+2*ms)
	if a.Abandoned != 2 || a.Refunded != 2 || a.Admitted != 1 || math.Abs(a.Charged-1) > 1e-9 {
		t.Fatalf("after two clients left: %+v", a)
	}
	h.request(4, "A.example", t0+3*ms)
	h.closed(4, splice.CloseRST, t0+4*ms)
	h.tick(t0 + 2*sec)
	h.wantCalls()
	if a := h.customer("A", t0+2*sec); a.Abandoned != 3 || a.Rejected["queue-timeout"] != 0 {
		t.Fatalf("expired request of a client gone: %+v", a)
	}
}

// A dispatch the engine refuses: a flow gone is dropped quietly, one that
// cannot be handed off is answered 503 at once.
func TestDispatchRefusedByTheEngine(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.request(1, "A.example", t0)
	h.eng.flows[1].state = "answering" // the engine moved on without telling
	h.request(2, "A.example", t0)
	h.register(1, 5, 1, t0+ms)
	h.wantCalls("dispatch 1 b1", "dispatch 2 b1")
	if a := h.customer("A", t0+ms); a.Abandoned != 1 || a.Refunded != 1 || a.Admitted != 1 {
		t.Fatalf("after a refused dispatch: %+v", a)
	}
	noPorts := &portlessEngine{h.eng}
	h.c.eng = noPorts
	h.request(3, "A.example", t0+2*ms)
	h.wantCalls("dispatch 3 b1", "reject 3 503")
	if a := h.customer("A", t0+ms); a.Rejected["dispatch-failed"] != 1 {
		t.Errorf("rejections %v", a.Rejected)
	}
}

// portlessEngine has run out of handoff ports.
type portlessEngine struct{ *fakeEngine }

func (e *portlessEngine) Dispatch(id splice.FlowID, b splice.Backend, now splice.Time, out *splice.Output) error {
	e.call("dispatch %d b%d", id, b.ID)
	return splice.ErrNoPorts
}

// Events that do not fit what the controller knows are answered by
// resetting the flow; odd control messages are logged.
func TestUnexpectedInputs(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.c.cfg.LogLevel = -4 // debug
	h.eng.flows[9] = &fakeFlow{state: "splice-wait", backend: 1}
	h.event(splice.Event{Kind: splice.EvSplice, Flow: 9, Backend: 1}, t0)
	h.wantCalls("abort 9")
	h.eng.flows[8] = &fakeFlow{state: "spliced", backend: 1, waiting: true}
	out := h.event(splice.Event{Kind: splice.EvRequest, Flow: 8, FollowUp: true, Request: &splice.RequestInfo{Port: 80}}, t0)
	h.wantCalls("abort 8")
	if !hasLog(out, "follow-up on a connection the controller does not know") {
		t.Errorf("logs %v", out.Logs)
	}
	h.register(1, 5, 1, t0)
	out = h.control(&proto.RegisterAck{BackendID: 1}, t0)
	if !hasLog(out, "control message refused") || h.c.Status(t0).ControlRefused["unexpected-type"] != 1 {
		t.Errorf("logs %v", out.Logs)
	}
	out = h.control(&proto.Close{RequestID: 1, BackendID: 1, Reason: proto.CloseFIN}, t0)
	if !hasLog(out, "back-end closed") {
		t.Errorf("logs %v", out.Logs)
	}
	out = h.event(splice.Event{Kind: splice.EvAnswered, Flow: 3, Status: 400, Detail: "bad"}, t0)
	if !hasLog(out, "answered by front-end") {
		t.Errorf("logs %v", out.Logs)
	}
	// Feedback and SpliceAck for flows nobody knows change nothing.
	h.control(&proto.Feedback{BackendID: 3, RequestID: 77}, t0)
	h.control(&proto.SpliceAck{BackendID: 3, RequestID: 77, OK: true}, t0)
	h.wantCalls()
	// Event hands over a single event and what the calls it makes add.
	h.out.Reset()
	h.eng.flows[10] = &fakeFlow{state: "queued"}
	h.c.Event(splice.Event{Kind: splice.EvRequest, Flow: 10, Request: &splice.RequestInfo{Port: 80, Host: "A.example"}}, t0, &h.out)
	h.register(1, 1, 1, t0)
	h.wantCalls("dispatch 10 b1")
}

// Time that goes backwards counts as not moving.
func TestTimeNeverGoesBack(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.register(1, 1, 1, t0+sec)
	h.request(1, "A.example", t0) // stamped before the registration
	h.connected(1, t0)
	if got, want := h.c.NextDeadline(), t0+sec+250*ms; got != want {
		t.Fatalf("resend due at %v, want %v: the Splice counts as sent at the latest time seen", got-t0, want-t0)
	}
}

// A Splice datagram is the request's own until it is sent: its flow may
// close later in the same pass and its record serve the next flow, whose
// Splice must not overwrite the first one's.
func TestSpliceDatagramOutlivesItsFlowInThePass(t *testing.T) {
	h := newHarness(t, creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.method = "POST" // no early request: the pass's calls are the dispatches
	h.register(1, 4, 1, t0)
	h.request(1, "A.example", t0)
	h.wantCalls("dispatch 1 b1")
	h.eng.flows[1].state = "splice-wait"
	h.eng.flows[2] = &fakeFlow{state: "queued"}
	h.out.Reset()
	h.out.Engine.Events = append(h.out.Engine.Events,
		splice.Event{Kind: splice.EvSplice, Flow: 1, Backend: 1, Splice: proto.Splice{RequestID: 1}},
		splice.Event{Kind: splice.EvClosed, Flow: 1, Backend: 1, Reason: splice.CloseRST},
		splice.Event{Kind: splice.EvRequest, Flow: 2, Request: &splice.RequestInfo{Method: "GET", Host: "A.example", Path: "/", Port: 80}})
	h.c.HandleEvents(t0+ms, &h.out)
	h.wantCalls("dispatch 2 b1")
	h.eng.flows[2].state = "splice-wait"
	h.out.Engine.Events = append(h.out.Engine.Events,
		splice.Event{Kind: splice.EvSplice, Flow: 2, Backend: 1, Splice: proto.Splice{RequestID: 2}})
	h.c.HandleEvents(t0+ms, &h.out)
	var ids []uint64
	for _, d := range h.out.Datagrams {
		if s, ok := d.Msg.(*proto.Splice); ok {
			ids = append(ids, s.RequestID)
		}
	}
	if !slices.Equal(ids, []uint64{1, 2}) {
		t.Fatalf("Splice datagrams of the pass name requests %v, want [1 2]", ids)
	}
}
