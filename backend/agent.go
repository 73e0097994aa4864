package backend

import (
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

// AgentConfig configures the shim's control-protocol agent.
type AgentConfig struct {
	ID          uint32
	Addr        netip.Addr // the kernel's address, announced in Register
	MAC         wire.MAC   // the host's MAC on the wire (the TAP's)
	ControlPort uint16
	WebPorts    []uint16
	Capacity    int
	// Incarnation changes on every start (the daemon draws it at random),
	// so the front-end sees a restart as a new back-end.
	Incarnation uint64
	// SpliceDelay holds every Splice this long before it is installed
	// (see Config.SpliceDelay).
	SpliceDelay time.Duration
	// RegisterInterval is how often Register is resent until the
	// front-end acknowledges it (1 s).
	RegisterInterval time.Duration
	// Keepalive is the keepalive interval until a RegisterAck names
	// one (1 s).
	Keepalive time.Duration
	// MissedEchoes is how many keepalive intervals may pass without an
	// echo from the front-end before the agent registers again (3): a
	// front-end that restarted has forgotten this back-end, and answers
	// nothing until it hears a Register.
	MissedEchoes int
}

// Agent is the back-end's side of the control protocol, as a pure state
// machine: it registers until acknowledged, sends keepalives at the
// interval the front-end asked for and registers again when their echoes
// stop, answers probes at once, schedules Splice installation (after
// SpliceDelay) and acknowledges each Splice once the daemon installed
// it, and turns the engine's finished responses into Feedback.
//
// It reads no clock and owns no socket: the daemon feeds it decoded
// messages, engine events and the time, calls Tick when NextDeadline
// comes, and carries out what it writes into an AgentOutput. Not safe for
// concurrent use.
type Agent struct {
	cfg AgentConfig

	registered bool
	nextReg    splice.Time // next Register while not registered
	keepalive  time.Duration
	nextKA     splice.Time // next Keepalive while registered
	lastEcho   splice.Time // last sign the front-end knows us
	// feIncarnation is the front-end's, from the last genuine datagram
	// (0: none yet).
	feIncarnation uint64
	seq           uint64 // of the last Keepalive sent
	concurrency   int    // requests in service, as the daemon last said
	delayed       []delayedSplice
	stats         AgentStats
	refused       []uint64 // by the index of proto.RefusalReasons
	reasons       []string
}

// delayedSplice is a Splice held for SpliceDelay, by value: the Codec
// reuses the message it decoded, and a pointer kept here would cost an
// allocation per request.
type delayedSplice struct {
	msg proto.Splice
	due splice.Time
}

// AgentStats counts the agent's control traffic.
type AgentStats struct {
	Registers       uint64 `json:"registers"`       // Register messages sent
	Registrations   uint64 `json:"registrations"`   // times a RegisterAck made us registered
	Reregistrations uint64 `json:"reregistrations"` // times echoes stopped and we registered again
	Keepalives      uint64 `json:"keepalives"`      // Keepalive messages sent, probe answers included
	Echoes          uint64 `json:"echoes"`          // Keepalives received for our incarnation
	Probes          uint64 `json:"probes"`          // of them, probes (Seq 0) answered at once
	Stale           uint64 `json:"stale"`           // messages for another back-end or incarnation
	Splices         uint64 `json:"splices"`         // Splice messages received
	SplicesRefused  uint64 `json:"splices_refused"` // acknowledged with OK false
	// SplicesAtSYN: Splices sent with C2's SYN that waited for the
	// kernel's SYN-ACK, acknowledged when it completed them (issue 7).
	SplicesAtSYN uint64 `json:"splices_at_syn"`
	// SpliceAcksImplied: of those, completed by a SYN-ACK that took the
	// request in the SYN, for a Splice that asked for no SpliceAck then
	// (proto.SpliceImplicitAck): none was sent.
	SpliceAcksImplied uint64 `json:"splice_acks_implied"`
	Feedbacks         uint64 `json:"feedbacks"`    // Feedback messages sent
	BadMessages       uint64 `json:"bad_messages"` // datagrams that failed to decode or were refused
	// Refused counts them by reason (proto.RefusalReason: auth, replay,
	// stale, direction, peer, ...): forged, replayed or reflected
	// datagrams show here.
	Refused    map[string]uint64 `json:"refused"`
	Unexpected uint64            `json:"unexpected"` // decoded messages a back-end does not handle
	// FrontEndRestarts: datagrams from a new front-end incarnation after
	// another's, each of which reset the idle C2s (AgentOutput.ResetIdle).
	FrontEndRestarts uint64 `json:"frontend_restarts"`
	DelayedSplices   int    `json:"delayed_splices"`  // Splices waiting for SpliceDelay now
	KeepaliveMillis  int64  `json:"keepalive_millis"` // the interval in use
}

// AgentOutput collects what one call into the Agent produced. The caller
// Resets it, makes the call, then: installs each of Install in order in
// the engine and reports the result with Installed, sends Send to the
// front-end in order, and logs Logs.
//
// The messages in Send and the Splices in Install belong to the output
// and are valid until its next Reset: a request passes through the agent
// as a Splice in, a SpliceAck and a Feedback out, and fresh messages for
// each would be allocations per request. The output keeps them in slices
// it reuses instead (once warm, an output allocates nothing).
type AgentOutput struct {
	Send    []proto.Message
	Install []proto.Splice
	Logs    []LogRecord
	// ResetIdle asks every shard to reset its idle C2s
	// (splice.Shim.ResetIdle): a new front-end started.
	ResetIdle bool

	// The storage of Send's messages. A slice that grows leaves the
	// messages Send already points to in the old array, unchanged.
	acks       []proto.SpliceAck
	feedbacks  []proto.Feedback
	keepalives []proto.Keepalive
	registers  []proto.Register
}

// slot appends a zero T to *s and returns it.
func slot[T any](s *[]T) *T {
	var zero T
	*s = append(*s, zero)
	return &(*s)[len(*s)-1]
}

// LogRecord is a log line the daemon writes for the agent.
type LogRecord struct {
	Level slog.Level
	Msg   string
	Attrs []slog.Attr
}

// Reset empties o for the next call.
func (o *AgentOutput) Reset() {
	clear(o.Send)
	clear(o.Logs)
	o.Send, o.Install, o.Logs = o.Send[:0], o.Install[:0], o.Logs[:0]
	o.ResetIdle = false
	o.acks, o.feedbacks = o.acks[:0], o.feedbacks[:0]
	o.keepalives, o.registers = o.keepalives[:0], o.registers[:0]
}

func (o *AgentOutput) log(level slog.Level, msg string, attrs ...slog.Attr) {
	o.Logs = append(o.Logs, LogRecord{level, msg, attrs})
}

// NewAgent returns an agent that registers at its first Tick.
func NewAgent(cfg AgentConfig) *Agent {
	if cfg.RegisterInterval <= 0 {
		cfg.RegisterInterval = time.Second
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = time.Second
	}
	if cfg.MissedEchoes <= 0 {
		cfg.MissedEchoes = 3
	}
	reasons := proto.RefusalReasons()
	return &Agent{cfg: cfg, keepalive: cfg.Keepalive, nextReg: 0, reasons: reasons, refused: make([]uint64, len(reasons))}
}

// Registered reports whether the front-end acknowledged the last Register
// and still echoes keepalives.
func (a *Agent) Registered() bool { return a.registered }

// Stats returns a copy of the counters.
func (a *Agent) Stats() AgentStats {
	st := a.stats
	st.DelayedSplices = len(a.delayed)
	st.KeepaliveMillis = a.keepalive.Milliseconds()
	st.Refused = make(map[string]uint64)
	for i, n := range a.refused {
		if n > 0 {
			st.Refused[a.reasons[i]] = n
		}
	}
	return st
}

// SetConcurrency tells the agent how many requests are in service now (the
// sum over the engine's shards); Keepalive and Feedback carry it.
func (a *Agent) SetConcurrency(n int) { a.concurrency = n }

// echoDeadline is when the front-end has been silent for MissedEchoes
// keepalive intervals.
func (a *Agent) echoDeadline() splice.Time {
	return a.lastEcho.Add(time.Duration(a.cfg.MissedEchoes) * a.keepalive)
}

// NextDeadline is when Tick next has work: a Register or Keepalive to
// send, the echo timeout, or a delayed Splice falling due.
func (a *Agent) NextDeadline() splice.Time {
	next := a.nextReg
	if a.registered {
		next = min(a.nextKA, a.echoDeadline())
	}
	if len(a.delayed) > 0 {
		next = min(next, a.delayed[0].due)
	}
	return next
}

// Tick does what is due at now.
func (a *Agent) Tick(now splice.Time, out *AgentOutput) {
	if a.registered && !now.Before(a.echoDeadline()) {
		a.registered = false
		a.nextReg = now
		a.stats.Reregistrations++
		out.log(slog.LevelWarn, "front-end stopped answering keepalives; registering again",
			slog.Duration("silent", now.Sub(a.lastEcho)))
	}
	switch {
	case !a.registered && !now.Before(a.nextReg):
		a.nextReg = now.Add(a.cfg.RegisterInterval)
		a.stats.Registers++
		m := slot(&out.registers)
		*m = proto.Register{
			BackendID: a.cfg.ID, IP: a.cfg.Addr, MAC: a.cfg.MAC, ControlPort: a.cfg.ControlPort,
			WebPorts: a.cfg.WebPorts, Capacity: uint16(a.cfg.Capacity), Incarnation: a.cfg.Incarnation,
		}
		out.Send = append(out.Send, m)
	case a.registered && !now.Before(a.nextKA):
		a.sendKeepalive(now, out)
	}
	n := 0
	for n < len(a.delayed) && !now.Before(a.delayed[n].due) {
		out.Install = append(out.Install, a.delayed[n].msg)
		n++
	}
	if n > 0 {
		a.delayed = append(a.delayed[:0], a.delayed[n:]...)
	}
}

func (a *Agent) sendKeepalive(now splice.Time, out *AgentOutput) {
	a.seq++
	a.nextKA = now.Add(a.keepalive)
	a.stats.Keepalives++
	m := slot(&out.keepalives)
	*m = proto.Keepalive{BackendID: a.cfg.ID, Incarnation: a.cfg.Incarnation, Seq: a.seq, Concurrency: a.load()}
	out.Send = append(out.Send, m)
}

func (a *Agent) load() uint16 { return uint16(min(max(a.concurrency, 0), 65535)) }

// ours reports whether a message names this back-end's current
// incarnation; anything else is left over from an earlier run of the
// shim (or of the front-end) and must not count as a sign of life.
func (a *Agent) ours(id uint32, incarnation uint64) bool {
	if id == a.cfg.ID && incarnation == a.cfg.Incarnation {
		return true
	}
	a.stats.Stale++
	return false
}

// FrontEnd notes the incarnation of the front-end that sent a genuine
// datagram (proto.Codec.Header: authenticated, and never older than the
// last, which the codec refuses). The first one names the front-end;
// another after it means the front-end restarted, and the C2s its
// predecessor kept idle, pooled for its next clients or under idle
// keep-alive clients, belong to no one: the shards reset them
// (out.ResetIdle, splice.Shim.ResetIdle) before the new front-end's SYNs
// meet them on its handoff ports.
func (a *Agent) FrontEnd(incarnation uint64, out *AgentOutput) {
	if incarnation == a.feIncarnation {
		return
	}
	if a.feIncarnation != 0 {
		a.stats.FrontEndRestarts++
		out.ResetIdle = true
		out.log(slog.LevelInfo, "front-end restarted: resetting the idle handoff connections of the one before",
			slog.Uint64("incarnation", incarnation), slog.Uint64("before", a.feIncarnation))
	}
	a.feIncarnation = incarnation
}

// Control handles a control message from the front-end at from.
func (a *Agent) Control(from netip.AddrPort, msg proto.Message, now splice.Time, out *AgentOutput) {
	switch m := msg.(type) {
	case *proto.RegisterAck:
		if !a.ours(m.BackendID, m.Incarnation) {
			return
		}
		if m.KeepaliveInterval > 0 {
			a.keepalive = m.KeepaliveInterval
		}
		a.lastEcho = now
		if !a.registered {
			a.registered = true
			a.nextKA = now.Add(a.keepalive)
			a.stats.Registrations++
			out.log(slog.LevelInfo, "registered with front-end",
				slog.String("frontend", from.String()), slog.Duration("keepalive", a.keepalive))
		} else {
			a.nextKA = min(a.nextKA, now.Add(a.keepalive)) // a shorter interval applies at once
		}
	case *proto.Keepalive:
		if !a.ours(m.BackendID, m.Incarnation) {
			return
		}
		a.lastEcho = now
		a.stats.Echoes++
		if m.Seq == 0 {
			// The front-end probes a back-end it has not heard from for
			// a while and declares it dead within half an interval:
			// answer now, not at the next keepalive.
			a.stats.Probes++
			a.sendKeepalive(now, out)
		}
	case *proto.Splice:
		a.stats.Splices++
		if a.cfg.SpliceDelay > 0 {
			d := delayedSplice{*m, now.Add(a.cfg.SpliceDelay)}
			// The request a Splice carries points into the datagram:
			// not kept for the delay, it is not sent by the shim, and the
			// front-end sends it again after its retransmission timeout
			// (splice/shim_carry.go).
			d.msg.Flags &^= proto.SpliceRequest
			d.msg.Request = nil
			a.delayed = append(a.delayed, d)
			return
		}
		out.Install = append(out.Install, *m)
	default:
		a.stats.Unexpected++
		out.log(slog.LevelWarn, "unexpected control message",
			slog.String("type", msg.Type().String()), slog.String("from", from.String()))
	}
}

// Malformed accounts for a datagram that failed to decode or was refused
// (a bad tag, a version mismatch, a replay, garbage), by reason, logging
// the first few and then every thousandth. It allocates nothing past
// those.
func (a *Agent) Malformed(from netip.AddrPort, err error, out *AgentOutput) {
	a.stats.BadMessages++
	name := proto.RefusalReason(err)
	for i, r := range a.reasons {
		if r == name {
			a.refused[i]++
		}
	}
	if n := a.stats.BadMessages; n < 10 || n%1000 == 0 {
		out.log(slog.LevelWarn, "bad control message",
			slog.String("from", from.String()), slog.String("err", err.Error()), slog.Uint64("count", n))
	}
}

// Installed reports the engine's answer to installing m (an Install of an
// earlier output, or a copy of it) and acknowledges it; it keeps no
// reference to m. The front-end sends the request only after an OK ack,
// so no reply can reach the shim before it knows how to translate it
// (handoff step 6).
//
// A Splice sent with the SYN that waits for its SYN-ACK
// (splice.ErrSpliceAwaitsSynAck) is acknowledged later, by Event.
func (a *Agent) Installed(m *proto.Splice, err error, out *AgentOutput) {
	if errors.Is(err, splice.ErrSpliceAwaitsSynAck) {
		a.stats.SplicesAtSYN++
		return
	}
	reason := ""
	if err != nil {
		reason = err.Error()
	} else if m.Reuse.Early {
		// The server's ACK of the request, which follows the Splice,
		// stands for the SpliceAck (proto.SpliceReuse.Early).
		a.stats.SpliceAcksImplied++
		return
	}
	a.acknowledge(m.RequestID, reason, out)
}

// acknowledge sends the SpliceAck of request id: OK when reason is empty.
func (a *Agent) acknowledge(id uint64, reason string, out *AgentOutput) {
	ack := slot(&out.acks)
	*ack = proto.SpliceAck{RequestID: id, BackendID: a.cfg.ID, OK: reason == ""}
	if reason != "" {
		a.stats.SplicesRefused++
		ack.Reason = reason
		if len(ack.Reason) > proto.MaxReasonLen {
			ack.Reason = ack.Reason[:proto.MaxReasonLen]
		}
		out.log(slog.LevelWarn, "splice refused",
			slog.Uint64("request", id), slog.String("err", reason))
	}
	out.Send = append(out.Send, ack)
}

// Event handles an engine event: a finished response becomes Feedback.
// Call SetConcurrency first, so the Feedback carries the load after it.
func (a *Agent) Event(ev splice.Event, now splice.Time, out *AgentOutput) {
	if ev.Kind == splice.EvSpliceInstalled {
		if ev.Detail == "" && ev.FastOpen {
			// The SYN-ACK that acknowledged the request in the SYN
			// acknowledges the Splice (proto.SpliceImplicitAck).
			a.stats.SpliceAcksImplied++
			return
		}
		a.acknowledge(ev.RequestID, ev.Detail, out)
		return
	}
	if ev.Kind != splice.EvResponseDone {
		return
	}
	a.stats.Feedbacks++
	fb := slot(&out.feedbacks)
	*fb = proto.Feedback{
		BackendID: a.cfg.ID, RequestID: ev.RequestID, ServiceTime: ev.ServiceTime,
		ResponseBytes: ev.Bytes, Concurrency: a.load(), ResponseEnd: ev.ResponseEnd,
		FirstByte: ev.FirstByte,                      // handoff timelines (issue 11)
		CloseSent: ev.CloseSent, FINSent: ev.FINSent, // the client saw close, and a FIN (splice/shim_pool.go)
	}
	out.Send = append(out.Send, fb)
}
