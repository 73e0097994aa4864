package httphead

import "bytes"

// Response is what the back-end shim needs from a response head: where the
// response ends, so it can tell when a request has been served without
// guessing from silence.
type Response struct {
	Status        int
	HeadLen       int   // bytes of the head including the final CRLFCRLF
	ContentLength int64 // -1 if absent
	Chunked       bool
}

// BodyKnown reports whether the body's length follows from the head
// alone, given whether the request was HEAD: a HEAD answer and 204/304
// carry no body; otherwise Content-Length without chunked coding says
// how long it is. 1xx heads are followed by another head: unknown here.
func (r *Response) BodyKnown(headRequest bool) (int64, bool) {
	switch {
	case r.Status >= 100 && r.Status < 200:
		return 0, false
	case headRequest, r.Status == 204, r.Status == 304:
		return 0, true
	case r.Chunked || r.ContentLength < 0:
		return 0, false
	}
	return r.ContentLength, true
}

// ParseResponse reads an HTTP/1.x response head at the start of buf. It
// is lenient where Parse is strict: it reads what a server sent, to find
// the body's length, and judges nothing else. It returns ErrIncomplete
// when the head does not end within buf, ErrTooLarge past limit bytes, and
// a *SyntaxError when the status line is not HTTP/1.x NNN or a
// Content-Length is not a number. It does not allocate.
func ParseResponse(buf []byte, limit int, r *Response) error {
	*r = Response{ContentLength: -1}
	if limit > 0 && len(buf) > limit {
		buf = buf[:limit]
	}
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		if len(buf) >= 12 && !validStatusLine(buf) {
			return syntaxError(0, "not an HTTP/1.x status line")
		}
		if limit > 0 && len(buf) >= limit {
			return ErrTooLarge
		}
		return ErrIncomplete
	}
	head := buf[:end+2]
	r.HeadLen = end + 4
	nl := bytes.Index(head, []byte("\r\n"))
	if !validStatusLine(head[:nl]) {
		return syntaxError(0, "not an HTTP/1.x status line")
	}
	r.Status = int(head[9]-'0')*100 + int(head[10]-'0')*10 + int(head[11]-'0')
	for off := nl + 2; off < len(head); {
		n := bytes.Index(head[off:], []byte("\r\n"))
		line := head[off : off+n]
		name, value, ok := bytes.Cut(line, []byte(":"))
		if ok {
			value = trimOWS(value)
			switch {
			case equalFoldLower(name, "content-length"):
				v, ok := parseContentLength(value)
				if !ok {
					return syntaxError(off, "bad Content-Length")
				}
				r.ContentLength = v
			case equalFoldLower(name, "transfer-encoding"):
				for elem, rest := nextListElement(value); ; elem, rest = nextListElement(rest) {
					r.Chunked = equalFoldLower(elem, "chunked")
					if rest == nil {
						break
					}
				}
			}
		}
		off += n + 2
	}
	return nil
}

// validStatusLine checks "HTTP/1.x NNN" at the start of b.
func validStatusLine(b []byte) bool {
	return len(b) >= 12 && bytes.HasPrefix(b, []byte("HTTP/1.")) && (b[7] == '0' || b[7] == '1') &&
		b[8] == ' ' && isDigit(b[9]) && isDigit(b[10]) && isDigit(b[11]) && (len(b) == 12 || b[12] == ' ')
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
