package timeline

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleRecord() Record {
	r := Record{Flow: 7, Client: netip.MustParseAddrPort("198.18.0.10:40001"), Port: 80, Backend: 2,
		Customer: "A", Method: "GET", Path: "/a\"b\\c\x01\xff/é", Reason: "fin", Request: 1, Requests: 2, SYNs: 1, C2SYNs: 2, SpliceSends: 3, RequestResends: 4,
		Carried: true, Reused: true, HeadBytes: 60, RequestBytes: 60, ResponseBytes: 1 << 20, ForwardedBytes: 3, ShimUncertainty: 150 * time.Microsecond}
	base := int64(5e9)
	for s := range NumSteps {
		r.Set(s, base+int64(s)*1000)
	}
	r.AtStop = true
	r.AddRetx("client_sack", base+10500)
	r.AddRetx("syn", base+500)
	return r
}

// TestJSONRoundTrip: a record written by AppendJSON is valid JSON and
// reads back as itself, a path with quotes, control bytes and invalid
// UTF-8 included (those bytes come back as U+FFFD).
func TestJSONRoundTrip(t *testing.T) {
	r := sampleRecord()
	line := r.AppendJSON(nil)
	if !json.Valid(bytes.TrimSpace(line)) || line[len(line)-1] != '\n' {
		t.Fatalf("not one JSON line: %s", line)
	}
	got, err := ParseJSON(line)
	if err != nil {
		t.Fatal(err)
	}
	want := r
	want.Path = "/a\"b\\c\x01\ufffd/é"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
	recs, err := Read(strings.NewReader(string(line) + "\n" + string(line)))
	if err != nil || len(recs) != 2 {
		t.Fatalf("Read: %d records, %v", len(recs), err)
	}
	if _, err := ParseJSON([]byte(`{"steps":{"nonsense":1}}`)); err == nil {
		t.Error("an unknown step was accepted")
	}
}

// TestReadLeavesOutAHalfWrittenLastLine: a file read while the front-end
// writes it may end inside a record (a write caught half done); Read
// returns the complete lines and leaves the rest for the next read, and
// a bad complete line is still an error with its number.
func TestReadLeavesOutAHalfWrittenLastLine(t *testing.T) {
	r := sampleRecord()
	line := r.AppendJSON(nil)
	file := string(line) + "\r\n" + string(line)
	for cut := len(file) - 1; cut > len(file)-len(line); cut -= 7 {
		recs, err := Read(strings.NewReader(file[:cut]))
		if err != nil || len(recs) != 1 {
			t.Fatalf("cut at %d of %d: %d records, %v; want the first", cut, len(file), len(recs), err)
		}
	}
	if recs, err := Read(strings.NewReader(file)); err != nil || len(recs) != 2 {
		t.Fatalf("whole file: %d records, %v", len(recs), err)
	}
	_, err := Read(strings.NewReader(string(line) + "{\"steps\":\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad complete line: %v, want an error naming line 2", err)
	}
}

func TestAppendJSONAllocatesNothing(t *testing.T) {
	r := sampleRecord()
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = r.AppendJSON(buf[:0]) }); n != 0 {
		t.Errorf("%v allocations per record", n)
	}
}

// TestCheckOrder: steps out of the chain's order are reported; a placed
// step may follow the front-end step after it by its uncertainty, no
// more, and never precede the steps its placement starts from.
func TestCheckOrder(t *testing.T) {
	ok := sampleRecord()
	if err := ok.CheckOrder(); err != nil {
		t.Fatal(err)
	}
	mod := func(f func(r *Record)) Record { r := sampleRecord(); f(&r); return r }
	cases := []struct {
		name string
		r    Record
		bad  bool
	}{
		{"queued before head", mod(func(r *Record) { r.At[Queued] = r.At[HeadComplete] - 1 }), true},
		{"first byte before splice ack", mod(func(r *Record) { r.At[FirstByte] = r.At[SpliceAck] - 1; r.At[LastByte] = r.At[FirstByte] }), true},
		{"last byte after feedback within uncertainty", mod(func(r *Record) {
			r.At[LastByte] = r.At[Feedback] + int64(r.ShimUncertainty)
		}), false},
		{"last byte after feedback beyond uncertainty", mod(func(r *Record) {
			r.At[LastByte] = r.At[Feedback] + int64(r.ShimUncertainty) + 1
		}), true},
		{"missing steps are skipped", mod(func(r *Record) { r.Have &^= 1<<Queued | 1<<Admitted }), false},
		{"close before head", mod(func(r *Record) { r.At[Close] = r.At[CookieACK] }), true},
		{"close before the handoff (half-close)", mod(func(r *Record) { r.At[Close] = r.At[HeadComplete] }), false},
		{"splice with the SYN", mod(func(r *Record) { r.At[SpliceSent] = r.At[C2SYN] }), false},
		{"splice before the SYN", mod(func(r *Record) { r.At[SpliceSent] = r.At[C2SYN] - 1 }), true},
		{"splice after the request", mod(func(r *Record) { r.At[SpliceSent] = r.At[RequestSent] + 1 }), true},
	}
	for _, c := range cases {
		if err := c.r.CheckOrder(); (err != nil) != c.bad {
			t.Errorf("%s: CheckOrder = %v, want an error: %v", c.name, err, c.bad)
		}
	}
}
