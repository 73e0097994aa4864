package lab

import (
	"net/netip"
	"net/url"
	"strconv"
	"testing"

	"github.com/qsplice/qsplice/internal/exposition"
)

// The lab's daemons serve /status and /metrics on the default admin
// port (not 9100, node_exporter's), wherever the lab writes it down.
func TestLabUsesTheDefaultAdminPort(t *testing.T) {
	u, err := url.Parse(AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(exposition.DefaultAdminPort)
	if u.Port() != want || u.Hostname() != FrontendAddr {
		t.Errorf("AdminURL %s, want %s:%s", AdminURL, FrontendAddr, want)
	}
	if ap := netip.MustParseAddrPort(adminAddr); ap.Port() != exposition.DefaultAdminPort || ap.Addr().String() != FrontendAddr {
		t.Errorf("front-end -admin %s, want %s:%s", adminAddr, FrontendAddr, want)
	}
	if BackendAdminPort != exposition.DefaultAdminPort {
		t.Errorf("back-end admin port %d, want %d", BackendAdminPort, exposition.DefaultAdminPort)
	}
}
