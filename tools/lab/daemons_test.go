package lab

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/content"
)

// daemonConfig is a full lab: web servers, shims and front-end.
func daemonConfig(t *testing.T) Config {
	cfg := topologyConfig(t)
	cfg.Nginx, cfg.TestServer, cfg.Daemons = true, true, true
	for _, name := range []string{"qsplice-testserver", "qsplice-backend", "qsplice-frontend"} {
		dir, err := buildCmd(name)
		if err != nil {
			// The daemons belong to another package and may be mid-edit;
			// the lab itself is not at fault.
			t.Skipf("daemons do not build, cannot run the lab end to end: %v", err)
		}
		cfg.BinDir = dir
	}
	return cfg
}

// getThroughVIP fetches /data/SIZE from the VIP as client c1 and checks the
// body against the content of the back-end that says it answered.
func getThroughVIP(t *testing.T, client *http.Client, port int, size int64) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s:%d/data/%s", VIP, port, content.FormatSize(size))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	id, err := strconv.Atoi(resp.Header.Get("X-Backend-Id"))
	if resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET %s: %s, X-Backend-Id %q", url, resp.Status, resp.Header.Get("X-Backend-Id"))
	}
	if int64(len(body)) != size || sha256.Sum256(body) != content.SHA256(uint32(id), size) {
		t.Fatalf("GET %s: %d bytes from back-end %d do not match its content", url, len(body), id)
	}
	return id
}

func TestDaemonsEndToEnd(t *testing.T) {
	requireRoot(t)
	cfg := daemonConfig(t)
	l := upLab(t, cfg)
	client := l.HTTPClient("c1")
	defer client.CloseIdleConnections()

	st, err := l.FetchFrontendStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := len(st.aliveBackends()); got != cfg.Backends {
		t.Fatalf("front-end reports %d back-ends alive, want %d: %s", got, cfg.Backends, st.Raw)
	}
	seen := make(map[int]bool)
	for i := 0; i < 6; i++ {
		for _, port := range []int{80, 8080} {
			seen[getThroughVIP(t, client, port, 1<<20)] = true
		}
	}
	if len(seen) != cfg.Backends {
		t.Errorf("answers came from back-ends %v, want all %d", seen, cfg.Backends)
	}

	// A shim killed and restarted rejoins; its TAP (which the shim's exit
	// may delete) is recreated before the restart.
	if err := l.StopProcess("backend-b1"); err != nil {
		t.Fatal(err)
	}
	if err := l.StartProcess("backend-b1"); err != nil {
		t.Fatal(err)
	}
	if ok, missing := l.topologyComplete(); !ok {
		t.Fatalf("after the restart the lab lacks %s", missing)
	}
	client.CloseIdleConnections()
	getThroughVIP(t, client, 80, 1<<10)
}
