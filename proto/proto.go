package proto

import (
	"errors"
	"fmt"
)

// Version is the protocol version this package speaks. A peer with
// another version is refused with [ErrVersion] rather than guessed at.
const Version = 2

// MaxDatagram bounds every encoded message, so that a control datagram
// never fragments on a 1500-byte path and receivers can use a fixed buffer.
const MaxDatagram = 1024

const (
	headerLen = 8
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

// Errors returned by [Unmarshal] (and, for ErrMalformed, by [Append] when a
// message cannot be represented). Match them with errors.Is.
var (
	ErrShort       = errors.New("proto: datagram too short")
	ErrBadMagic    = errors.New("proto: bad magic, not a qsplice control datagram")
	ErrVersion     = errors.New("proto: unsupported protocol version")
	ErrAuth        = errors.New("proto: authentication tag mismatch")
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
// write and read its body. Keeping it unexported keeps the wire layout in
// one place.
type body interface {
	Message
	encode(e *encoder)
	decode(d *decoder)
}

// Append encodes m as one authenticated datagram appended to dst. On
// error it returns dst unchanged (same length) and the error; field
// problems (an IPv6 address, too many ports, ...) are [*FieldError]s
// wrapping [ErrMalformed]. A caller that encodes often keeps a [Codec].
func Append(dst, key []byte, m Message) ([]byte, error) {
	return NewCodec(key).Append(dst, m)
}

// Marshal encodes m as one authenticated datagram in a new slice.
func Marshal(key []byte, m Message) ([]byte, error) {
	return Append(make([]byte, 0, 128), key, m)
}

// Unmarshal decodes one datagram authenticated with key and returns a
// pointer to a new message (for example *Splice). The checks and the
// errors they return are listed in the package documentation. The result
// does not alias b. A caller that decodes often keeps a [Codec].
func Unmarshal(key, b []byte) (Message, error) {
	return NewCodec(key).Decode(b)
}
