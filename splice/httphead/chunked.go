package httphead

// Following a chunked request body (RFC 9112 7.1) to its end.
//
// The front-end never decodes a body for itself: it only needs to know
// where a chunked body ends, because the next request starts there and
// must be scheduled on its own. Chunked consumes the body's bytes in
// order, in pieces of any size, and says where the final CRLF is. It is
// as strict as Parse, for the same reason: the back-end's server decides
// for itself where the body ends, so anything two readers could split
// differently is an error rather than a guess -- bare LF or bare CR, a
// chunk-size with a sign, a "0x" or whitespace before CRLF, a chunk-data
// not followed by CRLF, obsolete line folding or a colon-less line in the
// trailer section. Chunk extensions and trailer fields are checked
// against the grammar and otherwise ignored.

// Limits on the parts of a chunked body that are not data. A chunk-size
// line (size and extensions, without its CRLF) of more than MaxChunkLine
// bytes and a trailer section (every byte after the last chunk's line,
// final CRLF included) of more than MaxTrailer bytes are errors. A chunk
// size must be below 2^63.
const (
	MaxChunkLine = 4096
	MaxTrailer   = 8192
)

// ChunkedError says what is wrong with a chunked body. The values are
// fixed, so reporting one allocates nothing.
type ChunkedError struct{ Reason string }

func (e *ChunkedError) Error() string { return "httphead: malformed chunked body: " + e.Reason }

var (
	errChunkSize      = &ChunkedError{"chunk size is not hexadecimal digits"}
	errChunkTooLarge  = &ChunkedError{"chunk size of 2^63 or more"}
	errChunkLineLong  = &ChunkedError{"chunk-size line longer than MaxChunkLine"}
	errChunkExt       = &ChunkedError{"invalid chunk extension"}
	errChunkCRLF      = &ChunkedError{"line not ended by CRLF"}
	errChunkDataCRLF  = &ChunkedError{"chunk data not followed by CRLF"}
	errTrailerField   = &ChunkedError{"invalid trailer field line"}
	errTrailerTooLong = &ChunkedError{"trailer section longer than MaxTrailer"}
)

// chunkState is where in the body grammar the next byte falls.
type chunkState uint8

const (
	csSizeFirst     chunkState = iota // first HEXDIG of a chunk-size
	csSize                            // more HEXDIG, BWS, ';' or CR
	csSizeBWS                         // BWS after the size: more BWS or ';'
	csExtPreName                      // BWS then a chunk-ext-name
	csExtName                         // in chunk-ext-name
	csExtPostName                     // BWS after a name: '=' or ';'
	csExtPreValue                     // BWS then token or quoted-string
	csExtToken                        // in a token value
	csExtQuoted                       // in a quoted-string value
	csExtQuotedPair                   // after '\' in a quoted-string
	csExtPostValue                    // after a value: BWS, ';' or CR
	csExtBWS                          // BWS after a value: more BWS or ';'
	csSizeLF                          // LF of the chunk-size line
	csData                            // chunk-data, remain bytes left
	csDataCR                          // CR after chunk-data
	csDataLF                          // LF after chunk-data
	csTrailerStart                    // start of a trailer line or the final CRLF
	csTrailerName                     // in a trailer field name
	csTrailerValue                    // in a trailer field value
	csTrailerLF                       // LF of a trailer field line
	csFinalLF                         // LF of the final CRLF
	csDone                            // the body has ended
	csFailed                          // an error was reported
)

// Chunked follows one chunked body. The zero value is ready for the first
// byte after the request head; Reset makes it so again. It holds no
// pointers and never allocates, so it can live in a per-connection record.
type Chunked struct {
	state  chunkState
	size   uint64 // the chunk-size being read
	remain uint64 // chunk-data bytes left in the current chunk
	line   int    // bytes of the current chunk-size line, or of the trailer section
	err    *ChunkedError
}

// Reset prepares c for a new body.
func (c *Chunked) Reset() { *c = Chunked{} }

// Done reports whether the body's final CRLF has been consumed.
func (c *Chunked) Done() bool { return c.state == csDone }

// Feed consumes the next bytes of the body from b. It returns how many
// bytes belong to the body: len(b) while the body goes on, the offset just
// past the final CRLF when b holds the end (Done is then true and what
// follows is the next request), with err nil. On malformed input it
// returns the offset of the offending byte and a *ChunkedError, and keeps
// returning 0 and that error. After the end it returns 0, nil.
func (c *Chunked) Feed(b []byte) (n int, err error) {
	if c.state == csFailed {
		return 0, c.err
	}
	i := 0
	for i < len(b) && c.state != csDone {
		if c.state == csData {
			k := uint64(len(b) - i)
			if c.remain < k {
				k = c.remain
			}
			i += int(k)
			c.remain -= k
			if c.remain == 0 {
				c.state = csDataCR
			}
			continue
		}
		if e := c.step(b[i]); e != nil {
			c.state, c.err = csFailed, e
			return i, e
		}
		i++
	}
	return i, nil
}

// step consumes one byte outside chunk-data.
func (c *Chunked) step(ch byte) *ChunkedError {
	switch c.state {
	case csSizeFirst, csSize, csSizeBWS, csExtPreName, csExtName, csExtPostName,
		csExtPreValue, csExtToken, csExtQuoted, csExtQuotedPair, csExtPostValue, csExtBWS:
		if ch != '\r' {
			if c.line++; c.line > MaxChunkLine {
				return errChunkLineLong
			}
		}
	case csTrailerStart, csTrailerName, csTrailerValue, csTrailerLF, csFinalLF:
		if c.line++; c.line > MaxTrailer {
			return errTrailerTooLong
		}
	}
	switch c.state {
	case csSizeFirst:
		d, ok := hexDigit(ch)
		if !ok {
			return errChunkSize
		}
		c.size = uint64(d)
		c.state = csSize
	case csSize:
		if d, ok := hexDigit(ch); ok {
			if c.size>>59 != 0 {
				return errChunkTooLarge
			}
			c.size = c.size<<4 | uint64(d)
			return nil
		}
		return c.afterSize(ch, errChunkSize)
	case csSizeBWS:
		switch {
		case isOWS(ch):
		case ch == ';':
			c.state = csExtPreName
		default:
			return errChunkExt
		}
	case csExtPreName:
		switch {
		case isOWS(ch):
		case tokenChar[ch]:
			c.state = csExtName
		default:
			return errChunkExt
		}
	case csExtName:
		switch {
		case tokenChar[ch]:
		case isOWS(ch):
			c.state = csExtPostName
		case ch == '=':
			c.state = csExtPreValue
		default:
			return c.afterSize(ch, errChunkExt)
		}
	case csExtPostName:
		switch {
		case isOWS(ch):
		case ch == '=':
			c.state = csExtPreValue
		case ch == ';':
			c.state = csExtPreName
		default:
			return errChunkExt
		}
	case csExtPreValue:
		switch {
		case isOWS(ch):
		case tokenChar[ch]:
			c.state = csExtToken
		case ch == '"':
			c.state = csExtQuoted
		default:
			return errChunkExt
		}
	case csExtToken:
		if tokenChar[ch] {
			return nil
		}
		return c.afterValue(ch)
	case csExtQuoted:
		switch {
		case ch == '"':
			c.state = csExtPostValue
		case ch == '\\':
			c.state = csExtQuotedPair
		case ch == '\t' || ch >= 0x20 && ch != 0x7f:
		default:
			return errChunkExt
		}
	case csExtQuotedPair:
		if ch != '\t' && (ch < 0x20 || ch == 0x7f) {
			return errChunkExt
		}
		c.state = csExtQuoted
	case csExtPostValue:
		return c.afterValue(ch)
	case csExtBWS:
		switch {
		case isOWS(ch):
		case ch == ';':
			c.state = csExtPreName
		default:
			return errChunkExt
		}
	case csSizeLF:
		if ch != '\n' {
			return errChunkCRLF
		}
		c.line = 0
		if c.size == 0 {
			c.state = csTrailerStart
		} else {
			c.remain, c.state = c.size, csData
		}
	case csDataCR:
		if ch != '\r' {
			return errChunkDataCRLF
		}
		c.state = csDataLF
	case csDataLF:
		if ch != '\n' {
			return errChunkDataCRLF
		}
		c.state = csSizeFirst
	case csTrailerStart:
		switch {
		case ch == '\r':
			c.state = csFinalLF
		case tokenChar[ch]:
			c.state = csTrailerName
		default:
			return errTrailerField // folding, an empty name, bare LF
		}
	case csTrailerName:
		switch {
		case tokenChar[ch]:
		case ch == ':':
			c.state = csTrailerValue
		default:
			return errTrailerField
		}
	case csTrailerValue:
		switch {
		case ch == '\r':
			c.state = csTrailerLF
		case !valueChar[ch]:
			return errTrailerField
		}
	case csTrailerLF:
		if ch != '\n' {
			return errChunkCRLF
		}
		c.state = csTrailerStart
	case csFinalLF:
		if ch != '\n' {
			return errChunkCRLF
		}
		c.state = csDone
	}
	return nil
}

// afterSize handles what may follow the chunk-size or an extension name:
// BWS, ';' or the CR of the line. Anything else is bad.
func (c *Chunked) afterSize(ch byte, bad *ChunkedError) *ChunkedError {
	switch {
	case isOWS(ch):
		if c.state == csSize {
			c.state = csSizeBWS
		} else {
			c.state = csExtPostName
		}
	case ch == ';':
		c.state = csExtPreName
	case ch == '\r':
		c.state = csSizeLF
	default:
		return bad
	}
	return nil
}

// afterValue handles what may follow an extension value.
func (c *Chunked) afterValue(ch byte) *ChunkedError {
	switch {
	case isOWS(ch):
		c.state = csExtBWS
	case ch == ';':
		c.state = csExtPreName
	case ch == '\r':
		c.state = csSizeLF
	default:
		return errChunkExt
	}
	return nil
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
