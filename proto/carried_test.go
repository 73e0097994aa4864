package proto

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func carriedSplice() *Splice {
	m := goldenSplice()
	m.Flags |= SpliceAtSYN | SpliceRequest
	m.WScaleBackend = 0
	m.RequestWindow, m.RequestTSVal = 0x1f5, 0xfedcba98
	m.Request = []byte("GET /data/1K HTTP/1.1\r\nHost: h\r\n\r\n")
	return m
}

// TestSpliceCarriesTheRequestOnlyWithItsFlag: the request the shim sends
// for the front-end (issue 7) travels as 8+n bytes after the rest, only
// with SpliceRequest and SpliceAtSYN, so every other Splice keeps its
// layout and a peer that does not know the flag refuses the message.
func TestSpliceCarriesTheRequestOnlyWithItsFlag(t *testing.T) {
	m := carriedSplice()
	b := mustMarshal(t, testKey, m)
	plain := mustMarshal(t, testKey, goldenSplice())
	if want := len(plain) + 8 + len(m.Request); len(b) != want {
		t.Fatalf("carried Splice is %d bytes, want %d", len(b), want)
	}
	got, err := unmarshal(testKey, b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	// Without the flag the fields neither travel nor come back.
	m2 := goldenSplice()
	m2.RequestWindow, m2.RequestTSVal, m2.Request = 1, 2, []byte("x")
	got, err = unmarshal(testKey, mustMarshal(t, testKey, m2))
	if err != nil {
		t.Fatal(err)
	}
	if s := got.(*Splice); s.RequestWindow != 0 || s.RequestTSVal != 0 || s.Request != nil {
		t.Errorf("request fields without the flag decoded as %d %d %q", s.RequestWindow, s.RequestTSVal, s.Request)
	}
}

func TestSpliceCarriedRequestRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		mod   func(m *Splice)
		field string
	}{
		{"without the SYN", func(m *Splice) { m.Flags &^= SpliceAtSYN }, "Flags"},
		{"empty", func(m *Splice) { m.Request = nil }, "Request"},
		{"too long", func(m *Splice) { m.Request = bytes.Repeat([]byte("a"), MaxSpliceRequest+1) }, "Request"},
	} {
		m := carriedSplice()
		c.mod(m)
		if _, err := Marshal(testKey, testHeader(m), m); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: encoding gave %v, want an error naming %s", c.name, err, c.field)
		}
	}
	// The longest fits a datagram.
	m := carriedSplice()
	m.Request = bytes.Repeat([]byte("a"), MaxSpliceRequest)
	if b := mustMarshal(t, testKey, m); len(b) > MaxDatagram {
		t.Fatalf("%d bytes", len(b))
	}
	// On the wire: a length past the end, a zero length, the flag
	// without the SYN's: refused.
	b := mustMarshal(t, testKey, carriedSplice())
	body := append([]byte(nil), b[:len(b)-tagLen]...)
	nOff := len(body) - len(carriedSplice().Request) - 2
	for _, c := range []struct {
		name string
		mod  func(p []byte) []byte
	}{
		{"length past the end", func(p []byte) []byte { p[nOff+1]++; return p }},
		{"zero length", func(p []byte) []byte { p[nOff], p[nOff+1] = 0, 0; return p[:nOff+2] }},
		{"without the SYN's flag", func(p []byte) []byte { p[headerLen+44] &^= SpliceAtSYN; return p }},
		{"cut", func(p []byte) []byte { return p[:nOff-3] }},
	} {
		p := c.mod(append([]byte(nil), body...))
		if _, err := unmarshal(testKey, reseal(testKey, p)); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

// TestSpliceImplicitAckOnlyWithACarriedRequest: bit 6 (the SYN-ACK that
// takes the request in the SYN acknowledges the Splice) round-trips with
// a carried request and is refused without one, encoding and decoding.
func TestSpliceImplicitAckOnlyWithACarriedRequest(t *testing.T) {
	m := carriedSplice()
	m.Flags |= SpliceImplicitAck
	got, err := unmarshal(testKey, mustMarshal(t, testKey, m))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	bare := goldenSplice()
	bare.Flags |= SpliceAtSYN | SpliceImplicitAck
	bare.WScaleBackend = 0
	if _, err := Marshal(testKey, testHeader(bare), bare); err == nil || !strings.Contains(err.Error(), "bit 6") {
		t.Fatalf("encoding bit 6 without a carried request gave %v, want an error naming bit 6", err)
	}
	// On the wire: a Splice with the SYN's bit and bit 6 but no request.
	bare.Flags &^= SpliceImplicitAck
	b := mustMarshal(t, testKey, bare)
	body := append([]byte(nil), b[:len(b)-tagLen]...)
	body[headerLen+44] |= SpliceImplicitAck
	if _, err := unmarshal(testKey, reseal(testKey, body)); err == nil || !strings.Contains(err.Error(), "bit 6") {
		t.Fatalf("decoding bit 6 without a carried request gave %v, want an error naming bit 6", err)
	}
}

// TestSpliceKeepsCookieOnlyWithFastOpen: bit 7 (the front-end keeps the
// cookie its SYN asks for) round-trips with bit 6 and is refused without
// it, encoding and decoding.
func TestSpliceKeepsCookieOnlyWithFastOpen(t *testing.T) {
	m := carriedSplice()
	m.Flags |= SpliceImplicitAck | SpliceKeepsCookie
	got, err := unmarshal(testKey, mustMarshal(t, testKey, m))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	m.Flags &^= SpliceImplicitAck
	if _, err := Marshal(testKey, testHeader(m), m); err == nil || !strings.Contains(err.Error(), "bit 7") {
		t.Fatalf("encoding bit 7 without bit 6 gave %v, want an error naming bit 7", err)
	}
	m.Flags &^= SpliceKeepsCookie
	b := mustMarshal(t, testKey, m)
	body := append([]byte(nil), b[:len(b)-tagLen]...)
	body[headerLen+44] |= SpliceKeepsCookie
	if _, err := unmarshal(testKey, reseal(testKey, body)); err == nil || !strings.Contains(err.Error(), "bit 7") {
		t.Fatalf("decoding bit 7 without bit 6 gave %v, want an error naming bit 7", err)
	}
}
