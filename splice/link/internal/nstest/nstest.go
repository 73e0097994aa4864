// Package nstest gives tests throwaway Linux network namespaces.
//
// Place in the data flow: none; it is test scaffolding. Tests of the link
// adapters, the daemons and the lab build hosts out of namespaces joined by
// veth pairs, as the lab does (docs/architecture.md §5), and use only addresses
// from 198.18.0.0/15 inside namespaces they created themselves.
//
// Everything needs root; callers skip with RequireRoot when not root.
package nstest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/netns"
	"golang.org/x/sys/unix"
)

// netnsDir is where ip-netns(8) keeps the bind mounts that name namespaces.
const netnsDir = "/var/run/netns"

// RequireRoot skips t unless the test runs as root, saying why.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces; run the tests as root")
	}
}

// New creates a network namespace named prefix-<random hex> with its
// loopback up, and removes it (and with it every interface inside) when the
// test ends, whether it passed or not. It skips t when not root.
func New(t testing.TB, prefix string) string {
	t.Helper()
	RequireRoot(t)
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		t.Fatalf("nstest: random suffix: %v", err)
	}
	name := prefix + "-" + hex.EncodeToString(suffix[:])
	Run(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("nstest: removing namespace %s: %v: %s", name, err, out)
		}
	})
	Run(t, "ip", "-n", name, "link", "set", "lo", "up")
	return name
}

// Veth joins two namespaces with a veth pair, ifA in nsA and ifB in nsB, both
// up. The pair is created inside nsA, so no interface ever appears in the
// root namespace; it disappears with the namespaces.
func Veth(t testing.TB, nsA, ifA, nsB, ifB string) {
	t.Helper()
	Run(t, "ip", "-n", nsA, "link", "add", ifA, "type", "veth", "peer", "name", ifB, "netns", nsB)
	Run(t, "ip", "-n", nsA, "link", "set", ifA, "up")
	Run(t, "ip", "-n", nsB, "link", "set", ifB, "up")
	// ifA came up first: frames written on it before it runs are dropped
	// without an error (see netns.WaitRunning), and these tests count
	// frames.
	if err := netns.WaitRunning(nsA, 5*time.Second, ifA); err != nil {
		t.Fatalf("nstest: %v", err)
	}
}

// Run runs a command and returns its combined output, failing t with that
// output if the command fails.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("nstest: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Do runs f on a locked OS thread that has entered namespace ns, and returns
// f's error. Sockets and devices f creates stay in ns after Do returns.
//
// The thread is switched back to its original namespace afterwards; if that
// fails, the thread stays locked and the runtime destroys it when the
// goroutine exits, so no goroutine ever runs in a namespace it did not ask
// for. The caller's own thread is never touched.
func Do(ns string, f func() error) error {
	result := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored := false
		defer func() {
			if restored {
				runtime.UnlockOSThread()
			}
		}()
		orig, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
		if err != nil {
			result <- fmt.Errorf("nstest: current namespace: %w", err)
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join(netnsDir, ns))
		if err != nil {
			result <- fmt.Errorf("nstest: namespace %s: %w", ns, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			restored = true // never left
			result <- fmt.Errorf("nstest: entering %s: %w", ns, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			result <- errors.Join(ferr, fmt.Errorf("nstest: leaving %s: %w", ns, err))
			return
		}
		restored = true
		result <- ferr
	}()
	return <-result
}
