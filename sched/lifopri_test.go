package sched

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// newLifoPriT builds a LifoPri or fails the test.
func newLifoPriT(t testing.TB, cfg LifoPriConfig) *LifoPri {
	t.Helper()
	p, err := NewLifoPri(cfg)
	if err != nil {
		t.Fatalf("NewLifoPri: %v", err)
	}
	return p
}

// lpEnqueue queues n requests of class at now, with ids from *id on.
func lpEnqueue(t testing.TB, p *LifoPri, class string, n int, now int64, id *RequestID) {
	t.Helper()
	for range n {
		*id++
		if err := p.Enqueue(Request{ID: *id, Customer: class, Arrival: now}, now); err != nil {
			t.Fatalf("Enqueue(%s #%d): %v", class, *id, err)
		}
	}
}

// lpDrain dispatches n requests and returns them.
func lpDrain(t testing.TB, p *LifoPri, n int) []Request {
	t.Helper()
	out := make([]Request, 0, n)
	for range n {
		r, ok := p.Next(0)
		if !ok {
			t.Fatalf("Next: nothing after %d of %d, Len %d", len(out), n, p.Len())
		}
		out = append(out, r)
	}
	return out
}

func classesOf(rs []Request) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Customer
	}
	return out
}

func idsOf(rs []Request) []RequestID {
	out := make([]RequestID, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func lpState(t testing.TB, p *LifoPri, class string) ClassState {
	t.Helper()
	for _, st := range p.Snapshot() {
		if st.Name == class {
			return st
		}
	}
	t.Fatalf("no class %q in the snapshot", class)
	return ClassState{}
}

// A full browsing queue worth 50 x 73 = 3650 does not get ahead of a single
// login worth 3650, nor of anything else in the transaction group; within
// the transaction group one confirm (5000) goes before one login (3650).
func TestLifoPriTransactionsBeforeBrowsing(t *testing.T) {
	p := newLifoPriT(t, LifoPriConfig{})
	var id RequestID
	lpEnqueue(t, p, "details", 50, 0, &id)
	lpEnqueue(t, p, "main", 50, 0, &id)
	lpEnqueue(t, p, "login", 1, 0, &id)
	lpEnqueue(t, p, "confirm", 1, 0, &id)
	got := classesOf(lpDrain(t, p, 3))
	if want := []string{"confirm", "login", "details"}; !slices.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
	lpEnqueue(t, p, "shipping", 1, 0, &id) // arrives late, still goes first
	if r := lpDrain(t, p, 1)[0]; r.Customer != "shipping" {
		t.Fatalf("served %s while a shipping request waited", r.Customer)
	}
}

// The worked example of the LifoPri documentation, played out: 10 main
// (x 27 = 270), 8 search (x 36 = 288), 4 details (x 73 = 292).
func TestLifoPriLengthTimesUtility(t *testing.T) {
	p := newLifoPriT(t, LifoPriConfig{})
	var id RequestID
	lpEnqueue(t, p, "main", 10, 0, &id)
	lpEnqueue(t, p, "search", 8, 0, &id)
	lpEnqueue(t, p, "details", 4, 0, &id)
	want := []string{
		"details", // 292 > 288 > 270; details 3 left (219)
		"search",  // 288 > 270 > 219; search 7 (252)
		"main",    // 270 > 252; main 9 (243)
		"search",  // 252 > 243; search 6 (216)
		"main",    // 243 > 219; main 8 (216)
		"details", // 219 > 216 = 216; details 2 (146)
		"search",  // 216 = 216, search's utility 36 beats main's 27; search 5 (180)
		"main",    // 216 > 180; main 7 (189)
		"main",    // 189 > 180; main 6 (162)
		"search",  // 180 > 162; search 4 (144)
		"main",    // 162 > 146; main 5 (135)
		"details", // 146 > 144; details 1 (73)
	}
	if got := classesOf(lpDrain(t, p, len(want))); !slices.Equal(got, want) {
		t.Fatalf("served\n %v\nwant\n %v", got, want)
	}
}

// Full ties go to the higher utility, then to the class listed first.
func TestLifoPriTies(t *testing.T) {
	p := newLifoPriT(t, LifoPriConfig{Classes: []Class{
		{Name: "ten", Kind: Browsing, Utility: 10},
		{Name: "fifteen", Kind: Browsing, Utility: 15},
		{Name: "first", Kind: Transaction, Utility: 5},
		{Name: "second", Kind: Transaction, Utility: 5},
	}})
	var id RequestID
	lpEnqueue(t, p, "ten", 3, 0, &id)     // 30
	lpEnqueue(t, p, "fifteen", 2, 0, &id) // 30
	lpEnqueue(t, p, "second", 1, 0, &id)  // 5
	lpEnqueue(t, p, "first", 1, 0, &id)   // 5
	got := classesOf(lpDrain(t, p, 4))
	if want := []string{"first", "second", "fifteen", "ten"}; !slices.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
}

// Browsing queues follow the discipline of the moment, transaction
// queues are FIFO whatever it is, and the oldest request is still the
// oldest after the discipline changes.
func TestLifoPriFIFOAndLIFOOrder(t *testing.T) {
	p := newLifoPriT(t, LifoPriConfig{})
	var id RequestID
	lpEnqueue(t, p, "search", 5, 0, &id) // ids 1..5
	if got := idsOf(lpDrain(t, p, 1)); got[0] != 1 {
		t.Fatalf("FIFO served #%d first, want #1", got[0])
	}
	p.SetUtilization(0.99, 0)
	if got := idsOf(lpDrain(t, p, 2)); !slices.Equal(got, []RequestID{5, 4}) {
		t.Fatalf("LIFO served %v, want [5 4]", got)
	}
	lpEnqueue(t, p, "login", 3, 0, &id) // ids 6..8
	if got := idsOf(lpDrain(t, p, 3)); !slices.Equal(got, []RequestID{6, 7, 8}) {
		t.Fatalf("login queue under LIFO served %v, want FIFO [6 7 8]", got)
	}
	lpEnqueue(t, p, "search", 1, 0, &id) // id 9
	p.SetUtilization(0.1, 0)
	if got := idsOf(lpDrain(t, p, 3)); !slices.Equal(got, []RequestID{2, 3, 9}) {
		t.Fatalf("back to FIFO served %v, want [2 3 9]", got)
	}
	if r, ok := p.Next(0); ok {
		t.Fatalf("empty policy served %+v", r)
	}
}

func TestLifoPriHysteresis(t *testing.T) {
	p := newLifoPriT(t, LifoPriConfig{})
	for step, tc := range []struct {
		u    float64
		lifo bool
	}{
		{0.5, false},
		{0.96, true},  // above Upper 0.95
		{0.9, true},   // between the thresholds: stays
		{0.84, false}, // below Lower 0.85
		{0.9, false},  // between: stays FIFO
		{0.95, false}, // not above Upper
		{0.951, true},
		{0.85, true}, // not below Lower
		{1.2, true},
		{0, false},
	} {
		p.SetUtilization(tc.u, int64(step)*int64(time.Second))
		if p.LIFO() != tc.lifo {
			t.Fatalf("step %d: after utilization %v LIFO() = %v, want %v", step, tc.u, p.LIFO(), tc.lifo)
		}
		for _, st := range p.Snapshot() {
			if want := tc.lifo && st.Kind == Browsing; st.LIFO != want {
				t.Fatalf("step %d: snapshot of %s says LIFO %v, want %v", step, st.Name, st.LIFO, want)
			}
		}
	}
	custom := newLifoPriT(t, LifoPriConfig{Upper: 0.7, Lower: 0.6})
	for _, u := range []float64{0.71, 0.65} {
		custom.SetUtilization(u, 0)
		if !custom.LIFO() {
			t.Fatalf("thresholds 0.7/0.6: FIFO after %v", u)
		}
	}
	custom.SetUtilization(0.59, 0)
	if custom.LIFO() {
		t.Fatal("thresholds 0.7/0.6: still LIFO after 0.59")
	}
}

func TestLifoPriCapacityPerClass(t *testing.T) {
	p := newLifoPriT(t, LifoPriConfig{})
	var id RequestID
	lpEnqueue(t, p, "main", 50, 0, &id)
	lpEnqueue(t, p, "login", 25, 0, &id)
	for _, class := range []string{"main", "login"} {
		for range 2 {
			if err := p.Enqueue(Request{Customer: class}, 0); !errors.Is(err, ErrQueueFull) {
				t.Fatalf("Enqueue into full %s: %v, want ErrQueueFull", class, err)
			}
		}
	}
	lpEnqueue(t, p, "browse", 50, 0, &id) // another class's queue is unaffected
	lpEnqueue(t, p, "confirm", 25, 0, &id)
	if err := p.Enqueue(Request{Customer: "nobody"}, 0); !errors.Is(err, ErrUnknownCustomer) {
		t.Fatalf("unknown class: %v, want ErrUnknownCustomer", err)
	}
	if p.Len() != 150 {
		t.Fatalf("Len %d, want 150", p.Len())
	}
	for _, want := range []ClassState{
		{Name: "main", Kind: Browsing, Utility: 27, Queued: 50, Enqueued: 50, Refused: 2},
		{Name: "login", Kind: Transaction, Utility: 3650, Queued: 25, Enqueued: 25, Refused: 2},
		{Name: "browse", Kind: Browsing, Utility: 22, Queued: 50, Enqueued: 50},
		{Name: "search", Kind: Browsing, Utility: 36},
	} {
		if got := lpState(t, p, want.Name); got != want {
			t.Fatalf("snapshot %+v, want %+v", got, want)
		}
	}
	// Confirm (25 x 5000 = 125000) goes first until 18 are left (90000 <
	// 91250 = 25 x 3650); from then on the two take turns by score.
	lpDrain(t, p, 8)
	if st := lpState(t, p, "login"); st.Queued != 24 || st.Dispatched != 1 || lpState(t, p, "confirm").Queued != 18 {
		t.Fatalf("login after 8 dispatches: %+v", st)
	}
	lpEnqueue(t, p, "login", 1, 0, &id) // room again

	// QueueCap 0 takes the default of the class's kind.
	small := newLifoPriT(t, LifoPriConfig{Classes: []Class{
		{Name: "b", Kind: Browsing, Utility: 1},
		{Name: "t", Kind: Transaction, Utility: 1},
		{Name: "one", Kind: Transaction, Utility: 1, QueueCap: 1},
	}})
	lpEnqueue(t, small, "b", DefaultBrowsingCap, 0, &id)
	lpEnqueue(t, small, "t", DefaultTransactionCap, 0, &id)
	lpEnqueue(t, small, "one", 1, 0, &id)
	for _, class := range []string{"b", "t", "one"} {
		if err := small.Enqueue(Request{Customer: class}, 0); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("class %s over its capacity: %v", class, err)
		}
	}
}

// ModeEightFIFO keeps the queues and their priority but never turns LIFO.
func TestLifoPriEightFIFO(t *testing.T) {
	p := newLifoPriT(t, LifoPriConfig{Mode: ModeEightFIFO})
	var id RequestID
	lpEnqueue(t, p, "browse", 3, 0, &id)  // 1..3
	lpEnqueue(t, p, "payment", 2, 0, &id) // 4..5
	p.SetUtilization(1, 0)
	if p.LIFO() || lpState(t, p, "browse").LIFO {
		t.Fatal("ModeEightFIFO reports LIFO")
	}
	if got := idsOf(lpDrain(t, p, 5)); !slices.Equal(got, []RequestID{4, 5, 1, 2, 3}) {
		t.Fatalf("served %v, want [4 5 1 2 3]", got)
	}
	if err := p.Enqueue(Request{Customer: "login"}, 0); err != nil {
		t.Fatal(err)
	}
	for range DefaultTransactionCap - 1 {
		lpEnqueue(t, p, "login", 1, 0, &id)
	}
	if err := p.Enqueue(Request{Customer: "login"}, 0); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("class capacity in ModeEightFIFO: %v", err)
	}
}

// ModeSingleFIFO serves in arrival order whatever the class, with one
// capacity for all, and still counts per class.
func TestLifoPriSingleFIFO(t *testing.T) {
	p := newLifoPriT(t, LifoPriConfig{Mode: ModeSingleFIFO})
	var id RequestID
	lpEnqueue(t, p, "main", 2, 0, &id)    // 1, 2
	lpEnqueue(t, p, "confirm", 1, 0, &id) // 3
	lpEnqueue(t, p, "details", 1, 0, &id) // 4
	p.SetUtilization(1, 0)
	if p.LIFO() {
		t.Fatal("ModeSingleFIFO reports LIFO")
	}
	if got := idsOf(lpDrain(t, p, 4)); !slices.Equal(got, []RequestID{1, 2, 3, 4}) {
		t.Fatalf("served %v, want arrival order [1 2 3 4]", got)
	}
	lpEnqueue(t, p, "login", 60, 0, &id) // above login's own 25: not applied
	lpEnqueue(t, p, "main", 40, 0, &id)
	if err := p.Enqueue(Request{Customer: "search"}, 0); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("101st request: %v, want ErrQueueFull", err)
	}
	for _, want := range []ClassState{
		{Name: "login", Kind: Transaction, Utility: 3650, Queued: 60, Enqueued: 60},
		{Name: "main", Kind: Browsing, Utility: 27, Queued: 40, Enqueued: 42, Dispatched: 2},
		{Name: "search", Kind: Browsing, Utility: 36, Refused: 1},
		{Name: "confirm", Kind: Transaction, Utility: 5000, Enqueued: 1, Dispatched: 1},
	} {
		if got := lpState(t, p, want.Name); got != want {
			t.Fatalf("snapshot %+v, want %+v", got, want)
		}
	}
	small := newLifoPriT(t, LifoPriConfig{Mode: ModeSingleFIFO, SingleCap: 2})
	lpEnqueue(t, small, "main", 2, 0, &id)
	if err := small.Enqueue(Request{Customer: "confirm"}, 0); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("SingleCap 2: third request %v", err)
	}
}

func TestLifoPriExpire(t *testing.T) {
	for _, mode := range []Mode{ModeLifoPri, ModeEightFIFO, ModeSingleFIFO} {
		t.Run(mode.String(), func(t *testing.T) {
			p := newLifoPriT(t, LifoPriConfig{Mode: mode, QueueTimeout: 100 * time.Millisecond})
			p.SetUtilization(1, 0) // LIFO where the mode allows it
			var id RequestID
			lpEnqueue(t, p, "search", 1, 0, &id)     // 1 at 0
			lpEnqueue(t, p, "login", 1, 10*ms, &id)  // 2 at 10
			lpEnqueue(t, p, "search", 1, 20*ms, &id) // 3 at 20
			lpEnqueue(t, p, "main", 1, 30*ms, &id)   // 4 at 30
			lpEnqueue(t, p, "search", 1, 40*ms, &id) // 5 at 40
			var expired []RequestID
			collect := func(r Request) { expired = append(expired, r.ID) }
			if at, ok := p.NextExpiry(); !ok || at != 100*ms+1 {
				t.Fatalf("NextExpiry %d %v, want just after 100 ms", at, ok)
			}
			p.Expire(100*ms, collect) // nothing has waited more than 100 ms
			if len(expired) != 0 {
				t.Fatalf("expired %v at 100 ms", expired)
			}
			p.Expire(125*ms, collect) // waited 125, 115, 105 ms
			if want := []RequestID{1, 2, 3}; !slices.Equal(expired, want) {
				t.Fatalf("expired %v at 125 ms, want %v", expired, want)
			}
			if at, ok := p.NextExpiry(); !ok || at != 130*ms+1 {
				t.Fatalf("NextExpiry %d %v after expiring, want just after 130 ms (request 4's)", at, ok)
			}
			if p.Len() != 2 || lpState(t, p, "search").Expired != 2 || lpState(t, p, "search").Queued != 1 {
				t.Fatalf("after Expire: Len %d, search %+v", p.Len(), lpState(t, p, "search"))
			}
			served := idsOf(lpDrain(t, p, 2))
			if want := []RequestID{5, 4}; mode == ModeSingleFIFO {
				want = []RequestID{4, 5}
				if !slices.Equal(served, want) {
					t.Fatalf("served %v, want %v", served, want)
				}
			} else if !slices.Equal(served, want) {
				t.Fatalf("served %v, want %v", served, want)
			}
		})
	}
	p := newLifoPriT(t, LifoPriConfig{})
	var id RequestID
	lpEnqueue(t, p, "main", 3, 0, &id)
	p.Expire(int64(time.Hour), func(r Request) { t.Fatalf("expired %+v without a QueueTimeout", r) })
	if at, ok := p.NextExpiry(); ok {
		t.Fatalf("NextExpiry %d without a QueueTimeout", at)
	}
	if p.Len() != 3 {
		t.Fatalf("Len %d", p.Len())
	}
}

// Under LIFO the newest requests leave from the back, so the front of a
// queue is still its oldest request and Expire finds it.
func TestLifoPriExpireAfterLIFOService(t *testing.T) {
	p := newLifoPriT(t, LifoPriConfig{QueueTimeout: 50 * time.Millisecond})
	p.SetUtilization(1, 0)
	var id RequestID
	for i := range 6 {
		lpEnqueue(t, p, "browse", 1, int64(i)*10*ms, &id) // id i+1 at 10i ms
	}
	if got := idsOf(lpDrain(t, p, 2)); !slices.Equal(got, []RequestID{6, 5}) {
		t.Fatalf("LIFO served %v", got)
	}
	var expired []RequestID
	p.Expire(75*ms, func(r Request) { expired = append(expired, r.ID) }) // waited 75, 65, 55, 45
	if !slices.Equal(expired, []RequestID{1, 2, 3}) {
		t.Fatalf("expired %v, want [1 2 3]", expired)
	}
}

func TestLifoPriConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  LifoPriConfig
		want string
	}{
		{LifoPriConfig{Classes: []Class{}}, "Classes: need at least one"},
		{LifoPriConfig{Classes: []Class{{Name: "x", Kind: Browsing}}}, "Classes[0].Utility"},
		{LifoPriConfig{Upper: 0.8, Lower: 0.9}, "Lower: 0.9 is above Upper 0.8"},
		{LifoPriConfig{Lower: 0.99}, "Lower: 0.99 is above Upper 0.95"},
		{LifoPriConfig{Upper: -1}, "Upper"},
		{LifoPriConfig{Mode: 3}, "Mode: unknown Mode(3)"},
		{LifoPriConfig{SingleCap: -1}, "SingleCap"},
		{LifoPriConfig{QueueTimeout: -1}, "QueueTimeout"},
	} {
		_, err := NewLifoPri(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one containing %q", tc.cfg, err, tc.want)
		}
	}
}
