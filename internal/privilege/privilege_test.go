package privilege

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCheckRefusesRootWithoutFlag: uid 0 is refused unless -allow-root,
// with a message naming the flag and the systemd unit; a non-root uid
// needs both capabilities and is told which are missing.
func TestCheckRefusesRootWithoutFlag(t *testing.T) {
	const all = ^uint64(0)
	for _, tc := range []struct {
		name      string
		euid      int
		eff       uint64
		allowRoot bool
		want      error    // nil: accepted
		say       []string // in the message
	}{
		{"root refused", 0, all, false, ErrRoot, []string{"-allow-root", "contrib/systemd/qsplice-test.service", "AmbientCapabilities=CAP_NET_ADMIN CAP_NET_RAW"}},
		{"root allowed", 0, all, true, nil, nil},
		{"unprivileged with both", 65534, Needed, false, nil, nil},
		{"unprivileged with more", 1000, all, false, nil, nil},
		{"unprivileged without raw", 65534, 1 << unix.CAP_NET_ADMIN, false, ErrMissingCaps, []string{"uid 65534", "without CAP_NET_RAW in"}},
		{"unprivileged without any", 65534, 0, true, ErrMissingCaps, []string{"CAP_NET_ADMIN, CAP_NET_RAW"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := check("qsplice-test", tc.euid, tc.eff, tc.allowRoot)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("check: %v, want %v", err, tc.want)
			}
			for _, s := range tc.say {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("message %q does not say %q", err, s)
				}
			}
		})
	}
}

func TestNames(t *testing.T) {
	if got := Names(Needed | 1<<unix.CAP_SYS_ADMIN); got != "CAP_NET_ADMIN, CAP_NET_RAW, capability 21" {
		t.Errorf("Names: %q", got)
	}
	if Needed != 0x3000 {
		t.Errorf("Needed = %#x, want 0x3000 (bits 12 and 13)", Needed)
	}
}

// TestEffectiveMatchesProcStatus: Effective reads the same set the
// kernel shows as CapEff.
func TestEffectiveMatchesProcStatus(t *testing.T) {
	eff, err := Effective()
	if err != nil {
		t.Fatal(err)
	}
	want, err := procCapEff("self")
	if err != nil {
		t.Fatal(err)
	}
	if eff != want {
		t.Errorf("Effective %#x, /proc/self/status CapEff %#x", eff, want)
	}
}

func procCapEff(pid string) (uint64, error) {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff line")
}

// childEnv makes the test binary run childMain instead of the tests.
const childEnv = "QSPLICE_PRIVILEGE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		childMain()
	}
	os.Exit(m.Run())
}

// childMain is Check in a process of its own, as a daemon calls it.
func childMain() {
	if err := Check("qsplice-test", os.Getenv(childEnv) == "allow-root"); err != nil {
		os.Stdout.WriteString(err.Error())
		os.Exit(3)
	}
	os.Stdout.WriteString("ok")
	os.Exit(0)
}

// TestCheckInProcesses runs Check in processes started the way the lab
// and systemd start the daemons: as nobody with the two capabilities
// ambient (accepted), as nobody without them (refused, naming both), and
// as root without and with -allow-root.
func TestCheckInProcesses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start processes as another user; CI runs as root")
	}
	bin := reachableCopy(t)
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	for _, tc := range []struct {
		name  string
		cred  *syscall.Credential
		caps  []uintptr
		mode  string
		want  string // the child's output, or a part of its refusal
		exit0 bool
	}{
		{"nobody with both", nobody, Caps, "check", "ok", true},
		{"nobody without", nobody, nil, "check", "without CAP_NET_ADMIN, CAP_NET_RAW", false},
		{"nobody with raw only", nobody, []uintptr{unix.CAP_NET_RAW}, "check", "without CAP_NET_ADMIN in", false},
		{"root", nil, nil, "check", "refusing to run as root", false},
		{"root allowed", nil, nil, "allow-root", "ok", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), childEnv+"="+tc.mode)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: tc.cred, AmbientCaps: tc.caps}
			out, err := cmd.Output()
			if (err == nil) != tc.exit0 || !strings.Contains(string(out), tc.want) {
				t.Errorf("child: %v, output %q; want exit 0 %v and %q", err, out, tc.exit0, tc.want)
			}
		})
	}
}

// reachableCopy copies the test binary where nobody may execute it: the
// go tool builds it in a directory only root can search.
func reachableCopy(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "qsplice-privilege-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	path := filepath.Join(dir, "privilege.test")
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, self); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
