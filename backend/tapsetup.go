package backend

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"

	"github.com/qsplice/qsplice/splice/wire"
)

// setupTAP gives the TAP device the kernel's address (and MAC), and
// brings it up. The TAP is created by opening it; water clears its
// persist flag on close, so it vanishes whenever the shim stops and must
// be configured again on every start (docs/architecture.md §7).
func setupTAP(name string, mac wire.MAC, addr netip.Prefix) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("tap %s: %w", name, err)
	}
	if mac != (wire.MAC{}) && wire.MAC(ifi.HardwareAddr) != mac {
		if err := ipCmd("link", "set", "dev", name, "address", mac.String()); err != nil {
			return err
		}
	}
	addrs, _ := ifi.Addrs()
	have := false
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == addr.Addr() {
			have = true
		}
	}
	if !have {
		if err := ipCmd("addr", "add", addr.String(), "dev", name); err != nil {
			return err
		}
	}
	return ipCmd("link", "set", "dev", name, "up")
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func tapExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}
