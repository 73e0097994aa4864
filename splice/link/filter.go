package link

import (
	"fmt"
	"net/netip"

	"golang.org/x/net/bpf"
)

// Offsets into an untagged Ethernet frame carrying IPv4. AF_PACKET hands
// the filter the frame with any VLAN tag already stripped by the kernel.
const (
	offEtherType = 12
	offIPv4Dst   = 14 + 16
	offIPv4Proto = 14 + 9
	ipProtoUDP   = 17
	etherTypeIP4 = 0x0800
	etherTypeARP = 0x0806
	// keepWholeFrame is the filter's "accept" verdict: the number of bytes
	// to keep, larger than any frame, so nothing is cut.
	keepWholeFrame = 0xFFFFFFFF
)

// FilterIPv4Dst returns a classic BPF program for AFPacketConfig.Filter that
// accepts ARP frames and IPv4 frames whose destination address is one of
// addrs, and drops everything else (IPv6, other IPv4 traffic, runts).
//
// Each address costs two instructions, each followed by its own accept, so
// no jump is longer than one instruction whatever the number of addresses;
// the kernel limit of 4096 instructions allows about 2000 addresses.
// FilterIPv4Dst panics if an address is not IPv4 (IPv4-mapped IPv6 addresses
// are unmapped): that is a caller bug that would otherwise silently drop
// the traffic it meant to keep.
func FilterIPv4Dst(addrs []netip.Addr) []bpf.RawInstruction {
	return FilterIPv4DstAndUDP(addrs, netip.Addr{})
}

// FilterIPv4DstAndUDP is FilterIPv4Dst that also accepts the IPv4 UDP
// datagrams (and their fragments) to udp, when it is valid: the
// front-end takes the datagrams for its host's control socket off its
// link (splice/fe_control.go), and no other traffic of the host. It
// panics as FilterIPv4Dst does.
func FilterIPv4DstAndUDP(addrs []netip.Addr, udp netip.Addr) []bpf.RawInstruction {
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offEtherType, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeARP, SkipTrue: 1},
		bpf.RetConstant{Val: keepWholeFrame},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: etherTypeIP4, SkipTrue: 1},
		bpf.RetConstant{Val: 0},
		// A frame too short for this load ends the program with verdict 0.
		bpf.LoadAbsolute{Off: offIPv4Dst, Size: 4},
	}
	for _, addr := range addrs {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: ipv4Word(addr), SkipTrue: 1},
			bpf.RetConstant{Val: keepWholeFrame},
		)
	}
	if udp.IsValid() {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: ipv4Word(udp), SkipTrue: 3},
			bpf.LoadAbsolute{Off: offIPv4Proto, Size: 1},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: ipProtoUDP, SkipTrue: 1},
			bpf.RetConstant{Val: keepWholeFrame},
		)
	}
	prog = append(prog, bpf.RetConstant{Val: 0})
	raw, err := bpf.Assemble(prog)
	if err != nil {
		// Every instruction above is well formed; this cannot happen.
		panic("link: FilterIPv4Dst: " + err.Error())
	}
	return raw
}

// ipv4Word is addr as the filter loads it, unmapped; it panics if addr is
// not IPv4 (see FilterIPv4Dst).
func ipv4Word(addr netip.Addr) uint32 {
	addr = addr.Unmap()
	if !addr.Is4() {
		panic(fmt.Sprintf("link: FilterIPv4Dst: %v is not an IPv4 address", addr))
	}
	a4 := addr.As4()
	return uint32(a4[0])<<24 | uint32(a4[1])<<16 | uint32(a4[2])<<8 | uint32(a4[3])
}
