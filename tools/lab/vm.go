package lab

// VM back-ends: `qsplice-lab up -vm b1` makes back-end k a QEMU guest
// instead of a namespace. The guest's virtio NIC is a host TAP named bK
// on the lab's bridge in the switch namespace, where a namespace
// back-end has its veth; QEMU runs in the switch namespace, so Down's
// sweep of the lab's namespaces ends it, and deleting the namespace
// deletes the TAP.
//
// The shim runs inside the guest, exactly as in a namespace back-end:
// wire = the guest's eth0 (AF_PACKET), tap0 in the guest with the
// back-end's address, the same flags and the back-end's key. The other
// design, a shim on the host on the guest's TAP (for an unmodified guest
// OS), needs the guest's frames to reach the shim instead of QEMU's
// virtio back-end: a second TAP pair or a bridge the shim sits between,
// with the shim's own "tap0" becoming QEMU's device, and TCP offload
// negotiation between guest and shim. Inside the guest nothing changes
// for the shim, the test covers the same code a deployment runs, and the
// guest is a real kernel with a real NIC driver (virtio-net with its
// offloads) under the shim, which is what a VM lab is for.
//
// What the guest runs: qsplice-testserver on :8080 and the shim. nginx is
// not in the guest (port 80 is not served by a VM back-end). With
// Config.FastOpen its init sets net.ipv4.tcp_fastopen=3 and the test
// server listens with -fast-open 256, as in a namespace back-end; the
// console says the guest's value (vmFastOpenMark).
//
// The guest boots Debian's kernel from /boot with an initramfs the lab
// builds (initramfs.go): busybox-static, the modules the guest needs, the
// static binaries, the key (in the initramfs, not on the kernel command
// line, which any guest process and the host's ps can read) and /init.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

const (
	vmDir        = "vm" // state-directory entry with the guests' initramfs files
	vmReadyMark  = "qsplice-vm: ready"
	qemuProgram  = "qemu-system-x86_64"
	vmMemory     = "512"
	kvmDevice    = "/dev/kvm"
	busyboxPath  = "/bin/busybox"
	vmBinStatic  = "static"
	vmTestServer = "qsplice-testserver"
	vmShim       = "qsplice-backend"
)

// vmFastOpenMark is followed on the guest's console by its
// net.ipv4.tcp_fastopen.
const vmFastOpenMark = "qsplice-vm: tcp_fastopen="

// vmModules are the modules the guest needs; those built into the
// kernel are skipped (guestModules). sch_ingress and cls_bpf carry the
// shim's fast paths on a guest kernel without TCX (Debian's 6.1): the
// clsact qdisc and its BPF filters (splice/link/tcprog.go).
var vmModules = []string{"virtio_pci", "virtio_net", "tun", "af_packet", "virtio_rng", "sch_ingress", "cls_bpf"}

func vmName(k int) string { return "vm-" + backendHost(k) }

// isVM reports whether back-end k is a QEMU guest.
func (l *Lab) isVM(k int) bool { return l.cfg.isVM(k) }

func (c Config) isVM(k int) bool {
	for _, v := range c.VMBackends {
		if v == k {
			return true
		}
	}
	return false
}

// vmHost reports whether host (fe, b1, ...) is a QEMU guest.
func (l *Lab) vmHost(host string) bool {
	if host == vmFrontendHost {
		return l.cfg.VMFrontend
	}
	if rest, ok := strings.CutPrefix(host, "b"); ok {
		k, err := strconv.Atoi(rest)
		return err == nil && l.isVM(k)
	}
	return false
}

// ParseVMHosts turns "fe,b1,b3" into [1 3] and true (the front-end is
// a guest too).
func ParseVMHosts(s string) (backends []int, frontend bool, err error) {
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if h == vmFrontendHost {
			frontend = true
			continue
		}
		rest, ok := strings.CutPrefix(h, "b")
		k, err := strconv.Atoi(rest)
		if !ok || err != nil || k < 1 {
			return nil, false, fmt.Errorf("-vm %q: want fe or back-end hosts b1,b2,...", h)
		}
		backends = append(backends, k)
	}
	return backends, frontend, nil
}

// normalizeVM checks the VM back-ends and picks the guest kernel.
func (c *Config) normalizeVM() error {
	if len(c.VMBackends) == 0 && !c.VMFrontend {
		return nil
	}
	if err := c.checkVMFrontend(); err != nil {
		return err
	}
	for _, k := range c.VMBackends {
		if k < 1 || k > c.Backends {
			return fmt.Errorf("lab: VM back-end b%d: the lab has b1..b%d", k, c.Backends)
		}
	}
	c.ReadyTimeout = max(c.ReadyTimeout, vmBootTimeout)
	if c.VMKernel == "" {
		kernel, err := FindGuestKernel()
		if err != nil {
			return err
		}
		c.VMKernel = kernel
	}
	if c.VMBinDir == "" {
		c.VMBinDir = c.BinDir
		if st, err := os.Stat(filepath.Join(c.BinDir, vmBinStatic)); err == nil && st.IsDir() {
			c.VMBinDir = filepath.Join(c.BinDir, vmBinStatic)
		}
	}
	return nil
}

// FindGuestKernel returns the kernel a VM back-end boots: the newest
// /boot/vmlinuz-* whose modules are installed, a cloud flavour first
// (linux-image-cloud-amd64: virtio drivers, small).
func FindGuestKernel() (string, error) {
	paths, _ := filepath.Glob("/boot/vmlinuz-*")
	var usable []string
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join("/lib/modules", kernelVersion(p), "modules.dep")); err == nil {
			usable = append(usable, p)
		}
	}
	if len(usable) == 0 {
		return "", fmt.Errorf("lab: no guest kernel: no /boot/vmlinuz-* with modules in /lib/modules (apt-get install linux-image-cloud-amd64)")
	}
	sort.SliceStable(usable, func(i, j int) bool {
		ci, cj := strings.Contains(usable[i], "cloud"), strings.Contains(usable[j], "cloud")
		if ci != cj {
			return ci
		}
		return usable[i] > usable[j]
	})
	return usable[0], nil
}

func kernelVersion(vmlinuz string) string {
	return strings.TrimPrefix(filepath.Base(vmlinuz), "vmlinuz-")
}

// VMAccel is how the guests run: "kvm" when /dev/kvm opens for reading
// and writing and the CPU has hardware virtualisation (vmx or svm in
// /proc/cpuinfo), "tcg" (QEMU's emulator, slower) otherwise. The CPU
// check matters inside VMs without nested virtualisation: there /dev/kvm
// may exist and open, yet a guest started on it never runs (measured on
// this project's Firecracker build machines: no console output at all).
func VMAccel() string {
	f, err := os.OpenFile(kvmDevice, os.O_RDWR, 0)
	if err != nil {
		return "tcg"
	}
	f.Close()
	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "tcg"
	}
	for _, line := range strings.Split(string(cpuinfo), "\n") {
		if name, flags, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "flags" {
			for _, f := range strings.Fields(flags) {
				if f == "vmx" || f == "svm" {
					return "kvm"
				}
			}
			return "tcg"
		}
	}
	return "tcg"
}

// CheckVMSupport says why VM back-ends cannot run here, or nil.
func CheckVMSupport() error {
	if _, err := exec.LookPath(qemuProgram); err != nil {
		return fmt.Errorf("lab: VM back-ends need %s (apt-get install qemu-system-x86): %w", qemuProgram, err)
	}
	if _, err := os.Stat(busyboxPath); err != nil {
		return fmt.Errorf("lab: VM back-ends need a static busybox at %s (apt-get install busybox-static): %w", busyboxPath, err)
	}
	if ok, err := isStaticELF(busyboxPath); err != nil || !ok {
		return fmt.Errorf("lab: %s is not a static busybox (apt-get install busybox-static)", busyboxPath)
	}
	_, err := FindGuestKernel()
	return err
}

// vmInitramfsPath is back-end k's initramfs in the state directory.
func (l *Lab) vmInitramfsPath(k int) string {
	return l.statePath(vmDir, "initramfs-"+backendHost(k)+".cpio")
}

// VMConsolePath is back-end k's serial console log.
func (l *Lab) VMConsolePath(k int) string { return l.statePath(logDir, vmName(k)+".console") }

// vmGuestMAC is the MAC of the guest's virtio NIC. The back-end's MAC on
// the wire is tap0's (BackendMAC), which the shim answers for; eth0's
// own only has to be unique on the bridge.
func (l *Lab) vmGuestMAC(k int) string { return fmt.Sprintf("02:00:c6:12:01:%02x", 20+k) }

// vmSpec is the process of VM back-end k: QEMU in the switch namespace.
func (l *Lab) vmSpec(k int) procSpec {
	return procSpec{
		name: vmName(k), host: "sw",
		argv:    l.qemuArgv(l.cfg.Name+"-"+backendHost(k), backendHost(k), l.vmGuestMAC(k), l.vmInitramfsPath(k), l.VMConsolePath(k)),
		prepare: func() error { return l.prepareVM(k) },
		backend: k,
		ready:   l.vmBootedCheck(k),
	}
}

// qemuArgv runs a guest whose virtio NIC (MAC mac) is the switch's TAP
// named tap, booting the lab's kernel with initrd, its serial console
// logged to console.
func (l *Lab) qemuArgv(name, tap, mac, initrd, console string) []string {
	accel := VMAccel()
	cpu := "max"
	if accel == "kvm" {
		cpu = "host"
	}
	nic := "virtio-net-pci,netdev=n0,mac=" + mac
	if !l.cfg.Offloads {
		// MTU-sized frames with complete checksums, as on the other links.
		nic += ",csum=off,guest_csum=off,gso=off,host_tso4=off,host_tso6=off,host_ecn=off,host_ufo=off," +
			"guest_tso4=off,guest_tso6=off,guest_ecn=off,guest_ufo=off"
	}
	return []string{qemuProgram,
		"-name", name,
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-accel", accel, "-cpu", cpu, "-smp", "1", "-m", vmMemory,
		"-kernel", l.cfg.VMKernel, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 ipv6.disable=1 net.ifnames=0",
		"-serial", "file:" + console,
		"-netdev", "tap,id=n0,ifname=" + tap + ",script=no,downscript=no,vnet_hdr=on",
		"-device", nic,
		"-device", "virtio-rng-pci",
	}
}

// prepareVM writes back-end k's initramfs and makes sure its TAP is on
// the bridge.
func (l *Lab) prepareVM(k int) error {
	key, err := os.ReadFile(l.BackendKeyPath(k))
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return l.prepareGuest(backendHost(k), fmt.Sprintf("VM back-end b%d", k), []string{vmTestServer, vmShim},
		key, l.vmInit(k), l.vmInitramfsPath(k), l.VMConsolePath(k))
}

// prepareGuest makes sure the guest's TAP is on the bridge (it is
// persistent: it outlives a QEMU that stopped), and writes its initramfs:
// busybox, the modules, the static binaries bins from VMBinDir, the key
// as /etc/qsplice/key, and init.
func (l *Lab) prepareGuest(tap, what string, bins []string, key []byte, init, initrd, console string) error {
	if err := os.MkdirAll(l.statePath(vmDir), 0o700); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if !linkExists(l.NS("sw"), tap) {
		if err := ipBatch(l.NS("sw"), l.vmTapCmds(tap)); err != nil {
			return err
		}
	}
	modules, err := guestModules(filepath.Join("/lib/modules", kernelVersion(l.cfg.VMKernel)), vmModules)
	if err != nil {
		return err
	}
	paths := make(map[string]string)
	for _, b := range bins {
		p := filepath.Join(l.cfg.VMBinDir, b)
		static, err := isStaticELF(p)
		if err != nil {
			return fmt.Errorf("lab: %s: %w", what, err)
		}
		if !static {
			return fmt.Errorf("lab: %s: %s is dynamically linked; the guest has no libc: build it with CGO_ENABLED=0 into %s (make build does)",
				what, p, filepath.Join(l.cfg.BinDir, vmBinStatic))
		}
		paths[b] = p
	}
	// A fresh console log per boot, so the ready check reads this boot's.
	if err := os.Remove(console); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("lab: %w", err)
	}
	return writeInitramfs(initrd, initramfsSpec{
		busybox:  busyboxPath,
		modules:  modules,
		binaries: paths,
		files:    map[string][]byte{"/etc/qsplice/key": key},
		init:     init,
	})
}

// vmTapCmds create a VM back-end's TAP on the bridge, in the switch.
func (l *Lab) vmTapCmds(host string) []string {
	return []string{
		"tuntap add name " + host + " mode tap",
		"link set " + host + " master " + bridgeDev + " up",
	}
}

// shQuote quotes args for busybox sh.
func shQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// guestInitHead is the start of every guest's /init: busybox, the
// filesystems, the modules, loopback.
//
// virtio_net is loaded with napi_tx=0: the guest's daemons send on its
// NIC through AF_PACKET, and with transmit NAPI (the default) the
// kernel frees a sent frame, and the room it holds in the sending
// socket, only when the device's completion interrupt runs. Under the
// emulated (TCG) guests of the lab that interrupt stopped coming in
// about one 64 MB download in three with offloads off (45,000 frames):
// the guest's eth0 sent nothing more, the shim's socket stayed full,
// and the front-end rightly declared the back-end dead. With
// napi_tx=0 the driver releases a frame's room as it queues it and
// reclaims finished frames on every send: 0 of 9 such downloads
// stalled (docs/results.md, eighteenth session).
const guestInitHead = `/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
for m in $(cat /etc/qsplice/modules); do
	args=
	case $m in *virtio_net.ko*) args=napi_tx=0 ;; esac
	insmod /lib/modules/$m $args || echo "qsplice-vm: insmod $m failed"
done
ip link set lo up
`

// vmInit is the guest's /init: the namespace back-end's setup (topology.go)
// and processes (process.go), in busybox sh.
func (l *Lab) vmInit(k int) string {
	q := shQuote
	server := append([]string{"/bin/" + vmTestServer, "-listen", ":8080", "-id", strconv.Itoa(k),
		"-service-time", l.cfg.ServiceTime.String(), "-fast-open", strconv.Itoa(l.fastOpenQueue())}, l.cfg.TestServerArgs...)
	shim := append([]string{"/bin/" + vmShim, "-allow-root", "-id", strconv.Itoa(k), "-wire", hostDev, "-tap", tapDev,
		"-addr", l.BackendAddr(k).String(), "-frontend", controlAddr, "-control-port", controlPort,
		"-web-ports", "8080", "-handoff", HandoffAddr, "-capacity", strconv.Itoa(l.cfg.Capacity), "-key", "/etc/qsplice/key",
		"-tap-mac", l.BackendMAC(k).String(), "-admin", fmt.Sprintf("%s:%d", l.BackendAddr(k), BackendAdminPort),
		"-offloads=" + strconv.FormatBool(l.cfg.Offloads), "-workers", "1"}, l.cfg.BackendArgs...)
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# qsplice-lab VM back-end b%d\n%s", k, guestInitHead)
	fmt.Fprintf(&b, `# As in a namespace back-end: the shim owns the wire in userspace; no ARP
# and strict reverse-path filtering keep the kernel off it.
ip link set %s arp off promisc on up
echo 1 > /proc/sys/net/ipv4/conf/%s/rp_filter
`, hostDev, hostDev)
	fastOpenPath := "/proc/sys/" + strings.ReplaceAll(fastOpenSysctl, ".", "/")
	if l.cfg.FastOpen {
		fmt.Fprintf(&b, "# TCP Fast Open for the shim's requests in C2's SYN (Config.FastOpen).\necho %s > %s\n",
			fastOpenServer, fastOpenPath)
	}
	fmt.Fprintf(&b, "echo \"%s$(cat %s)\"\n", vmFastOpenMark, fastOpenPath)
	if l.cfg.TestServer {
		fmt.Fprintf(&b, "%s &\n", q(server))
	}
	if l.cfg.Daemons {
		fmt.Fprintf(&b, "%s &\n", q(shim))
	}
	fmt.Fprintf(&b, "echo '%s'\nwait\necho 'qsplice-vm: every process exited'\npoweroff -f\n", vmReadyMark)
	return b.String()
}

// vmBootedCheck succeeds once the guest's console shows that its init
// started the test server and the shim. Registration with the front-end
// is the front-end's ready check, as for every back-end.
func (l *Lab) vmBootedCheck(k int) *readyCheck {
	return &readyCheck{
		what:  fmt.Sprintf("VM back-end b%d (%s on its console %s)", k, vmReadyMark, l.VMConsolePath(k)),
		owner: vmName(k),
		check: func(ctx context.Context) error {
			data, err := os.ReadFile(l.VMConsolePath(k))
			if err != nil {
				return err
			}
			if strings.Contains(string(data), vmReadyMark) {
				return nil
			}
			lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			if len(lines) > tailLines {
				lines = lines[len(lines)-tailLines:]
			}
			return fmt.Errorf("not booted yet; last console lines:\n%s", strings.Join(lines, "\n"))
		},
	}
}

// writeVMStatus adds the lab's QEMU guests to a status report: which
// hosts they are and whether KVM or TCG runs them.
func (l *Lab) writeVMStatus(w io.Writer) {
	if len(l.cfg.VMBackends) == 0 && !l.cfg.VMFrontend {
		return
	}
	var hosts []string
	if l.cfg.VMFrontend {
		hosts = append(hosts, vmFrontendHost)
	}
	for _, k := range l.cfg.VMBackends {
		hosts = append(hosts, backendHost(k))
	}
	fmt.Fprintf(w, "\nVMs: %s (QEMU with %s, kernel %s):\n", strings.Join(hosts, ", "), strings.ToUpper(VMAccel()), l.cfg.VMKernel)
	if l.cfg.VMFrontend {
		fmt.Fprintf(w, "  fe: front-end, TAP %s on %s in %s, console %s\n", vmFrontendHost, bridgeDev, l.NS("sw"), l.VMFrontendConsolePath())
	}
	if len(l.cfg.VMBackends) > 0 {
		fmt.Fprintln(w, "  back-ends serve the test server on :8080 only, no nginx")
	}
	for _, k := range l.cfg.VMBackends {
		fmt.Fprintf(w, "  b%d: TAP %s on %s in %s, console %s\n", k, backendHost(k), bridgeDev, l.NS("sw"), l.VMConsolePath(k))
	}
}

// vmBootTimeout is the least ReadyTimeout of a lab with VM back-ends: a
// guest under TCG takes tens of seconds to boot.
const vmBootTimeout = 120 * time.Second
