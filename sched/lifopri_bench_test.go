package sched

import (
	"fmt"
	"testing"
)

func TestLifoPriDoesNotAllocate(t *testing.T) {
	for _, mode := range []Mode{ModeLifoPri, ModeEightFIFO, ModeSingleFIFO} {
		p := newLifoPriT(t, LifoPriConfig{Mode: mode})
		p.SetUtilization(1, 0)
		var id RequestID
		for _, c := range DefaultClasses() {
			lpEnqueue(t, p, c.Name, 5, 0, &id)
		}
		rs := []Request{
			{ID: 1, Customer: "search", Host: "shop.example", Path: "/search?q=x", Port: 80},
			{ID: 2, Customer: "payment", Host: "shop.example", Path: "/payment", Port: 80},
		}
		allocs := testing.AllocsPerRun(1000, func() {
			for _, r := range rs {
				_ = p.Enqueue(r, 0)
				p.Next(0)
			}
		})
		if allocs != 0 {
			t.Fatalf("%v: %v allocations per 2 Enqueue+Next", mode, allocs)
		}
	}
}

// BenchmarkLifoPri measures one Enqueue and one Next with the default
// classes, queues starting half full (ModeSingleFIFO: full) and
// browsing LIFO. Transaction
// queues stay short, browsing queues fill up, and some Enqueues are
// refused, as under overload.
func BenchmarkLifoPri(b *testing.B) {
	for _, mode := range []Mode{ModeLifoPri, ModeSingleFIFO} {
		b.Run(fmt.Sprint(mode), func(b *testing.B) {
			p := newLifoPriT(b, LifoPriConfig{Mode: mode})
			p.SetUtilization(1, 0)
			classes := DefaultClasses()
			for _, c := range classes {
				for range c.QueueCap / 2 { // the single queue refuses some
					_ = p.Enqueue(Request{Customer: c.Name}, 0)
				}
			}
			op := 0
			b.ReportAllocs()
			for b.Loop() {
				op++
				_ = p.Enqueue(Request{ID: RequestID(op), Customer: classes[(op*5)%len(classes)].Name}, int64(op))
				if _, ok := p.Next(int64(op)); !ok {
					b.Fatal("nothing to dispatch")
				}
			}
		})
	}
}
