package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/tools/netns"
	"golang.org/x/sys/unix"
)

// Process names, as used by StopProcess, StartProcess, pidfiles and logs.
func testserverName(k int) string { return "testserver-" + backendHost(k) }
func nginxName(k int) string      { return "nginx-" + backendHost(k) }
func backendName(k int) string    { return "backend-" + backendHost(k) }

const frontendName = "frontend"

// Grace periods when stopping a process group.
const (
	termGrace = 3 * time.Second // SIGTERM -> SIGKILL
	killGrace = 5 * time.Second // SIGKILL -> give up
)

// procSpec describes one supervised process of the lab.
type procSpec struct {
	name    string
	host    string
	argv    []string     // program and arguments, run under ip netns exec (a daemon's: privilege.go)
	prepare func() error // run before every start (files, devices)
	daemon  bool         // a qsplice daemon, started after the web servers are ready
	backend int          // the back-end this process serves, 0 for the front-end
	ready   *readyCheck  // when it is usable; nil: being alive is all there is to check
}

// processes lists the lab's processes in start order.
func (l *Lab) processes() []procSpec {
	var specs []procSpec
	bin := func(name string) string { return filepath.Join(l.cfg.BinDir, name) }
	for k := 1; k <= l.cfg.Backends; k++ {
		if l.isVM(k) {
			specs = append(specs, l.vmSpec(k)) // test server and shim inside the guest
			continue
		}
		if l.cfg.TestServer {
			specs = append(specs, procSpec{
				name: testserverName(k), host: backendHost(k),
				argv: append([]string{bin("qsplice-testserver"), "-listen", ":8080", "-id", strconv.Itoa(k),
					"-service-time", l.cfg.ServiceTime.String(), "-fast-open", strconv.Itoa(l.fastOpenQueue())},
					l.cfg.TestServerArgs...),
				backend: k,
				ready:   l.webCheck(k, 8080, testserverName(k)),
			})
		}
		if l.cfg.Nginx {
			p := l.nginxParams(k)
			specs = append(specs, procSpec{
				name: nginxName(k), host: backendHost(k),
				argv:    []string{nginxPath(), "-c", l.nginxConfPath(k), "-p", p.Dir, "-e", p.ErrorLog},
				prepare: func() error { return l.prepareNginx(k) },
				backend: k,
				ready:   l.webCheck(k, 80, nginxName(k)),
			})
		}
	}
	if !l.cfg.Daemons {
		return specs
	}
	for k := 1; k <= l.cfg.Backends; k++ {
		if l.isVM(k) {
			continue
		}
		argv := []string{bin("qsplice-backend"), "-id", strconv.Itoa(k), "-wire", hostDev, "-tap", tapDev,
			"-addr", l.BackendAddr(k).String(), "-frontend", controlAddr, "-control-port", controlPort,
			"-web-ports", webPorts, "-handoff", HandoffAddr, "-capacity", strconv.Itoa(l.cfg.Capacity), "-key", l.BackendKeyPath(k),
			"-tap-mac", l.BackendMAC(k).String(), "-admin", netip.AddrPortFrom(l.BackendAddr(k), BackendAdminPort).String(),
			"-offloads=" + strconv.FormatBool(l.cfg.Offloads), // vnet headers only where the links make super-frames
			"-workers", strconv.Itoa(l.shimWorkers())}
		specs = append(specs, procSpec{
			name: backendName(k), host: backendHost(k),
			argv:    append(argv, l.cfg.BackendArgs...),
			prepare: func() error { return l.ensureTap(k) },
			daemon:  true,
			backend: k,
		})
	}
	argv := []string{bin("qsplice-frontend"), "-link", hostDev, "-vip", VIP, "-handoff", HandoffAddr,
		"-ports", webPorts, "-control", controlAddr, "-admin", adminAddr, "-key", l.KeyPath()}
	fe := procSpec{name: frontendName, host: "fe", daemon: true, ready: l.frontendCheck()}
	if l.cfg.FrontendTAP {
		argv[2] = frontendTapDev
		argv = append(argv, "-link-type", "tap", "-mac", FrontendTAPMAC)
		fe.prepare = l.ensureFrontendTap
	}
	if l.cfg.FrontendConfig != "" {
		argv = []string{bin("qsplice-frontend"), "-config", l.cfg.FrontendConfig}
	}
	if l.cfg.FrontendConfigText != "" {
		argv = []string{bin("qsplice-frontend"), "-config", l.statePath(userConfigFile)}
	}
	fe.argv = append(argv, l.cfg.FrontendArgs...)
	if l.cfg.VMFrontend {
		fe = l.vmFrontendSpec(fe.argv) // the same command line, in a guest (vmfe.go)
	}
	specs = append(specs, fe)
	return specs
}

func nginxPath() string {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	return "nginx"
}

func (l *Lab) spec(name string) (procSpec, error) {
	var names []string
	for _, p := range l.processes() {
		if p.name == name {
			return p, nil
		}
		names = append(names, p.name)
	}
	return procSpec{}, fmt.Errorf("lab %s: no process %q (processes: %s)", l.cfg.Name, name, strings.Join(names, " "))
}

// checkPrograms fails early, before anything is built, when a program the
// configuration needs is missing.
func (l *Lab) checkPrograms() error {
	seen := make(map[string]bool)
	var errs []error
	for _, p := range l.processes() {
		prog := p.argv[0]
		if seen[prog] {
			continue
		}
		seen[prog] = true
		if _, err := exec.LookPath(prog); err != nil {
			errs = append(errs, fmt.Errorf("lab: %s needs %s: %w", p.name, prog, err))
		}
	}
	if len(l.cfg.VMBackends) > 0 {
		errs = append(errs, CheckVMSupport())
	}
	for _, tool := range []string{"ip", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			errs = append(errs, fmt.Errorf("lab: %w", err))
		}
	}
	return errors.Join(errs...)
}

// child is a process started by this Lab; a goroutine reaps it.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // result of Wait, valid after done is closed
}

// start runs a process in its host's namespace, in its own process group
// so that stopping it also stops what it forks (nginx workers), and so
// that it outlives the CLI that started it.
func (l *Lab) start(p procSpec) error {
	if p.prepare != nil {
		if err := p.prepare(); err != nil {
			return err
		}
	}
	if p.daemon {
		prog, err := l.daemonProgram(p.argv[0])
		if err != nil {
			return err
		}
		p.argv = append([]string{prog}, p.argv[1:]...)
		if err := l.checkDaemonInputs(p); err != nil {
			return err
		}
	}
	logf, err := os.OpenFile(l.LogPath(p.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	fmt.Fprintf(logf, "--- qsplice-lab %s: %s in %s: %s\n",
		time.Now().Format(time.RFC3339Nano), p.name, l.NS(p.host), strings.Join(p.argv, " "))
	var cmd *exec.Cmd
	start := func() error { return cmd.Start() }
	if p.daemon { // unprivileged, with two capabilities, the shim three (privilege.go)
		cmd = l.daemonCommand(p.argv)
		start = func() error { return l.startDaemon(p.host, cmd) }
	} else {
		cmd = netns.Command(l.NS(p.host), p.argv...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = l.cfg.StateDir
	err = start()
	logf.Close() // the child has its own copy
	if err != nil {
		return fmt.Errorf("lab: start %s: %w", p.name, err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	l.mu.Lock()
	l.children[p.name] = c
	l.mu.Unlock()
	pid := strconv.Itoa(cmd.Process.Pid) + "\n"
	if err := os.WriteFile(l.pidPath(p.name), []byte(pid), 0o644); err != nil {
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// procStatus is what the lab knows about one of its processes.
type procStatus struct {
	pid    int // 0 when there is no pidfile
	alive  bool
	detail string // why it is not alive
	c      *child // non-nil when this Lab started the recorded pid
}

func (l *Lab) status(p procSpec) procStatus {
	data, err := os.ReadFile(l.pidPath(p.name))
	if err != nil {
		return procStatus{detail: "not started"}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return procStatus{detail: "bad pidfile"}
	}
	s := procStatus{pid: pid}
	l.mu.Lock()
	if c := l.children[p.name]; c != nil && c.cmd.Process.Pid == pid {
		s.c = c
	}
	l.mu.Unlock()
	if s.c != nil {
		select {
		case <-s.c.done:
			s.detail = exitDetail(s.c.err)
		default:
			s.alive = true
		}
		return s
	}
	s.alive, s.detail = pidRuns(pid, filepath.Base(p.argv[0]))
	return s
}

func exitDetail(err error) string {
	if err == nil {
		return "exited with status 0"
	}
	return "exited: " + err.Error()
}

// pidRuns tells whether pid is a live process running program. Checking
// the executable guards against a recycled pid; /proc/PID/exe is used, not
// the command line, because nginx rewrites its argv.
func pidRuns(pid int, program string) (bool, string) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, "not running"
	}
	// The state follows the parenthesised command name, which may hold spaces.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false, "exited (zombie)"
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false, "not running"
	}
	exe = strings.TrimSuffix(exe, " (deleted)") // rebuilt binary
	if filepath.Base(exe) != program {
		return false, fmt.Sprintf("not running (pid %d is now %s)", pid, exe)
	}
	return true, ""
}

// stop ends a process group: SIGTERM, then SIGKILL after termGrace. It is
// not an error if the process is not running.
func (l *Lab) stop(p procSpec) error {
	s := l.status(p)
	if s.pid == 0 {
		return nil
	}
	if s.alive {
		_ = unix.Kill(-s.pid, unix.SIGTERM)
		if !waitGone(s.pid, s.c, termGrace) {
			_ = unix.Kill(-s.pid, unix.SIGKILL)
			if !waitGone(s.pid, s.c, killGrace) {
				return fmt.Errorf("lab: %s (pid %d) survives SIGKILL", p.name, s.pid)
			}
		}
		// Members of the group that outlived the leader get no grace.
		_ = unix.Kill(-s.pid, unix.SIGKILL)
	}
	if err := os.Remove(l.pidPath(p.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// waitGone waits up to d for pid to exit. For our own children the reaper
// goroutine says so; for others (started by an earlier CLI run) a pidfd
// becomes readable when the process exits.
func waitGone(pid int, c *child, d time.Duration) bool {
	if c != nil {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-c.done:
			return true
		case <-t.C:
			return false
		}
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true
	}
	if err != nil {
		return waitGoneByPolling(pid, d)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(d)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0
	}
}

// waitGoneByPolling is the fallback for kernels without pidfd_open.
func waitGoneByPolling(pid int, d time.Duration) bool {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			return true
		}
		<-tick.C
	}
	return false
}

// killNamespace kills whatever still runs in a namespace, so that deleting
// it really frees it. Used after the graceful stops, as a safety net for
// processes the lab has no pidfile for.
func killNamespace(ns string) error {
	pids, err := netns.Pids(ns)
	if err != nil || len(pids) == 0 {
		return err
	}
	for _, pid := range pids {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	var stuck []string
	for _, pid := range pids {
		if !waitGone(pid, nil, killGrace) {
			stuck = append(stuck, strconv.Itoa(pid))
		}
	}
	if len(stuck) > 0 {
		return fmt.Errorf("lab: processes in %s survive SIGKILL: %s", ns, strings.Join(stuck, " "))
	}
	return nil
}

// logTail returns the last n lines of a process's log, for error messages.
func (l *Lab) logTail(name string, n int) string {
	f, err := os.Open(l.LogPath(name))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const window = 64 << 10
	fi, err := f.Stat()
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	off := max(fi.Size()-window, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return "(log unreadable: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
