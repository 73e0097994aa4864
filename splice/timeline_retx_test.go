package splice

import (
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// TestTimelineMarksEachLossEpisodeTheClientReports: on a spliced
// connection, the client's first ACK with SACK blocks after one without
// is marked (the back-end's retransmission follows), further SACK ACKs
// of the same episode are not, a new episode after a clean ACK is; a
// client segment with bytes already forwarded is marked as the client's
// retransmission; past MaxRetxMarks only the count grows.
func TestTimelineMarksEachLossEpisodeTheClientReports(t *testing.T) {
	sc := connectSpliced(t, defaultSpliceParams())
	base := sc.c.rcvNxt
	sack := func(from, to wire.Seq) wire.SACKBlock { return wire.SACKBlock{Left: base + from, Right: base + to} }
	segs := func(f []byte) { sc.now += ms; sc.c.tsVal++; sc.h.input(f, sc.now) }

	segs(sc.c.seg(wire.TCPFlagACK, sc.c.nxt, base+1000, nil))
	segs(sc.c.seg(wire.TCPFlagACK, sc.c.nxt, base+1000, nil, sack(2000, 3000)))
	first := sc.now
	segs(sc.c.seg(wire.TCPFlagACK, sc.c.nxt, base+1000, nil, sack(2000, 4000))) // the same episode
	segs(sc.c.seg(wire.TCPFlagACK, sc.c.nxt, base+5000, nil))                   // repaired
	segs(sc.c.seg(wire.TCPFlagACK, sc.c.nxt, base+5000, nil, sack(6000, 7000)))
	second := sc.now
	// The client resends bytes the front-end forwarded already.
	body := []byte("x")
	segs(sc.c.seg(wire.TCPFlagACK, sc.c.nxt, base+7000, body))
	sc.c.nxt++
	segs(sc.c.seg(wire.TCPFlagACK, sc.c.nxt-1, base+7000, body))
	resent := sc.now

	tl := &sc.h.fe.byID[sc.id].tl
	want := []RetxMark{{At: first, Kind: RetxClientSACK}, {At: second, Kind: RetxClientSACK}, {At: resent, Kind: RetxClientData}}
	got := tl.Marks()
	if len(got) != len(want) {
		t.Fatalf("marks %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mark %d: %v at %v, want %v at %v", i, got[i].Kind, got[i].At-first, want[i].Kind, want[i].At-first)
		}
	}
	// Many more episodes: the marks stay bounded, the count does not.
	for i := range 2 * MaxRetxMarks {
		ack := base + 8000 + wire.Seq(i)*2000
		segs(sc.c.seg(wire.TCPFlagACK, sc.c.nxt, ack, nil))
		segs(sc.c.seg(wire.TCPFlagACK, sc.c.nxt, ack, nil, wire.SACKBlock{Left: ack + 500, Right: ack + 1000}))
	}
	if n := len(tl.Marks()); n != MaxRetxMarks || int(tl.NumRetx) != len(want)+2*MaxRetxMarks {
		t.Errorf("%d marks kept, %d counted; want %d kept, %d counted", n, tl.NumRetx, MaxRetxMarks, len(want)+2*MaxRetxMarks)
	}
}
