package lab

import (
	"context"
	"fmt"
	"net/http"
	"testing"

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
	id, err := getExact(client, fmt.Sprintf("http://%s:%d/data/%s", VIP, port, content.FormatSize(size)), size)
	if err != nil {
		t.Fatal(err)
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
