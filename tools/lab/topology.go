package lab

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/tools/netns"
)

// Device names inside the namespaces.
const (
	bridgeDev = "br0"
	hostDev   = "eth0" // every host's end of its veth
	tapDev    = "tap0" // a back-end's kernel-side TAP, bridged by the shim
	// frontendTapDev is the front-end's TAP when it runs as a userspace
	// host, bridged with eth0 by feBridgeDev inside its namespace.
	frontendTapDev = "vip0"
	feBridgeDev    = "br0"
)

// buildTopology creates the namespaces, the switch and one veth per host,
// addresses them and turns offloads off. It assumes none of it exists.
func (l *Lab) buildTopology() error {
	hosts := l.Hosts()
	for _, h := range append([]string{"sw"}, hosts...) {
		if l.vmHost(h) {
			continue // a QEMU guest on a TAP in the switch (vm.go)
		}
		ns := l.NS(h)
		if err := netns.Add(ns); err != nil {
			return err
		}
		// IPv6 off before any device exists, via "default", so that no
		// device ever sends router or neighbour solicitations into captures.
		for _, key := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
			if err := sysctlIn(ns, key, "1"); err != nil {
				return err
			}
		}
		if err := bridgesSkipNetfilter(ns); err != nil {
			return err
		}
	}

	sw := l.NS("sw")
	swCmds := []string{
		"link set lo up",
		"link add name " + bridgeDev + " type bridge",
		"link set " + bridgeDev + " up",
	}
	for _, h := range hosts {
		if l.vmHost(h) {
			swCmds = append(swCmds, l.vmTapCmds(h)...)
			continue
		}
		// The peer is created directly in the host's namespace under its
		// final name, so there is never a second "eth0" in the switch.
		swCmds = append(swCmds,
			fmt.Sprintf("link add name %s type veth peer name %s netns %s", h, hostDev, l.NS(h)),
			fmt.Sprintf("link set %s master %s up", h, bridgeDev))
	}
	if err := ipBatch(sw, swCmds); err != nil {
		return err
	}
	for _, h := range hosts {
		if l.vmHost(h) {
			continue // QEMU sets its TAP's offloads from the guest's virtio features
		}
		if err := l.linkOffloads(sw, h); err != nil {
			return err
		}
	}

	for i := 1; i <= l.cfg.Clients; i++ {
		if err := l.buildAddressedHost(clientHost(i), l.ClientAddr(i).String()); err != nil {
			return err
		}
	}
	switch {
	case l.cfg.VMFrontend: // the guest's init does this (vmfe.go)
	case l.cfg.FrontendTAP:
		if err := l.buildFrontendBridge(); err != nil {
			return err
		}
	default:
		if err := l.buildAddressedHost("fe", FrontendAddr); err != nil {
			return err
		}
	}
	for k := 1; k <= l.cfg.Backends; k++ {
		if l.isVM(k) {
			continue // the guest's init does this (vm.go)
		}
		ns := l.NS(backendHost(k))
		// No address on eth0: the shim owns the wire in userspace and sees
		// frames for the back-end's MAC and the VIP's clients alike. The
		// kernel must stay off this wire, or it would answer ARP for tap0's
		// address with eth0's MAC (weak host model) and take packets meant
		// for the shim: no ARP on eth0, and strict reverse-path filtering
		// (the route back to any client is via tap0) drops any IP that
		// still arrives on it.
		if err := ipBatch(ns, []string{"link set lo up", "link set " + hostDev + " arp off promisc on up"}); err != nil {
			return err
		}
		if err := sysctlIn(ns, "net.ipv4.conf."+hostDev+".rp_filter", "1"); err != nil {
			return err
		}
		if l.cfg.FastOpen {
			if err := sysctlIn(ns, fastOpenSysctl, fastOpenServer); err != nil {
				return err
			}
		}
		if err := l.linkOffloads(ns, hostDev); err != nil {
			return err
		}
		if err := l.ensureTap(k); err != nil {
			return err
		}
	}
	return nil
}

// TCP Fast Open on a back-end (Config.FastOpen). The sysctl is per network
// namespace; a new namespace starts at 1 (client only), so the clients
// ask for cookies and send data in their SYNs out of the box, and only
// the back-ends need the server bit (2). fastOpenQueueLen is the listeners'
// TCP_FASTOPEN: how many Fast Open connections may wait for their
// handshake's end at once (nginx's fastopen=, the test server's
// -fast-open); beyond it a SYN's data is ignored and the connection
// proceeds as without.
const (
	fastOpenSysctl   = "net.ipv4.tcp_fastopen"
	fastOpenServer   = "3" // client (1) and server (2)
	fastOpenQueueLen = 256
)

// buildAddressedHost configures a host whose kernel owns eth0's address.
func (l *Lab) buildAddressedHost(host, addr string) error {
	ns := l.NS(host)
	err := ipBatch(ns, []string{
		"link set lo up",
		fmt.Sprintf("addr add %s/%d dev %s", addr, PrefixLen, hostDev),
		"link set " + hostDev + " up",
	})
	if err != nil {
		return err
	}
	return l.linkOffloads(ns, hostDev)
}

// buildFrontendBridge makes the front-end host a small hypervisor: eth0
// and the front-end's TAP on a bridge, the kernel's own address (control
// traffic, admin) on the bridge. Offloads go off on the bridge too, or the
// kernel's control datagrams would leave with partial checksums that a
// shim's TAP cannot complete.
func (l *Lab) buildFrontendBridge() error {
	ns := l.NS("fe")
	err := ipBatch(ns, []string{
		"link set lo up",
		"link add name " + feBridgeDev + " type bridge",
		"link set " + hostDev + " master " + feBridgeDev + " up",
		fmt.Sprintf("addr add %s/%d dev %s", FrontendAddr, PrefixLen, feBridgeDev),
		"link set " + feBridgeDev + " up",
	})
	if err != nil {
		return err
	}
	for _, dev := range []string{hostDev, feBridgeDev} {
		if err := l.linkOffloads(ns, dev); err != nil {
			return err
		}
	}
	return l.ensureFrontendTap()
}

// ensureFrontendTap (re)creates the front-end's TAP on its bridge; like
// tap0 it vanishes when the daemon that opened it exits.
func (l *Lab) ensureFrontendTap() error {
	ns := l.NS("fe")
	if !linkExists(ns, frontendTapDev) {
		err := ipBatch(ns, []string{
			"tuntap add " + frontendTapDev + " mode tap",
			"link set " + frontendTapDev + " master " + feBridgeDev + " up",
		})
		if err != nil {
			return err
		}
	}
	return offloadsOff(ns, frontendTapDev)
}

// ensureTap creates back-end k's tap0 if it is missing and resets its
// offloads either way. It is needed again after a back-end shim exits:
// the shim's TAP library clears the persist flag on close, which deletes
// the device, and offloads set on a TAP outlive the process that set them.
func (l *Lab) ensureTap(k int) error {
	ns := l.NS(backendHost(k))
	if !linkExists(ns, tapDev) {
		err := ipBatch(ns, []string{
			"tuntap add " + tapDev + " " + l.tapMode(),
			fmt.Sprintf("link set %s address %s", tapDev, l.BackendMAC(k)),
			fmt.Sprintf("addr add %s/%d dev %s", l.BackendAddr(k), PrefixLen, tapDev),
			"link set " + tapDev + " up",
		})
		if err != nil {
			return err
		}
	}
	return offloadsOff(ns, tapDev)
}

// tapMode is the ip-tuntap mode of a back-end's tap0. The offload shim
// attaches one queue per worker; a device made in the other queue mode
// it would have to delete and make again.
func (l *Lab) tapMode() string {
	if l.cfg.Offloads && l.shimWorkers() > 1 {
		return "mode tap multi_queue"
	}
	return "mode tap"
}

// shimWorkers is how many packet loops each back-end shim runs: one per
// CPU, the daemon's own default, passed to it explicitly (-workers) so
// that its TAP is made in the queue mode it needs.
func (l *Lab) shimWorkers() int { return runtime.NumCPU() }

// topologyComplete reports whether every namespace and device of the lab
// exists, and names the first missing piece otherwise.
func (l *Lab) topologyComplete() (bool, string) {
	sw := l.NS("sw")
	if !linkExists(sw, bridgeDev) {
		return false, sw + " " + bridgeDev
	}
	for _, h := range l.Hosts() {
		if !linkExists(sw, h) {
			return false, sw + " " + h
		}
		if l.vmHost(h) {
			continue
		}
		if !linkExists(l.NS(h), hostDev) {
			return false, l.NS(h) + " " + hostDev
		}
	}
	for k := 1; k <= l.cfg.Backends; k++ {
		if l.isVM(k) {
			continue
		}
		if !linkExists(l.NS(backendHost(k)), tapDev) {
			return false, l.NS(backendHost(k)) + " " + tapDev
		}
	}
	return true, ""
}

// linkExists reports whether the namespace exists and holds the device.
func linkExists(ns, dev string) bool {
	if !netns.Exists(ns) {
		return false
	}
	return netns.Do(ns, func() error {
		_, err := net.InterfaceByName(dev)
		return err
	}) == nil
}

// ipBatch runs ip(8) commands in a namespace with one process.
func ipBatch(ns string, cmds []string) error {
	cmd := exec.Command("ip", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("lab: ip -n %s: %v: %s\ncommands:\n%s", ns, err,
			strings.TrimSpace(string(out)), strings.Join(cmds, "\n"))
	}
	return nil
}

// Offloads the lab turns off, with the name ethtool -k shows for each.
var offloads = []struct{ set, show string }{
	{"tx", "tx-checksumming"},
	{"tso", "tcp-segmentation-offload"},
	{"gso", "generic-segmentation-offload"},
	{"gro", "generic-receive-offload"},
}

// linkOffloads puts a veth end or bridge in the lab's offload mode: TX
// checksum offload, TSO, GSO and GRO all on (Config.Offloads, as on every
// real deployment: the daemons then move super-frames with virtio-net
// headers) or all off (frames on the wire are MTU-sized with complete
// checksums, for daemons without vnet headers).
func (l *Lab) linkOffloads(ns, dev string) error {
	if l.cfg.Offloads {
		return offloadsOn(ns, dev)
	}
	return offloadsOff(ns, dev)
}

// offloadsOn turns TX checksum offload, TSO, GSO and GRO on where the
// device supports them; features the device fixes off stay off.
func offloadsOn(ns, dev string) error {
	args := []string{"ethtool", "-K", dev}
	for _, o := range offloads {
		args = append(args, o.set, "on")
	}
	setOut, setErr := netns.Command(ns, args...).CombinedOutput()
	showOut, err := netns.Command(ns, "ethtool", "-k", dev).CombinedOutput()
	if err != nil {
		return fmt.Errorf("lab: ethtool -k %s in %s: %v: %s", dev, ns, err, strings.TrimSpace(string(showOut)))
	}
	if bad := offloadsIn(string(showOut), "off"); len(bad) > 0 {
		return fmt.Errorf("lab: %s in %s: cannot turn on %s (ethtool -K: %v: %s)",
			dev, ns, strings.Join(bad, ", "), setErr, strings.TrimSpace(string(setOut)))
	}
	return nil
}

// offloadsOff turns TX checksum offload, TSO, GSO and GRO (and hardware
// GRO and LRO) off with the ioctls of link.DisableOffloads, the same call
// a deployment makes for a wire without vnet headers, and fails naming
// any feature that stayed on.
func offloadsOff(ns, dev string) error {
	if err := netns.Do(ns, func() error { return link.DisableOffloads(dev) }); err != nil {
		return fmt.Errorf("lab: %s: %w", ns, err)
	}
	return nil
}

// offloadsIn parses ethtool -k output and returns the lab offloads whose
// state is want (on or off) and not fixed: those that did not change.
func offloadsIn(show, want string) []string {
	state := make(map[string]string)
	for _, line := range strings.Split(show, "\n") {
		if name, value, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "\t") {
			state[strings.TrimSpace(name)] = strings.TrimSpace(value)
		}
	}
	var bad []string
	for _, o := range offloads {
		v, ok := state[o.show]
		if !ok {
			continue // this ethtool does not know the feature at all
		}
		if strings.HasPrefix(v, want) && !strings.Contains(v, "[fixed]") {
			bad = append(bad, o.show+": "+v)
		}
	}
	return bad
}

// bridgeNetfilterKeys are br_netfilter's switches, per network namespace,
// present only while that module is loaded.
var bridgeNetfilterKeys = []string{
	"net.bridge.bridge-nf-call-iptables",
	"net.bridge.bridge-nf-call-ip6tables",
	"net.bridge.bridge-nf-call-arptables",
}

// bridgesSkipNetfilter keeps the lab's bridges plain layer-2 switches.
// A host that loaded br_netfilter (container runtimes do) makes every
// bridged frame traverse iptables in each new namespace too; measured in
// the front-end's profile, that was 8% of its CPU per short request,
// charged to the sendmmsg that put the frame on the bridge, and a cost the
// benchmark's proxy chain (plain veth, no bridge) never pays.
func bridgesSkipNetfilter(ns string) error {
	for _, key := range bridgeNetfilterKeys {
		path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil // br_netfilter is not loaded: nothing to turn off
		}
		if err := sysctlIn(ns, key, "0"); err != nil {
			return err
		}
	}
	return nil
}
