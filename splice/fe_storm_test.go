package splice

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// TestAckStormIsCut feeds a spliced flow the client's half of an ACK
// storm (design trap 8): identical pure ACKs acknowledging nothing new.
// Up to the limit they are forwarded; past it the flow is reset on both
// sides and counted.
func TestAckStormIsCut(t *testing.T) {
	p := defaultSpliceParams()
	p.mod = func(c *FrontEndConfig) { c.StormLimit = 50; c.StormWindow = time.Second }
	sc := connectSpliced(t, p)
	h, c := sc.h, sc.c
	now := sc.now
	dup := c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil)
	// The first is an ordinary ACK; the next 50 are duplicates within
	// the limit.
	for i := 0; i < 51; i++ {
		now += Time(time.Millisecond)
		out := h.input(append([]byte(nil), dup...), now)
		expectTCP(t, onlyFrame(t, out), to(backendIP, webPort), flagsAre(wire.TCPFlagACK))
	}
	now += Time(time.Millisecond)
	out := h.input(append([]byte(nil), dup...), now)
	if got := h.fe.Stats().AckStorms; got != 1 {
		t.Fatalf("AckStorms = %d, want 1", got)
	}
	var toClient, toBackend int
	for _, f := range copyFrames(out) {
		s := expectTCP(t, f)
		if s.tcp.RST {
			if s.ip.DstIP.Equal(backendIP.Addr().AsSlice()) {
				toBackend++
			} else {
				toClient++
			}
		}
	}
	if toClient != 1 || toBackend != 1 {
		t.Fatalf("storm cut sent %d RSTs to the client and %d to the back-end, want 1 and 1", toClient, toBackend)
	}
	onlyEvent(t, out, EvClosed)
}

// TestDuplicateAcksWithProgressAreNotAStorm: dup ACKs that carry new
// SACK information (loss recovery) or are spread over time never trip
// the detector.
func TestDuplicateAcksWithProgressAreNotAStorm(t *testing.T) {
	p := defaultSpliceParams()
	p.mod = func(c *FrontEndConfig) { c.StormLimit = 10; c.StormWindow = time.Second }
	sc := connectSpliced(t, p)
	h, c := sc.h, sc.c
	now := sc.now
	base := c.rcvNxt
	for i := 0; i < 100; i++ {
		now += Time(time.Millisecond)
		left := base + wire.Seq(1000*(i+1))
		h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil, wire.SACKBlock{Left: left, Right: left + 1000}), now)
	}
	for i := 0; i < 100; i++ {
		now += Time(200 * time.Millisecond) // 5 per second: below any storm rate
		h.input(c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt, nil), now)
	}
	if got := h.fe.Stats().AckStorms; got != 0 {
		t.Fatalf("AckStorms = %d for recovery-like duplicate ACKs, want 0", got)
	}
}
