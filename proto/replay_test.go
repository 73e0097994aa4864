package proto

import (
	"errors"
	"testing"
)

func TestReplayWindow(t *testing.T) {
	var w ReplayWindow
	step := func(inc, seq uint64, want error) {
		t.Helper()
		if err := w.Check(inc, seq); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Fatalf("Check(%d, %d) = %v, want %v (window %d/%d)", inc, seq, err, want, w.Incarnation(), w.Top())
		}
		if want == nil {
			w.Accept(inc, seq)
		}
	}
	step(5, 0, ErrReplay) // sequence numbers start at 1
	step(5, 10, nil)      // an empty window takes anything
	step(5, 10, ErrReplay)
	step(5, 8, nil) // reordered, inside the window
	step(5, 8, ErrReplay)
	step(5, 9, nil)
	step(5, 10+ReplayWindowSize-1, nil) // slides: 10 is now the oldest kept
	step(5, 10, ErrReplay)
	step(5, 9, ErrReplay) // fell out of the window
	step(5, 11, nil)      // never seen, still inside
	step(5, 5000, nil)    // a jump past the whole window
	step(5, 5000-ReplayWindowSize+1, nil)
	step(5, 5000-ReplayWindowSize, ErrReplay)
	step(4, 6000, ErrStale) // an older incarnation, whatever its number
	step(6, 1, nil)         // a newer one starts afresh
	step(6, 1, ErrReplay)
	step(5, 5001, ErrStale) // the one before is dead now
	step(6, 2, nil)
}

// Accept without a passing Check changes nothing.
func TestReplayWindowAcceptChecks(t *testing.T) {
	var w ReplayWindow
	w.Accept(2, 50)
	w.Accept(1, 100) // stale: ignored
	if w.Incarnation() != 2 || w.Top() != 50 {
		t.Fatalf("window %d/%d after a stale Accept, want 2/50", w.Incarnation(), w.Top())
	}
}

// Accepting, sliding and refusing allocate nothing.
func TestReplayWindowAllocatesNothing(t *testing.T) {
	var w ReplayWindow
	seq := uint64(0)
	if n := testing.AllocsPerRun(1000, func() {
		seq += 3
		if w.Check(1, seq) == nil {
			w.Accept(1, seq)
		}
		w.Check(1, seq)
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	if w.Top() != seq {
		t.Fatalf("top %d, want %d: the measured path did not run", w.Top(), seq)
	}
}
