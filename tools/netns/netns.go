// Package netns manages named Linux network namespaces (the ones `ip netns`
// keeps under /var/run/netns) for the lab and the root-only tests.
//
// Where it sits: below everything else in tools/. The lab builder
// (tools/lab) uses it to create the hosts of the test network, to run the
// daemons inside them, and to open sockets (dials, AF_PACKET captures) from
// inside a namespace without starting a process there. Tests in other
// packages may reuse it for their own throwaway namespaces.
//
// Namespaces are created and deleted with the ip(8) tool so that they are
// visible to it and to every other tool (ip netns exec, tshark, ...). Only
// Do enters a namespace from Go, and only on a locked OS thread.
package netns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Dir is where ip(8) keeps the bind mounts that hold named namespaces alive.
const Dir = "/var/run/netns"

// Path returns the file that stands for the named namespace.
func Path(name string) string { return filepath.Join(Dir, name) }

// validName rejects names that would escape Dir or that ip(8) cannot handle.
func validName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00 ") {
		return fmt.Errorf("netns: invalid namespace name %q", name)
	}
	return nil
}

// Add creates the named namespace (ip netns add). It fails if it exists.
func Add(name string) error {
	if err := validName(name); err != nil {
		return err
	}
	return runIP("netns", "add", name)
}

// Delete removes the named namespace (ip netns del). A namespace that does
// not exist is not an error, so teardown code can call it unconditionally.
// Processes still inside the namespace keep it alive after this returns;
// callers that want it gone must end them first (see Pids).
func Delete(name string) error {
	if err := validName(name); err != nil {
		return err
	}
	if !Exists(name) {
		return nil
	}
	err := runIP("netns", "del", name)
	if err != nil && !Exists(name) {
		// Lost a race with another deleter: the outcome is what we wanted.
		return nil
	}
	return err
}

// Exists reports whether the named namespace exists.
func Exists(name string) bool {
	if validName(name) != nil {
		return false
	}
	_, err := os.Stat(Path(name))
	return err == nil
}

// List returns the names of the namespaces that start with prefix, sorted.
// A missing namespace directory means there are none.
func List(prefix string) ([]string, error) {
	entries, err := os.ReadDir(Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netns: list: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Pids returns the processes that live in the named namespace
// (ip netns pids), excluding the calling process.
func Pids(name string) ([]int, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	out, err := exec.Command("ip", "netns", "pids", name).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("netns: ip netns pids %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	var pids []int
	self := os.Getpid()
	for _, f := range strings.Fields(string(out)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid != self {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Do runs f on a locked OS thread that has joined the named namespace, and
// moves the thread back to its original namespace afterwards.
//
// Sockets that f creates stay in the namespace for their whole life and may
// be used from any goroutine later. Goroutines that f starts do NOT run in
// the namespace (they get other threads). If the thread cannot be moved
// back, it stays locked, so the runtime discards it when the goroutine
// ends instead of reusing a thread in the wrong namespace.
func Do(name string, f func() error) (err error) {
	if err := validName(name); err != nil {
		return err
	}
	target, err := unix.Open(Path(name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns: open %s: %w", name, err)
	}
	defer unix.Close(target)

	runtime.LockOSThread()
	// The namespace of this thread, not of the process: another Do may
	// have moved a different thread, and only this one matters here.
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: open current namespace: %w", err)
	}
	defer unix.Close(orig)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: enter %s: %w", name, err)
	}
	// Deferred so that a panic in f still restores (or poisons) the thread.
	defer func() {
		if rerr := unix.Setns(orig, unix.CLONE_NEWNET); rerr != nil {
			err = errors.Join(err, fmt.Errorf("netns: leave %s (thread left locked): %w", name, rerr))
			return
		}
		runtime.UnlockOSThread()
	}()
	return f()
}

// Command returns a command that runs arg[0] with arg[1:] inside the named
// namespace (ip netns exec NAME arg...). ip(8) execs the program, so the
// process id of the returned command is the program's own.
func Command(name string, arg ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", name}, arg...)...)
}

// Run runs a command inside the named namespace and returns an error that
// carries its combined output when it fails.
func Run(name string, arg ...string) error {
	cmd := Command(name, arg...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns %s: %s: %v: %s", name, strings.Join(arg, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// runIP runs ip(8) in the current namespace with the output in the error.
func runIP(arg ...string) error {
	out, err := exec.Command("ip", arg...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: ip %s: %v: %s", strings.Join(arg, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// WaitRunning waits until every named device in the namespace is
// operationally up (IFF_RUNNING), and fails once timeout has passed.
//
// Wait this way for the end of a veth pair that was set up first, before
// sending on it. `ip link set DEV up` returns before that end can send:
// its peer was still down, so the kernel left its transmit queues on the
// noop qdisc, and it moves them to the real one when the carrier comes on,
// from the link-watch work queue, in the same pass that sets the
// operational state. Until that work has run, which a loaded machine
// delays, frames written to the device through AF_PACKET are dropped
// without an error. (The end set up second can send at once, since its
// carrier is already on when it opens; its operational state follows up
// to a second later, as a non-urgent link-watch event, so waiting on it
// costs that second for nothing.)
func WaitRunning(name string, timeout time.Duration, devs ...string) error {
	return Do(name, func() error {
		deadline := time.Now().Add(timeout)
		for _, dev := range devs {
			for {
				ifi, err := net.InterfaceByName(dev)
				if err != nil {
					return fmt.Errorf("netns %s: device %s: %w", name, dev, err)
				}
				if ifi.Flags&net.FlagRunning != 0 {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("netns %s: %s is not running after %v (flags %v)", name, dev, timeout, ifi.Flags)
				}
				time.Sleep(time.Millisecond) // the kernel offers no wait for operstate short of a netlink subscription
			}
		}
		return nil
	})
}
