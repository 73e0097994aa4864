package httphead

// field interprets one header field line. Only the fields that decide
// routing or framing are looked at; the rest pass through untouched.
// lineStart is the offset of the line, reported in errors.
func (p *parser) field(lineStart int, name, value []byte) error {
	r := p.r
	switch {
	case equalFoldLower(name, "host"):
		if p.sawHost {
			return syntaxError(lineStart, "more than one Host header field")
		}
		host, ok := splitHostPort(value)
		if !ok {
			return syntaxError(lineStart, "invalid Host header field value")
		}
		p.sawHost = true
		r.Host = host

	case equalFoldLower(name, "content-length"):
		n, ok := parseContentLength(value)
		switch {
		case !ok:
			return syntaxError(lineStart, "Content-Length is not a decimal number")
		case p.sawContentLength && n != r.ContentLength:
			return syntaxError(lineStart, "conflicting Content-Length values")
		case p.sawTransferEncoding:
			return syntaxError(lineStart, "both Content-Length and Transfer-Encoding (request smuggling risk)")
		}
		p.sawContentLength = true
		r.ContentLength = n

	case equalFoldLower(name, "transfer-encoding"):
		return p.transferEncoding(lineStart, value)

	case equalFoldLower(name, "connection"):
		for rest := value; len(rest) > 0; {
			var option []byte
			option, rest = nextListElement(rest)
			switch {
			case equalFoldLower(option, "close"):
				p.connectionClose = true
			case equalFoldLower(option, "keep-alive"):
				p.connectionKeepAlive = true
			}
		}

	case equalFoldLower(name, "cookie"):
		if !p.sawCookie {
			p.sawCookie = true
			r.Cookie = value
		}
	}
	return nil
}

// transferEncoding checks one Transfer-Encoding line. Several lines form
// one list (RFC 9110 5.3). chunked must be the last coding and appear once
// (RFC 9112 6.1); whether the list ends in chunked is checked in finish,
// since another line may still follow.
func (p *parser) transferEncoding(lineStart int, value []byte) error {
	switch {
	case p.http10:
		return syntaxError(lineStart, "Transfer-Encoding in an HTTP/1.0 request")
	case p.sawContentLength:
		return syntaxError(lineStart, "both Content-Length and Transfer-Encoding (request smuggling risk)")
	}
	if !p.sawTransferEncoding {
		p.sawTransferEncoding = true
		p.transferEncodingAt = lineStart
	}
	for rest := value; len(rest) > 0; {
		var coding []byte
		coding, rest = nextListElement(rest)
		if i := indexByte(coding, ';'); i >= 0 { // drop transfer parameters
			coding = trimOWS(coding[:i])
		}
		if len(coding) == 0 {
			continue
		}
		for _, c := range coding {
			if !tokenChar[c] {
				return syntaxError(lineStart, "invalid transfer coding name")
			}
		}
		if p.lastCodingChunked {
			return syntaxError(lineStart, "transfer coding after chunked")
		}
		p.lastCodingChunked = equalFoldLower(coding, "chunked")
	}
	return nil
}

// parseContentLength accepts 1*DIGIT that fits an int64, nothing else: no
// sign, no spaces, no comma-separated repeats.
func parseContentLength(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	const maxInt64 = 1<<63 - 1
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (maxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}
