package proto

import (
	"testing"
	"time"
)

// TestFeedbackFirstByteTravelsOnlyWhenReported: a shim that reports the
// response's first byte (handoff timelines, issue 11) sends 8 more bytes;
// without it the Feedback keeps its 34-byte layout (TestGoldenDatagrams),
// and a FirstByte cut short is refused rather than misread.
func TestFeedbackFirstByteTravelsOnlyWhenReported(t *testing.T) {
	plain := &Feedback{BackendID: 4, RequestID: 9, ServiceTime: 30 * time.Millisecond, ResponseBytes: 100, ResponseEnd: 7}
	with := *plain
	with.FirstByte = 12*time.Millisecond + 345*time.Nanosecond
	bp := mustMarshal(t, testKey, plain)
	bw := mustMarshal(t, testKey, &with)
	if len(bw) != len(bp)+8 {
		t.Fatalf("Feedback with FirstByte is %d bytes, want %d", len(bw), len(bp)+8)
	}
	got, err := unmarshal(testKey, bw)
	if err != nil {
		t.Fatal(err)
	}
	if fb := got.(*Feedback); *fb != with {
		t.Fatalf("round trip: got %+v, want %+v", fb, with)
	}
	got, err = unmarshal(testKey, bp)
	if err != nil {
		t.Fatal(err)
	}
	if fb := got.(*Feedback); fb.FirstByte != 0 {
		t.Errorf("FirstByte %v decoded from a Feedback without it", fb.FirstByte)
	}
	short := append([]byte(nil), bw[:len(bw)-tagLen-3]...)
	if _, err := unmarshal(testKey, reseal(testKey, short)); err == nil {
		t.Error("a Feedback with 5 bytes of FirstByte was accepted")
	}
}
