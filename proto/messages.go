package proto

import (
	"fmt"
	"net/netip"
	"time"
)

// MaxWebPorts bounds Register.WebPorts.
const MaxWebPorts = 64

// MaxReasonLen bounds SpliceAck.Reason (its length travels in one byte).
const MaxReasonLen = 255

// maxWindowScale is the largest shift RFC 7323 allows.
const maxWindowScale = 14

// Register announces a back-end to the front-end. The shim sends it at
// start and again until it gets a RegisterAck for its Incarnation.
type Register struct {
	BackendID   uint32
	IP          netip.Addr // back-end kernel address, IPv4
	MAC         [6]byte    // back-end wire MAC
	ControlPort uint16     // UDP port where the shim listens for Splice
	WebPorts    []uint16   // TCP ports served, at most MaxWebPorts; decodes as nil when empty
	Capacity    uint16     // max concurrent requests
	Incarnation uint64     // changes on every start, so a restart is visible
}

// RegisterAck accepts a Register and tells the back-end how often to
// send Keepalive.
type RegisterAck struct {
	BackendID         uint32
	Incarnation       uint64 // the Register being acknowledged
	KeepaliveInterval time.Duration
}

// Splice flag bits: which TCP options were negotiated end to end, and so
// which translations the shim must apply to replies.
const (
	SpliceTimestamps  uint8 = 1 << 0
	SpliceSACK        uint8 = 1 << 1
	SpliceWindowScale uint8 = 1 << 2
	// SpliceRewrite: the front-end rewrote the request's target (content
	// adaptation, issue 10), so request-direction numbers differ by an
	// offset from RewriteEnd on; the Rewrite* fields follow.
	SpliceRewrite uint8 = 1 << 3
	// SpliceAtSYN: the front-end sent the Splice with C2's SYN, before
	// the back-end's SYN-ACK (issue 7), so three fields carry what the
	// shim completes from that SYN-ACK as it passes: SeqDelta is the
	// client-facing ISN (the front-end's SYN cookie, ISN_f), TSOffset the
	// client-facing TSval the SYN-ACK's TSval maps to, and WScaleBackend
	// is 0 (the kernel's shift is the SYN-ACK's). SpliceTimestamps then
	// says the front-end offered timestamps on C2; they are in use when
	// the kernel answered them too. The shim acknowledges such a Splice
	// once it is complete, not when it arrives.
	SpliceAtSYN uint8 = 1 << 4
	// SpliceRequest, with SpliceAtSYN only: the Splice carries the first
	// request whole (Request, with the window and TSval of the segment
	// that carries it), and the shim writes that segment to its host
	// itself, acknowledging the kernel's SYN-ACK, in the pass that
	// completes the Splice (issue 7): the request does not wait for the
	// SYN-ACK to reach the front-end and come back. RequestEnd is the
	// segment's end.
	SpliceRequest uint8 = 1 << 5
	// SpliceImplicitAck, with SpliceRequest only: C2's SYN asks for Fast
	// Open, and the front-end takes a SYN-ACK that acknowledges the
	// request the shim put in that SYN as this Splice's acknowledgement
	// (the shim puts it there only with the Splice in hand, and installs
	// the Splice as the SYN-ACK crosses). So the shim sends no SpliceAck
	// for a Splice such a SYN-ACK completes; a refusal it still sends.
	SpliceImplicitAck uint8 = 1 << 6
	// SpliceKeepsCookie, with SpliceImplicitAck only: C2's SYN asks for
	// a Fast Open cookie the front-end will keep and put in its own SYNs
	// with their requests (issue 7). The shim passes that SYN as it came,
	// without its own cookie and the request, so that the kernel's
	// SYN-ACK brings the cookie to the front-end; the request follows the
	// SYN-ACK, as for any SYN the shim does not fill.
	SpliceKeepsCookie uint8 = 1 << 7

	spliceKnownFlags = SpliceTimestamps | SpliceSACK | SpliceWindowScale | SpliceRewrite | SpliceAtSYN | SpliceRequest | SpliceImplicitAck | SpliceKeepsCookie
)

// MaxSpliceRequest bounds Splice.Request: with the rest of the Splice it
// fits MaxDatagram.
const MaxSpliceRequest = 896

// Splice tells a back-end shim to rewrite the replies of one C2 connection
// so they reach the client as if the front-end sent them.
type Splice struct {
	RequestID uint64
	Customer  uint32

	// Client-facing 4-tuple, as the client sees the connection.
	ClientIP   netip.Addr
	ClientPort uint16
	VIP        netip.Addr
	VIPPort    uint16

	// C2 4-tuple: the front-end's handoff end and the back-end's web server.
	HandoffIP   netip.Addr
	HandoffPort uint16
	BackendIP   netip.Addr
	BackendPort uint16

	SeqDelta         uint32  // back-end seq + SeqDelta = client-facing seq (SpliceAtSYN: ISN_f)
	TSOffset         uint32  // back-end TSval + TSOffset = client-facing TSval (SpliceAtSYN: the SYN-ACK's)
	Flags            uint8   // SpliceTimestamps | SpliceSACK | SpliceWindowScale | SpliceRewrite | SpliceAtSYN
	WScaleBackend    uint8   // window shift the back-end kernel uses, 0..14
	WScaleFrontend   uint8   // window shift the front-end announced to the client, 0..14
	ClientNextHopMAC [6]byte // source MAC of the client's frames at the front-end
	RequestEnd       uint32  // sequence number just past the bytes handed over on C2
	// BackendID is the back-end the Splice is for (version 3): the
	// datagram's header names it too, and the shim checks it is itself.
	BackendID uint32

	// The rewritten request target, with Flags&SpliceRewrite only (and
	// only then on the wire): back-end bytes RewriteStart up to
	// RewriteEnd replace the client's target, and a back-end sequence
	// number b at or past RewriteEnd is b - RequestOffset in the client's
	// numbers (before RewriteStart the two are the same).
	RewriteStart  uint32
	RewriteEnd    uint32
	RequestOffset uint32

	// The request the shim sends for the front-end, with Flags&SpliceRequest
	// only: its bytes (1 to MaxSpliceRequest; decoded, they alias the
	// datagram, so a receiver copies what it keeps), and the raw window
	// and the TSval of its segment.
	RequestWindow uint16
	RequestTSVal  uint32
	Request       []byte

	// Reuse, when On, moves a C2 that served an earlier client, and is
	// idle since, to this Splice's client (docs/pooled-c2.md). It travels
	// after everything else, as extension 1.
	Reuse SpliceReuse
	// CloseResponses: the client asked to close ("Connection: close"),
	// which the front-end took out of the request so that the server
	// keeps C2 open; the shim writes "close" into each response's
	// "Connection: keep-alive" (extension 2, no fields).
	CloseResponses bool
}

// SpliceReuse is the part of a Splice that moves an established C2 to a
// new client. C2's request direction then no longer starts at the
// client's ISN, nor carries the client's TSvals: both are shifted, and
// the shim shifts back what the server says of them (its ACK, SACK edges
// and TS echo). SeqDelta and TSOffset map the server's numbers as in any
// Splice; RequestEnd is in C2's numbers, past FrontNext.
type SpliceReuse struct {
	On bool
	// ServerNext is the server's next sequence number on C2 (n_b):
	// anything it sends below it belongs to the last client.
	ServerNext uint32
	// FrontNext is C2's next request sequence number (n_f), where this
	// client's first byte goes.
	FrontNext uint32
	// ClientDelta: client seq + ClientDelta = C2 seq.
	ClientDelta uint32
	// ClientTSOffset: client TSval + ClientTSOffset = TSval on C2.
	ClientTSOffset uint32
	// Early: the request follows the Splice at once, marked with the
	// reuse option (splice/fe_pool.go), which the shim holds until it has
	// the Splice; the shim sends no SpliceAck when it installs it (a
	// refusal it still sends): the server's ACK of the request, which
	// the shim copies to the front-end, stands for one. Extension 3,
	// after extension 1.
	Early bool
}

// Splice extensions follow everything else, each a kind byte and its
// fields, in increasing order of kind.
const (
	spliceExtReuse          = 1 // SpliceReuse's four numbers
	spliceExtCloseResponses = 2 // CloseResponses, no fields
	spliceExtEarly          = 3 // SpliceReuse.Early, no fields
)

// reuseRefusedWith are the Splice flags a reused C2 cannot have: it has
// no SYN for the Splice to ride on or the request to go in, and its
// first request's target is not rewritten (not yet: the correction
// point would have to compose with ClientDelta).
const reuseRefusedWith = SpliceRewrite | SpliceAtSYN | SpliceRequest | SpliceImplicitAck | SpliceKeepsCookie

// SpliceAck answers a Splice: OK means the shim now translates replies of
// that connection; otherwise Reason says why not.
type SpliceAck struct {
	RequestID uint64
	BackendID uint32
	OK        bool
	Reason    string // at most MaxReasonLen bytes
}

// Feedback reports one finished request, for the scheduler's accounting.
type Feedback struct {
	BackendID     uint32
	RequestID     uint64
	ServiceTime   time.Duration // request arrival to end of response at the back-end
	ResponseBytes uint64
	Concurrency   uint16 // requests currently in service on that back-end
	// ResponseEnd is the back-end's sequence number just past the last
	// response byte it sent on C2: where the front-end may answer a
	// refused follow-up request inside the same stream.
	ResponseEnd uint32

	// Handoff timelines (issue 11). FirstByte is the time from the
	// request's first byte arriving at the shim to the response's first
	// byte leaving the server, on the shim's clock (the same origin as
	// ServiceTime). 0 means not reported, and then the 8 bytes are not on
	// the wire: a shim reports at least 1 ns for a response it saw start.
	FirstByte time.Duration

	// CloseSent: the response's head told the client to close, in the
	// shim's words (Splice.CloseResponses: its "Connection: keep-alive"
	// became "close"); FINSent: and the shim ended the response's last
	// segment to the client with a FIN, as the server would have
	// (ResponseEnd is where the FIN sits, in C2 numbers). The front-end
	// then takes the client's side. One byte after FirstByte (bit 0
	// CloseSent, bit 1 FINSent), sent only when not zero.
	CloseSent, FINSent bool
}

// Keepalive proves liveness in either direction and carries the current
// load. Seq increases by one per Keepalive sent, so losses are visible.
type Keepalive struct {
	BackendID   uint32
	Incarnation uint64
	Seq         uint64
	Concurrency uint16
}

// CloseReason says why a spliced connection ended.
type CloseReason uint8

// Close reasons. The numbers are part of the wire format.
const (
	CloseFIN         CloseReason = 1 // orderly close, FIN seen
	CloseRST         CloseReason = 2 // reset by either end
	CloseTimeout     CloseReason = 3 // idle or linger timeout
	CloseBackendDead CloseReason = 4 // back-end stopped answering
)

func (r CloseReason) String() string {
	switch r {
	case CloseFIN:
		return "FIN"
	case CloseRST:
		return "RST"
	case CloseTimeout:
		return "timeout"
	case CloseBackendDead:
		return "backend-dead"
	}
	return fmt.Sprintf("CloseReason(%d)", uint8(r))
}

// Close ends one spliced connection; either side may send it.
type Close struct {
	RequestID uint64
	BackendID uint32
	Reason    CloseReason
}

func (*Register) Type() Type    { return TypeRegister }
func (*RegisterAck) Type() Type { return TypeRegisterAck }
func (*Splice) Type() Type      { return TypeSplice }
func (*SpliceAck) Type() Type   { return TypeSpliceAck }
func (*Feedback) Type() Type    { return TypeFeedback }
func (*Keepalive) Type() Type   { return TypeKeepalive }
func (*Close) Type() Type       { return TypeClose }

func (m *Register) backend() uint32    { return m.BackendID }
func (m *RegisterAck) backend() uint32 { return m.BackendID }
func (m *Splice) backend() uint32      { return m.BackendID }
func (m *SpliceAck) backend() uint32   { return m.BackendID }
func (m *Feedback) backend() uint32    { return m.BackendID }
func (m *Keepalive) backend() uint32   { return m.BackendID }
func (m *Close) backend() uint32       { return m.BackendID }

// Each encode/decode pair below must follow the layout table in doc.go
// field for field; the golden test pins it.

func (m *Register) encode(e *encoder) {
	e.u32(m.BackendID)
	e.addr4("IP", m.IP)
	e.mac(m.MAC)
	e.u16(m.ControlPort)
	e.u16(m.Capacity)
	e.u64(m.Incarnation)
	if len(m.WebPorts) > MaxWebPorts {
		e.fail("WebPorts", "%d ports, at most %d", len(m.WebPorts), MaxWebPorts)
		return
	}
	e.u8(uint8(len(m.WebPorts)))
	for _, p := range m.WebPorts {
		e.u16(p)
	}
}

func (m *Register) decode(d *decoder) {
	m.BackendID = d.u32("BackendID")
	m.IP = d.addr4("IP")
	m.MAC = d.mac("MAC")
	m.ControlPort = d.u16("ControlPort")
	m.Capacity = d.u16("Capacity")
	m.Incarnation = d.u64("Incarnation")
	n := int(d.u8("WebPorts"))
	m.WebPorts = nil
	if n > MaxWebPorts {
		d.fail("WebPorts", "%d ports, at most %d", n, MaxWebPorts)
		return
	}
	if n > 0 && d.err == nil {
		m.WebPorts = d.ports[:n]
		for i := range m.WebPorts {
			m.WebPorts[i] = d.u16("WebPorts")
		}
	}
}

func (m *RegisterAck) encode(e *encoder) {
	e.u32(m.BackendID)
	e.u64(m.Incarnation)
	e.duration("KeepaliveInterval", m.KeepaliveInterval)
}

func (m *RegisterAck) decode(d *decoder) {
	m.BackendID = d.u32("BackendID")
	m.Incarnation = d.u64("Incarnation")
	m.KeepaliveInterval = d.duration("KeepaliveInterval")
}

func (m *Splice) encode(e *encoder) {
	e.u64(m.RequestID)
	e.u32(m.Customer)
	e.addr4("ClientIP", m.ClientIP)
	e.u16(m.ClientPort)
	e.addr4("VIP", m.VIP)
	e.u16(m.VIPPort)
	e.addr4("HandoffIP", m.HandoffIP)
	e.u16(m.HandoffPort)
	e.addr4("BackendIP", m.BackendIP)
	e.u16(m.BackendPort)
	e.u32(m.SeqDelta)
	e.u32(m.TSOffset)
	if m.Flags&^spliceKnownFlags != 0 {
		e.fail("Flags", "unknown bits %#02x", m.Flags&^spliceKnownFlags)
	}
	e.u8(m.Flags)
	checkWindowScale(e.fail, "WScaleBackend", m.WScaleBackend)
	e.u8(m.WScaleBackend)
	checkWindowScale(e.fail, "WScaleFrontend", m.WScaleFrontend)
	e.u8(m.WScaleFrontend)
	e.mac(m.ClientNextHopMAC)
	e.u32(m.RequestEnd)
	e.u32(m.BackendID)
	if m.Flags&SpliceRewrite != 0 {
		e.u32(m.RewriteStart)
		e.u32(m.RewriteEnd)
		e.u32(m.RequestOffset)
	}
	if m.Flags&SpliceImplicitAck != 0 && m.Flags&SpliceRequest == 0 {
		e.fail("Flags", "an implicit acknowledgement (bit 6) without a carried request (bit 5)")
	}
	if m.Flags&SpliceKeepsCookie != 0 && m.Flags&SpliceImplicitAck == 0 {
		e.fail("Flags", "a cookie for the front-end (bit 7) without Fast Open (bit 6)")
	}
	if m.Flags&SpliceRequest != 0 {
		if m.Flags&SpliceAtSYN == 0 {
			e.fail("Flags", "a carried request (bit 5) without the SYN (bit 4)")
		}
		if n := len(m.Request); n == 0 || n > MaxSpliceRequest {
			e.fail("Request", "%d bytes, 1 to %d", n, MaxSpliceRequest)
			return
		}
		e.u16(m.RequestWindow)
		e.u32(m.RequestTSVal)
		e.u16(uint16(len(m.Request)))
		e.b = append(e.b, m.Request...)
	}
	if r := m.Reuse; r.On {
		if m.Flags&reuseRefusedWith != 0 {
			e.fail("Reuse", "a reused C2 with flags %#02x (no SYN, no rewritten target)", m.Flags&reuseRefusedWith)
			return
		}
		e.u8(spliceExtReuse)
		e.u32(r.ServerNext)
		e.u32(r.FrontNext)
		e.u32(r.ClientDelta)
		e.u32(r.ClientTSOffset)
	}
	if m.CloseResponses {
		e.u8(spliceExtCloseResponses)
	}
	if m.Reuse.Early {
		if !m.Reuse.On {
			e.fail("Reuse", "an early request without a reused C2")
			return
		}
		e.u8(spliceExtEarly)
	}
}

func (m *Splice) decode(d *decoder) {
	m.RequestID = d.u64("RequestID")
	m.Customer = d.u32("Customer")
	m.ClientIP = d.addr4("ClientIP")
	m.ClientPort = d.u16("ClientPort")
	m.VIP = d.addr4("VIP")
	m.VIPPort = d.u16("VIPPort")
	m.HandoffIP = d.addr4("HandoffIP")
	m.HandoffPort = d.u16("HandoffPort")
	m.BackendIP = d.addr4("BackendIP")
	m.BackendPort = d.u16("BackendPort")
	m.SeqDelta = d.u32("SeqDelta")
	m.TSOffset = d.u32("TSOffset")
	m.Flags = d.u8("Flags")
	if m.Flags&^spliceKnownFlags != 0 {
		d.fail("Flags", "unknown bits %#02x", m.Flags&^spliceKnownFlags)
	}
	m.WScaleBackend = d.u8("WScaleBackend")
	checkWindowScale(d.fail, "WScaleBackend", m.WScaleBackend)
	m.WScaleFrontend = d.u8("WScaleFrontend")
	checkWindowScale(d.fail, "WScaleFrontend", m.WScaleFrontend)
	m.ClientNextHopMAC = d.mac("ClientNextHopMAC")
	m.RequestEnd = d.u32("RequestEnd")
	m.BackendID = d.u32("BackendID")
	m.RewriteStart, m.RewriteEnd, m.RequestOffset = 0, 0, 0
	if m.Flags&SpliceRewrite != 0 {
		m.RewriteStart = d.u32("RewriteStart")
		m.RewriteEnd = d.u32("RewriteEnd")
		m.RequestOffset = d.u32("RequestOffset")
	}
	m.RequestWindow, m.RequestTSVal, m.Request = 0, 0, nil
	if m.Flags&SpliceImplicitAck != 0 && m.Flags&SpliceRequest == 0 {
		d.fail("Flags", "an implicit acknowledgement (bit 6) without a carried request (bit 5)")
	}
	if m.Flags&SpliceKeepsCookie != 0 && m.Flags&SpliceImplicitAck == 0 {
		d.fail("Flags", "a cookie for the front-end (bit 7) without Fast Open (bit 6)")
	}
	if m.Flags&SpliceRequest != 0 {
		if m.Flags&SpliceAtSYN == 0 {
			d.fail("Flags", "a carried request (bit 5) without the SYN (bit 4)")
		}
		m.RequestWindow = d.u16("RequestWindow")
		m.RequestTSVal = d.u32("RequestTSVal")
		n := int(d.u16("Request"))
		if n == 0 || n > MaxSpliceRequest {
			d.fail("Request", "%d bytes, 1 to %d", n, MaxSpliceRequest)
			return
		}
		if p, ok := d.take("Request", n); ok {
			m.Request = p
		}
	}
	m.Reuse, m.CloseResponses = SpliceReuse{}, false
	for last := uint8(0); len(d.b) > 0 && d.err == nil; {
		kind := d.u8("Extension")
		if kind <= last {
			d.fail("Extension", "kind %d after kind %d (trailing bytes?)", kind, last)
			return
		}
		last = kind
		switch kind {
		case spliceExtReuse:
			if m.Flags&reuseRefusedWith != 0 {
				d.fail("Reuse", "a reused C2 with flags %#02x (no SYN, no rewritten target)", m.Flags&reuseRefusedWith)
				return
			}
			m.Reuse = SpliceReuse{On: true,
				ServerNext: d.u32("Reuse.ServerNext"), FrontNext: d.u32("Reuse.FrontNext"),
				ClientDelta: d.u32("Reuse.ClientDelta"), ClientTSOffset: d.u32("Reuse.ClientTSOffset")}
		case spliceExtCloseResponses:
			m.CloseResponses = true
		case spliceExtEarly:
			if !m.Reuse.On {
				d.fail("Reuse", "an early request without a reused C2")
				return
			}
			m.Reuse.Early = true
		default:
			d.fail("Extension", "trailing bytes of unknown extension kind %d", kind)
		}
	}
}

// checkWindowScale refuses shifts above 14: the shim would compute
// windows beyond 2^30 from them, which TCP forbids (RFC 7323 2.3).
func checkWindowScale(fail func(field, format string, args ...any), field string, shift uint8) {
	if shift > maxWindowScale {
		fail(field, "window scale %d, at most %d", shift, maxWindowScale)
	}
}

func (m *SpliceAck) encode(e *encoder) {
	e.u64(m.RequestID)
	e.u32(m.BackendID)
	e.bool(m.OK)
	if len(m.Reason) > MaxReasonLen {
		e.fail("Reason", "%d bytes, at most %d", len(m.Reason), MaxReasonLen)
		return
	}
	e.u8(uint8(len(m.Reason)))
	e.b = append(e.b, m.Reason...)
}

func (m *SpliceAck) decode(d *decoder) {
	m.RequestID = d.u64("RequestID")
	m.BackendID = d.u32("BackendID")
	m.OK = d.bool("OK")
	n := int(d.u8("Reason"))
	m.Reason = ""
	if p, ok := d.take("Reason", n); ok {
		if string(p) != d.reason { // compares without a copy
			d.reason = string(p)
		}
		m.Reason = d.reason
	}
}

func (m *Feedback) encode(e *encoder) {
	e.u32(m.BackendID)
	e.u64(m.RequestID)
	e.duration("ServiceTime", m.ServiceTime)
	e.u64(m.ResponseBytes)
	e.u16(m.Concurrency)
	e.u32(m.ResponseEnd)
	if m.FirstByte != 0 {
		e.duration("FirstByte", m.FirstByte)
	}
	if m.FINSent && !m.CloseSent {
		e.fail("FINSent", "a FIN without the close it follows")
	}
	if m.CloseSent {
		e.u8(feedbackCloseSent | b2u8(m.FINSent)<<1)
	}
}

const (
	feedbackCloseSent = 1 << 0
	feedbackFINSent   = 1 << 1
)

func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func (m *Feedback) decode(d *decoder) {
	m.BackendID = d.u32("BackendID")
	m.RequestID = d.u64("RequestID")
	m.ServiceTime = d.duration("ServiceTime")
	m.ResponseBytes = d.u64("ResponseBytes")
	m.Concurrency = d.u16("Concurrency")
	m.ResponseEnd = d.u32("ResponseEnd")
	m.FirstByte = 0
	if len(d.b) >= 8 { // fewer are trailing bytes, refused as such
		m.FirstByte = d.duration("FirstByte")
		if m.FirstByte == 0 {
			// Encode leaves a zero out: sent, it would decode to a
			// message that encodes to other bytes.
			d.fail("FirstByte", "0 is sent by leaving the field out")
		}
	}
	m.CloseSent, m.FINSent = false, false
	if len(d.b) == 1 { // more are trailing bytes, refused as such
		v := d.u8("CloseSent")
		if v&^(feedbackCloseSent|feedbackFINSent) != 0 || v&feedbackCloseSent == 0 {
			d.fail("CloseSent", "trailing byte %#x: only CloseSent (1) and FINSent (2) with it may follow (none is sent by leaving it out)", v)
		}
		m.CloseSent, m.FINSent = v&feedbackCloseSent != 0, v&feedbackFINSent != 0
	}
}

func (m *Keepalive) encode(e *encoder) {
	e.u32(m.BackendID)
	e.u64(m.Incarnation)
	e.u64(m.Seq)
	e.u16(m.Concurrency)
}

func (m *Keepalive) decode(d *decoder) {
	m.BackendID = d.u32("BackendID")
	m.Incarnation = d.u64("Incarnation")
	m.Seq = d.u64("Seq")
	m.Concurrency = d.u16("Concurrency")
}

func (m *Close) encode(e *encoder) {
	e.u64(m.RequestID)
	e.u32(m.BackendID)
	checkCloseReason(e.fail, m.Reason)
	e.u8(uint8(m.Reason))
}

func (m *Close) decode(d *decoder) {
	m.RequestID = d.u64("RequestID")
	m.BackendID = d.u32("BackendID")
	m.Reason = CloseReason(d.u8("Reason"))
	checkCloseReason(d.fail, m.Reason)
}

// checkCloseReason refuses reasons outside the defined set: a peer that
// needs a new reason needs a new protocol version.
func checkCloseReason(fail func(field, format string, args ...any), r CloseReason) {
	if r < CloseFIN || r > CloseBackendDead {
		fail("Reason", "unknown close reason %d", uint8(r))
	}
}
