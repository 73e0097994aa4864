package backend

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// The TAP is configured over rtnetlink from inside the daemon, not by
// running ip(8): the daemon runs unprivileged with CAP_NET_ADMIN and
// CAP_NET_RAW only (README, "Privileges"), and capabilities given to it as
// file capabilities (setcap) do not pass to a program it execs. Netlink
// also needs nothing on PATH, and its errors come back as errnos.

// setupTAP gives the TAP device the kernel's address (and MAC), and
// brings it up. The TAP is created by opening it; water clears its
// persist flag on close, so it vanishes whenever the shim stops and must
// be configured again on every start (docs/architecture.md §7). Every
// step is skipped when the device already has what it asks for, so a
// device made beforehand (the lab's) is left as it is.
func setupTAP(name string, mac wire.MAC, addr netip.Prefix) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("tap %s: %w", name, err)
	}
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		return fmt.Errorf("tap %s: rtnetlink: %w", name, err)
	}
	defer c.Close()
	index := uint32(ifi.Index)
	if mac != (wire.MAC{}) && wire.MAC(ifi.HardwareAddr) != mac {
		err := c.Link.Set(&rtnetlink.LinkMessage{
			Family:     unix.AF_UNSPEC,
			Index:      index,
			Attributes: &rtnetlink.LinkAttributes{Address: net.HardwareAddr(mac[:])},
		})
		if err != nil {
			return fmt.Errorf("tap %s: set MAC %s: %w", name, mac, err)
		}
	}
	if !hasAddr(ifi, addr.Addr()) {
		ip := net.IP(addr.Addr().AsSlice())
		// IFA_LOCAL and IFA_ADDRESS both hold the address on a broadcast
		// link, as ip(8) sends them; the kernel adds the prefix route.
		err := c.Address.New(&rtnetlink.AddressMessage{
			Family:       unix.AF_INET,
			PrefixLength: uint8(addr.Bits()),
			Scope:        unix.RT_SCOPE_UNIVERSE,
			Index:        index,
			Attributes:   &rtnetlink.AddressAttributes{Address: ip, Local: ip},
		})
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("tap %s: add address %s: %w", name, addr, err)
		}
	}
	if ifi.Flags&net.FlagUp == 0 {
		err := c.Link.Set(&rtnetlink.LinkMessage{
			Family: unix.AF_UNSPEC,
			Index:  index,
			Flags:  unix.IFF_UP,
			Change: unix.IFF_UP,
		})
		if err != nil {
			return fmt.Errorf("tap %s: set up: %w", name, err)
		}
	}
	return nil
}

// hasAddr tells whether the interface carries a.
func hasAddr(ifi *net.Interface, a netip.Addr) bool {
	addrs, _ := ifi.Addrs()
	for _, ia := range addrs {
		if p, err := netip.ParsePrefix(ia.String()); err == nil && p.Addr() == a {
			return true
		}
	}
	return false
}

// deleteLink removes a network device, as `ip link del` does.
func deleteLink(name string) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		return fmt.Errorf("delete %s: rtnetlink: %w", name, err)
	}
	defer c.Close()
	if err := c.Link.Delete(uint32(ifi.Index)); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

func tapExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}
