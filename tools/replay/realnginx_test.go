package replay

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/netns"
)

// The same real captures with nginx as the server: its option layout,
// window and keep-alive behaviour are those of the web servers qsplice
// fronts in the lab, where the Go server of realcapture_test.go is only
// a stand-in. The client side is curl or Go's net package.

// nginxReplayConf makes nginx answer every path with "hello <path>" and
// keep everything (pid, logs, temp paths) in dir.
const nginxReplayConf = `daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log notice;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    keepalive_timeout 75s;
    server {
        listen %[2]s:80;
        default_type text/plain;
        location / { return 200 "hello $uri\n"; }
    }
}
`

// serveNginx runs nginx at the VIP inside nsS until the test ends and
// returns once it accepts connections.
func serveNginx(t *testing.T, nsS string) {
	t.Helper()
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Fatal("nginx is not installed (.ci/run installs nginx-light): ", err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxReplayConf, dir, DefaultVIP), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := netns.Command(nsS, "nginx", "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", conf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	// Ready when a connection from inside the namespace is accepted; an
	// nginx that exits (bad config, address in use) ends the wait at once.
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited before it served: %v\n%s%s", err, stderr.Bytes(), log)
		default:
		}
		err := netns.Do(nsS, func() error {
			c, err := net.DialTimeout("tcp4", DefaultVIP+":80", time.Second)
			if err == nil {
				c.Close()
			}
			return err
		})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx never accepted a connection: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling a listener that is not up yet
	}
}

// TestReplayRealNginxCaptures replays curl and Go clients talking to
// nginx: a single GET, three keep-alive GETs on one connection, and four
// concurrent connections. Every request must reach a back-end, the two
// replays of each capture must be byte-identical and tshark must read
// the output cleanly (replayReal).
func TestReplayRealNginxCaptures(t *testing.T) {
	t.Run("single GET with curl", func(t *testing.T) {
		in := realCaptureFrom(t, serveNginx, 1, func(nsC string) {
			out, err := netns.Command(nsC, "curl", "-sS", "--max-time", "10", "http://"+DefaultVIP+"/single").Output()
			if err != nil || string(out) != "hello /single\n" {
				t.Fatalf("curl against nginx: %q, %v", out, err)
			}
		})
		out, s := replayReal(t, in)
		if s.Requests != 1 || s.HandedOver != 1 || s.HandoffsDone != 1 || s.ClientUnmapped != 0 || s.Drops["bad-cookie"] != 0 {
			t.Errorf("want 1 request spliced, nothing unmapped; got\n%s", summaryText(s))
		}
		if got := string(c2Payload(t, out)); strings.Count(got, "GET /single HTTP/1.1\r\n") != 1 {
			t.Errorf("request on C2 = %q", got)
		}
	})
	t.Run("three keep-alive GETs with curl", func(t *testing.T) {
		in := realCaptureFrom(t, serveNginx, 1, func(nsC string) {
			var args []string
			for _, p := range []string{"one", "two", "three"} {
				args = append(args, "http://"+DefaultVIP+"/"+p)
			}
			out, err := netns.Command(nsC, append([]string{"curl", "-sS", "--max-time", "10"}, args...)...).Output()
			if err != nil || string(out) != "hello /one\nhello /two\nhello /three\n" {
				t.Fatalf("curl against nginx: %q, %v", out, err)
			}
		})
		out, s := replayReal(t, in)
		if s.Requests != 3 || s.FollowUps != 2 || s.HandedOver != 3 || s.HandoffsDone != 1 || s.ClientUnmapped != 0 {
			t.Errorf("want 3 requests handed over on one handoff; got\n%s", summaryText(s))
		}
		got := string(c2Payload(t, out))
		for _, p := range []string{"one", "two", "three"} {
			if strings.Count(got, "GET /"+p+" HTTP/1.1\r\n") != 1 {
				t.Errorf("GET /%s not on C2 exactly once:\n%s", p, got)
			}
		}
	})
	t.Run("four concurrent connections", func(t *testing.T) {
		in := realCaptureFrom(t, serveNginx, 4, func(nsC string) { fourConcurrentGETs(t, nsC, "n") })
		out, s := replayReal(t, in)
		if s.Requests != 4 || s.HandedOver != 4 || s.HandoffsDone != 4 || s.ClientUnmapped != 0 {
			t.Errorf("want 4 requests spliced; got\n%s", summaryText(s))
		}
		got := string(c2Payload(t, out))
		for i := range 4 {
			if strings.Count(got, fmt.Sprintf("GET /n%d ", i)) != 1 {
				t.Errorf("GET /n%d not on C2 exactly once", i)
			}
		}
	})
}
