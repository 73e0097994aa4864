// Package timeline is the per-connection handoff timeline the front-end
// (and qsplice-replay) writes: when each step of a connection's handoff
// happened, with its back-end, customer and sizes, one JSON object per
// line.
//
// # Steps and where they are stamped
//
//	syn            engine: the client's first SYN (a fixed table of recent
//	               SYNs; SYN cookies keep no state, see splice/timeline.go)
//	cookie_ack     engine: the handshake's last ACK, the flow is made
//	head_complete  engine: the request head is complete (EvRequest)
//	queued         controller: the scheduler took the request
//	admitted       controller: the scheduler let it go, a back-end was
//	               picked (Dispatch)
//	c2_syn         engine: the handoff connection's SYN went out
//	c2_synack      engine: the back-end's SYN-ACK came (EvSplice); on a
//	               reused C2 ("reused": true, c2_syns 0) both steps are
//	               at Dispatch, when the pool gave C2: no handshake
//	splice_sent    controller: the Splice message went to the shim (the
//	               first time; resends do not move it): after c2_synack,
//	               or with c2_syn when the Splice goes with the SYN
//	splice_ack     controller: the shim's SpliceAck came; for a request
//	               on a reused C2 that went with its Splice, the shim's
//	               copy of the server's ACK of it: after request_sent,
//	               and possibly after the first byte
//	request_sent   engine: the request went out on C2 (SpliceAcked), or left
//	               in its Splice ("carried": true; the shim sent it)
//	first_byte     shim, placed: the response's first byte at the shim
//	last_byte      shim, placed: the response's last byte at the shim
//	feedback       controller: the shim's Feedback came
//	close          engine: the first FIN or RST in either direction (or
//	               the flow's end, when it ended without one)
//
// Each is the step's first occurrence. A connection's record describes
// its first request (Request 1; Requests counts them all) and goes out
// when the connection ends (or, marked at_stop, when the front-end stops
// while it still holds the connection); each keep-alive follow-up gets a record of
// its own (Request 2, 3, ...) when its Feedback comes, with the steps a
// request on a spliced connection has: head_complete (the controller's
// time of the engine's report, the same pass), queued, admitted,
// request_sent (Admit sends it at once), first_byte, last_byte,
// feedback.
//
// # Clocks
//
// Every time is on the front-end's clock: the daemon's monotonic clock
// (nanoseconds since it started), or the capture's timestamps in replay.
// The shim's two steps happen on another host whose clock is not
// compared with ours. The shim measures them from the request's first
// byte reaching it (Feedback.FirstByte and ServiceTime), and the
// front-end places that arrival one estimated one-way delay after
// request_sent: half the Splice -> SpliceAck round trip it just
// measured (from the Splice's last sending). The true one-way delay lies
// between 0 and that round trip, so first_byte and last_byte are each
// off by at most ShimUncertainty (half the round trip, plus the shim's
// time to answer the Splice, which the round trip includes) in either
// direction; their difference is exact (one clock). No wall-clock
// timestamp from another host is used.
package timeline

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"
	"unicode/utf8"
)

// Step is one step of a connection's handoff.
type Step uint8

// The steps, in the order they happen on an ordinary connection.
const (
	SYN Step = iota
	CookieACK
	HeadComplete
	Queued
	Admitted
	C2SYN
	C2SYNACK
	SpliceSent
	SpliceAck
	RequestSent
	FirstByte
	LastByte
	Feedback
	Close
	NumSteps
)

var stepNames = [NumSteps]string{
	"syn", "cookie_ack", "head_complete", "queued", "admitted", "c2_syn", "c2_synack",
	"splice_sent", "splice_ack", "request_sent", "first_byte", "last_byte", "feedback", "close",
}

func (s Step) String() string {
	if s < NumSteps {
		return stepNames[s]
	}
	return "step" + strconv.Itoa(int(s))
}

// StepByName returns the step called name.
func StepByName(name string) (Step, bool) {
	for i, n := range stepNames {
		if n == name {
			return Step(i), true
		}
	}
	return 0, false
}

// Placed reports whether s is one of the shim's steps, placed on the
// front-end's clock with Record.ShimUncertainty.
func (s Step) Placed() bool { return s == FirstByte || s == LastByte }

// Record is one connection's timeline.
type Record struct {
	Flow     uint64
	Client   netip.AddrPort
	Port     uint16 // VIP port
	Backend  uint32 // 0: never dispatched
	Customer string // or the class, for class-based policies
	Method   string
	Path     string
	Reason   string // how the connection ended (splice.CloseReason); none with AtStop
	// AtStop: the front-end stopped while it still held the connection
	// (open, or closed and in its linger), and wrote the steps seen so
	// far.
	AtStop bool
	// Request is which request of the connection the record describes:
	// 1, the first, whose record has the connection's steps too (and
	// goes out when the connection ends), or a keep-alive follow-up's
	// (2, 3, ...: head_complete to feedback, out when it is served).
	Request  int
	Requests int // requests on the connection (follow-ups too), in request 1's record
	SYNs     int // SYNs seen for it (more than 1: retransmitted); 0: not remembered
	// Retransmissions of the handoff: the C2 SYNs sent, the Splice
	// messages sent (more than 1: resent for want of a SpliceAck), the
	// request's retransmissions on C2.
	C2SYNs, SpliceSends, RequestResends int
	// Carried: the request went in its Splice (issue 7): request_sent is
	// when the Splice left, before C2's SYN-ACK, and the shim sent the
	// request as that SYN-ACK passed it.
	Carried bool
	// Reused: the connection's C2 came from the pool (a C2 kept from an
	// earlier client connection, splice/fe_pool.go): no C2 SYN, c2_syn
	// and c2_synack at Dispatch.
	Reused bool

	HeadBytes      int    // the first request's head
	RequestBytes   uint64 // what the front-end handed over on C2 itself
	ResponseBytes  uint64 // the first response, as the shim counted it
	ForwardedBytes uint64 // client bytes the front-end forwarded after the splice

	// ShimUncertainty bounds the error of first_byte and last_byte either
	// way (see Clocks in the package doc).
	ShimUncertainty time.Duration

	At   [NumSteps]int64 // ns on the front-end's clock, where Have says
	Have uint32          // bit s: step s happened

	// Retx are the first MaxRetx retransmissions seen on the connection,
	// in time order; NumRetx counts them all (request 1's record only).
	Retx    [MaxRetx]Retx
	NumRetx int
}

// MaxRetx bounds the retransmissions a record lists.
const MaxRetx = 8

// Retx is one retransmission seen on a connection. Kind is what was
// sent again (see splice.RetxKind): "syn" (the client's SYN),
// "client_data" (client bytes the front-end had), "client_sack" (the
// client began reporting response bytes missing: the back-end resends
// them), "c2_syn" and "request" (the front-end resent them on C2),
// "splice" (the front-end resent the Splice message).
type Retx struct {
	At   int64 // ns on the front-end's clock
	Kind string
}

// AddRetx notes a retransmission of kind at t, keeping the earliest
// MaxRetx in time order.
func (r *Record) AddRetx(kind string, t int64) {
	r.NumRetx++
	n := min(r.NumRetx-1, MaxRetx)
	i := n
	for i > 0 && r.Retx[i-1].At > t {
		i--
	}
	if i == MaxRetx {
		return // later than every one kept
	}
	if n == MaxRetx {
		n-- // the latest kept gives way
	}
	copy(r.Retx[i+1:n+1], r.Retx[i:n])
	r.Retx[i] = Retx{At: t, Kind: kind}
}

// Retransmissions lists the retransmissions kept, in time order.
func (r *Record) Retransmissions() []Retx { return r.Retx[:min(r.NumRetx, MaxRetx)] }

// Set records step s at t (ns on the front-end's clock), unless it has a
// time already.
func (r *Record) Set(s Step, t int64) {
	if r.Have&(1<<s) == 0 {
		r.At[s] = t
		r.Have |= 1 << s
	}
}

// Get returns the time of step s, if it happened.
func (r *Record) Get(s Step) (int64, bool) { return r.At[s], r.Have&(1<<s) != 0 }

// Start is the time of the record's first step.
func (r *Record) Start() int64 {
	first := int64(0)
	found := false
	for s := range NumSteps {
		if t, ok := r.Get(s); ok && (!found || t < first) {
			first, found = t, true
		}
	}
	return first
}

// Offset returns step s's time from the record's start.
func (r *Record) Offset(s Step) (time.Duration, bool) {
	t, ok := r.Get(s)
	return time.Duration(t - r.Start()), ok
}

// Steps lists the steps that happened, in Step order.
func (r *Record) Steps() []Step {
	var out []Step
	for s := range NumSteps {
		if r.Have&(1<<s) != 0 {
			out = append(out, s)
		}
	}
	return out
}

// chain is the order every connection's steps keep, from syn to
// feedback; close is after the steps up to head_complete only, since a
// client may half-close right after its request, before the handoff.
// Feedback is not before the close necessarily: a server's FIN right
// after the response may reach the front-end before the Feedback does.
// The SpliceAck is only after the Splice it answers: a safe request goes
// with its Splice (issue 7's early request), and its ack may come after
// the response, even after the Feedback when a datagram was lost. The
// Splice goes after C2's SYN and before the request, and before or after
// the SYN-ACK: it may go with the SYN (issue 7, splice.FrontEndConfig.SpliceAtSYN).
// A request its Splice carries (Carried) leaves with the Splice, before
// C2's SYN-ACK, which then comes before the first byte only.
var chain = [...]Step{SYN, CookieACK, HeadComplete, Queued, Admitted, C2SYN, C2SYNACK, RequestSent, FirstByte, LastByte, Feedback}

var carriedChain = [...]Step{SYN, CookieACK, HeadComplete, Queued, Admitted, C2SYN, RequestSent, FirstByte, LastByte, Feedback}

// CheckOrder returns an error naming the first pair of steps out of
// order. A placed step (first_byte, last_byte) may precede a front-end
// step that follows it by up to ShimUncertainty; it must never precede
// the steps before it, which its placement starts from.
func (r *Record) CheckOrder() error {
	prev, prevOK := Step(0), false
	steps := chain[:]
	if r.Carried {
		steps = carriedChain[:]
		if err := r.inOrder(C2SYN, C2SYNACK); err != nil {
			return err
		}
	}
	for _, s := range steps {
		t, ok := r.Get(s)
		if !ok {
			continue
		}
		if prevOK {
			pt := r.At[prev]
			slack := int64(0)
			if prev.Placed() && !s.Placed() {
				slack = int64(r.ShimUncertainty)
			}
			if t+slack < pt {
				return fmt.Errorf("flow %d: %v at %v is before %v at %v", r.Flow, s, time.Duration(t-r.Start()), prev, time.Duration(pt-r.Start()))
			}
		}
		prev, prevOK = s, true
	}
	// The Splice between C2's SYN and the request, its ack after it.
	for _, p := range [...][2]Step{{C2SYN, SpliceSent}, {SpliceSent, RequestSent}, {SpliceSent, SpliceAck}} {
		if err := r.inOrder(p[0], p[1]); err != nil {
			return err
		}
	}
	if c, ok := r.Get(Close); ok {
		for s := SYN; s <= HeadComplete; s++ {
			if t, ok := r.Get(s); ok && c < t {
				return fmt.Errorf("flow %d: close at %v is before %v at %v", r.Flow, time.Duration(c-r.Start()), s, time.Duration(t-r.Start()))
			}
		}
	}
	return nil
}

// inOrder returns an error when both steps happened and b before a.
func (r *Record) inOrder(a, b Step) error {
	ta, aok := r.Get(a)
	tb, bok := r.Get(b)
	if aok && bok && tb < ta {
		return fmt.Errorf("flow %d: %v at %v is before %v at %v", r.Flow, b, time.Duration(tb-r.Start()), a, time.Duration(ta-r.Start()))
	}
	return nil
}

// AppendJSON appends r as one JSON object and a newline, allocating
// nothing when b has room. Step and retransmission times are written as
// ns from start_ns.
func (r *Record) AppendJSON(b []byte) []byte {
	start := r.Start()
	b = append(b, `{"flow":`...)
	b = strconv.AppendUint(b, r.Flow, 10)
	b = append(b, `,"client":"`...)
	if r.Client.IsValid() {
		b = r.Client.AppendTo(b)
	}
	b = append(b, `","port":`...)
	b = strconv.AppendUint(b, uint64(r.Port), 10)
	b = append(b, `,"backend":`...)
	b = strconv.AppendUint(b, uint64(r.Backend), 10)
	b = appendField(b, "customer", r.Customer)
	b = appendField(b, "method", r.Method)
	b = appendField(b, "path", r.Path)
	b = appendField(b, "reason", r.Reason)
	b = append(b, `,"at_stop":`...)
	b = strconv.AppendBool(b, r.AtStop)
	b = appendInt(b, "request", int64(r.Request))
	b = appendInt(b, "requests", int64(r.Requests))
	b = appendInt(b, "syns", int64(r.SYNs))
	b = appendInt(b, "c2_syns", int64(r.C2SYNs))
	b = appendInt(b, "splice_sends", int64(r.SpliceSends))
	b = appendInt(b, "request_resends", int64(r.RequestResends))
	if r.Carried {
		b = append(b, `,"carried":true`...)
	}
	if r.Reused {
		b = append(b, `,"reused":true`...)
	}
	b = appendInt(b, "head_bytes", int64(r.HeadBytes))
	b = appendInt(b, "request_bytes", int64(r.RequestBytes))
	b = appendInt(b, "response_bytes", int64(r.ResponseBytes))
	b = appendInt(b, "forwarded_bytes", int64(r.ForwardedBytes))
	b = appendInt(b, "shim_uncertainty_ns", int64(r.ShimUncertainty))
	b = appendInt(b, "start_ns", start)
	b = append(b, `,"steps":{`...)
	first := true
	for s := range NumSteps {
		t, ok := r.Get(s)
		if !ok {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, stepNames[s]...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, t-start, 10)
	}
	b = append(b, '}')
	b = appendInt(b, "retransmissions", int64(r.NumRetx))
	b = append(b, `,"retx":[`...)
	for i, x := range r.Retransmissions() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"kind":`...)
		b = appendString(b, x.Kind)
		b = appendInt(b, "at", x.At-start)
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}

func appendInt(b []byte, key string, v int64) []byte {
	b = append(b, ",\""...)
	b = append(b, key...)
	b = append(b, "\":"...)
	return strconv.AppendInt(b, v, 10)
}

func appendField(b []byte, key, v string) []byte {
	b = append(b, ",\""...)
	b = append(b, key...)
	b = append(b, "\":"...)
	return appendString(b, v)
}

// appendString writes s as a JSON string: control characters, quotes and
// backslashes escaped, bytes that are not UTF-8 replaced (a request path
// is the client's to choose).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// jsonRecord is a record as it travels.
type jsonRecord struct {
	Flow            uint64           `json:"flow"`
	Client          string           `json:"client"`
	Port            uint16           `json:"port"`
	Backend         uint32           `json:"backend"`
	Customer        string           `json:"customer"`
	Method          string           `json:"method"`
	Path            string           `json:"path"`
	Reason          string           `json:"reason"`
	AtStop          bool             `json:"at_stop"`
	Request         int              `json:"request"`
	Requests        int              `json:"requests"`
	SYNs            int              `json:"syns"`
	C2SYNs          int              `json:"c2_syns"`
	SpliceSends     int              `json:"splice_sends"`
	RequestResends  int              `json:"request_resends"`
	Carried         bool             `json:"carried"`
	Reused          bool             `json:"reused"`
	HeadBytes       int              `json:"head_bytes"`
	RequestBytes    uint64           `json:"request_bytes"`
	ResponseBytes   uint64           `json:"response_bytes"`
	ForwardedBytes  uint64           `json:"forwarded_bytes"`
	ShimUncertainty int64            `json:"shim_uncertainty_ns"`
	Start           int64            `json:"start_ns"`
	Steps           map[string]int64 `json:"steps"`
	Retransmissions int              `json:"retransmissions"`
	Retx            []struct {
		Kind string `json:"kind"`
		At   int64  `json:"at"`
	} `json:"retx"`
}

// ParseJSON reads one record written by AppendJSON. Unknown step names
// are an error: the reader and the writer must agree on the steps.
func ParseJSON(line []byte) (Record, error) {
	var j jsonRecord
	if err := json.Unmarshal(line, &j); err != nil {
		return Record{}, err
	}
	r := Record{
		Flow: j.Flow, Port: j.Port, Backend: j.Backend, Customer: j.Customer, Method: j.Method, Path: j.Path,
		Reason: j.Reason, AtStop: j.AtStop, Request: j.Request, Requests: j.Requests, SYNs: j.SYNs,
		C2SYNs: j.C2SYNs, SpliceSends: j.SpliceSends, RequestResends: j.RequestResends, Carried: j.Carried, Reused: j.Reused, HeadBytes: j.HeadBytes, RequestBytes: j.RequestBytes,
		ResponseBytes: j.ResponseBytes, ForwardedBytes: j.ForwardedBytes, ShimUncertainty: time.Duration(j.ShimUncertainty),
	}
	if j.Client != "" {
		ap, err := netip.ParseAddrPort(j.Client)
		if err != nil {
			return Record{}, fmt.Errorf("timeline: client: %w", err)
		}
		r.Client = ap
	}
	for name, off := range j.Steps {
		s, ok := StepByName(name)
		if !ok {
			return Record{}, fmt.Errorf("timeline: unknown step %q", name)
		}
		r.Set(s, j.Start+off)
	}
	if len(j.Retx) > MaxRetx || j.Retransmissions < len(j.Retx) {
		return Record{}, fmt.Errorf("timeline: %d retransmissions listed, %d counted (at most %d listed)", len(j.Retx), j.Retransmissions, MaxRetx)
	}
	for i, x := range j.Retx {
		r.Retx[i] = Retx{At: j.Start + x.At, Kind: x.Kind}
	}
	r.NumRetx = j.Retransmissions
	return r, nil
}

// maxLine bounds a record's line (the longest are a few KiB).
const maxLine = 1 << 20

// Read reads every record of a JSON-lines file; blank lines are skipped.
// A last line without its newline is not a record yet and is left out:
// it is a write still in progress when the file is read while the
// front-end writes it (Writer.Write), or one cut short.
func Read(rd io.Reader) ([]Record, error) {
	br := bufio.NewReaderSize(rd, 64<<10)
	var out []Record
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err == io.EOF {
			return out, nil // nothing, or a line without its newline
		}
		if err != nil {
			return out, err
		}
		if len(b) > maxLine {
			return out, fmt.Errorf("line %d: %d bytes, at most %d", line, len(b), maxLine)
		}
		b = b[:len(b)-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
		if len(b) == 0 {
			continue
		}
		r, err := ParseJSON(b)
		if err != nil {
			return out, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, r)
	}
}
