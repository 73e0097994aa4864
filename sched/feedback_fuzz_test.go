package sched

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

// FuzzFeedback drives the policy with operations read from the input and
// checks that every request it admits leaves it exactly once (Next, or a
// drop through Expire), that Len counts what waits, and that a refused
// request never waits in reserve RefusePeriods periods or more.
func FuzzFeedback(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe})
	f.Fuzz(func(t *testing.T, ops []byte) {
		p, err := NewFeedback(FeedbackConfig{Seed: 9, Period: 100 * time.Millisecond, TargetQueue: 3, History: 2, RefusePeriods: 2,
			QueueTimeout: time.Second, Trees: 3, A: 0.01, Classes: []FeedbackClass{
				{Name: "a", Weight: 3, QueueCap: 8, ReserveCap: 8}, {Name: "b", Weight: 1, QueueCap: 8, ReserveCap: 8}}})
		if err != nil {
			t.Fatal(err)
		}
		live := map[RequestID]int64{}
		now, id := int64(0), RequestID(0)
		gone := func(r Request) {
			if _, ok := live[r.ID]; !ok {
				t.Fatalf("request %d left twice or was never admitted", r.ID)
			}
			delete(live, r.ID)
		}
		for _, op := range ops {
			now += int64(op>>4) * int64(10*time.Millisecond)
			switch op & 7 {
			case 0, 1, 2:
				id++
				r := Request{ID: id, Customer: []string{"a", "b"}[op&1], Session: op&8 != 0,
					Client: netip.AddrFrom4([4]byte{198, 18, 0, op})}
				err := p.Enqueue(r, now)
				switch {
				case err == nil:
					live[id] = now
				case !errors.Is(err, ErrQueueFull) && !errors.Is(err, ErrOverload):
					t.Fatalf("Enqueue: %v", err)
				}
			case 3, 4:
				if r, ok := p.Next(now); ok {
					gone(r)
					if r.Tree < 1 || r.Tree > 3 {
						t.Fatalf("tree %d", r.Tree)
					}
				}
			case 5:
				p.Completed(uint64(op)*1000, now)
			case 6, 7:
				p.ExpireWhy(now, func(r Request, why FeedbackDrop) { gone(r) })
			}
			for i := range p.classes {
				for tier := range p.classes[i].reserve {
					if q := &p.classes[i].reserve[tier]; q.Len() > 0 && now-q.Front().at >= 2*int64(100*time.Millisecond) {
						t.Fatalf("a request waits in reserve %v after its arrival", time.Duration(now-q.Front().at))
					}
				}
			}
			// Requests refused by a call other than Expire are no longer
			// waiting, and wait in drops to be handed over.
			if p.Len()+p.drops.Len() != len(live) {
				t.Fatalf("Len %d + %d drops, %d requests admitted and not gone", p.Len(), p.drops.Len(), len(live))
			}
		}
		p.ExpireWhy(now, func(r Request, _ FeedbackDrop) { gone(r) })
		for {
			r, ok := p.Next(now)
			if !ok {
				break
			}
			gone(r)
		}
		if len(live) != 0 {
			t.Fatalf("%d requests lost", len(live))
		}
	})
}
