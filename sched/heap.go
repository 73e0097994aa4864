package sched

import "cmp"

// idHeap is a binary min-heap of small integer ids (customer indexes)
// ordered by a key, ties broken by the smaller id so the order never
// depends on insertion history. It remembers where each id sits, so an id
// can be re-keyed or removed in O(log n) without searching. Each id is in
// the heap at most once.
type idHeap[K cmp.Ordered] struct {
	items []heapItem[K]
	pos   []int32 // pos[id] is id's index in items, or -1 when absent
}

type heapItem[K cmp.Ordered] struct {
	key K
	id  int32
}

// reset empties the heap and sizes it for ids in [0, n).
func (h *idHeap[K]) reset(n int) {
	h.items = h.items[:0]
	if cap(h.pos) < n {
		h.pos = make([]int32, n)
	}
	h.pos = h.pos[:n]
	for i := range h.pos {
		h.pos[i] = -1
	}
}

func (h *idHeap[K]) len() int { return len(h.items) }

func (h *idHeap[K]) contains(id int32) bool { return h.pos[id] >= 0 }

// min returns the id with the smallest key; the heap must not be empty.
func (h *idHeap[K]) min() (int32, K) { return h.items[0].id, h.items[0].key }

// set inserts id with key, or moves it to key if it is already there.
func (h *idHeap[K]) set(id int32, key K) {
	if i := h.pos[id]; i >= 0 {
		old := h.items[i].key
		h.items[i].key = key
		if key < old {
			h.up(int(i))
		} else {
			h.down(int(i))
		}
		return
	}
	h.items = append(h.items, heapItem[K]{key: key, id: id})
	i := len(h.items) - 1
	h.pos[id] = int32(i)
	h.up(i)
}

// remove takes id out of the heap; absent ids are ignored.
func (h *idHeap[K]) remove(id int32) {
	i := int(h.pos[id])
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	h.swap(i, last)
	h.items = h.items[:last]
	h.pos[id] = -1
	if i < last {
		h.down(i)
		h.up(i)
	}
}

func (h *idHeap[K]) less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	return a.key < b.key || a.key == b.key && a.id < b.id
}

func (h *idHeap[K]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.pos[h.items[i].id] = int32(i)
	h.pos[h.items[j].id] = int32(j)
}

func (h *idHeap[K]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

func (h *idHeap[K]) down(i int) {
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
		h.swap(i, smallest)
		i = smallest
	}
}
