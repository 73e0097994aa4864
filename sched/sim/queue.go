package sim

// Queue is the event list of a discrete-event simulation: a binary
// min-heap of values by virtual time. Values due at the same instant come
// out in the order they were pushed, so a run never depends on heap
// internals and stays deterministic. Other simulators (tools/experiment)
// use it too.
type Queue[T any] struct {
	items []queued[T]
	seq   uint64
}

type queued[T any] struct {
	at  int64
	seq uint64
	v   T
}

// Len is the number of pending values.
func (q *Queue[T]) Len() int { return len(q.items) }

// Push schedules v at virtual time at (nanoseconds).
func (q *Queue[T]) Push(at int64, v T) {
	q.seq++
	q.items = append(q.items, queued[T]{at, q.seq, v})
	for i := len(q.items) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q.items[i], q.items[parent] = q.items[parent], q.items[i]
		i = parent
	}
}

// Pop removes and returns the earliest value; the queue must not be empty.
func (q *Queue[T]) Pop() (int64, T) {
	first := q.items[0]
	last := len(q.items) - 1
	q.items[0] = q.items[last]
	q.items[last] = queued[T]{}
	q.items = q.items[:last]
	for i := 0; ; {
		smallest := i
		if l := 2*i + 1; l < last && q.less(l, smallest) {
			smallest = l
		}
		if r := 2*i + 2; r < last && q.less(r, smallest) {
			smallest = r
		}
		if smallest == i {
			break
		}
		q.items[i], q.items[smallest] = q.items[smallest], q.items[i]
		i = smallest
	}
	return first.at, first.v
}

func (q *Queue[T]) less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}
