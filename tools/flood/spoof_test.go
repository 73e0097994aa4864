package flood

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

func TestCheckSpoofPrefixRefusesEveryOtherRange(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		ok     bool
	}{
		{"198.18.128.0/17", true},
		{"198.18.200.0/24", true},
		{"198.18.255.255/32", true},
		{"198.18.128.7/17", true}, // host bits set: the masked prefix counts
		{"198.18.0.0/15", false},  // the whole lab range, lab hosts included
		{"198.18.0.0/17", false},  // the lab's own half
		{"198.18.127.0/24", false},
		{"198.19.0.0/17", false},
		{"10.0.0.0/8", false},
		{"0.0.0.0/0", false},
		{"198.18.128.0/16", false}, // masks to 198.18.0.0/16
	} {
		err := CheckSpoofPrefix(netip.MustParsePrefix(tc.prefix))
		if (err == nil) != tc.ok {
			t.Errorf("CheckSpoofPrefix(%s) = %v, want ok %v", tc.prefix, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrSpoofRange) {
			t.Errorf("CheckSpoofPrefix(%s) = %v, not ErrSpoofRange", tc.prefix, err)
		}
	}
	if err := CheckSpoofPrefix(netip.Prefix{}); err == nil {
		t.Error("the invalid prefix was accepted")
	}
	if err := CheckSpoofPrefix(netip.MustParsePrefix("2001:db8::/32")); err == nil {
		t.Error("an IPv6 prefix was accepted")
	}
}

func TestNewSynMakerRefusesOutsideTheSpoofRange(t *testing.T) {
	vip := netip.MustParseAddr("198.18.0.100")
	for _, p := range []string{"198.18.0.0/24", "192.0.2.0/24", "198.18.0.0/15"} {
		if _, err := NewSynMaker(wire.MAC{}, wire.MAC{}, vip, []uint16{80}, netip.MustParsePrefix(p), 1); !errors.Is(err, ErrSpoofRange) {
			t.Errorf("NewSynMaker with %s: %v, want ErrSpoofRange", p, err)
		}
	}
	// Run goes through NewSynMaker too: nothing is sent.
	_, err := Run(t.Context(), Config{Mode: ModeSYN, Target: vip, Ports: []uint16{80}, Rate: 1,
		Spoof: netip.MustParsePrefix("10.0.0.0/8")}, nil, nil)
	if !errors.Is(err, ErrSpoofRange) {
		t.Errorf("Run with 10.0.0.0/8: %v, want ErrSpoofRange", err)
	}
}

// TestSynMakerFrames: every frame is a valid SYN with exact checksums,
// from SpoofPrefix (or the narrower range asked for), never its network
// or broadcast address, to the target, with sources, ports and ISNs that
// vary.
func TestSynMakerFrames(t *testing.T) {
	src, dst := wire.MAC{2, 0, 0, 0, 0, 1}, wire.MAC{2, 0, 0, 0, 0, 2}
	vip := netip.MustParseAddr("198.18.0.100")
	for _, spoof := range []netip.Prefix{{}, netip.MustParsePrefix("198.18.200.0/30")} {
		m, err := NewSynMaker(src, dst, vip, []uint16{80, 8080}, spoof, 7)
		if err != nil {
			t.Fatal(err)
		}
		want := spoof
		if want == (netip.Prefix{}) {
			want = SpoofPrefix
		}
		addrs, sports, isns, dports := map[netip.Addr]bool{}, map[uint16]bool{}, map[wire.Seq]bool{}, map[uint16]bool{}
		b := make([]byte, MaxFrameLen)
		const n = 2000
		for range n {
			fl, a := m.Next(b)
			checkSYN(t, b[:fl], src, dst, wire.IP4From(vip))
			var p wire.Packet
			wire.Parse(b[:fl], &p)
			if got := p.IP.Src().Addr(); got != a || !want.Contains(a) {
				t.Fatalf("source %v (reported %v) outside %v", got, a, want)
			}
			if u, base := u32(a), u32(want.Addr()); u == base || u == base+1<<(32-want.Bits())-1 {
				t.Fatalf("source %v is the network or broadcast address of %v", a, want)
			}
			addrs[a], sports[p.TCP.SrcPort()], isns[p.TCP.Seq()], dports[p.TCP.DstPort()] = true, true, true, true
			if p.TCP.SrcPort() < FirstPort {
				t.Fatalf("source port %d below %d", p.TCP.SrcPort(), FirstPort)
			}
		}
		if spoof == (netip.Prefix{}) && (len(addrs) < n*9/10 || len(sports) < n*9/10) || len(isns) < n*99/100 {
			t.Errorf("%v: %d addresses, %d source ports, %d ISNs in %d SYNs: not random", want, len(addrs), len(sports), len(isns), n)
		}
		if spoof != (netip.Prefix{}) && len(addrs) != 2 {
			t.Errorf("%v: %d distinct sources, want the 2 usable addresses", want, len(addrs))
		}
		if len(dports) != 2 {
			t.Errorf("target ports %v, want both", dports)
		}
	}
}

func u32(a netip.Addr) uint32 { b := a.As4(); return binary.BigEndian.Uint32(b[:]) }

// checkSYN fails unless frame is an Ethernet/IPv4/TCP SYN with exact
// checksums between the given MACs to target.
func checkSYN(t *testing.T, frame []byte, src, dst wire.MAC, target wire.IP4) {
	t.Helper()
	if err := synError(frame, src, dst, target); err != nil {
		t.Fatal(err)
	}
}

// synError is checkSYN for goroutines other than the test's.
func synError(frame []byte, src, dst wire.MAC, target wire.IP4) error {
	var p wire.Packet
	if err := wire.Parse(frame, &p); err != nil || p.Kind != wire.KindTCP {
		return fmt.Errorf("frame does not parse as TCP: %v (kind %v)", err, p.Kind)
	}
	if p.Eth.Src() != src || p.Eth.Dst() != dst || p.IP.Dst() != target {
		return fmt.Errorf("frame %v -> %v, to %v", p.Eth.Src(), p.Eth.Dst(), p.IP.Dst())
	}
	if p.TCP.Flags() != wire.TCPFlagSYN {
		return fmt.Errorf("flags %#x, want SYN only", p.TCP.Flags())
	}
	if got, want := p.TCP.Checksum(), p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()); got != want {
		return fmt.Errorf("TCP checksum %#x, want %#x", got, want)
	}
	var o wire.TCPOptions
	if err := wire.ParseOptions(p.TCP, &o); err != nil || o.MSS != 1460 {
		return fmt.Errorf("options %+v (%v), want MSS 1460", o, err)
	}
	return nil
}
