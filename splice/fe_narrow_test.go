package splice

import (
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// TestNarrowAcksCountClientWindowsBelowNarrowWindow: a forwarded pure ACK
// counts in NarrowAcks when the client's window, scaled by the scale it
// offered, is below NarrowWindow (1 MiB): with scale 7, raw 8191 is
// narrow and 8192 is not; without window scaling every window is.
// Segments that are not pure ACKs never count.
func TestNarrowAcksCountClientWindowsBelowNarrowWindow(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams()) // client window scale 7
	base := sc.c.rcvNxt
	narrow := func() uint64 { return sc.h.fe.NarrowAcks() }
	if n := narrow(); n != 0 {
		t.Fatalf("NarrowAcks = %d before any ACK", n)
	}
	sc.pass(t, sc.ack(base+1000, NarrowWindow>>7))
	if n := narrow(); n != 0 {
		t.Errorf("a 1 MiB window (raw 8192, scale 7): NarrowAcks = %d, want 0", n)
	}
	sc.pass(t, sc.ack(base+2000, NarrowWindow>>7-1))
	if n := narrow(); n != 1 {
		t.Errorf("a window of 1 MiB - 128 (raw 8191, scale 7): NarrowAcks = %d, want 1", n)
	}
	sc.c.window = 10
	sc.pass(t, sc.c.seg(wire.TCPFlagACK|wire.TCPFlagPSH, sc.c.nxt, base+3000, []byte("more body")))
	if n := narrow(); n != 1 {
		t.Errorf("data with a narrow window is not a pure ACK: NarrowAcks = %d, want 1", n)
	}
	if got := sc.h.fe.Stats().NarrowAcks; got != narrow() {
		t.Errorf("Stats().NarrowAcks = %d, NarrowAcks() = %d", got, narrow())
	}

	p := defaultSpliceParams()
	p.offer.WScale = -1 // no window scaling: at most 64 KiB
	sc = connectSpliced(t, p)
	sc.pass(t, sc.ack(sc.c.rcvNxt+1000, 65535))
	if n := sc.h.fe.NarrowAcks(); n != 1 {
		t.Errorf("no window scaling, raw 65535: NarrowAcks = %d, want 1", n)
	}
}
