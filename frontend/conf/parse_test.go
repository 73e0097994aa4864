package conf

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice/wire"
)

// minimal is the smallest valid file; bad-file cases append to it, so
// their first line is line 5.
const (
	minimal = `link: {interface: eth0}
handoff: 198.18.0.101
control: {listen: 198.18.0.2:7400, key_file: key}
` + minimalListeners
	minimalListeners = "listeners: [{vip: 198.18.0.100, port: 80}]\n"
)

func TestExampleParses(t *testing.T) {
	f, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if ws := f.Check(); len(ws) != 0 {
		t.Errorf("the example draws warnings: %v", ws)
	}
	want := &File{
		Name:    "testdata/example.yaml",
		Link:    Link{Interface: "fe0", Type: LinkAFPacket},
		Handoff: netip.MustParseAddr("198.18.0.101"),
		Admin:   netip.MustParseAddrPort("198.18.0.2:7404"),
		Control: Control{Listen: netip.MustParseAddrPort("198.18.0.2:7400"), KeyFile: "/run/qsplice/lab/key"},
		TCP: TCP{Linger: 5 * time.Second, IdleTimeout: 15 * time.Minute, HeadTimeout: 10 * time.Second, MaxHead: 8192, MaxFlows: DefaultMaxFlows, MaxFlowsPerSource: DefaultMaxFlowsPerSource,
			MaxPortsPerSource: DefaultMaxPortsPerSource, FlowLifetime: DefaultFlowLifetime, HalfCloseTimeout: DefaultHalfCloseTimeout},
		Backends: Backends{ConcurrencyCap: 5, Expected: 5, KeepaliveInterval: time.Second,
			SpliceRetry: 250 * time.Millisecond, HandoffAhead: 2},
		Scheduler: Scheduler{Cycle: 10 * time.Millisecond, TypicalServiceTime: 20 * time.Millisecond,
			NormalSize: SizeRange{0, 16384}, BalanceLimit: 100 * time.Millisecond, DebtLimit: time.Second,
			QueueTimeout: 2 * time.Second, CapWindow: time.Second, QueueCapacity: 1000, RetryAfter: time.Second,
			DefaultCustomer: "other"},
		Listeners: []Listener{
			{VIP: netip.MustParseAddr("198.18.0.100"), Port: 80, Policy: PolicyCredit},
			{VIP: netip.MustParseAddr("198.18.0.100"), Port: 8080, Policy: PolicyCredit},
		},
		Customers: []Customer{
			{Name: "A", Domains: []string{"a.example", "*.a.example"}, Reservation: 500, Weight: 1, QueueCapacity: 1000},
			{Name: "B", Domains: []string{"b.example"}, Reservation: 100, Weight: 1, QueueCapacity: 1000},
			{Name: "C", Domains: []string{"c.example", "www.c.example"}, Reservation: 400, Cap: 600, Weight: 2, QueueCapacity: 1000},
			{Name: "D", Domains: []string{"d.example"}, Reservation: 150, Weight: 1, QueueCapacity: 200},
			{Name: "other", Weight: 1, QueueCapacity: 1000},
		},
		Classes:  sched.DefaultClasses(),
		Lifo:     defaultLifo,
		Feedback: defaultFeedback(),
	}
	assertFile(t, f, want)
}

// assertFile compares the exported fields.
func assertFile(t *testing.T, got, want *File) {
	t.Helper()
	g, w := *got, *want
	g.lines, g.exact, g.wildcard = nil, nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Errorf("parsed\n%+v\nwant\n%+v", g, w)
	}
}

func TestDefaults(t *testing.T) {
	f, err := Parse("front.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	want := &File{
		Name:    "front.yaml",
		Link:    Link{Interface: "eth0", Type: DefaultLinkType},
		Handoff: netip.MustParseAddr("198.18.0.101"),
		Control: Control{Listen: netip.MustParseAddrPort("198.18.0.2:7400"), KeyFile: "key"},
		TCP: TCP{Linger: DefaultLinger, IdleTimeout: DefaultIdleTimeout, HeadTimeout: DefaultHeadTimeout, MaxHead: DefaultMaxHead, MaxFlows: DefaultMaxFlows, MaxFlowsPerSource: DefaultMaxFlowsPerSource,
			MaxPortsPerSource: DefaultMaxPortsPerSource, FlowLifetime: DefaultFlowLifetime, HalfCloseTimeout: DefaultHalfCloseTimeout},
		Backends: Backends{KeepaliveInterval: DefaultKeepaliveInterval,
			SpliceRetry: DefaultSpliceRetry, HandoffAhead: DefaultHandoffAhead},
		Scheduler: Scheduler{Cycle: DefaultCycle, TypicalServiceTime: DefaultTypicalService,
			NormalSize: SizeRange{0, DefaultNormalSizeMax}, BalanceLimit: DefaultBalanceLimit, DebtLimit: DefaultDebtLimit,
			QueueTimeout: DefaultQueueTimeout, CapWindow: DefaultCapWindow, QueueCapacity: DefaultQueueCapacity,
			RetryAfter:      DefaultRetryAfter,
			DefaultCustomer: DefaultCustomerName},
		Listeners: []Listener{{VIP: netip.MustParseAddr("198.18.0.100"), Port: 80, Policy: DefaultPolicy}},
		Customers: []Customer{{Name: DefaultCustomerName, Weight: 1, QueueCapacity: DefaultQueueCapacity, Implicit: true}},
		Classes:   sched.DefaultClasses(),
		Lifo:      defaultLifo,
		Feedback:  defaultFeedback(),
	}
	assertFile(t, f, want)
	if ws := f.Check(); len(ws) != 0 {
		t.Errorf("a file without customers draws warnings: %v", ws)
	}
}

// Null values and empty sections mean "the default", like absent keys.
func TestNullMeansDefault(t *testing.T) {
	f, err := Parse("front.yaml", []byte(minimal+"admin:\ncapture: ~\ntcp:\nscheduler: {cycle: null, normal_size: }\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Admin.IsValid() || f.Capture != "" || f.TCP.Linger != DefaultLinger || f.Scheduler.Cycle != DefaultCycle ||
		f.Scheduler.NormalSize.Max != DefaultNormalSizeMax {
		t.Errorf("null values did not give defaults: %+v", f)
	}
}

func TestValuesAndUnits(t *testing.T) {
	text := strings.Replace(minimal, "link: {interface: eth0}", `link: {interface: tap0, type: tap, mac: "02:00:00:AA:bb:01"}`, 1)
	f, err := Parse("front.yaml", []byte(text+`tcp: {max_head: 1k, linger: 1m30s, cookie_seed: lab}
scheduler: {normal_size: {min: 512, max: 1M}, retry_after: 0s, cap_window: 5s}
customers:
  - {name: x_1.y-Z, domains: ["WWW.Example.COM."], reservation: 2.5, cap: 1e3, weight: 0.5, queue_capacity: 7}
`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Link != (Link{Interface: "tap0", Type: LinkTAP, MAC: wire.MAC{2, 0, 0, 0xaa, 0xbb, 1}}) {
		t.Errorf("link = %+v", f.Link)
	}
	if f.TCP.MaxHead != 1024 || f.TCP.Linger != 90*time.Second || f.TCP.CookieSeed != "lab" {
		t.Errorf("tcp = %+v", f.TCP)
	}
	if s := f.Scheduler; s.NormalSize != (SizeRange{512, 1 << 20}) || s.RetryAfter != 0 || s.CapWindow != 5*time.Second {
		t.Errorf("scheduler = %+v", s)
	}
	want := Customer{Name: "x_1.y-Z", Domains: []string{"www.example.com"}, Reservation: 2.5, Cap: 1000, Weight: 0.5, QueueCapacity: 7}
	if !reflect.DeepEqual(f.Customers[0], want) {
		t.Errorf("customer = %+v, want %+v", f.Customers[0], want)
	}
}

func TestLoadResolvesRelativePaths(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "front.yaml")
	text := strings.Replace(minimal, "key_file: key", "key_file: keys/lab", 1) + "capture: out.pcap\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Control.KeyFile != filepath.Join(dir, "keys/lab") || f.Capture != filepath.Join(dir, "out.pcap") {
		t.Errorf("key_file %q, capture %q: not relative to %s", f.Control.KeyFile, f.Capture, dir)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want ErrNotExist", err)
	}
}

// Every problem is reported, in file order, and errors.As reaches them.
func TestAllErrorsCollected(t *testing.T) {
	_, err := Parse("front.yaml", []byte(`scheduler: {cycle: 0s}
link: {interface: eth0, type: raw}
handoff: ::1
control: {listen: 198.18.0.2:7400, key_file: k}
listeners: [{vip: 198.18.0.100, port: 0}]
`))
	want := []string{
		`front.yaml:1: scheduler.cycle: must be > 0`,
		`front.yaml:2: link.type: "raw" is not a link type (known: afpacket, tap)`,
		`front.yaml:3: handoff: ::1 is not an IPv4 address`,
		`front.yaml:5: listeners[0].port: 0 is out of range 1..65535`,
	}
	assertErrors(t, err, want)
	var e *Error
	if !errors.As(err, &e) || e.Line != 1 || e.Path != "scheduler.cycle" {
		t.Errorf("errors.As gave %+v", e)
	}
}

func assertErrors(t *testing.T, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	got := strings.Split(err.Error(), "\n")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

var defaultLifo = Lifo{Upper: DefaultLifoUpper, Lower: DefaultLifoLower, Interval: DefaultLifoInterval,
	SingleCapacity: DefaultLifoSingleCapacity, QueueTimeout: DefaultLifoQueueTimeout}

func TestClassesAndLifo(t *testing.T) {
	text := strings.Replace(minimal, minimalListeners, "listeners:\n"+
		"  - {vip: 198.18.0.100, port: 80, policy: lifo-pri}\n"+
		"  - {vip: 198.18.0.100, port: 81, policy: eight-fifo}\n"+
		"  - {vip: 198.18.0.100, port: 82, policy: single-fifo}\n", 1)
	f, err := Parse("front.yaml", []byte(text+`classes:
  - {name: home, kind: browsing, utility: 1, patterns: ["/"]}
  - {name: buy, kind: transaction, utility: 100, queue_capacity: 3, patterns: ["/buy*", /pay]}
lifo: {upper: 0.9, lower: 0.5, interval: 250ms, single_capacity: 7, queue_timeout: 3s}
`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []Policy{PolicyLifoPri, PolicyEightFIFO, PolicySingleFIFO} {
		if got := f.Listeners[i].Policy; got != want || !got.UsesClasses() {
			t.Errorf("listeners[%d].policy = %q, want %q using classes", i, got, want)
		}
	}
	wantClasses := []sched.Class{
		{Name: "home", Kind: sched.Browsing, Utility: 1, QueueCap: sched.DefaultBrowsingCap, Patterns: []string{"/"}},
		{Name: "buy", Kind: sched.Transaction, Utility: 100, QueueCap: 3, Patterns: []string{"/buy*", "/pay"}},
	}
	if !reflect.DeepEqual(f.Classes, wantClasses) {
		t.Errorf("classes = %+v\nwant %+v", f.Classes, wantClasses)
	}
	if want := (Lifo{Upper: 0.9, Lower: 0.5, Interval: 250 * time.Millisecond, SingleCapacity: 7, QueueTimeout: 3 * time.Second}); f.Lifo != want {
		t.Errorf("lifo = %+v, want %+v", f.Lifo, want)
	}
	if f.FallbackClass() != "home" {
		t.Errorf("fallback class %q, want the first one", f.FallbackClass())
	}
	// What Parse accepts, the scheduler accepts too.
	if _, err := sched.NewClassifier(f.Classes, f.FallbackClass()); err != nil {
		t.Errorf("sched refuses the parsed classes: %v", err)
	}
	if ws := f.Check(); len(ws) != 0 {
		t.Errorf("warnings: %v", ws)
	}
}

func TestLimitsAndListenerQueueTimeouts(t *testing.T) {
	text := strings.Replace(minimal, minimalListeners, "listeners:\n"+
		"  - {vip: 198.18.0.100, port: 80, policy: fifo, queue_timeout: 3s}\n"+
		"  - {vip: 198.18.0.100, port: 81, policy: lifo-pri}\n", 1)
	f, err := Parse("front.yaml", []byte(text+`tcp:
  max_flows: 0
  max_flows_per_source: 50
  max_ports_per_source: 60
  flow_lifetime: 12s
  half_close_timeout: 2s
`))
	if err != nil {
		t.Fatal(err)
	}
	want := TCP{Linger: DefaultLinger, IdleTimeout: DefaultIdleTimeout, HeadTimeout: DefaultHeadTimeout, MaxHead: DefaultMaxHead,
		MaxFlows: 0, MaxFlowsPerSource: 50, MaxPortsPerSource: 60, FlowLifetime: 12 * time.Second, HalfCloseTimeout: 2 * time.Second}
	if f.TCP != want {
		t.Errorf("tcp = %+v\nwant %+v", f.TCP, want)
	}
	if f.Listeners[0].QueueTimeout != 3*time.Second || f.Listeners[1].QueueTimeout != 0 {
		t.Errorf("listeners %+v", f.Listeners)
	}
}

func TestLifetimeShorterThanHeadAndQueueIsWarned(t *testing.T) {
	text := strings.Replace(minimal, minimalListeners, "listeners:\n"+
		"  - {vip: 198.18.0.100, port: 80, policy: fifo, queue_timeout: 25s}\n", 1)
	f, err := Parse("front.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	ws := f.Check()
	if len(ws) != 1 || !strings.Contains(ws[0].String(), "tcp.flow_lifetime: 30s leaves no time") ||
		!strings.Contains(ws[0].String(), "listeners[0]") {
		t.Errorf("warnings %v", ws)
	}
	f, _ = Parse("front.yaml", []byte(minimal))
	if ws := f.Check(); len(ws) != 0 {
		t.Errorf("defaults warned: %v", ws)
	}
}
