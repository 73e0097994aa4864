// Package privilege says what the qsplice daemons need from the kernel
// and checks it when they start.
//
// Both daemons need two capabilities and nothing else:
//
//   - CAP_NET_RAW for their AF_PACKET sockets;
//   - CAP_NET_ADMIN for TAP devices (TUNSETIFF on a device the user does
//     not own), configuring the shim's TAP over rtnetlink (MAC, address,
//     up, deleting it to recreate it multi-queue) and socket buffers
//     beyond net.core.rmem_max (SO_RCVBUFFORCE).
//
// The shim may have a third, CAP_BPF, and works without it: with it, it
// loads the eBPF program that steers each frame of its multi-queue TAP to
// the worker that owns the frame's connection (link.OffloadTAP.SteerByPorts,
// TUNSETSTEERINGEBPF). Without it, the tun driver's flow table picks the
// queue, and at more than about 1,400 new connections a second (it keeps
// 4096 flows for 3 s) half the TAP's frames reach another worker with
// two, which must hand them over: a copy and a mailbox each, about a
// tenth of the shim's CPU per short request (docs/results.md). The
// front-end uses it for the TC program that answers clients' SYNs in the
// kernel (frontend/synanswer.go); without it the engine answers them.
//
// The design: a daemon is started unprivileged with those two
// capabilities already in its effective set (systemd's User= and
// AmbientCapabilities=, contrib/systemd; the lab's exec.Cmd with
// Credential and AmbientCaps; or setcap on the binary), and refuses to
// start as root unless -allow-root says so. It never changes its own
// credentials, so what runs at start is what runs later.
//
// Dropping privileges after opening the sockets (setuid to a -user,
// keeping the two capabilities with PR_SET_KEEPCAPS and capset) was the
// alternative, and was not taken: in a Go program capabilities are per
// thread (the runtime makes setuid process-wide, but capset and
// PR_SET_KEEPCAPS act on the calling thread; syscall.AllThreadsSyscall
// could repeat them on every thread, but refuses in a cgo build), the
// front-end re-reads its configuration and key files on SIGHUP and would
// then read them as another user than at start, and systemd already
// starts a service with exactly these credentials.
package privilege

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Needed is the effective capability set the daemons need.
const Needed uint64 = 1<<unix.CAP_NET_ADMIN | 1<<unix.CAP_NET_RAW

// Caps are the capabilities in Needed, in the form
// syscall.SysProcAttr.AmbientCaps takes.
var Caps = []uintptr{unix.CAP_NET_ADMIN, unix.CAP_NET_RAW}

// OptionalBPF are the capabilities both daemons use when they have them
// (CAP_BPF: the shim's steering and fast-path programs, the front-end's
// SYN answer; see the package doc); Check does not require them.
const OptionalBPF uint64 = 1 << unix.CAP_BPF

// CapsWithBPF are the capabilities the lab and the units give the
// daemons: Needed and OptionalBPF, in the form AmbientCaps takes.
var CapsWithBPF = append(slices.Clone(Caps), unix.CAP_BPF)

// AllowRootFlag is the name of the daemons' flag that lets them run as
// root.
const AllowRootFlag = "allow-root"

// AllowRootUsage is its help text.
const AllowRootUsage = "run even as root (by default the daemon refuses: it needs only CAP_NET_ADMIN and CAP_NET_RAW; README, \"Privileges\")"

// ErrRoot is returned by Check for a daemon that runs as root without
// -allow-root.
var ErrRoot = errors.New("refusing to run as root")

// ErrMissingCaps is returned by Check for a daemon that lacks a capability
// in Needed.
var ErrMissingCaps = errors.New("missing capabilities")

// Check is the daemons' start-up check: as root (effective uid 0) it
// refuses unless allowRoot; otherwise it requires the capabilities in
// Needed in the effective set. prog is the daemon's name, which is also
// its systemd unit's (contrib/systemd/PROG.service).
func Check(prog string, allowRoot bool) error {
	eff, err := Effective()
	if err != nil {
		return err
	}
	return check(prog, os.Geteuid(), eff, allowRoot)
}

func check(prog string, euid int, eff uint64, allowRoot bool) error {
	if euid == 0 {
		if allowRoot {
			return nil
		}
		return fmt.Errorf("%w: %s needs only CAP_NET_ADMIN and CAP_NET_RAW; run it as an unprivileged user "+
			"holding them (contrib/systemd/%s.service: User=qsplice, AmbientCapabilities=CAP_NET_ADMIN CAP_NET_RAW), "+
			"or pass -%s to run as root anyway", ErrRoot, prog, prog, AllowRootFlag)
	}
	if missing := Needed &^ eff; missing != 0 {
		return fmt.Errorf("%w: %s runs as uid %d without %s in its effective set; grant them with "+
			"AmbientCapabilities=CAP_NET_ADMIN CAP_NET_RAW (contrib/systemd/%s.service), "+
			"setpriv --inh-caps=+net_admin,+net_raw --ambient-caps=+net_admin,+net_raw, "+
			"or setcap cap_net_admin,cap_net_raw=ep on the binary",
			ErrMissingCaps, prog, euid, Names(missing), prog)
	}
	return nil
}

// Effective returns the calling thread's effective capability set as a
// bit mask (bit n is capability n, as in /proc/PID/status CapEff).
func Effective() (uint64, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, fmt.Errorf("capget: %w", err)
	}
	return uint64(data[0].Effective) | uint64(data[1].Effective)<<32, nil
}

// capNames are the capabilities this package names in its messages.
var capNames = map[uint]string{unix.CAP_NET_ADMIN: "CAP_NET_ADMIN", unix.CAP_NET_RAW: "CAP_NET_RAW", unix.CAP_BPF: "CAP_BPF"}

// Names lists the capabilities in a mask, e.g. "CAP_NET_ADMIN, CAP_NET_RAW".
func Names(mask uint64) string {
	var names []string
	for n := range uint(64) {
		if mask&(1<<n) == 0 {
			continue
		}
		if s, ok := capNames[n]; ok {
			names = append(names, s)
		} else {
			names = append(names, fmt.Sprintf("capability %d", n))
		}
	}
	return strings.Join(names, ", ")
}
