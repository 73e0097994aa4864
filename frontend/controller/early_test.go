package controller

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// Early requests (issue 7, slots.go): with Config.EarlyRequest a safe
// request whose back-end has a slot free goes on C2 in the pass that
// sends its Splice.

// earlyConfig is creditConfig with early requests on.
func earlyConfig(customers ...sched.CustomerSpec) Config {
	cfg := creditConfig(customers...)
	cfg.EarlyRequest = true
	return cfg
}

// A GET goes with its Splice: the engine is told to send it in the same
// pass, after the Splice datagram was queued (the daemon sends
// datagrams before frames), and it holds its slot from then. The
// SpliceAck that follows moves nothing more.
func TestSafeRequestGoesWithItsSplice(t *testing.T) {
	h := newHarness(t, earlyConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.register(1, 1, 7, t0)
	h.request(1, "A.example", t0+ms)
	h.wantCalls("dispatch-carrying 1 b1")
	out := h.connected(1, t0+2*ms)
	if got := datagrams(out); !slices.Equal(got, []string{"Splice->198.18.0.21"}) {
		t.Fatalf("EvSplice sent %v", got)
	}
	h.wantCalls("splice-acked 1")
	if b := h.backend(1); b.InService != 1 {
		t.Fatalf("back-end after the early request: %+v", b)
	}
	h.spliceAck(1, t0+3*ms)
	h.wantCalls()
	if b := h.backend(1); b.MeanHandoffMs != 2 || b.InService != 1 {
		t.Fatalf("back-end after the ack: %+v", b)
	}
	h.feedback(1, 20*time.Millisecond, t0+25*ms)
	// The slot ran from the early request, at +2 ms.
	if b := h.backend(1); b.Served != 1 || b.InService != 0 || b.MeanSlotMs != 23 {
		t.Fatalf("back-end after the Feedback: %+v", b)
	}
}

// What waits for the ack: an unsafe method; any method without
// EarlyRequest (the default); a handoff set up ahead of a slot (it is
// held ready at the ack instead).
func TestEarlyRequestOnlyWhenSafeAndInsideASlot(t *testing.T) {
	for _, c := range []struct {
		name, method string
		early        bool
	}{
		{"POST", "POST", true},
		{"PUT", "PUT", true},
		{"GET without EarlyRequest", "GET", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
			cfg.EarlyRequest = c.early
			h := newHarness(t, cfg)
			h.method = c.method
			h.register(1, 1, 7, t0)
			h.request(1, "A.example", t0)
			h.wantCalls("dispatch 1 b1")
			h.connected(1, t0+ms)
			h.wantCalls()
			h.spliceAck(1, t0+2*ms)
			h.wantCalls("splice-acked 1")
		})
	}
	t.Run("ahead of its slot", func(t *testing.T) {
		cfg := earlyConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
		cfg.HandoffAhead = 1
		cfg.KeepaliveInterval = time.Hour
		h := newHarness(t, cfg)
		h.register(1, 1, 1, t0)
		h.request(1, "A.example", t0)
		h.request(2, "A.example", t0)
		h.wantCalls("dispatch-carrying 1 b1", "dispatch 2 b1") // the first speaks for the only slot
		h.connected(1, t0+ms)
		h.wantCalls("splice-acked 1")
		h.connected(2, t0+ms)
		h.wantCalls() // no slot: it waits for the ack, then ready
		h.spliceAck(2, t0+2*ms)
		h.wantCalls("hold 2")
		h.spliceAck(1, t0+2*ms)
		h.wantCalls()
		h.feedback(1, 10*time.Millisecond, t0+12*ms)
		h.wantCalls("splice-acked 2")
	})
}

// A shim that refuses the Splice of a request already sent, or never
// confirms it, leaves the response untranslated: the connection is
// reset, and its slot comes back.
func TestEarlyRequestRefusedOrNeverConfirmedIsReset(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		h := newHarness(t, earlyConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
		h.register(1, 1, 7, t0)
		h.request(1, "A.example", t0)
		h.connected(1, t0+ms)
		h.wantCalls("dispatch-carrying 1 b1", "splice-acked 1")
		h.control(&proto.SpliceAck{RequestID: h.c.requestID(1), BackendID: 1, OK: false, Reason: "shim full"}, t0+2*ms)
		h.wantCalls("abort 1")
		h.closed(1, splice.CloseAborted, t0+2*ms)
		if b := h.backend(1); b.InService != 0 || b.Active != 0 {
			t.Fatalf("back-end after the reset: %+v", b)
		}
	})
	t.Run("never confirmed", func(t *testing.T) {
		cfg := earlyConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
		cfg.SpliceTries = 3
		cfg.KeepaliveInterval = time.Hour
		h := newHarness(t, cfg)
		h.register(1, 1, 7, t0)
		h.request(1, "A.example", t0)
		h.connected(1, t0)
		h.wantCalls("dispatch-carrying 1 b1", "splice-acked 1")
		h.tick(t0 + 250*ms)
		h.tick(t0 + 500*ms) // the third and last send
		h.wantCalls()
		h.tick(t0 + 749*ms)
		h.wantCalls()
		h.tick(t0 + 750*ms) // its wait is over
		h.wantCalls("abort 1")
	})
}

// The method decides: the first request's, not a follow-up's.
func TestSafeMethods(t *testing.T) {
	for m, want := range map[string]bool{"GET": true, "HEAD": true, "OPTIONS": true, "TRACE": true,
		"POST": false, "PUT": false, "DELETE": false, "PATCH": false, "CONNECT": false, "get": false, "": false} {
		if got := safeMethod(m); got != want {
			t.Errorf("safeMethod(%q) = %v, want %v", m, got, want)
		}
	}
}

// A request dispatched to go early speaks for its slot from Dispatch on
// (backend.promised), so a second dispatch in the same pass sees the slot
// taken; when its Splice carries it (the engine's choice), the request
// takes the early path at once, and resends of the Splice no longer
// carry it.
func TestCarriedRequestTakesItsSlotAndResendsDoNotCarry(t *testing.T) {
	cfg := earlyConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	cfg.HandoffAhead = 1
	cfg.SpliceRetry = 100 * time.Millisecond
	cfg.KeepaliveInterval = time.Hour
	h := newHarness(t, cfg)
	h.register(1, 1, 1, t0)
	h.request(1, "A.example", t0)
	h.request(2, "A.example", t0)
	h.wantCalls("dispatch-carrying 1 b1", "dispatch 2 b1") // one slot: the first speaks for it
	f := h.eng.flows[1]
	f.state = "splice-wait"
	out := h.event(splice.Event{Kind: splice.EvSplice, Flow: 1, Backend: f.backend, Splice: proto.Splice{
		RequestID: 1, Flags: proto.SpliceAtSYN | proto.SpliceRequest, Request: []byte("GET / HTTP/1.1\r\n\r\n")}}, t0+ms)
	if len(out.Datagrams) != 1 {
		t.Fatalf("%d datagrams, want the Splice", len(out.Datagrams))
	}
	if sp := out.Datagrams[0].Msg.(*proto.Splice); sp.Flags&proto.SpliceRequest == 0 || len(sp.Request) == 0 {
		t.Fatalf("the first Splice lost its request: %+v", sp)
	}
	h.wantCalls("splice-acked 1")
	if b := h.backend(1); b.InService != 1 {
		t.Fatalf("back-end after the carried request: %+v", b)
	}
	// No SpliceAck: the resend goes without the request.
	out = h.tick(t0 + ms + splice.Time(cfg.SpliceRetry) + ms)
	var resent *proto.Splice
	for _, d := range out.Datagrams {
		if sp, ok := d.Msg.(*proto.Splice); ok && sp.RequestID == h.c.requestID(1) {
			resent = sp
		}
	}
	if resent == nil || resent.Flags&proto.SpliceRequest != 0 || resent.Request != nil {
		t.Fatalf("resend %+v, want the Splice without its request", resent)
	}
}

// A SYN-ACK that took the carried request in the SYN stands for the
// SpliceAck of a Splice sent with proto.SpliceImplicitAck
// (splice.EvSpliceTaken): the handoff is counted then, the Splice is not
// sent again, and an OK SpliceAck after it (a shim that sends one anyway)
// changes nothing; a refusal after it still aborts the request.
func TestSYNACKTakingTheRequestStandsForTheSpliceAck(t *testing.T) {
	cfg := earlyConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	cfg.KeepaliveInterval = time.Hour
	h := newHarness(t, cfg)
	h.register(1, 5, 7, t0)
	splicesIn := func(out *Output) (n int) {
		for _, d := range out.Datagrams {
			if d.Msg.Type() == proto.TypeSplice {
				n++
			}
		}
		return n
	}
	for flow := splice.FlowID(1); flow <= 2; flow++ {
		h.request(flow, "A.example", t0+ms)
		h.eng.flows[flow].state = "splice-wait"
		h.event(splice.Event{Kind: splice.EvSplice, Flow: flow, Backend: 1,
			Splice: proto.Splice{RequestID: uint64(flow), Flags: proto.SpliceAtSYN | proto.SpliceRequest | proto.SpliceImplicitAck}}, t0+ms)
		h.event(splice.Event{Kind: splice.EvSpliceTaken, Flow: flow, Backend: 1}, t0+3*ms)
	}
	h.wantCalls("dispatch-carrying 1 b1", "splice-acked 1", "dispatch-carrying 2 b1", "splice-acked 2")
	if b := h.backend(1); b.Handoff.N != 2 || b.InService != 2 {
		t.Fatalf("back-end after the SYN-ACKs: %d handoffs timed, %d in service; want 2, 2", b.Handoff.N, b.InService)
	}
	if n := splicesIn(h.tick(t0 + sec)); n != 0 {
		t.Fatalf("%d Splices sent again after the SYN-ACKs acknowledged them", n)
	}
	h.spliceAck(1, t0+sec)
	h.wantCalls()
	h.control(&proto.SpliceAck{RequestID: h.c.requestID(2), BackendID: 1, Reason: "full"}, t0+sec)
	h.wantCalls("abort 2")
	if b := h.backend(1); b.InService != 1 {
		t.Fatalf("back-end after the refusal: %+v, want one request in service", b)
	}
}

// The Feedback of a request whose Splice asked for an implicit ack may
// overtake the SYN-ACK that stands for the ack (they reach different
// shards): it acknowledges the Splice itself, which is not sent again,
// and the SYN-ACK after it changes nothing.
func TestFeedbackBeforeTheSYNACKAcknowledgesAnImplicitSplice(t *testing.T) {
	cfg := earlyConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	cfg.KeepaliveInterval = time.Hour
	cfg.Timelines = true
	h := newHarness(t, cfg)
	h.register(1, 5, 7, t0)
	h.request(1, "A.example", t0+ms)
	h.eng.flows[1].state = "splice-wait"
	h.event(splice.Event{Kind: splice.EvSplice, Flow: 1, Backend: 1,
		Splice: proto.Splice{RequestID: 1, Flags: proto.SpliceAtSYN | proto.SpliceRequest | proto.SpliceImplicitAck}}, t0+ms)
	h.control(&proto.Feedback{BackendID: 1, RequestID: h.c.requestID(1), ServiceTime: time.Millisecond, FirstByte: time.Millisecond / 2}, t0+3*ms)
	if b := h.backend(1); b.Handoff.N != 1 || b.Served != 1 {
		t.Fatalf("after the Feedback: %d handoffs timed, %d served; want 1, 1", b.Handoff.N, b.Served)
	}
	for _, d := range h.tick(t0 + sec).Datagrams {
		if d.Msg.Type() == proto.TypeSplice {
			t.Fatal("the Splice was sent again after its Feedback")
		}
	}
	h.event(splice.Event{Kind: splice.EvSpliceTaken, Flow: 1, Backend: 1}, t0+sec)
	if b := h.backend(1); b.Handoff.N != 1 {
		t.Fatalf("the late SYN-ACK timed the handoff again: %d", b.Handoff.N)
	}
}

// A request on a pooled C2 (splice/fe_pool.go) goes with its Splice
// when it may go early, which then says so (Reuse.Early: the shim holds
// the request for it and sends no SpliceAck); the engine's EvSpliceTaken,
// the server's ACK of the request, stands for the ack. One that may not
// go early waits for the SpliceAck, as on a new C2.
func TestRequestOnAPooledC2GoesEarlyAndIsTakenByItsAck(t *testing.T) {
	h := newHarness(t, earlyConfig(sched.CustomerSpec{Name: "A", Reservation: 100}))
	h.register(1, 1, 7, t0)
	h.request(1, "A.example", t0+ms)
	h.wantCalls("dispatch-carrying 1 b1")
	out := h.connectedWith(1, proto.Splice{RequestID: 1, Reuse: proto.SpliceReuse{On: true}}, t0+2*ms)
	h.wantCalls("splice-acked 1")
	var sent *proto.Splice
	for _, d := range out.Datagrams {
		if m, ok := d.Msg.(*proto.Splice); ok {
			sent = m
		}
	}
	if sent == nil || !sent.Reuse.Early {
		t.Fatalf("the Splice sent is %+v, want Reuse.Early", sent)
	}
	h.event(splice.Event{Kind: splice.EvSpliceTaken, Flow: 1, Backend: 1, At: t0 + 3*ms}, t0+3*ms)
	if b := h.backend(1); b.MeanHandoffMs != 2 {
		t.Errorf("back-end after the server's ACK: %+v, want the handoff measured to it", b)
	}
	// No resend of the Splice after the ack its ACK stood for.
	out = h.tick(t0 + 500*ms)
	for _, d := range out.Datagrams {
		if _, ok := d.Msg.(*proto.Splice); ok {
			t.Errorf("the Splice was sent again after the server's ACK stood for its ack")
		}
	}

	cfg := creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100})
	h = newHarness(t, cfg)
	h.register(1, 1, 7, t0)
	h.request(1, "A.example", t0+ms)
	h.wantCalls("dispatch 1 b1")
	h.connectedWith(1, proto.Splice{RequestID: 1, Reuse: proto.SpliceReuse{On: true}}, t0+2*ms)
	h.wantCalls()
	h.spliceAck(1, t0+3*ms)
	h.wantCalls("splice-acked 1")
}

// refuseSplice has flow's back-end refuse its Splice.
func (h *harness) refuseSplice(flow splice.FlowID, now splice.Time) *Output {
	return h.control(&proto.SpliceAck{RequestID: h.c.requestID(flow), BackendID: h.eng.flows[flow].backend, Reason: "not idle"}, now)
}

// A Splice reusing a pooled C2 that the shim refuses (splice/
// fe_pool_refused.go) sends the flow again on a new C2, once: a request
// that waited for its SpliceAck waits again; one that went early keeps
// its slot and goes with its new Splice. A second refusal aborts, as a
// refused Splice on a new C2 always did.
func TestRefusedReuseGoesOnANewC2Once(t *testing.T) {
	// refused dispatches flow 1 onto a pooled C2 (its engine call:
	// dispatch), whose Splice the shim refuses at t0+3ms.
	refused := func(cfg Config, dispatch string, early bool) *harness {
		h := newHarness(t, cfg)
		h.register(1, 1, 7, t0)
		h.request(1, "A.example", t0+ms)
		h.wantCalls(dispatch)
		h.connectedWith(1, proto.Splice{RequestID: 1, Reuse: proto.SpliceReuse{On: true}}, t0+2*ms)
		if early {
			h.wantCalls("splice-acked 1")
		}
		h.refuseSplice(1, t0+3*ms)
		h.wantCalls(fmt.Sprintf("redispatch 1 carry %v", early))
		return h
	}
	customer := sched.CustomerSpec{Name: "A", Reservation: 100}

	h := refused(creditConfig(customer), "dispatch 1 b1", false)
	h.connected(1, t0+4*ms) // the new C2's SYN-ACK: a Splice without Reuse
	h.spliceAck(1, t0+5*ms)
	h.wantCalls("splice-acked 1")
	if b := h.backend(1); b.InService != 1 {
		t.Errorf("back-end after the new C2: %+v", b)
	}

	h = refused(earlyConfig(customer), "dispatch-carrying 1 b1", true)
	h.connected(1, t0+4*ms)
	h.wantCalls("splice-acked 1") // its slot is held: it goes with the Splice
	if b := h.backend(1); b.InService != 1 {
		t.Errorf("back-end after the early request's new C2: %+v, want its one slot", b)
	}

	h = refused(creditConfig(customer), "dispatch 1 b1", false)
	h.connectedWith(1, proto.Splice{RequestID: 1, Reuse: proto.SpliceReuse{On: true}}, t0+4*ms)
	h.refuseSplice(1, t0+5*ms)
	h.wantCalls("abort 1")
}
