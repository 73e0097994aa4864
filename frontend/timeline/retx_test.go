package timeline

import (
	"slices"
	"testing"
)

// TestAddRetxKeepsTheEarliestInOrder: marks added out of order are listed
// in time order; past MaxRetx the latest give way to earlier ones and the
// count still grows.
func TestAddRetxKeepsTheEarliestInOrder(t *testing.T) {
	var r Record
	for _, at := range []int64{50, 10, 30} {
		r.AddRetx("client_sack", at)
	}
	if got := r.Retransmissions(); len(got) != 3 || got[0].At != 10 || got[1].At != 30 || got[2].At != 50 {
		t.Fatalf("three marks: %v", got)
	}
	for at := int64(100); at < 100+MaxRetx; at++ {
		r.AddRetx("request", at)
	}
	r.AddRetx("syn", 5)   // earlier than all: kept, first
	r.AddRetx("syn", 200) // later than every one kept when full: counted only
	got := r.Retransmissions()
	ats := make([]int64, len(got))
	for i, x := range got {
		ats[i] = x.At
	}
	want := []int64{5, 10, 30, 50, 100, 101, 102, 103}
	if !slices.Equal(ats, want) || r.NumRetx != 3+MaxRetx+2 || got[0].Kind != "syn" {
		t.Fatalf("full: %v (%d counted), want times %v and %d counted", got, r.NumRetx, want, 3+MaxRetx+2)
	}
	line := r.AppendJSON(nil)
	back, err := ParseJSON(line)
	if err != nil || back.NumRetx != r.NumRetx || back.Retx != r.Retx {
		t.Fatalf("round trip of %s: %+v, %v", line, back.Retx, err)
	}
	if _, err := ParseJSON([]byte(`{"retransmissions":1,"retx":[{"kind":"syn","at":1},{"kind":"syn","at":2}]}`)); err == nil {
		t.Error("more retransmissions listed than counted was accepted")
	}
}
