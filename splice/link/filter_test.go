package link

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/net/bpf"
)

func TestFilterIPv4Dst(t *testing.T) {
	vip := netip.MustParseAddr("198.18.0.10")
	other := netip.MustParseAddr("198.18.0.11")
	handoff := netip.MustParseAddr("198.18.0.20")
	src := netip.MustParseAddr("198.18.1.1")
	macA := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macB := net.HardwareAddr{2, 0, 0, 0, 0, 2}

	ipv6 := ethernet(macA, macB, 0x86DD, make([]byte, 40))
	tests := []struct {
		name  string
		frame []byte
		keep  bool
	}{
		{"ARP request", arpFrame(broadcastMAC, macB, 1, macB, src, make(net.HardwareAddr, 6), other), true},
		{"IPv4 to first address", ipv4Frame(macA, macB, src, vip, 6, make([]byte, 20)), true},
		{"IPv4 to last address", ipv4Frame(macA, macB, src, handoff, 17, make([]byte, 8)), true},
		{"IPv4 to another address", ipv4Frame(macA, macB, src, other, 6, make([]byte, 20)), false},
		{"IPv4 from a listed address", ipv4Frame(macA, macB, vip, other, 6, make([]byte, 20)), false},
		{"IPv6", ipv6, false},
		{"experimental EtherType", testFrame(macB, "x"), false},
		{"IPv4 runt without destination", ipv4Frame(macA, macB, src, vip, 6, nil)[:20], false},
		{"empty", nil, false},
	}

	vm, err := bpf.NewVM(disassemble(t, FilterIPv4Dst([]netip.Addr{vip, handoff})))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, err := vm.Run(tt.frame)
			if err != nil {
				t.Fatal(err)
			}
			if tt.keep && kept < len(tt.frame) {
				t.Errorf("kept %d of %d bytes, want the whole frame", kept, len(tt.frame))
			}
			if !tt.keep && kept != 0 {
				t.Errorf("kept %d bytes, want the frame dropped", kept)
			}
		})
	}
}

func TestFilterIPv4DstWithoutAddressesKeepsOnlyARP(t *testing.T) {
	vm, err := bpf.NewVM(disassemble(t, FilterIPv4Dst(nil)))
	if err != nil {
		t.Fatal(err)
	}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	a := netip.MustParseAddr("198.18.0.1")
	if n, _ := vm.Run(arpFrame(broadcastMAC, mac, 1, mac, a, mac, a)); n == 0 {
		t.Error("ARP dropped")
	}
	if n, _ := vm.Run(ipv4Frame(mac, mac, a, a, 6, nil)); n != 0 {
		t.Error("IPv4 kept with an empty address list")
	}
}

func TestFilterIPv4DstUnmapsAndRejectsIPv6(t *testing.T) {
	mapped := netip.MustParseAddr("::ffff:198.18.0.10")
	plain := netip.MustParseAddr("198.18.0.10")
	if got, want := FilterIPv4Dst([]netip.Addr{mapped}), FilterIPv4Dst([]netip.Addr{plain}); !slices.Equal(got, want) {
		t.Errorf("mapped address compiled differently: %v vs %v", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("IPv6 address accepted")
		}
	}()
	FilterIPv4Dst([]netip.Addr{netip.MustParseAddr("2001:db8::1")})
}

// TestFilterIPv4DstScalesWithoutLongJumps checks the layout that keeps every
// conditional jump short: a long list must still reach its last address.
func TestFilterIPv4DstScalesWithoutLongJumps(t *testing.T) {
	addrs := make([]netip.Addr, 600)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})
	}
	vm, err := bpf.NewVM(disassemble(t, FilterIPv4Dst(addrs)))
	if err != nil {
		t.Fatal(err)
	}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	src := netip.MustParseAddr("198.18.0.1")
	if n, _ := vm.Run(ipv4Frame(mac, mac, src, addrs[len(addrs)-1], 6, nil)); n == 0 {
		t.Error("last of 600 addresses dropped")
	}
	if n, _ := vm.Run(ipv4Frame(mac, mac, src, netip.MustParseAddr("198.19.9.9"), 6, nil)); n != 0 {
		t.Error("unlisted address kept")
	}
}

func disassemble(t *testing.T, raw []bpf.RawInstruction) []bpf.Instruction {
	t.Helper()
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("filter does not disassemble: %v", prog)
	}
	return prog
}

// The front-end's filter with its host's control address keeps UDP to
// that address, and nothing else of the host's.
func TestFilterIPv4DstAndUDPKeepsTheControlDatagrams(t *testing.T) {
	vip := netip.MustParseAddr("198.18.0.100")
	host := netip.MustParseAddr("198.18.0.2")
	src := netip.MustParseAddr("198.18.0.21")
	macA := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macB := net.HardwareAddr{2, 0, 0, 0, 0, 2}
	vm, err := bpf.NewVM(disassemble(t, FilterIPv4DstAndUDP([]netip.Addr{vip}, host)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		frame []byte
		keep  bool
	}{
		{"UDP to the host", ipv4Frame(macA, macB, src, host, 17, make([]byte, 8)), true},
		{"TCP to the host (its admin server)", ipv4Frame(macA, macB, src, host, 6, make([]byte, 20)), false},
		{"ICMP to the host", ipv4Frame(macA, macB, src, host, 1, make([]byte, 8)), false},
		{"UDP to another address", ipv4Frame(macA, macB, src, netip.MustParseAddr("198.18.0.3"), 17, make([]byte, 8)), false},
		{"TCP to the VIP", ipv4Frame(macA, macB, src, vip, 6, make([]byte, 20)), true},
		{"UDP runt to the host", ipv4Frame(macA, macB, src, host, 17, nil)[:23], false},
	} {
		kept, err := vm.Run(tt.frame)
		if err != nil {
			t.Fatal(err)
		}
		if tt.keep != (kept >= len(tt.frame) && kept > 0) {
			t.Errorf("%s: kept %d of %d bytes, want kept %v", tt.name, kept, len(tt.frame), tt.keep)
		}
	}
	if got, want := FilterIPv4DstAndUDP([]netip.Addr{vip}, netip.Addr{}), FilterIPv4Dst([]netip.Addr{vip}); !slices.Equal(got, want) {
		t.Error("without a UDP address the filter is not FilterIPv4Dst's")
	}
}
