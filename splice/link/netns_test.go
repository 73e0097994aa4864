package link

import (
	"net"
	"testing"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
	"golang.org/x/net/bpf"
)

// Root-only scaffolding: two namespaces joined by a veth, standing in for
// two hosts on one wire.

const (
	vethA = "qsl0"
	vethB = "qsl1"
)

type vethPair struct {
	nsA, nsB   string
	macA, macB net.HardwareAddr
}

// newWire builds nsA/qsl0 (198.18.200.1/24) <-> nsB/qsl1 (198.18.200.2/24),
// with IPv6 off so the kernel emits no neighbour discovery noise. It skips
// when not root; everything goes away when the test ends.
func newWire(t testing.TB) vethPair {
	t.Helper()
	w := vethPair{nsA: nstest.New(t, "qs-linktest"), nsB: nstest.New(t, "qs-linktest")}
	disableIPv6(t, w.nsA)
	disableIPv6(t, w.nsB)
	nstest.Veth(t, w.nsA, vethA, w.nsB, vethB)
	nstest.Run(t, "ip", "-n", w.nsA, "addr", "add", "198.18.200.1/24", "dev", vethA)
	nstest.Run(t, "ip", "-n", w.nsB, "addr", "add", "198.18.200.2/24", "dev", vethB)
	w.macA = hardwareAddr(t, w.nsA, vethA)
	w.macB = hardwareAddr(t, w.nsB, vethB)
	return w
}

func disableIPv6(t testing.TB, ns string) {
	t.Helper()
	nstest.Run(t, "ip", "netns", "exec", ns, "sysctl", "-qw",
		"net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
}

func hardwareAddr(t testing.TB, ns, ifname string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	err := nstest.Do(ns, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err == nil {
			mac = ifi.HardwareAddr
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// openAFPacket opens an AFPacket inside ns, closed when the test ends.
func openAFPacket(t testing.TB, ns, ifname string, cfg AFPacketConfig) *AFPacket {
	t.Helper()
	var a *AFPacket
	err := nstest.Do(ns, func() error {
		var err error
		a, err = OpenAFPacket(ifname, cfg)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// onlyTestFrames is a filter keeping frames of etherTypeTest, so a reader
// sees nothing the kernel emits on its own.
func onlyTestFrames(t testing.TB) []bpf.RawInstruction {
	t.Helper()
	raw, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: offEtherType, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: etherTypeTest, SkipFalse: 1},
		bpf.RetConstant{Val: keepWholeFrame},
		bpf.RetConstant{Val: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// readMarker reads frames from l until one carries a test marker and
// returns the marker; other frames are skipped.
func readMarker(t *testing.T, l Link) string {
	t.Helper()
	buf := make([]byte, 2048)
	for {
		n, err := l.ReadFrame(buf)
		if err != nil {
			t.Fatalf("%s: %v", l.Name(), err)
		}
		if m := markerOf(buf[:n]); m != "" {
			return m
		}
	}
}
