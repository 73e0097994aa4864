package proto

import (
	"errors"
	"fmt"
)

// Version is the protocol version this package speaks. A peer with
// another version is refused with [ErrVersion] rather than guessed at.
// Version 3 added the authenticated sender header (direction, back-end,
// incarnation, sequence number), per-back-end keys and Splice.BackendID.
const Version = 3

// MaxDatagram bounds every encoded message, so that a control datagram
// never fragments on a 1500-byte path and receivers can use a fixed buffer.
const MaxDatagram = 1024

const (
	headerLen = 28
	tagLen    = 16
	magic0    = 'Q'
	magic1    = 'S'
)

// Type identifies a message on the wire (header byte 3).
type Type uint8

// Message types. The numbers are part of the wire format.
const (
	TypeRegister Type = iota + 1
	TypeRegisterAck
	TypeSplice
	TypeSpliceAck
	TypeFeedback
	TypeKeepalive
	TypeClose
)

var typeNames = [...]string{
	TypeRegister:    "Register",
	TypeRegisterAck: "RegisterAck",
	TypeSplice:      "Splice",
	TypeSpliceAck:   "SpliceAck",
	TypeFeedback:    "Feedback",
	TypeKeepalive:   "Keepalive",
	TypeClose:       "Close",
}

func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Direction says which way a datagram travels (header byte 4). It is
// inside the tag, so a datagram reflected back to its sender is refused.
type Direction uint8

// Directions. The numbers are part of the wire format; 0 is invalid, so
// that a zeroed header is never a valid one.
const (
	ToBackend  Direction = 1 // sent by the front-end to a back-end's shim
	ToFrontend Direction = 2 // sent by a back-end's shim to the front-end
)

func (d Direction) String() string {
	switch d {
	case ToBackend:
		return "to-backend"
	case ToFrontend:
		return "to-frontend"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// Header is the authenticated header of a datagram beyond magic,
// version, type and length: who sent it, to whom, and where it stands in
// its sender's sequence.
type Header struct {
	Direction Direction
	// Backend is the back-end at one end of the datagram: the sender of
	// a ToFrontend datagram, the recipient of a ToBackend one. Its key
	// authenticates the datagram, and every message body that names a
	// back-end must name this one.
	Backend uint32
	// Incarnation is the sender's: it grows with every start of the
	// sender (see [NewIncarnation]).
	Incarnation uint64
	// Seq numbers the sender's datagrams within one incarnation, from 1
	// up, one per datagram sent (to any peer).
	Seq uint64
}

// Errors returned by [Codec.Decode] and [Unmarshal] (and, for
// ErrMalformed, by [Codec.Append] and [Append] when a message cannot be
// represented). Match them with errors.Is.
var (
	ErrShort       = errors.New("proto: datagram too short")
	ErrBadMagic    = errors.New("proto: bad magic, not a qsplice control datagram")
	ErrVersion     = errors.New("proto: unsupported protocol version")
	ErrDirection   = errors.New("proto: datagram travels the wrong way")
	ErrPeer        = errors.New("proto: datagram for or from another back-end")
	ErrAuth        = errors.New("proto: authentication tag mismatch")
	ErrStale       = errors.New("proto: datagram from an older incarnation of its sender")
	ErrReplay      = errors.New("proto: datagram replayed or too old")
	ErrUnknownType = errors.New("proto: unknown message type")
	ErrMalformed   = errors.New("proto: malformed message")
)

// Message is one control message. The implementations are the pointer
// types of this package: *Register, *RegisterAck, *Splice, *SpliceAck,
// *Feedback, *Keepalive and *Close.
type Message interface {
	Type() Type
}

// body is what a Message of this package knows beyond its type: how to
// write and read its body, and which back-end it names. Keeping it
// unexported keeps the wire layout in one place.
type body interface {
	Message
	encode(e *encoder)
	decode(d *decoder)
	backend() uint32
}

// BackendOf returns the back-end a message of this package names (its
// BackendID field), or 0 for anything else.
func BackendOf(m Message) uint32 {
	if b, ok := m.(body); ok && !isNil(b) {
		return b.backend()
	}
	return 0
}

// Append encodes m as one datagram with header h, authenticated with key
// (a back-end's key, see [DeriveKey]), appended to dst. h.Backend is
// ignored: the header names the back-end m names. On error it returns
// dst unchanged (same length) and the error; field problems (an IPv6
// address, too many ports, ...) are [*FieldError]s wrapping
// [ErrMalformed]. Append numbers nothing: the daemons keep a [Codec],
// which does.
func Append(dst, key []byte, h Header, m Message) ([]byte, error) {
	c := newRawCodec(key)
	return c.appendHeader(dst, h, m)
}

// Marshal encodes m as in [Append] into a new slice.
func Marshal(key []byte, h Header, m Message) ([]byte, error) {
	return Append(make([]byte, 0, 128), key, h, m)
}

// Unmarshal checks one datagram authenticated with key and decodes it,
// whichever its direction or back-end, without any freshness check (that
// needs the state a [Codec] keeps). The message is new and does not alias
// b. For tests, tools and captures; the daemons use a Codec.
func Unmarshal(key, b []byte) (Header, Message, error) {
	c := newRawCodec(key)
	m, err := c.Decode(b)
	if err != nil {
		// The raw Codec's refusal is its own; it is thrown away with it.
		return Header{}, nil, err
	}
	return c.hdr, m, nil
}
