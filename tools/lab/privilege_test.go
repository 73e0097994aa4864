package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/qsplice/qsplice/internal/privilege"
	"github.com/qsplice/qsplice/tools/netns"
)

// TestDaemonsRunUnprivileged (issue 12, "least privilege"): in a lab with
// one back-end, the front-end and the shim run as the lab's daemon user,
// not root, with exactly CAP_NET_ADMIN and CAP_NET_RAW effective and
// permitted (the shim also CAP_BPF, and its TAP is steered by its
// program), and a request through the VIP is served. The binaries are
// in a directory only root can search, as in a checkout under a private
// directory: the lab runs copies of the daemons.
func TestDaemonsRunUnprivileged(t *testing.T) {
	requireRoot(t)
	cfg := daemonConfig(t)
	cfg.Backends, cfg.Nginx = 1, false // the test server on 8080 is enough
	private := t.TempDir()             // mode 0700
	for _, prog := range []string{"qsplice-testserver", "qsplice-backend", "qsplice-frontend"} {
		if err := os.Symlink(filepath.Join(cfg.BinDir, prog), filepath.Join(private, prog)); err != nil {
			t.Fatal(err)
		}
	}
	cfg.BinDir = private
	l := upLab(t, cfg)
	for _, name := range []string{frontendName, backendName(1)} {
		p, err := l.spec(name)
		if err != nil {
			t.Fatal(err)
		}
		s := l.status(p)
		if !s.alive {
			t.Fatalf("%s: %s", name, s.detail)
		}
		st, err := readProcStatus(s.pid)
		if err != nil {
			t.Fatal(err)
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", s.pid)); err != nil || !strings.HasPrefix(exe, cfg.StateDir) {
			t.Errorf("%s runs %q (%v), want a copy in the state directory", name, exe, err)
		}
		for _, field := range []string{"Uid", "Gid"} {
			want := strconv.Itoa(DaemonNobody)
			// real, effective, saved and filesystem ids
			if ids := strings.Fields(st[field]); len(ids) != 4 || ids[0] != want || ids[1] != want || ids[2] != want || ids[3] != want {
				t.Errorf("%s (pid %d): %s %q, want %s four times", name, s.pid, field, st[field], want)
			}
		}
		// CAP_BPF too: the shim's TAP steering and fast paths, the
		// front-end's SYN answer.
		want := privilege.Needed | privilege.OptionalBPF
		for _, field := range []string{"CapEff", "CapPrm"} {
			v, err := strconv.ParseUint(st[field], 16, 64)
			if err != nil || v != want {
				t.Errorf("%s (pid %d): %s %q, want %016x (%s)", name, s.pid, field, st[field], want, privilege.Names(want))
			}
		}
		if st["Groups"] != "" {
			t.Errorf("%s (pid %d): supplementary groups %q, want none", name, s.pid, st["Groups"])
		}
	}
	client := l.HTTPClient("c1")
	defer client.CloseIdleConnections()
	if id := getThroughVIP(t, client, 8080, 1<<10); id != 1 {
		t.Errorf("served by back-end %d, want 1", id)
	}
	// CAP_BPF did what it is there for: with more than one TAP queue,
	// the shim loaded its steering program; and its reply fast path is
	// attached and carries the middle of a large response, whose bytes
	// arrive exactly (getThroughVIP checks them).
	getThroughVIP(t, client, 8080, 8<<20)
	var shim struct {
		TAPSteering   string                         `json:"tap_steering"`
		ReplyFastPath string                         `json:"reply_fastpath"`
		FastPath      struct{ Bytes, Failed uint64 } `json:"fast_path"`
		Workers       []json.RawMessage              `json:"workers"`
		// What the engine saw, to tell why when the kernel took too
		// little (docs/results.md, twenty-sixth session).
		Shim struct {
			Translated, Echoes, FastPathOffers, RequestsAheadOfEchoes, CopiesToFrontEnd uint64
		} `json:"shim"`
		FastPathErrors uint64 `json:"fast_path_errors"`
	}
	url := fmt.Sprintf("http://%s:%d/status", l.BackendAddr(1), BackendAdminPort)
	if _, err := GetJSON(context.Background(), client, url, &shim); err != nil {
		t.Fatal(err)
	}
	if len(shim.Workers) > 1 && shim.TAPSteering != "ports" {
		t.Errorf("shim with %d workers: TAP steering %q, want ports (its program loaded with CAP_BPF)", len(shim.Workers), shim.TAPSteering)
	}
	if shim.ReplyFastPath != "tcx: echo" || shim.FastPath.Bytes < 4<<20 || shim.FastPath.Failed != 0 {
		t.Errorf("reply fast path %q carried %+v of an 8 MiB response, want tcx: echo and most of it (shim %+v, %d map updates failed)", shim.ReplyFastPath, shim.FastPath, shim.Shim, shim.FastPathErrors)
	}
	// And its SYN fast path hands the kernel the front-end's SYNs that
	// bring their request: each front-end shard (one per CPU) asks for
	// the cookie on its first connection, and the first connection's
	// shard has it already, so on a 2-CPU machine all new connections
	// but at most one bring it. Each new connection stays open until
	// all are served, so that none finds a pooled C2.
	const newConns = 8
	others := make([]*http.Client, newConns)
	for i := range others {
		others[i] = l.HTTPClient("c1")
		getThroughVIP(t, others[i], 8080, 1<<10)
	}
	for _, c := range others {
		c.CloseIdleConnections() // their C2s go to the pool, which the restart below empties
	}
	var syn struct {
		SYNFastPath string                         `json:"syn_fastpath"`
		SYNFast     struct{ Frames, Bytes uint64 } `json:"syn_fast_path"`
	}
	if _, err := GetJSON(context.Background(), client, url, &syn); err != nil {
		t.Fatal(err)
	}
	if syn.SYNFastPath != "tcx: ingress" || syn.SYNFast.Frames < newConns/2 || syn.SYNFast.Bytes == 0 {
		t.Errorf("SYN fast path %q took %+v; want tcx: ingress and the SYNs of most of %d new connections", syn.SYNFastPath, syn.SYNFast, newConns)
	}

	// The lab hands the shim a configured tap0; on a host of its own the
	// shim configures it, with CAP_NET_ADMIN only. (Its restart also
	// empties the front-end's pool of C2s to it: the new shim does not
	// know them.) Restart it on a bare
	// tap0 (no MAC, address or up flag of ours): it must set all three
	// over netlink and serve again.
	if err := l.StopProcess(backendName(1)); err != nil {
		t.Fatal(err)
	}
	ns := l.NS(backendHost(1))
	var cmds []string
	if linkExists(ns, tapDev) {
		cmds = append(cmds, "link del "+tapDev)
	}
	if err := ipBatch(ns, append(cmds, "tuntap add "+tapDev+" "+l.tapMode())); err != nil {
		t.Fatal(err)
	}
	if err := l.StartProcess(backendName(1)); err != nil {
		t.Fatal(err)
	}
	err := netns.Do(ns, func() error {
		ifi, err := net.InterfaceByName(tapDev)
		if err != nil {
			return err
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return err
		}
		want := fmt.Sprintf("%s/%d", l.BackendAddr(1), PrefixLen)
		if ifi.HardwareAddr.String() != l.BackendMAC(1).String() || ifi.Flags&net.FlagUp == 0 || !slices.ContainsFunc(addrs, func(a net.Addr) bool { return a.String() == want }) {
			t.Errorf("after the shim's start on a bare tap: %s %v %v, want MAC %s, up, %s", ifi.HardwareAddr, ifi.Flags, addrs, l.BackendMAC(1), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	client.CloseIdleConnections()
	if id := getThroughVIP(t, client, 8080, 1<<10); id != 1 {
		t.Errorf("after the restart served by back-end %d, want 1", id)
	}
}

// readProcStatus reads /proc/PID/status as field -> value.
func readProcStatus(pid int) (map[string]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	m := make(map[string]string)
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, nil
}

// TestCheckDaemonInputsNamesClosedDirectory: a state directory the
// daemons' user cannot search is refused before a daemon starts, naming
// the directory and the way out; a shared one passes.
func TestCheckDaemonInputsNamesClosedDirectory(t *testing.T) {
	closed := t.TempDir() // mode 0700, root's
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	shared := sharedTempDir(t)
	bin := filepath.Join(shared, "qsplice-backend")
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, stateDir string
		want           string // "" : accepted
	}{
		{"closed", filepath.Join(closed, "state"), "mode 0700) is closed to it"},
		{"shared", filepath.Join(shared, "state"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig("abc")
			cfg.StateDir = tc.stateDir
			cfg.Backends = 1
			if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
				t.Fatal(err)
			}
			l := newLab(cfg)
			if err := os.WriteFile(l.BackendKeyPath(1), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(l.BackendKeyPath(1), DaemonNobody, DaemonNobody); err != nil && os.Geteuid() == 0 {
				t.Fatal(err)
			}
			err := l.checkDaemonInputs(procSpec{name: backendName(1), argv: []string{bin}, daemon: true, backend: 1})
			switch {
			case tc.want == "" && os.Geteuid() == 0 && err != nil:
				t.Errorf("checkDaemonInputs: %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "SharedTempDir")):
				t.Errorf("checkDaemonInputs: %v, want one naming %q and SharedTempDir", err, tc.want)
			}
		})
	}
}

// TestDaemonCommandCredentials: with a daemon user the command carries
// its credentials, no groups and the ambient capabilities (three, for
// either daemon), and no
// -allow-root; with DaemonUID 0 (root, or a lab.json older than the
// field) it runs as the lab's own user and says -allow-root, which the
// daemons otherwise refuse to start without.
func TestDaemonCommandCredentials(t *testing.T) {
	cfg := DefaultConfig("abc")
	l := newLab(cfg)
	argv := []string{"/bin/qsplice-backend", "-id", "1"}
	cmd := l.daemonCommand(argv)
	a := cmd.SysProcAttr
	if a.Credential == nil || a.Credential.Uid != DaemonNobody || a.Credential.Gid != DaemonNobody || a.Credential.Groups == nil || len(a.Credential.Groups) != 0 {
		t.Errorf("credential %+v, want uid and gid %d and an empty group list", a.Credential, DaemonNobody)
	}
	if len(a.AmbientCaps) != 3 || !a.Setpgid || strings.Join(cmd.Args, " ") != strings.Join(argv, " ") {
		t.Errorf("shim: ambient %v, setpgid %v, args %q; want CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF", a.AmbientCaps, a.Setpgid, cmd.Args)
	}
	if a := l.daemonCommand([]string{"/bin/qsplice-frontend"}).SysProcAttr; len(a.AmbientCaps) != 3 {
		t.Errorf("front-end: ambient %v, want CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF", a.AmbientCaps)
	}

	cfg.DaemonUID, cfg.DaemonGID = 0, 0
	cmd = newLab(cfg).daemonCommand(argv)
	if cmd.SysProcAttr.Credential != nil || cmd.SysProcAttr.AmbientCaps != nil {
		t.Errorf("DaemonUID 0: credential %+v, ambient %v; want neither", cmd.SysProcAttr.Credential, cmd.SysProcAttr.AmbientCaps)
	}
	if got := strings.Join(cmd.Args, " "); got != "/bin/qsplice-backend -allow-root -id 1" {
		t.Errorf("DaemonUID 0: args %q, want -allow-root first", got)
	}
	if strings.Join(argv, " ") != "/bin/qsplice-backend -id 1" {
		t.Errorf("daemonCommand changed its argument: %q", argv)
	}
}

// TestDaemonsRefuseRoot: run as root, both daemon binaries stop with
// exit 2 and an error naming -allow-root and their systemd unit, before
// reading their key file; with -allow-root they go on (to the missing
// key file here).
func TestDaemonsRefuseRoot(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		prog string
		args []string
	}{
		{"qsplice-frontend", []string{"-link", "nosuch0", "-vip", "198.18.0.100", "-handoff", "198.18.0.101", "-control", "198.18.0.2:7400", "-key", "/nonexistent"}},
		{"qsplice-backend", []string{"-id", "1", "-wire", "nosuch0", "-tap", "nosuch1", "-addr", "198.18.0.21", "-frontend", "198.18.0.2:7400", "-key", "/nonexistent"}},
	} {
		dir, err := buildCmd(tc.prog)
		if err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, tc.prog)
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 ||
			!strings.Contains(string(out), "refusing to run as root") || !strings.Contains(string(out), "-allow-root") ||
			!strings.Contains(string(out), "contrib/systemd/"+tc.prog+".service") || strings.Contains(string(out), "/nonexistent") {
			t.Errorf("%s as root: %v, output %q; want exit 2 naming -allow-root and the unit, before the key file", tc.prog, err, out)
		}
		out, _ = exec.Command(bin, append([]string{"-allow-root"}, tc.args...)...).CombinedOutput()
		if strings.Contains(string(out), "refusing") || !strings.Contains(string(out), "/nonexistent") {
			t.Errorf("%s -allow-root: output %q; want it past the check, at the key file", tc.prog, out)
		}
	}
}

// TestDaemonProgramCopiesOnlyWhenNeeded: a binary the daemons' user can
// reach is run where it is; one it cannot is copied (executable, same
// bytes) into the state directory; a lab running the daemons as root
// never copies.
func TestDaemonProgramCopiesOnlyWhenNeeded(t *testing.T) {
	requireRoot(t) // chmod and stat as the owner of root's files
	shared := sharedTempDir(t)
	private := t.TempDir()
	for _, dir := range []string{shared, private} {
		if err := os.WriteFile(filepath.Join(dir, "qsplice-backend"), []byte("#!/bin/true\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig("abc")
	cfg.StateDir = filepath.Join(shared, "state")
	l := newLab(cfg)
	if got, err := l.daemonProgram(filepath.Join(shared, "qsplice-backend")); err != nil || got != filepath.Join(shared, "qsplice-backend") {
		t.Errorf("reachable binary: %q, %v; want it unchanged", got, err)
	}
	got, err := l.daemonProgram(filepath.Join(private, "qsplice-backend"))
	if err != nil || got != filepath.Join(cfg.StateDir, "bin", "qsplice-backend") {
		t.Fatalf("private binary: %q, %v; want a copy in the state directory", got, err)
	}
	if data, err := os.ReadFile(got); err != nil || string(data) != "#!/bin/true\n" {
		t.Errorf("copy holds %q, %v", data, err)
	}
	if err := reachable(got, DaemonNobody, DaemonNobody, 1); err != nil {
		t.Errorf("copy: %v", err)
	}
	cfg.DaemonUID = 0
	if got, err := newLab(cfg).daemonProgram(filepath.Join(private, "qsplice-backend")); err != nil || got != filepath.Join(private, "qsplice-backend") {
		t.Errorf("as root: %q, %v; want it unchanged", got, err)
	}
}
