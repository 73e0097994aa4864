package rxmod

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice"
)

func ms(f float64) splice.Time { return splice.Time(f * float64(time.Millisecond)) }

// The front-end's table (frontend/moderate.go: pure ACKs steady, the rest
// urgent, one in four at most), moved here with the policy.
func TestModeratorHoldsOnlyForASteadyStream(t *testing.T) {
	cfg := Config{Window: time.Millisecond, MinSteady: 4, Batch: 8, MaxHold: 500 * time.Microsecond, UrgentShare: 4}
	steps := []struct {
		name           string
		at             splice.Time
		steady, urgent int           // observed at `at` (before asking)
		want           time.Duration // Hold(at) after observing
	}{
		{"nothing counted yet", ms(0), 0, 0, 0},
		// The open window [0, 1 ms) counts, over the 1.5 ms since an
		// (empty) window before it: 8 of 20 would take 0.6 ms, capped.
		{"first window still open", ms(0.5), 20, 0, 500 * time.Microsecond},
		// Window [0, 1 ms) closed with 20: 8 of them take 0.4 ms.
		{"20 in the last window", ms(1), 0, 0, 400 * time.Microsecond},
		// Window [1, 2 ms): 10 would take 0.8 ms for 8: capped.
		{"10: capped at MaxHold", ms(2), 10, 0, 500 * time.Microsecond},
		// Window [2, 3 ms): 3 are too thin a stream.
		{"3: below MinSteady", ms(3), 3, 0, 0},
		// Window [3, 4 ms): 32 and 8 urgent (8*4 = 32, not above): 0.25 ms.
		{"8 urgent in 32", ms(4), 32, 8, 250 * time.Microsecond},
		// Window [4, 5 ms): 31 and 8 urgent: short connections, never held.
		{"8 urgent in 31", ms(5), 31, 8, 0},
		{"40", ms(6), 40, 0, 200 * time.Microsecond},
		// The loop slept from 6 ms to 8 ms: the window [6, 7) had no pass in it.
		{"a whole window without a pass", ms(8), 0, 0, 0},
		// The stream resumes: 30 in the open window's first 0.5 ms,
		// 1.5 ms counted: 8 of them take 0.4 ms.
		{"a stream resuming after a pause", ms(8.5), 30, 0, 400 * time.Microsecond},
	}
	m := New(cfg)
	for _, st := range steps {
		// Counts of a pass just before st.at belong to the window open then.
		if st.steady+st.urgent > 0 {
			m.Observe(st.at-1, st.steady, st.urgent)
		}
		if got := m.Hold(st.at); got != st.want {
			t.Errorf("%s: Hold(%v) = %v, want %v", st.name, time.Duration(st.at), got, st.want)
		}
	}
}

func TestModeratorOffNeverHolds(t *testing.T) {
	var m Moderator // zero value: MaxHold 0
	for i := range 10 {
		m.Observe(ms(float64(i)), 1000, 0)
	}
	if got := m.Hold(ms(10)); got != 0 {
		t.Fatalf("moderation off: Hold = %v, want 0", got)
	}
}

// NotAfterUrgent: a pass that saw an urgent frame is not followed by a
// hold, however steady the stream around it; the next pass without one
// may hold again. Quiet: no hold for Config.Quiet after the call.
func TestModeratorNotAfterUrgentAndQuiet(t *testing.T) {
	cfg := Config{Window: time.Millisecond, MinSteady: 4, Batch: 4, MaxHold: time.Millisecond, UrgentShare: 4,
		NotAfterUrgent: true, Quiet: 300 * time.Microsecond}
	m := New(cfg)
	now := splice.Time(0)
	step := func() { now += splice.Time(100 * time.Microsecond) }
	for range 20 { // a steady stream: 4 per 100 us
		step()
		m.Observe(now, 4, 0)
	}
	// 4 at 40 per ms take 100 us; the counted span starts at a window's
	// edge, so a little less.
	if got := m.Hold(now); got < 80*time.Microsecond || got > 100*time.Microsecond {
		t.Fatalf("steady stream: Hold = %v, want about 100us (4 at 40 per ms)", got)
	}
	step()
	m.Observe(now, 4, 1) // a SYN among them
	if got := m.Hold(now); got != 0 {
		t.Fatalf("after a pass with an urgent frame: Hold = %v, want 0", got)
	}
	step()
	m.Observe(now, 4, 0)
	if got := m.Hold(now); got == 0 {
		t.Fatal("the pass after that, without one: Hold = 0, want a hold again")
	}
	m.Quiet(now)
	for i := range 3 {
		if got := m.Hold(now); got != 0 {
			t.Fatalf("%d00 us after Quiet: Hold = %v, want 0", i, got)
		}
		step()
		m.Observe(now, 4, 0)
	}
	if got := m.Hold(now); got == 0 {
		t.Fatal("300 us after Quiet: Hold = 0, want a hold again")
	}
	// Without NotAfterUrgent the stream holds right after an urgent pass.
	cfg.NotAfterUrgent = false
	m = New(cfg)
	m.Observe(ms(0.5), 40, 1)
	if got := m.Hold(ms(0.5)); got == 0 {
		t.Fatal("NotAfterUrgent off: Hold = 0 after one urgent frame in 40, want a hold")
	}
}

// Whatever the rate, a hold never exceeds MaxHold, and a stream too thin
// never holds.
func TestModeratorHoldIsBounded(t *testing.T) {
	cfg := Config{Window: 2 * time.Millisecond, MinSteady: 8, Batch: 6, MaxHold: 150 * time.Microsecond, UrgentShare: 8}
	for _, perWindow := range []int{0, 1, 7, 8, 9, 20, 60, 1000, 100000} {
		m := New(cfg)
		m.Observe(ms(0), perWindow, 0)
		m.Observe(ms(2), 0, 0)
		got := m.Hold(ms(2))
		if got > cfg.MaxHold || got < 0 {
			t.Errorf("%d per window: Hold = %v, outside [0, %v]", perWindow, got, cfg.MaxHold)
		}
		if (perWindow < cfg.MinSteady) != (got == 0) {
			t.Errorf("%d per window (MinSteady %d): Hold = %v", perWindow, cfg.MinSteady, got)
		}
	}
}

func TestModeratorDoesNotAllocate(t *testing.T) {
	m := New(Config{Window: time.Millisecond, MinSteady: 1, Batch: 4, MaxHold: time.Millisecond})
	now, holds := splice.Time(0), 0
	allocs := testing.AllocsPerRun(1000, func() {
		now += splice.Time(50 * time.Microsecond)
		m.Observe(now, 2, 0)
		if m.Hold(now) > 0 {
			holds++
		}
	})
	if holds == 0 || allocs != 0 {
		t.Fatalf("%v allocations per pass, %d holds; want 0 allocations and the holding path run", allocs, holds)
	}
}

// Joint, for one loop serving several moderators' frames (the front-end's
// gathered shards): a stream split between two moderators holds as one
// moderator seeing all of it would, although neither half would hold on
// its own; an idle moderator does not stand in the way; one that may not
// hold (its last pass saw an urgent frame) rules the hold out; urgent
// frames count across moderators.
func TestJointHoldsForTheSumOfTheStreams(t *testing.T) {
	cfg := Config{Window: time.Millisecond, MinSteady: 12, Batch: 8, MaxHold: 2 * time.Millisecond, UrgentShare: 4, NotAfterUrgent: true}
	whole, a, b, idle := New(cfg), New(cfg), New(cfg), New(cfg)
	for i := range 4 {
		at := ms(0.25 * float64(i))
		whole.Observe(at, 4, 0)
		a.Observe(at, 2, 0)
		b.Observe(at, 2, 0)
		idle.Observe(at, 0, 0)
	}
	at := ms(1.1)
	want := whole.Hold(at)
	if want == 0 {
		t.Fatal("the whole stream does not hold; the test needs it to")
	}
	if a.Hold(at) != 0 || b.Hold(at) != 0 {
		t.Fatalf("each half holds on its own (%v, %v); the test needs them not to", a.Hold(at), b.Hold(at))
	}
	if got := Joint(at, []*Moderator{&a, &b}); got != want {
		t.Errorf("Joint of the two halves = %v, want the whole stream's %v", got, want)
	}
	if got := Joint(at, []*Moderator{&a, &b, &idle}); got != want {
		t.Errorf("Joint with an idle moderator = %v, want %v", got, want)
	}
	if got := Joint(at, nil); got != 0 {
		t.Errorf("Joint of none = %v, want 0", got)
	}
	if got := Joint(at, []*Moderator{&idle}); got != 0 {
		t.Errorf("Joint of an idle moderator = %v, want 0", got)
	}
	urgent := New(cfg)
	urgent.Observe(at, 0, 1) // its last pass saw an urgent frame
	if got := Joint(at, []*Moderator{&a, &b, &urgent}); got != 0 {
		t.Errorf("Joint with a moderator just past an urgent frame = %v, want 0", got)
	}
	urgent.Observe(at, 0, 0)
	// Its one urgent frame against 16 steady ones: within UrgentShare.
	if got := Joint(at, []*Moderator{&a, &b, &urgent}); got == 0 {
		t.Error("one urgent frame in seventeen ruled the hold out")
	}
	urgent.Observe(at, 0, 4)
	urgent.Observe(at, 0, 0)
	// Five urgent frames against 16 steady ones: over the share.
	if got := Joint(at, []*Moderator{&a, &b, &urgent}); got != 0 {
		t.Errorf("five urgent frames in twenty-one: Joint = %v, want 0", got)
	}
}
