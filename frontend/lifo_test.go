package frontend

import (
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
)

// newQueueDaemon is a daemon with its engine and queues but no link or
// control socket: enough to drive request classification, queueing,
// slot accounting and the LIFO-Pri timers by hand.
func newQueueDaemon(t *testing.T, cfg Config, start int64) *Daemon {
	t.Helper()
	cfg.setDefaults()
	qs, err := buildQueues(&cfg, start)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := splice.NewFrontEnd(splice.FrontEndConfig{
		VIPs: []netip.Addr{netip.MustParseAddr("198.18.0.100")}, Ports: cfg.Ports,
		HandoffAddr: netip.MustParseAddr("198.18.0.101"),
	})
	if err != nil {
		t.Fatal(err)
	}
	l, peer := link.NewMemPair(16)
	t.Cleanup(func() { l.Close(); peer.Close() })
	return &Daemon{
		link: l, rawLink: l, ctl: &controlConn{},
		cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil)), engine: eng,
		queues: qs.list, byPort: qs.byPort, credit: qs.credit, lifo: qs.lifo,
		custs: make(map[string]*customerStats), disp: sched.NewDispatcher(),
		backends: make(map[uint32]*backendState), dispatched: make(map[splice.FlowID]uint32),
		inService: make(map[splice.FlowID]serving), followUp: make(map[splice.FlowID]bool),
		parked: make(map[uint32][]parkedReq), pending: make(map[splice.FlowID]*pendingSplice),
		epoch: time.Unix(0, start),
	}
}

func requestEvent(flow int, port uint16, host, path string) splice.Event {
	return splice.Event{Kind: splice.EvRequest, Flow: splice.FlowID(flow),
		Request: &splice.RequestInfo{Method: "GET", Host: host, Path: path, Port: port}}
}

func TestBuildQueuesOnePolicyPerKind(t *testing.T) {
	cfg := Config{Ports: []uint16{80, 81, 82, 83, 84}, Listeners: []Listener{
		{80, "lifo-pri"}, {81, "eight-fifo"}, {82, "single-fifo"}, {83, "lifo-pri"}, {84, "fifo"},
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
	if _, err := buildQueues(&Config{Listeners: []Listener{{80, "lifo"}}}, 0); err == nil ||
		!strings.Contains(err.Error(), "lifo-pri") {
		t.Errorf("unknown policy: %v", err)
	}
	bad := Config{Listeners: []Listener{{80, "lifo-pri"}}, Lifo: LifoConfig{Fallback: "nowhere"}}
	if _, err := buildQueues(&bad, 0); err == nil {
		t.Error("a fallback class that does not exist was accepted")
	}
}

// Requests on a class-based listener are classified by path, counted per
// class, and refused with 503 once their class's queue is full; those on
// a FIFO listener keep the Host's customer.
func TestLifoListenerClassifiesByPath(t *testing.T) {
	classes := sched.DefaultClasses()
	classes[7].QueueCap = 2 // confirm
	d := newQueueDaemon(t, Config{Ports: []uint16{80, 81},
		Listeners: []Listener{{80, "lifo-pri"}, {81, "fifo"}}, Lifo: LifoConfig{Classes: classes}}, 1e9)
	now := splice.Time(2e9)
	d.request(requestEvent(1, 80, "shop.example", "/search?q=x"), now)
	d.request(requestEvent(2, 80, "shop.example", "/nowhere"), now)
	for i := 0; i < 3; i++ {
		d.request(requestEvent(10+i, 80, "shop.example", "/confirm"), now)
	}
	d.request(requestEvent(20, 81, "shop.example", "/confirm"), now)

	st := d.status()
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
	var b strings.Builder
	writeCustomerMetrics(&b, &st)
	if !strings.Contains(b.String(), `qsplice_customer_rejected_total{customer="confirm",reason="queue-full"} 1`) {
		t.Errorf("metrics lack the per-class rejection:\n%s", b.String())
	}
}

// Back-end slots taken and freed drive the meter; at the end of each
// interval the utilization turns lifo-pri's browsing queues LIFO above
// Upper and FIFO again below Lower.
func TestUtilizationDrivesLifo(t *testing.T) {
	const sec = int64(time.Second)
	d := newQueueDaemon(t, Config{Ports: []uint16{80}, Listeners: []Listener{{80, "lifo-pri"}},
		Lifo: LifoConfig{Interval: time.Second}}, 0)
	d.backends[1] = &backendState{id: 1, alive: true, capacity: 2}
	d.disp.AddBackend(1, 2, []uint16{80})
	d.disp.SetAlive(1, true)
	d.lifoTimers(0)
	r := sched.Request{Customer: "main"}
	d.startServing(1, 1, r, 0)
	d.startServing(2, 1, r, 0)
	d.markSent(1, d.backends[1], 0) // the requests went out on C2
	d.markSent(2, d.backends[1], 0)
	d.lifoTimers(sec / 2)
	if d.lifo.last != 0 || d.lifo.lifo() {
		t.Fatal("the interval ended early")
	}
	d.lifoTimers(sec) // both slots busy all along: u = 1
	if d.lifo.last != 1 || !d.lifo.lifo() {
		t.Fatalf("utilization %v, lifo %v: want 1 and LIFO", d.lifo.last, d.lifo.lifo())
	}
	d.requestDone(1, true, 0, splice.Time(sec))
	d.lifoTimers(2 * sec) // one slot of two: u = 0.5
	if d.lifo.last != 0.5 || d.lifo.lifo() {
		t.Fatalf("utilization %v, lifo %v: want 0.5 and FIFO", d.lifo.last, d.lifo.lifo())
	}
	if st := d.status(); st.Lifo.SlotsIn != 1 || st.Lifo.Utilization != 0.5 {
		t.Errorf("status lifo = %+v", *st.Lifo)
	}
	// A dead back-end's capacity leaves the meter at the next tick.
	d.refundFlow(2, splice.Time(2*sec))
	d.backends[1].alive = false
	d.lifoTimers(2*sec + 1)
	d.lifoTimers(3 * sec)
	if d.lifo.last != 0 || d.lifo.meter.InUse() != 0 {
		t.Errorf("after the back-end died: utilization %v, %d slots in use", d.lifo.last, d.lifo.meter.InUse())
	}
}

// Queued requests of a class-based policy expire with 503 like credit ones.
func TestLifoQueueTimeout(t *testing.T) {
	d := newQueueDaemon(t, Config{Ports: []uint16{80}, Listeners: []Listener{{80, "single-fifo"}},
		Lifo: LifoConfig{QueueTimeout: time.Second}}, 0)
	d.request(requestEvent(1, 80, "", "/login"), 0)
	d.expire(splice.Time(time.Second))
	if d.stats("login").rejected["queue-timeout"] != 0 {
		t.Fatal("expired at exactly the timeout")
	}
	d.expire(splice.Time(time.Second + 1))
	if got := d.stats("login").rejected["queue-timeout"]; got != 1 || d.byPort[80].policy.Len() != 0 {
		t.Errorf("%d queue timeouts, %d still queued; want 1 and 0", got, d.byPort[80].policy.Len())
	}
}
