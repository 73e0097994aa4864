package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/netns"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds network namespaces, veths, a bridge and TAPs")
	}
}

// randomName returns a lab name no other test or run uses.
func randomName(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "t" + hex.EncodeToString(b)[:7]
}

// topologyConfig is a small lab with no processes and a private state dir.
func topologyConfig(t *testing.T) Config {
	cfg := DefaultConfig(randomName(t))
	cfg.StateDir = filepath.Join(sharedTempDir(t), "state")
	cfg.Nginx, cfg.TestServer, cfg.Daemons = false, false, false
	cfg.Files = []int64{0, 1 << 10, 1 << 20}
	cfg.ReadyTimeout = 10 * time.Second
	return cfg
}

// sharedTempDir is a temporary directory the lab's unprivileged daemons
// can search (t.TempDir's are root's alone), removed when the test ends.
func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir, err := SharedTempDir("qsplice-lab-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// upLab brings a lab up and removes it when the test ends, even when Up
// itself fails halfway; the cleanup also checks that nothing is left.
func upLab(t *testing.T, cfg Config) *Lab {
	t.Helper()
	t.Cleanup(func() { downAndCheck(t, cfg.Name, cfg.StateDir) })
	l, err := Up(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	return l
}

// downAndCheck runs Down and fails the test if anything of the lab remains.
func downAndCheck(t *testing.T, name, stateDir string) {
	t.Helper()
	if err := Down(name, stateDir); err != nil {
		t.Errorf("Down: %v", err)
	}
	assertGone(t, name, stateDir)
}

func assertGone(t *testing.T, name, stateDir string) {
	t.Helper()
	left, err := netns.List(nsPrefix(name))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
	if stateDir == "" {
		stateDir = defaultStateDir(name)
	}
	if _, err := os.Stat(stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir %s left behind (stat: %v)", stateDir, err)
	}
}

// ping sends one ICMP echo from inside host's namespace and waits for the
// reply (the image has no ping binary).
func ping(l *Lab, host, dst string) error { return pingWithin(l, host, dst, 3*time.Second) }

func pingWithin(l *Lab, host, dst string, wait time.Duration) error {
	var conn *icmp.PacketConn
	err := netns.Do(l.NS(host), func() error {
		var err error
		conn, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	})
	if err != nil {
		return err
	}
	defer conn.Close()
	id := os.Getpid() & 0xffff
	msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: 1, Data: []byte("qsplice-lab")}}
	wire, err := msg.Marshal(nil)
	if err != nil {
		return err
	}
	dstAddr := &net.IPAddr{IP: net.ParseIP(dst)}
	if _, err := conn.WriteTo(wire, dstAddr); err != nil {
		return err
	}
	if err := conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return err
	}
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return err
		}
		reply, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || reply.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		if echo, ok := reply.Body.(*icmp.Echo); ok && echo.ID == id && from.String() == dst {
			return nil
		}
	}
}

// Programs are built once per test binary into binDir.
var (
	binDir     string
	binDirErr  error
	binDirOnce sync.Once
	builds     sync.Map // command name -> *buildResult
)

type buildResult struct {
	once sync.Once
	err  error
}

// buildCmd builds github.com/qsplice/qsplice/cmd/NAME into the shared
// binary directory and returns the directory.
func buildCmd(name string) (string, error) {
	binDirOnce.Do(func() { binDir, binDirErr = SharedTempDir("qsplice-lab-bin-") })
	if binDirErr != nil {
		return "", binDirErr
	}
	v, _ := builds.LoadOrStore(name, &buildResult{})
	r := v.(*buildResult)
	r.once.Do(func() {
		out, err := exec.Command("go", "build", "-o", binDir, "github.com/qsplice/qsplice/cmd/"+name).CombinedOutput()
		if err != nil {
			r.err = fmt.Errorf("go build cmd/%s: %v\n%s", name, err, out)
		}
	})
	return binDir, r.err
}

// testServerBin returns a directory holding qsplice-testserver.
func testServerBin(t *testing.T) string {
	t.Helper()
	dir, err := buildCmd("qsplice-testserver")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
