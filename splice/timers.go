package splice

import (
	"time"

	"github.com/qsplice/qsplice/internal/queue"
)

// deadlines is an engine's timer set: one current deadline per flow (or
// splice), keyed by its id, with lazy deletion. An entry is live only
// while the owner's current deadline still equals its when, so
// rescheduling is a push and never a search, and Tick skips the stale
// entries it pops. Owners that merely extend a deadline (an idle timer
// refreshed by every packet) do not push at all: when the old entry fires
// they see the later deadline and push again (see queue.Heap). Entries
// come out by time, and those due at the same time in the order they were
// pushed, so a replay that pushes the same entries gets the same order.
//
// Lanes. Most deadlines are the time of the push plus one of a few fixed
// spans: the head timeout (10 s), the handoff timeout (1 s), the linger
// (5 s), a delayed ACK (40 ms). Pushed in time order, the entries of one
// span come in the order they fall due, each a little after the last. So
// an entry goes at the back of a lane, a FIFO, whose last entry is due at
// most laneGap before it (the closest such), or else into an empty lane;
// only one that fits no lane goes into the heap. The gap keeps an odd
// entry (a deadline seconds past every lane's last) from taking a lane
// the entries of a span follow: they would move to another lane, whose
// own would move on in turn, and the last span would be left to the heap.
// The earliest entry is the earliest of the lanes' fronts and the heap's
// top. Under a load of short connections the heap held every flow's
// entry, 13,000 in the lab, and its sift-down was 2% of the front-end's
// CPU; a lane is a push and a pop with no sift.
//
// After a flood the lanes and the heap empty but their backing storage
// would keep the peak's size: popDue gives it back once it is mostly empty
// (shrinkSlack).
type deadlines struct {
	lanes [deadlineLanes]queue.Ring[deadlineEntry]
	// tails are the lanes' last entries' times (while not empty), which
	// every push compares.
	tails [deadlineLanes]Time
	h     queue.Heap[Time, deadlineEntry]
	// pushed counts the pushes: an entry's seq, which orders entries
	// due at the same time across the lanes and the heap.
	pushed uint64
}

// deadlineLanes is how many lanes there are: a few more than the spans a
// flow's deadlines usually take. laneGap is how far past a lane's last
// entry a new one may be to follow it: far more than the time between two
// connections' pushes of one span under load; at a rate so low that it is
// not, the heap is small anyway.
const (
	deadlineLanes = 8
	laneGap       = Time(100 * time.Millisecond)
)

type deadlineEntry struct {
	when Time
	seq  uint64
	key  uint64
}

// before orders entries by time, then by push.
func (a *deadlineEntry) before(b *deadlineEntry) bool {
	return a.when < b.when || a.when == b.when && a.seq < b.seq
}

// A backing store of at least shrinkMinCap entries is reallocated to its
// contents once they fill less than 1/shrinkSlack of it. Each
// reallocation copies at most cap/shrinkSlack entries and follows at least
// cap*(1-2/shrinkSlack) pops, so it costs O(1) per pop.
const (
	shrinkMinCap = 4096
	shrinkSlack  = 8
)

// push schedules key at when; Never schedules nothing.
func (d *deadlines) push(when Time, key uint64) {
	if when == Never {
		return
	}
	d.pushed++
	e := deadlineEntry{when: when, seq: d.pushed, key: key}
	fit, empty := -1, -1
	var fitGap Time
	for i := range d.lanes {
		if d.lanes[i].Len() == 0 {
			if empty < 0 {
				empty = i
			}
			continue
		}
		if gap := when - d.tails[i]; gap >= 0 && gap <= laneGap && (fit < 0 || gap < fitGap) {
			fit, fitGap = i, gap
		}
	}
	if fit < 0 {
		fit = empty
	}
	if fit >= 0 {
		d.lanes[fit].PushBack(e)
		d.tails[fit] = when
		return
	}
	d.h.Push(when, e)
}

// first returns the earliest entry and where it is: a lane's index, or
// -1 for the heap; ok is false when there is none.
func (d *deadlines) first() (e deadlineEntry, lane int, ok bool) {
	_, e, ok = d.h.Peek()
	lane = -1
	for i := range d.lanes {
		if d.lanes[i].Len() == 0 {
			continue
		}
		if f := d.lanes[i].Front(); !ok || f.before(&e) {
			e, lane, ok = *f, i, true
		}
	}
	return e, lane, ok
}

// next returns the earliest scheduled time (possibly stale), or Never.
func (d *deadlines) next() Time {
	if e, _, ok := d.first(); ok {
		return e.when
	}
	return Never
}

// popDue removes and returns one entry due at or before now.
func (d *deadlines) popDue(now Time) (deadlineEntry, bool) {
	e, lane, ok := d.first()
	if !ok || e.when > now {
		return deadlineEntry{}, false
	}
	if lane < 0 {
		_, got := d.h.Pop()
		if mostlyEmpty(d.h.Len(), d.h.Cap()) {
			d.h.Compact()
		}
		return got, true
	}
	l := &d.lanes[lane]
	got := l.PopFront()
	if mostlyEmpty(l.Len(), l.Cap()) {
		l.Compact()
	}
	return got, true
}

// mostlyEmpty reports whether a store of n entries in room for c is to
// be given back (shrinkSlack).
func mostlyEmpty(n, c int) bool { return c >= shrinkMinCap && n < c/shrinkSlack }

func (d *deadlines) len() int {
	n := d.h.Len()
	for i := range d.lanes {
		n += d.lanes[i].Len()
	}
	return n
}
