package frontend

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
)

func checkableConfig() Config {
	return Config{
		Link: "nosuch0", VIPs: []netip.Addr{netip.MustParseAddr("198.18.0.100")},
		Handoff: netip.MustParseAddr("198.18.0.101"), Ports: []uint16{80},
		Control: netip.MustParseAddrPort("198.18.0.2:7400"), Key: proto.GenerateKey(),
	}
}

// TestCheckRefusesWhatNewWould: Check, which opens nothing, refuses the
// daemon's, the engine's and the scheduler's objections, so that
// `validate` and a start from flags fail before the link is opened.
func TestCheckRefusesWhatNewWould(t *testing.T) {
	if err := Check(checkableConfig()); err != nil {
		t.Fatalf("a good configuration: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no key", func(c *Config) { c.Key = nil }, "key"},
		{"IPv6 VIP", func(c *Config) { c.VIPs = []netip.Addr{netip.MustParseAddr("2001:db8::1")} }, "not IPv4"},
		// The engine's rule: a connection's whole life must outlast
		// its head timeout (30 s by default).
		{"head timeout beyond flow lifetime", func(c *Config) { c.HeadTimeout = 40 * time.Second }, "FlowLifetime"},
		{"unknown policy", func(c *Config) { c.Listeners = []Listener{{Port: 80, Policy: "lifo"}} }, "lifo"},
	} {
		cfg := checkableConfig()
		tc.change(&cfg)
		err := Check(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check = %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}
