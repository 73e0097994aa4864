package link

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
)

// offloadState reads `ethtool -k` for ifname in ns: feature name -> "on"/"off".
func offloadState(t *testing.T, ns, ifname string) map[string]string {
	t.Helper()
	out := nstest.Run(t, "ip", "netns", "exec", ns, "ethtool", "-k", ifname)
	state := map[string]string{}
	for line := range strings.Lines(out) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if ok {
			state[name], _, _ = strings.Cut(value, " ")
		}
	}
	return state
}

// The features ethtool -K tx/tso/gso/gro control, as ethtool -k names them.
var offloadFeatures = []string{
	"tx-checksumming", "tcp-segmentation-offload",
	"generic-segmentation-offload", "generic-receive-offload",
}

func TestDisableOffloads(t *testing.T) {
	if _, err := exec.LookPath("ethtool"); err != nil {
		t.Skip("ethtool not installed: nothing independent to check the result with")
	}
	ns := nstest.New(t, "qs-linktest")
	nstest.Run(t, "ip", "-n", ns, "link", "add", "qsoff0", "type", "veth", "peer", "name", "qsoff1")
	// Start from everything on, so the test sees each feature change.
	nstest.Run(t, "ip", "netns", "exec", ns, "ethtool", "-K", "qsoff0", "tx", "on", "tso", "on", "gso", "on", "gro", "on")
	before := offloadState(t, ns, "qsoff0")
	for _, f := range offloadFeatures {
		if before[f] != "on" {
			t.Fatalf("%s is %q before the test, want on", f, before[f])
		}
	}

	if err := nstest.Do(ns, func() error { return DisableOffloads("qsoff0") }); err != nil {
		t.Fatal(err)
	}
	after := offloadState(t, ns, "qsoff0")
	for _, f := range offloadFeatures {
		if after[f] != "off" {
			t.Errorf("%s is %q after DisableOffloads, want off", f, after[f])
		}
	}
	if other := offloadState(t, ns, "qsoff1"); other["tx-checksumming"] != "on" {
		t.Errorf("the peer's offloads changed too: tx-checksumming %q", other["tx-checksumming"])
	}
}

func TestDisableOffloadsErrorsNameTheInterface(t *testing.T) {
	ns := nstest.New(t, "qs-linktest")
	err := nstest.Do(ns, func() error { return DisableOffloads("qs-nosuchif") })
	if err == nil || !strings.Contains(err.Error(), "qs-nosuchif") {
		t.Fatalf("error %v does not name the interface", err)
	}
	if err := DisableOffloads("a-name-longer-than-ifnamsiz"); err == nil {
		t.Fatal("overlong name accepted")
	}
}

// TestDisableOffloadsReportsFixedFeatures uses loopback, whose checksum
// offload the driver fixes on.
func TestDisableOffloadsReportsFixedFeatures(t *testing.T) {
	ns := nstest.New(t, "qs-linktest")
	err := nstest.Do(ns, func() error { return DisableOffloads("lo") })
	if err == nil || !strings.Contains(err.Error(), "tx-checksum-ip-generic") {
		t.Fatalf("DisableOffloads(lo) = %v, want an error naming tx-checksum-ip-generic", err)
	}
}

func TestOffloadSelectionMatchesEthtoolKeywords(t *testing.T) {
	for name, want := range map[string]bool{
		"tx-checksum-ip-generic":       true,
		"tx-checksum-sctp":             true,
		"tx-tcp-segmentation":          true,
		"tx-tcp6-segmentation":         true,
		"tx-tcp-accecn-segmentation":   true,
		"tx-tcp-mangleid-segmentation": true,
		"tx-generic-segmentation":      true,
		"rx-gro":                       true,
		"rx-gro-hw":                    true,
		"rx-lro":                       true,
		"rx-checksum":                  false, // receive checksum validation is harmless
		"tx-scatter-gather":            false,
		"tx-udp-segmentation":          false,
		"rx-gro-list":                  false,
		"tx-gre-segmentation":          false,
	} {
		if got := isOffloadToDisable(name); got != want {
			t.Errorf("isOffloadToDisable(%q) = %v, want %v", name, got, want)
		}
	}
}
