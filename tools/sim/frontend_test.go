package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice"
)

// standIn is a run with one queued flow, for driving the engine's
// stand-in by hand: no controller, a constant service time.
func standIn(classic bool) (*run, *frontEnd) {
	r := &run{cfg: Config{Duration: time.Second, Backends: 1, Capacity: 1, ClassicSplice: classic,
		HandoffDelay: 4 * time.Millisecond, ControlDelay: time.Millisecond,
		Customers: []Customer{{Name: "a", Service: 20 * time.Millisecond, Distribution: Constant}}},
		inServ: make([]int, 1)}
	r.flows = append(r.flows, simFlow{state: flowQueued})
	return r, (*frontEnd)(r)
}

// c2UpNow runs the run's events up to and including the flow's handoff
// coming up, which must be the next one.
func (r *run) c2UpNow(t *testing.T) {
	t.Helper()
	e := r.events.pop()
	if e.kind != handoffUp {
		t.Fatalf("next event %v, want the handoff up", e.kind)
	}
	r.now = e.at
	r.handle(e)
}

// Dispatch reports the Splice sent with the SYN as the engine does: an
// EvSplice in Dispatch's own output, marked as sent with the SYN; in the
// classic order nothing until the handoff is up.
func TestStandInReportsTheSpliceAtDispatch(t *testing.T) {
	for _, classic := range []bool{false, true} {
		_, fe := standIn(classic)
		var out splice.Output
		if err := fe.Dispatch(1, splice.Backend{ID: 1}, 0, &out); err != nil {
			t.Fatal(err)
		}
		if got := len(out.Events); classic && got != 0 || !classic && (got != 1 || out.Events[0].Kind != splice.EvSplice) {
			t.Errorf("classic %v: Dispatch reported %+v", classic, out.Events)
		}
	}
}

// With the Splice sent with the SYN, the SpliceAck may come before the
// SYN-ACK: the engine takes SpliceAcked and HoldSplice while connecting
// and does them when C2 is up (splice/fe_atsyn.go). In the classic order
// it refuses both then, as the engine does.
func TestStandInRemembersTheSpliceAckWhileConnecting(t *testing.T) {
	t.Run("SpliceAcked", func(t *testing.T) {
		r, fe := standIn(false)
		if err := fe.Dispatch(1, splice.Backend{ID: 1}, 0, &splice.Output{}); err != nil {
			t.Fatal(err)
		}
		if err := fe.SpliceAcked(1, splice.Time(time.Millisecond), nil); err != nil {
			t.Fatalf("SpliceAcked while connecting: %v", err)
		}
		if f := r.flow(1); f.state != flowConnecting || r.inServ[0] != 0 {
			t.Fatalf("the request went before C2 was up: state %v, %d in service", f.state, r.inServ[0])
		}
		r.c2UpNow(t)
		if f := r.flow(1); f.state != flowSent || r.inServ[0] != 1 {
			t.Fatalf("at C2 up: state %v, %d in service; want the request sent", f.state, r.inServ[0])
		}
		if e := r.events.pop(); e.kind != served || e.at != (4*time.Millisecond+20*time.Millisecond).Nanoseconds() {
			t.Errorf("next event %v at %d, want served 20 ms after C2 came up at 4 ms", e.kind, e.at)
		}
	})
	t.Run("HoldSplice", func(t *testing.T) {
		r, fe := standIn(false)
		if err := fe.Dispatch(1, splice.Backend{ID: 1}, 0, &splice.Output{}); err != nil {
			t.Fatal(err)
		}
		if err := fe.HoldSplice(1, splice.Time(time.Millisecond)); err != nil {
			t.Fatalf("HoldSplice while connecting: %v", err)
		}
		// Held, it is not ready yet to be refused: the engine refuses
		// only a connection that is up (the controller then aborts).
		if err := fe.Reject(1, 503, "slot-wait", 0, splice.Time(time.Millisecond), &splice.Output{}); !errors.Is(err, splice.ErrFlowState) {
			t.Errorf("Reject of a flow held while connecting: %v, want ErrFlowState", err)
		}
		r.c2UpNow(t)
		if f := r.flow(1); f.state != flowHeld {
			t.Fatalf("at C2 up: state %v, want held for a slot", f.state)
		}
		if err := fe.SpliceAcked(1, splice.Time(5*time.Millisecond), nil); err != nil || r.inServ[0] != 1 {
			t.Fatalf("SpliceAcked of the held flow: %v, %d in service", err, r.inServ[0])
		}
	})
	t.Run("classic", func(t *testing.T) {
		_, fe := standIn(true)
		if err := fe.Dispatch(1, splice.Backend{ID: 1}, 0, &splice.Output{}); err != nil {
			t.Fatal(err)
		}
		if err := fe.SpliceAcked(1, 0, nil); !errors.Is(err, splice.ErrFlowState) {
			t.Errorf("SpliceAcked while connecting, classic order: %v, want ErrFlowState", err)
		}
		if err := fe.HoldSplice(1, 0); !errors.Is(err, splice.ErrFlowState) {
			t.Errorf("HoldSplice while connecting, classic order: %v, want ErrFlowState", err)
		}
	})
}

// A request rewritten to a content tree keeps its Splice for the SYN-ACK
// in the engine (the rewritten length is fixed then), so the stand-in
// does not report it at dispatch.
func TestStandInSendsARewrittenRequestsSpliceAfterTheSynAck(t *testing.T) {
	_, fe := standIn(false)
	if err := fe.Rewrite(1, []byte("/t1/")); err != nil {
		t.Fatal(err)
	}
	var out splice.Output
	if err := fe.Dispatch(1, splice.Backend{ID: 1}, 0, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Events) != 0 {
		t.Errorf("a rewritten request's Splice reported at dispatch: %+v", out.Events)
	}
}

// The engine runs in the front-end's process: during a stall it does not
// see the SYN-ACK either, so a request remembered while connecting goes
// when the stall ends, not when the SYN-ACK came.
func TestStandInSendsARememberedRequestAfterAStall(t *testing.T) {
	r, fe := standIn(false)
	r.cfg.Stalls = []Stall{{At: 3 * time.Millisecond, For: 7 * time.Millisecond}}
	if err := fe.Dispatch(1, splice.Backend{ID: 1}, 0, &splice.Output{}); err != nil {
		t.Fatal(err)
	}
	if err := fe.SpliceAcked(1, 0, nil); err != nil {
		t.Fatal(err)
	}
	r.c2UpNow(t) // at 4 ms, inside the stall
	if f := r.flow(1); f.state != flowConnecting || r.inServ[0] != 0 {
		t.Fatalf("the request went during the stall: state %v", f.state)
	}
	r.c2UpNow(t)
	if f := r.flow(1); f.state != flowSent || r.now != (10*time.Millisecond).Nanoseconds() {
		t.Fatalf("state %v at %d ns, want sent when the stall ends at 10 ms", f.state, r.now)
	}
}
