package queue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHeapOrder(t *testing.T) {
	type kv struct {
		key int64
		val string
	}
	tests := []struct {
		name string
		push []kv
		want []string
	}{
		{"empty", nil, nil},
		{"one", []kv{{5, "a"}}, []string{"a"}},
		{"ascending", []kv{{1, "a"}, {2, "b"}, {3, "c"}}, []string{"a", "b", "c"}},
		{"descending", []kv{{3, "c"}, {2, "b"}, {1, "a"}}, []string{"a", "b", "c"}},
		{"ties in push order", []kv{{7, "a"}, {7, "b"}, {7, "c"}, {7, "d"}, {7, "e"}}, []string{"a", "b", "c", "d", "e"}},
		{"ties among others", []kv{{9, "z"}, {2, "a1"}, {5, "m"}, {2, "a2"}, {-1, "neg"}, {2, "a3"}},
			[]string{"neg", "a1", "a2", "a3", "m", "z"}},
		{"extreme keys", []kv{{1<<63 - 1, "never"}, {-1 << 63, "min"}, {0, "zero"}}, []string{"min", "zero", "never"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h Heap[int64, string]
			for _, p := range tc.push {
				h.Push(p.key, p.val)
			}
			if h.Len() != len(tc.push) {
				t.Fatalf("Len %d after %d pushes", h.Len(), len(tc.push))
			}
			var got []string
			for h.Len() > 0 {
				pk, pv, _ := h.Peek()
				k, v := h.Pop()
				if k != pk || v != pv {
					t.Fatalf("Peek said (%d, %q), Pop gave (%d, %q)", pk, pv, k, v)
				}
				got = append(got, v)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("popped %q, want %q", got, tc.want)
			}
			if _, _, ok := h.Peek(); ok {
				t.Fatal("Peek on an empty heap reported a value")
			}
		})
	}
}

func TestHeapPopDue(t *testing.T) {
	var h Heap[int64, int]
	for _, k := range []int64{30, 10, 20, 10} {
		h.Push(k, int(k))
	}
	steps := []struct {
		limit   int64
		wantKey int64
		wantOK  bool
	}{
		{9, 0, false},
		{10, 10, true},
		{10, 10, true},
		{10, 0, false},
		{25, 20, true},
		{25, 0, false},
		{1 << 62, 30, true},
		{1 << 62, 0, false}, // empty
	}
	for i, s := range steps {
		k, v, ok := h.PopDue(s.limit)
		if ok != s.wantOK || ok && (k != s.wantKey || v != int(k)) {
			t.Fatalf("step %d: PopDue(%d) = (%d, %d, %v), want (%d, _, %v)", i, s.limit, k, v, ok, s.wantKey, s.wantOK)
		}
	}
}

// TestHeapMatchesSort drives the heap with random pushes and pops and
// checks every pop against a stable sort of what is in it.
func TestHeapMatchesSort(t *testing.T) {
	type entry struct {
		key float64
		id  int
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var h Heap[float64, int]
	var model []entry // in push order
	next := 0
	for op := 0; op < 20000; op++ {
		if rng.IntN(3) > 0 || len(model) == 0 {
			k := float64(rng.IntN(50)) // few distinct keys: many ties
			h.Push(k, next)
			model = append(model, entry{k, next})
			next++
			continue
		}
		best := 0 // the first pushed among the smallest keys
		for i, e := range model {
			if e.key < model[best].key {
				best = i
			}
		}
		k, id := h.Pop()
		if k != model[best].key || id != model[best].id {
			t.Fatalf("op %d: popped (%v, %d), want (%v, %d)", op, k, id, model[best].key, model[best].id)
		}
		model = slices.Delete(model, best, best+1)
		if h.Len() != len(model) {
			t.Fatalf("op %d: Len %d, want %d", op, h.Len(), len(model))
		}
	}
}

func TestHeapReleasesPopped(t *testing.T) {
	var h Heap[int, *int]
	for i := range 8 {
		h.Push(i, new(int))
	}
	h.Pop()
	h.Pop()
	for _, it := range h.items[len(h.items):cap(h.items)] {
		if it.val != nil {
			t.Fatal("a popped slot still points at its value")
		}
	}
}

// TestHeapDoesNotAllocate: once the heap has held its working size,
// pushing and popping allocate nothing. The counter proves the loop ran.
func TestHeapDoesNotAllocate(t *testing.T) {
	var h Heap[int64, uint64]
	for i := range 1024 {
		h.Push(int64(i*7919%1024), uint64(i))
	}
	popped := 0
	now := int64(1024)
	allocs := testing.AllocsPerRun(1000, func() {
		now++
		h.Push(now, uint64(now))
		if _, _, ok := h.PopDue(now); ok {
			popped++
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per push and pop", allocs)
	}
	if popped != 1001 {
		t.Fatalf("popped %d times, want 1001 (AllocsPerRun runs the function once more to warm up)", popped)
	}
}

// BenchmarkHeap is one push and one pop on a heap holding n deadlines,
// the shape of the engines' timers and the simulators' event lists: a new
// deadline a little after the ones already due.
func BenchmarkHeap(b *testing.B) {
	for _, n := range []int{16, 1024, 65536} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var h Heap[int64, uint64]
			rng := rand.New(rand.NewPCG(3, 4))
			for i := range n {
				h.Push(rng.Int64N(int64(n)), uint64(i))
			}
			now := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				now++
				h.Push(now+rng.Int64N(int64(n)), uint64(now))
				h.Pop()
			}
		})
	}
}

// Compact gives the memory of a past peak back and keeps the order.
func TestHeapCompact(t *testing.T) {
	var h Heap[int, int]
	for i := 10_000; i > 0; i-- {
		h.Push(i%100, i)
	}
	for h.Len() > 100 {
		h.Pop()
	}
	if h.Cap() < 10_000 {
		t.Fatalf("Cap %d before Compact", h.Cap())
	}
	h.Compact()
	if h.Cap() >= 200 || h.Len() != 100 {
		t.Fatalf("Cap %d, Len %d after Compact", h.Cap(), h.Len())
	}
	prev := -1
	for h.Len() > 0 {
		k, _ := h.Pop()
		if k < prev {
			t.Fatalf("key %d after %d", k, prev)
		}
		prev = k
	}
}
