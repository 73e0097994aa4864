package wire_test

import (
	"math/rand/v2"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

func TestSeqAcrossWrap(t *testing.T) {
	const hi, lo = wire.Seq(0xfffffff0), wire.Seq(0x10)
	tests := []struct {
		name string
		got  bool
		want bool
	}{
		{"hi < lo", hi.LessThan(lo), true},
		{"lo < hi", lo.LessThan(hi), false},
		{"hi <= lo", hi.LessEq(lo), true},
		{"lo <= hi", lo.LessEq(hi), false},
		{"hi < hi", hi.LessThan(hi), false},
		{"hi <= hi", hi.LessEq(hi), true},
		{"0xffffffff < 0", wire.Seq(0xffffffff).LessThan(0), true},
		{"lo in [hi, lo+1)", lo.InRange(hi, lo+1), true},
		{"hi in [hi, lo)", hi.InRange(hi, lo), true},
		{"lo in [hi, lo)", lo.InRange(hi, lo), false},
		{"0 in [hi, lo)", wire.Seq(0).InRange(hi, lo), true},
		{"hi-1 in [hi, lo)", (hi - 1).InRange(hi, lo), false},
		{"x in [x, x)", hi.InRange(hi, hi), false},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if d := lo.Sub(hi); d != 0x20 {
		t.Errorf("lo.Sub(hi) = %d, want 32", d)
	}
	if d := hi.Sub(lo); d != -0x20 {
		t.Errorf("hi.Sub(lo) = %d, want -32", d)
	}
	if m := hi.Max(lo); m != lo {
		t.Errorf("hi.Max(lo) = %#x, want %#x", m, lo)
	}
	if m := lo.Max(hi); m != lo {
		t.Errorf("lo.Max(hi) = %#x, want %#x", m, lo)
	}
	if s := hi.Add(0x20); s != lo {
		t.Errorf("hi.Add(32) = %#x, want %#x", s, lo)
	}
	if s := lo.Add(-0x20); s != hi {
		t.Errorf("lo.Add(-32) = %#x, want %#x", s, hi)
	}
}

// TestSeqProperties checks, for random pairs less than 2^31 apart, that
// exactly one of a<b, a==b, b<a holds, that LessEq agrees, that Sub is
// antisymmetric and consistent with Add, and that Max picks the later one.
func TestSeqProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for i := range 200000 {
		a := wire.Seq(randSpecial32(r))
		d := int32(r.Int64N(1<<32-1) - (1<<31 - 1)) // (-2^31, 2^31)
		if i%4 == 0 {
			d = int32(r.IntN(64)) - 32
		}
		b := a.Add(d)
		lt, gt := a.LessThan(b), b.LessThan(a)
		if n := count(lt, gt, a == b); n != 1 {
			t.Fatalf("a=%#x b=%#x: a<b %v b<a %v", a, b, lt, gt)
		}
		if a.LessEq(b) != (lt || a == b) || b.LessEq(a) != (gt || a == b) {
			t.Fatalf("a=%#x b=%#x: LessEq disagrees with LessThan", a, b)
		}
		if b.Sub(a) != d || a.Sub(b) != -d {
			t.Fatalf("a=%#x b=%#x: Sub %d/%d, want %d", a, b, b.Sub(a), a.Sub(b), d)
		}
		if lt != (d > 0) {
			t.Fatalf("a=%#x b=%#x d=%d: a<b is %v", a, b, d, lt)
		}
		want := b
		if d < 0 {
			want = a
		}
		if a.Max(b) != want || b.Max(a) != want {
			t.Fatalf("Max(%#x, %#x) = %#x/%#x, want %#x", a, b, a.Max(b), b.Max(a), want)
		}
		if d > 0 && (!a.InRange(a, b) || b.InRange(a, b) || !b.Add(-1).InRange(a, b)) {
			t.Fatalf("InRange wrong for [%#x, %#x)", a, b)
		}
	}
}

func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
