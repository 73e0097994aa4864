package queue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRingScript runs small scripts of operations: "+N" pushes N at the
// back, "<" pops the front, ">" pops the back, "g N" grows by N; want is
// what the pops return, in order, and final the values left front to back.
func TestRingScript(t *testing.T) {
	tests := []struct {
		name   string
		script []string
		want   []int
		final  []int
	}{
		{"fifo", []string{"+1", "+2", "+3", "<", "<", "<"}, []int{1, 2, 3}, nil},
		{"lifo", []string{"+1", "+2", "+3", ">", ">", ">"}, []int{3, 2, 1}, nil},
		{"mixed keeps the oldest in front", []string{"+1", "+2", "+3", ">", "+4", "<"}, []int{3, 1}, []int{2, 4}},
		{"wrap around", []string{"+1", "+2", "+3", "+4", "<", "<", "+5", "+6", "+7"}, []int{1, 2}, []int{3, 4, 5, 6, 7}},
		{"grow while wrapped", []string{"+1", "+2", "+3", "+4", "<", "+5", "+6", "+7", "+8", "+9", "<"}, []int{1, 2},
			[]int{3, 4, 5, 6, 7, 8, 9}},
		{"pop back across the seam", []string{"+1", "+2", "+3", "+4", "<", "<", "<", "+5", "+6", ">", ">", ">"}, []int{1, 2, 3, 6, 5, 4}, nil},
		{"grow up front", []string{"g 100", "+1", "+2", "<"}, []int{1}, []int{2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Ring[int]
			var got []int
			for _, op := range tc.script {
				var n int
				switch {
				case op == "<":
					got = append(got, r.PopFront())
				case op == ">":
					got = append(got, r.PopBack())
				case op[0] == 'g':
					fmt.Sscanf(op, "g %d", &n)
					r.Grow(n)
					if len(r.buf) < r.n+n {
						t.Fatalf("Grow(%d) left room for %d", n, len(r.buf)-r.n)
					}
				default:
					fmt.Sscanf(op, "+%d", &n)
					r.PushBack(n)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("popped %v, want %v", got, tc.want)
			}
			var rest []int
			for r.Len() > 0 {
				front, back := *r.Front(), *r.Back()
				if f := r.PopFront(); f != front {
					t.Fatalf("Front said %d, PopFront gave %d", front, f)
				}
				if r.Len() > 0 {
					if b := r.PopBack(); b != back {
						t.Fatalf("Back said %d, PopBack gave %d", back, b)
					}
					r.PushBack(back) // put it back: rest is read front to back
				}
				rest = append(rest, front)
			}
			if !slices.Equal(rest, tc.final) {
				t.Fatalf("left %v, want %v", rest, tc.final)
			}
		})
	}
}

// TestRingMatchesSlice drives a ring and a plain slice with the same
// random operations.
func TestRingMatchesSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var r Ring[int]
	var model []int
	for op := 0; op < 50000; op++ {
		switch k := rng.IntN(10); {
		case k < 5 || len(model) == 0:
			r.PushBack(op)
			model = append(model, op)
		case k < 8:
			if got := r.PopFront(); got != model[0] {
				t.Fatalf("op %d: PopFront %d, want %d", op, got, model[0])
			}
			model = model[1:]
		default:
			if got := r.PopBack(); got != model[len(model)-1] {
				t.Fatalf("op %d: PopBack %d, want %d", op, got, model[len(model)-1])
			}
			model = model[:len(model)-1]
		}
		if r.Len() != len(model) {
			t.Fatalf("op %d: Len %d, want %d", op, r.Len(), len(model))
		}
		if len(model) > 0 && (*r.Front() != model[0] || *r.Back() != model[len(model)-1]) {
			t.Fatalf("op %d: Front %d and Back %d, want %d and %d", op, *r.Front(), *r.Back(), model[0], model[len(model)-1])
		}
		if n := len(r.buf); n&(n-1) != 0 {
			t.Fatalf("op %d: storage of %d is not a power of two", op, n)
		}
	}
}

func TestRingReleasesPopped(t *testing.T) {
	var r Ring[*int]
	for range 6 {
		r.PushBack(new(int))
	}
	r.PopFront()
	r.PopBack()
	for i, p := range r.buf {
		inside := (i-r.head)&(len(r.buf)-1) < r.n
		if !inside && p != nil {
			t.Fatalf("slot %d outside the ring still points at a value", i)
		}
	}
}

func TestRingEmptyPanics(t *testing.T) {
	for name, f := range map[string]func(*Ring[int]){
		"Front":    func(r *Ring[int]) { r.Front() },
		"Back":     func(r *Ring[int]) { r.Back() },
		"PopFront": func(r *Ring[int]) { r.PopFront() },
		"PopBack":  func(r *Ring[int]) { r.PopBack() },
	} {
		t.Run(name, func(t *testing.T) {
			var r Ring[int]
			r.PushBack(1)
			r.PopFront() // storage exists, the ring is empty
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f(&r)
		})
	}
}

// TestRingDoesNotAllocate: at its working size a ring reuses its storage.
func TestRingDoesNotAllocate(t *testing.T) {
	var r Ring[[4]uint64]
	for range 100 {
		r.PushBack([4]uint64{})
	}
	popped := 0
	allocs := testing.AllocsPerRun(1000, func() {
		r.PushBack([4]uint64{1})
		r.PushBack([4]uint64{2})
		r.PopFront()
		r.PopBack()
		popped += 2
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per two pushes and pops", allocs)
	}
	if popped != 2002 || r.Len() != 100 {
		t.Fatalf("popped %d, %d left; want 2002 and 100", popped, r.Len())
	}
}

// waiter is the size of what the schedulers queue: a request with its
// strings, an enqueue time and a class.
type waiter struct {
	customer, host, path string
	id                   uint64
	at                   int64
	class                int32
}

// BenchmarkRing is one push at the back and one pop, at the front (FIFO)
// or the back (LIFO), on a ring holding n requests.
func BenchmarkRing(b *testing.B) {
	for _, n := range []int{8, 1000} {
		for _, lifo := range []bool{false, true} {
			b.Run(fmt.Sprintf("n=%d/lifo=%v", n, lifo), func(b *testing.B) {
				var r Ring[waiter]
				for i := range n {
					r.PushBack(waiter{id: uint64(i)})
				}
				i := uint64(0)
				b.ReportAllocs()
				for b.Loop() {
					i++
					r.PushBack(waiter{id: i, at: int64(i)})
					if lifo {
						r.PopBack()
					} else {
						r.PopFront()
					}
				}
			})
		}
	}
}

// Compact gives the memory of a past peak back and keeps the order.
func TestRingCompact(t *testing.T) {
	var r Ring[int]
	for i := range 10_000 {
		r.PushBack(i)
	}
	for range 9_990 {
		r.PopFront()
	}
	r.Compact()
	if r.Cap() > 16 || r.Len() != 10 {
		t.Fatalf("Cap %d, Len %d after Compact", r.Cap(), r.Len())
	}
	for i := 9_990; i < 10_000; i++ {
		if v := r.PopFront(); v != i {
			t.Fatalf("got %d, want %d", v, i)
		}
	}
}
