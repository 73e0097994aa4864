package link

import (
	"encoding/binary"
	"fmt"

	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Fanout spreads the frames of one interface over several AF_PACKET
// sockets, one per worker (PACKET_FANOUT): every socket opened with the
// same Group in a network namespace is a member, and each frame goes to
// exactly one member. Members must be opened with the same Mode.
type Fanout struct {
	// Group identifies the group in the socket's network namespace.
	Group uint16
	Mode  FanoutMode
}

// FanoutMode says how a group picks a frame's member.
type FanoutMode uint8

const (
	// FanoutPorts sends a TCP segment to member wire.PortsHash(sport, dport) % n
	// of the n members, with a classic BPF program (PACKET_FANOUT_CBPF),
	// so both directions of a connection land on the same member and
	// FanoutShard computes the member in userspace. Addresses are left
	// out so that a translation that rewrites them keeps a flow on its
	// member. Anything else (ARP, non-TCP, IPv4 fragments, IPv6) goes to
	// member 0.
	FanoutPorts FanoutMode = iota
	// FanoutHash uses the kernel's flow hash (PACKET_FANOUT_HASH). It is
	// symmetric too, but seeded per boot, so userspace cannot reproduce it.
	FanoutHash
	// FanoutCPU picks the member by the CPU that received the frame
	// (PACKET_FANOUT_CPU).
	FanoutCPU
)

// skfNetOff is SKF_NET_OFF of <linux/filter.h>: a classic BPF load at
// skfNetOff+k reads byte k of the network header. The fanout program sees
// incoming frames with skb->data at the network header and outgoing ones
// at the Ethernet header, so absolute offsets would differ by direction;
// network-relative ones do not.
const skfNetOff = -0x100000

// fanoutPortsProgram is FanoutPorts' classic BPF program. The kernel takes
// its return value modulo the number of members.
var fanoutPortsProgram = mustAssemble([]bpf.Instruction{
	bpf.LoadExtension{Num: bpf.ExtProto}, // skb->protocol, VLAN tag already removed
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeIP4, SkipTrue: 13},
	bpf.LoadAbsolute{Off: netOff(9), Size: 1}, // IPv4 protocol
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.IPPROTO_TCP, SkipTrue: 11},
	bpf.LoadAbsolute{Off: netOff(6), Size: 2},                   // flags and fragment offset
	bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x3fff, SkipTrue: 9}, // MF or an offset: no ports in every fragment
	bpf.LoadMemShift{Off: netOff(0)},                            // X = IPv4 header length
	bpf.LoadIndirect{Off: netOff(0), Size: 2},                   // source port
	bpf.StoreScratch{Src: bpf.RegA, N: 0},
	bpf.LoadIndirect{Off: netOff(2), Size: 2}, // destination port
	bpf.LoadScratch{Dst: bpf.RegX, N: 0},
	bpf.ALUOpX{Op: bpf.ALUOpXor},
	bpf.ALUOpConstant{Op: bpf.ALUOpMul, Val: wire.PortsHashMul}, // wire.PortsHash
	bpf.ALUOpConstant{Op: bpf.ALUOpShiftRight, Val: 16},
	bpf.RetA{},
	bpf.RetConstant{Val: 0}, // a failed load also ends the program with 0
})

func netOff(k int) uint32 { return uint32(int32(skfNetOff + k)) }

// mustAssemble assembles a program known to be well formed into the
// form setsockopt takes.
func mustAssemble(prog []bpf.Instruction) []unix.SockFilter {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		panic("link: " + err.Error())
	}
	out := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		out[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	return out
}

// FanoutShard returns the member of an n-member FanoutPorts group that
// receives frame, an Ethernet frame as AF_PACKET delivers it (no VLAN
// tag): wire.PortsHash(sport, dport) % n for an unfragmented IPv4 TCP segment,
// 0 for anything else. A worker uses it to tell which worker owns a flow.
func FanoutShard(frame []byte, n int) int {
	if n <= 1 || len(frame) < 14+20 || binary.BigEndian.Uint16(frame[offEtherType:]) != etherTypeIP4 {
		return 0
	}
	ip := frame[14:]
	if ip[9] != unix.IPPROTO_TCP || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
		return 0
	}
	ihl := int(ip[0]&0x0f) * 4
	if len(ip) < ihl+4 {
		return 0 // the kernel's load fails the same way
	}
	return int(wire.PortsHash(binary.BigEndian.Uint16(ip[ihl:]), binary.BigEndian.Uint16(ip[ihl+2:])) % uint32(n))
}

// joinFanout makes the socket a member of f's group. ignoreOutgoing
// carries PACKET_IGNORE_OUTGOING over: the group receives through its
// own hook, which the member's option does not reach.
func joinFanout(fd int, f *Fanout, ignoreOutgoing bool) error {
	var mode int
	switch f.Mode {
	case FanoutPorts:
		mode = unix.PACKET_FANOUT_CBPF
	case FanoutHash:
		mode = unix.PACKET_FANOUT_HASH
	case FanoutCPU:
		mode = unix.PACKET_FANOUT_CPU
	default:
		return fmt.Errorf("fanout: unknown mode %d", f.Mode)
	}
	if ignoreOutgoing {
		mode |= unix.PACKET_FANOUT_FLAG_IGNORE_OUTGOING
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT, int(f.Group)|mode<<16); err != nil {
		return fmt.Errorf("join fanout group %d: %w", f.Group, err)
	}
	if f.Mode != FanoutPorts {
		return nil
	}
	// The program belongs to the group; each member sets the same one,
	// which also covers a member that joins after the first closed.
	prog := unix.SockFprog{
		Len:    uint16(len(fanoutPortsProgram)),
		Filter: &fanoutPortsProgram[0],
	}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_PACKET, unix.PACKET_FANOUT_DATA, &prog); err != nil {
		return fmt.Errorf("set fanout group %d program: %w", f.Group, err)
	}
	return nil
}
