package splice

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestDeadlinesComeOutInOrder pushes deadlines the way the engines do (the
// time now plus one of a few spans, and now and then any time at all),
// pops the due ones as time goes on, and checks every pop against a plain
// sorted list: by time, then by push, whichever lane or the heap held the
// entry. next must always be the earliest time.
func TestDeadlinesComeOutInOrder(t *testing.T) {
	// The front-end's: a delayed ACK, the handoff timeout and three of
	// them, the linger, the head timeout, the idle timeout.
	spans := []time.Duration{40 * time.Millisecond, time.Second, 3 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}
	for _, seed := range []uint64{1, 2, 3, 4} {
		rng := rand.New(rand.NewPCG(seed, 7))
		var d deadlines
		var ref []deadlineEntry // what is scheduled, in order
		var seq uint64
		now := t0
		popped, pushes, toHeap := 0, 0, 0
		for step := range 20000 {
			now += Time(rng.IntN(int(2 * ms)))
			for range rng.IntN(4) {
				when := now.Add(spans[rng.IntN(len(spans))])
				if rng.IntN(10) == 0 {
					when = now + Time(rng.Int64N(int64(20*time.Second))) // any time
				}
				seq++
				before := d.h.Len()
				d.push(when, seq)
				pushes++
				if d.h.Len() > before {
					toHeap++
				}
				e := deadlineEntry{when: when, seq: seq, key: seq}
				i, _ := slices.BinarySearchFunc(ref, e, func(a, b deadlineEntry) int {
					if a.before(&b) {
						return -1
					}
					return 1
				})
				ref = slices.Insert(ref, i, e)
			}
			want := Never
			if len(ref) > 0 {
				want = ref[0].when
			}
			if got := d.next(); got != want {
				t.Fatalf("seed %d step %d: next %v, want %v", seed, step, got, want)
			}
			for len(ref) > 0 && ref[0].when <= now {
				got, ok := d.popDue(now)
				if !ok || got.key != ref[0].key || got.when != ref[0].when {
					t.Fatalf("seed %d step %d: popped %+v (%v), want %+v", seed, step, got, ok, ref[0])
				}
				ref = ref[1:]
				popped++
			}
			if got, ok := d.popDue(now); ok {
				t.Fatalf("seed %d step %d: popped %+v, nothing is due", seed, step, got)
			}
			if d.len() != len(ref) {
				t.Fatalf("seed %d step %d: %d entries, want %d", seed, step, d.len(), len(ref))
			}
		}
		if popped < 10000 {
			t.Fatalf("seed %d: only %d pops: the test did not exercise popDue", seed, popped)
		}
		// The spans' entries keep to lanes: the heap takes the odd ones,
		// and a few the odd ones pushed out of a lane.
		t.Logf("seed %d: %d of %d pushes to the heap", seed, toHeap, pushes)
		if toHeap > pushes/5 { // a tenth of them are odd
			t.Errorf("seed %d: %d of %d pushes went to the heap; the lanes should take the spans'", seed, toHeap, pushes)
		}
	}
}

// TestDeadlinesAtTheSameTimeInPushOrder: entries due at the same time
// come out in the order they were pushed, across lanes and the heap.
func TestDeadlinesAtTheSameTimeInPushOrder(t *testing.T) {
	var d deadlines
	at := t0 + 100*ms
	d.push(at, 1) // an empty lane
	d.push(at, 2) // its back
	// A later entry at that lane's back, and one in every other lane, far
	// enough apart to start each its own: the next entries at `at` fit
	// no lane and go into the heap.
	d.push(at+50*ms, 100)
	for i := 1; i < deadlineLanes; i++ {
		d.push(at+Time(i)*2*laneGap, uint64(100+i))
	}
	for k := uint64(3); k <= 5; k++ {
		d.push(at, k)
	}
	if d.h.Len() != 3 {
		t.Fatalf("%d entries in the heap, want 3: the test does not mix lanes and heap", d.h.Len())
	}
	for k := uint64(1); k <= 5; k++ {
		got, ok := d.popDue(at)
		if !ok || got.key != k {
			t.Fatalf("pop %d: key %d (%v), want %d", k, got.key, ok, k)
		}
	}
	if got, ok := d.popDue(at); ok {
		t.Fatalf("popped key %d, nothing else is due", got.key)
	}
}

// TestDeadlinesAllocateNothingOnceWarm: pushing and popping at a steady
// rate allocates nothing.
func TestDeadlinesAllocateNothingOnceWarm(t *testing.T) {
	var d deadlines
	now := t0
	step := func() {
		now += ms
		d.push(now.Add(time.Second), 1)
		d.push(now.Add(5*time.Second), 2)
		d.push(now+Time(now%7)*ms, 3) // some to the heap
		for {
			if _, ok := d.popDue(now); !ok {
				break
			}
		}
	}
	for range 10000 {
		step()
	}
	if allocs := testing.AllocsPerRun(1000, step); allocs != 0 {
		t.Errorf("%v allocations per step", allocs)
	}
}

func BenchmarkDeadlines(b *testing.B) {
	var d deadlines
	now := t0
	const live = 13000 // flows under the lab's short-connection load
	for i := range live {
		d.push(now.Add(5*time.Second)+Time(i), uint64(i))
	}
	b.ReportAllocs()
	for b.Loop() {
		now += 400 * Time(time.Microsecond)
		d.push(now.Add(5*time.Second), 1)
		d.push(now.Add(time.Second), 2)
		d.push(now.Add(10*time.Second), 3)
		for range 3 {
			if _, ok := d.popDue(now.Add(10 * time.Second)); !ok {
				b.Fatal("nothing due")
			}
		}
	}
}
