package sched

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCreditReconfigureKeepsState(t *testing.T) {
	s := newCreditT(t, CreditConfig{Customers: []CustomerSpec{
		{Name: "a", Reservation: 100}, {Name: "b", Reservation: 100}, {Name: "shrinks", Reservation: 100},
	}})
	var id RequestID
	enqueueN(t, s, "a", 3, 0, &id)
	enqueueN(t, s, "b", 2, 0, &id)
	if r := next(t, s, 0); r.Customer != "a" {
		t.Fatalf("first dispatch to %s, want a", r.Customer)
	}
	before := s.Snapshot(5 * ms)
	bad := CreditConfig{Customers: []CustomerSpec{{Name: "a", Weight: -2}}}
	if err := s.Reconfigure(bad, 5*ms); err == nil {
		t.Fatal("Reconfigure accepted a negative weight")
	}
	if after := s.Snapshot(5 * ms); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused Reconfigure changed state:\n%+v\n%+v", before, after)
	}

	err := s.Reconfigure(CreditConfig{Customers: []CustomerSpec{
		{Name: "c", Reservation: 100}, {Name: "a", Reservation: 200}, {Name: "shrinks", Reservation: 20},
	}}, 5*ms)
	if err != nil {
		t.Fatal(err)
	}
	if i, ok := s.CustomerIndex("a"); !ok || i != 1 {
		t.Fatalf("CustomerIndex(a) = %d, %v after Reconfigure, want 1", i, ok)
	}
	if _, ok := s.CustomerIndex("b"); ok {
		t.Fatal("removed customer b still has an index")
	}
	a := state(t, s, "a", 5*ms)
	if a.Balance != 9 || a.Queued != 2 || a.Dispatched != 1 || a.Offered != 3 {
		t.Fatalf("a after Reconfigure: %+v, want balance 9, 2 queued, counters kept", a)
	}
	wantBalance(t, s, "c", 5*ms, 10)      // new: full, 100/s x 100 ms
	wantBalance(t, s, "shrinks", 5*ms, 2) // 10 clamped to 20/s x 100 ms
	wantBalance(t, s, "a", 10*ms, 11)     // credited at the new rate
	if b := state(t, s, "b", 5*ms); !b.Retired || b.Queued != 2 || b.Offered != 2 {
		t.Fatalf("b after removal: %+v, want retired with its 2 requests", b)
	}
	if err := s.Enqueue(Request{Customer: "b"}, 5*ms); err != ErrUnknownCustomer {
		t.Fatalf("Enqueue for a removed customer: %v", err)
	}
	var served strings.Builder
	for s.Len() > 0 {
		served.WriteString(next(t, s, 5*ms).Customer)
	}
	if served.String() != "aabb" {
		t.Fatalf("served %s, want a's two (credit) before retired b's two (spare)", served.String())
	}
	if err := s.Reconfigure(CreditConfig{Customers: []CustomerSpec{{Name: "a", Reservation: 200}}}, 6*ms); err != nil {
		t.Fatal(err)
	}
	if names := len(s.Snapshot(6 * ms)); names != 1 {
		t.Fatalf("%d customers after the second Reconfigure, want 1: drained b forgotten", names)
	}
}

// checkInvariants verifies that the indexes agree with the customers'
// queues and balances.
func checkInvariants(t *testing.T, s *Credit, step int) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d: "+format, append([]any{step}, args...)...)
	}
	waiting, inRing := 0, 0
	for i := range s.customers {
		c := &s.customers[i]
		id := int32(i)
		waiting += c.queue.Len()
		if c.balance > c.maxBalance+1e-9 || c.balance < c.minBalance-1e-9 {
			fail("%s balance %v outside [%v, %v]", c.spec.Name, c.balance, c.minBalance, c.maxBalance)
		}
		if c.inRing {
			inRing++
		}
		inSpare, inTurn := s.spare.contains(id), s.turn.contains(id)
		switch {
		case c.queue.Len() == 0:
			if c.inRing || inSpare || inTurn || s.expiry.contains(id) {
				fail("%s has nothing waiting but is indexed", c.spec.Name)
			}
		case c.inRing == inSpare:
			fail("%s waits: in ring %v, in spare heap %v; want exactly one", c.spec.Name, c.inRing, inSpare)
		case c.inRing && c.balance <= 0:
			fail("%s in the ring with balance %v", c.spec.Name, c.balance)
		case inSpare && c.balance > 0:
			fail("%s in the spare heap with balance %v", c.spec.Name, c.balance)
		case inSpare && c.perCycle > 0 && !inTurn:
			fail("%s has a reservation but no turn entry", c.spec.Name)
		case s.cfg.QueueTimeout > 0 && !s.expiry.contains(id):
			fail("%s waits but has no expiry entry", c.spec.Name)
		}
	}
	if waiting != s.Len() {
		fail("Len %d, queues hold %d", s.Len(), waiting)
	}
	walked := 0
	for i := s.ringHead; i >= 0 && walked <= inRing; {
		walked++
		if n := s.customers[i].next; s.customers[n].prev != i {
			fail("ring links broken at %d", i)
		} else if i = n; i == s.ringHead {
			break
		}
	}
	if walked != inRing {
		fail("ring walk found %d customers, %d flagged", walked, inRing)
	}
}

// randomRun drives a Credit with a seeded mix of every operation, checking
// the invariants after each, and returns a trace of every answer.
func randomRun(t *testing.T, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 1))
	specs := make([]CustomerSpec, 12)
	for i := range specs {
		specs[i] = CustomerSpec{Name: fmt.Sprintf("c%d", i), Reservation: float64(rng.IntN(4) * 50),
			Weight: float64(1 + rng.IntN(3)), QueueCap: 1 + rng.IntN(6)}
		if rng.IntN(4) == 0 {
			specs[i].Cap = specs[i].Reservation + 20
		}
	}
	cfg := CreditConfig{Customers: specs, QueueTimeout: 40 * time.Millisecond, Default: "c0"}
	s := newCreditT(t, cfg)
	var trace strings.Builder
	now := int64(0)
	for step := range 4000 {
		now += rng.Int64N(3 * ms)
		name := fmt.Sprintf("c%d", rng.IntN(14)) // c12, c13 are unknown
		switch op := rng.IntN(20); {
		case op < 8:
			err := s.Enqueue(Request{ID: RequestID(step), Customer: name}, now)
			fmt.Fprintf(&trace, "E%d:%v ", step, err)
		case op < 14:
			r, ok := s.Next(now)
			fmt.Fprintf(&trace, "N%d:%v ", r.ID, ok)
		case op < 17:
			s.Complete(name, time.Duration(rng.Int64N(int64(80*time.Millisecond))))
		case op < 18:
			s.Refund(name)
		case op < 19:
			s.Expire(now, func(r Request) { fmt.Fprintf(&trace, "X%d ", r.ID) })
		default:
			rng.Shuffle(len(specs), func(i, j int) { specs[i], specs[j] = specs[j], specs[i] })
			cfg.Customers = specs[:8+rng.IntN(5)]
			cfg.Default = cfg.Customers[0].Name
			if err := s.Reconfigure(cfg, now); err != nil {
				t.Fatal(err)
			}
		}
		checkInvariants(t, s, step)
	}
	fmt.Fprintf(&trace, "%+v", s.Snapshot(now))
	return trace.String()
}

func TestCreditRandomOperationsKeepInvariants(t *testing.T) {
	for seed := range uint64(5) {
		randomRun(t, seed)
	}
}

func TestCreditDeterministic(t *testing.T) {
	if a, b := randomRun(t, 42), randomRun(t, 42); a != b {
		t.Fatal("two runs with the same operations gave different answers")
	}
}

// The steady state (queue storage grown, every index sized) allocates
// nothing per request.
func TestCreditDoesNotAllocate(t *testing.T) {
	s := newCreditT(t, CreditConfig{
		Customers:    []CustomerSpec{{Name: "a", Reservation: 100, Cap: 1e9}, {Name: "b", Weight: 2}},
		QueueTimeout: time.Second,
	})
	now := int64(0)
	r := Request{Customer: "a", Host: "shop.example"}
	step := func() {
		now += int64(time.Millisecond)
		r.Customer = "a"
		_ = s.Enqueue(r, now)
		r.Customer = "b"
		_ = s.Enqueue(r, now)
		s.Next(now)
		s.Next(now)
		s.Complete("a", 30*time.Millisecond)
		s.Complete("b", 10*time.Millisecond)
		s.Expire(now, func(Request) {})
	}
	step()
	if allocs := testing.AllocsPerRun(1000, step); allocs != 0 {
		t.Fatalf("%v allocations per round", allocs)
	}
}

// The indexed heap against a sorted reference under random operations.
func TestIDHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var h idHeap[int64]
	h.reset(50)
	ref := map[int32]int64{}
	for range 20000 {
		id := int32(rng.IntN(50))
		switch rng.IntN(3) {
		case 0, 1:
			k := rng.Int64N(100)
			h.set(id, k)
			ref[id] = k
		case 2:
			h.remove(id)
			delete(ref, id)
		}
		if h.len() != len(ref) {
			t.Fatalf("len %d, want %d", h.len(), len(ref))
		}
		if len(ref) == 0 {
			continue
		}
		wantID, wantKey := int32(-1), int64(0)
		for i, k := range ref {
			if wantID < 0 || k < wantKey || k == wantKey && i < wantID {
				wantID, wantKey = i, k
			}
		}
		if gotID, gotKey := h.min(); gotID != wantID || gotKey != wantKey {
			t.Fatalf("min (%d, %d), want (%d, %d)", gotID, gotKey, wantID, wantKey)
		}
	}
}
