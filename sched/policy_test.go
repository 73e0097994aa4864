package sched

import (
	"errors"
	"testing"
)

func TestFIFOOrderAndWrap(t *testing.T) {
	q := NewFIFO(3)
	next := RequestID(1) // id of the next request to enqueue
	want := RequestID(1) // id Next should return
	// Enqueue and dequeue in uneven steps so the ring wraps several times.
	for round, step := range []struct{ in, out int }{{3, 2}, {2, 3}, {1, 0}, {2, 1}, {0, 2}, {3, 3}} {
		for range step.in {
			if err := q.Enqueue(Request{ID: next, Customer: "c"}, int64(next)); err != nil {
				t.Fatalf("round %d: Enqueue(%d): %v", round, next, err)
			}
			next++
		}
		for range step.out {
			r, ok := q.Next(0)
			if !ok || r.ID != want {
				t.Fatalf("round %d: Next = %d, %v, want %d", round, r.ID, ok, want)
			}
			want++
		}
		if q.Len() != int(next-want) {
			t.Fatalf("round %d: Len %d, want %d", round, q.Len(), next-want)
		}
	}
	if r, ok := q.Next(0); ok {
		t.Fatalf("empty queue returned %+v", r)
	}
}

func TestFIFOFull(t *testing.T) {
	q := NewFIFO(2)
	for i := range 2 {
		if err := q.Enqueue(Request{ID: RequestID(i)}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Enqueue(Request{ID: 9}, 0); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third Enqueue into capacity 2: %v, want ErrQueueFull", err)
	}
	if q.Len() != 2 {
		t.Fatalf("Len %d after a refused Enqueue", q.Len())
	}
	q.Next(0)
	if err := q.Enqueue(Request{ID: 9}, 0); err != nil {
		t.Fatalf("Enqueue after Next made room: %v", err)
	}
	if err := NewFIFO(0).Enqueue(Request{}, 0); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("capacity 0 accepted a request: %v", err)
	}
}

func TestFIFODoesNotAllocate(t *testing.T) {
	q := NewFIFO(8)
	r := Request{ID: 1, Customer: "gold", Host: "shop.example", Path: "/cart", Port: 80}
	allocs := testing.AllocsPerRun(1000, func() {
		_ = q.Enqueue(r, 0)
		q.Next(0)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Enqueue+Next", allocs)
	}
}

// A FIFO with a queue timeout gives up requests that waited longer,
// oldest first, and says when the next will; without one it keeps them.
func TestFIFOQueueTimeoutExpiresWaitingRequests(t *testing.T) {
	const timeout = 10_000 // ns
	q := NewFIFOWithTimeout(8, timeout)
	for i := range 3 {
		if err := q.Enqueue(Request{ID: RequestID(i + 1)}, int64(i)*1000); err != nil {
			t.Fatal(err)
		}
	}
	if at, ok := q.NextExpiry(); !ok || at != timeout+1 {
		t.Fatalf("NextExpiry = %d, %v, want %d", at, ok, timeout+1)
	}
	var expired []RequestID
	collect := func(r Request) { expired = append(expired, r.ID) }
	q.Expire(timeout, collect)
	if len(expired) != 0 {
		t.Fatalf("expired %v at exactly the timeout", expired)
	}
	q.Expire(timeout+1001, collect)
	if len(expired) != 2 || expired[0] != 1 || expired[1] != 2 || q.Len() != 1 {
		t.Fatalf("expired %v, %d left; want 1 and 2 expired, 1 left", expired, q.Len())
	}
	if r, ok := q.Next(0); !ok || r.ID != 3 {
		t.Fatalf("Next = %d, %v", r.ID, ok)
	}
	if _, ok := q.NextExpiry(); ok {
		t.Errorf("NextExpiry on an empty queue")
	}

	plain := NewFIFO(8)
	plain.Enqueue(Request{ID: 1}, 0)
	plain.Expire(1<<62, collect)
	if plain.Len() != 1 {
		t.Errorf("a FIFO without a timeout expired its request")
	}
	if n := testing.AllocsPerRun(100, func() {
		q.Enqueue(Request{ID: 9}, 1<<40)
		q.Expire(1<<41, func(Request) {})
	}); n != 0 {
		t.Errorf("%v allocations per enqueue and expiry", n)
	}
}
