package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/content"
	"github.com/qsplice/qsplice/tools/lab"
)

// TestWrk200Connections runs wrk with 200 concurrent keep-alive
// connections; every request must succeed (no socket errors, no non-2xx).
func TestWrk200Connections(t *testing.T) {
	l := needLab(t)
	for _, port := range []int{80, 8080} {
		url := vipURL(port, 1<<10)
		out, err := l.Command("c1", "wrk", "-t2", "-c200", "-d4s", "--timeout", "20s", url).CombinedOutput()
		if err != nil {
			t.Fatalf("wrk %s: %v\n%s", url, err, out)
		}
		s := string(out)
		m := regexp.MustCompile(`(\d+) requests in`).FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("wrk output without a request count:\n%s", s)
		}
		if n, _ := strconv.Atoi(m[1]); n < 1000 {
			t.Errorf("%s: only %d requests in 4 s\n%s", url, n, s)
		}
		if strings.Contains(s, "Socket errors") || strings.Contains(s, "Non-2xx") {
			t.Errorf("%s: wrk saw errors:\n%s", url, s)
		}
	}
}

// TestGoClient200Connections opens 200 connections at once from a Go
// client in the client namespace (kernel TCP underneath), each fetching
// several bodies over keep-alive, and checks every byte.
func TestGoClient200Connections(t *testing.T) {
	l := needLab(t)
	const conns, perConn, size = 200, 4, 100 << 10
	url := fmt.Sprintf("http://%s:8080/data/%s", lab.VIP, content.FormatSize(size))
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := oneConnClient(l)
			defer c.CloseIdleConnections()
			for j := 0; j < perConn; j++ {
				if err := getAndCheck(c.Client, url, size); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n < 5 {
			t.Error(err)
		}
		n++
	}
	if n > 0 {
		st := frontendStatus(t, l)
		t.Logf("front-end: queue %d, flows %v, follow-ups %d unfollowable %d, backends %+v",
			st.Queue, st.Engine.States, st.Engine.FollowUps, st.Engine.FollowUpsUnfollowable, st.Backends)
		for k := 1; k <= backends; k++ {
			b := backendStatus(t, l, k)
			t.Logf("shim %d: entries %v active %v shim %v", k, b["entries"], b["active"], b["shim"])
		}
		t.Fatalf("%d of %d connections failed", n, conns)
	}
}

// keepAliveClient is an HTTP client whose transport keeps exactly one
// connection, dialled inside the client namespace.
type keepAliveClient struct {
	*http.Client
	dials *int
}

func (k keepAliveClient) CloseIdleConnections() { k.Client.CloseIdleConnections() }

func oneConnClient(l *lab.Lab) keepAliveClient {
	dials := new(int)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			*dials++
			return l.Dial(ctx, "c1", network, addr)
		},
		MaxConnsPerHost:     1,
		MaxIdleConnsPerHost: 1,
		DisableCompression:  true,
	}
	return keepAliveClient{&http.Client{Transport: tr, Timeout: 60 * time.Second}, dials}
}

// getAndCheck fetches a /data body and checks it against the back-end
// named in the response.
func getAndCheck(c *http.Client, url string, size int64) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return fmt.Errorf("%s: reading body: %w", url, err)
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	id, _ := strconv.Atoi(resp.Header.Get("X-Backend-Id"))
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	if n != size || sum != content.SHA256(uint32(id), size) {
		return fmt.Errorf("%s: back-end %d sent %d bytes with the wrong content", url, id, n)
	}
	return nil
}

// TestKeepAlive sends several requests on one connection, with curl
// (which reports how many connections it opened) and with a Go client.
func TestKeepAlive(t *testing.T) {
	l := needLab(t)
	for _, port := range []int{80, 8080} {
		urls := []string{vipURL(port, 1<<10), vipURL(port, 1<<20), vipURL(port, 0), vipURL(port, 1<<10)}
		args := []string{"curl", "-sS", "--max-time", "30", "-w", "%{num_connects} %{http_code} %{size_download}\n"}
		for _, u := range urls {
			args = append(args, "-o", "/dev/null", u)
		}
		out, err := l.Command("c1", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl keep-alive: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		want := []string{"1 200 1024", "0 200 1048576", "0 200 0", "0 200 1024"}
		if strings.Join(lines, "|") != strings.Join(want, "|") {
			t.Errorf("port %d: curl reported\n%s\nwant (connections, status, bytes)\n%s", port, strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
	}
	c := oneConnClient(l)
	defer c.CloseIdleConnections()
	for i := 0; i < 10; i++ {
		size := int64(1+i) << 12
		if err := getAndCheck(c.Client, fmt.Sprintf("http://%s:8080/data/%d", lab.VIP, size), size); err != nil {
			t.Fatal(err)
		}
	}
	if *c.dials != 1 {
		t.Errorf("Go client dialled %d connections for 10 keep-alive requests, want 1", *c.dials)
	}
}

// TestWrkNewConnectionPerRequest runs wrk with Connection: close from one
// client, 16 at a time, so that thousands of handoffs a second start and
// end: every request must succeed, and no dispatch may be refused for
// the client's handoff ports (a closed handoff's port must stop counting
// as its FINs pass, not when its timer next fires).
func TestWrkNewConnectionPerRequest(t *testing.T) {
	l := needLab(t)
	before := frontendStatus(t, l)
	url := vipURL(80, 1<<10)
	out, err := l.Command("c1", "wrk", "-t2", "-c16", "-d4s", "--timeout", "20s", "-H", "Connection: close", url).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk %s: %v\n%s", url, err, out)
	}
	s := string(out)
	if m := regexp.MustCompile(`(\d+) requests in`).FindStringSubmatch(s); m == nil {
		t.Fatalf("wrk output without a request count:\n%s", s)
	}
	if strings.Contains(s, "Socket errors") || strings.Contains(s, "Non-2xx") {
		t.Errorf("%s: wrk saw errors:\n%s", url, s)
	}
	after := frontendStatus(t, l)
	if n := after.Limits.RefusedPortsSource - before.Limits.RefusedPortsSource; n != 0 {
		t.Errorf("%d dispatches refused for the client's handoff ports", n)
	}
	t.Logf("%d handoffs, %d of them with the request in C2's SYN", after.Engine.HandoffsDone-before.Engine.HandoffsDone,
		after.Engine.RequestsInSYN-before.Engine.RequestsInSYN)
}
