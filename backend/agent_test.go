package backend

import (
	"errors"
	"log/slog"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
)

const (
	testID  = 7
	testInc = 0xfeedface12345678
)

var testFE = netip.MustParseAddrPort("198.18.0.1:7400")

func ms(n int64) splice.Time { return splice.Time(n * int64(time.Millisecond)) }

// agentRig drives an Agent with explicit times and keeps its last output.
type agentRig struct {
	t   *testing.T
	a   *Agent
	out AgentOutput
}

func newAgentRig(t *testing.T, delay time.Duration) *agentRig {
	t.Helper()
	return &agentRig{t: t, a: NewAgent(AgentConfig{
		ID: testID, Addr: netip.MustParseAddr("198.18.0.10"), MAC: [6]byte{2, 0, 0, 0, 0, 10},
		ControlPort: 7401, WebPorts: []uint16{80, 8080}, Capacity: 5, Incarnation: testInc,
		SpliceDelay: delay,
	})}
}

func (r *agentRig) tick(now splice.Time) *AgentOutput {
	r.out.Reset()
	r.a.Tick(now, &r.out)
	return &r.out
}

func (r *agentRig) control(m proto.Message, now splice.Time) *AgentOutput {
	r.out.Reset()
	r.a.Control(testFE, m, now, &r.out)
	return &r.out
}

// sent returns the one message of out, failing unless there is exactly one
// of type T.
func sent[T proto.Message](t *testing.T, out *AgentOutput) T {
	t.Helper()
	if len(out.Send) != 1 {
		t.Fatalf("sent %d messages (%v), want one %T", len(out.Send), types(out.Send), *new(T))
	}
	m, ok := out.Send[0].(T)
	if !ok {
		t.Fatalf("sent %T, want %T", out.Send[0], *new(T))
	}
	return m
}

func types(ms []proto.Message) []string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Type().String())
	}
	return s
}

func quiet(t *testing.T, out *AgentOutput) {
	t.Helper()
	if len(out.Send) != 0 || len(out.Install) != 0 {
		t.Fatalf("want nothing, got send %v install %d", types(out.Send), len(out.Install))
	}
}

func ack(interval time.Duration) *proto.RegisterAck {
	return &proto.RegisterAck{BackendID: testID, Incarnation: testInc, KeepaliveInterval: interval}
}

func echo(seq uint64) *proto.Keepalive {
	return &proto.Keepalive{BackendID: testID, Incarnation: testInc, Seq: seq}
}

// registered brings the rig to the registered state at time at with the
// given keepalive interval.
func (r *agentRig) registered(at splice.Time, interval time.Duration) {
	r.t.Helper()
	sent[*proto.Register](r.t, r.tick(at))
	r.control(ack(interval), at)
	if !r.a.Registered() {
		r.t.Fatal("not registered after RegisterAck")
	}
}

func TestAgentRegistersUntilAcknowledged(t *testing.T) {
	r := newAgentRig(t, 0)
	if d := r.a.NextDeadline(); d != 0 {
		t.Fatalf("first deadline %v, want 0 (register at once)", d)
	}
	reg := sent[*proto.Register](t, r.tick(ms(0)))
	want := &proto.Register{BackendID: testID, IP: netip.MustParseAddr("198.18.0.10"), MAC: [6]byte{2, 0, 0, 0, 0, 10},
		ControlPort: 7401, WebPorts: []uint16{80, 8080}, Capacity: 5, Incarnation: testInc}
	if !reflect.DeepEqual(reg, want) {
		t.Fatalf("Register %+v, want %+v", reg, want)
	}
	if d := r.a.NextDeadline(); d != ms(1000) {
		t.Fatalf("next deadline %v, want 1 s", d)
	}
	quiet(t, r.tick(ms(999)))
	sent[*proto.Register](t, r.tick(ms(1000)))
	sent[*proto.Register](t, r.tick(ms(2000)))
	if r.a.Registered() {
		t.Fatal("registered without an ack")
	}

	// An ack for another incarnation (an earlier run of this shim) or
	// another back-end does not count.
	r.control(&proto.RegisterAck{BackendID: testID, Incarnation: testInc + 1, KeepaliveInterval: time.Second}, ms(2100))
	r.control(&proto.RegisterAck{BackendID: testID + 1, Incarnation: testInc, KeepaliveInterval: time.Second}, ms(2100))
	if r.a.Registered() {
		t.Fatal("registered by a stale ack")
	}
	sent[*proto.Register](t, r.tick(ms(3000)))

	out := r.control(ack(500*time.Millisecond), ms(3100))
	quiet(t, out)
	if !r.a.Registered() {
		t.Fatal("not registered after the ack")
	}
	if len(out.Logs) != 1 || out.Logs[0].Level != slog.LevelInfo {
		t.Fatalf("logs %+v, want one info line", out.Logs)
	}
	st := r.a.Stats()
	if st.Registers != 4 || st.Registrations != 1 || st.Stale != 2 || st.KeepaliveMillis != 500 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAgentKeepaliveIntervalFromAck(t *testing.T) {
	r := newAgentRig(t, 0)
	r.registered(ms(0), 250*time.Millisecond)
	if d := r.a.NextDeadline(); d != ms(250) {
		t.Fatalf("next deadline %v, want 250 ms", d)
	}
	quiet(t, r.tick(ms(249)))
	r.a.SetConcurrency(3)
	ka := sent[*proto.Keepalive](t, r.tick(ms(250)))
	if *ka != (proto.Keepalive{BackendID: testID, Incarnation: testInc, Seq: 1, Concurrency: 3}) {
		t.Fatalf("keepalive %+v", ka)
	}
	r.control(echo(1), ms(251))
	if ka := sent[*proto.Keepalive](t, r.tick(ms(500))); ka.Seq != 2 {
		t.Fatalf("seq %d, want 2", ka.Seq)
	}

	// A second ack with a shorter interval applies at once; a zero
	// interval keeps the one in use.
	r.control(ack(100*time.Millisecond), ms(510))
	if d := r.a.NextDeadline(); d != ms(610) {
		t.Fatalf("next deadline %v after a shorter interval, want 610 ms", d)
	}
	r.control(ack(0), ms(520))
	if got := r.a.Stats().KeepaliveMillis; got != 100 {
		t.Fatalf("interval %d ms, want 100 kept", got)
	}
	if ka := sent[*proto.Keepalive](t, r.tick(ms(610))); ka.Seq != 3 {
		t.Fatalf("seq %d, want 3", ka.Seq)
	}
}

func TestAgentDefaultKeepaliveWithoutInterval(t *testing.T) {
	r := newAgentRig(t, 0)
	r.registered(ms(0), 0)
	if d := r.a.NextDeadline(); d != ms(1000) {
		t.Fatalf("next deadline %v, want the default 1 s", d)
	}
}

func TestAgentReregistersAfterThreeMissedEchoes(t *testing.T) {
	r := newAgentRig(t, 0)
	r.registered(ms(0), 100*time.Millisecond)
	// Keepalives go out, echoes stop after the first.
	sent[*proto.Keepalive](t, r.tick(ms(100)))
	r.control(echo(1), ms(105))
	sent[*proto.Keepalive](t, r.tick(ms(200)))
	sent[*proto.Keepalive](t, r.tick(ms(300)))
	// 3 intervals after the last echo (105 + 300): still registered just
	// before, a Register right at it.
	if d := r.a.NextDeadline(); d != ms(400) {
		t.Fatalf("next deadline %v, want the keepalive at 400 ms", d)
	}
	sent[*proto.Keepalive](t, r.tick(ms(400)))
	if d := r.a.NextDeadline(); d != ms(405) {
		t.Fatalf("next deadline %v, want the echo timeout at 405 ms", d)
	}
	quiet(t, r.tick(ms(404)))
	if !r.a.Registered() {
		t.Fatal("gave up before three intervals")
	}
	out := r.tick(ms(405))
	sent[*proto.Register](t, out)
	if r.a.Registered() {
		t.Fatal("still registered after three missed echoes")
	}
	if len(out.Logs) != 1 || out.Logs[0].Level != slog.LevelWarn {
		t.Fatalf("logs %+v, want one warning", out.Logs)
	}
	// No keepalives while unregistered, Register every second.
	if d := r.a.NextDeadline(); d != ms(1405) {
		t.Fatalf("next deadline %v, want the next Register at 1405 ms", d)
	}
	quiet(t, r.tick(ms(1000)))
	r.control(ack(100*time.Millisecond), ms(1100))
	if !r.a.Registered() || r.a.Stats().Reregistrations != 1 || r.a.Stats().Registrations != 2 {
		t.Fatalf("registered %v, stats %+v", r.a.Registered(), r.a.Stats())
	}
}

func TestAgentEchoesKeepRegistration(t *testing.T) {
	r := newAgentRig(t, 0)
	r.registered(ms(0), 100*time.Millisecond)
	for now := int64(100); now <= 2000; now += 100 {
		ka := sent[*proto.Keepalive](t, r.tick(ms(now)))
		r.control(echo(ka.Seq), ms(now+1))
	}
	if !r.a.Registered() || r.a.Stats().Echoes != 20 {
		t.Fatalf("registered %v, stats %+v", r.a.Registered(), r.a.Stats())
	}
}

func TestAgentAnswersProbeAtOnce(t *testing.T) {
	r := newAgentRig(t, 0)
	r.registered(ms(0), time.Second)
	r.a.SetConcurrency(2)
	ka := sent[*proto.Keepalive](t, r.control(echo(0), ms(300)))
	if ka.Seq != 1 || ka.Concurrency != 2 || ka.Incarnation != testInc || ka.BackendID != testID {
		t.Fatalf("probe answer %+v", ka)
	}
	// The answer counts as this interval's keepalive.
	if d := r.a.NextDeadline(); d != ms(1300) {
		t.Fatalf("next deadline %v, want 1300 ms", d)
	}
	// A probe for an old incarnation is not ours to answer.
	quiet(t, r.control(&proto.Keepalive{BackendID: testID, Incarnation: 1}, ms(400)))
	st := r.a.Stats()
	if st.Probes != 1 || st.Keepalives != 1 || st.Stale != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAgentEchoWithWrongIncarnationDoesNotKeepRegistration(t *testing.T) {
	r := newAgentRig(t, 0)
	r.registered(ms(0), 100*time.Millisecond)
	for now := int64(100); now < 300; now += 100 {
		sent[*proto.Keepalive](t, r.tick(ms(now)))
		r.control(&proto.Keepalive{BackendID: testID, Incarnation: testInc ^ 1, Seq: 1}, ms(now+1))
	}
	sent[*proto.Register](t, r.tick(ms(300)))
}

func spliceMsg(id uint64) *proto.Splice {
	return &proto.Splice{RequestID: id, HandoffPort: uint16(40000 + id), BackendPort: 80}
}

func TestAgentInstallsSpliceAtOnceWithoutDelay(t *testing.T) {
	r := newAgentRig(t, 0)
	m := spliceMsg(1)
	out := r.control(m, ms(5))
	want := *m
	m.RequestID = 99 // the Codec reuses its messages: the output holds a copy
	if len(out.Install) != 1 || !reflect.DeepEqual(out.Install[0], want) || len(out.Send) != 0 {
		t.Fatalf("install %v send %v, want the splice installed and nothing sent before", out.Install, types(out.Send))
	}
	// Not registered: a Splice is still honoured (the front-end knows us).
	if r.a.Registered() {
		t.Fatal("registered")
	}
}

func TestAgentDelaysSplicesInOrder(t *testing.T) {
	r := newAgentRig(t, 50*time.Millisecond)
	r.registered(ms(0), time.Second)
	a, b, c := spliceMsg(1), spliceMsg(2), spliceMsg(3)
	quiet(t, r.control(a, ms(10)))
	quiet(t, r.control(b, ms(20)))
	quiet(t, r.control(c, ms(20)))
	// The agent keeps copies: the Codec's messages are reused.
	want := [3]proto.Splice{*a, *b, *c}
	a.RequestID, b.RequestID, c.RequestID = 0, 0, 0
	a, b, c = &want[0], &want[1], &want[2]
	if d := r.a.NextDeadline(); d != ms(60) {
		t.Fatalf("next deadline %v, want 60 ms", d)
	}
	if r.a.Stats().DelayedSplices != 3 {
		t.Fatalf("delayed %d", r.a.Stats().DelayedSplices)
	}
	quiet(t, r.tick(ms(59)))
	if out := r.tick(ms(60)); len(out.Install) != 1 || !reflect.DeepEqual(out.Install[0], *a) {
		t.Fatalf("at 60 ms installed %v, want the first", out.Install)
	}
	if d := r.a.NextDeadline(); d != ms(70) {
		t.Fatalf("next deadline %v, want 70 ms", d)
	}
	// A late tick installs everything due, in arrival order.
	if out := r.tick(ms(500)); len(out.Install) != 2 || !reflect.DeepEqual(out.Install[0], *b) || !reflect.DeepEqual(out.Install[1], *c) {
		t.Fatalf("at 500 ms installed %v, want the other two in order", out.Install)
	}
	if d := r.a.NextDeadline(); d != ms(1000) {
		t.Fatalf("next deadline %v, want the keepalive at 1 s", d)
	}
}

func TestAgentAcknowledgesSplices(t *testing.T) {
	r := newAgentRig(t, 0)
	r.out.Reset()
	r.a.Installed(spliceMsg(9), nil, &r.out)
	if got := sent[*proto.SpliceAck](t, &r.out); *got != (proto.SpliceAck{RequestID: 9, BackendID: testID, OK: true}) {
		t.Fatalf("ack %+v", got)
	}
	if len(r.out.Logs) != 0 {
		t.Fatalf("logs %+v for an accepted splice", r.out.Logs)
	}
	r.out.Reset()
	r.a.Installed(spliceMsg(10), splice.ErrSpliceMismatch, &r.out)
	got := sent[*proto.SpliceAck](t, &r.out)
	if got.OK || got.RequestID != 10 || got.Reason != splice.ErrSpliceMismatch.Error() {
		t.Fatalf("ack %+v, want a refusal with the reason", got)
	}
	if len(r.out.Logs) != 1 || r.out.Logs[0].Level != slog.LevelWarn {
		t.Fatalf("logs %+v, want one warning", r.out.Logs)
	}
	// A reason longer than the wire allows is cut, so the ack still encodes.
	r.out.Reset()
	r.a.Installed(spliceMsg(11), errors.New(strings.Repeat("x", 400)), &r.out)
	got = sent[*proto.SpliceAck](t, &r.out)
	if _, err := proto.Marshal(make([]byte, 32), proto.Header{Direction: proto.ToFrontend}, got); err != nil {
		t.Fatalf("ack with a long reason does not encode: %v", err)
	}
	if st := r.a.Stats(); st.SplicesRefused != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAgentFeedbackFromResponseDone(t *testing.T) {
	r := newAgentRig(t, 0)
	r.a.SetConcurrency(4)
	r.out.Reset()
	r.a.Event(splice.Event{Kind: splice.EvResponseDone, RequestID: 42, ServiceTime: 20 * time.Millisecond,
		Bytes: 1234, ResponseEnd: 0xfffffff0}, ms(1), &r.out)
	fb := sent[*proto.Feedback](t, &r.out)
	want := proto.Feedback{BackendID: testID, RequestID: 42, ServiceTime: 20 * time.Millisecond,
		ResponseBytes: 1234, Concurrency: 4, ResponseEnd: 0xfffffff0}
	if *fb != want {
		t.Fatalf("feedback %+v, want %+v", fb, want)
	}
	r.out.Reset()
	r.a.Event(splice.Event{Kind: splice.EvServiceTime, RequestID: 42}, ms(2), &r.out)
	quiet(t, &r.out)
	// Concurrency is clamped into the 16 bits the message has.
	r.a.SetConcurrency(1 << 20)
	r.out.Reset()
	r.a.Event(splice.Event{Kind: splice.EvResponseDone, RequestID: 43}, ms(3), &r.out)
	if fb := sent[*proto.Feedback](t, &r.out); fb.Concurrency != 65535 {
		t.Fatalf("concurrency %d, want 65535", fb.Concurrency)
	}
}

func TestAgentUnexpectedAndMalformed(t *testing.T) {
	r := newAgentRig(t, 0)
	out := r.control(&proto.Feedback{}, ms(0))
	quiet(t, out)
	if len(out.Logs) != 1 {
		t.Fatalf("logs %+v, want one warning", out.Logs)
	}
	logged := 0
	for i := 0; i < 2000; i++ {
		r.out.Reset()
		r.a.Malformed(testFE, proto.ErrMalformed, &r.out)
		logged += len(r.out.Logs)
	}
	// The first nine, then every thousandth.
	if st := r.a.Stats(); st.BadMessages != 2000 || st.Unexpected != 1 || logged != 11 {
		t.Fatalf("stats %+v, logged %d", st, logged)
	}
}

func TestAgentOutputResetDropsReferences(t *testing.T) {
	var out AgentOutput
	out.Send = append(out.Send, &proto.Keepalive{})
	out.log(slog.LevelInfo, "x", slog.String("a", "b"))
	out.Install = append(out.Install, *spliceMsg(1))
	out.Reset()
	if len(out.Send)+len(out.Install)+len(out.Logs) != 0 || out.Send[:1][0] != nil || out.Logs[:1][0].Attrs != nil {
		t.Fatal("Reset kept references to sent messages or logged attributes")
	}
}

// TestAgentOutputMessagesStayDistinct: the output reuses its messages'
// storage; each message of one output is its own, also when the storage
// grows under the ones already in Send, and the next output reuses it.
func TestAgentOutputMessagesStayDistinct(t *testing.T) {
	r := newAgentRig(t, 0)
	r.out.Reset()
	for id := range uint64(20) {
		r.a.Installed(spliceMsg(id), nil, &r.out)
		r.a.Event(splice.Event{Kind: splice.EvResponseDone, RequestID: id}, ms(1), &r.out)
	}
	if len(r.out.Send) != 40 {
		t.Fatalf("sent %d messages, want 40", len(r.out.Send))
	}
	for i, m := range r.out.Send {
		id := uint64(i / 2)
		switch m := m.(type) {
		case *proto.SpliceAck:
			if i%2 != 0 || m.RequestID != id || !m.OK {
				t.Fatalf("message %d: %+v", i, m)
			}
		case *proto.Feedback:
			if i%2 != 1 || m.RequestID != id {
				t.Fatalf("message %d: %+v", i, m)
			}
		}
	}
	r.out.Reset()
	r.a.Installed(spliceMsg(77), nil, &r.out)
	first := sent[*proto.SpliceAck](t, &r.out)
	r.out.Reset()
	r.a.Installed(spliceMsg(78), errors.New("no"), &r.out)
	if a := sent[*proto.SpliceAck](t, &r.out); a != first || a.RequestID != 78 || a.OK || a.Reason != "no" {
		t.Fatalf("ack %+v, want request 78 refused, in the storage reused", a)
	}
}

// A Splice sent with the SYN that waits for its SYN-ACK is acknowledged
// when the engine reports it installed, not when it was handed over; a
// refusal at that point is acknowledged as one.
func TestAgentAcknowledgesASpliceSentWithTheSYNWhenInstalled(t *testing.T) {
	r := newAgentRig(t, 0)
	r.out.Reset()
	r.a.Installed(spliceMsg(21), splice.ErrSpliceAwaitsSynAck, &r.out)
	if len(r.out.Send) != 0 || len(r.out.Logs) != 0 || r.a.Stats().SplicesAtSYN != 1 {
		t.Fatalf("sent %d, logged %d, SplicesAtSYN %d for a Splice waiting for its SYN-ACK",
			len(r.out.Send), len(r.out.Logs), r.a.Stats().SplicesAtSYN)
	}
	r.out.Reset()
	r.a.Event(splice.Event{Kind: splice.EvSpliceInstalled, RequestID: 21}, 0, &r.out)
	if got := sent[*proto.SpliceAck](t, &r.out); *got != (proto.SpliceAck{RequestID: 21, BackendID: testID, OK: true}) {
		t.Fatalf("ack %+v", got)
	}
	r.out.Reset()
	r.a.Event(splice.Event{Kind: splice.EvSpliceInstalled, RequestID: 22, Detail: "no"}, 0, &r.out)
	if got := sent[*proto.SpliceAck](t, &r.out); got.OK || got.RequestID != 22 || got.Reason != "no" {
		t.Fatalf("ack %+v, want a refusal", got)
	}
	if st := r.a.Stats(); st.SplicesRefused != 1 {
		t.Errorf("SplicesRefused %d", st.SplicesRefused)
	}
}

// A Splice the kernel's SYN-ACK completed by taking its request in the
// SYN, and which asked for no SpliceAck then (proto.SpliceImplicitAck,
// reported as Event.FastOpen), is not acknowledged: that SYN-ACK is the
// front-end's acknowledgement. A refusal is sent all the same.
func TestAgentSendsNoSpliceAckTheSYNACKImplies(t *testing.T) {
	r := newAgentRig(t, 0)
	r.out.Reset()
	r.a.Event(splice.Event{Kind: splice.EvSpliceInstalled, RequestID: 31, FastOpen: true}, 0, &r.out)
	if len(r.out.Send) != 0 || r.a.Stats().SpliceAcksImplied != 1 {
		t.Fatalf("sent %d messages, SpliceAcksImplied %d; want 0, 1", len(r.out.Send), r.a.Stats().SpliceAcksImplied)
	}
	r.out.Reset()
	r.a.Event(splice.Event{Kind: splice.EvSpliceInstalled, RequestID: 32, FastOpen: true, Detail: "table full"}, 0, &r.out)
	if got := sent[*proto.SpliceAck](t, &r.out); got.OK || got.RequestID != 32 || got.Reason != "table full" {
		t.Fatalf("ack %+v, want the refusal sent", got)
	}
	if st := r.a.Stats(); st.SpliceAcksImplied != 1 || st.SplicesRefused != 1 {
		t.Errorf("SpliceAcksImplied %d, SplicesRefused %d; want 1, 1", st.SpliceAcksImplied, st.SplicesRefused)
	}
}

// TestAgentResetsIdleC2sWhenTheFrontEndRestarts: the first front-end
// incarnation is taken as is, its datagrams again change nothing, and a
// new one asks every shard to reset its idle C2s, once.
func TestAgentResetsIdleC2sWhenTheFrontEndRestarts(t *testing.T) {
	r := newAgentRig(t, 0)
	for i, c := range []struct {
		inc   uint64
		reset bool
	}{{100, false}, {100, false}, {200, true}, {200, false}} {
		r.out.Reset()
		r.a.FrontEnd(c.inc, &r.out)
		if r.out.ResetIdle != c.reset {
			t.Errorf("datagram %d (incarnation %d): ResetIdle %v, want %v", i, c.inc, r.out.ResetIdle, c.reset)
		}
	}
	if n := r.a.Stats().FrontEndRestarts; n != 1 {
		t.Errorf("%d front-end restarts counted, want 1", n)
	}
	r.out.Reset()
	if r.out.ResetIdle {
		t.Error("Reset left ResetIdle set")
	}
}
