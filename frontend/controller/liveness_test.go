package controller

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// progressEngine is the fake engine with ClientProgress: the time each
// flow's client last acknowledged new bytes.
type progressEngine struct {
	*fakeEngine
	acked map[splice.FlowID]splice.Time
}

func (e *progressEngine) ClientAckedAt(id splice.FlowID) (splice.Time, bool) {
	t, ok := e.acked[id]
	return t, ok
}

// splicedWithProgress is a controller over an engine with
// ClientProgress, back-end 1 registered at t0 and flow 1 spliced to it
// at t0+2ms (its SpliceAck the back-end's last control message).
func splicedWithProgress(t *testing.T) (*harness, *progressEngine) {
	t.Helper()
	eng := &progressEngine{fakeEngine: newFakeEngine(), acked: make(map[splice.FlowID]splice.Time)}
	c, err := New(creditConfig(sched.CustomerSpec{Name: "A", Reservation: 100}), eng, t0)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, c: c, eng: eng.fakeEngine}
	h.register(1, 2, 1, t0)
	h.request(1, "A.example", t0+ms)
	h.spliced(1, t0+2*ms)
	h.eng.takeCalls()
	return h, eng
}

// TestBackendWhoseClientsAckIsNotDeclaredDead: a back-end whose control
// datagrams stop while its connection's client keeps acknowledging new
// bytes (its shim is sending the response; a CPU-starved VM guest was
// seen so) is neither probed nor declared dead, and its connection is not
// reset, for up to 3 intervals after it was last heard; once the
// acknowledgements stop too, it is probed 1.25 intervals after the last
// one and dead half an interval after the probe.
func TestBackendWhoseClientsAckIsNotDeclaredDead(t *testing.T) {
	h, eng := splicedWithProgress(t)
	// The control channel falls silent after the SpliceAck at t0+2ms;
	// the client acknowledges new bytes every 300 ms for 2.7 s, inside
	// the grace of 3 intervals after the back-end was last heard.
	last := t0 + 2*ms
	for now := t0 + 300*ms; now <= t0+2700*ms; now += 300 * ms {
		eng.acked[1] = now
		last = now
		if out := h.tick(now); len(out.Datagrams) != 0 || hasLog(out, "back-end dead") {
			t.Fatalf("at %v, with the client acknowledging: sent %v, logs %v", time.Duration(now-t0), datagrams(out), out.Logs)
		}
	}
	h.wantCalls()
	if b := h.backend(1); !b.Alive || b.Deaths != 0 {
		t.Fatalf("back-end serving a moving transfer: %+v", b)
	}
	// The acknowledgements stop: the probe comes 1.25 intervals after the
	// last one, the death half an interval after the probe.
	probeAt := last + splice.Time(1250*time.Millisecond) + 1
	h.tick(probeAt - 1)
	out := h.tick(probeAt)
	if got := datagrams(out); len(got) != 1 || got[0] != "Keepalive->198.18.0.21" {
		t.Fatalf("probe at %v: %v", time.Duration(probeAt-t0), got)
	}
	deadAt := probeAt + splice.Time(500*time.Millisecond) + 1
	h.tick(deadAt - 1)
	h.wantCalls()
	if out := h.tick(deadAt); !hasLog(out, "back-end dead") {
		t.Fatalf("no death at %v: %v", time.Duration(deadAt-t0), out.Logs)
	}
	h.wantCalls("abort 1")
}

// TestProbeAnsweredByClientProgress: an acknowledgement after the probe
// went out answers it as a keepalive would.
func TestProbeAnsweredByClientProgress(t *testing.T) {
	h, eng := splicedWithProgress(t)
	probeAt := t0 + 2*ms + splice.Time(1250*time.Millisecond) + 1
	if got := datagrams(h.tick(probeAt)); len(got) != 1 {
		t.Fatalf("no probe at %v: %v", time.Duration(probeAt-t0), got)
	}
	eng.acked[1] = probeAt + 100*ms
	deadAt := probeAt + splice.Time(500*time.Millisecond) + 1
	if out := h.tick(deadAt); hasLog(out, "back-end dead") {
		t.Fatalf("dead although its client acknowledged after the probe: %v", out.Logs)
	}
	h.wantCalls()
	if b := h.backend(1); !b.Alive {
		t.Fatalf("%+v", b)
	}
}

// TestClientAcksKeepASilentBackendOnlyForAWhile: a client's ACKs are its
// own word (the front-end never sees the response), so a client that
// keeps acknowledging cannot keep a back-end that stopped talking on the
// control channel alive for ever: its progress counts up to 3 intervals
// after the back-end's last control message, the probe follows 1.25
// intervals later and the death half an interval after that, although
// the acknowledgements never stop.
func TestClientAcksKeepASilentBackendOnlyForAWhile(t *testing.T) {
	h, eng := splicedWithProgress(t) // the SpliceAck at t0+2ms: the back-end's last control message
	probeAt := t0 + 2*ms + splice.Time((3000+1250)*time.Millisecond) + 1
	deadAt := probeAt + splice.Time(500*time.Millisecond) + 1
	var probed, died splice.Time
	for now := t0 + 100*ms; now <= t0+10*sec && died == 0; now += 100 * ms {
		eng.acked[1] = now                                                                // the client acknowledges at every step
		for _, at := range []splice.Time{probeAt - 1, probeAt, deadAt - 1, deadAt, now} { // in time order
			if at <= now-100*ms || at > now {
				continue
			}
			out := h.tick(at)
			if len(datagrams(out)) != 0 && probed == 0 {
				probed = at
			}
			if hasLog(out, "back-end dead") {
				died = at
			}
		}
	}
	if probed != probeAt || died != deadAt {
		t.Fatalf("probed at %v, dead at %v; want %v and %v after the start",
			time.Duration(probed-t0), time.Duration(died-t0), time.Duration(probeAt-t0), time.Duration(deadAt-t0))
	}
	h.wantCalls("abort 1")
}
