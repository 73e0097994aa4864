package link

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	ebpflink "github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// What the kernel's fast paths (replyfast.go, synfast.go) share: loading
// a TC program written with the assembler, and attaching it to a
// device's ingress or egress: through TCX where the kernel has it (Linux
// 6.6 or later), else as a direct-action filter of the clsact qdisc, the
// way tc(8) attaches one ("tc filter add dev D ingress bpf da"), which
// Linux has had since 4.5 (Debian 12's 6.1 and the lab's VM guests).

// loadTC loads insns as a TC (SchedCLS) program called name; what names
// the fast path in errors, which carry the verifier's log when it
// refuses the program.
func loadTC(what, name string, insns asm.Instructions) (*ebpf.Program, error) {
	prog, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Name: name, Type: ebpf.SchedCLS, License: "Dual MIT/GPL", Instructions: insns,
	}, ebpf.ProgramOptions{})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("%s: the verifier refused the program: %+v", what, ve)
		}
		return nil, fmt.Errorf("%s: load the program: %w", what, err)
	}
	return prog, nil
}

// wireSYNChecks are the checks of a TC program that acts on a client's or
// a front-end's SYN from the wire: those every engine makes at ingress
// (splice/ingress.go) that need no address of its own -- IPv4 without
// options, TCP, not a fragment, TTL above 0, a unicast source MAC, a
// source that is not martian (0/8, 127/8, 224/4, 240/4) -- and TCP flags
// SYN without ACK, RST or FIN. They read the frame at R7, whose first
// fpTCP+20 bytes the program has checked, with R0 as scratch, and jump
// to fail on the first that does not hold. Addresses and lengths are
// each program's.
func wireSYNChecks(fail string) asm.Instructions {
	const (
		ethIPv4   = 0x0800
		flagsMask = 0x01 | 0x02 | 0x04 | 0x10 // FIN, SYN, RST, ACK
		flagSYN   = 0x02
	)
	return asm.Instructions{
		asm.LoadMem(asm.R0, asm.R7, 12, asm.Half),
		asm.JNE.Imm(asm.R0, be16(ethIPv4), fail),
		asm.LoadMem(asm.R0, asm.R7, 6, asm.Byte), // the source MAC's first byte
		asm.JSet.Imm(asm.R0, 1, fail),            // group bit: broadcast or multicast
		asm.LoadMem(asm.R0, asm.R7, fpIP, asm.Byte),
		asm.JNE.Imm(asm.R0, 0x45, fail), // IPv4, no options
		asm.LoadMem(asm.R0, asm.R7, fpIPProto, asm.Byte),
		asm.JNE.Imm(asm.R0, 6, fail),
		asm.LoadMem(asm.R0, asm.R7, fpIPFrag, asm.Half),
		asm.JSet.Imm(asm.R0, be16(0x3fff), fail), // MF or an offset
		asm.LoadMem(asm.R0, asm.R7, fpIP+8, asm.Byte),
		asm.JEq.Imm(asm.R0, 0, fail), // TTL
		asm.LoadMem(asm.R0, asm.R7, fpIPSrc, asm.Byte),
		asm.JEq.Imm(asm.R0, 0, fail),
		asm.JEq.Imm(asm.R0, 127, fail),
		asm.JGE.Imm(asm.R0, 224, fail),
		asm.LoadMem(asm.R0, asm.R7, fpFlags, asm.Byte),
		asm.And.Imm(asm.R0, flagsMask),
		asm.JNE.Imm(asm.R0, flagSYN, fail),
	}
}

// Hook names how a fast path's program is attached, for status pages.
type Hook string

const (
	HookTCX Hook = "tcx" // a TCX link (Linux 6.6 or later)
	HookTC  Hook = "tc"  // a clsact filter, for kernels without TCX
)

// tcAttachment is an attached program; Close detaches it.
type tcAttachment interface{ Close() error }

// attachTC runs prog, called name, at the ingress (or else the egress)
// of the device with index ifindex: through TCX, or where the kernel
// has none, a clsact filter. what and where name the fast path and the
// place in errors.
func attachTC(what, where, name string, ifindex int, prog *ebpf.Program, ingress bool) (tcAttachment, Hook, error) {
	attach := ebpf.AttachTCXEgress
	if ingress {
		attach = ebpf.AttachTCXIngress
	}
	l, err := ebpflink.AttachTCX(ebpflink.TCXOptions{Interface: ifindex, Program: prog, Attach: attach})
	if err == nil {
		return l, HookTCX, nil
	}
	if !errors.Is(err, ebpf.ErrNotSupported) {
		return nil, "", fmt.Errorf("%s: attach to %s (TCX): %w", what, where, err)
	}
	f, cerr := attachClsact(name, ifindex, prog, ingress)
	if cerr != nil {
		return nil, "", fmt.Errorf("%s: attach to %s: the kernel has no TCX (Linux 6.6+), and as a clsact filter: %w", what, where, cerr)
	}
	return f, HookTC, nil
}

// clsactFilter is a program attached as a clsact filter.
type clsactFilter struct{ filter *netlink.BpfFilter }

// The filter's place among the hook's: tc numbers from 1, and 1 runs
// first. Our filter replaces whatever holds the place, which is ours
// from a run that ended without Close (a crash, a kill): a clsact filter
// outlives its process, unlike a TCX link.
const clsactPriority, clsactHandle = 1, 1

// attachClsact adds the clsact qdisc to the device with index ifindex
// unless it has one, and prog, called name, as the first filter of its
// ingress (or egress) hook, in direct-action mode: the program's verdict
// is the frame's. It replaces the filter left in that place by an
// earlier run, and refuses to replace anyone else's.
func attachClsact(name string, ifindex int, prog *ebpf.Program, ingress bool) (*clsactFilter, error) {
	qdisc := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT,
	}}
	if err := netlink.QdiscAdd(qdisc); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("add the clsact qdisc: %w", err)
	}
	parent := uint32(netlink.HANDLE_MIN_EGRESS)
	if ingress {
		parent = netlink.HANDLE_MIN_INGRESS
	}
	dev, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return nil, fmt.Errorf("device %d: %w", ifindex, err)
	}
	held, err := netlink.FilterList(dev, parent)
	if err != nil {
		return nil, fmt.Errorf("list the hook's filters: %w", err)
	}
	for _, h := range held {
		a := h.Attrs()
		if a.Priority != clsactPriority || a.Handle != clsactHandle {
			continue
		}
		if b, ok := h.(*netlink.BpfFilter); !ok || b.Name != name {
			return nil, fmt.Errorf("another filter holds priority %d, handle %d (%s %+v); remove it or use a kernel with TCX", clsactPriority, clsactHandle, h.Type(), h)
		}
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: ifindex, Parent: parent, Handle: clsactHandle, Priority: clsactPriority, Protocol: unix.ETH_P_ALL,
		},
		Fd: prog.FD(), Name: name, DirectAction: true,
	}
	if err := netlink.FilterReplace(f); err != nil {
		return nil, fmt.Errorf("add the filter: %w", err)
	}
	return &clsactFilter{filter: f}, nil
}

// Close removes the filter (and leaves the qdisc, which may hold others').
func (c *clsactFilter) Close() error {
	if err := netlink.FilterDel(c.filter); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove the clsact filter %s: %w", c.filter.Name, err)
	}
	return nil
}
