package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

func TestBuildQueuesOnePolicyPerKind(t *testing.T) {
	cfg := Config{Ports: []uint16{80, 81, 82, 83, 84}, Listeners: []Listener{
		{Port: 80, Policy: "lifo-pri"}, {Port: 81, Policy: "eight-fifo"}, {Port: 82, Policy: "single-fifo"}, {Port: 83, Policy: "lifo-pri"}, {Port: 84, Policy: "fifo"},
	}}
	cfg.setDefaults()
	qs, err := buildQueues(&cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs.list) != 4 || qs.lifo == nil || len(qs.lifo.policies) != 3 {
		t.Fatalf("%d queues, %v lifo control: want lifo-pri, eight-fifo, single-fifo and fifo", len(qs.list), qs.lifo)
	}
	if qs.byPort[80] != qs.byPort[83] || qs.byPort[80] == qs.byPort[81] || qs.byPort[80].lifo == nil || qs.byPort[84].lifo != nil {
		t.Errorf("ports do not share policies by kind: %+v", qs.byPort)
	}
	if _, err := New(Config{Listeners: []Listener{{Port: 80, Policy: "lifo"}}}, newFakeEngine(), 0); err == nil ||
		!strings.Contains(err.Error(), "lifo-pri") {
		t.Errorf("unknown policy: %v", err)
	}
	bad := Config{Listeners: []Listener{{Port: 80, Policy: "lifo-pri"}}, Lifo: LifoConfig{Fallback: "nowhere"}}
	if _, err := buildQueues(&bad, 0); err == nil {
		t.Error("a fallback class that does not exist was accepted")
	}
	bad = Config{Listeners: []Listener{{Port: 80, Policy: "lifo-pri"}}, Lifo: LifoConfig{Upper: 0.5, Lower: 0.9}}
	if _, err := buildQueues(&bad, 0); err == nil {
		t.Error("a lower bound above the upper one was accepted")
	}
	bad = Config{Listeners: []Listener{{Port: 80, Policy: "credit"}}, Credit: sched.CreditConfig{Cycle: -1}}
	if _, err := buildQueues(&bad, 0); err == nil {
		t.Error("a negative credit cycle was accepted")
	}
}

// Requests on a class-based listener are classified by path, counted per
// class, and refused with 503 once their class's queue is full; those on
// a FIFO listener keep the Host's customer.
func TestLifoListenerClassifiesByPath(t *testing.T) {
	classes := sched.DefaultClasses()
	classes[7].QueueCap = 2 // confirm
	h := newHarness(t, Config{Ports: []uint16{80, 81},
		Listeners: []Listener{{Port: 80, Policy: "lifo-pri"}, {Port: 81, Policy: "fifo"}}, Lifo: LifoConfig{Classes: classes}})
	now := t0 + sec
	h.requestOn(1, 80, "shop.example", "/search?q=x", now)
	h.requestOn(2, 80, "shop.example", "/nowhere", now)
	for i := 0; i < 3; i++ {
		h.requestOn(splice.FlowID(10+i), 80, "shop.example", "/confirm", now)
	}
	h.requestOn(20, 81, "shop.example", "/confirm", now)
	h.wantCalls("reject 12 503")

	st := h.c.Status(now)
	got := map[string]CustomerStatus{}
	for _, c := range st.Customers {
		got[c.Name] = c
	}
	check := func(name string, offered uint64, queued int, full uint64) {
		t.Helper()
		c := got[name]
		if c.Offered != offered || c.Queued != queued || c.Rejected["queue-full"] != full {
			t.Errorf("%s: offered %d queued %d queue-full %d, want %d %d %d", name, c.Offered, c.Queued,
				c.Rejected["queue-full"], offered, queued, full)
		}
	}
	check("search", 1, 1, 0)
	check("main", 1, 1, 0) // the fallback
	check("confirm", 3, 2, 1)
	check("default", 1, 0, 0) // the FIFO listener classifies by Host
	if st.Queue != 5 {
		t.Errorf("queue length %d, want 5", st.Queue)
	}
	if st.Lifo == nil {
		t.Fatal("no lifo section in the status")
	}
}

// Back-end slots taken and freed drive the meter; at the end of each
// interval the utilization turns lifo-pri's browsing queues LIFO above
// Upper and FIFO again below Lower.
func TestUtilizationDrivesLifo(t *testing.T) {
	cfg := Config{Ports: []uint16{80}, Listeners: []Listener{{Port: 80, Policy: "lifo-pri"}},
		Lifo: LifoConfig{Interval: time.Second}, KeepaliveInterval: time.Hour}
	h := newHarness(t, cfg)
	h.register(1, 2, 1, t0)
	if got := h.c.NextDeadline(); got != t0+sec {
		t.Fatalf("next deadline %v, want the interval's end", got-t0)
	}
	h.requestOn(1, 80, "", "/main", t0)
	h.requestOn(2, 80, "", "/main", t0)
	h.spliced(1, t0) // the requests went out on C2
	h.spliced(2, t0)
	h.tick(t0 + sec/2)
	if h.c.lifo.last != 0 || h.c.lifo.lifo() {
		t.Fatal("the interval ended early")
	}
	h.tick(t0 + sec) // both slots busy all along: u = 1
	if h.c.lifo.last != 1 || !h.c.lifo.lifo() {
		t.Fatalf("utilization %v, lifo %v: want 1 and LIFO", h.c.lifo.last, h.c.lifo.lifo())
	}
	h.closed(1, splice.CloseFIN, t0+sec)
	h.tick(t0 + 2*sec) // one slot of two: u = 0.5
	if h.c.lifo.last != 0.5 || h.c.lifo.lifo() {
		t.Fatalf("utilization %v, lifo %v: want 0.5 and FIFO", h.c.lifo.last, h.c.lifo.lifo())
	}
	if st := h.c.Status(t0 + 2*sec); st.Lifo.SlotsIn != 1 || st.Lifo.Utilization != 0.5 {
		t.Errorf("status lifo = %+v", *st.Lifo)
	}
	// A dead back-end's capacity leaves the meter.
	h.c.backendDead(h.c.backends[1], t0+2*sec, &h.out)
	h.tick(t0 + 3*sec)
	if h.c.lifo.last != 0 || h.c.lifo.meter.InUse() != 0 {
		t.Errorf("after the back-end died: utilization %v, %d slots in use", h.c.lifo.last, h.c.lifo.meter.InUse())
	}
}

// Queued requests of a class-based policy expire with 503 like credit ones.
func TestLifoQueueTimeout(t *testing.T) {
	h := newHarness(t, Config{Ports: []uint16{80}, Listeners: []Listener{{Port: 80, Policy: "single-fifo"}},
		Lifo: LifoConfig{QueueTimeout: time.Second, Interval: time.Hour}})
	h.requestOn(1, 80, "", "/login", t0)
	if got := h.c.NextDeadline(); got != t0+sec+1 {
		t.Fatalf("next deadline %v, want just after the queue timeout", got-t0)
	}
	h.tick(t0 + sec)
	if h.c.stats("login").rejected["queue-timeout"] != 0 {
		t.Fatal("expired at exactly the timeout")
	}
	h.tick(t0 + sec + 1)
	if got := h.c.stats("login").rejected["queue-timeout"]; got != 1 || h.c.byPort[80].policy.Len() != 0 || h.c.byPort[80].hasHead {
		t.Errorf("%d queue timeouts, %d still queued; want 1 and 0", got, h.c.byPort[80].policy.Len())
	}
	h.wantCalls("reject 1 503")
}
