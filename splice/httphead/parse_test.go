package httphead

import (
	"errors"
	"strings"
	"testing"
)

// view is a Request with strings in place of slices, so test tables can
// spell out expectations. hostNil tells an absent Host from an empty one.
type view struct {
	Method, Target, Proto, Host, Path, Cookie string
	hostNil, cookieNil                        bool
	ContentLength                             int64
	Chunked, KeepAlive                        bool
	HeadLen                                   int
	BodyLen                                   int64
}

func viewOf(r *Request) view {
	return view{
		Method: string(r.Method), Target: string(r.Target), Proto: string(r.Proto),
		Host: string(r.Host), Path: string(r.Path), Cookie: string(r.Cookie),
		hostNil: r.Host == nil, cookieNil: r.Cookie == nil,
		ContentLength: r.ContentLength, Chunked: r.Chunked, KeepAlive: r.KeepAlive,
		HeadLen: r.HeadLen, BodyLen: r.BodyLen,
	}
}

// get is the view of a plain "GET <target> HTTP/1.1" with one Host field;
// cases adjust the fields they are about. HeadLen is left out: every valid
// case is exactly one head, so the tests take it from the case's length.
func get(target, host string) view {
	return view{
		Method: "GET", Target: target, Proto: "HTTP/1.1", Host: host, Path: target,
		cookieNil: true, ContentLength: -1, KeepAlive: true,
	}
}

func with(v view, edit func(*view)) view { edit(&v); return v }

var validCases = []struct {
	name, head string
	want       view
}{
	{"minimal", "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
		get("/", "example.com")},
	{"host port stripped", "GET /x HTTP/1.1\r\nHost: Example.COM:8080\r\n\r\n",
		get("/x", "Example.COM")},
	{"ipv6 host", "GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n",
		get("/", "[2001:db8::1]")},
	{"query cut from path", "GET /a/b?x=1&y HTTP/1.1\r\nHost: h\r\n\r\n",
		with(get("/a/b?x=1&y", "h"), func(v *view) { v.Path = "/a/b" })},
	{"whitespace around value", "GET / HTTP/1.1\r\nHost: \t h \t\r\n\r\n",
		get("/", "h")},
	{"empty host field", "GET / HTTP/1.1\r\nHost:\r\n\r\n",
		get("/", "")},
	{"field names ignore case", "GET / HTTP/1.1\r\nhOsT: h\r\nCONTENT-length: 7\r\n\r\n",
		with(get("/", "h"), func(v *view) { v.ContentLength, v.BodyLen = 7, 7 })},
	{"http/1.0 without host", "GET /old HTTP/1.0\r\n\r\n",
		with(get("/old", ""), func(v *view) { v.Proto, v.hostNil, v.KeepAlive = "HTTP/1.0", true, false })},
	{"http/1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\nHost: h\r\n\r\n",
		with(get("/", "h"), func(v *view) { v.Proto = "HTTP/1.0" })},
	{"http/1.0 keep-alive and close", "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
		with(get("/", ""), func(v *view) { v.Proto, v.hostNil, v.KeepAlive = "HTTP/1.0", true, false })},
	{"http/1.1 close", "GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, CLOSE\r\n\r\n",
		with(get("/", "h"), func(v *view) { v.KeepAlive = false })},
	{"content-length", "POST /form HTTP/1.1\r\nHost: h\r\nContent-Length: 42\r\n\r\n",
		with(get("/form", "h"), func(v *view) { v.Method, v.ContentLength, v.BodyLen = "POST", 42, 42 })},
	{"repeated equal content-length", "PUT / HTTP/1.1\r\nContent-Length: 0\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
		with(get("/", "h"), func(v *view) { v.Method, v.ContentLength = "PUT", 0 })},
	{"chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
		with(get("/", "h"), func(v *view) { v.Method, v.Chunked, v.BodyLen = "POST", true, -1 })},
	{"gzip then chunked over two lines", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: , Chunked ; x=1\r\n\r\n",
		with(get("/", "h"), func(v *view) { v.Method, v.Chunked, v.BodyLen = "POST", true, -1 })},
	{"first cookie kept raw", "GET / HTTP/1.1\r\nHost: h\r\nCookie: a=1; b=2 \r\nCookie: c=3\r\n\r\n",
		with(get("/", "h"), func(v *view) { v.Cookie, v.cookieNil = "a=1; b=2", false })},
	{"leading empty lines counted", "\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
		get("/", "h")},
	{"obs-text in value", "GET / HTTP/1.1\r\nHost: h\r\nX-Name: caf\xc3\xa9\r\n\r\n",
		get("/", "h")},
	{"absolute-form takes host from target", "GET http://Example.com:81/p?q HTTP/1.1\r\nHost: other\r\n\r\n",
		with(get("http://Example.com:81/p?q", "Example.com"), func(v *view) { v.Path = "/p" })},
	{"absolute-form without path", "GET HTTPS://e.org HTTP/1.1\r\nHost: e.org\r\n\r\n",
		with(get("HTTPS://e.org", "e.org"), func(v *view) { v.Path = "" })},
	{"options asterisk", "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
		with(get("*", "h"), func(v *view) { v.Method = "OPTIONS" })},
	{"connect authority", "CONNECT e.org:443 HTTP/1.1\r\nHost: e.org:443\r\n\r\n",
		with(get("e.org:443", "e.org"), func(v *view) { v.Method = "CONNECT" })},
	{"extension method", "PURGE /cache HTTP/1.1\r\nHost: h\r\n\r\n",
		with(get("/cache", "h"), func(v *view) { v.Method = "PURGE" })},
}

var invalidCases = []struct {
	name, head string
	offset     int
	reason     string // a substring of the reason
}{
	{"bare LF after request line", "GET / HTTP/1.1\nHost: h\r\n\r\n", 14, "bare LF"},
	{"bare LF after field", "GET / HTTP/1.1\r\nHost: h\n\r\n", 23, "bare LF"},
	{"bare LF ending head", "GET / HTTP/1.1\r\nHost: h\r\n\n", 25, "bare LF"},
	{"leading bare LF", "\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", 0, "bare LF"},
	{"bare CR in value", "GET / HTTP/1.1\r\nHost: h\rx\r\n\r\n", 23, "CR not followed by LF"},
	{"obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n 2\r\n\r\n", 33, "line folding"},
	{"whitespace before first field", "GET / HTTP/1.1\r\n\tHost: h\r\n\r\n", 16, "line folding"},
	{"whitespace before colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", 20, "between header field name and colon"},
	{"empty field name", "GET / HTTP/1.1\r\n: v\r\n\r\n", 16, "empty header field name"},
	{"bad byte in field name", "GET / HTTP/1.1\r\nX(y): v\r\n\r\n", 17, "invalid byte in header field name"},
	{"NUL in value", "GET / HTTP/1.1\r\nHost: h\x00\r\n\r\n", 23, "control byte"},
	{"http/2.0", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", 11, "HTTP/2 is not accepted"},
	{"h2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 4, "request target is not"},
	{"http/1.2", "GET / HTTP/1.2\r\nHost: h\r\n\r\n", 13, "minor version"},
	{"http/0.9 style", "GET /\r\n\r\n", 5, "no protocol version"},
	{"lowercase protocol", "GET / http/1.1\r\nHost: h\r\n\r\n", 6, "not HTTP/1.0 or HTTP/1.1"},
	{"junk after version", "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 14, "after the protocol version"},
	{"two digit major", "GET / HTTP/10.1\r\nHost: h\r\n\r\n", 12, "malformed HTTP version"},
	{"empty method", " / HTTP/1.1\r\nHost: h\r\n\r\n", 0, "empty method"},
	{"bad byte in method", "G{T / HTTP/1.1\r\nHost: h\r\n\r\n", 1, "invalid byte in method"},
	{"tls client hello", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 0, "invalid byte in method"},
	{"double space", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 4, "empty request target"},
	{"control byte in target", "GET /a\x01b HTTP/1.1\r\nHost: h\r\n\r\n", 6, "invalid byte in request target"},
	{"fragment in target", "GET /a#b HTTP/1.1\r\nHost: h\r\n\r\n", 6, "invalid byte in request target"},
	{"raw utf-8 in target", "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", 8, "invalid byte in request target"},
	{"relative target", "GET foo HTTP/1.1\r\nHost: h\r\n\r\n", 4, "request target is not"},
	{"asterisk with GET", "GET * HTTP/1.1\r\nHost: h\r\n\r\n", 4, "request target is not"},
	{"absolute-form empty host", "GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n", 4, "invalid host in absolute-form"},
	{"absolute-form userinfo", "GET http://u@h/ HTTP/1.1\r\nHost: h\r\n\r\n", 4, "invalid host in absolute-form"},
	{"connect without port", "CONNECT e.org HTTP/1.1\r\nHost: e.org\r\n\r\n", 8, "CONNECT target"},
	{"http/1.1 without host", "GET / HTTP/1.1\r\nX: y\r\n\r\n", 22, "without a Host"},
	{"two host fields", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 25, "more than one Host"},
	{"host with space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 16, "invalid Host"},
	{"host with userinfo", "GET / HTTP/1.1\r\nHost: u@h\r\n\r\n", 16, "invalid Host"},
	{"unclosed ipv6 host", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 16, "invalid Host"},
	{"non-numeric port", "GET / HTTP/1.1\r\nHost: h:8a\r\n\r\n", 16, "invalid Host"},
	{"port without host", "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", 16, "invalid Host"},
	{"content-length letters", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 12a\r\n\r\n", 26, "not a decimal number"},
	{"content-length negative", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 26, "not a decimal number"},
	{"content-length empty", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \r\n\r\n", 26, "not a decimal number"},
	{"content-length list", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n", 26, "not a decimal number"},
	{"content-length overflow", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9223372036854775808\r\n\r\n", 26, "not a decimal number"},
	{"conflicting content-length", "POST / HTTP/1.1\r\nContent-Length: 5\r\nHost: h\r\nContent-Length: 6\r\n\r\n", 45, "conflicting Content-Length"},
	{"content-length then chunked", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 45, "request smuggling"},
	{"chunked then content-length", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 54, "request smuggling"},
	{"transfer-encoding not chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 26, "does not end in chunked"},
	{"coding after chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 26, "after chunked"},
	{"chunked twice", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 54, "after chunked"},
	{"empty transfer-encoding", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \r\n\r\n", 26, "does not end in chunked"},
	{"bad coding name", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \"chunked\"\r\n\r\n", 26, "invalid transfer coding"},
	{"transfer-encoding in http/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 17, "HTTP/1.0"},
}

func TestParseValid(t *testing.T) {
	for _, tc := range validCases {
		t.Run(tc.name, func(t *testing.T) {
			var r Request
			if err := Parse([]byte(tc.head), 0, &r); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := tc.want
			want.HeadLen = len(tc.head)
			if got := viewOf(&r); got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range invalidCases {
		t.Run(tc.name, func(t *testing.T) {
			var r Request
			err := Parse([]byte(tc.head), 0, &r)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse = %v, want a *SyntaxError", err)
			}
			if se.Offset != tc.offset || !strings.Contains(se.Reason, tc.reason) {
				t.Errorf("got offset %d reason %q, want offset %d reason containing %q",
					se.Offset, se.Reason, tc.offset, tc.reason)
			}
		})
	}
}

// TestParseByteByByte feeds every case one byte more at a time, as the
// front-end sees a slow client. A valid head gives ErrIncomplete until its
// last byte and then what parsing it whole gives. An invalid one gives
// ErrIncomplete at least until the byte at fault has arrived, then its
// SyntaxError from some point on and for every longer prefix.
func TestParseByteByByte(t *testing.T) {
	for _, tc := range validCases {
		buf := []byte(tc.head)
		var r Request
		for n := 0; n < len(buf); n++ {
			if err := Parse(buf[:n], 0, &r); err != ErrIncomplete {
				t.Fatalf("%s: Parse of first %d bytes = %v, want ErrIncomplete", tc.name, n, err)
			}
		}
		want := tc.want
		want.HeadLen = len(buf)
		if err := Parse(buf, 0, &r); err != nil || viewOf(&r) != want {
			t.Errorf("%s: after byte-by-byte feeding got %+v, %v", tc.name, viewOf(&r), err)
		}
	}
	for _, tc := range invalidCases {
		buf := []byte(tc.head)
		var r Request
		want := Parse(buf, 0, &r)
		failed := false
		for n := 0; n <= len(buf); n++ {
			err := Parse(buf[:n], 0, &r)
			switch {
			case n <= tc.offset && err != ErrIncomplete:
				t.Fatalf("%s: Parse of first %d bytes = %v, want ErrIncomplete", tc.name, n, err)
			case err == ErrIncomplete && !failed:
			case err == nil || err == ErrIncomplete || err.Error() != want.Error():
				t.Fatalf("%s: Parse of first %d bytes = %v, want %v", tc.name, n, err, want)
			default:
				failed = true
			}
		}
	}
}

func TestParseRejectsJunkBeforeHeadEnds(t *testing.T) {
	var r Request
	for _, junk := range []string{"\x16\x03", "GET /\x00", "GET / HTTX", "GET / HTTP/1.1\r\nA b"} {
		var se *SyntaxError
		if err := Parse([]byte(junk), 8192, &r); !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, want a SyntaxError before the head is complete", junk, err)
		}
	}
}

func TestParseLimit(t *testing.T) {
	head := "GET / HTTP/1.1\r\nHost: h\r\n\r\n"
	var r Request
	if err := Parse([]byte(head), len(head), &r); err != nil || r.HeadLen != len(head) {
		t.Errorf("head of exactly limit bytes: %v, HeadLen %d", err, r.HeadLen)
	}
	if err := Parse([]byte(head+"GET / HT"), len(head), &r); err != nil || r.HeadLen != len(head) {
		t.Errorf("head of limit bytes followed by more: %v, HeadLen %d", err, r.HeadLen)
	}
	if err := Parse([]byte(head), len(head)-1, &r); err != ErrTooLarge {
		t.Errorf("head one byte over the limit: %v, want ErrTooLarge", err)
	}
	if err := Parse([]byte(head[:10]), len(head)-1, &r); err != ErrIncomplete {
		t.Errorf("short buffer under the limit: %v, want ErrIncomplete", err)
	}
	big := "GET / HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("a", 10000)
	if err := Parse([]byte(big), 8192, &r); err != ErrTooLarge {
		t.Errorf("endless field: %v, want ErrTooLarge", err)
	}
	bad := "GET / HTTP/1.1\r\nHost: h\r\nX y" + strings.Repeat("a", 10000)
	var se *SyntaxError
	if err := Parse([]byte(bad), 8192, &r); !errors.As(err, &se) {
		t.Errorf("junk inside the limit: %v, want a SyntaxError", err)
	}
	// A CR as the last byte the limit allows cannot be completed.
	if err := Parse([]byte(head), len(head)-1, &r); err != ErrTooLarge {
		t.Errorf("CR at the limit: %v, want ErrTooLarge", err)
	}
}

func TestParsePipelined(t *testing.T) {
	first := "POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n"
	second := "GET /next?a HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n"
	buf := []byte(first + "hello" + second + "GET /third")
	var r Request
	if err := Parse(buf, 0, &r); err != nil {
		t.Fatal(err)
	}
	if r.HeadLen != len(first) || r.BodyLen != 5 || string(r.Path) != "/up" {
		t.Fatalf("first request: HeadLen %d BodyLen %d Path %q", r.HeadLen, r.BodyLen, r.Path)
	}
	rest := buf[r.HeadLen+int(r.BodyLen):]
	if err := Parse(rest, 0, &r); err != nil {
		t.Fatal(err)
	}
	if r.HeadLen != len(second) || string(r.Path) != "/next" || !r.HostMatches("g") || r.KeepAlive {
		t.Fatalf("second request: %+v", viewOf(&r))
	}
	if err := Parse(rest[r.HeadLen:], 0, &r); err != ErrIncomplete {
		t.Fatalf("third, partial request: %v", err)
	}
}

func TestParseDoesNotModifyInput(t *testing.T) {
	head := "GET /A?B HTTP/1.1\r\nHOST: Example.COM:80\r\nCookie: X=Y\r\n\r\n"
	buf := []byte(head)
	var r Request
	if err := Parse(buf, 0, &r); err != nil {
		t.Fatal(err)
	}
	if string(buf) != head {
		t.Fatalf("input changed to %q", buf)
	}
}

func TestParseResetsRequest(t *testing.T) {
	var r Request
	if err := Parse([]byte("POST / HTTP/1.1\r\nHost: h\r\nCookie: c\r\nContent-Length: 3\r\n\r\n"), 0, &r); err != nil {
		t.Fatal(err)
	}
	if err := Parse([]byte("GET / HTTP/1.0\r\n\r\n"), 0, &r); err != nil {
		t.Fatal(err)
	}
	if r.Host != nil || r.Cookie != nil || r.ContentLength != -1 || r.BodyLen != 0 {
		t.Fatalf("fields from the previous request leaked: %+v", viewOf(&r))
	}
}

func TestHostMatches(t *testing.T) {
	parse := func(head string) *Request {
		var r Request
		if err := Parse([]byte(head), 0, &r); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	r := parse("GET / HTTP/1.1\r\nHost: WWW.Example.com:8080\r\n\r\n")
	for name, want := range map[string]bool{
		"www.example.com": true, "WWW.EXAMPLE.COM:80": true, "www.example.com.": true,
		"example.com": false, "www.example.co": false, "": false, "www.example.com.evil": false,
	} {
		if got := r.HostMatches(name); got != want {
			t.Errorf("HostMatches(%q) = %v, want %v", name, got, want)
		}
	}
	if v6 := parse("GET / HTTP/1.1\r\nHost: [2001:DB8::1]\r\n\r\n"); !v6.HostMatches("[2001:db8::1]:443") || v6.HostMatches("2001:db8::1") {
		t.Error("IPv6 literal host matched wrongly")
	}
	if noHost := parse("GET / HTTP/1.0\r\n\r\n"); noHost.HostMatches("") {
		t.Error("a request without Host matched the empty name")
	}
	if empty := parse("GET / HTTP/1.1\r\nHost:\r\n\r\n"); !empty.HostMatches("") || empty.HostMatches("h") {
		t.Error("an empty Host should match only the empty name")
	}
}

func TestSyntaxErrorMessage(t *testing.T) {
	err := error(&SyntaxError{Offset: 11, Reason: "HTTP/2 is not accepted here"})
	if got, want := err.Error(), "httphead: malformed request at byte 11: HTTP/2 is not accepted here"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// typicalRequest is what a browser sends for a page.
const typicalRequest = "GET /catalog/item?id=4711&ref=home HTTP/1.1\r\n" +
	"Host: shop.example.com\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n" +
	"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n" +
	"Accept-Language: en-US,en;q=0.5\r\n" +
	"Accept-Encoding: gzip, deflate, br\r\n" +
	"Connection: keep-alive\r\n" +
	"Cookie: session=0123456789abcdef; customer=gold\r\n" +
	"Upgrade-Insecure-Requests: 1\r\n" +
	"\r\n"

func TestParseDoesNotAllocate(t *testing.T) {
	buf := []byte(typicalRequest)
	var r Request
	var err error
	if allocs := testing.AllocsPerRun(200, func() { err = Parse(buf, 8192, &r) }); allocs != 0 || err != nil {
		t.Errorf("complete head: %v allocations per Parse, err %v", allocs, err)
	}
	if allocs := testing.AllocsPerRun(200, func() { err = Parse(buf[:100], 8192, &r) }); allocs != 0 || err != ErrIncomplete {
		t.Errorf("partial head: %v allocations per Parse, err %v", allocs, err)
	}
}

func BenchmarkParse(b *testing.B) {
	buf := []byte(typicalRequest)
	var r Request
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Parse(buf, 8192, &r); err != nil {
			b.Fatal(err)
		}
	}
}
