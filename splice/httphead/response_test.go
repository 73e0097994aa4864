package httphead

import (
	"errors"
	"testing"
)

func TestParseResponse(t *testing.T) {
	cases := []struct {
		in      string
		head    bool
		status  int
		body    int64
		known   bool
		headLen int
		err     error
	}{
		{in: "HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\nxx", status: 200, body: 1024, known: true, headLen: 41},
		{in: "HTTP/1.1 200 OK\r\ncontent-length:  7 \r\nX: y\r\n\r\n", status: 200, body: 7, known: true, headLen: 46},
		{in: "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n", head: true, status: 200, body: 0, known: true, headLen: 38},
		{in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", status: 200, known: false, headLen: 53},
		{in: "HTTP/1.0 200 OK\r\nServer: x\r\n\r\n", status: 200, known: false, headLen: 30},
		{in: "HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", status: 304, body: 0, known: true, headLen: 49},
		{in: "HTTP/1.1 100 Continue\r\n\r\n", status: 100, known: false, headLen: 25},
		{in: "HTTP/1.1 200 OK\r\nContent-Length: 10", err: ErrIncomplete},
		{in: "SSH-2.0-OpenSSH_9\r\n\r\n", err: &SyntaxError{}},
		{in: "HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", err: &SyntaxError{}},
	}
	for _, c := range cases {
		var r Response
		err := ParseResponse([]byte(c.in), 8192, &r)
		if c.err != nil {
			var se *SyntaxError
			if !(errors.Is(err, c.err) || (errors.As(c.err, &se) && errors.As(err, &se))) {
				t.Errorf("%q: err %v, want %v", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		body, known := r.BodyKnown(c.head)
		if r.Status != c.status || known != c.known || (known && body != c.body) || r.HeadLen != c.headLen {
			t.Errorf("%q: status %d body %d known %v headLen %d, want %d %d %v %d", c.in, r.Status, body, known, r.HeadLen, c.status, c.body, c.known, c.headLen)
		}
	}
}

func FuzzParseResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))
	f.Add([]byte("HTTP/1.1 204 No Content\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Response
		if err := ParseResponse(b, 4096, &r); err == nil {
			if r.HeadLen > len(b) || r.HeadLen < 16 {
				t.Fatalf("HeadLen %d for %d bytes", r.HeadLen, len(b))
			}
			if r.Status < 0 || r.Status > 999 {
				t.Fatalf("status %d", r.Status)
			}
		}
	})
}
