package splice

import (
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// pass feeds the frames to sc's engine as one daemon pass does: one
// Output for all of them. It returns the Output and what each frame was
// (decoded before the engine rewrote its copy).
func (sc *splicedConn) pass(t *testing.T, frames ...[]byte) (*Output, []*seen) {
	t.Helper()
	sc.now += ms
	var sent []*seen
	out := sc.h.call(func(out *Output) {
		for _, f := range frames {
			sent = append(sent, decodeTCP(t, f))
			sc.h.fe.Input(append([]byte(nil), f...), sc.now, out)
			sc.h.inputs++
		}
	})
	return out, sent
}

// ack is a pure ACK of the reply stream up to ack with window win and the
// client's next timestamp.
func (sc *splicedConn) ack(ack wire.Seq, win uint16) []byte {
	sc.c.tsVal++
	sc.c.window = win
	return sc.c.seg(wire.TCPFlagACK, sc.c.nxt, ack, nil)
}

// TestClientAcksOfOnePassAreCoalesced: two pure ACKs of a spliced flow in
// one pass leave as one frame, in the first one's place, that is the
// second one translated (its ACK number, window and timestamps), with
// checksums right (expectTCP checks them).
func TestClientAcksOfOnePassAreCoalesced(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	base := sc.c.rcvNxt
	out, sent := sc.pass(t, sc.ack(base+1000, 600), sc.ack(base+3000, 700))
	expectTCP(t, onlyFrame(t, out), wantForwarded(sc, sent[1])...)
	if n := sc.h.fe.Stats().AcksCoalesced; n != 1 {
		t.Errorf("AcksCoalesced = %d, want 1", n)
	}
	sc.h.checkCounters()
}

// TestClientAcksThatMustAllGo: duplicate ACKs (the back-end's loss
// signal), ACKs with SACK blocks, ACKs with data of the flow between
// them, ACKs of different passes, and ACKs of different flows are all
// forwarded as they came.
func TestClientAcksThatMustAllGo(t *testing.T) {
	check := func(name string, sc *splicedConn, out *Output, sent []*seen) {
		t.Helper()
		if len(out.Frames) != len(sent) {
			t.Fatalf("%s: %d frames out for %d in", name, len(out.Frames), len(sent))
		}
		for i := range sent {
			expectTCP(t, out.Frames[i].Data, wantForwarded(sc, sent[i])...)
		}
		if n := sc.h.fe.Stats().AcksCoalesced; n != 0 {
			t.Errorf("%s: AcksCoalesced = %d", name, n)
		}
	}
	sc := connectSpliced(t, defaultSpliceParams())
	base := sc.c.rcvNxt
	out, sent := sc.pass(t, sc.ack(base+1000, 600), sc.ack(base+1000, 600), sc.ack(base+1000, 600))
	check("duplicate ACKs", sc, out, sent)

	sc = connectSpliced(t, defaultSpliceParams())
	base = sc.c.rcvNxt
	sc.c.tsVal++
	withSACK := sc.c.seg(wire.TCPFlagACK, sc.c.nxt, base+2000, nil, wire.SACKBlock{Left: base + 3000, Right: base + 4000})
	out, sent = sc.pass(t, sc.ack(base+1000, 600), withSACK)
	check("SACK", sc, out, sent)

	sc = connectSpliced(t, defaultSpliceParams())
	base = sc.c.rcvNxt
	first := sc.ack(base+1000, 600)
	sc.c.tsVal++
	body := sc.c.data([]byte("more of the request body"))
	out, sent = sc.pass(t, first, body, sc.ack(base+2000, 600))
	check("data between", sc, out, sent)

	sc = connectSpliced(t, defaultSpliceParams())
	base = sc.c.rcvNxt
	out1, sent1 := sc.pass(t, sc.ack(base+1000, 600))
	check("first pass", sc, out1, sent1)
	out2, sent2 := sc.pass(t, sc.ack(base+2000, 600))
	check("second pass", sc, out2, sent2)
}

// TestCoalescingKeepsOtherFlowsInPlace: ACKs of two flows interleaved in
// a pass: each flow's later ACK takes its earlier one's place, so the
// output holds one frame per flow, in the order the flows first came.
func TestCoalescingKeepsOtherFlowsInPlace(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	h := sc.h
	p2 := defaultSpliceParams()
	p2.start = sc.now
	p2.clientISN = 0x20000000
	c2 := newClient(testRequestPort+1, p2.clientISN, p2.offer)
	sc2 := connectSplicedOn(t, h, c2, p2)
	sc.now = sc2.now
	a, b := sc.c.rcvNxt, sc2.c.rcvNxt
	f1, f2 := sc.ack(a+100, 600), sc2.ack(b+100, 600)
	f3, f4 := sc.ack(a+900, 601), sc2.ack(b+700, 602)
	out, sent := sc.pass(t, f1, f2, f3, f4)
	if len(out.Frames) != 2 {
		t.Fatalf("%d frames out, want 2", len(out.Frames))
	}
	expectTCP(t, out.Frames[0].Data, wantForwarded(sc, sent[2])...)
	expectTCP(t, out.Frames[1].Data, wantForwarded(sc2, sent[3])...)
	if n := h.fe.Stats().AcksCoalesced; n != 2 {
		t.Errorf("AcksCoalesced = %d, want 2", n)
	}
}

// TestCoalescingAllocatesNothing: the steady state of a pass of ACKs.
func TestCoalescingAllocatesNothing(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	base := sc.c.rcvNxt
	frames := make([][]byte, 0, 2002)
	for i := range 2002 {
		frames = append(frames, sc.ack(base+wire.Seq(100*(i+1)), 600))
	}
	buf := make([]byte, 2048)
	var out Output
	i := 0
	before := sc.h.fe.Stats().AcksCoalesced
	n := testing.AllocsPerRun(1000, func() {
		out.Reset()
		for range 2 {
			copy(buf, frames[i])
			sc.h.fe.Input(buf[:len(frames[i])], sc.now, &out)
			i++
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per pass", n)
	}
	if got := sc.h.fe.Stats().AcksCoalesced - before; got < 1000 {
		t.Errorf("%d ACKs coalesced over 1000 passes of two: the measured path did not run", got)
	}
}
