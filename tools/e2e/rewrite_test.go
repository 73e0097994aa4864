package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/content"
	"github.com/qsplice/qsplice/tools/lab"
	"github.com/qsplice/qsplice/tools/testserver"
)

// TestDegradedTreesAreServedByteExactOverKeepAlive (issue 10, item 6): a
// feedback listener with M = 3 content trees whose content adaptor is
// driven below M serves requests from a cheaper tree by rewriting their
// path. With a kernel client in each of issue 2's variants, one keep-alive
// connection carries three requests: the first at full quality (G = M),
// then, once the adaptor has lowered G, two follow-ups whose paths are
// rewritten (the request offset changing twice mid-connection), and a
// second connection's first request is rewritten in its Splice. Every
// body is byte for byte the tree file the rewritten path names, and a
// capture on the front-end's link sees no response payload.
//
// The adaptor is steered, not mocked: with G stepped once a period (the
// published law, g_step: period; by default G moves with each dispatch,
// which after a few periods would charge each of these requests a = 2
// and send G to 0), a period of 1 s and a = 2, one completed request in a
// period makes U = 2 and G = 3 + (0.85 - 2) = 1.85, so every request of
// the next period is served from tree 1 or 2; with no completions G
// climbs back by 0.85 a period.
func TestDegradedTreesAreServedByteExactOverKeepAlive(t *testing.T) {
	l := policyLab(t, "feedback", 1, 8, 0, nil,
		"feedback:",
		"  period: 1s",
		`  content: {trees: 3, a: 2, b: 0, gain: 1, g_step: period, tree_path: "/tree{tree}{path}"}`)
	pcap := filepath.Join(t.TempDir(), "fe.pcap")
	stop, err := l.StartCapture("fe", pcap)
	if err != nil {
		t.Fatal(err)
	}
	variants := []struct{ name, key, value string }{
		{"default", "", ""},
		{"timestamps-off", "net.ipv4.tcp_timestamps", "0"},
		{"sack-off", "net.ipv4.tcp_sack", "0"},
		{"window-scaling-off", "net.ipv4.tcp_window_scaling", "0"},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			if v.key != "" {
				old, err := l.Command("c1", "sysctl", "-n", v.key).Output()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Sysctl("c1", v.key, string(trimNL(old))) })
				if err := l.Sysctl("c1", v.key, v.value); err != nil {
					t.Fatal(err)
				}
			}
			degradedKeepAlive(t, l)
		})
	}
	frames, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	toClient, fromClient := replyPayloadOnLink(t, pcap, l)
	if fromClient == 0 {
		t.Fatalf("capture of %d frames saw no client traffic", frames)
	}
	if toClient != 0 {
		t.Errorf("capture on the front-end link saw %d response payload bytes towards the client, want 0", toClient)
	}
}

// feedbackG is the content adaptor's G in the front-end's status.
func feedbackG(t *testing.T, l *lab.Lab) (g float64, rewritten uint64) {
	t.Helper()
	st := frontendStatus(t, l)
	if st.Feedback == nil {
		t.Fatal("no feedback section in /status")
	}
	return st.Feedback.G, st.Feedback.Rewritten
}

// waitG polls the status until ok(G) holds, and returns G. Polling is
// how a test learns where the adaptor's once-a-period step has taken G.
func waitG(t *testing.T, l *lab.Lab, what string, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		g, _ := feedbackG(t, l)
		if ok(g) {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("G is %v after 20 s, waiting for %s", g, what)
		}
		time.Sleep(20 * time.Millisecond) // the status is another process's
	}
}

// keepAliveConn is one kernel TCP connection from c1 to the VIP.
type keepAliveConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialVIP(t *testing.T, l *lab.Lab) *keepAliveConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := l.Dial(ctx, "c1", "tcp", net.JoinHostPort(lab.VIP, "8080"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &keepAliveConn{t: t, c: c, r: bufio.NewReader(c)}
}

// get sends GET path on the connection and returns the response's body
// and back-end.
func (k *keepAliveConn) get(path string) (body []byte, backend uint32) {
	k.t.Helper()
	if _, err := fmt.Fprintf(k.c, "GET %s HTTP/1.1\r\nHost: shop.example\r\n\r\n", path); err != nil {
		k.t.Fatalf("%s: %v", path, err)
	}
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		k.t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		k.t.Fatalf("%s body: %v", path, err)
	}
	if resp.StatusCode != 200 || resp.Close {
		k.t.Fatalf("%s: status %d, close %v: %q", path, resp.StatusCode, resp.Close, body)
	}
	id, _ := strconv.Atoi(resp.Header.Get("X-Backend-Id"))
	return body, uint32(id)
}

// wantTree checks body is size bytes of tree k (0: /data's) of backend,
// for some k in trees, and returns k.
func wantTree(t *testing.T, what string, body []byte, backend uint32, size int64, trees ...int) int {
	t.Helper()
	sum := sha256.Sum256(body)
	for _, k := range trees {
		id := backend
		if k > 0 {
			id = testserver.TreeBodyID(backend, k)
		}
		if int64(len(body)) == size && sum == content.SHA256(id, size) {
			return k
		}
	}
	t.Fatalf("%s: %d bytes from back-end %d, not the body of any of trees %v", what, len(body), backend, trees)
	return -1
}

func degradedKeepAlive(t *testing.T, l *lab.Lab) {
	waitG(t, l, "full quality (3)", func(g float64) bool { return g == 3 })
	_, rewrittenBefore := feedbackG(t, l)
	engineBefore := frontendStatus(t, l).Engine
	a := dialVIP(t, l)
	body, be := a.get("/data/1K")
	wantTree(t, "first request at G = 3", body, be, 1<<10, 0)
	// Its completion makes U = 2 in its period: G falls to 1.85 there.
	g := waitG(t, l, "G in [1, 2)", func(g float64) bool { return g < 3 })
	if g < 1 || g >= 2 {
		t.Fatalf("G fell to %v, want 1.85: another request completed meanwhile?", g)
	}
	body, be = a.get("/data/2K")
	k2 := wantTree(t, "second request (a rewritten follow-up)", body, be, 2<<10, 1, 2)
	body, be = a.get("/data/1K")
	k3 := wantTree(t, "third request (a rewritten follow-up)", body, be, 1<<10, 1, 2)
	// A new connection: its first request is rewritten in its Splice.
	b := dialVIP(t, l)
	body, be = b.get("/data/3K")
	k4 := wantTree(t, "a first request rewritten", body, be, 3<<10, 1, 2)
	if k2 != k3 || k3 != k4 {
		t.Errorf("trees %d, %d, %d within one period for one client", k2, k3, k4)
	}
	if _, rewritten := feedbackG(t, l); rewritten-rewrittenBefore != 3 {
		t.Errorf("the controller rewrote %d requests, want 3", rewritten-rewrittenBefore)
	}
	after := frontendStatus(t, l).Engine
	if n := after.Rewrites - engineBefore.Rewrites; n != 3 {
		t.Errorf("the engine sent %d requests rewritten, want 3", n)
	}
	if n := after.ReplyPayloadBytes - engineBefore.ReplyPayloadBytes; n != 0 {
		t.Errorf("the front-end saw %d reply payload bytes, want 0", n)
	}
}
