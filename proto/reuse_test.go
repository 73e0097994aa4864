package proto

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func reuseSplice() *Splice {
	m := goldenSplice()
	m.Reuse = SpliceReuse{On: true, ServerNext: 0xfffffffa, FrontNext: 0x01020304, ClientDelta: 0x80000000, ClientTSOffset: 0xffff0001}
	return m
}

// TestSpliceReuseTravelsAsAnExtension: a Splice that moves an idle C2 to
// a new client (docs/pooled-c2.md) carries its four numbers after
// everything else, behind a kind byte, so every other Splice keeps its
// layout and a shim that does not know the extension refuses it as
// trailing bytes rather than installing a translation it cannot finish.
func TestSpliceReuseTravelsAsAnExtension(t *testing.T) {
	m := reuseSplice()
	b := mustMarshal(t, testKey, m)
	plain := mustMarshal(t, testKey, goldenSplice())
	if len(b) != len(plain)+17 {
		t.Fatalf("reuse Splice is %d bytes, want %d", len(b), len(plain)+17)
	}
	body := bodyOf(b)
	if got := body[len(bodyOf(plain))]; got != spliceExtReuse {
		t.Fatalf("extension kind %d, want %d", got, spliceExtReuse)
	}
	got, err := unmarshal(testKey, b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	// Without On the numbers neither travel nor come back.
	m2 := goldenSplice()
	m2.Reuse = SpliceReuse{ServerNext: 1, FrontNext: 2, ClientDelta: 3, ClientTSOffset: 4}
	got, err = unmarshal(testKey, mustMarshal(t, testKey, m2))
	if err != nil {
		t.Fatal(err)
	}
	if r := got.(*Splice).Reuse; r != (SpliceReuse{}) {
		t.Errorf("reuse without On decoded as %+v", r)
	}
}

// TestSpliceReuseRefused: a reused C2 has no SYN and its target is not
// rewritten, so neither end takes a reuse with those flags; an unknown
// extension kind and a cut-off extension are refused, naming the field.
func TestSpliceReuseRefused(t *testing.T) {
	for _, flag := range []uint8{SpliceRewrite, SpliceAtSYN} {
		m := reuseSplice()
		m.Flags |= flag
		if flag == SpliceRewrite {
			m.RewriteStart, m.RewriteEnd = 1, 2
		}
		_, err := Append(nil, testKey, testHeader(m), m)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "Reuse" {
			t.Errorf("flag %#x: Append error %v, want a FieldError for Reuse", flag, err)
		}
		// The same bytes built by hand are refused on the way in.
		m.Reuse.On = false
		b := mustMarshal(t, testKey, m)
		body := append(bodyOf(b)[:len(bodyOf(b)):len(bodyOf(b))], spliceExtReuse, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4)
		_, err = unmarshal(testKey, seal(testKey, Version, uint8(TypeSplice), uint8(ToBackend), 0, BackendOf(m), body))
		if !errors.As(err, &fe) || fe.Field != "Reuse" {
			t.Errorf("flag %#x: decode error %v, want a FieldError for Reuse", flag, err)
		}
	}
	plain := bodyOf(mustMarshal(t, testKey, goldenSplice()))
	for _, c := range []struct {
		name  string
		tail  []byte
		field string
	}{
		{"unknown kind", []byte{4, 0, 0, 0, 0}, "Extension"},
		{"kinds out of order", []byte{spliceExtCloseResponses, spliceExtReuse, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4}, "Extension"},
		{"a kind twice", []byte{spliceExtCloseResponses, spliceExtCloseResponses}, "Extension"},
		{"cut off", []byte{spliceExtReuse, 0, 0, 0, 1, 0, 0}, "Reuse.FrontNext"},
	} {
		body := append(append([]byte(nil), plain...), c.tail...)
		_, err := unmarshal(testKey, seal(testKey, Version, uint8(TypeSplice), uint8(ToBackend), 0, BackendOf(goldenSplice()), body))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: error %v, want a malformed %s", c.name, err, c.field)
		}
		if c.name != "cut off" && (err == nil || !strings.Contains(err.Error(), "trailing")) {
			t.Errorf("unknown kind: error %v does not say trailing bytes", err)
		}
	}
}

// TestSpliceCloseResponsesTravelsAsExtension2: one byte, alone or after
// the reuse's numbers.
func TestSpliceCloseResponsesTravelsAsExtension2(t *testing.T) {
	plain := mustMarshal(t, testKey, goldenSplice())
	for _, m := range []*Splice{goldenSplice(), reuseSplice()} {
		m.CloseResponses = true
		b := mustMarshal(t, testKey, m)
		want := len(plain) + 1
		if m.Reuse.On {
			want += 17
		}
		if len(b) != want {
			t.Errorf("Splice with CloseResponses (reuse %v) is %d bytes, want %d", m.Reuse.On, len(b), want)
		}
		got, err := unmarshal(testKey, b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, m)
		}
	}
}

// TestFeedbackCloseSentIsOneOptionalByte: after FirstByte or without it.
func TestFeedbackCloseSentIsOneOptionalByte(t *testing.T) {
	for _, first := range []time.Duration{0, 3 * time.Millisecond} {
		m := &Feedback{BackendID: 4, RequestID: 9, ServiceTime: time.Millisecond, ResponseEnd: 7, FirstByte: first, CloseSent: true, FINSent: first != 0}
		plain := *m
		plain.CloseSent, plain.FINSent = false, false
		b := mustMarshal(t, testKey, m)
		if n := len(b) - len(mustMarshal(t, testKey, &plain)); n != 1 {
			t.Errorf("FirstByte %v: CloseSent takes %d bytes, want 1", first, n)
		}
		got, err := unmarshal(testKey, b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, m)
		}
	}
}

// TestSpliceReuseEarlyIsExtension3: only with a reused C2.
func TestSpliceReuseEarlyIsExtension3(t *testing.T) {
	m := reuseSplice()
	m.Reuse.Early, m.CloseResponses = true, true
	b := mustMarshal(t, testKey, m)
	got, err := unmarshal(testKey, b)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if body := bodyOf(b); body[len(body)-1] != spliceExtEarly {
		t.Errorf("the last byte is %d, want extension %d", body[len(body)-1], spliceExtEarly)
	}
	alone := goldenSplice()
	alone.Reuse.Early = true
	if _, err := Append(nil, testKey, testHeader(alone), alone); err == nil {
		t.Error("an early request without a reused C2 was encoded")
	}
	plain := bodyOf(mustMarshal(t, testKey, goldenSplice()))
	body := append(append([]byte(nil), plain...), spliceExtEarly)
	if _, err := unmarshal(testKey, seal(testKey, Version, uint8(TypeSplice), uint8(ToBackend), 0, BackendOf(goldenSplice()), body)); err == nil {
		t.Error("an early request without a reused C2 was decoded")
	}
}
