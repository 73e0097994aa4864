package proto

import (
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// Codec is one end of the control protocol: it numbers and seals the
// datagrams its owner sends, and checks, decodes and remembers the
// datagrams it receives, without allocating. The daemons keep one per
// event loop:
//
//   - the front-end's ([NewFrontEndCodec]) holds the master key, seals
//     each datagram with the key of the back-end it goes to, and opens a
//     datagram with the key of the back-end its header names, keeping a
//     [ReplayWindow] per back-end that proved itself;
//   - a back-end's ([NewBackEndCodec]) holds that back-end's key only,
//     and one ReplayWindow for the front-end.
//
// Each numbers what it sends with its incarnation and a sequence number
// that grows by one per datagram, and receives only datagrams that travel
// towards it, name its back-end (on a back-end), authenticate, and are
// fresh: see the package documentation for the order of the checks.
//
// The message Decode returns belongs to the Codec: it, and what it refers
// to (Register.WebPorts), stay valid until the next Decode on the same
// Codec. A caller that keeps a message longer copies it (a *Splice with
// `s := *m`; WebPorts with slices.Clone). SpliceAck.Reason is a real
// string and may be kept. So is an error Decode returns for a datagram
// it refused before reading its body: it is the Codec's too, valid until
// the next Decode (errors.Is works on it at any time before).
//
// A Codec is not safe for concurrent use.
type Codec struct {
	// sends is the direction of what this end sends; it receives the
	// other. 0: a raw Codec (Marshal, Unmarshal), which opens either
	// direction with one key and keeps no freshness state.
	sends Direction
	self  uint32 // a back-end's own id
	key   macKey // a back-end's (or a raw Codec's) key
	ring  *keyring
	// peers are the back-ends that sent the front-end a genuine
	// datagram: their prepared key and replay window. Only a datagram
	// that authenticated and decoded adds one, so forged back-end ids
	// cost no memory.
	peers map[uint32]*peer
	front ReplayWindow // a back-end's window on the front-end

	incarnation uint64 // ours, in every datagram sent
	seq         uint64 // of the last datagram sent

	m       *macer
	scratch macKey // a derived key not (yet) in peers
	hdr     Header // of the last datagram decoded
	refused refusal
	enc     encoder
	dec     decoder

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

type peer struct {
	key macKey
	win ReplayWindow
}

// NewIncarnation returns an incarnation for a sender starting at now:
// its wall-clock time in nanoseconds, so that every start of a sender
// has a larger incarnation than the last (receivers refuse older ones,
// see [ReplayWindow]).
func NewIncarnation(now time.Time) uint64 { return uint64(now.UnixNano()) }

// NewFrontEndCodec returns the front-end's Codec: master is the master
// key (see [LoadKey], [DeriveKey]) and incarnation the front-end's
// ([NewIncarnation]). It is not retained.
func NewFrontEndCodec(master []byte, incarnation uint64) (*Codec, error) {
	if len(master) == 0 {
		return nil, errors.New("proto: empty master key")
	}
	c := &Codec{sends: ToBackend, incarnation: incarnation, m: newMacer(), peers: make(map[uint32]*peer)}
	ring, err := newKeyring(c.m, master)
	if err != nil {
		return nil, fmt.Errorf("proto: master key: %w", err)
	}
	c.ring = ring
	return c, nil
}

// NewBackEndCodec returns back-end id's Codec: key is its own key
// ([DeriveKey] of the master for id) and incarnation its own
// ([NewIncarnation]). The key is not retained.
func NewBackEndCodec(id uint32, key []byte, incarnation uint64) (*Codec, error) {
	if id == 0 {
		return nil, errors.New("proto: back-end id 0")
	}
	if len(key) == 0 {
		return nil, errors.New("proto: empty back-end key")
	}
	c := &Codec{sends: ToFrontend, self: id, incarnation: incarnation, m: newMacer()}
	c.key.set(c.m, key)
	return c, nil
}

// newRawCodec opens and seals with key, in either direction, and checks
// no freshness: for Marshal and Unmarshal.
func newRawCodec(key []byte) *Codec {
	c := &Codec{m: newMacer()}
	c.key.set(c.m, key)
	return c
}

// Incarnation is the incarnation this end sends with.
func (c *Codec) Incarnation() uint64 { return c.incarnation }

// Header is the header of the last datagram Decode accepted.
func (c *Codec) Header() Header { return c.hdr }

// Append numbers m with the next sequence number, seals it for the
// back-end it names (on a back-end: itself) and appends the datagram to
// dst. On error it returns dst unchanged (same length) and the error,
// and uses no sequence number; field problems (an IPv6 address, too many
// ports, ...) are [*FieldError]s wrapping [ErrMalformed]. With room for
// MaxDatagram bytes in dst it allocates nothing.
func (c *Codec) Append(dst []byte, m Message) ([]byte, error) {
	if c.sends == 0 {
		return dst, errors.New("proto: a raw Codec needs a header: use Append")
	}
	b, err := c.appendHeader(dst, Header{Direction: c.sends, Incarnation: c.incarnation, Seq: c.seq + 1}, m)
	if err == nil {
		c.seq++
	}
	return b, err
}

// appendHeader seals m with header h (whose Backend is m's) and the key
// of that back-end.
func (c *Codec) appendHeader(dst []byte, h Header, m Message) ([]byte, error) {
	b, ok := m.(body)
	if !ok {
		return dst, fmt.Errorf("proto: cannot encode %T: not a message of this package", m)
	}
	if isNil(b) {
		return dst, fmt.Errorf("proto: cannot encode nil %T", m)
	}
	h.Backend = b.backend()
	if c.sends == ToFrontend && h.Backend != c.self {
		return dst, fmt.Errorf("proto: back-end %d cannot send a %v naming back-end %d", c.self, b.Type(), h.Backend)
	}
	if h.Direction != ToBackend && h.Direction != ToFrontend {
		return dst, fmt.Errorf("proto: cannot encode direction %v", h.Direction)
	}
	start := len(dst)
	t := b.Type()
	e := &c.enc
	hdr := append(dst, magic0, magic1, Version, uint8(t), uint8(h.Direction), 0, 0, 0)
	hdr = binary.BigEndian.AppendUint32(hdr, h.Backend)
	hdr = binary.BigEndian.AppendUint64(hdr, h.Incarnation)
	hdr = binary.BigEndian.AppendUint64(hdr, h.Seq)
	*e = encoder{msg: t.String(), b: hdr}
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
	key := c.sealKey(h.Backend)
	return append(out, c.m.mac(key, out[start:], nil)[:tagLen]...), nil
}

// sealKey is the key a datagram naming back-end id is sealed with.
func (c *Codec) sealKey(id uint32) *macKey {
	if c.ring == nil {
		return &c.key
	}
	if p := c.peers[id]; p != nil {
		return &p.key
	}
	c.ring.derive(c.m, id, &c.scratch)
	return &c.scratch
}

// Decode checks one datagram, decodes it, and returns the Codec's
// message of its type (for example *Splice), valid until the next
// Decode; Header then says who sent it. The checks and the errors they
// return are listed in the package documentation. The message does not
// alias b. Decode allocates nothing, except for a SpliceAck.Reason that
// differs from the last one decoded, the first datagram of a back-end
// new to the front-end, and the [*FieldError] of a malformed body (which
// only a holder of the key can send).
func (c *Codec) Decode(b []byte) (Message, error) {
	if len(b) < headerLen+tagLen {
		return nil, c.refuse(ErrShort, "%d bytes, the smallest datagram has %d", uint64(len(b)), headerLen+tagLen)
	}
	if b[0] != magic0 || b[1] != magic1 {
		return nil, c.refuse(ErrBadMagic, "starts with %#02x %#02x", uint64(b[0]), uint64(b[1]))
	}
	if b[2] != Version {
		return nil, c.refuse(ErrVersion, "datagram has version %d, this side speaks version %d", uint64(b[2]), Version)
	}
	end := headerLen + int(binary.BigEndian.Uint16(b[6:8]))
	if len(b) < end+tagLen {
		return nil, c.refuse(ErrShort, "header announces %d body bytes, datagram holds %d bytes in all", uint64(end-headerLen), uint64(len(b)))
	}
	h := Header{
		Direction:   Direction(b[4]),
		Backend:     binary.BigEndian.Uint32(b[8:12]),
		Incarnation: binary.BigEndian.Uint64(b[12:20]),
		Seq:         binary.BigEndian.Uint64(b[20:28]),
	}
	switch {
	case c.sends == 0 && h.Direction != ToBackend && h.Direction != ToFrontend,
		c.sends != 0 && h.Direction == c.sends:
		return nil, c.refuse(ErrDirection, "direction byte %d", uint64(h.Direction), 0)
	case c.sends == ToFrontend && h.Backend != c.self:
		return nil, c.refuse(ErrPeer, "datagram for back-end %d, this is back-end %d", uint64(h.Backend), uint64(c.self))
	case c.sends == ToBackend && h.Backend == 0:
		return nil, c.refuse(ErrPeer, "datagram from back-end %d", 0, 0)
	}
	// The key, and the window the datagram must be fresh in.
	key, win := &c.key, (*ReplayWindow)(nil)
	var known *peer
	switch c.sends {
	case ToFrontend:
		win = &c.front
	case ToBackend:
		if known = c.peers[h.Backend]; known != nil {
			key, win = &known.key, &known.win
		} else {
			c.ring.derive(c.m, h.Backend, &c.scratch)
			key = &c.scratch
		}
	}
	if subtle.ConstantTimeCompare(c.m.mac(key, b[:end], nil)[:tagLen], b[end:end+tagLen]) != 1 {
		return nil, c.refuse(ErrAuth, "", 0, 0)
	}
	if extra := len(b) - end - tagLen; extra > 0 {
		return nil, c.refuse(ErrMalformed, "%d bytes after the authentication tag", uint64(extra), 0)
	}
	if b[5] != 0 {
		return nil, c.refuse(ErrMalformed, "header reserved byte %#02x must be zero", uint64(b[5]), 0)
	}
	if win != nil {
		if err := win.Check(h.Incarnation, h.Seq); err != nil {
			return nil, c.refuse(err, "incarnation %d, sequence number %d", h.Incarnation, h.Seq)
		}
	}
	t := Type(b[3])
	m := c.message(t)
	if m == nil {
		return nil, c.refuse(ErrUnknownType, "%d", uint64(b[3]), 0)
	}
	d := &c.dec
	d.msg, d.b, d.err, d.ports = t.String(), b[headerLen:end], nil, c.ports[:0]
	m.decode(d)
	err := d.finish()
	d.b, d.err = nil, nil // keep no reference to the caller's datagram
	if err != nil {
		return nil, err
	}
	if id := m.backend(); id != h.Backend {
		return nil, c.refuse(ErrMalformed, "the body names back-end %d, the header %d", uint64(id), uint64(h.Backend))
	}
	if inc, ok := ownIncarnation(m, h.Direction); ok && inc != h.Incarnation {
		return nil, c.refuse(ErrMalformed, "the body names incarnation %d, the header %d", inc, h.Incarnation)
	}
	// Genuine and whole: only now does it count as received.
	switch {
	case c.sends == ToBackend && known == nil:
		known = &peer{key: c.scratch}
		c.peers[h.Backend] = known
		win = &known.win
	}
	if win != nil {
		win.Accept(h.Incarnation, h.Seq)
	}
	c.hdr = h
	return m, nil
}

// ownIncarnation is the incarnation a back-end's Register or Keepalive
// names: its own, which must be the header's. (The front-end's
// RegisterAck and Keepalive name the back-end's, which they echo.)
func ownIncarnation(m body, dir Direction) (uint64, bool) {
	if dir != ToFrontend {
		return 0, false
	}
	switch m := m.(type) {
	case *Register:
		return m.Incarnation, true
	case *Keepalive:
		return m.Incarnation, true
	}
	return 0, false
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

// refusal is the error of a datagram Decode refused before its body: one
// per Codec, filled in place, so that refusing costs no allocation; the
// text is made only if someone asks for it.
type refusal struct {
	err    error
	format string // "" or a format with up to two %d-like verbs
	a, b   uint64
}

func (c *Codec) refuse(err error, format string, a, b uint64) error {
	c.refused = refusal{err: err, format: format, a: a, b: b}
	return &c.refused
}

func (r *refusal) Error() string {
	switch {
	case r.format == "":
		return r.err.Error()
	case countVerbs(r.format) == 1:
		return r.err.Error() + ": " + fmt.Sprintf(r.format, r.a)
	}
	return r.err.Error() + ": " + fmt.Sprintf(r.format, r.a, r.b)
}

func (r *refusal) Unwrap() error { return r.err }

func countVerbs(format string) int {
	n := 0
	for i := 0; i < len(format)-1; i++ {
		if format[i] == '%' {
			n++
			i++
		}
	}
	return n
}

// RefusalReason names the check a Decode error failed, for counters and
// metrics: "short", "magic", "version", "direction", "peer", "auth",
// "stale", "replay", "type", "malformed", or "other".
func RefusalReason(err error) string {
	for _, r := range refusalReasons {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "other"
}

// RefusalReasons lists every name RefusalReason returns, in a fixed
// order (the metrics print them so).
func RefusalReasons() []string {
	names := make([]string, 0, len(refusalReasons)+1)
	for _, r := range refusalReasons {
		names = append(names, r.name)
	}
	return append(names, "other")
}

var refusalReasons = [...]struct {
	err  error
	name string
}{
	{ErrShort, "short"}, {ErrBadMagic, "magic"}, {ErrVersion, "version"}, {ErrDirection, "direction"},
	{ErrPeer, "peer"}, {ErrAuth, "auth"}, {ErrStale, "stale"}, {ErrReplay, "replay"},
	{ErrUnknownType, "type"}, {ErrMalformed, "malformed"},
}

func isNil(b body) bool { return reflect.ValueOf(b).IsNil() }
