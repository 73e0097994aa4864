package lab

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// A VM back-end boots from an initramfs the lab writes itself (newc
// cpio, uncompressed: the kernel unpacks it as it is), so nothing is
// downloaded and no image tool is needed: busybox-static for a shell and
// ip(8), the guest kernel's modules for the devices the shim uses, the
// project's static binaries, the back-end's key and an init script.

// cpioWriter writes a newc ("070701") archive.
type cpioWriter struct {
	w   io.Writer
	ino int
	err error
}

func (c *cpioWriter) header(name string, mode uint32, size int) {
	if c.err != nil {
		return
	}
	c.ino++
	nameSize := len(name) + 1
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, size, 0, 0, 0, 0, nameSize, 0)
	buf := append([]byte(hdr), name...)
	buf = append(buf, 0)
	buf = append(buf, make([]byte, pad4(len(buf)))...)
	_, c.err = c.w.Write(buf)
}

func (c *cpioWriter) data(b []byte) {
	if c.err != nil {
		return
	}
	if _, c.err = c.w.Write(b); c.err == nil {
		_, c.err = c.w.Write(make([]byte, pad4(len(b))))
	}
}

func pad4(n int) int { return (4 - n%4) % 4 }

// Dir adds a directory (its parents must come first).
func (c *cpioWriter) Dir(name string) { c.header(name, 0o040755, 0) }

// File adds a regular file with its content.
func (c *cpioWriter) File(name string, perm uint32, content []byte) {
	c.header(name, 0o100000|perm, len(content))
	c.data(content)
}

// Symlink adds a symbolic link.
func (c *cpioWriter) Symlink(name, target string) {
	c.header(name, 0o120777, len(target))
	c.data([]byte(target))
}

// Close writes the trailer.
func (c *cpioWriter) Close() error {
	c.header("TRAILER!!!", 0, 0)
	return c.err
}

// initramfsSpec is what goes into one guest's initramfs.
type initramfsSpec struct {
	busybox  string            // host path of a static busybox
	modules  []string          // host paths of .ko files, in load order
	binaries map[string]string // name in /bin -> host path (static)
	files    map[string][]byte // extra files (absolute guest path, mode 0600), e.g. the key
	init     string            // the /init script
}

// writeInitramfs writes the archive to path.
func writeInitramfs(path string, s initramfsSpec) error {
	// 0600: the archive holds the back-end's key.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	c := &cpioWriter{w: bw}
	for _, d := range []string{"bin", "dev", "proc", "sys", "tmp", "etc", "etc/qsplice", "lib", "lib/modules", "run"} {
		c.Dir(d)
	}
	add := func(guest, host string, perm uint32) {
		b, rerr := os.ReadFile(host)
		if rerr != nil {
			err = rerr
			return
		}
		c.File(guest, perm, b)
	}
	add("bin/busybox", s.busybox, 0o755)
	c.Symlink("bin/sh", "busybox")
	var order []string
	for _, m := range s.modules {
		name := filepath.Base(m)
		add("lib/modules/"+name, m, 0o644)
		order = append(order, name)
	}
	c.File("etc/qsplice/modules", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	for name, host := range s.binaries {
		add("bin/"+name, host, 0o755)
	}
	for name, content := range s.files {
		c.File(strings.TrimPrefix(name, "/"), 0o600, content)
	}
	c.File("init", 0o755, []byte(s.init))
	err = errors.Join(err, c.Close(), bw.Flush(), f.Close())
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("lab: initramfs %s: %w", path, err)
	}
	return nil
}

// guestModules returns the .ko files (dependencies first) that make the
// named modules available in a guest running the kernel whose modules are
// in dir (/lib/modules/VERSION); a module built into the kernel
// (modules.builtin) needs nothing. Compressed modules are refused:
// busybox's insmod takes plain ELF objects.
func guestModules(dir string, names []string) ([]string, error) {
	ver := filepath.Base(dir)
	builtin, err := os.ReadFile(filepath.Join(dir, "modules.builtin"))
	if err != nil {
		return nil, fmt.Errorf("lab: guest kernel %s: %w", ver, err)
	}
	depText, err := os.ReadFile(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("lab: guest kernel %s: %w", ver, err)
	}
	isBuiltin := make(map[string]bool)
	for _, line := range strings.Split(string(builtin), "\n") {
		if line != "" {
			isBuiltin[moduleName(line)] = true
		}
	}
	deps := make(map[string][]string) // module name -> [its path, dependency paths...]
	for _, line := range strings.Split(string(depText), "\n") {
		obj, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		deps[moduleName(obj)] = append([]string{obj}, strings.Fields(rest)...)
	}
	var out []string
	seen := make(map[string]bool)
	var visit func(name string) error
	visit = func(name string) error {
		if seen[name] || isBuiltin[name] {
			return nil
		}
		seen[name] = true
		entry, ok := deps[name]
		if !ok {
			return fmt.Errorf("lab: guest kernel %s has no module %s (neither built in nor in modules.dep)", ver, name)
		}
		for _, d := range entry[1:] {
			if err := visit(moduleName(d)); err != nil {
				return err
			}
		}
		if !strings.HasSuffix(entry[0], ".ko") {
			return fmt.Errorf("lab: guest module %s is compressed (%s); busybox insmod needs a plain .ko", name, entry[0])
		}
		out = append(out, filepath.Join(dir, entry[0]))
		return nil
	}
	for _, n := range names {
		if err := visit(strings.ReplaceAll(n, "-", "_")); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// moduleName turns "kernel/drivers/net/virtio_net.ko[.xz]" into
// "virtio_net" (module names use _ where file names may use -).
func moduleName(path string) string {
	base := filepath.Base(path)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// isStaticELF reports whether an executable has no program interpreter,
// i.e. runs without a dynamic loader (the guest has none).
func isStaticELF(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}
