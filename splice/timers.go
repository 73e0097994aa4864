package splice

// deadlines is a min-heap of (when, key) with lazy deletion: an entry is
// live only while the owner's current deadline still equals when, so
// rescheduling is a push and never a search. Owners that merely extend a
// deadline (an idle timer refreshed by every packet) do not push at all:
// when the old entry fires they see the later deadline and push again.
// Typed by hand rather than container/heap, whose interface boxes every
// entry into an allocation.
type deadlines struct{ h []deadlineEntry }

type deadlineEntry struct {
	when Time
	key  uint64
}

func (d *deadlines) push(when Time, key uint64) {
	if when == Never {
		return
	}
	d.h = append(d.h, deadlineEntry{when, key})
	i := len(d.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if d.h[p].when <= d.h[i].when {
			break
		}
		d.h[p], d.h[i] = d.h[i], d.h[p]
		i = p
	}
}

// next returns the earliest scheduled time (possibly stale), or Never.
func (d *deadlines) next() Time {
	if len(d.h) == 0 {
		return Never
	}
	return d.h[0].when
}

// popDue removes and returns one entry due at or before now.
func (d *deadlines) popDue(now Time) (deadlineEntry, bool) {
	if len(d.h) == 0 || d.h[0].when > now {
		return deadlineEntry{}, false
	}
	top := d.h[0]
	last := len(d.h) - 1
	d.h[0] = d.h[last]
	d.h = d.h[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && d.h[l].when < d.h[m].when {
			m = l
		}
		if r < last && d.h[r].when < d.h[m].when {
			m = r
		}
		if m == i {
			break
		}
		d.h[m], d.h[i] = d.h[i], d.h[m]
		i = m
	}
	return top, true
}

func (d *deadlines) len() int { return len(d.h) }
