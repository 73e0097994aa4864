package e2e

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/qsplice/qsplice/tools/lab"
)

// TestLiveReplay captures, on the client's switch port, four concurrent
// connections and one keep-alive connection with three requests, then
// plays that capture against the VIP with qsplice-replay -live from the
// client's namespace: every response matches the captured one, body
// hashes included (one back-end, so the same content). A capture that
// also talks to the front-end's admin port cannot be mapped by -target
// alone, and the refusal names the server.
func TestLiveReplay(t *testing.T) {
	l := extraLab(t, "r", func(cfg *lab.Config) { cfg.Backends = 1 })
	dir := t.TempDir()
	capture := func(file string, traffic func()) {
		t.Helper()
		stop, err := l.StartCapture("c1", file)
		if err != nil {
			t.Fatal(err)
		}
		traffic()
		if _, err := stop(); err != nil {
			t.Fatal(err)
		}
	}
	url := func(size string) string { return fmt.Sprintf("http://%s:8080/data/%s", lab.VIP, size) }
	good := filepath.Join(dir, "good.pcap")
	capture(good, func() {
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := oneConnClient(l)
				defer c.CloseIdleConnections()
				if err := getAndCheck(c.Client, url([]string{"0", "1K", "64K", "1M"}[i]), []int64{0, 1 << 10, 64 << 10, 1 << 20}[i]); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		c := oneConnClient(l)
		defer c.CloseIdleConnections()
		for _, size := range []int64{1 << 10, 0, 64 << 10} {
			if err := getAndCheck(c.Client, url(map[int64]string{0: "0", 1 << 10: "1K", 64 << 10: "64K"}[size]), size); err != nil {
				t.Error(err)
			}
		}
		if *c.dials != 1 {
			t.Errorf("the keep-alive client dialled %d times", *c.dials)
		}
	})
	bin := filepath.Join(l.Config().BinDir, "qsplice-replay")
	out, err := l.Command("c1", bin, "-live", "-in", good, "-target", lab.VIP+":8080", "-check-body", "-speed", "1").CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.Contains(string(out), "responses: 7 correct, 0 wrong status, 0 wrong length, 0 wrong body, 0 failed") ||
		!strings.Contains(string(out), "5 connections, 7 requests") {
		t.Fatalf("live replay of the good capture: %v", err)
	}

	mixed := filepath.Join(dir, "mixed.pcap")
	capture(mixed, func() {
		c := l.HTTPClient("c1")
		for _, u := range []string{url("1K"), lab.AdminURL + "/status"} {
			resp, err := c.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		c.CloseIdleConnections()
	})
	out, err = l.Command("c1", bin, "-live", "-in", mixed, "-target", lab.VIP+":8080").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "198.18.0.2:7404") || !strings.Contains(string(out), "-map") {
		t.Fatalf("a capture with two servers and one -target: %v\n%s", err, out)
	}
}
