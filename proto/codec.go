package proto

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"time"
)

// FieldError says which field of which message could not be encoded or
// decoded, and why. It wraps [ErrMalformed].
type FieldError struct {
	Message string // message type name, e.g. "Splice"
	Field   string // Go field name, e.g. "WebPorts"; empty for the body as a whole
	Problem string // what is wrong, e.g. "truncated: needs 2 bytes, 1 left"
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return "proto: " + e.Message + ": " + e.Problem
	}
	return "proto: " + e.Message + "." + e.Field + ": " + e.Problem
}

// Unwrap makes errors.Is(err, ErrMalformed) hold.
func (e *FieldError) Unwrap() error { return ErrMalformed }

// encoder appends body fields to b. The first problem is kept in err and
// later writes still happen; Append discards the bytes when err is set.
// This keeps the per-message encode methods a flat list of fields.
type encoder struct {
	msg string
	b   []byte
	err error
}

func (e *encoder) fail(field, format string, args ...any) {
	if e.err == nil {
		e.err = &FieldError{Message: e.msg, Field: field, Problem: fmt.Sprintf(format, args...)}
	}
}

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }

func (e *encoder) mac(m [6]byte) { e.b = append(e.b, m[:]...) }

func (e *encoder) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// duration writes a non-negative duration as nanoseconds; a negative one
// has no meaning for intervals and service times, so it is refused.
func (e *encoder) duration(field string, d time.Duration) {
	if d < 0 {
		e.fail(field, "negative duration %v", d)
	}
	e.u64(uint64(d))
}

// addr4 writes an IPv4 address. IPv4-mapped IPv6 addresses are refused too:
// the data path is IPv4 only and silently unmapping would hide a bug.
func (e *encoder) addr4(field string, a netip.Addr) {
	if !a.Is4() {
		e.fail(field, "%v is not an IPv4 address", a)
		return // As4 would panic
	}
	b := a.As4()
	e.b = append(e.b, b[:]...)
}

// decoder reads body fields from b. After the first problem err is set
// and every further read returns a zero value, so decode methods need no
// error checks between fields; finish reports the first problem.
type decoder struct {
	msg string
	b   []byte
	err error
	// ports is the storage Register.WebPorts is decoded into (the
	// Codec's), empty and with room for MaxWebPorts.
	ports []uint16
	// reason is the last SpliceAck.Reason decoded: the same bytes again
	// reuse the string instead of allocating a copy.
	reason string
}

func (d *decoder) fail(field, format string, args ...any) {
	if d.err == nil {
		d.err = &FieldError{Message: d.msg, Field: field, Problem: fmt.Sprintf(format, args...)}
	}
}

// take consumes n bytes for field; ok is false if they are not there or an
// earlier field already failed.
func (d *decoder) take(field string, n int) (p []byte, ok bool) {
	if d.err != nil {
		return nil, false
	}
	if len(d.b) < n {
		d.fail(field, "truncated: needs %d bytes, %d left", n, len(d.b))
		return nil, false
	}
	p, d.b = d.b[:n], d.b[n:]
	return p, true
}

func (d *decoder) u8(field string) uint8 {
	p, ok := d.take(field, 1)
	if !ok {
		return 0
	}
	return p[0]
}

func (d *decoder) u16(field string) uint16 {
	p, ok := d.take(field, 2)
	if !ok {
		return 0
	}
	return binary.BigEndian.Uint16(p)
}

func (d *decoder) u32(field string) uint32 {
	p, ok := d.take(field, 4)
	if !ok {
		return 0
	}
	return binary.BigEndian.Uint32(p)
}

func (d *decoder) u64(field string) uint64 {
	p, ok := d.take(field, 8)
	if !ok {
		return 0
	}
	return binary.BigEndian.Uint64(p)
}

func (d *decoder) mac(field string) (m [6]byte) {
	p, ok := d.take(field, 6)
	if ok {
		copy(m[:], p)
	}
	return m
}

// bool accepts only 0 and 1 so that the encoding stays canonical.
func (d *decoder) bool(field string) bool {
	v := d.u8(field)
	if v > 1 {
		d.fail(field, "boolean byte is %d, want 0 or 1", v)
	}
	return v == 1
}

func (d *decoder) duration(field string) time.Duration {
	v := d.u64(field)
	if v > math.MaxInt64 {
		d.fail(field, "%d ns does not fit a non-negative time.Duration", v)
		return 0
	}
	return time.Duration(v)
}

func (d *decoder) addr4(field string) netip.Addr {
	p, ok := d.take(field, 4)
	if !ok {
		return netip.Addr{}
	}
	return netip.AddrFrom4([4]byte(p))
}

// finish returns the first field problem, or complains about bytes left
// over after the last field.
func (d *decoder) finish() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail("", "%d trailing bytes after the last field", len(d.b))
	}
	return d.err
}
