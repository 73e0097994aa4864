package lab

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/tools/netns"
)

func TestTopologyOnly(t *testing.T) {
	requireRoot(t)
	cfg := topologyConfig(t)
	cfg.Clients = 2
	cfg.Offloads = false
	l := upLab(t, cfg)
	if l.Reused() {
		t.Fatal("a fresh lab reports Reused")
	}

	want := []string{l.NS("b1"), l.NS("b2"), l.NS("c1"), l.NS("c2"), l.NS("fe"), l.NS("sw")}
	got, err := netns.List(nsPrefix(cfg.Name))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("namespaces = %v, want %v", got, want)
	}

	for _, host := range []string{"c1", "c2"} {
		if err := ping(l, host, FrontendAddr); err != nil {
			t.Errorf("ping %s -> %s: %v", host, FrontendAddr, err)
		}
	}
	if err := ping(l, "fe", l.ClientAddr(2).String()); err != nil {
		t.Errorf("ping fe -> c2: %v", err)
	}

	// Back-end k: eth0 without address, tap0 with .20+k and its MAC.
	for k := 1; k <= 2; k++ {
		var eth0, tap0 *net.Interface
		var tapAddrs []net.Addr
		err := netns.Do(l.NS(backendHost(k)), func() error {
			var err error
			if eth0, err = net.InterfaceByName("eth0"); err != nil {
				return err
			}
			if tap0, err = net.InterfaceByName("tap0"); err != nil {
				return err
			}
			tapAddrs, err = tap0.Addrs()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if tap0.HardwareAddr.String() != l.BackendMAC(k).String() {
			t.Errorf("b%d tap0 MAC = %s, want %s", k, tap0.HardwareAddr, l.BackendMAC(k))
		}
		if len(tapAddrs) != 1 || tapAddrs[0].String() != l.BackendAddr(k).String()+"/24" {
			t.Errorf("b%d tap0 addresses = %v, want %s/24", k, tapAddrs, l.BackendAddr(k))
		}
		if eth0.Flags&net.FlagUp == 0 {
			t.Errorf("b%d eth0 is down", k)
		}
		out, err := runIn(l, backendHost(k), "ip", "-o", "addr", "show", "dev", "eth0")
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("b%d eth0 has addresses: %q (%v)", k, out, err)
		}
		out, err = runIn(l, backendHost(k), "ip", "-d", "link", "show", "dev", "eth0")
		if err != nil || !strings.Contains(out, "promiscuity 1") {
			t.Errorf("b%d eth0 not promiscuous: %q (%v)", k, out, err)
		}
	}

	// Offloads off on both ends of every veth and on the TAPs.
	devices := map[string][]string{"sw": {"c1", "c2", "fe", "b1", "b2"}, "c1": {"eth0"}, "fe": {"eth0"}, "b1": {"eth0", "tap0"}}
	for host, devs := range devices {
		for _, dev := range devs {
			out, err := runIn(l, host, "ethtool", "-k", dev)
			if err != nil {
				t.Fatal(err)
			}
			if bad := offloadsIn(out, "on"); len(bad) > 0 {
				t.Errorf("%s %s: offloads on: %v", host, dev, bad)
			}
		}
	}

	// IPv6 off everywhere, including devices created after the namespace.
	for _, host := range []string{"sw", "c1", "fe", "b2"} {
		out, err := runIn(l, host, "sysctl", "-n", "net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6")
		if err != nil || strings.Fields(out)[0] != "1" || strings.Fields(out)[1] != "1" {
			t.Errorf("%s: disable_ipv6 = %q (%v)", host, out, err)
		}
		if out, _ := runIn(l, host, "ip", "-6", "addr", "show"); strings.TrimSpace(out) != "" {
			t.Errorf("%s has IPv6 addresses:\n%s", host, out)
		}
	}

	// The bridges are plain switches: no iptables on bridged frames, also
	// where the machine loaded br_netfilter (then the switches exist and
	// a fresh namespace starts with them on).
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err == nil {
		for _, host := range []string{"sw", "fe"} {
			for _, key := range bridgeNetfilterKeys {
				if out, err := runIn(l, host, "sysctl", "-n", key); err != nil || strings.TrimSpace(out) != "0" {
					t.Errorf("%s: %s = %q (%v), want 0", host, key, out, err)
				}
			}
		}
	}

	// The key is private and 32 bytes of hex.
	fi, err := os.Stat(l.KeyPath())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode = %v, want 0600", fi.Mode().Perm())
	}
	if key, _ := os.ReadFile(l.KeyPath()); len(strings.TrimSpace(string(key))) != 64 {
		t.Errorf("key = %q, want 64 hex digits", key)
	}
	// Each back-end has its own key, derived from the master, as private.
	master, err := proto.LoadKey(l.KeyPath())
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= cfg.Backends; k++ {
		got, err := proto.LoadKey(l.BackendKeyPath(k))
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := proto.DeriveKey(master, uint32(k)); !bytes.Equal(got, want) {
			t.Errorf("back-end %d's key is not the one derived for it", k)
		}
	}
}

// runIn runs a command in a host's namespace and returns its output.
func runIn(l *Lab, host string, arg ...string) (string, error) {
	out, err := l.Command(host, arg...).CombinedOutput()
	return string(out), err
}

func TestUpTwiceIsIdempotent(t *testing.T) {
	requireRoot(t)
	cfg := topologyConfig(t)
	cfg.Backends = 1
	first := upLab(t, cfg)
	keyBefore, err := os.ReadFile(first.KeyPath())
	if err != nil {
		t.Fatal(err)
	}

	second, err := Up(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Reused() {
		t.Fatal("second Up rebuilt a complete lab")
	}
	keyAfter, _ := os.ReadFile(first.KeyPath())
	if string(keyBefore) != string(keyAfter) {
		t.Fatal("second Up replaced the key of the running lab")
	}
	if got, _ := netns.List(nsPrefix(cfg.Name)); len(got) != 4 {
		t.Fatalf("namespaces after two Ups = %v, want sw c1 fe b1", got)
	}

	// A different configuration under the same name replaces the lab.
	cfg.Backends = 2
	third, err := Up(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if third.Reused() {
		t.Fatal("Up with another configuration reused the old lab")
	}
	if ok, missing := third.topologyComplete(); !ok {
		t.Fatalf("rebuilt lab lacks %s", missing)
	}
	if err := ping(third, "c1", FrontendAddr); err != nil {
		t.Fatal(err)
	}
}

func TestHalfBuiltLabIsRebuilt(t *testing.T) {
	requireRoot(t)
	cfg := topologyConfig(t)
	cfg.Backends = 1
	upLab(t, cfg)
	// A content file from the first Up must survive the rebuild untouched.
	stamp := filepath.Join(cfg.StateDir, wwwDir, "b1")
	if err := os.MkdirAll(stamp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := netns.Delete(nsName(cfg.Name, "fe")); err != nil {
		t.Fatal(err)
	}
	l, err := Up(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l.Reused() {
		t.Fatal("Up reused a lab that had lost its front-end namespace")
	}
	if ok, missing := l.topologyComplete(); !ok {
		t.Fatalf("rebuilt lab lacks %s", missing)
	}
	if _, err := os.Stat(stamp); err != nil {
		t.Errorf("rebuild removed the content directory: %v", err)
	}
	if err := ping(l, "c1", FrontendAddr); err != nil {
		t.Fatal(err)
	}
}

func TestDownRemovesEverything(t *testing.T) {
	requireRoot(t)
	cfg := topologyConfig(t)
	cfg.StateDir = "" // the default, /run/qsplice/NAME
	l := upLab(t, cfg)
	if _, err := os.Stat(filepath.Join("/run/qsplice", cfg.Name, configFile)); err != nil {
		t.Fatalf("default state dir not used: %v", err)
	}
	if err := l.Down(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, cfg.Name, "")
	if err := Down(cfg.Name, ""); err != nil {
		t.Fatalf("second Down: %v", err)
	}
}

func TestDownOfMissingLabSucceeds(t *testing.T) {
	requireRoot(t)
	name := randomName(t)
	if err := Down(name, filepath.Join(t.TempDir(), "nothing")); err != nil {
		t.Fatal(err)
	}
	if err := Down(name, ""); err != nil {
		t.Fatal(err)
	}
	if err := Down("Bad-Name", ""); err == nil {
		t.Fatal("Down accepted an invalid name")
	}
}

func TestDownKillsStrayProcesses(t *testing.T) {
	requireRoot(t)
	cfg := topologyConfig(t)
	l := upLab(t, cfg)
	// A process the lab did not start keeps a namespace alive after
	// ip netns del; Down must end it.
	stray := l.Command("c1", "sleep", "300")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- stray.Wait() }()
	if err := Down(cfg.Name, cfg.StateDir); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err == nil {
		t.Fatal("stray process exited cleanly; want it killed")
	}
	assertGone(t, cfg.Name, cfg.StateDir)
}

func TestSysctl(t *testing.T) {
	requireRoot(t)
	l := upLab(t, topologyConfig(t))
	rootBefore, err := os.ReadFile("/proc/sys/net/ipv4/tcp_sack")
	if err != nil {
		t.Fatal(err)
	}
	want := "0"
	if strings.TrimSpace(string(rootBefore)) == "0" {
		want = "1"
	}
	if err := l.Sysctl("c1", "net.ipv4.tcp_sack", want); err != nil {
		t.Fatal(err)
	}
	if out, err := runIn(l, "c1", "sysctl", "-n", "net.ipv4.tcp_sack"); err != nil || strings.TrimSpace(out) != want {
		t.Fatalf("tcp_sack in c1 = %q (%v), want %s", out, err, want)
	}
	if out, _ := runIn(l, "fe", "sysctl", "-n", "net.ipv4.tcp_sack"); strings.TrimSpace(out) == want {
		t.Errorf("Sysctl on c1 changed fe too")
	}
	rootAfter, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_sack")
	if string(rootAfter) != string(rootBefore) {
		t.Fatalf("Sysctl changed the root namespace: %q -> %q", rootBefore, rootAfter)
	}
	if err := l.Sysctl("c9", "net.ipv4.tcp_sack", "1"); err == nil {
		t.Fatal("Sysctl accepted an unknown host")
	}
}

func TestUpRefusesForeignStateDir(t *testing.T) {
	requireRoot(t)
	cfg := topologyConfig(t)
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	precious := filepath.Join(cfg.StateDir, "thesis.tex")
	if err := os.WriteFile(precious, []byte("years of work"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Up(context.Background(), cfg); err == nil {
		t.Cleanup(func() { _ = Down(cfg.Name, cfg.StateDir) })
		t.Fatal("Up used a directory holding foreign files")
	}
	if err := Down(cfg.Name, cfg.StateDir); err != nil {
		t.Logf("Down: %v (expected: the directory is not the lab's)", err)
	}
	if _, err := os.Stat(precious); err != nil {
		t.Fatalf("foreign file removed: %v", err)
	}
	if got, _ := netns.List(nsPrefix(cfg.Name)); len(got) > 0 {
		t.Fatalf("namespaces built despite the refusal: %v", got)
	}
}

// TestTopologyOffloadsOn: with Config.Offloads every veth end and bridge
// keeps checksum offload, TSO, GSO and GRO on, and the hosts still reach
// each other (the kernels complete what the offloads leave open).
func TestTopologyOffloadsOn(t *testing.T) {
	requireRoot(t)
	cfg := topologyConfig(t)
	cfg.Backends = 1
	cfg.Offloads = true
	l := upLab(t, cfg)
	devices := map[string][]string{"sw": {"c1", "fe", "b1"}, "c1": {"eth0"}, "fe": {"eth0"}, "b1": {"eth0"}}
	for host, devs := range devices {
		for _, dev := range devs {
			out, err := runIn(l, host, "ethtool", "-k", dev)
			if err != nil {
				t.Fatal(err)
			}
			if off := offloadsIn(out, "off"); len(off) > 0 {
				t.Errorf("%s %s: offloads off with Config.Offloads: %v", host, dev, off)
			}
		}
	}
	if err := ping(l, "c1", FrontendAddr); err != nil {
		t.Errorf("ping c1 -> %s: %v", FrontendAddr, err)
	}
}
