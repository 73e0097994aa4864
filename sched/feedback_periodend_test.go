package sched

import (
	"slices"
	"testing"
)

// The ring keeps the last 64 period ends, oldest first, and wraps.
func TestFeedbackPeriodEndRingWraps(t *testing.T) {
	var r periodEndRing
	if got := r.appendTo(nil); len(got) != 0 {
		t.Fatalf("empty ring: %v", got)
	}
	for k := range int64(3) {
		r.add(FeedbackPeriodEnd{Period: k, Q: int(10 + k)})
	}
	want := []FeedbackPeriodEnd{{Period: 0, Q: 10}, {Period: 1, Q: 11}, {Period: 2, Q: 12}}
	if got := r.appendTo(nil); !slices.Equal(got, want) {
		t.Fatalf("3 entries: %v, want %v", got, want)
	}
	for k := int64(3); k < 70; k++ {
		r.add(FeedbackPeriodEnd{Period: k, Q: int(10 + k)})
	}
	got := r.appendTo(nil)
	if len(got) != periodEndRingSize || got[0] != (FeedbackPeriodEnd{Period: 6, Q: 16}) || got[63] != (FeedbackPeriodEnd{Period: 69, Q: 79}) {
		t.Fatalf("70 entries: %d held, first %v, last %v; want 64, {6 16}, {69 79}", len(got), got[0], got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if got[i].Period != got[i-1].Period+1 || got[i].Q != int(10+got[i].Period) {
			t.Fatalf("entry %d: %v after %v", i, got[i], got[i-1])
		}
	}
}

// The status reports q(t), the admitted queue at each period's end as
// the loop stepped on it, with the period's in and out, apart from the
// queue now; periods that ended
// while nobody called are closed at the next call and reported with
// their own indices, and after an idle gap beyond maxCatchUp the index
// still counts every period (period k ends (k+1) x T after the first
// call). By hand, target_q 4, every draw 0:
//
//	0      3 requests admitted (target_in 4, p 1)
//	T/2    one served: queue 2
//	T      period 0 ends with q 2, in 3, out 1 (nothing in reserve)
//	T+1    one more admitted: the queue now 3, q(t) still 2
//	3.5T   periods 1 and 2 end with q 3, in 1 and 0, out 0
func TestFeedbackStatusReportsPeriodEndQueue(t *testing.T) {
	p := newFeedbackT(t, FeedbackConfig{Period: fbPeriod, Classes: []FeedbackClass{{Name: "a", Weight: 1}},
		TargetQueue: 4, History: 1, draw: func() float64 { return 0 }})
	if _, _, ok := p.CurrentPeriod(); ok {
		t.Fatal("a period before the first call")
	}
	id := RequestID(0)
	enq := func(now int64) {
		id++
		if err := p.Enqueue(Request{ID: id, Customer: "a"}, now); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		enq(0)
	}
	if k, start, ok := p.CurrentPeriod(); !ok || k != 0 || start != 0 {
		t.Fatalf("period %d from %d (%v), want 0 from 0", k, start, ok)
	}
	if _, ok := p.Next(fbT / 2); !ok {
		t.Fatal("nothing to serve")
	}
	p.advance(fbT)
	st := p.Snapshot()[0]
	if st.Queued != 2 || st.PeriodEndQ != 2 || !slices.Equal(st.PeriodEnds, []FeedbackPeriodEnd{{0, 2, 3, 1}}) {
		t.Fatalf("after period 0: queued %d, q(t) %d, ends %v; want 2, 2, [{0 2 3 1}]", st.Queued, st.PeriodEndQ, st.PeriodEnds)
	}
	enq(fbT + 1)
	if st := p.Snapshot()[0]; st.Queued != 3 || st.PeriodEndQ != 2 {
		t.Fatalf("within period 1: queued %d, q(t) %d; want 3 now and 2 at period 0's end", st.Queued, st.PeriodEndQ)
	}
	p.advance(3*fbT + fbT/2)
	st = p.Snapshot()[0]
	want := []FeedbackPeriodEnd{{0, 2, 3, 1}, {1, 3, 1, 0}, {2, 3, 0, 0}}
	if st.PeriodEndQ != 3 || !slices.Equal(st.PeriodEnds, want) {
		t.Fatalf("after period 2: q(t) %d, ends %v; want 3, %v", st.PeriodEndQ, st.PeriodEnds, want)
	}
	if k, start, _ := p.CurrentPeriod(); k != 3 || start != 3*fbT {
		t.Fatalf("period %d from %d, want 3 from %d", k, start, 3*fbT)
	}
	// An idle gap of 5000 periods: 2100 run one by one, the rest skipped
	// but counted.
	p.advance(5003*fbT + fbT/2)
	k, start, _ := p.CurrentPeriod()
	ends := p.Snapshot()[0].PeriodEnds
	if k != 5003 || start != 5003*fbT || ends[len(ends)-1].Period != 5002 || len(ends) != periodEndRingSize {
		t.Fatalf("after the gap: period %d from %d, last end %v, %d held; want 5003 from %d, period 5002, %d",
			k, start, ends[len(ends)-1], len(ends), 5003*fbT, periodEndRingSize)
	}
}
