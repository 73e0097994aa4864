package session

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// LogSession is one session of an httperf --wsesslog file.
type LogSession struct {
	Requests []LogRequest
}

// LogRequest is one line of a --wsesslog session.
type LogRequest struct {
	// Path is the URI requested, as written (it must start with "/").
	Path string
	// Think is the think=SEC attribute: on a page line, httperf waits
	// this long after the page's burst completes before the next page.
	// Zero means "not given": httperf then uses the X of --wsesslog=N,X,F.
	Think time.Duration
	// Burst marks an indented line: an embedded object fetched right
	// after the preceding page line, as part of the same page.
	Burst bool
	// Method is the method=... attribute ("" means httperf's GET).
	Method string
	// Contents is the contents=... attribute: the request body.
	Contents string
}

// maxLineLen bounds one line of a session file.
const maxLineLen = 1 << 20

// ReadWsesslog parses an httperf --wsesslog file. As in httperf, lines
// containing only white space separate sessions (several in a row make no
// empty sessions), a line starting with white space is a burst request,
// and "#" starts a comment line. Each request line is a URI followed by
// think=SEC, method=WORD and contents=VALUE attributes; a value may be
// quoted with ' or ", and inside quotes "\n" is a newline and a backslash
// keeps the next character literally. Errors name the line number.
func ReadWsesslog(r io.Reader) ([]LogSession, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineLen)
	var sessions []LogSession
	var cur []LogRequest
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		body := strings.TrimLeft(line, separators)
		switch {
		case strings.TrimRight(body, separators) == "":
			if len(cur) > 0 {
				sessions = append(sessions, LogSession{Requests: cur})
				cur = nil
			}
			continue
		case body[0] == '#':
			continue
		}
		req, err := parseRequestLine(body)
		if err != nil {
			return nil, fmt.Errorf("session: wsesslog line %d: %w", lineNo, err)
		}
		req.Burst = len(body) < len(line)
		if req.Burst && len(cur) == 0 {
			return nil, fmt.Errorf("session: wsesslog line %d: burst request %q before any page of its session", lineNo, req.Path)
		}
		cur = append(cur, req)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("session: wsesslog line %d: longer than %d bytes", lineNo+1, maxLineLen)
		}
		return nil, fmt.Errorf("session: wsesslog after line %d: %w", lineNo, err)
	}
	if len(cur) > 0 {
		sessions = append(sessions, LogSession{Requests: cur})
	}
	return sessions, nil
}

// separators are the characters that split tokens on a line.
const separators = " \t\r\v\f"

// parseRequestLine parses "URI attr=value ..." without leading blanks.
func parseRequestLine(body string) (LogRequest, error) {
	var req LogRequest
	i := strings.IndexAny(body, separators)
	if i < 0 {
		i = len(body)
	}
	req.Path, body = body[:i], body[i:]
	if req.Path[0] != '/' {
		return req, fmt.Errorf("URI %q does not start with /", req.Path)
	}
	seen := map[string]bool{}
	for {
		body = strings.TrimLeft(body, separators)
		if body == "" {
			return req, nil
		}
		eq := strings.IndexByte(body, '=')
		if end := strings.IndexAny(body, separators); eq < 0 || (end >= 0 && end < eq) {
			return req, fmt.Errorf("%q is not key=value", firstToken(body))
		}
		key := body[:eq]
		value, rest, err := parseValue(body[eq+1:])
		if err != nil {
			return req, fmt.Errorf("%s: %w", key, err)
		}
		if seen[key] {
			return req, fmt.Errorf("%s given twice", key)
		}
		seen[key] = true
		switch key {
		case "think":
			if req.Think, err = parseSeconds(value); err != nil {
				return req, fmt.Errorf("think: %w", err)
			}
		case "method":
			req.Method = value
		case "contents":
			req.Contents = value
		default:
			return req, fmt.Errorf("unknown attribute %q", key)
		}
		body = rest
	}
}

// firstToken returns s up to its first separator.
func firstToken(s string) string {
	if i := strings.IndexAny(s, separators); i >= 0 {
		return s[:i]
	}
	return s
}

// parseValue reads one attribute value, bare or quoted, and returns it
// with the rest of the line.
func parseValue(s string) (value, rest string, err error) {
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		tok := firstToken(s)
		return tok, s[len(tok):], nil
	}
	quote := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == quote:
			rest = s[i+1:]
			if rest != "" && !strings.ContainsRune(separators, rune(rest[0])) {
				return "", "", fmt.Errorf("text %q right after closing quote", firstToken(rest))
			}
			return b.String(), rest, nil
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] == 'n' {
				b.WriteByte('\n')
			} else {
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("unterminated %c quote", quote)
}

// parseSeconds converts a think time in seconds to a Duration. Plain
// decimals ("2", "0.25") are converted exactly, to the nanosecond, so
// that WriteWsesslog output reads back unchanged; other float syntax
// ("1e-3") goes through strconv and is rounded to the nanosecond.
func parseSeconds(v string) (time.Duration, error) {
	if d, ok := parseDecimalSeconds(v); ok {
		return d, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%q is not a number of seconds", v)
	}
	if math.IsNaN(f) || f < 0 || f*1e9 >= math.MaxInt64 {
		return 0, fmt.Errorf("%q seconds is out of range", v)
	}
	return time.Duration(math.Round(f * 1e9)), nil
}

// parseDecimalSeconds handles DIGITS[.DIGITS] exactly; digits past the
// nanosecond are dropped. ok is false for anything else or on overflow.
func parseDecimalSeconds(v string) (time.Duration, bool) {
	whole, frac, _ := strings.Cut(v, ".")
	if (whole == "" && frac == "") || !allDigits(whole) || !allDigits(frac) {
		return 0, false
	}
	var secs int64
	for _, c := range whole {
		secs = secs*10 + int64(c-'0')
		if secs > math.MaxInt64/int64(time.Second)-1 {
			return 0, false
		}
	}
	frac = (frac + "000000000")[:9]
	var nanos int64
	for _, c := range frac {
		nanos = nanos*10 + int64(c-'0')
	}
	return time.Duration(secs)*time.Second + time.Duration(nanos), true
}

// allDigits reports whether s holds only ASCII digits (true for "").
func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
