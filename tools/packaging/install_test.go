package packaging

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// testVersion is what the Makefile is told to link in; -version must
// print it.
const testVersion = "v0.0.0-packaging-test"

// cmds are the binaries under cmd/, all of which make install installs
// (read from the tree, so that a new command is held to the same tests
// without anyone remembering to list it here).
var cmds = func() []string {
	ents, err := os.ReadDir("../../cmd")
	if err != nil {
		panic(err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}()

// installed is one make install, shared by the tests of this package.
type installed struct {
	root    string // the repository
	destdir string // DESTDIR of `make install PREFIX=/usr/local`
	bin     string // its bin directory
	err     error
}

var (
	installOnce sync.Once
	inst        installed
)

// install runs `make install DESTDIR=tmp` once, with binaries built into
// a directory of their own (BIN=) so that the repository's bin/ is left
// alone, and VERSION set.
func install(t *testing.T) installed {
	t.Helper()
	installOnce.Do(func() {
		inst.root, inst.err = filepath.Abs("../..")
		if inst.err != nil {
			return
		}
		tmp, err := os.MkdirTemp("", "qsplice-install-")
		if err != nil {
			inst.err = err
			return
		}
		inst.destdir = filepath.Join(tmp, "dest")
		inst.bin = filepath.Join(inst.destdir, "usr/local/bin")
		out, err := runMake(inst.root, "install", "PREFIX=/usr/local", "DESTDIR="+inst.destdir,
			"BIN="+filepath.Join(tmp, "build"), "VERSION="+testVersion)
		if err != nil {
			inst.err = &makeError{err, out}
		}
	})
	if inst.err != nil {
		t.Fatalf("make install: %v", inst.err)
	}
	return inst
}

type makeError struct {
	err error
	out []byte
}

func (e *makeError) Error() string { return e.err.Error() + "\n" + string(e.out) }

func runMake(root string, args ...string) ([]byte, error) {
	cmd := exec.Command("make", append([]string{"-C", root, "--no-print-directory"}, args...)...)
	return cmd.CombinedOutput()
}

// TestMain removes the shared install afterwards.
func TestMain(m *testing.M) {
	code := m.Run()
	if inst.destdir != "" {
		os.RemoveAll(filepath.Dir(inst.destdir))
	}
	if prefixDir != "" {
		os.RemoveAll(prefixDir)
	}
	os.Exit(code)
}

// TestInstallLaysOutTree: `make install DESTDIR=...` puts every binary,
// both units (their paths written in), the sysusers entry, the examples
// and the documents where the README says, with sane modes.
func TestInstallLaysOutTree(t *testing.T) {
	in := install(t)
	want := map[string]os.FileMode{}
	for _, c := range cmds {
		want["usr/local/bin/"+c] = 0o755
	}
	for _, f := range []string{
		"usr/local/lib/systemd/system/qsplice-frontend.service",
		"usr/local/lib/systemd/system/qsplice-backend.service",
		"usr/local/lib/sysusers.d/qsplice.conf",
		"usr/local/share/doc/qsplice/README.md",
		"usr/local/share/doc/qsplice/SECURITY.md",
		"usr/local/share/doc/qsplice/LICENSE",
		"usr/local/share/doc/qsplice/examples/README.md",
		"usr/local/share/doc/qsplice/examples/frontend.yaml",
		"usr/local/share/doc/qsplice/examples/credit.yaml",
		"usr/local/share/doc/qsplice/examples/lifo-pri.yaml",
		"usr/local/share/doc/qsplice/examples/feedback.yaml",
		"usr/local/share/doc/qsplice/examples/backend.env",
	} {
		want[f] = 0o644
	}
	got := map[string]os.FileMode{}
	err := filepath.WalkDir(in.destdir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(in.destdir, path)
		got[rel] = info.Mode()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f, mode := range want {
		m, ok := got[f]
		switch {
		case !ok:
			t.Errorf("missing %s", f)
		case m != mode:
			t.Errorf("%s: mode %v, want %v", f, m, mode)
		}
	}
	for f := range got {
		if _, ok := want[f]; !ok {
			t.Errorf("unexpected file %s", f)
		}
	}
	// Nothing goes to /etc: configuration and keys are the operator's.
	if _, err := os.Stat(filepath.Join(in.destdir, "etc")); err == nil {
		t.Errorf("make install wrote under /etc")
	}
	for _, u := range []string{"qsplice-frontend.service", "qsplice-backend.service"} {
		b, err := os.ReadFile(filepath.Join(in.destdir, "usr/local/lib/systemd/system", u))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("@")) && bytes.Contains(b, []byte("DIR@")) {
			t.Errorf("%s: a @...DIR@ placeholder is left", u)
		}
		bin := "/usr/local/bin/" + strings.TrimSuffix(u, ".service")
		if !bytes.Contains(b, []byte("ExecStart="+bin+" ")) {
			t.Errorf("%s: ExecStart does not run %s", u, bin)
		}
	}
}

// TestVersionFlagPrintsMakefileVersion: every binary built by the
// Makefile with VERSION=... prints it for -version, on stdout, exit 0.
func TestVersionFlagPrintsMakefileVersion(t *testing.T) {
	in := install(t)
	for _, c := range cmds {
		t.Run(c, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(filepath.Join(in.bin, c), "-version")
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s -version: %v\n%s", c, err, stderr.Bytes())
			}
			line := strings.TrimSpace(stdout.String())
			if !strings.HasPrefix(line, c+" "+testVersion+" (") || strings.Count(line, "\n") != 0 {
				t.Errorf("%s -version printed %q, want one line %q...", c, line, c+" "+testVersion)
			}
		})
	}
}
