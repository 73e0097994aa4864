package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/tools/lab"
)

// theLab is shared by every test in the package; nil when not root.
var theLab *lab.Lab

const backends = 3

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Println("e2e: skipping lab tests: they need root for network namespaces, AF_PACKET and TAP")
		return m.Run()
	}
	binDir, cleanup, err := binaries()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer cleanup()
	pruneAbandoned()
	var suffix [3]byte
	rand.Read(suffix[:])
	cfg := lab.DefaultConfig("e" + hex.EncodeToString(suffix[:]))
	cfg.Backends = backends
	cfg.BinDir = binDir
	cfg.StateDir, _ = os.MkdirTemp("", "qsplice-e2e-state-")
	os.Remove(cfg.StateDir) // the lab creates it and refuses foreign files
	if err := setOffloads(&cfg); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	fmt.Printf("e2e: lab links with offloads %s (QSPLICE_LAB_OFFLOADS)\n", onOff(cfg.Offloads))
	cfg.FrontendArgs = []string{"-linger", "1s", "-head-timeout", "2s"}
	cfg.BackendArgs = []string{"-linger", "1s"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: lab up:", err)
		return 1
	}
	theLab = l
	defer func() {
		if err := l.Down(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: lab down:", err)
		}
	}()
	return m.Run()
}

// pruneAbandoned removes the shared labs of earlier runs that were
// killed before their teardown (lab.Abandoned): named as run names them,
// nothing running in them, made more than ten minutes ago.
func pruneAbandoned() {
	ours := regexp.MustCompile(`^e[0-9a-f]{6}$`)
	removed, err := lab.Prune(ours.MatchString, 10*time.Minute, time.Now())
	for _, name := range removed {
		fmt.Printf("e2e: removed lab %s, abandoned by a run killed before its teardown\n", name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: removing abandoned labs:", err)
	}
}

// binaries returns a directory with the qsplice binaries: QSPLICE_BIN
// when set (make test builds them first), otherwise freshly built.
func binaries() (string, func(), error) {
	if dir := os.Getenv("QSPLICE_BIN"); dir != "" {
		return dir, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "qsplice-e2e-bin-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "github.com/qsplice/qsplice/cmd/...")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building binaries: %v\n%s", err, out)
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// setOffloads applies QSPLICE_LAB_OFFLOADS (on, the default, or off) to a
// lab configuration: make test runs the suite once each way, so every
// test holds with TSO/GSO/GRO and checksum offload on the lab's links
// (super-frames, partial checksums, virtio-net headers in the daemons)
// and with them off (MTU-sized frames only).
func setOffloads(cfg *lab.Config) error {
	switch v := os.Getenv("QSPLICE_LAB_OFFLOADS"); v {
	case "", "on":
		cfg.Offloads = true
	case "off":
		cfg.Offloads = false
	default:
		return fmt.Errorf("QSPLICE_LAB_OFFLOADS=%q: want on or off", v)
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// needLab returns the shared lab or skips with the reason.
func needLab(t testing.TB) *lab.Lab {
	t.Helper()
	if theLab == nil {
		t.Skip("needs root: the lab uses network namespaces, AF_PACKET and TAP devices")
	}
	return theLab
}

// frontendStatus fetches the front-end's /status from inside the client
// namespace.
func frontendStatus(t testing.TB, l *lab.Lab) frontend.Status {
	t.Helper()
	var st frontend.Status
	adminJSON(t, l, "front-end status", lab.AdminURL+"/status", &st)
	return st
}

// backendStatus fetches shim k's /status.
func backendStatus(t testing.TB, l *lab.Lab, k int) map[string]any {
	t.Helper()
	var st map[string]any
	adminJSON(t, l, fmt.Sprintf("back-end %d status", k), fmt.Sprintf("http://%s:%d/status", l.BackendAddr(k), lab.BackendAdminPort), &st)
	return st
}

// adminJSON decodes the JSON a daemon's admin server answers at url
// into v, from inside the client namespace; what names it in failures.
func adminJSON(t testing.TB, l *lab.Lab, what, url string, v any) {
	t.Helper()
	c := l.HTTPClient("c1")
	c.Timeout = 5 * time.Second
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", what, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
