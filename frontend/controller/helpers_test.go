package controller

// Test helpers: a fake engine that keeps just enough flow state to answer
// the controller's calls the way splice.FrontEnd does (and to fail them
// when the real one would), and a harness that feeds the controller at
// explicit times and collects what it produced.

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

const (
	ms  = splice.Time(time.Millisecond)
	sec = splice.Time(time.Second)
	// t0 is an ordinary start time.
	t0 = 100 * sec
)

// fakeFlow is a flow as the fake engine sees it.
type fakeFlow struct {
	state    string // queued, connecting, splice-wait, held, spliced, answered, closed
	backend  uint32
	waiting  bool // a follow-up waits for Admit or RejectFollowUp
	refused  int  // status a follow-up was refused with
	answered int  // status of the engine's own answer
}

// fakeEngine implements Engine. Calls are logged as short strings, such
// as "dispatch 1 b2" or "abort 3".
type fakeEngine struct {
	flows map[splice.FlowID]*fakeFlow
	calls []string
	// failAdmit makes Admit fail, as when the client reset meanwhile.
	failAdmit bool
	// failRewrite makes Rewrite fail with it (issue 10).
	failRewrite error
}

// Rewrite (controller.Rewriter) logs the path a queued request or a
// waiting follow-up is to be sent with.
func (e *fakeEngine) Rewrite(id splice.FlowID, path []byte) error {
	e.call("rewrite %d %s", id, path)
	f := e.flows[id]
	switch {
	case f == nil:
		return splice.ErrNoFlow
	case f.state != "queued" && !(f.state == "spliced" && f.waiting):
		return splice.ErrFlowState
	}
	return e.failRewrite
}

func newFakeEngine() *fakeEngine { return &fakeEngine{flows: make(map[splice.FlowID]*fakeFlow)} }

func (e *fakeEngine) call(format string, a ...any) {
	e.calls = append(e.calls, fmt.Sprintf(format, a...))
}

func (e *fakeEngine) flow(id splice.FlowID, states ...string) (*fakeFlow, error) {
	f := e.flows[id]
	switch {
	case f == nil:
		return nil, splice.ErrNoFlow
	case !slices.Contains(states, f.state):
		return nil, splice.ErrFlowState
	}
	return f, nil
}

func (e *fakeEngine) Dispatch(id splice.FlowID, b splice.Backend, now splice.Time, out *splice.Output) error {
	return e.dispatch("dispatch", id, b)
}

// DispatchCarrying is Dispatch, noted as such; the fake's Splices carry
// nothing.
func (e *fakeEngine) DispatchCarrying(id splice.FlowID, b splice.Backend, now splice.Time, out *splice.Output) error {
	return e.dispatch("dispatch-carrying", id, b)
}

func (e *fakeEngine) dispatch(call string, id splice.FlowID, b splice.Backend) error {
	e.call(call+" %d b%d", id, b.ID)
	f, err := e.flow(id, "queued")
	if err != nil {
		return err
	}
	f.state, f.backend = "connecting", b.ID
	return nil
}

func (e *fakeEngine) Reject(id splice.FlowID, status int, reason string, retryAfter time.Duration, now splice.Time, out *splice.Output) error {
	e.call("reject %d %d", id, status)
	f, err := e.flow(id, "queued", "held")
	if err != nil {
		return err
	}
	if f.state == "held" { // the real engine reports the back-end part closed at once
		out.Events = append(out.Events, splice.Event{Kind: splice.EvClosed, Flow: id, Backend: f.backend, Reason: splice.CloseHandoffFailed})
	}
	f.state, f.answered = "answered", status
	out.Events = append(out.Events, splice.Event{Kind: splice.EvAnswered, Flow: id, Status: status, Detail: reason})
	return nil
}

func (e *fakeEngine) RejectFollowUp(id splice.FlowID, status int, reason string, retryAfter time.Duration, now splice.Time, out *splice.Output) error {
	e.call("reject-follow-up %d %d", id, status)
	f, err := e.flow(id, "spliced")
	if err != nil {
		return err
	}
	if !f.waiting {
		return splice.ErrNotWaiting
	}
	f.waiting, f.refused = false, status
	return nil
}

func (e *fakeEngine) HoldSplice(id splice.FlowID, now splice.Time) error {
	e.call("hold %d", id)
	f, err := e.flow(id, "splice-wait")
	if err != nil {
		return err
	}
	f.state = "held"
	return nil
}

func (e *fakeEngine) SpliceAcked(id splice.FlowID, now splice.Time, out *splice.Output) error {
	e.call("splice-acked %d", id)
	f, err := e.flow(id, "splice-wait", "held")
	if err != nil {
		return err
	}
	f.state = "spliced"
	return nil
}

func (e *fakeEngine) Admit(id splice.FlowID, now splice.Time, out *splice.Output) error {
	e.call("admit %d", id)
	f, err := e.flow(id, "spliced")
	if err != nil {
		return err
	}
	if !f.waiting || e.failAdmit {
		return splice.ErrNotWaiting
	}
	f.waiting = false
	return nil
}

func (e *fakeEngine) Abort(id splice.FlowID, now splice.Time, out *splice.Output) error {
	e.call("abort %d", id)
	f, err := e.flow(id, "queued", "connecting", "splice-wait", "held", "spliced", "answered")
	if err != nil {
		return err
	}
	f.state = "closed"
	out.Events = append(out.Events, splice.Event{Kind: splice.EvClosed, Flow: id, Backend: f.backend, Reason: splice.CloseAborted})
	return nil
}

// RedispatchRefused (Redispatcher): the flow goes back to connecting.
func (e *fakeEngine) RedispatchRefused(id splice.FlowID, carry bool, now splice.Time, out *splice.Output) error {
	e.call("redispatch %d carry %v", id, carry)
	f, err := e.flow(id, "splice-wait", "spliced")
	if err != nil {
		return err
	}
	f.state = "connecting"
	return nil
}

// DropPool (PoolDropper) is called when a back-end restarts.
func (e *fakeEngine) DropPool(backend uint32, now splice.Time, out *splice.Output) int {
	e.call("drop-pool b%d", backend)
	return 0
}

func (e *fakeEngine) ResponseEnded(id splice.FlowID, re splice.ResponseEnd, now splice.Time, out *splice.Output) error {
	_, err := e.flow(id, "spliced")
	return err
}

// takeCalls returns the calls since the last takeCalls.
func (e *fakeEngine) takeCalls() []string {
	c := e.calls
	e.calls = nil
	return c
}

// harness drives a controller over a fake engine.
type harness struct {
	t   *testing.T
	c   *Controller
	eng *fakeEngine
	out Output
	// method is the method of the requests request and requestOn make
	// ("" is GET).
	method string
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	eng := newFakeEngine()
	c, err := New(cfg, eng, t0)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, c: c, eng: eng}
}

// creditConfig is a credit listener on port 80 with the given customers,
// classified by Host "<name>.example".
func creditConfig(customers ...sched.CustomerSpec) Config {
	return Config{
		Ports: []uint16{80}, Listeners: []Listener{{Port: 80, Policy: "credit"}},
		Credit: sched.CreditConfig{Customers: customers, Default: customers[0].Name},
		Classify: func(host string) string {
			name, _ := strings.CutSuffix(host, ".example")
			return name
		},
	}
}

var shimAddr = netip.MustParseAddrPort("198.18.0.21:7401")

// register makes back-end id known with the given capacity, serving
// every port.
func (h *harness) register(id uint32, capacity int, incarnation uint64, now splice.Time) *Output {
	return h.control(&proto.Register{BackendID: id, IP: backendIP(id), MAC: [6]byte{2, 0, 0, 0, 0, byte(id)},
		ControlPort: 7401, Capacity: uint16(capacity), Incarnation: incarnation}, now)
}

func backendIP(id uint32) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 0, byte(20 + id)}) }

func backendCtl(id uint32) netip.AddrPort { return netip.AddrPortFrom(backendIP(id), 7401) }

// control hands the controller m as its back-end's shim sends it: from
// the control address it registers or registered.
func (h *harness) control(m proto.Message, now splice.Time) *Output {
	from := backendCtl(proto.BackendOf(m))
	if r, ok := m.(*proto.Register); ok {
		from = netip.AddrPortFrom(r.IP, r.ControlPort)
	}
	return h.controlFrom(from, m, now)
}

func (h *harness) controlFrom(from netip.AddrPort, m proto.Message, now splice.Time) *Output {
	h.out.Reset()
	h.c.Control(from, m, now, &h.out)
	return &h.out
}

func (h *harness) tick(now splice.Time) *Output {
	h.out.Reset()
	h.c.Tick(now, &h.out)
	return &h.out
}

// event feeds an event as if the engine had just reported it.
func (h *harness) event(ev splice.Event, now splice.Time) *Output {
	h.out.Reset()
	h.out.Engine.Events = append(h.out.Engine.Events, ev)
	h.c.HandleEvents(now, &h.out)
	return &h.out
}

// request has the engine report flow's first request for host on port
// 80.
func (h *harness) request(flow splice.FlowID, host string, now splice.Time) *Output {
	return h.requestOn(flow, 80, host, "/", now)
}

func (h *harness) requestOn(flow splice.FlowID, port uint16, host, path string, now splice.Time) *Output {
	h.eng.flows[flow] = &fakeFlow{state: "queued"}
	method := h.method
	if method == "" {
		method = "GET"
	}
	return h.event(splice.Event{Kind: splice.EvRequest, Flow: flow,
		Request: &splice.RequestInfo{Method: method, Host: host, Path: path, Port: port}}, now)
}

// followUp has the engine report a follow-up request on spliced flow.
func (h *harness) followUp(flow splice.FlowID, host string, now splice.Time) *Output {
	f := h.eng.flows[flow]
	f.waiting = true
	return h.event(splice.Event{Kind: splice.EvRequest, Flow: flow, Backend: f.backend, FollowUp: true,
		Request: &splice.RequestInfo{Method: "GET", Host: host, Path: "/", Port: 80}}, now)
}

// connected has the engine report that flow's C2 is up: EvSplice.
func (h *harness) connected(flow splice.FlowID, now splice.Time) *Output {
	return h.connectedWith(flow, proto.Splice{RequestID: uint64(flow)}, now)
}

// connectedWith is connected with the EvSplice carrying sp.
func (h *harness) connectedWith(flow splice.FlowID, sp proto.Splice, now splice.Time) *Output {
	f := h.eng.flows[flow]
	if f.state != "connecting" {
		h.t.Fatalf("flow %d is %s, not connecting", flow, f.state)
	}
	f.state = "splice-wait"
	return h.event(splice.Event{Kind: splice.EvSplice, Flow: flow, Backend: f.backend, Splice: sp}, now)
}

// closed has the engine report flow gone.
func (h *harness) closed(flow splice.FlowID, reason splice.CloseReason, now splice.Time) *Output {
	f := h.eng.flows[flow]
	f.state = "closed"
	return h.event(splice.Event{Kind: splice.EvClosed, Flow: flow, Backend: f.backend, Reason: reason}, now)
}

func (h *harness) spliceAck(flow splice.FlowID, now splice.Time) *Output {
	return h.control(&proto.SpliceAck{RequestID: h.c.requestID(flow), BackendID: h.eng.flows[flow].backend, OK: true}, now)
}

func (h *harness) feedback(flow splice.FlowID, service time.Duration, now splice.Time) *Output {
	return h.control(&proto.Feedback{BackendID: h.eng.flows[flow].backend, RequestID: h.c.requestID(flow), ServiceTime: service}, now)
}

// spliced takes flow's request, already dispatched, through C2 set-up and
// the shim's confirmation at now.
func (h *harness) spliced(flow splice.FlowID, now splice.Time) {
	h.t.Helper()
	h.connected(flow, now)
	h.spliceAck(flow, now)
	if st := h.eng.flows[flow].state; st != "spliced" {
		h.t.Fatalf("flow %d is %s after its SpliceAck, want spliced", flow, st)
	}
}

// wantCalls checks the engine calls since the last check.
func (h *harness) wantCalls(want ...string) {
	h.t.Helper()
	if got := h.eng.takeCalls(); !slices.Equal(got, want) {
		h.t.Fatalf("engine calls %q, want %q", got, want)
	}
}

// customer returns the named customer's status.
func (h *harness) customer(name string, now splice.Time) CustomerStatus {
	h.t.Helper()
	for _, c := range h.c.Status(now).Customers {
		if c.Name == name {
			return c
		}
	}
	h.t.Fatalf("no customer %q in the status", name)
	return CustomerStatus{}
}

func (h *harness) backend(id uint32) BackendStatus {
	h.t.Helper()
	for _, b := range h.c.Status(h.c.now).Backends {
		if b.ID == id {
			return b
		}
	}
	h.t.Fatalf("no back-end %d in the status", id)
	return BackendStatus{}
}

// datagrams describes out's datagrams as "Type->backend-ip".
func datagrams(out *Output) []string {
	var s []string
	for _, d := range out.Datagrams {
		s = append(s, fmt.Sprintf("%s->%v", d.Msg.Type(), d.To.Addr()))
	}
	return s
}

func hasLog(out *Output, msg string) bool {
	return slices.ContainsFunc(out.Logs, func(r LogRecord) bool { return strings.Contains(r.Msg, msg) })
}
