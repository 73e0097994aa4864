package backend

import (
	"github.com/qsplice/qsplice/splice/link"
)

// The kernel's SYN fast path in the daemon (issue 7): a TC program on
// the wire device's ingress (splice/link/synfast.go) hands every SYN that
// brings data, the front-end's Fast Open SYN with its cookie and request
// (splice.FrontEndConfig.FastOpenInSYN), straight into the TAP, so the
// back-end's kernel has the request without a wake-up of this process on
// the first byte's path. The workers still read their copy of such a SYN
// (AF_PACKET taps a frame before tc ingress) and learn from it, but do
// not write it (splice.ShimConfig.KernelSYNs). The program has no state:
// nothing to update per connection.

// SYNFastPathUsage documents the -syn-fastpath flag.
const SYNFastPathUsage = "let the kernel take the front-end's Fast Open SYNs, which carry their request, from the wire into the TAP itself (a TC program on the wire's ingress, through TCX on Linux 6.6+, else a clsact filter; needs CAP_BPF and CAP_NET_ADMIN, else a warning says why and they cross the shim; /status: syn_fastpath): a wake-up of this process less before each new connection's first byte"

// openSYNFastPath loads the program and attaches it to the wire's
// ingress, or leaves the daemon without it, saying why.
func (d *Daemon) openSYNFastPath(wireIndex, tapIndex int) {
	if !d.cfg.SYNFastPath {
		d.synState = "off"
		return
	}
	fp, err := link.NewSYNFastPath(d.cfg.Addr.As4(), tapIndex)
	if err == nil {
		if err = fp.AttachIngress(wireIndex); err != nil {
			fp.Close()
		}
	}
	if err != nil {
		d.synState = "off: " + err.Error()
		d.log.Warn("no SYN fast path: the front-end's SYNs cross the shim", bpfErrArgs(err)...)
		return
	}
	d.synFast, d.synState = fp, string(fp.Hook())+": ingress"
}
