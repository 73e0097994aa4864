package lab

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"github.com/qsplice/qsplice/internal/privilege"
	"github.com/qsplice/qsplice/tools/netns"
	"golang.org/x/sys/unix"
)

// The lab runs the qsplice daemons the way contrib/systemd does: as an
// unprivileged user (Config.DaemonUID, DaemonGID; nobody by default)
// holding CAP_NET_ADMIN and CAP_NET_RAW as ambient capabilities, and
// CAP_BPF (the shim's TAP steering and fast paths, the front-end's SYN
// answer), and nothing else (README,
// "Privileges"). The lab itself stays root: it
// builds the topology and starts the web servers as before.
//
// A daemon is therefore not started through `ip netns exec`, which needs
// CAP_SYS_ADMIN in the process it runs: the lab enters the host's network
// namespace on a locked thread of its own and forks the daemon from
// there (a child is born in its parent thread's namespaces), with
// exec.Cmd's Credential and AmbientCaps. What the daemon opens must be
// reachable by its user: the lab makes its key files the user's, runs a
// copy of a binary the user cannot reach (daemonProgram) and checks every
// other path first (checkDaemonInputs).

// DaemonNobody is the default uid and gid of the lab's daemons.
const DaemonNobody = 65534

// daemonCredential is what the daemons run as; nil: as root, with
// -allow-root (DaemonUID 0, or a lab.json written before the field).
func (l *Lab) daemonCredential() *syscall.Credential {
	if l.cfg.DaemonUID == 0 {
		return nil
	}
	return &syscall.Credential{Uid: l.cfg.DaemonUID, Gid: l.cfg.DaemonGID, Groups: []uint32{}}
}

// daemonCommand returns the command for a daemon's argv, not started,
// with CAP_BPF beside the two it needs, as its unit gives it
// (privilege.OptionalBPF).
func (l *Lab) daemonCommand(argv []string) *exec.Cmd {
	cred := l.daemonCredential()
	if cred == nil {
		argv = append(argv[:1:1], append([]string{"-" + privilege.AllowRootFlag}, argv[1:]...)...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if cred != nil {
		cmd.SysProcAttr.Credential = cred
		cmd.SysProcAttr.AmbientCaps = privilege.CapsWithBPF
	}
	return cmd
}

// startDaemon starts cmd inside the host's network namespace. The thread
// that forks it enters the namespace and is never returned to the
// runtime (it stays locked, so the runtime ends it with its goroutine).
// When /dev/net/tun is closed to the daemons' user (a container's device
// node is often root's, mode 0600, where distributions make it 0666),
// the thread also gets a mount namespace of its own, with a tun node the
// user may open on a tmpfs over /dev/net: the daemon, born into it, sees
// that node; nothing changes for the rest of the machine.
func (l *Lab) startDaemon(host string, cmd *exec.Cmd) error {
	ns := l.NS(host)
	privateTun := false
	if cred := l.daemonCredential(); cred != nil {
		st, err := os.Stat(tunPath)
		if err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		privateTun = !permits(st, cred.Uid, cred.Gid, 6)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		errc <- func() error {
			fd, err := unix.Open(netns.Path(ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("lab: open namespace %s: %w", ns, err)
			}
			defer unix.Close(fd)
			if privateTun {
				if err := l.mountPrivateTun(); err != nil {
					return err
				}
			}
			if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("lab: enter namespace %s: %w", ns, err)
			}
			return cmd.Start()
		}()
	}()
	return <-errc
}

const tunPath = "/dev/net/tun"

// mountPrivateTun gives the calling (locked) thread a mount namespace in
// which /dev/net/tun is a node owned by the daemons' user.
func (l *Lab) mountPrivateTun() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("lab: private tun node: unshare: %w", err)
	}
	// Slave: nothing mounted here propagates back to the machine.
	if err := unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("lab: private tun node: %w", err)
	}
	if err := unix.Mount("qsplice-lab-tun", filepath.Dir(tunPath), "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=16k"); err != nil {
		return fmt.Errorf("lab: private tun node: mount tmpfs on %s: %w", filepath.Dir(tunPath), err)
	}
	if err := unix.Mknod(tunPath, unix.S_IFCHR|0o600, int(unix.Mkdev(10, 200))); err != nil {
		return fmt.Errorf("lab: private tun node: mknod: %w", err)
	}
	if err := unix.Chown(tunPath, int(l.cfg.DaemonUID), int(l.cfg.DaemonGID)); err != nil {
		return fmt.Errorf("lab: private tun node: %w", err)
	}
	return nil
}

// daemonProgram returns the program to run for a daemon: prog itself
// when the daemons' user can reach it, else a fresh copy in the state
// directory. Binaries built in a private directory (a checkout under a
// mode 0700 directory, say a CI runner's) then still run; the copy is
// made on every start, so a rebuilt binary is the one that runs, and a
// running daemon keeps the file it started from (rename, not overwrite).
func (l *Lab) daemonProgram(prog string) (string, error) {
	cred := l.daemonCredential()
	if cred == nil || reachable(prog, cred.Uid, cred.Gid, 1) == nil {
		return prog, nil
	}
	dir := l.statePath(binCopyDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("lab: %w", err)
	}
	dst := filepath.Join(dir, filepath.Base(prog))
	if err := copyExecutable(prog, dst); err != nil {
		return "", fmt.Errorf("lab: copy %s for the daemons' user: %w", prog, err)
	}
	return dst, nil
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// chownKeys gives the key files to the daemons' user: they must stay
// mode 0600 (proto.LoadKey refuses more), so owning them is the one way
// for that user to read them, at start and on every SIGHUP reload.
func (l *Lab) chownKeys() error {
	cred := l.daemonCredential()
	if cred == nil {
		return nil
	}
	paths := []string{l.KeyPath()}
	for k := 1; k <= l.cfg.Backends; k++ {
		paths = append(paths, l.BackendKeyPath(k))
	}
	for _, p := range paths {
		if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
	}
	return nil
}

// checkDaemonInputs fails, before a daemon starts, when its user cannot
// reach what it opens: its binary, the state directory (its working
// directory and key files) and the front-end's configuration file. Such
// a daemon would die with a permission error in its log; this names the
// directory at fault and the way out instead.
func (l *Lab) checkDaemonInputs(p procSpec) error {
	cred := l.daemonCredential()
	if cred == nil {
		return nil
	}
	type input struct {
		path string
		mode uint32 // 4 read, 1 execute (search, for a directory)
	}
	need := []input{{p.argv[0], 1}, {l.cfg.StateDir, 1}}
	if p.backend > 0 {
		need = append(need, input{l.BackendKeyPath(p.backend), 4})
	} else {
		need = append(need, input{l.KeyPath(), 4})
		if l.cfg.FrontendConfig != "" {
			need = append(need, input{l.cfg.FrontendConfig, 4})
		}
	}
	for _, n := range need {
		if err := reachable(n.path, cred.Uid, cred.Gid, n.mode); err != nil {
			return fmt.Errorf("lab: %s runs as uid %d gid %d with CAP_NET_ADMIN and CAP_NET_RAW only (Config.DaemonUID; README, \"Privileges\") "+
				"and cannot use %s: %w; keep the state directory and the front-end's configuration "+
				"where that user can reach them (lab.SharedTempDir makes such a directory)", p.name, cred.Uid, cred.Gid, n.path, err)
		}
	}
	return nil
}

// reachable checks that uid and gid (with no supplementary groups) may
// search every directory above path and access path itself with mode
// (4 read, 2 write, 1 execute), by the permission bits alone.
func reachable(path string, uid, gid uint32, mode uint32) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	var dirs []string
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		st, err := os.Stat(dirs[i])
		if err != nil {
			return err
		}
		if !permits(st, uid, gid, 1) {
			return fmt.Errorf("directory %s (owner %s, mode %04o) is closed to it", dirs[i], owner(st), st.Mode().Perm())
		}
	}
	st, err := os.Stat(abs)
	if err != nil {
		return err
	}
	if !permits(st, uid, gid, mode) {
		return fmt.Errorf("%s (owner %s, mode %04o) is closed to it", abs, owner(st), st.Mode().Perm())
	}
	return nil
}

// permits applies a file's permission bits for uid and gid to mode.
func permits(fi os.FileInfo, uid, gid uint32, mode uint32) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	perm := uint32(fi.Mode().Perm())
	switch {
	case st.Uid == uid:
		perm >>= 6
	case st.Gid == gid:
		perm >>= 3
	}
	return perm&mode == mode
}

func owner(fi os.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return strconv.Itoa(int(st.Uid)) + ":" + strconv.Itoa(int(st.Gid))
	}
	return "?"
}

// SharedTempDir creates a temporary directory that the lab's daemons may
// search (mode 0755 in the system's temporary directory), for binaries,
// state directories and configuration files the daemons must read: those
// of os.MkdirTemp and testing's TempDir are root's alone (mode 0700). The
// caller removes it.
func SharedTempDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", errors.Join(err, os.RemoveAll(dir))
	}
	return dir, nil
}
