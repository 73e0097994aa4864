package loadgen

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReadResponse(t *testing.T) {
	for _, c := range []struct {
		name, wire string
		want       response
		rest       string // what must be left unread: the next answer
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloNEXT",
			response{status: 200, bodyBytes: 5, reusable: true}, "NEXT"},
		{"bare LF and odd case", "HTTP/1.1 503 Busy\ncontent-length: 0\nretry-after: 3\n\nNEXT",
			response{status: 503, retryAfter: true, reusable: true}, "NEXT"},
		{"chunked with extension and trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"5;x=y\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT",
			response{status: 200, bodyBytes: 21, reusable: true}, "NEXT"},
		{"interim 100 then 429", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many\r\nRetry-After: 1\r\nContent-Length: 2\r\n\r\nnoNEXT",
			response{status: 429, retryAfter: true, bodyBytes: 2, reusable: true}, "NEXT"},
		{"204 has no body", "HTTP/1.1 204 No Content\r\n\r\nNEXT",
			response{status: 204, reusable: true}, "NEXT"},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 2\r\n\r\nok",
			response{status: 200, bodyBytes: 2}, ""},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
			response{status: 200, bodyBytes: 2}, ""},
		{"until close", "HTTP/1.1 200 OK\r\n\r\nall of this",
			response{status: 200, bodyBytes: 11}, ""},
		{"no reason phrase", "HTTP/1.1 418\r\nContent-Length: 0\r\n\r\n",
			response{status: 418, reusable: true}, ""},
	} {
		br := bufio.NewReaderSize(strings.NewReader(c.wire), 64)
		got, started, err := readResponse(br)
		rest, _ := io.ReadAll(br)
		if err != nil || !started || got != c.want || string(rest) != c.rest {
			t.Errorf("%s: got %+v started %v err %v rest %q; want %+v rest %q", c.name, got, started, err, rest, c.want, c.rest)
		}
	}
}

func TestReadResponseFailures(t *testing.T) {
	for _, c := range []struct {
		name, wire string
		started    bool
		want       error
	}{
		{"nothing at all", "", false, io.EOF},
		{"cut in the head", "HTTP/1.1 200 OK\r\nContent-Len", true, io.ErrUnexpectedEOF},
		{"cut in the body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true, io.ErrUnexpectedEOF},
		{"cut in a chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", true, io.ErrUnexpectedEOF},
		{"not HTTP", "SSH-2.0-OpenSSH\r\n\r\n", true, errMalformed},
		{"bad status", "HTTP/1.1 2x0 OK\r\n\r\n", true, errMalformed},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\n", true, errMalformed},
		{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", true, errMalformed},
		{"header without colon", "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", true, errMalformed},
		{"line longer than the buffer", "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", 100) + "\r\n\r\n", true, errMalformed},
	} {
		_, started, err := readResponse(bufio.NewReaderSize(strings.NewReader(c.wire), 64))
		if started != c.started || !errors.Is(err, c.want) {
			t.Errorf("%s: started %v err %v; want %v, %v", c.name, started, err, c.started, c.want)
		}
	}
}
