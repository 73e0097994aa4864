package session

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

func TestReadSampleFile(t *testing.T) {
	f, err := os.Open("testdata/shop.wsesslog")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ReadWsesslog(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []LogSession{
		{Requests: []LogRequest{
			{Path: "/", Think: 2500 * time.Millisecond},
			{Path: "/img/logo.png", Burst: true},
			{Path: "/img/banner.png", Burst: true},
			{Path: "/browse?cat=books", Think: 4 * time.Second},
			{Path: "/img/cover1.jpg", Burst: true},
			{Path: "/details?item=42", Think: 10 * time.Second},
			{Path: "/login", Method: "POST", Contents: "user=ann&pass=secret", Think: 1250 * time.Millisecond},
			{Path: "/shipping", Method: "POST", Contents: "addr=1 Main St\nZip 12345"},
			{Path: "/payment", Method: "POST", Contents: "card=4111", Think: 3 * time.Second},
			{Path: "/confirm"},
		}},
		{Requests: []LogRequest{
			{Path: "/search?q=go%20book", Think: time.Nanosecond},
			{Path: "/img/logo.png", Burst: true},
			{Path: "/details?item=7", Method: "HEAD"},
		}},
	}
	if !equalSessions(got, want) {
		t.Fatalf("read\n%+v\nwant\n%+v", got, want)
	}
	roundTrip(t, got)
}

// roundTrip writes sessions and reads them back, requiring equality.
func roundTrip(t *testing.T, sessions []LogSession) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteWsesslog(&buf, sessions); err != nil {
		t.Fatalf("write: %v", err)
	}
	back, err := ReadWsesslog(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("read back: %v\n%s", err, buf.Bytes())
	}
	if !equalSessions(sessions, back) {
		t.Fatalf("round trip changed sessions\nwrote %+v\nread  %+v\nfile:\n%s", sessions, back, buf.Bytes())
	}
}

func TestGeneratedRoundTrip(t *testing.T) {
	m := DefaultModel()
	sessions := Generate(&m, rand.New(rand.NewPCG(11, 12)), 2000)
	for _, s := range sessions {
		last := s.Requests[len(s.Requests)-1]
		if last.Think != 0 || s.Requests[0].Path != "/" {
			t.Fatalf("session %+v: want start at / and no think after the last page", s)
		}
	}
	roundTrip(t, sessions)
	roundTrip(t, []LogSession{{Requests: []LogRequest{
		{Path: "/x", Method: "we ird", Contents: "q\"uo'te\\ \t\r\n end", Think: 1234567*time.Second + 123456789},
		{Path: "/y", Burst: true, Contents: "#", Think: time.Hour},
	}}})
}

func TestReadErrorsNameLine(t *testing.T) {
	cases := []struct{ in, want string }{
		{"/a\n\tb\n", "line 2: URI \"b\" does not start with /"},
		{"# c\n\t/img\n", "line 2: burst request \"/img\" before any page"},
		{"/a\n\n\t/img\n", "line 3: burst request"},
		{"/a think=x\n", "line 1: think: \"x\" is not a number of seconds"},
		{"/a think=-1\n", "line 1: think: \"-1\" seconds is out of range"},
		{"/a think=1e300\n", "line 1: think: \"1e300\" seconds is out of range"},
		{"/a\n/b colour=red\n", "line 2: unknown attribute \"colour\""},
		{"/a\n/b\n/c method=GET method=POST\n", "line 3: method given twice"},
		{"/a contents='abc\n", "line 1: contents: unterminated ' quote"},
		{"/a contents='abc'def\n", "line 1: contents: text \"def\" right after closing quote"},
		{"/a think\n", "line 1: \"think\" is not key=value"},
		{"/a\n" + strings.Repeat("x", maxLineLen+1), "line 2: longer than"},
	}
	for _, c := range cases {
		_, err := ReadWsesslog(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadWsesslog(%.40q) error %v, want %q", c.in, err, c.want)
		}
	}
}

func TestReadAcceptsFloatSyntax(t *testing.T) {
	got, err := ReadWsesslog(strings.NewReader("/a think=1e-3\r\n/b think=.5\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := got[0].Requests; len(r) != 2 || r[0].Think != time.Millisecond || r[1].Think != 500*time.Millisecond {
		t.Fatalf("got %+v", got)
	}
}

func TestWriteRefusesUnrepresentable(t *testing.T) {
	cases := []struct {
		s    []LogSession
		want string
	}{
		{[]LogSession{{}}, "session 0 is empty"},
		{[]LogSession{{Requests: []LogRequest{{Path: "/a", Burst: true}}}}, "open with a burst"},
		{[]LogSession{{Requests: []LogRequest{{Path: "/a"}, {Path: "b"}}}}, "request 1: path \"b\""},
		{[]LogSession{{Requests: []LogRequest{{Path: "/a b"}}}}, "white space"},
		{[]LogSession{{Requests: []LogRequest{{Path: "/a", Think: -1}}}}, "negative think"},
	}
	for _, c := range cases {
		err := WriteWsesslog(&bytes.Buffer{}, c.s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WriteWsesslog(%+v) error %v, want %q", c.s, err, c.want)
		}
	}
}

// FuzzReadWsesslog: the reader never panics, and whatever it accepts
// writes out and reads back unchanged.
func FuzzReadWsesslog(f *testing.F) {
	sample, err := os.ReadFile("testdata/shop.wsesslog")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	for _, s := range []string{
		"", "\n\n", "/a", "\t/a", "/a think=1.5\n\t/b\n\n/c",
		"/a contents=\"x\\\"y\\n\" method='P O'", "/a think=1e-9", "/a contents='", "# x\n /y",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sessions, err := ReadWsesslog(bytes.NewReader(data))
		if err != nil {
			return
		}
		roundTrip(t, sessions)
	})
}
