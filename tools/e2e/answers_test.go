package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/lab"
)

// rawExchange connects to the VIP from the client namespace, writes req
// (if any), and reads the front-end's answer until it closes.
func rawExchange(t *testing.T, l *lab.Lab, req string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := l.Dial(ctx, "c1", "tcp", net.JoinHostPort(lab.VIP, "80"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	if req != "" {
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the front-end's answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	// The front-end closes after answering: the next read sees EOF.
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the answer the connection is not closed: %v", err)
	}
	return resp
}

// TestFrontEndAnswers checks the answers the front-end gives itself:
// 400 for a malformed head, 431 for one over the limit, 408 for a client
// that stalls (the lab runs the front-end with -head-timeout 2s).
func TestFrontEndAnswers(t *testing.T) {
	l := needLab(t)
	before := frontendStatus(t, l)
	cases := []struct {
		name, req string
		status    int
	}{
		{"malformed", "GET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n", 400},
		{"binary", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400},
		{"http2-preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400},
		{"too-large", "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("x", 9000) + "\r\n\r\n", 431},
		{"stalled", "GET /data/1K HTTP/1.1\r\nHost: a\r\n", 408},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := rawExchange(t, l, c.req)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			if !resp.Close { // net/http moves "Connection: close" here
				t.Errorf("answer without Connection: close")
			}
		})
	}
	after := frontendStatus(t, l)
	for status, want := range map[string]uint64{"400": 3, "431": 1, "408": 1} {
		if got := after.Engine.Answered[status] - before.Engine.Answered[status]; got != want {
			t.Errorf("front-end counted %d answers %s, want %d", got, status, want)
		}
	}
	if after.Engine.HandoffsStarted != before.Engine.HandoffsStarted {
		t.Errorf("bad requests reached a back-end")
	}
}

// TestConnectionsDrain ends connections both ways -- FIN from curl, RST
// from a client that aborts mid-transfer -- and then expects the flow
// tables of the front-end and of every shim to empty after the linger
// time (1 s in this lab), but for the handoff connections the front-end
// keeps for the next clients (pooled C2s): one shim entry each.
func TestConnectionsDrain(t *testing.T) {
	l := needLab(t)
	for i := 0; i < 3; i++ {
		checkBody(t, curlGet(t, l, "c1", vipURL(8080, 1<<20)), 1<<20, "fin path")
	}
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := l.Dial(ctx, "c1", "tcp", net.JoinHostPort(lab.VIP, "8080"))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /data/64M HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, err := io.ReadFull(c, make([]byte, 256<<10)); err != nil {
			t.Fatal(err)
		}
		c.(*net.TCPConn).SetLinger(0) // close with RST while the server is sending
		c.Close()
	}
	waitDrained(t, l, 30*time.Second)
}

// waitDrained polls until the front-end holds no flow and the shims
// only the entries of its pooled C2s (one each), and fails the test with
// what is still held after d.
func waitDrained(t *testing.T, l *lab.Lab, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		fe := frontendStatus(t, l)
		busy := fmt.Sprintf("front-end flows %d %v, %d pooled C2s", fe.Engine.Flows, fe.Engine.States, fe.Engine.PooledC2s)
		entries := 0
		for k := 1; k <= backends; k++ {
			n := int(backendStatus(t, l, k)["entries"].(float64))
			entries += n
			busy += fmt.Sprintf(", shim %d entries %d", k, n)
		}
		if fe.Engine.Flows == 0 && uint64(entries) == fe.Engine.PooledC2s {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("flow tables did not drain: %s", busy)
		}
		time.Sleep(200 * time.Millisecond) // polling an external process's state
	}
}
