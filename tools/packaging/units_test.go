package packaging

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// systemdAnalyze is the path of systemd-analyze; without it the unit
// tests skip, except under CI (CI=true), where they fail: .ci/run
// installs Debian's systemd package for them.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze not found (Debian package systemd; .ci/run installs it)")
		}
		t.Skip("systemd-analyze not found (Debian package systemd)")
	}
	return p
}

// unitsUnderPrefix installs with PREFIX= a temporary directory and no
// DESTDIR, so that the paths written in the units exist on this host as
// systemd-analyze verify wants them (it checks that ExecStart= and the
// others name executables). The install is shared by the tests and
// removed by TestMain.
func unitsUnderPrefix(t *testing.T) []string {
	t.Helper()
	prefixOnce.Do(func() {
		root, err := filepath.Abs("../..")
		if err != nil {
			prefixErr = err
			return
		}
		if prefixDir, err = os.MkdirTemp("", "qsplice-prefix-"); err != nil {
			prefixErr = err
			return
		}
		out, err := runMake(root, "install", "PREFIX="+prefixDir, "SYSCONFDIR="+filepath.Join(prefixDir, "etc"),
			"BIN="+filepath.Join(prefixDir, "build"), "VERSION="+testVersion)
		if err != nil {
			prefixErr = &makeError{err, out}
		}
	})
	if prefixErr != nil {
		t.Fatalf("make install PREFIX=%s: %v", prefixDir, prefixErr)
	}
	units, _ := filepath.Glob(filepath.Join(prefixDir, "lib/systemd/system/*.service"))
	if len(units) != 2 {
		t.Fatalf("installed units %v, want qsplice-frontend and qsplice-backend", units)
	}
	return units
}

var (
	prefixOnce sync.Once
	prefixDir  string
	prefixErr  error
)

// TestUnitsVerify: systemd-analyze verify passes on both installed
// units with nothing to say (it exits 0 on unknown keys and bad values,
// which it only prints), and their exposure score stays at most 3.0.
func TestUnitsVerify(t *testing.T) {
	sa := systemdAnalyze(t)
	units := unitsUnderPrefix(t)
	for _, u := range units {
		out, err := exec.Command(sa, "verify", u).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", filepath.Base(u), err, out)
		}
		out, err = exec.Command(sa, "security", "--offline=yes", "--threshold=30", u).CombinedOutput()
		if err != nil {
			t.Errorf("systemd-analyze security --threshold=30 %s: %v\n%s", filepath.Base(u), err, lastLines(out, 3))
		}
	}
}

// TestUnitsVerifyCatchesMistakes: the check above is not vacuous: a
// misspelt key and an unknown address family in a copy of a unit make
// it fail.
func TestUnitsVerifyCatchesMistakes(t *testing.T) {
	sa := systemdAnalyze(t)
	u := unitsUnderPrefix(t)[0]
	b, err := os.ReadFile(u)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][2]string{
		{"ProtectSystem=strict", "ProtectSytem=strict"},
		{"RestrictAddressFamilies=AF_UNIX", "RestrictAddressFamilies=AF_NOSUCH AF_UNIX"},
	} {
		broken := filepath.Join(t.TempDir(), filepath.Base(u))
		if err := os.WriteFile(broken, bytes.Replace(b, []byte(bad[0]), []byte(bad[1]), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command(sa, "verify", broken).CombinedOutput()
		if len(bytes.TrimSpace(out)) == 0 {
			t.Errorf("verify said nothing about %q", bad[1])
		}
	}
}

// TestUnitsSettings: the units say what the issue asks of them: a
// dedicated user with CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF only, the
// front-end
// validated before it starts and reloaded with SIGHUP, and the
// hardening options.
func TestUnitsSettings(t *testing.T) {
	common := map[string]string{
		"User":                    "qsplice",
		"Group":                   "qsplice",
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_PACKET AF_NETLINK",
		"DevicePolicy":            "closed",
		"DeviceAllow":             "/dev/net/tun rw",
	}
	for unit, extra := range map[string]map[string]string{
		"qsplice-frontend.service": {
			"ExecStartPre": "@BINDIR@/qsplice-frontend validate @SYSCONFDIR@/qsplice/frontend.yaml",
			"ExecStart":    "@BINDIR@/qsplice-frontend -config @SYSCONFDIR@/qsplice/frontend.yaml",
			"ExecReload":   "/bin/kill -HUP $MAINPID",

			// CAP_BPF and bpf(2): the SYN answer (frontend/synanswer.go).
			"AmbientCapabilities":   "CAP_NET_ADMIN CAP_NET_RAW CAP_BPF",
			"CapabilityBoundingSet": "CAP_NET_ADMIN CAP_NET_RAW CAP_BPF",
			"SystemCallFilter":      "@system-service bpf",
		},
		"qsplice-backend.service": {
			"EnvironmentFile": "@SYSCONFDIR@/qsplice/backend.env",
			"ExecStart":       "@BINDIR@/qsplice-backend $QSPLICE_BACKEND_FLAGS",

			// CAP_BPF and bpf(2): the TAP's steering program (internal/privilege).
			"AmbientCapabilities":   "CAP_NET_ADMIN CAP_NET_RAW CAP_BPF",
			"CapabilityBoundingSet": "CAP_NET_ADMIN CAP_NET_RAW CAP_BPF",
			"SystemCallFilter":      "@system-service bpf",
		},
	} {
		keys := readUnit(t, filepath.Join("../../contrib/systemd", unit))
		for k, v := range common {
			if got := keys[k]; got != v {
				t.Errorf("%s: %s=%q, want %q", unit, k, got, v)
			}
		}
		for k, v := range extra {
			if got := keys[k]; got != v {
				t.Errorf("%s: %s=%q, want %q", unit, k, got, v)
			}
		}
	}
}

// readUnit returns a unit file's settings (the last of each key).
func readUnit(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			keys[k] = v
		}
	}
	return keys
}

func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}
