package backend

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
	"github.com/qsplice/qsplice/tools/netns"
)

// TestSetupTAPWithoutIP: setupTAP gives a fresh TAP its MAC, address and
// up flag over netlink, twice in a row without error (a restart finds the
// device configured), with an empty PATH: the daemon runs no ip(8),
// whose exec would lose capabilities given as file capabilities.
func TestSetupTAPWithoutIP(t *testing.T) {
	requireRoot(t)
	ns := newNS(t, "qs-tapsetup") // before PATH goes: the cleanup runs ip(8)
	t.Setenv("PATH", "")
	mac := wire.MAC{0x02, 0x51, 0x50, 0x00, 0x00, 0x07}
	addr := netip.MustParsePrefix("198.18.7.21/24")
	err := netns.Do(ns, func() error {
		taps, err := link.OpenOffloadTAP("tap7", link.OffloadTAPConfig{Queues: 1})
		if err != nil {
			return err
		}
		defer taps[0].Close()
		for range 2 {
			if err := setupTAP("tap7", mac, addr); err != nil {
				return err
			}
		}
		ifi, err := net.InterfaceByName("tap7")
		if err != nil {
			return err
		}
		if wire.MAC(ifi.HardwareAddr) != mac {
			t.Errorf("MAC %s, want %s", ifi.HardwareAddr, mac)
		}
		if ifi.Flags&net.FlagUp == 0 {
			t.Errorf("flags %v, want up", ifi.Flags)
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return err
		}
		var v4 []string
		for _, a := range addrs {
			if p := netip.MustParsePrefix(a.String()); p.Addr().Is4() {
				v4 = append(v4, p.String())
			}
		}
		if len(v4) != 1 || v4[0] != addr.String() {
			t.Errorf("IPv4 addresses %v, want just %s", v4, addr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeleteLinkRemovesDevice: the multi-queue recreation path deletes
// the old TAP over netlink.
func TestDeleteLinkRemovesDevice(t *testing.T) {
	requireRoot(t)
	ns := newNS(t, "qs-tapdel")
	t.Setenv("PATH", "")
	err := netns.Do(ns, func() error {
		// A device that outlives its opener: made as the lab makes it.
		taps, err := link.OpenOffloadTAP("tap8", link.OffloadTAPConfig{Queues: 1})
		if err != nil {
			return err
		}
		if err := setupTAP("tap8", wire.MAC{}, netip.MustParsePrefix("198.18.8.21/24")); err != nil {
			return err
		}
		if err := deleteLink("tap8"); err != nil {
			return err
		}
		taps[0].Close()
		if tapExists("tap8") {
			return errors.New("tap8 still exists after deleteLink")
		}
		if err := deleteLink("tap8"); err == nil {
			return errors.New("deleteLink of a missing device: no error")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
