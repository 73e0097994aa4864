package sched

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// newCreditT builds a Credit or fails the test.
func newCreditT(t testing.TB, cfg CreditConfig) *Credit {
	t.Helper()
	s, err := NewCredit(cfg)
	if err != nil {
		t.Fatalf("NewCredit: %v", err)
	}
	return s
}

// enqueueN queues n requests for customer at now, with ids from *id on.
func enqueueN(t testing.TB, s *Credit, customer string, n int, now int64, id *RequestID) {
	t.Helper()
	for range n {
		*id++
		if err := s.Enqueue(Request{ID: *id, Customer: customer, Arrival: now}, now); err != nil {
			t.Fatalf("Enqueue(%s #%d) at %d ms: %v", customer, *id, now/ms, err)
		}
	}
}

// next dispatches one request at now or fails the test.
func next(t testing.TB, s *Credit, now int64) Request {
	t.Helper()
	r, ok := s.Next(now)
	if !ok {
		t.Fatalf("Next at %d ms: nothing, %d waiting", now/ms, s.Len())
	}
	return r
}

// state returns the named customer's snapshot at now.
func state(t testing.TB, s *Credit, name string, now int64) CustomerState {
	t.Helper()
	for _, st := range s.Snapshot(now) {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no customer %q in the snapshot", name)
	return CustomerState{}
}

func wantBalance(t *testing.T, s *Credit, name string, now int64, want float64) {
	t.Helper()
	if got := state(t, s, name, now).Balance; got < want-1e-9 || got > want+1e-9 {
		t.Fatalf("%s's balance at %.3f ms: %v, want %v", name, float64(now)/float64(ms), got, want)
	}
}

// One credit per 10 ms cycle: credit arrives exactly at multiples of
// Cycle, several missed boundaries are caught up at once, and requests
// served while the balance is empty (from spare capacity) leave it alone.
func TestCreditCreditsAtCycleBoundaries(t *testing.T) {
	s := newCreditT(t, CreditConfig{Customers: []CustomerSpec{{Name: "a", Reservation: 100}}})
	var id RequestID
	enqueueN(t, s, "a", 30, 0, &id)
	wantBalance(t, s, "a", 0, 10) // a newcomer starts full: 100/s x 100 ms
	for range 10 {
		next(t, s, 0)
	}
	wantBalance(t, s, "a", 0, 0)
	next(t, s, 10*ms-1) // still cycle 0: from spare capacity, free
	if st := state(t, s, "a", 10*ms-1); st.SpareDispatched != 1 || st.Balance != 0 || st.Charged != 10 {
		t.Fatalf("after a spare dispatch: %+v, want 1 spare, balance 0, 10 charged", st)
	}
	wantBalance(t, s, "a", 10*ms, 1)
	next(t, s, 10*ms)
	wantBalance(t, s, "a", 10*ms, 0)
	wantBalance(t, s, "a", 39*ms, 2) // boundaries at 20 and 30 ms
	next(t, s, 39*ms)
	next(t, s, 39*ms)
	next(t, s, 39*ms)
	if st := state(t, s, "a", 39*ms); st.SpareDispatched != 2 || st.Dispatched != 15 || st.Balance != 0 {
		t.Fatalf("at 39 ms: %+v, want 15 dispatched of which 2 spare, balance 0", st)
	}
}

// A customer idle for ten seconds comes back with BalanceLimit worth of
// credit (10), not ten seconds' worth (1000): it gets 10 reserved
// dispatches in turn with a busy customer, then waits for it.
func TestCreditIdleCustomerCannotHoard(t *testing.T) {
	s := newCreditT(t, CreditConfig{Customers: []CustomerSpec{
		{Name: "idle", Reservation: 100}, {Name: "busy", Reservation: 1000},
	}})
	var id RequestID
	enqueueN(t, s, "idle", 1, 0, &id)
	next(t, s, 0)
	now := 10 * int64(time.Second)
	wantBalance(t, s, "idle", now, 10)
	enqueueN(t, s, "idle", 50, now, &id)
	enqueueN(t, s, "busy", 50, now, &id)
	var order strings.Builder
	for range 40 {
		order.WriteByte(next(t, s, now).Customer[0])
	}
	want := strings.Repeat("ib", 10) + strings.Repeat("b", 20)
	if order.String() != want {
		t.Fatalf("order %s, want %s", order.String(), want)
	}
	if st := state(t, s, "idle", now); st.SpareDispatched != 0 || st.Balance != 0 {
		t.Fatalf("idle: %+v, want 11 reserved dispatches and balance 0", st)
	}
}

// A request that took 100 s would cost 5000 credits; the balance stops at
// -DebtLimit worth (-100) and is positive again 101 cycles later.
func TestCreditDebtBound(t *testing.T) {
	s := newCreditT(t, CreditConfig{Customers: []CustomerSpec{
		{Name: "slow", Reservation: 100}, {Name: "other", Reservation: 10000},
	}})
	var id RequestID
	enqueueN(t, s, "slow", 1, 0, &id)
	next(t, s, 0)
	s.Complete("slow", 100*time.Second)
	wantBalance(t, s, "slow", 0, -100)
	wantBalance(t, s, "slow", 1000*ms, 0)
	wantBalance(t, s, "slow", 1010*ms, 1)

	now := 1005 * ms
	enqueueN(t, s, "slow", 1, now, &id)
	enqueueN(t, s, "other", 5, now, &id)
	for range 2 {
		if r := next(t, s, now); r.Customer != "other" {
			t.Fatalf("at 1005 ms %s was served before a customer with credit", r.Customer)
		}
	}
	now = 1010 * ms
	served := ""
	for range 2 {
		served += next(t, s, now).Customer + " "
	}
	if !strings.Contains(served, "slow") {
		t.Fatalf("at 1010 ms served %q: slow's balance turned positive and it must take its turn", served)
	}
	if st := state(t, s, "slow", now); st.SpareDispatched != 0 {
		t.Fatalf("slow was served from spare capacity: %+v", st)
	}
}

func TestCreditRoundRobinAmongPositive(t *testing.T) {
	s := newCreditT(t, CreditConfig{Customers: []CustomerSpec{
		{Name: "a", Reservation: 1000}, {Name: "b", Reservation: 1000}, {Name: "c", Reservation: 1000},
	}})
	var id RequestID
	for _, name := range []string{"a", "b", "c"} {
		enqueueN(t, s, name, 3, 0, &id)
	}
	var got strings.Builder
	for range 9 {
		got.WriteString(next(t, s, 0).Customer)
	}
	if got.String() != "abcabcabc" {
		t.Fatalf("served %s, want abcabcabc", got.String())
	}
	if _, ok := s.Next(0); ok || s.Len() != 0 {
		t.Fatalf("queue not empty after serving everything: Len %d", s.Len())
	}
}

// Customers without credit share by weight, 3:1, exactly in stride order;
// a customer that joins late starts at the current virtual time instead
// of claiming the backlog of its absence.
func TestCreditWeightedSpare(t *testing.T) {
	s := newCreditT(t, CreditConfig{Customers: []CustomerSpec{
		{Name: "heavy", Weight: 3}, {Name: "light", Weight: 1}, {Name: "late"},
	}})
	var id RequestID
	enqueueN(t, s, "heavy", 200, 0, &id)
	enqueueN(t, s, "light", 200, 0, &id)
	count := map[string]int{}
	for range 40 {
		count[next(t, s, 0).Customer]++
	}
	if count["heavy"] != 30 || count["light"] != 10 {
		t.Fatalf("shares %v, want heavy 30 light 10", count)
	}
	for range 60 {
		next(t, s, 0)
	}
	enqueueN(t, s, "late", 100, 0, &id)
	clear(count)
	for range 50 {
		count[next(t, s, 0).Customer]++
	}
	// Weights 3:1:1 of 50 is 30:10:10; a late start at pass 0 would have
	// given it dozens in a row.
	if count["late"] < 9 || count["late"] > 11 || count["heavy"] < 29 || count["heavy"] > 31 {
		t.Fatalf("after a late join: %v, want about heavy 30, light 10, late 10", count)
	}
}

// A 40 ms request costs 2 credits, a 10 ms one half a credit. When a
// customer has one reserved and one spare request in flight, a correction
// is split half and half between balance and spare share.
func TestCreditCompleteCorrectsCharge(t *testing.T) {
	s := newCreditT(t, CreditConfig{Customers: []CustomerSpec{{Name: "a", Reservation: 100}}})
	var id RequestID
	enqueueN(t, s, "a", 20, 0, &id)
	next(t, s, 0)
	s.Complete("a", 40*time.Millisecond)
	wantBalance(t, s, "a", 0, 8)
	next(t, s, 0)
	s.Complete("a", 10*time.Millisecond)
	wantBalance(t, s, "a", 0, 7.5)
	for range 8 { // 7.5 credits: 8 reserved dispatches leave -0.5
		next(t, s, 0)
	}
	for range 8 {
		s.Complete("a", 20*time.Millisecond) // typical: no correction
	}
	wantBalance(t, s, "a", 0, -0.5)
	next(t, s, 0) // from spare capacity
	wantBalance(t, s, "a", 10*ms, 0.5)
	next(t, s, 10*ms) // reserved
	if st := state(t, s, "a", 10*ms); st.SpareDispatched != 1 || st.Dispatched != 12 {
		t.Fatalf("%+v: want 12 dispatched, one of them spare", st)
	}
	s.Complete("a", 60*time.Millisecond) // +2 credits, half to the balance
	wantBalance(t, s, "a", 10*ms, -1.5)
	s.Complete("a", 60*time.Millisecond)
	wantBalance(t, s, "a", 10*ms, -2.5)
	s.Complete("a", 60*time.Millisecond) // nothing in flight: all to the balance
	wantBalance(t, s, "a", 10*ms, -4.5)
	if st := state(t, s, "a", 10*ms); st.Charged != 15.5 {
		t.Fatalf("charged %v, want 15.5", st.Charged)
	}
}

func TestCreditCap(t *testing.T) {
	s := newCreditT(t, CreditConfig{Customers: []CustomerSpec{{Name: "a", Reservation: 5, Cap: 10}}})
	var id RequestID
	enqueueN(t, s, "a", 10, 0, &id) // a burst of Cap x CapWindow
	if err := s.Enqueue(Request{Customer: "a"}, 0); !errors.Is(err, ErrOverCap) {
		t.Fatalf("11th request in 0 s: %v, want ErrOverCap", err)
	}
	enqueueN(t, s, "a", 1, 100*ms, &id) // 10/s refills one per 100 ms
	if err := s.Enqueue(Request{Customer: "a"}, 150*ms); !errors.Is(err, ErrOverCap) {
		t.Fatalf("request at 150 ms: %v, want ErrOverCap", err)
	}
	for s.Len() > 0 {
		next(t, s, 150*ms)
	}
	enqueueN(t, s, "a", 10, 60*int64(time.Second), &id) // a minute idle: still only 10
	if err := s.Enqueue(Request{Customer: "a"}, 60*int64(time.Second)); !errors.Is(err, ErrOverCap) {
		t.Fatalf("after a minute idle: %v, want ErrOverCap after 10", err)
	}
	if st := state(t, s, "a", 0); st.OverCap != 3 || st.Admitted != 21 || st.Offered != 24 {
		t.Fatalf("%+v: want 3 over cap, 21 admitted of 24 offered", st)
	}
}

// A refused request costs neither cap nor queue: with a bucket of 3 and
// room for 1, the refusals for a full queue leave all 3 to be admitted.
func TestCreditQueueFullCostsNoCap(t *testing.T) {
	s := newCreditT(t, CreditConfig{Customers: []CustomerSpec{{Name: "a", Cap: 3, QueueCap: 1}}})
	var got []string
	for _, step := range []string{"enq", "enq", "next", "enq", "enq", "next", "enq", "next", "enq"} {
		if step == "next" {
			next(t, s, 0)
			continue
		}
		err := s.Enqueue(Request{Customer: "a"}, 0)
		switch {
		case err == nil:
			got = append(got, "ok")
		case errors.Is(err, ErrQueueFull):
			got = append(got, "full")
		case errors.Is(err, ErrOverCap):
			got = append(got, "cap")
		default:
			t.Fatal(err)
		}
	}
	if want := "[ok full ok full ok cap]"; fmt.Sprint(got) != want {
		t.Fatalf("answers %v, want %s", got, want)
	}
}

func TestCreditQueueFull(t *testing.T) {
	s := newCreditT(t, CreditConfig{Customers: []CustomerSpec{{Name: "a", QueueCap: 2}, {Name: "b"}}})
	var id RequestID
	enqueueN(t, s, "a", 2, 0, &id)
	if err := s.Enqueue(Request{Customer: "a"}, 0); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third request into QueueCap 2: %v", err)
	}
	enqueueN(t, s, "b", 5, 0, &id) // queues are per customer; b has 1000
	next(t, s, 0)
	next(t, s, 0)
	next(t, s, 0) // a's and b's in some order; a must have room now
	if st := state(t, s, "a", 0); st.Queued == 2 {
		t.Fatalf("a was not served: %+v", st)
	}
	enqueueN(t, s, "a", 1, 0, &id)
	if st := state(t, s, "a", 0); st.QueueFull != 1 {
		t.Fatalf("%+v: want QueueFull 1", st)
	}
}

func TestCreditExpire(t *testing.T) {
	s := newCreditT(t, CreditConfig{
		Customers:    []CustomerSpec{{Name: "a"}, {Name: "b"}},
		QueueTimeout: 50 * time.Millisecond,
	})
	for i, name := range []string{"a", "b", "a", "b"} {
		at := int64(i) * 10 * ms
		if err := s.Enqueue(Request{ID: RequestID(i + 1), Customer: name}, at); err != nil {
			t.Fatal(err)
		}
	}
	expire := func(now int64) (ids []RequestID) {
		s.Expire(now, func(r Request) { ids = append(ids, r.ID) })
		return ids
	}
	if at, ok := s.NextExpiry(); !ok || at != 50*ms+1 {
		t.Fatalf("NextExpiry %d %v, want just after 50 ms", at, ok)
	}
	if got := expire(50 * ms); len(got) != 0 {
		t.Fatalf("at 50 ms expired %v: waiting exactly the timeout is allowed", got)
	}
	if got := expire(60 * ms); fmt.Sprint(got) != "[1]" {
		t.Fatalf("at 60 ms expired %v, want [1]", got)
	}
	if got := expire(75 * ms); fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("at 75 ms expired %v, want [2 3] (oldest first across customers)", got)
	}
	if at, ok := s.NextExpiry(); !ok || at != 80*ms+1 {
		t.Fatalf("NextExpiry %d %v, want just after 80 ms (request 4's)", at, ok)
	}
	if s.Len() != 1 {
		t.Fatalf("Len %d, want 1", s.Len())
	}
	if r := next(t, s, 75*ms); r.ID != 4 {
		t.Fatalf("Next after expiry gave %d, want 4", r.ID)
	}
	if got := expire(time.Hour.Nanoseconds()); len(got) != 0 {
		t.Fatalf("dispatched request expired: %v", got)
	}
	if at, ok := s.NextExpiry(); ok {
		t.Fatalf("NextExpiry %d with nothing waiting", at)
	}
	if a, b := state(t, s, "a", 0), state(t, s, "b", 0); a.Expired != 2 || b.Expired != 1 {
		t.Fatalf("expired counters a %d b %d, want 2 and 1", a.Expired, b.Expired)
	}
}

// Refund returns a reserved dispatch's credit, and a spare dispatch's
// place in the spare sharing (not credit it never paid).
func TestCreditRefund(t *testing.T) {
	s := newCreditT(t, CreditConfig{Customers: []CustomerSpec{{Name: "a", Reservation: 100}}})
	var id RequestID
	enqueueN(t, s, "a", 12, 0, &id)
	next(t, s, 0)
	wantBalance(t, s, "a", 0, 9)
	s.Refund("a")
	wantBalance(t, s, "a", 0, 10)
	s = newCreditT(t, CreditConfig{Customers: []CustomerSpec{{Name: "x"}, {Name: "y"}}})
	enqueueN(t, s, "x", 3, 0, &id)
	enqueueN(t, s, "y", 3, 0, &id)
	if r := next(t, s, 0); r.Customer != "x" {
		t.Fatalf("first spare dispatch to %s, want x (equal pass, lower index)", r.Customer)
	}
	s.Refund("x")
	wantBalance(t, s, "x", 0, 0) // x never paid credit, so gets none back
	if r := next(t, s, 0); r.Customer != "x" {
		t.Fatalf("after x's refund %s went first; x's pass should be back", r.Customer)
	}
	if st := state(t, s, "x", 0); st.Refunded != 1 {
		t.Fatalf("%+v: want Refunded 1", st)
	}
}
