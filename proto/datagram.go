package proto

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"reflect"
)

// Codec encodes and decodes the datagrams of one key without allocating:
// it keeps the keyed HMAC (reset for each datagram instead of built anew),
// the encoder's and decoder's state, and one message of each type that
// Decode fills in place. The daemons keep one per event loop; [Marshal],
// [Append] and [Unmarshal] make a throwaway one per call.
//
// The message Decode returns belongs to the Codec: it, and what it refers
// to (Register.WebPorts), stay valid until the next Decode on the same
// Codec. A caller that keeps a message longer copies it (a *Splice with
// `s := *m`; WebPorts with slices.Clone). SpliceAck.Reason is a real
// string and may be kept.
//
// The Codec is also where the state of a sender belongs once the protocol
// needs some (sequence numbers, per-sender keys): the wire format has no
// field for it yet.
//
// A Codec is not safe for concurrent use.
type Codec struct {
	mac hash.Hash // HMAC-SHA256 with the key; Reset before each datagram
	sum [sha256.Size]byte
	enc encoder
	dec decoder

	// The messages Decode fills, one per type, and the storage behind
	// Register.WebPorts.
	register    Register
	registerAck RegisterAck
	splice      Splice
	spliceAck   SpliceAck
	feedback    Feedback
	keepalive   Keepalive
	close       Close
	ports       [MaxWebPorts]uint16
}

// NewCodec returns a Codec for key. The key may be empty (see the package
// documentation); it is not retained.
func NewCodec(key []byte) *Codec {
	return &Codec{mac: hmac.New(sha256.New, key)}
}

// Append encodes m as one authenticated datagram appended to dst. On
// error it returns dst unchanged (same length) and the error; field
// problems (an IPv6 address, too many ports, ...) are [*FieldError]s
// wrapping [ErrMalformed]. With room for MaxDatagram bytes in dst it
// allocates nothing.
func (c *Codec) Append(dst []byte, m Message) ([]byte, error) {
	b, ok := m.(body)
	if !ok {
		return dst, fmt.Errorf("proto: cannot encode %T: not a message of this package", m)
	}
	if reflect.ValueOf(b).IsNil() {
		return dst, fmt.Errorf("proto: cannot encode nil %T", m)
	}
	start := len(dst)
	t := b.Type()
	e := &c.enc
	*e = encoder{msg: t.String(), b: append(dst, magic0, magic1, Version, uint8(t), 0, 0, 0, 0)}
	b.encode(e)
	out, err := e.b, e.err
	*e = encoder{} // keep no reference to the caller's buffer
	if err != nil {
		return dst[:start], err
	}
	bodyLen := len(out) - start - headerLen
	if total := headerLen + bodyLen + tagLen; total > MaxDatagram {
		return dst[:start], fmt.Errorf("proto: %v encodes to %d bytes, more than MaxDatagram (%d)", t, total, MaxDatagram)
	}
	binary.BigEndian.PutUint16(out[start+6:], uint16(bodyLen))
	return append(out, c.tag(out[start:])...), nil
}

// Decode checks and decodes one datagram and returns the Codec's message
// of its type (for example *Splice), valid until the next Decode. The
// checks and the errors they return are listed in the package
// documentation. The message does not alias b. Decode allocates nothing,
// except a SpliceAck.Reason that differs from the last one decoded.
func (c *Codec) Decode(b []byte) (Message, error) {
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
	if !hmac.Equal(c.tag(b[:end]), b[end:end+tagLen]) {
		return nil, ErrAuth
	}
	if extra := len(b) - end - tagLen; extra > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the authentication tag", ErrMalformed, extra)
	}
	if b[4] != 0 || b[5] != 0 {
		return nil, fmt.Errorf("%w: header flags %#02x and reserved %#02x must be zero", ErrMalformed, b[4], b[5])
	}
	t := Type(b[3])
	m := c.message(t)
	if m == nil {
		return nil, fmt.Errorf("%w: %d", ErrUnknownType, b[3])
	}
	d := &c.dec
	d.msg, d.b, d.err, d.ports = t.String(), b[headerLen:end], nil, c.ports[:0]
	m.decode(d)
	err := d.finish()
	d.b, d.err = nil, nil // keep no reference to the caller's datagram
	if err != nil {
		return nil, err
	}
	return m, nil
}

// message returns the Codec's message of type t, zeroed, or nil if t is
// unknown.
func (c *Codec) message(t Type) body {
	switch t {
	case TypeRegister:
		c.register = Register{}
		return &c.register
	case TypeRegisterAck:
		c.registerAck = RegisterAck{}
		return &c.registerAck
	case TypeSplice:
		c.splice = Splice{}
		return &c.splice
	case TypeSpliceAck:
		c.spliceAck = SpliceAck{}
		return &c.spliceAck
	case TypeFeedback:
		c.feedback = Feedback{}
		return &c.feedback
	case TypeKeepalive:
		c.keepalive = Keepalive{}
		return &c.keepalive
	case TypeClose:
		c.close = Close{}
		return &c.close
	}
	return nil
}

// tag returns the first tagLen bytes of HMAC-SHA256(key, data), in c.sum:
// valid until the next call.
func (c *Codec) tag(data []byte) []byte {
	c.mac.Reset()
	c.mac.Write(data)
	return c.mac.Sum(c.sum[:0])[:tagLen]
}
