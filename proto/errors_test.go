package proto

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// bodyOf returns the body of a datagram produced by Marshal.
func bodyOf(b []byte) []byte { return b[headerLen : len(b)-tagLen] }

func wantErr(t *testing.T, err, target error, context string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want %v", context, err, target)
	}
}

func TestUnmarshalShort(t *testing.T) {
	valid := mustMarshal(t, testKey, &Close{RequestID: 1, BackendID: 2, Reason: CloseRST})
	for n := 0; n < headerLen+tagLen; n++ {
		_, err := unmarshal(testKey, valid[:n])
		wantErr(t, err, ErrShort, fmt.Sprintf("datagram of %d bytes", n))
	}
	// A full header whose length field promises more than the datagram has.
	_, err := unmarshal(testKey, valid[:len(valid)-1])
	wantErr(t, err, ErrShort, "datagram one byte short of its tag")
}

func TestUnmarshalBadMagic(t *testing.T) {
	b := mustMarshal(t, testKey, &Keepalive{Seq: 1})
	for _, i := range []int{0, 1} {
		c := bytes.Clone(b)
		c[i] ^= 0x20
		_, err := unmarshal(testKey, c)
		wantErr(t, err, ErrBadMagic, "flipped magic byte")
	}
}

func TestUnmarshalVersion(t *testing.T) {
	other := uint8(Version + 1)
	b := seal(testKey, other, uint8(TypeKeepalive), uint8(ToFrontend), 0, 0, bodyOf(mustMarshal(t, testKey, &Keepalive{})))
	_, err := unmarshal(testKey, b)
	wantErr(t, err, ErrVersion, "a newer version")
	theirs, ours := fmt.Sprintf("version %d", other), fmt.Sprintf("version %d", Version)
	if err == nil || !strings.Contains(err.Error(), theirs) || !strings.Contains(err.Error(), ours) {
		t.Errorf("version error %q should name both %s and %s", err, theirs, ours)
	}
}

func TestUnmarshalAuth(t *testing.T) {
	b := mustMarshal(t, testKey, goldenSplice())

	_, err := unmarshal([]byte("another key, also 32 bytes long!"), b)
	wantErr(t, err, ErrAuth, "wrong key")
	_, err = unmarshal(nil, b)
	wantErr(t, err, ErrAuth, "empty key against a keyed datagram")

	// Every single-bit change past the version byte must be caught by the
	// tag (or, for the length field, by the length check).
	for i := 3; i < len(b); i++ {
		c := bytes.Clone(b)
		c[i] ^= 0x01
		_, err := unmarshal(testKey, c)
		if i == 4 { // the direction: 0x03 is no direction at all
			wantErr(t, err, ErrDirection, "flipped direction byte")
			continue
		}
		if i == 6 || i == 7 {
			if !errors.Is(err, ErrAuth) && !errors.Is(err, ErrShort) {
				t.Errorf("flipped length byte %d: got %v, want ErrAuth or ErrShort", i, err)
			}
			continue
		}
		wantErr(t, err, ErrAuth, fmt.Sprintf("flipped byte %d", i))
	}
}

func TestUnmarshalUnknownType(t *testing.T) {
	for _, typ := range []uint8{0, uint8(TypeClose) + 1, 255} {
		_, err := unmarshal(testKey, seal(testKey, Version, typ, uint8(ToFrontend), 0, 0, nil))
		wantErr(t, err, ErrUnknownType, fmt.Sprintf("type %d", typ))
	}
}

func TestUnmarshalHeaderAndTrailer(t *testing.T) {
	body := bodyOf(mustMarshal(t, testKey, &Keepalive{Seq: 3}))
	for _, dir := range []uint8{0, 3, 255} {
		_, err := unmarshal(testKey, seal(testKey, Version, uint8(TypeKeepalive), dir, 0, 0, body))
		wantErr(t, err, ErrDirection, fmt.Sprintf("direction %d", dir))
	}
	_, err := unmarshal(testKey, seal(testKey, Version, uint8(TypeKeepalive), uint8(ToFrontend), 0x80, 0, body))
	wantErr(t, err, ErrMalformed, "reserved 0x80")

	after := append(mustMarshal(t, testKey, &Keepalive{Seq: 3}), 0)
	_, err = unmarshal(testKey, after)
	wantErr(t, err, ErrMalformed, "byte after the tag")
}

// TestUnmarshalTruncatedBody presents, for every message type, every
// shorter body under a valid tag: each must fail as ErrMalformed naming the
// message, never panic and never succeed.
func TestUnmarshalTruncatedBody(t *testing.T) {
	for _, m := range sampleMessages() {
		full := mustMarshal(t, testKey, m)
		body := bodyOf(full)
		for n := 0; n < len(body); n++ {
			_, err := unmarshal(testKey, seal(testKey, Version, uint8(m.Type()), uint8(testHeader(m).Direction), 0, BackendOf(m), body[:n]))
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("%v body cut to %d bytes: got %v, want a FieldError", m.Type(), n, err)
			}
			if fe.Message != m.Type().String() || fe.Field == "" {
				t.Errorf("%v body cut to %d bytes: error %q does not name message and field", m.Type(), n, err)
			}
		}
		// Cutting the datagram itself (keeping the header's length) must
		// fail too, before any body parsing.
		for n := 0; n < len(full); n++ {
			if _, err := unmarshal(testKey, full[:n]); err == nil {
				t.Fatalf("%v datagram cut to %d bytes decoded", m.Type(), n)
			}
		}
	}
}

func TestUnmarshalTrailingBody(t *testing.T) {
	for _, m := range sampleMessages() {
		body := append(bytes.Clone(bodyOf(mustMarshal(t, testKey, m))), 0)
		_, err := unmarshal(testKey, seal(testKey, Version, uint8(m.Type()), uint8(testHeader(m).Direction), 0, BackendOf(m), body))
		wantErr(t, err, ErrMalformed, m.Type().String()+" with a trailing byte")
		if err != nil && !strings.Contains(err.Error(), "trailing") {
			t.Errorf("%v: error %q does not mention trailing bytes", m.Type(), err)
		}
	}
}

// TestUnmarshalFieldValues feeds authenticated bodies whose fields hold
// values the format forbids; the error must name the field.
func TestUnmarshalFieldValues(t *testing.T) {
	patch := func(m Message, off int, v ...byte) []byte {
		body := bytes.Clone(bodyOf(mustMarshal(t, testKey, m)))
		copy(body[off:], v)
		return seal(testKey, Version, uint8(m.Type()), uint8(testHeader(m).Direction), 0, BackendOf(m), body)
	}
	register := &Register{IP: netip.MustParseAddr("198.18.0.1")}
	for _, tc := range []struct {
		datagram []byte
		prefix   string
	}{
		{patch(register, 26, MaxWebPorts+1), "proto: Register.WebPorts: "},
		{patch(register, 26, 3, 0, 80), "proto: Register.WebPorts: truncated"},
		{patch(&RegisterAck{}, 12, 0x80), "proto: RegisterAck.KeepaliveInterval: "},
		{patch(goldenSplice(), 44, 0x20), "proto: Splice.Flags: "},
		{patch(goldenSplice(), 45, 15), "proto: Splice.WScaleBackend: "},
		{patch(goldenSplice(), 46, 255), "proto: Splice.WScaleFrontend: "},
		{patch(&SpliceAck{}, 12, 2), "proto: SpliceAck.OK: "},
		{patch(&SpliceAck{Reason: "ab"}, 13, 3), "proto: SpliceAck.Reason: truncated"},
		{patch(&Feedback{}, 12, 0xff), "proto: Feedback.ServiceTime: "},
		{patch(&Close{Reason: CloseFIN}, 12, 0), "proto: Close.Reason: "},
		{patch(&Close{Reason: CloseFIN}, 12, 5), "proto: Close.Reason: "},
	} {
		_, err := unmarshal(testKey, tc.datagram)
		wantErr(t, err, ErrMalformed, tc.prefix)
		if err != nil && !strings.HasPrefix(err.Error(), tc.prefix) {
			t.Errorf("error %q, want prefix %q", err, tc.prefix)
		}
	}
}

func TestMarshalRejects(t *testing.T) {
	v6 := netip.MustParseAddr("2001:db8::1")
	mapped := netip.MustParseAddr("::ffff:198.18.0.1")
	withSplice := func(f func(*Splice)) *Splice { s := goldenSplice(); f(s); return s }
	for _, tc := range []struct {
		m      Message
		prefix string
	}{
		{&Register{IP: v6}, "proto: Register.IP: "},
		{&Register{IP: mapped}, "proto: Register.IP: "},
		{&Register{}, "proto: Register.IP: "}, // zero netip.Addr
		{&Register{IP: netip.IPv4Unspecified(), WebPorts: make([]uint16, MaxWebPorts+1)}, "proto: Register.WebPorts: "},
		{&RegisterAck{KeepaliveInterval: -time.Second}, "proto: RegisterAck.KeepaliveInterval: "},
		{withSplice(func(s *Splice) { s.ClientIP = v6 }), "proto: Splice.ClientIP: "},
		{withSplice(func(s *Splice) { s.VIP = v6 }), "proto: Splice.VIP: "},
		{withSplice(func(s *Splice) { s.HandoffIP = mapped }), "proto: Splice.HandoffIP: "},
		{withSplice(func(s *Splice) { s.BackendIP = netip.Addr{} }), "proto: Splice.BackendIP: "},
		{withSplice(func(s *Splice) { s.Flags = 0x20 }), "proto: Splice.Flags: "},
		{withSplice(func(s *Splice) { s.WScaleBackend = 15 }), "proto: Splice.WScaleBackend: "},
		{withSplice(func(s *Splice) { s.WScaleFrontend = 15 }), "proto: Splice.WScaleFrontend: "},
		{&SpliceAck{Reason: strings.Repeat("x", MaxReasonLen+1)}, "proto: SpliceAck.Reason: "},
		{&Feedback{ServiceTime: -1}, "proto: Feedback.ServiceTime: "},
		{&Close{}, "proto: Close.Reason: "},
		{&Close{Reason: CloseBackendDead + 1}, "proto: Close.Reason: "},
	} {
		dst := []byte("keep")
		out, err := Append(dst, testKey, testHeader(tc.m), tc.m)
		wantErr(t, err, ErrMalformed, tc.prefix)
		if err != nil && !strings.HasPrefix(err.Error(), tc.prefix) {
			t.Errorf("error %q, want prefix %q", err, tc.prefix)
		}
		if string(out) != "keep" {
			t.Errorf("%s: Append returned %q on error, want dst unchanged", tc.prefix, out)
		}
	}
}

type foreignMessage struct{}

func (foreignMessage) Type() Type { return TypeClose }

func TestMarshalRejectsNonMessages(t *testing.T) {
	for _, m := range []Message{nil, (*Splice)(nil), foreignMessage{}} {
		if b, err := Marshal(testKey, Header{Direction: ToFrontend}, m); err == nil {
			t.Errorf("Marshal(%#v) = %x, want an error", m, b)
		}
	}
}

// oversized is a test-only message whose body would break MaxDatagram; no
// real message can, so this is the only way to exercise the check.
type oversized struct{}

func (*oversized) Type() Type        { return TypeKeepalive }
func (*oversized) encode(e *encoder) { e.b = append(e.b, make([]byte, MaxDatagram)...) }
func (*oversized) decode(d *decoder) {}
func (*oversized) backend() uint32   { return 0 }

func TestMarshalMaxDatagram(t *testing.T) {
	out, err := Append([]byte("x"), testKey, Header{Direction: ToFrontend}, &oversized{})
	if err == nil || !strings.Contains(err.Error(), "MaxDatagram") {
		t.Fatalf("oversized message: got %v, want a MaxDatagram error", err)
	}
	if string(out) != "x" {
		t.Fatalf("Append returned %q on error, want dst unchanged", out)
	}
}
