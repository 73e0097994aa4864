package lab

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCPIOWriterReadByCPIO checks the archive with GNU cpio, an
// independent reader: names, types, modes and contents (odd lengths
// exercise the 4-byte padding).
func TestCPIOWriterReadByCPIO(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("no cpio(1) to read the archive back")
	}
	var buf bytes.Buffer
	c := &cpioWriter{w: &buf}
	c.Dir("bin")
	c.File("bin/a", 0o755, []byte("abc"))
	c.File("bin/bb", 0o600, []byte("hello, world"))
	c.Symlink("bin/sh", "a")
	c.File("empty", 0o644, nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len()%4 != 0 {
		t.Errorf("archive length %d is not a multiple of 4", buf.Len())
	}
	dir := t.TempDir()
	cmd := exec.Command("cpio", "-i", "-d", "--quiet", "--no-absolute-filenames")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(buf.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v\n%s", err, out)
	}
	for name, want := range map[string]string{"bin/a": "abc", "bin/bb": "hello, world", "empty": ""} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	for name, perm := range map[string]os.FileMode{"bin/a": 0o755, "bin/bb": 0o600} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Mode().Perm() != perm {
			t.Errorf("%s: mode %v, %v; want %v", name, st.Mode().Perm(), err, perm)
		}
	}
	if target, err := os.Readlink(filepath.Join(dir, "bin/sh")); err != nil || target != "a" {
		t.Errorf("bin/sh -> %q, %v; want a", target, err)
	}
}

// TestGuestModulesOrderAndBuiltins resolves modules against a made-up
// modules directory: dependencies first, each once, built-ins skipped,
// dashes and underscores alike, compressed and unknown modules refused.
func TestGuestModulesOrderAndBuiltins(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "6.1.0-test")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("modules.builtin", "kernel/net/packet/af_packet.ko\n")
	write("modules.dep", strings.Join([]string{
		"kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko",
		"kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko",
		"kernel/net/core/failover.ko:",
		"kernel/drivers/virtio/virtio.ko:",
		"kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio.ko",
		"kernel/drivers/net/tun.ko:",
		"kernel/drivers/char/hw_random/virtio-rng.ko.xz: kernel/drivers/virtio/virtio.ko",
	}, "\n")+"\n")
	got, err := guestModules(dir, []string{"virtio_pci", "virtio_net", "tun", "af_packet"})
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, p := range got {
		rel = append(rel, strings.TrimPrefix(p, dir+"/"))
	}
	want := []string{
		"kernel/drivers/virtio/virtio.ko",
		"kernel/drivers/virtio/virtio_pci.ko",
		"kernel/net/core/failover.ko",
		"kernel/drivers/net/net_failover.ko",
		"kernel/drivers/net/virtio_net.ko",
		"kernel/drivers/net/tun.ko",
	}
	if !reflect.DeepEqual(rel, want) {
		t.Errorf("load order\n%v\nwant\n%v", rel, want)
	}
	if _, err := guestModules(dir, []string{"virtio-rng"}); err == nil || !strings.Contains(err.Error(), "compressed") {
		t.Errorf("a compressed module: err %v, want a refusal naming compression", err)
	}
	if _, err := guestModules(dir, []string{"e1000"}); err == nil {
		t.Error("an unknown module was accepted")
	}
}

func TestIsStaticELF(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary links libc when cgo is on (the race detector needs
	// it), so only check what the ELF headers say against file(1)'s view
	// where a static busybox is at hand.
	if _, err := isStaticELF(self); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(busyboxPath); err == nil {
		out, _ := exec.Command("file", "-L", busyboxPath).Output()
		static, err := isStaticELF(busyboxPath)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Contains(string(out), "statically linked"); len(out) > 0 && static != want {
			t.Errorf("%s: static %v, file(1) says %q", busyboxPath, static, out)
		}
	}
	for _, dynamic := range []string{"/bin/ls", "/usr/bin/env"} {
		if static, err := isStaticELF(dynamic); err == nil && static {
			t.Errorf("%s reported static", dynamic)
		}
	}
}

func TestParseVMHosts(t *testing.T) {
	got, fe, err := ParseVMHosts("b1, b3,")
	if err != nil || fe || !reflect.DeepEqual(got, []int{1, 3}) {
		t.Errorf("b1, b3,: %v, %v, %v", got, fe, err)
	}
	if got, fe, err := ParseVMHosts("fe,b2"); err != nil || !fe || !reflect.DeepEqual(got, []int{2}) {
		t.Errorf("fe,b2: %v, %v, %v", got, fe, err)
	}
	if got, fe, err := ParseVMHosts(""); err != nil || fe || got != nil {
		t.Errorf("empty: %v, %v, %v", got, fe, err)
	}
	for _, bad := range []string{"b0", "c1", "b", "bx", "b-1", "fe1"} {
		if _, _, err := ParseVMHosts(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseVMHosts(f *testing.F) {
	for _, s := range []string{"b1,b2", "fe", "", "b01", " b7 ,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ks, _, err := ParseVMHosts(s)
		if err != nil {
			return
		}
		for _, k := range ks {
			if k < 1 {
				t.Fatalf("%q gave back-end %d", s, k)
			}
		}
	})
}

func TestVMConfigChecks(t *testing.T) {
	cfg := DefaultConfig("vmc")
	cfg.Backends = 2
	cfg.VMBackends = []int{3}
	if _, err := cfg.normalized(); err == nil || !strings.Contains(err.Error(), "b3") {
		t.Errorf("a VM back-end outside b1..b2: err %v", err)
	}
	cfg.VMBackends = []int{2}
	cfg.VMKernel = "/boot/vmlinuz-test"
	cfg.ReadyTimeout = time.Second
	n, err := cfg.normalized()
	if err != nil {
		t.Fatal(err)
	}
	if n.ReadyTimeout < vmBootTimeout {
		t.Errorf("ReadyTimeout %v with a VM back-end, want at least %v", n.ReadyTimeout, vmBootTimeout)
	}
	l := newLab(n)
	if !l.vmHost("b2") || l.vmHost("b1") || l.vmHost("fe") {
		t.Error("vmHost does not match VMBackends")
	}
	if spec := l.vmSpec(2); spec.host != "sw" || !slices.Contains(spec.argv, "tap,id=n0,ifname=b2,script=no,downscript=no,vnet_hdr=on") {
		t.Errorf("VM spec %+v: want QEMU in the switch on TAP b2", spec.argv)
	}
}
