package lab

// A VM front-end: `qsplice-lab up -vm fe` makes the front-end host a QEMU
// guest on a TAP named fe on the lab's bridge, where its veth would be.
// The guest boots the same kernel and kind of initramfs as a VM back-end
// (vm.go), with the static qsplice-frontend: its kernel owns the
// front-end's address (control and admin, as in the namespace), and the
// front-end owns eth0 in userspace with the VIP and the handoff address.
// Clients, back-ends and the lab's checks reach it at the same addresses
// as ever; its process is still "frontend" (StopProcess, status), now a
// QEMU in the switch namespace.
//
// What the guest cannot have: files on the host. The front-end's key is
// in the initramfs; a user's configuration (-config), the userspace TAP
// variant (-frontend-tap) and front-end arguments that name host files
// (-timeline, -capture) are refused rather than run against the guest's
// empty tmpfs.

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

const (
	vmFrontendHost = "fe"
	vmFrontend     = "qsplice-frontend"
	// vmFrontendMAC is the guest's virtio NIC, the front-end's MAC on the
	// wire (the namespace front-end uses its veth's).
	vmFrontendMAC = "02:00:c6:12:01:02"
)

// checkVMFrontend refuses what a VM front-end cannot run.
func (c *Config) checkVMFrontend() error {
	if !c.VMFrontend {
		return nil
	}
	switch {
	case !c.Daemons:
		return fmt.Errorf("lab: -vm fe boots the front-end: it needs the daemons")
	case c.FrontendTAP:
		return fmt.Errorf("lab: -vm fe and -frontend-tap: the guest's NIC is the front-end's link already")
	case c.FrontendConfig != "" || c.FrontendConfigText != "":
		return fmt.Errorf("lab: -vm fe with -config: the guest does not have the configuration file (not built yet)")
	}
	for _, a := range c.FrontendArgs {
		name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
		if slices.Contains([]string{"timeline", "capture", "config", "key"}, name) {
			return fmt.Errorf("lab: -vm fe: front-end argument %s names a file, which would be in the guest's tmpfs, not on this host", a)
		}
	}
	return nil
}

// VMFrontendConsolePath is the VM front-end's serial console log: the
// front-end's own log lines are there.
func (l *Lab) VMFrontendConsolePath() string { return l.statePath(logDir, "vm-fe.console") }

func (l *Lab) vmFrontendInitramfsPath() string { return l.statePath(vmDir, "initramfs-fe.cpio") }

// vmFrontendSpec is the front-end's process as a QEMU guest; argv is what
// the namespace front-end would run.
func (l *Lab) vmFrontendSpec(argv []string) procSpec {
	return procSpec{
		name: frontendName, host: "sw",
		argv:    l.qemuArgv(l.cfg.Name+"-fe", vmFrontendHost, vmFrontendMAC, l.vmFrontendInitramfsPath(), l.VMFrontendConsolePath()),
		prepare: func() error { return l.prepareVMFrontend(argv) },
		ready:   l.frontendCheck(),
	}
}

func (l *Lab) prepareVMFrontend(argv []string) error {
	key, err := os.ReadFile(l.KeyPath())
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return l.prepareGuest(vmFrontendHost, "VM front-end", []string{vmFrontend}, key,
		l.vmFrontendInit(argv), l.vmFrontendInitramfsPath(), l.VMFrontendConsolePath())
}

// vmFrontendInit is the front-end guest's /init: the namespace
// front-end's setup (buildAddressedHost) and its command line, with the
// guest's paths, as root (the guest has no other user).
func (l *Lab) vmFrontendInit(argv []string) string {
	args := slices.Clone(argv)
	args[0] = "/bin/" + vmFrontend
	for i := 1; i < len(args)-1; i++ {
		if args[i] == "-key" {
			args[i+1] = "/etc/qsplice/key"
		}
	}
	args = append(args[:1], append([]string{"-allow-root"}, args[1:]...)...)
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# qsplice-lab VM front-end\n%s", guestInitHead)
	fmt.Fprintf(&b, "ip addr add %s/%d dev %s\nip link set %s up\n", FrontendAddr, PrefixLen, hostDev, hostDev)
	fmt.Fprintf(&b, "%s &\n", shQuote(args))
	fmt.Fprintf(&b, "echo '%s'\nwait\necho 'qsplice-vm: every process exited'\npoweroff -f\n", vmReadyMark)
	return b.String()
}
