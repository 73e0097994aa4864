package proto

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
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

// codec is what a Message of this package knows beyond its type: how to
// write and read its body. Keeping it unexported keeps the wire layout in
// one place.
type codec interface {
	Message
	encode(e *encoder)
	decode(d *decoder)
}

// newMessage returns a zero message for t, or nil if t is unknown.
func newMessage(t Type) codec {
	switch t {
	case TypeRegister:
		return new(Register)
	case TypeRegisterAck:
		return new(RegisterAck)
	case TypeSplice:
		return new(Splice)
	case TypeSpliceAck:
		return new(SpliceAck)
	case TypeFeedback:
		return new(Feedback)
	case TypeKeepalive:
		return new(Keepalive)
	case TypeClose:
		return new(Close)
	}
	return nil
}

// Append encodes m as one authenticated datagram appended to dst. On
// error it returns dst unchanged (same length) and the error; field
// problems (an IPv6 address, too many ports, ...) are [*FieldError]s
// wrapping [ErrMalformed].
func Append(dst, key []byte, m Message) ([]byte, error) {
	c, ok := m.(codec)
	if !ok {
		return dst, fmt.Errorf("proto: cannot encode %T: not a message of this package", m)
	}
	if reflect.ValueOf(c).IsNil() {
		return dst, fmt.Errorf("proto: cannot encode nil %T", m)
	}
	start := len(dst)
	t := c.Type()
	e := encoder{msg: t.String(), b: append(dst, magic0, magic1, Version, uint8(t), 0, 0, 0, 0)}
	c.encode(&e)
	if e.err != nil {
		return dst[:start], e.err
	}
	bodyLen := len(e.b) - start - headerLen
	if total := headerLen + bodyLen + tagLen; total > MaxDatagram {
		return dst[:start], fmt.Errorf("proto: %v encodes to %d bytes, more than MaxDatagram (%d)", t, total, MaxDatagram)
	}
	binary.BigEndian.PutUint16(e.b[start+6:], uint16(bodyLen))
	tag := computeTag(key, e.b[start:])
	return append(e.b, tag[:]...), nil
}

// Marshal encodes m as one authenticated datagram in a new slice.
func Marshal(key []byte, m Message) ([]byte, error) {
	return Append(make([]byte, 0, 128), key, m)
}

// Unmarshal decodes one datagram authenticated with key and returns a
// pointer to a new message (for example *Splice). The checks and the
// errors they return are listed in the package documentation. The result
// does not alias b.
func Unmarshal(key, b []byte) (Message, error) {
	if len(b) < headerLen+tagLen {
		return nil, fmt.Errorf("%w: %d bytes, the smallest datagram has %d", ErrShort, len(b), headerLen+tagLen)
	}
	if b[0] != magic0 || b[1] != magic1 {
		return nil, fmt.Errorf("%w: starts with %#02x %#02x", ErrBadMagic, b[0], b[1])
	}
	if b[2] != Version {
		return nil, fmt.Errorf("%w: datagram has version %d, this side speaks version %d", ErrVersion, b[2], Version)
	}
	end := headerLen + int(binary.BigEndian.Uint16(b[6:8]))
	if len(b) < end+tagLen {
		return nil, fmt.Errorf("%w: header announces %d body bytes, datagram holds %d bytes in all", ErrShort, end-headerLen, len(b))
	}
	want := computeTag(key, b[:end])
	if !hmac.Equal(want[:], b[end:end+tagLen]) {
		return nil, ErrAuth
	}
	if extra := len(b) - end - tagLen; extra > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the authentication tag", ErrMalformed, extra)
	}
	if b[4] != 0 || b[5] != 0 {
		return nil, fmt.Errorf("%w: header flags %#02x and reserved %#02x must be zero", ErrMalformed, b[4], b[5])
	}
	t := Type(b[3])
	c := newMessage(t)
	if c == nil {
		return nil, fmt.Errorf("%w: %d", ErrUnknownType, b[3])
	}
	d := decoder{msg: t.String(), b: b[headerLen:end]}
	c.decode(&d)
	if err := d.finish(); err != nil {
		return nil, err
	}
	return c, nil
}

// computeTag returns the first tagLen bytes of HMAC-SHA256(key, data).
func computeTag(key, data []byte) [tagLen]byte {
	mac := hmac.New(sha256.New, key)
	mac.Write(data)
	var sum [sha256.Size]byte
	mac.Sum(sum[:0])
	return [tagLen]byte(sum[:tagLen])
}
