package sched

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkCreditNext measures one scheduling decision (Enqueue, Next and
// the Complete that follows it) with 10, 1,000 and 100,000 configured
// customers of which 1% (at least 10) have requests waiting. The clock
// advances by 0.8 ms per decision, 1250 decisions per second as in the
// published scenario, so balances are credited, run out, and turn
// positive again as they would in service. The cost should grow with the
// logarithm of the busy customers, not with the customers configured.
func BenchmarkCreditNext(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		b.Run(fmt.Sprintf("customers=%d", n), func(b *testing.B) {
			active := max(min(n, 10), n/100)
			specs := make([]CustomerSpec, n)
			for i := range specs {
				specs[i] = CustomerSpec{Name: fmt.Sprintf("customer-%06d", i),
					Reservation: 1000 / float64(active), Weight: float64(1 + i%3)}
			}
			s, err := NewCredit(CreditConfig{Customers: specs, QueueTimeout: 10 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			busy := make([]string, active) // spread over the whole index range
			for i := range busy {
				busy[i] = specs[i*(n/active)].Name
			}
			now := int64(0)
			for _, name := range busy {
				for range 4 {
					if err := s.Enqueue(Request{Customer: name}, now); err != nil {
						b.Fatal(err)
					}
				}
			}
			services := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 20 * time.Millisecond}
			op := 0
			b.ReportAllocs()
			for b.Loop() {
				op++
				now += 800 * int64(time.Microsecond)
				_ = s.Enqueue(Request{Customer: busy[(op*7919)%active]}, now)
				r, ok := s.Next(now)
				if !ok {
					b.Fatal("nothing to dispatch")
				}
				s.Complete(r.Customer, services[op%len(services)])
			}
		})
	}
}
