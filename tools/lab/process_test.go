package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/content"
	"github.com/qsplice/qsplice/tools/netns"
)

// webConfig runs nginx and the test server on every back-end, no daemons.
func webConfig(t *testing.T) Config {
	cfg := topologyConfig(t)
	cfg.Nginx, cfg.TestServer = true, true
	cfg.BinDir = testServerBin(t)
	return cfg
}

// fetch GETs a URL with curl inside a host's namespace and checks that the
// answer comes from back-end k and carries content's bytes for size.
func fetch(t *testing.T, l *Lab, host string, k, port int, size int64) {
	t.Helper()
	url := fmt.Sprintf("http://%s:%d/data/%s", l.BackendAddr(k), port, content.FormatSize(size))
	out, err := l.Command(host, "curl", "-sS", "--fail", "--max-time", "10", "-i", url).Output()
	if err != nil {
		t.Errorf("curl %s in %s: %v", url, host, err)
		return
	}
	head, body, ok := bytes.Cut(out, []byte("\r\n\r\n"))
	if !ok {
		t.Errorf("%s: no header end in %q", url, out)
		return
	}
	wantID := fmt.Sprintf("x-backend-id: %d\r\n", k)
	if !strings.Contains(strings.ToLower(string(head))+"\r\n", wantID) {
		t.Errorf("%s: header %q missing in\n%s", url, wantID, head)
	}
	if int64(len(body)) != size || sha256.Sum256(body) != content.SHA256(uint32(k), size) {
		t.Errorf("%s: body of %d bytes does not match content(%d, %d)", url, len(body), k, size)
	}
}

func acceptsTCP(l *Lab, host, addr string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := l.Dial(ctx, host, "tcp4", addr)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

func TestWebServersWithoutDaemons(t *testing.T) {
	requireRoot(t)
	cfg := webConfig(t)
	l := upLab(t, cfg)

	for _, p := range l.Processes() {
		if !p.Alive || p.PID == 0 {
			t.Fatalf("%s not alive after Up: %+v", p.Name, p)
		}
	}
	for k := 1; k <= cfg.Backends; k++ {
		for _, port := range []int{80, 8080} {
			for _, size := range cfg.Files {
				fetch(t, l, backendHost(k), k, port, size)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	again, err := Up(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reused() {
		t.Fatal("second Up rebuilt a running lab")
	}

	// A test server killed and restarted serves again; nginx is untouched.
	b1test := net.JoinHostPort(l.BackendAddr(1).String(), "8080")
	if err := l.StopProcess("testserver-b1"); err != nil {
		t.Fatal(err)
	}
	if acceptsTCP(l, "b1", b1test) {
		t.Fatal("test server still accepts after StopProcess")
	}
	if alive := processAlive(t, l, "testserver-b1"); alive {
		t.Fatal("Processes reports a stopped process alive")
	}
	if !processAlive(t, l, "nginx-b1") {
		t.Fatal("stopping the test server stopped nginx")
	}
	if err := l.StartProcess("testserver-b1"); err != nil {
		t.Fatal(err)
	}
	if err := l.StartProcess("testserver-b1"); err == nil {
		t.Fatal("StartProcess of a running process succeeded")
	}
	fetch(t, l, "b1", 1, 8080, 1<<10)

	// A lab opened by name (as the CLI does) sees and stops processes it
	// did not start; stopping nginx ends its workers too.
	opened, err := Open(cfg.Name, cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if !processAlive(t, opened, "nginx-b2") {
		t.Fatal("Open'ed lab does not see nginx-b2 alive")
	}
	testPid := pidOf(t, opened, "testserver-b2")
	if err := opened.StopProcess("nginx-b2"); err != nil {
		t.Fatal(err)
	}
	if processAlive(t, opened, "nginx-b2") {
		t.Fatal("nginx-b2 alive after StopProcess")
	}
	pids, err := netns.Pids(l.NS("b2"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pids, []int{testPid}) {
		t.Fatalf("processes left in b2 = %v, want just the test server %d (nginx workers must go with the master)", pids, testPid)
	}
	if err := opened.StartProcess("nginx-b2"); err != nil {
		t.Fatal(err)
	}
	fetch(t, l, "b2", 2, 80, 1<<20)
}

func processAlive(t *testing.T, l *Lab, name string) bool {
	t.Helper()
	for _, p := range l.Processes() {
		if p.Name == name {
			return p.Alive
		}
	}
	t.Fatalf("no process %s", name)
	return false
}

func pidOf(t *testing.T, l *Lab, name string) int {
	t.Helper()
	for _, p := range l.Processes() {
		if p.Name == name {
			return p.PID
		}
	}
	t.Fatalf("no process %s", name)
	return 0
}

// failingServer writes a qsplice-testserver into a fresh directory that
// behaves as script says, to exercise Up's failure paths.
func failingServer(t *testing.T, script string) string {
	dir := t.TempDir()
	err := os.WriteFile(filepath.Join(dir, "qsplice-testserver"), []byte("#!/bin/sh\n"+script+"\n"), 0o755)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestUpDetectsEarlyDeath(t *testing.T) {
	requireRoot(t)
	cfg := topologyConfig(t)
	cfg.TestServer = true
	cfg.BinDir = failingServer(t, `echo "boom: cannot bind" >&2; exit 3`)
	cfg.ReadyTimeout = 30 * time.Second
	t.Cleanup(func() { downAndCheck(t, cfg.Name, cfg.StateDir) })
	start := time.Now()
	_, err := Up(context.Background(), cfg)
	if err == nil {
		t.Fatal("Up succeeded with a test server that exits")
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("death noticed after %v, not before the %v timeout", elapsed, cfg.ReadyTimeout)
	}
	for _, want := range []string{"testserver-b1", "exit status 3", "boom: cannot bind"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	assertGone(t, cfg.Name, cfg.StateDir)
}

func TestUpTimesOutAndCleansUp(t *testing.T) {
	requireRoot(t)
	cfg := topologyConfig(t)
	cfg.TestServer = true
	cfg.Backends = 1
	cfg.BinDir = failingServer(t, `echo "listening soon"; exec sleep 300`)
	cfg.ReadyTimeout = time.Second
	t.Cleanup(func() { downAndCheck(t, cfg.Name, cfg.StateDir) })
	_, err := Up(context.Background(), cfg)
	if err == nil {
		t.Fatal("Up succeeded with a test server that never listens")
	}
	for _, want := range []string{"not ready after 1s", "listening soon"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// The sleeping "server" must be gone with its namespace.
	assertGone(t, cfg.Name, cfg.StateDir)
}

func TestUpNeedsDaemonBinaries(t *testing.T) {
	cfg := topologyConfig(t)
	cfg.Daemons = true
	cfg.BinDir = t.TempDir()
	_, err := Up(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "qsplice-frontend") || !strings.Contains(err.Error(), "qsplice-backend") {
		t.Fatalf("Up error = %v, want one naming the missing daemons", err)
	}
	assertGone(t, cfg.Name, cfg.StateDir)
}
