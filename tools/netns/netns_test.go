package netns

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
}

// uniqueName returns a namespace name that no other test run uses.
func uniqueName(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "qs-nstest-" + hex.EncodeToString(b)
}

// newNS creates a namespace removed on cleanup, even if the test fails.
func newNS(t *testing.T) string {
	t.Helper()
	name := uniqueName(t)
	if err := Add(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Delete(name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return name
}

// threadNetNS identifies the namespace of the calling thread.
func threadNetNS(t *testing.T) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestAddListExistsDelete(t *testing.T) {
	requireRoot(t)
	name := newNS(t)
	if !Exists(name) {
		t.Fatalf("Exists(%q) = false after Add", name)
	}
	got, err := List(name[:len(name)-2])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, name) {
		t.Fatalf("List = %v, want it to contain %q", got, name)
	}
	if err := Add(name); err == nil {
		t.Fatal("second Add of the same name succeeded")
	}
	if err := Delete(name); err != nil {
		t.Fatal(err)
	}
	if Exists(name) {
		t.Fatal("namespace still exists after Delete")
	}
	if err := Delete(name); err != nil {
		t.Fatalf("Delete of a missing namespace: %v", err)
	}
	if got, _ := List(name); len(got) != 0 {
		t.Fatalf("List after Delete = %v", got)
	}
}

func TestInvalidNames(t *testing.T) {
	for _, name := range []string{"", "..", "a/b", "a b"} {
		if err := Add(name); err == nil {
			t.Errorf("Add(%q) accepted", name)
		}
		if Exists(name) {
			t.Errorf("Exists(%q) = true", name)
		}
	}
}

func TestDoEntersAndRestores(t *testing.T) {
	requireRoot(t)
	name := newNS(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadNetNS(t)

	var inside uint64
	var ifaces []net.Interface
	err := Do(name, func() error {
		inside = threadNetNS(t)
		var err error
		ifaces, err = net.Interfaces()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if inside == before {
		t.Fatal("f ran in the original namespace")
	}
	// A fresh namespace holds only the loopback device.
	if len(ifaces) != 1 || ifaces[0].Name != "lo" {
		t.Fatalf("interfaces inside = %v, want just lo", ifaces)
	}
	if after := threadNetNS(t); after != before {
		t.Fatalf("thread namespace after Do = %d, want %d", after, before)
	}
}

func TestDoReturnsFError(t *testing.T) {
	requireRoot(t)
	name := newNS(t)
	sentinel := errors.New("from f")
	if err := Do(name, func() error { return sentinel }); !errors.Is(err, sentinel) {
		t.Fatalf("Do error = %v, want %v", err, sentinel)
	}
	if err := Do(uniqueName(t), func() error { return nil }); err == nil {
		t.Fatal("Do on a missing namespace succeeded")
	}
}

func TestSocketStaysInNamespace(t *testing.T) {
	requireRoot(t)
	name := newNS(t)
	if err := Run(name, "ip", "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := Do(name, func() error {
		var err error
		ln, err = net.Listen("tcp4", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// ss inside the namespace must see the listener made from Go.
	out, err := Command(name, "ss", "-Hltn").CombinedOutput()
	if err != nil {
		t.Fatalf("ss: %v: %s", err, out)
	}
	if !strings.Contains(string(out), ln.Addr().String()) {
		t.Fatalf("ss in %s does not list %s:\n%s", name, ln.Addr(), out)
	}
}

func TestRunCarriesOutput(t *testing.T) {
	requireRoot(t)
	name := newNS(t)
	err := Run(name, "ip", "link", "show", "dev", "nosuchdev0")
	if err == nil {
		t.Fatal("Run of a failing command succeeded")
	}
	if !strings.Contains(err.Error(), "nosuchdev0") {
		t.Fatalf("error lacks the command's output: %v", err)
	}
}

func TestPids(t *testing.T) {
	requireRoot(t)
	name := newNS(t)
	// The shell prints only after ip has joined the namespace and exec'd
	// it, so reading the line is the synchronisation point.
	cmd := Command(name, "sh", "-c", "echo ready; exec sleep 30")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	pids, err := Pids(name)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pids, cmd.Process.Pid) {
		t.Fatalf("Pids(%s) = %v, want it to contain %d", name, pids, cmd.Process.Pid)
	}
}

// TestWaitRunning: the end of a veth pair set up first runs once its peer
// is up; a device left down is reported by name when the time is up, and
// one that does not exist at once.
func TestWaitRunning(t *testing.T) {
	requireRoot(t)
	ns := newNS(t)
	for _, args := range [][]string{
		{"link", "add", "qsw0", "type", "veth", "peer", "name", "qsw1"},
		{"link", "add", "qsw2", "type", "veth", "peer", "name", "qsw3"},
		{"link", "set", "qsw0", "up"},
		{"link", "set", "qsw1", "up"},
	} {
		if err := Run(ns, append([]string{"ip"}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := WaitRunning(ns, 5*time.Second, "qsw0"); err != nil {
		t.Fatal(err)
	}
	err := WaitRunning(ns, 20*time.Millisecond, "qsw0", "qsw2")
	if err == nil || !strings.Contains(err.Error(), "qsw2 is not running") {
		t.Errorf("WaitRunning on a device left down = %v, want it named as not running", err)
	}
	if err := WaitRunning(ns, time.Second, "qsw9"); err == nil || !strings.Contains(err.Error(), "qsw9") {
		t.Errorf("WaitRunning on a missing device = %v, want an error naming it", err)
	}
}
