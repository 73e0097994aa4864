package queue

import "cmp"

// Heap is a binary min-heap of values ordered by key. Values pushed with
// equal keys come out in the order they were pushed, so the order never
// depends on the heap's internals: a simulation or a replay that pushes
// the same values gets them back in the same order. The zero Heap is
// empty and ready to use. Float keys must not be NaN.
//
// # Deadlines with lazy deletion
//
// A set of timers, one current deadline per owner, is a Heap of (deadline,
// owner key) used this way: rescheduling pushes a new entry and leaves the
// old one where it is, so it never searches the heap. The owner remembers
// its current deadline; an entry that PopDue hands out is live only if its
// key still equals that deadline, and is skipped otherwise. An owner that
// merely postpones its deadline (an idle timer that every packet moves
// later) need not push at all: when its earlier entry comes due it finds
// the later deadline and pushes that. Stale entries cost one pop each.
type Heap[K cmp.Ordered, V any] struct {
	items  []heapItem[K, V]
	pushed uint64 // pushes so far: the order that breaks ties
}

type heapItem[K cmp.Ordered, V any] struct {
	key K
	seq uint64
	val V
}

// Len is the number of values in the heap.
func (h *Heap[K, V]) Len() int { return len(h.items) }

// Push adds v with key.
func (h *Heap[K, V]) Push(key K, v V) {
	h.pushed++
	h.items = append(h.items, heapItem[K, V]{key, h.pushed, v})
	h.up(len(h.items) - 1)
}

// Peek returns the value with the smallest key without removing it;
// ok is false when the heap is empty.
func (h *Heap[K, V]) Peek() (key K, v V, ok bool) {
	if len(h.items) == 0 {
		return key, v, false
	}
	return h.items[0].key, h.items[0].val, true
}

// Pop removes and returns the value with the smallest key. The heap must
// not be empty.
func (h *Heap[K, V]) Pop() (K, V) {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items[last] = heapItem[K, V]{} // let what the value points to be collected
	h.items = h.items[:last]
	h.down(0)
	return top.key, top.val
}

// PopDue removes and returns the value with the smallest key if that key
// is at or before limit; ok is false when none is.
func (h *Heap[K, V]) PopDue(limit K) (key K, v V, ok bool) {
	if len(h.items) == 0 || h.items[0].key > limit {
		return key, v, false
	}
	key, v = h.Pop()
	return key, v, true
}

func (h *Heap[K, V]) less(i, j int) bool {
	a, b := &h.items[i], &h.items[j]
	return a.key < b.key || a.key == b.key && a.seq < b.seq
}

func (h *Heap[K, V]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

func (h *Heap[K, V]) down(i int) {
	n := len(h.items)
	for {
		smallest := i
		if l := 2*i + 1; l < n && h.less(l, smallest) {
			smallest = l
		}
		if r := 2*i + 2; r < n && h.less(r, smallest) {
			smallest = r
		}
		if smallest == i {
			return
		}
		h.items[i], h.items[smallest] = h.items[smallest], h.items[i]
		i = smallest
	}
}

// Cap is the capacity of the heap's backing slice.
func (h *Heap[K, V]) Cap() int { return cap(h.items) }

// Compact moves the values into a backing slice of their own size, so
// the memory of a peak that has passed goes back to the garbage
// collector (a slice never shrinks by itself). It costs a copy of the
// values; callers do it when the heap is far below its capacity, which
// keeps the cost amortised over the pops that emptied it.
func (h *Heap[K, V]) Compact() {
	h.items = append([]heapItem[K, V](nil), h.items...)
}
