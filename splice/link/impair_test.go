package link

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"
)

var t0 = time.Unix(1000, 0)

// The schedule tests check the virtual departure times; they involve no
// goroutine and no clock.

func TestImpairScheduleLossIsBinomial(t *testing.T) {
	const frames = 10000
	s := newImpairSchedule(ImpairConfig{Loss: 0.5, Seed: 1})
	lost := 0
	for range frames {
		if s.admit(t0, 100).drop {
			lost++
		}
	}
	// Mean 5000, standard deviation 50: five deviations either side.
	if lost < 4750 || lost > 5250 {
		t.Fatalf("lost %d of %d at p=0.5", lost, frames)
	}
}

func TestImpairScheduleIsDeterministicPerSeed(t *testing.T) {
	decisions := func(cfg ImpairConfig) []impairVerdict {
		s := newImpairSchedule(cfg)
		var v []impairVerdict
		for i := range 500 {
			v = append(v, s.admit(t0.Add(time.Duration(i)*time.Microsecond), 1000))
		}
		return v
	}
	cfg := ImpairConfig{Loss: 0.1, Reorder: 0.2, Delay: time.Millisecond, Jitter: 500 * time.Microsecond, Seed: 42}
	a, b := decisions(cfg), decisions(cfg)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("frame %d: %+v then %+v with the same seed", i, a[i], b[i])
		}
	}
	cfg.Seed = 43
	c := decisions(cfg)
	same := 0
	for i := range a {
		if a[i] == c[i] {
			same++
		}
	}
	if same == len(a) {
		t.Fatal("seeds 42 and 43 gave identical decisions")
	}

	// The loss decisions depend on the seed alone, not on the other knobs.
	plain := decisions(ImpairConfig{Loss: 0.1, Seed: 42})
	for i := range a {
		if a[i].drop != plain[i].drop {
			t.Fatalf("frame %d: loss decision changed with delay/reorder settings", i)
		}
	}
}

func TestImpairScheduleJitterKeepsOrderWithoutReorder(t *testing.T) {
	const delay, jitter = 10 * time.Millisecond, 8 * time.Millisecond
	s := newImpairSchedule(ImpairConfig{Delay: delay, Jitter: jitter, Seed: 7})
	var last time.Time
	spread := map[time.Duration]bool{}
	for i := range 1000 {
		now := t0.Add(time.Duration(i) * 100 * time.Microsecond)
		v := s.admit(now, 100)
		if v.drop || v.reordered {
			t.Fatalf("frame %d: %+v with no loss or reorder configured", i, v)
		}
		if v.depart.Before(last) {
			t.Fatalf("frame %d departs at %v, before its predecessor at %v", i, v.depart, last)
		}
		if d := v.depart.Sub(now); d < delay-jitter || d > delay+jitter && !v.depart.Equal(last) {
			t.Fatalf("frame %d delayed %v, outside %v±%v", i, d, delay, jitter)
		}
		spread[v.depart.Sub(now)] = true
		last = v.depart
	}
	if len(spread) < 100 {
		t.Errorf("only %d distinct delays: jitter not applied", len(spread))
	}
}

func TestImpairScheduleRateSpacesFrames(t *testing.T) {
	// 1 Mbit/s: a 125-byte frame takes exactly 1 ms on the wire.
	s := newImpairSchedule(ImpairConfig{RateBitsPerSec: 1_000_000, Delay: 5 * time.Millisecond})
	for i := range 10 {
		v := s.admit(t0, 125) // a burst, all written at once
		if want := t0.Add(time.Duration(i+1)*time.Millisecond + 5*time.Millisecond); !v.depart.Equal(want) {
			t.Fatalf("burst frame %d departs at +%v, want +%v", i, v.depart.Sub(t0), want.Sub(t0))
		}
	}
	// After the line has been idle, a frame pays only its own time.
	later := t0.Add(time.Second)
	if v := s.admit(later, 250); !v.depart.Equal(later.Add(2*time.Millisecond + 5*time.Millisecond)) {
		t.Fatalf("frame after idle departs at +%v", v.depart.Sub(later))
	}
}

func TestImpairScheduleReorderedFramesOvertake(t *testing.T) {
	s := newImpairSchedule(ImpairConfig{Delay: 10 * time.Millisecond, Reorder: 0.25, Seed: 3})
	var inOrderLast time.Time
	reordered, overtakes := 0, 0
	for i := range 1000 {
		now := t0.Add(time.Duration(i) * time.Microsecond)
		v := s.admit(now, 100)
		if v.reordered {
			reordered++
			if !v.depart.Equal(now) {
				t.Fatalf("reordered frame %d departs at +%v after its write", i, v.depart.Sub(now))
			}
			if v.depart.Before(inOrderLast) {
				overtakes++
			}
			continue
		}
		if v.depart.Before(inOrderLast) {
			t.Fatalf("in-order frame %d overtook another", i)
		}
		inOrderLast = v.depart
	}
	if reordered < 180 || reordered > 320 {
		t.Errorf("%d of 1000 reordered at p=0.25", reordered)
	}
	if overtakes < reordered-5 {
		t.Errorf("only %d of %d reordered frames overtake a queued frame", overtakes, reordered)
	}
}

func TestDelayLineOrdersByTimeThenWriteOrder(t *testing.T) {
	im := &Impair{epoch: t0.Add(-time.Hour)}
	order := []struct {
		at  int
		seq uint64
	}{{5, 1}, {3, 2}, {5, 3}, {1, 4}, {3, 5}, {9, 6}, {0, 7}, {5, 8}}
	for _, o := range order {
		im.queueDeparture(departure{at: t0.Add(time.Duration(o.at)), seq: o.seq})
	}
	want := []uint64{7, 4, 2, 5, 1, 3, 8, 6}
	for i, w := range want {
		if _, d := im.line.Pop(); d.seq != w {
			t.Fatalf("pop %d gave seq %d, want %d", i, d.seq, w)
		}
	}
	if im.line.Len() != 0 {
		t.Fatal("delay line not empty")
	}
}

// The Impair tests run the real goroutine over Mem links. They assert
// order and counts; no assertion depends on how fast the machine is.

// numbered is a frame carrying its write index.
func numbered(i int) []byte {
	f := make([]byte, 60)
	binary.BigEndian.PutUint32(f, uint32(i))
	return f
}

// collect reads n frames from l and returns their write indexes.
func collect(t *testing.T, l Link, n int) []int {
	t.Helper()
	watchdog(t, l, 30*time.Second)
	buf := make([]byte, 2048)
	got := make([]int, 0, n)
	for len(got) < n {
		m, err := l.ReadFrame(buf)
		if err != nil {
			t.Fatalf("after %d of %d frames: %v", len(got), n, err)
		}
		got = append(got, int(binary.BigEndian.Uint32(buf[:m])))
	}
	return got
}

func TestImpairLossDeliversExactlyTheScheduledFrames(t *testing.T) {
	const frames = 10000
	cfg := ImpairConfig{Loss: 0.5, Seed: 99, QueueLimit: frames}
	a, b := NewMemPair(frames)
	defer b.Close()
	im := NewImpair(a, cfg)
	defer im.Close()

	for i := range frames {
		if err := im.WriteFrame(numbered(i)); err != nil {
			t.Fatal(err)
		}
	}
	// The schedule alone says which frames survive.
	s := newImpairSchedule(cfg)
	var want []int
	for i := range frames {
		if !s.admit(t0, 60).drop {
			want = append(want, i)
		}
	}
	if lost := frames - len(want); lost < 4750 || lost > 5250 {
		t.Fatalf("schedule lost %d of %d", lost, frames)
	}
	got := collect(t, b, len(want))
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delivery %d is frame %d, want %d", i, got[i], want[i])
		}
	}
	st := im.Stats()
	if st.TxDropped != uint64(frames-len(want)) || im.ImpairStats().Lost != st.TxDropped {
		t.Errorf("stats %+v / %+v, want %d dropped", st, im.ImpairStats(), frames-len(want))
	}
}

func TestImpairDelayAndRateKeepOrder(t *testing.T) {
	tests := map[string]ImpairConfig{
		"delay with jitter": {Delay: 2 * time.Millisecond, Jitter: time.Millisecond, Seed: 5},
		"rate limit":        {RateBitsPerSec: 50_000_000}, // 9.6 us per frame
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			const frames = 300
			a, b := NewMemPair(frames)
			defer b.Close()
			im := NewImpair(a, cfg)
			defer im.Close()
			for i := range frames {
				im.WriteFrame(numbered(i))
			}
			for i, got := range collect(t, b, frames) {
				if got != i {
					t.Fatalf("delivery %d is frame %d", i, got)
				}
			}
			// The peer can read the last frame before the delay line's
			// WriteFrame has returned and counted it; Close waits for the
			// delay line, so the counters are final after it.
			if err := im.Close(); err != nil {
				t.Fatal(err)
			}
			if s := im.Stats(); s.TxFrames != frames || s.TxDropped != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

func TestImpairReorderDeliversEveryFrameOnce(t *testing.T) {
	const frames = 200
	cfg := ImpairConfig{Delay: 5 * time.Millisecond, Reorder: 0.3, Seed: 11}
	a, b := NewMemPair(frames)
	defer b.Close()
	im := NewImpair(a, cfg)
	defer im.Close()
	for i := range frames {
		im.WriteFrame(numbered(i))
	}
	seen := make([]bool, frames)
	for _, i := range collect(t, b, frames) {
		if seen[i] {
			t.Fatalf("frame %d delivered twice", i)
		}
		seen[i] = true
	}
	s := newImpairSchedule(cfg)
	want := uint64(0)
	for range frames {
		if s.admit(t0, 60).reordered {
			want++
		}
	}
	if got := im.ImpairStats().Reordered; got != want || want == 0 {
		t.Errorf("%d frames reordered, schedule says %d", got, want)
	}
}

func TestImpairQueueLimitAndClose(t *testing.T) {
	a, b := NewMemPair(8)
	defer b.Close()
	im := NewImpair(a, ImpairConfig{Delay: time.Hour, QueueLimit: 5})
	for i := range 8 {
		if err := im.WriteFrame(numbered(i)); err != nil {
			t.Fatal(err)
		}
	}
	if st := im.ImpairStats(); st.Queued != 5 || st.Overflowed != 3 {
		t.Fatalf("impair stats %+v, want 5 queued and 3 overflowed", st)
	}
	if st := im.Stats(); st.TxDropped != 3 || st.TxFrames != 0 {
		t.Fatalf("stats %+v", st)
	}

	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-im.stopped:
	default:
		t.Fatal("delay line goroutine still running after Close")
	}
	if err := im.WriteFrame(numbered(9)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
	if err := a.WriteFrame(numbered(9)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("wrapped link still open after Close: %v", err)
	}
	if err := im.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

func TestImpairPassesReadsThrough(t *testing.T) {
	a, b := NewMemPair(4)
	defer b.Close()
	im := NewImpair(a, ImpairConfig{Loss: 1})
	defer im.Close()
	b.WriteFrame(numbered(7))
	if got := collect(t, im, 1); got[0] != 7 {
		t.Fatalf("read frame %d", got[0])
	}
	im.WriteFrame(numbered(8))
	if s := im.Stats(); s.TxDropped != 1 || s.RxFrames != 1 {
		t.Fatalf("stats %+v", s)
	}
}
