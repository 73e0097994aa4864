package httphead

import (
	"bytes"
	"errors"
	"io"
	"net/http/httputil"
	"regexp"
	"strings"
	"testing"
)

var validChunked = []string{
	"0\r\n\r\n",
	"5\r\nhello\r\n0\r\n\r\n",
	"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
	"A\r\n0123456789\r\n0\r\n\r\n",
	"a\r\n0123456789\r\n000\r\n\r\n",
	"0005\r\nhello\r\n0\r\n\r\n",
	"000000000000000005\r\nhello\r\n0\r\n\r\n", // leading zeros Go's reader refuses
	"5;name\r\nhello\r\n0\r\n\r\n",
	"5;name=value\r\nhello\r\n0;last\r\n\r\n",
	"5 ; a = b ;c\t;d=\"q\\\"uo;ted\"\r\nhello\r\n0\r\n\r\n",
	"5;q=\"\x80obs\"\r\nhello\r\n0\r\n\r\n",
	"5\r\nhe\r\nl\r\n0\r\n\r\n", // CRLF inside chunk-data is data
	"0\r\nExpires: never\r\n\r\n",
	"3\r\nabc\r\n0\r\nA: 1\r\nB-2:\r\nC:  spaced \t value\r\n\r\n",
	"7fffffffffffffff\r\n", // the largest size: incomplete, not an error
}

var invalidChunked = []string{
	"\r\n",                          // no size
	"x\r\n",                         // not hex
	"0x5\r\nhello\r\n0\r\n\r\n",     // no 0x
	"+5\r\nhello\r\n0\r\n\r\n",      // no sign
	"-1\r\n",                        // no sign
	"5\nhello\r\n0\r\n\r\n",         // bare LF after the size
	"5\rhello\r\n0\r\n\r\n",         // bare CR
	"5 \r\nhello\r\n0\r\n\r\n",      // whitespace before CRLF
	"5;\r\nhello\r\n0\r\n\r\n",      // empty extension
	"5;a=\r\nhello\r\n0\r\n\r\n",    // empty extension value
	"5;a b\r\nhello\r\n0\r\n\r\n",   // two names
	"5;a=\"x\r\nhello\r\n0\r\n\r\n", // open quote
	"5;a=\"x\"y\r\n",                // junk after a quoted value
	"5;a=\"\x01\"\r\n",              // control byte in a quoted value
	"5\r\nhelloX\r\n0\r\n\r\n",      // data longer than its size
	"5\r\nhello\n0\r\n\r\n",         // bare LF after data
	"5\r\nhello\r0\r\n\r\n",         // bare CR after data
	"0\r\n\n",                       // bare LF for the final CRLF
	"0\r\n\r\r",                     // CR not followed by LF
	"0\r\n folded: x\r\n\r\n",       // folding or empty name
	"0\r\n: x\r\n\r\n",              // empty name
	"0\r\nA : x\r\n\r\n",            // space before colon
	"0\r\nA\r\n\r\n",                // no colon
	"0\r\nA: x\nB: y\r\n\r\n",       // bare LF in the trailer
	"0\r\nA: \x01\r\n\r\n",          // control byte in a trailer value
	"8000000000000000\r\n",          // 2^63
	"10000000000000000\r\n",         // 2^64
}

// feedAll feeds b to a fresh tracker in pieces of the given sizes (the
// last one repeated) and reports the outcome as if fed at once.
func feedAll(b []byte, pieces ...int) (n int, done bool, err error) {
	var c Chunked
	for off, k := 0, 0; off < len(b); k++ {
		size := pieces[min(k, len(pieces)-1)]
		end := min(off+size, len(b))
		m, e := c.Feed(b[off:end])
		if e != nil {
			return off + m, false, e
		}
		if c.Done() {
			return off + m, true, nil
		}
		if m != end-off {
			return off + m, false, errors.New("Feed stopped early without Done or an error")
		}
		off = end
	}
	return len(b), c.Done(), nil
}

func TestChunkedValid(t *testing.T) {
	for _, body := range validChunked {
		for _, next := range []string{"", "GET / HTTP/1.1\r\n"} {
			b := []byte(body + next)
			n, done, err := feedAll(b, len(b))
			want := strings.HasSuffix(body, "\r\n\r\n")
			if err != nil || done != want || (done && n != len(body)) || (!done && n != len(b)) {
				t.Errorf("%q: n %d done %v err %v, want end %d", b, n, done, err, len(body))
			}
		}
	}
}

func TestChunkedInvalid(t *testing.T) {
	for _, body := range invalidChunked {
		n, done, err := feedAll([]byte(body), len(body))
		var ce *ChunkedError
		if !errors.As(err, &ce) || done || n >= len(body) {
			t.Errorf("%q: n %d done %v err %v, want a ChunkedError inside the body", body, n, done, err)
		}
	}
}

// TestChunkedEveryBoundary: the outcome does not depend on how the body
// is cut into segments -- byte by byte, or cut once anywhere.
func TestChunkedEveryBoundary(t *testing.T) {
	for _, body := range append(append([]string{}, validChunked...), invalidChunked...) {
		b := []byte(body + "GET")
		n0, done0, err0 := feedAll(b, len(b))
		check := func(n int, done bool, err error, how string) {
			if n != n0 || done != done0 || (err == nil) != (err0 == nil) {
				t.Errorf("%q %s: n %d done %v err %v; at once: n %d done %v err %v", b, how, n, done, err, n0, done0, err0)
			}
		}
		n, done, err := feedAll(b, 1)
		check(n, done, err, "byte by byte")
		for cut := 1; cut < len(b); cut++ {
			n, done, err := feedAll(b, cut, len(b))
			check(n, done, err, "cut at "+string(rune('0'+cut%10)))
		}
	}
}

func TestChunkedAfterEndAndError(t *testing.T) {
	var c Chunked
	if n, err := c.Feed([]byte("0\r\n\r\nGET")); n != 5 || err != nil || !c.Done() {
		t.Fatalf("n %d err %v done %v", n, err, c.Done())
	}
	if n, err := c.Feed([]byte("more")); n != 0 || err != nil {
		t.Fatalf("after the end: n %d err %v", n, err)
	}
	c.Reset()
	_, err := c.Feed([]byte("z"))
	if err == nil {
		t.Fatal("no error for a non-hex size")
	}
	if n, err2 := c.Feed([]byte("0\r\n\r\n")); n != 0 || err2 != err {
		t.Fatalf("after an error: n %d err %v", n, err2)
	}
}

func TestChunkedLimits(t *testing.T) {
	ext := ";" + strings.Repeat("e", MaxChunkLine-2)
	ok := "1" + ext + "\r\nx\r\n0\r\n\r\n"
	if n, done, err := feedAll([]byte(ok), 7); !done || err != nil || n != len(ok) {
		t.Errorf("a %d-byte chunk line: n %d done %v err %v", MaxChunkLine, n, done, err)
	}
	long := "1" + ext + "e\r\nx\r\n0\r\n\r\n"
	if _, _, err := feedAll([]byte(long), 7); err != errChunkLineLong {
		t.Errorf("a %d-byte chunk line: %v", MaxChunkLine+1, err)
	}
	// The trailer section: "0\r\n" then MaxTrailer bytes at most.
	field := "A:" + strings.Repeat("v", MaxTrailer-6) + "\r\n" // MaxTrailer-2 bytes
	if n, done, err := feedAll([]byte("0\r\n"+field+"\r\n"), 100); !done || err != nil || n != 3+MaxTrailer {
		t.Errorf("a %d-byte trailer: n %d done %v err %v", MaxTrailer, n, done, err)
	}
	if _, _, err := feedAll([]byte("0\r\nB"+field+"\r\n"), 100); err != errTrailerTooLong {
		t.Errorf("a %d-byte trailer: %v", MaxTrailer+1, err)
	}
	// Endless leading zeros are a long line, not an endless loop.
	if _, _, err := feedAll(bytes.Repeat([]byte("0"), 2*MaxChunkLine), 1000); err != errChunkLineLong {
		t.Errorf("leading zeros: %v", err)
	}
}

func TestChunkedFeedAllocatesNothing(t *testing.T) {
	body := []byte("5;a=\"b\"\r\nhello\r\n0\r\nX: y\r\n\r\n")
	bad := []byte("5\r\nhelloX")
	var c Chunked
	allocs := testing.AllocsPerRun(100, func() {
		c.Reset()
		if n, err := c.Feed(body); err != nil || n != len(body) {
			t.Fatal("body not followed")
		}
		c.Reset()
		if _, err := c.Feed(bad); err == nil {
			t.Fatal("no error")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per body", allocs)
	}
}

// The reference decoder: whole lines matched against the RFC 9112 grammar
// with regular expressions, written independently of the state machine.
const (
	reToken  = "[!#$%&'*+.^_`|~0-9A-Za-z-]+"
	reQuoted = `"(?:[\t \x{21}\x{23}-\x{5b}\x{5d}-\x{7e}\x{80}-\x{ff}]|\\[\t \x{21}-\x{7e}\x{80}-\x{ff}])*"`
)

var (
	refSizeLine    = regexp.MustCompile(`^([0-9A-Fa-f]+)(?:[ \t]*;[ \t]*` + reToken + `(?:[ \t]*=[ \t]*(?:` + reToken + `|` + reQuoted + `))?)*$`)
	refTrailerLine = regexp.MustCompile(`^` + reToken + `:[\t\x{20}-\x{7e}\x{80}-\x{ff}]*$`)
)

type refOutcome int

const (
	refMore refOutcome = iota // could still become valid (or is already bad in a way only seen later)
	refDone
	refBad
)

// latin1 turns bytes into runes one to one, so regexp sees obs-text.
func latin1(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		s.WriteRune(rune(c))
	}
	return s.String()
}

// refLine splits the CRLF-terminated line at i.
func refLine(b []byte, i int) (line []byte, next int, out refOutcome) {
	j := bytes.IndexByte(b[i:], '\r')
	if j < 0 {
		return nil, 0, refMore
	}
	if i+j+1 >= len(b) {
		return nil, 0, refMore
	}
	if b[i+j+1] != '\n' {
		return nil, 0, refBad
	}
	return b[i : i+j], i + j + 2, refDone
}

// refChunked decodes a whole chunked body at the start of b: where it ends,
// its data, and whether it uses what Go's chunked reader does not take:
// whitespace in a chunk line, or a size written in more than 16 digits
// (RFC 9112 allows any number of leading zeros; Go counts them).
func refChunked(b []byte) (end int, data []byte, beyondGo bool, out refOutcome) {
	i := 0
	for {
		lineLen := bytes.IndexByte(b[i:], '\r')
		if lineLen < 0 {
			lineLen = len(b) - i
		}
		if lineLen > MaxChunkLine {
			return 0, nil, false, refBad
		}
		line, next, o := refLine(b, i)
		if o != refDone {
			return 0, nil, false, o
		}
		m := refSizeLine.FindStringSubmatch(latin1(line))
		if m == nil {
			return 0, nil, false, refBad
		}
		beyondGo = beyondGo || bytes.ContainsAny(line, " \t") || len(m[1]) > 16
		digits := strings.TrimLeft(m[1], "0")
		if len(digits) > 16 || len(digits) == 16 && digits[0] >= '8' {
			return 0, nil, false, refBad
		}
		var size uint64
		for _, c := range digits {
			d, _ := hexDigit(byte(c))
			size = size<<4 | uint64(d)
		}
		i = next
		if size == 0 {
			break
		}
		if uint64(len(b)-i) < size {
			return 0, nil, false, refMore
		}
		data = append(data, b[i:i+int(size)]...)
		i += int(size)
		switch {
		case i+2 <= len(b) && string(b[i:i+2]) == "\r\n":
			i += 2
		case i == len(b) || i+1 == len(b) && b[i] == '\r':
			return 0, nil, false, refMore
		default:
			return 0, nil, false, refBad
		}
	}
	trailerStart := i
	for {
		line, next, o := refLine(b, i)
		if o == refMore && len(b)-trailerStart > MaxTrailer {
			o = refBad
		}
		if o != refDone {
			return 0, nil, false, o
		}
		if next-trailerStart > MaxTrailer {
			return 0, nil, false, refBad
		}
		i = next
		if len(line) == 0 {
			return i, data, beyondGo, refDone
		}
		if !refTrailerLine.MatchString(latin1(line)) {
			return 0, nil, false, refBad
		}
	}
}

// FuzzChunked holds the tracker to the reference decoder and to Go's own
// chunked reader (net/http/httputil), for any input cut anywhere:
//   - the tracker finds the end exactly where the reference does;
//   - what the reference refuses, the tracker refuses; when the tracker
//     wants more, so does the reference (the tracker may refuse a line
//     before its end, the reference only sees whole lines);
//   - a body the tracker accepts decodes with Go's reader to the same
//     data, unless it uses what Go does not take (whitespace around
//     extensions, sizes of more than 16 digits, lines of 4096 bytes, a
//     lot of non-data);
//   - the outcome is the same fed at once, byte by byte, or cut once.
func FuzzChunked(f *testing.F) {
	for _, s := range validChunked {
		f.Add([]byte(s+"GET / HTTP/1.1\r\n"), uint16(3))
	}
	for _, s := range invalidChunked {
		f.Add([]byte(s), uint16(1))
	}
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		n, done, err := feedAll(b, len(b)+1)
		var ce *ChunkedError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("unexpected error %v", err)
		}
		if err != nil && (n < 0 || n >= len(b)) {
			t.Fatalf("error at %d in a %d-byte input", n, len(b))
		}
		end, data, beyondGo, ref := refChunked(b)
		switch {
		case ref == refDone && (!done || n != end):
			t.Fatalf("reference: end at %d; tracker: n %d done %v err %v", end, n, done, err)
		case ref == refBad && err == nil:
			t.Fatalf("reference refuses; tracker: n %d done %v", n, done)
		case ref == refMore && done:
			t.Fatalf("reference wants more; tracker done at %d", n)
		case err == nil && !done && ref != refMore:
			t.Fatalf("tracker wants more; reference %v", ref)
		}
		if done {
			got, gerr := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(b[:n])))
			switch {
			case gerr == nil && !bytes.Equal(got, data):
				t.Fatalf("Go's reader decodes %q, the reference %q", got, data)
			case gerr != nil && !beyondGo && !strings.Contains(gerr.Error(), "too long") &&
				!strings.Contains(gerr.Error(), "non-data"):
				t.Fatalf("Go's reader refuses a body the tracker accepts: %v", gerr)
			}
		}
		n1, done1, err1 := feedAll(b, 1)
		c := int(cut)%(len(b)+1) + 1
		n2, done2, err2 := feedAll(b, c, len(b))
		if n1 != n || done1 != done || (err1 == nil) != (err == nil) ||
			n2 != n || done2 != done || (err2 == nil) != (err == nil) {
			t.Fatalf("split-dependent: at once %d %v %v; by byte %d %v %v; cut at %d: %d %v %v",
				n, done, err, n1, done1, err1, c, n2, done2, err2)
		}
	})
}
