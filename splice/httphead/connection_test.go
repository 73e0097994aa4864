package httphead

import (
	"bytes"
	"testing"
)

func TestBlankCloseKeepsLengthAndLetsTheConnectionLive(t *testing.T) {
	for _, c := range []struct {
		in, want string
		n        int
	}{
		{"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", "GET / HTTP/1.1\r\nHost: h\r\nConnection:      \r\n\r\n", 1},
		{"GET / HTTP/1.1\r\nHost: h\r\nconnection:Close , TE\r\nTE: trailers\r\n\r\n", "GET / HTTP/1.1\r\nHost: h\r\nconnection:      , TE\r\nTE: trailers\r\n\r\n", 1},
		{"\r\nGET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n", "\r\nGET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n", 0},
		{"GET / HTTP/1.1\r\nX-Connection: close\r\nConnection: closed\r\n\r\n", "GET / HTTP/1.1\r\nX-Connection: close\r\nConnection: closed\r\n\r\n", 0},
		// Only the head: a body that says close is the body's business.
		{"POST / HTTP/1.1\r\nContent-Length: 19\r\n\r\nConnection: close\r\n", "POST / HTTP/1.1\r\nContent-Length: 19\r\n\r\nConnection: close\r\n", 0},
	} {
		b := []byte(c.in)
		n := BlankClose(b)
		if n != c.n || string(b) != c.want {
			t.Errorf("BlankClose(%q) = %d, %q; want %d, %q", c.in, n, b, c.n, c.want)
		}
		var r Request
		if c.n > 0 {
			if err := Parse(b, 1<<10, &r); err != nil || !r.KeepAlive {
				t.Errorf("%q: parses as keep-alive %v, err %v", b, r.KeepAlive, err)
			}
		}
	}
}

func TestCloseKeepAliveWritesCloseInPlace(t *testing.T) {
	for _, c := range []struct {
		in, want string
		done     bool
	}{
		{"HTTP/1.1 200 OK\r\nServer: nginx\r\nConnection: keep-alive\r\n\r\nbody", "HTTP/1.1 200 OK\r\nServer: nginx\r\nConnection: close     \r\n\r\nbody", true},
		{"HTTP/1.1 200 OK\r\nconnection:Keep-Alive\r\n\r\n", "HTTP/1.1 200 OK\r\nconnection:close     \r\n\r\n", true},
		{"HTTP/1.1 200 OK\r\nConnection: keep-alive, Upgrade\r\n\r\n", "HTTP/1.1 200 OK\r\nConnection: keep-alive, Upgrade\r\n\r\n", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false},
		{"HTTP/1.1 200 OK\r\nConnection: keep-al", "HTTP/1.1 200 OK\r\nConnection: keep-al", false},
		{"HTTP/1.1 200 OK\r\n\r\nConnection: keep-alive\r\n", "HTTP/1.1 200 OK\r\n\r\nConnection: keep-alive\r\n", false},
	} {
		b := []byte(c.in)
		if done := CloseKeepAlive(b); done != c.done || string(b) != c.want {
			t.Errorf("CloseKeepAlive(%q) = %v, %q; want %v, %q", c.in, done, b, c.done, c.want)
		}
	}
	var r Response
	b := []byte("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc")
	CloseKeepAlive(b)
	if err := ParseResponse(b, 1<<10, &r); err != nil || r.HeadLen != len(b)-3 || r.ContentLength != 3 {
		t.Errorf("rewritten head parses as %+v, %v", r, err)
	}
}

func FuzzConnectionEdits(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, edit := range []func([]byte){func(b []byte) { BlankClose(b) }, func(b []byte) { CloseKeepAlive(b) }} {
			c := bytes.Clone(b)
			edit(c)
			if len(c) != len(b) {
				t.Fatal("length changed")
			}
			// Only bytes of field values change, and CR, LF and ':' never.
			for i := range b {
				if b[i] != c[i] && (b[i] == '\r' || b[i] == '\n' || b[i] == ':' || c[i] == '\r' || c[i] == '\n') {
					t.Fatalf("byte %d changed from %q to %q", i, b[i], c[i])
				}
			}
		}
	})
}
