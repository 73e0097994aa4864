package benchproxy

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// serveOnce answers each connection's request with the given pieces,
// written separately, then closes.
func serveOnce(t *testing.T, pieces ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			for _, p := range pieces {
				c.Write([]byte(p))
				time.Sleep(time.Millisecond) // separate segments: a split status line
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func TestOneRequest(t *testing.T) {
	req := []byte("GET /data/1K HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
	buf := make([]byte, 4096)
	var d net.Dialer
	ok := serveOnce(t, "HTT", "P/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "hello")
	ttfb, err := oneRequest(context.Background(), &d, ok, req, buf)
	if err != nil {
		t.Fatal(err)
	}
	if ttfb <= 0 || ttfb > 5*time.Second {
		t.Errorf("ttfb %v", ttfb)
	}
	notFound := serveOnce(t, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
	if _, err := oneRequest(context.Background(), &d, notFound, req, buf); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a 404 gave %v", err)
	}
	silent := serveOnce(t)
	if _, err := oneRequest(context.Background(), &d, silent, req, buf); err == nil {
		t.Error("a connection closed without a response was accepted")
	}
}
