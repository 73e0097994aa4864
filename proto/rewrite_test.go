package proto

import (
	"reflect"
	"testing"
)

// TestSpliceRewriteFieldsTravelOnlyWithTheirFlag: a Splice for a request
// whose target the front-end rewrote carries the request offset (issue
// 10), as 12 more bytes that exist only with SpliceRewrite, so the layout
// of every other Splice (TestGoldenSplice) is unchanged and a peer that
// does not know the flag refuses the message rather than misreading it.
func TestSpliceRewriteFieldsTravelOnlyWithTheirFlag(t *testing.T) {
	m := goldenSplice()
	m.Flags |= SpliceRewrite
	m.RewriteStart, m.RewriteEnd, m.RequestOffset = 0xfffffffe, 0x00000010, 0xfffffff9 // wraps; offset -7
	b := mustMarshal(t, testKey, m)
	plain := mustMarshal(t, testKey, goldenSplice())
	if len(b) != len(plain)+12 {
		t.Fatalf("rewrite Splice is %d bytes, want %d", len(b), len(plain)+12)
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
	m2.RewriteStart, m2.RewriteEnd, m2.RequestOffset = 1, 2, 3
	got, err = unmarshal(testKey, mustMarshal(t, testKey, m2))
	if err != nil {
		t.Fatal(err)
	}
	if s := got.(*Splice); s.RewriteStart != 0 || s.RewriteEnd != 0 || s.RequestOffset != 0 {
		t.Errorf("rewrite fields without the flag decoded as %d %d %d", s.RewriteStart, s.RewriteEnd, s.RequestOffset)
	}
	// The flag with the fields cut off is refused.
	short := append([]byte(nil), plain[:len(plain)-tagLen]...)
	short[headerLen+44] |= SpliceRewrite
	if _, err := unmarshal(testKey, reseal(testKey, short)); err == nil {
		t.Error("a rewrite Splice without its fields was accepted")
	}
}
