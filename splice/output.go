package splice

import (
	"net/netip"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// Time is the engine's notion of now: nanoseconds on a clock the caller
// chooses (monotonic time since start in the daemons, capture timestamps
// in replay, a counter in tests). The engine only subtracts and compares
// times.
type Time int64

// Add returns t moved by d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Before reports whether t is earlier than u.
func (t Time) Before(u Time) bool { return t < u }

// Sub returns t - u.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// Never is a deadline that does not come.
const Never Time = 1<<63 - 1

// Port names one side of a shim. The front-end has a single port.
type Port uint8

const (
	// PortWire is the network side (AF_PACKET on the wire, or the TAP a
	// front-end host uses as its NIC).
	PortWire Port = iota
	// PortHost is the back-end kernel side (the TAP its IP stack uses).
	PortHost
)

func (p Port) String() string {
	if p == PortHost {
		return "host"
	}
	return "wire"
}

// OutFrame is a frame the caller must send on Port.
type OutFrame struct {
	Port Port
	Data []byte
	// VNet is the virtio-net header to send the frame with (on a link
	// with vnet headers; a link without them segments and completes the
	// checksum itself, see link.BatchLink). A frame passed through keeps
	// the header it came with, a frame rewritten in place keeps a header
	// made consistent with the rewrite, and a frame the engine builds has
	// the zero header: complete checksums, no segmentation.
	VNet wire.VNetHdr
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EvRequest: a client's request head is complete; the daemon
	// schedules it and later calls FrontEnd.Dispatch (or Reject).
	EvRequest EventKind = iota + 1
	// EvSplice: the handoff connection is up; the daemon sends
	// Event.Splice to the back-end's shim and calls FrontEnd.SpliceAcked
	// when the shim confirms.
	EvSplice
	// EvClosed: a flow is gone (Reason says how); back-end accounting
	// can release it.
	EvClosed
	// EvAnswered: the front-end answered the client itself (Status).
	EvAnswered
	// EvServiceTime: (shim) a response started; ServiceTime is the time
	// from the request's arrival to its first response byte.
	EvServiceTime
	// EvResponseDone: (shim) a response finished (the client acknowledged
	// everything the server sent); Bytes is its size.
	EvResponseDone
	// EvSpliceInstalled: (shim) a Splice sent with C2's SYN, which
	// AddSplice left waiting (ErrSpliceAwaitsSynAck), met the kernel's
	// SYN-ACK: installed when Detail is empty, refused otherwise (Detail
	// says why). RequestID names it; the daemon acknowledges it now.
	EvSpliceInstalled
	// EvSpliceTaken: the back-end's SYN-ACK acknowledged the request its
	// shim put in C2's SYN, for a Splice sent with proto.SpliceImplicitAck:
	// the shim has the Splice and sends no SpliceAck for it, so the daemon
	// takes this for one (an OK), as of At, the SYN-ACK's time. When the
	// front-end's own SYN brought the request, the event waits for the
	// client to acknowledge a response byte (flow.implicitAck). A refusal
	// still comes as a SpliceAck.
	EvSpliceTaken
)

// CloseReason says why a flow ended.
type CloseReason uint8

const (
	CloseFIN CloseReason = iota + 1
	CloseRST
	CloseTimeout
	CloseHandoffFailed
	CloseAborted
	CloseAnswered
)

var closeReasonNames = [...]string{"", "fin", "rst", "timeout", "handoff-failed", "aborted", "answered"}

func (r CloseReason) String() string {
	if int(r) < len(closeReasonNames) {
		return closeReasonNames[r]
	}
	return "unknown"
}

// RequestInfo describes a parsed request head. Its strings are the
// caller's to keep (the engine shares equal ones between requests, see
// intern.go); the RequestInfo itself lives in the Output.
type RequestInfo struct {
	Method, Host, Path, Cookie string
	Port                       uint16         // VIP port the client connected to
	Client                     netip.AddrPort // the client, for logs (formatted only if logged)
	HeadLen                    int
	KeepAlive                  bool
}

// Event is something the daemon must act on or account for. Only the
// fields its Kind names are set.
type Event struct {
	Kind    EventKind
	Flow    FlowID
	Backend uint32
	Request *RequestInfo // EvRequest; in the Output, valid until its Reset
	// FollowUp marks an EvRequest that came on an already spliced
	// connection (keep-alive): the daemon schedules it and calls Admit;
	// it goes to the connection's back-end (Backend).
	FollowUp    bool
	Splice      proto.Splice  // EvSplice
	Reason      CloseReason   // EvClosed
	Status      int           // EvAnswered
	Detail      string        // EvAnswered: why, for logs
	ServiceTime time.Duration // EvServiceTime
	Bytes       uint64        // EvResponseDone, EvClosed (bytes relayed)
	RequestID   uint64        // shim events
	// ResponseEnd (EvResponseDone) is the back-end's sequence number just
	// past the response's last byte on C2.
	ResponseEnd uint32

	// Handoff timelines (issue 11, timeline.go). Timeline (EvClosed) is
	// when each step the engine saw happened; FirstByte (EvResponseDone)
	// is the time from the request's first byte at the shim to the
	// response's first byte there (at least 1 ns).
	Timeline  FlowTimeline
	FirstByte time.Duration
	// CloseSent (EvResponseDone): the shim wrote close into the
	// response's head for a client that asked to close
	// (proto.Feedback.CloseSent, shim_pool.go).
	CloseSent bool
	// FINSent (EvResponseDone): and it ended the response with a FIN to
	// the client at ResponseEnd.
	FINSent bool

	// At, on an EvSpliceTaken: when the SYN-ACK that stands for the
	// SpliceAck came.
	At Time

	// FastOpen, on an EvSpliceInstalled (shim): the kernel took the
	// request in the SYN and the Splice asked for no SpliceAck then
	// (proto.SpliceImplicitAck): the daemon sends none.
	FastOpen bool
}

// FlowID names a client connection for the lifetime of the engine.
type FlowID uint64

// Output collects what one call into an engine produced. Frames that the
// engine rewrote in place alias the input frame; frames it built live in
// the Output's arena, as do the RequestInfos events point to. All stay
// valid until the next Reset, so the caller sends and handles everything
// before feeding the engine again. An Output is reused call after call so
// the steady state allocates nothing.
type Output struct {
	Frames   []OutFrame
	Events   []Event
	arena    []byte
	requests []RequestInfo
	// gen counts Resets, so that a flow can tell whether a frame it
	// remembers sending is still in this output (fe_ackcoalesce.go).
	gen uint64

	// Control are the datagrams for the host's control socket the
	// engine took off its link (shim_control.go, fe_control.go); their
	// payloads alias the input frames, like frames rewritten in place.
	Control []ControlDatagram

	// FastPaths are the shim's commands for the kernel's reply fast
	// path (Shim.TakeFastPaths), applied after the frames are sent.
	FastPaths []FastPathUpdate
}

// arenaSize holds a burst of built frames (retransmitted request data,
// SYN-ACKs); an arena that runs out falls back to the heap.
const arenaSize = 256 << 10

// Reset empties the output for the next call.
func (o *Output) Reset() {
	o.gen++
	o.Frames = o.Frames[:0]
	o.Events = o.Events[:0]
	o.arena = o.arena[:0]
	o.requests = o.requests[:0]
	clear(o.Control) // drop the references to the input frames
	o.Control = o.Control[:0]
	o.FastPaths = o.FastPaths[:0]
}

// alloc returns n bytes of scratch space for a frame the engine builds.
func (o *Output) alloc(n int) []byte {
	if o.arena == nil {
		o.arena = make([]byte, 0, arenaSize)
	}
	if len(o.arena)+n > cap(o.arena) {
		return make([]byte, n)
	}
	start := len(o.arena)
	o.arena = o.arena[:start+n]
	return o.arena[start : start+n : start+n]
}

// request keeps r for an event until Reset. Growing the storage leaves
// the RequestInfos handed out before where they are (in the old array).
func (o *Output) request(r RequestInfo) *RequestInfo {
	o.requests = append(o.requests, r)
	return &o.requests[len(o.requests)-1]
}

func (o *Output) send(p Port, b []byte) { o.Frames = append(o.Frames, OutFrame{Port: p, Data: b}) }
func (o *Output) event(e Event)         { o.Events = append(o.Events, e) }

// sendVNet queues a frame with its virtio-net header.
func (o *Output) sendVNet(p Port, b []byte, vh wire.VNetHdr) {
	o.Frames = append(o.Frames, OutFrame{Port: p, Data: b, VNet: vh})
}
