package lab

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestBackendsAcceptFastOpen brings up a lab with one back-end, with
// Config.FastOpen and without, and checks what a shim that puts requests
// in SYNs relies on: b1's kernel has net.ipv4.tcp_fastopen=3 and nginx
// (port 80) and the test server (8080) take a request in the SYN. Client
// c1 (a fresh namespace: tcp_fastopen 1, client only) fetches a file
// twice with curl --tcp-fastopen: the first SYN asks for a cookie, the
// second carries it and the request, and b1's TcpExtTCPFastOpenPassive
// counts the connection. Without FastOpen, b1's sysctl is the kernel's
// default (c1's) and the counter stays. c1 reaches b1's address through
// b1's shim, which passes all traffic that is not spliced.
func TestBackendsAcceptFastOpen(t *testing.T) {
	requireRoot(t)
	for _, tool := range []string{"curl", "nstat", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%v (.ci/run installs it)", err)
		}
	}
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			testBackendsAcceptFastOpen(t, on)
		})
	}
}

func testBackendsAcceptFastOpen(t *testing.T, on bool) {
	cfg := topologyConfig(t)
	cfg.Backends = 1
	cfg.Nginx, cfg.TestServer, cfg.Daemons = true, true, true
	cfg.Files = []int64{1 << 10}
	cfg.FastOpen = on
	for _, name := range []string{"qsplice-testserver", "qsplice-backend", "qsplice-frontend"} {
		dir, err := buildCmd(name)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI must run the lab with its daemons: %v", err)
			}
			// The daemons belong to another package and may be mid-edit.
			t.Skipf("daemons do not build, cannot run the lab with its shims: %v", err)
		}
		cfg.BinDir = dir
	}
	l := upLab(t, cfg)

	clientDefault := sysctlOf(t, l, "c1", fastOpenSysctl)
	if n, err := strconv.Atoi(clientDefault); err != nil || n&1 == 0 {
		t.Fatalf("c1: %s = %q, want the client bit (1) set, the default of a new namespace", fastOpenSysctl, clientDefault)
	}
	want := clientDefault
	if on {
		want = fastOpenServer
	}
	if got := sysctlOf(t, l, "b1", fastOpenSysctl); got != want {
		t.Fatalf("b1: %s = %s, want %s (FastOpen %v)", fastOpenSysctl, got, want, on)
	}

	// The first connection asks for a cookie (to b1's address: nginx
	// and the test server share it); then one to each server carries it
	// with the request in its SYN, at once. b1's shim knows the
	// front-end's handoff address (-handoff), so c1's connections are not
	// taken for handoffs: a request is not held for a Splice that never
	// comes (which took 6.7 s: the handshake record's 5 s and the
	// client's retransmission).
	curl := func(port int) error {
		url := fmt.Sprintf("http://%s:%d/data/1K", l.BackendAddr(1), port)
		out, err := l.Command("c1", "curl", "-sS", "--fail", "--max-time", "4", "--tcp-fastopen",
			"-o", "/dev/null", "-w", "%{http_code} %{size_download}", url).CombinedOutput()
		if err != nil || string(out) != "200 1024" {
			return fmt.Errorf("curl --tcp-fastopen %s in c1: %v: %q", url, err, out)
		}
		return nil
	}
	if err := curl(80); err != nil {
		t.Fatal(err)
	}
	before := fastOpenPassive(t, l, "b1")
	errs := make(chan error, 2)
	for _, port := range []int{80, 8080} {
		go func() { errs <- curl(port) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	after := fastOpenPassive(t, l, "b1")
	t.Logf("TcpExtTCPFastOpenPassive in b1: %d -> %d", before, after)
	switch {
	case on && after-before < 2:
		counters, _ := runIn(l, "b1", "sh", "-c", "nstat -asz | grep -i fastopen")
		t.Errorf("TcpExtTCPFastOpenPassive in b1 %d -> %d, want +2: one connection to each of nginx and the test server with a cookie, its request in the SYN\n%s",
			before, after, counters)
	case !on && after != before:
		t.Errorf("TcpExtTCPFastOpenPassive in b1 %d -> %d with FastOpen off", before, after)
	}
}

// sysctlOf reads a sysctl in a host's namespace.
func sysctlOf(t *testing.T, l *Lab, host, key string) string {
	t.Helper()
	out, err := runIn(l, host, "sysctl", "-n", key)
	if err != nil {
		t.Fatalf("sysctl -n %s in %s: %v: %s", key, host, err, out)
	}
	return strings.TrimSpace(out)
}

// fastOpenPassive is a host's count of connections whose SYN's data its
// kernel accepted with a valid cookie.
func fastOpenPassive(t *testing.T, l *Lab, host string) int64 {
	t.Helper()
	return nstatCounter(t, l, host, "TcpExtTCPFastOpenPassive")
}

// nstatCounter reads one of a host's kernel counters.
func nstatCounter(t *testing.T, l *Lab, host, counter string) int64 {
	t.Helper()
	// -s: nstat's history file (shared by every namespace) stays as it is.
	out, err := runIn(l, host, "nstat", "-asz", counter)
	if err != nil {
		t.Fatalf("nstat in %s: %v: %s", host, err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == counter {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("nstat in %s: %q", host, line)
			}
			return n
		}
	}
	t.Fatalf("nstat in %s has no %s:\n%s", host, counter, out)
	return 0
}
