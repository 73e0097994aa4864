package httphead

import (
	"errors"
	"strconv"
)

// Request is what Parse learned from a request head. Every []byte field is
// a sub-slice of the buffer given to Parse and is valid only as long as
// that buffer is neither modified nor reused. The fields are meaningful
// only when Parse returned nil.
type Request struct {
	Method, Target, Proto []byte

	// Host is the Host header field value with any :port removed, as sent
	// (compare it with HostMatches or bytes.EqualFold). For an
	// absolute-form target ("GET http://h/p HTTP/1.1") it is the target's
	// host instead, as RFC 9112 3.2.2 requires. Nil when the request has
	// no Host field (allowed only in HTTP/1.0); empty, not nil, when the
	// field is present but empty.
	Host []byte

	// Path is Target without its query string. For an absolute-form
	// target it is the path part only, empty when the target has none
	// (which means "/"). For "*" and CONNECT's authority-form it is Target.
	Path []byte

	// Cookie is the raw value of the first Cookie header field, nil if none.
	Cookie []byte

	// ContentLength is the Content-Length value, -1 if absent.
	ContentLength int64

	// Chunked is set when Transfer-Encoding ends in chunked, the only
	// Transfer-Encoding Parse accepts.
	Chunked bool

	// KeepAlive tells whether the client expects the connection to stay
	// open after the response: the HTTP/1.1 default unless "Connection:
	// close"; in HTTP/1.0 only with "Connection: keep-alive".
	KeepAlive bool

	// HeadLen is the length of the head, from the first byte of the
	// buffer (leading empty lines included) through the final CRLFCRLF.
	// Bytes after it belong to the body or to a pipelined request.
	HeadLen int

	// BodyLen is how many body bytes follow the head: ContentLength, or 0
	// when there is none, or -1 when chunked (the length is not known).
	BodyLen int64
}

// ErrIncomplete means the buffer holds the beginning of a valid head but not
// its end yet: call Parse again when more bytes have arrived.
var ErrIncomplete = errors.New("httphead: request head incomplete")

// ErrTooLarge means the first limit bytes hold no complete head, and nothing
// wrong with them either. The front-end answers 431.
var ErrTooLarge = errors.New("httphead: request head larger than the limit")

// SyntaxError describes a malformed head. The front-end answers 400.
type SyntaxError struct {
	Offset int    // index in the buffer of the byte or line at fault
	Reason string // what is wrong, for logs
}

func (e *SyntaxError) Error() string {
	return "httphead: malformed request at byte " + strconv.Itoa(e.Offset) + ": " + e.Reason
}

func syntaxError(offset int, reason string) error {
	return &SyntaxError{Offset: offset, Reason: reason}
}

// Parse parses the request head at the start of buf into r.
//
// limit is the largest head accepted, in bytes; limit <= 0 means no limit
// beyond len(buf). Parse looks at no more than limit bytes, so a buffer
// holding more (a pipelined request, a body) is fine. It returns nil when a
// complete, valid head was found; ErrIncomplete when buf is shorter than
// limit and the head has not ended; ErrTooLarge when limit bytes hold no
// complete head; or a *SyntaxError as soon as the bytes seen are invalid,
// complete head or not. buf is never modified.
func Parse(buf []byte, limit int, r *Request) error {
	*r = Request{ContentLength: -1}
	p := parser{buf: buf, r: r}
	if limit > 0 && len(buf) >= limit {
		p.buf = buf[:limit]
		p.atLimit = true
	}
	pos, err := p.skipEmptyLines()
	if err != nil {
		return err
	}
	if pos, err = p.requestLine(pos); err != nil {
		return err
	}
	if pos, err = p.fields(pos); err != nil {
		return err
	}
	return p.finish(pos)
}

// parser holds what one Parse call has seen so far.
type parser struct {
	buf     []byte // the bytes Parse may look at: at most limit of them
	atLimit bool   // no more bytes may be considered: running out is ErrTooLarge
	r       *Request

	http10      bool
	absoluteURI bool   // absolute-form target: Host comes from it
	targetHost  []byte // host of an absolute-form target

	sawHost, sawContentLength, sawCookie bool
	sawTransferEncoding                  bool
	transferEncodingAt                   int  // offset of the first Transfer-Encoding line
	lastCodingChunked                    bool // the last transfer coding so far is chunked
	connectionClose, connectionKeepAlive bool
}

// short is the answer when the scan needs a byte beyond p.buf.
func (p *parser) short() error {
	if p.atLimit {
		return ErrTooLarge
	}
	return ErrIncomplete
}

// crlf expects a line ending at i and returns the offset after it.
func (p *parser) crlf(i int, otherwise string) (int, error) {
	b := p.buf
	if i >= len(b) {
		return 0, p.short()
	}
	switch b[i] {
	case '\r':
		if i+1 >= len(b) {
			return 0, p.short()
		}
		if b[i+1] != '\n' {
			return 0, syntaxError(i, "CR not followed by LF")
		}
		return i + 2, nil
	case '\n':
		return 0, syntaxError(i, "bare LF line ending (CRLF required)")
	}
	return 0, syntaxError(i, otherwise)
}

// skipEmptyLines skips the CRLFs a server should ignore before the
// request line (RFC 9112 2.2), left over from a previous request's body.
func (p *parser) skipEmptyLines() (int, error) {
	pos := 0
	for pos < len(p.buf) && (p.buf[pos] == '\r' || p.buf[pos] == '\n') {
		next, err := p.crlf(pos, "")
		if err != nil {
			return 0, err
		}
		pos = next
	}
	return pos, nil
}

// requestLine parses "METHOD SP request-target SP HTTP/1.x CRLF".
func (p *parser) requestLine(start int) (int, error) {
	b := p.buf
	i := start
	for i < len(b) && tokenChar[b[i]] {
		i++
	}
	if i == len(b) {
		return 0, p.short()
	}
	if b[i] != ' ' {
		return 0, syntaxError(i, "invalid byte in method")
	}
	if i == start {
		return 0, syntaxError(i, "empty method")
	}
	p.r.Method = b[start:i]

	i++
	targetStart := i
	for i < len(b) && targetChar[b[i]] {
		i++
	}
	if i == len(b) {
		return 0, p.short()
	}
	switch {
	case i == targetStart && b[i] == ' ':
		return 0, syntaxError(i, "empty request target")
	case b[i] == '\r' || b[i] == '\n':
		return 0, syntaxError(i, "no protocol version after the request target")
	case b[i] != ' ':
		return 0, syntaxError(i, "invalid byte in request target")
	}
	if err := p.target(targetStart, b[targetStart:i]); err != nil {
		return 0, err
	}

	i++
	protoStart := i
	i, err := p.version(i)
	if err != nil {
		return 0, err
	}
	p.r.Proto = b[protoStart:i]
	return p.crlf(i, "unexpected byte after the protocol version")
}

// version checks "HTTP/1.0" or "HTTP/1.1" at i, byte by byte so that a
// wrong protocol is refused before the line is complete.
func (p *parser) version(i int) (int, error) {
	b := p.buf
	const name = "HTTP/"
	for k := 0; k < len(name); k++ {
		if i+k >= len(b) {
			return 0, p.short()
		}
		if b[i+k] != name[k] {
			return 0, syntaxError(i+k, "protocol is not HTTP/1.0 or HTTP/1.1")
		}
	}
	i += len(name)
	if i >= len(b) {
		return 0, p.short()
	}
	switch major := b[i]; {
	case major == '2' || major == '3':
		return 0, syntaxError(i, "HTTP/"+string(major)+" is not accepted here, only HTTP/1.0 and HTTP/1.1")
	case major != '1':
		return 0, syntaxError(i, "malformed or unsupported HTTP major version")
	}
	if i+1 >= len(b) {
		return 0, p.short()
	}
	if b[i+1] != '.' {
		return 0, syntaxError(i+1, "malformed HTTP version")
	}
	if i+2 >= len(b) {
		return 0, p.short()
	}
	switch b[i+2] {
	case '0':
		p.http10 = true
	case '1':
	default:
		return 0, syntaxError(i+2, "unsupported HTTP/1 minor version, only HTTP/1.0 and HTTP/1.1")
	}
	return i + 3, nil
}

// target classifies the request-target (RFC 9112 3.2) and sets Target and
// Path. at is the target's offset in the buffer, for error reports.
func (p *parser) target(at int, t []byte) error {
	r := p.r
	r.Target = t
	switch {
	case t[0] == '/': // origin-form
		r.Path = cutQuery(t)
	case hasPrefixFoldLower(t, "http://") || hasPrefixFoldLower(t, "https://"):
		rest := t[indexByte(t, ':')+3:]
		end := 0
		for end < len(rest) && rest[end] != '/' && rest[end] != '?' {
			end++
		}
		host, ok := splitHostPort(rest[:end])
		if !ok || len(host) == 0 {
			return syntaxError(at, "invalid host in absolute-form request target")
		}
		p.absoluteURI = true
		p.targetHost = host
		r.Path = cutQuery(rest[end:])
	case len(t) == 1 && t[0] == '*' && string(r.Method) == "OPTIONS":
		r.Path = t
	case string(r.Method) == "CONNECT":
		if host, ok := splitHostPort(t); !ok || len(host) == 0 || len(host) == len(t) {
			return syntaxError(at, "CONNECT target is not host:port")
		}
		r.Path = t
	default:
		return syntaxError(at, "request target is not origin-form, absolute-form, authority-form or '*'")
	}
	return nil
}

// cutQuery returns t up to its '?'.
func cutQuery(t []byte) []byte {
	if i := indexByte(t, '?'); i >= 0 {
		return t[:i]
	}
	return t
}

func indexByte(b []byte, c byte) int {
	for i := range b {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// fields parses header field lines up to and including the empty line that
// ends the head, and returns the offset after it.
func (p *parser) fields(i int) (int, error) {
	b := p.buf
	for {
		if i >= len(b) {
			return 0, p.short()
		}
		lineStart := i
		switch c := b[i]; {
		case c == '\r' || c == '\n':
			return p.crlf(i, "")
		case isOWS(c):
			return 0, syntaxError(i, "line folding or whitespace before a header field name")
		}
		for i < len(b) && tokenChar[b[i]] {
			i++
		}
		if i == len(b) {
			return 0, p.short()
		}
		switch {
		case b[i] != ':' && isOWS(b[i]):
			return 0, syntaxError(i, "whitespace between header field name and colon")
		case b[i] != ':':
			return 0, syntaxError(i, "invalid byte in header field name")
		case i == lineStart:
			return 0, syntaxError(i, "empty header field name")
		}
		name := b[lineStart:i]

		i++
		valueStart := i
		for i < len(b) && valueChar[b[i]] {
			i++
		}
		valueEnd := i
		next, err := p.crlf(i, "control byte in header field value")
		if err != nil {
			return 0, err
		}
		if err := p.field(lineStart, name, trimOWS(b[valueStart:valueEnd])); err != nil {
			return 0, err
		}
		i = next
	}
}

// finish applies the checks that need the whole head, then fills in the
// derived fields. end is the offset just after the final CRLFCRLF.
func (p *parser) finish(end int) error {
	r := p.r
	if !p.http10 && !p.sawHost {
		return syntaxError(end-2, "HTTP/1.1 request without a Host header field")
	}
	if p.sawTransferEncoding && !p.lastCodingChunked {
		return syntaxError(p.transferEncodingAt, "Transfer-Encoding does not end in chunked")
	}
	if p.absoluteURI {
		r.Host = p.targetHost
	}
	r.Chunked = p.lastCodingChunked
	switch {
	case r.Chunked:
		r.BodyLen = -1
	case r.ContentLength >= 0:
		r.BodyLen = r.ContentLength
	}
	if p.http10 {
		r.KeepAlive = p.connectionKeepAlive && !p.connectionClose
	} else {
		r.KeepAlive = !p.connectionClose
	}
	r.HeadLen = end
	return nil
}
