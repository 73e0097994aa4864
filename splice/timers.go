package splice

import "github.com/qsplice/qsplice/internal/queue"

// deadlines is an engine's timer set: one current deadline per flow (or
// splice), keyed by its id, in a min-heap with lazy deletion. An entry is
// live only while the owner's current deadline still equals its when, so
// rescheduling is a push and never a search, and Tick skips the stale
// entries it pops. Owners that merely extend a deadline (an idle timer
// refreshed by every packet) do not push at all: when the old entry fires
// they see the later deadline and push again (see queue.Heap). Entries
// due at the same time come out in the order they were pushed.
//
// After a flood the heap empties but its backing slice would keep the
// peak's size: popDue gives it back once it is mostly empty (shrinkSlack).
type deadlines struct{ h queue.Heap[Time, uint64] }

type deadlineEntry struct {
	when Time
	key  uint64
}

// A backing slice of at least shrinkMinCap entries (24 bytes each) is
// reallocated to its contents once they fill less than 1/shrinkSlack of
// it. Each reallocation copies at most cap/shrinkSlack entries and follows
// at least cap*(1-2/shrinkSlack) pops, so it costs O(1) per pop.
const (
	shrinkMinCap = 4096
	shrinkSlack  = 8
)

// push schedules key at when; Never schedules nothing.
func (d *deadlines) push(when Time, key uint64) {
	if when == Never {
		return
	}
	d.h.Push(when, key)
}

// next returns the earliest scheduled time (possibly stale), or Never.
func (d *deadlines) next() Time {
	if when, _, ok := d.h.Peek(); ok {
		return when
	}
	return Never
}

// popDue removes and returns one entry due at or before now.
func (d *deadlines) popDue(now Time) (deadlineEntry, bool) {
	when, key, ok := d.h.PopDue(now)
	if ok && d.h.Cap() >= shrinkMinCap && d.h.Len() < d.h.Cap()/shrinkSlack {
		d.h.Compact()
	}
	return deadlineEntry{when, key}, ok
}

func (d *deadlines) len() int { return d.h.Len() }
