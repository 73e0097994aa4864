package packaging

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exampleConfigs are the front-end configurations under examples/.
func exampleConfigs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("examples: %v %v, want frontend.yaml, credit.yaml, lifo-pri.yaml and feedback.yaml at least", files, err)
	}
	return files
}

// genkey makes a key with the installed qsplice-frontend genkey, as the
// examples say to.
func genkey(t *testing.T, bin, path string) {
	t.Helper()
	if out, err := exec.Command(filepath.Join(bin, "qsplice-frontend"), "genkey", "-o", path).CombinedOutput(); err != nil {
		t.Fatalf("genkey: %v\n%s", err, out)
	}
}

// TestExamplesValidate: every example configuration passes `validate`,
// key file included, once it sits next to a key made by genkey as its
// comments say; and none points at the lab's key.
func TestExamplesValidate(t *testing.T) {
	in := install(t)
	for _, src := range exampleConfigs(t) {
		t.Run(filepath.Base(src), func(t *testing.T) {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte("/run/qsplice")) {
				t.Errorf("%s points into /run/qsplice (the lab's keys)", src)
			}
			dir := t.TempDir()
			cfg := filepath.Join(dir, filepath.Base(src))
			if err := os.WriteFile(cfg, b, 0o644); err != nil {
				t.Fatal(err)
			}
			genkey(t, in.bin, filepath.Join(dir, "control.key"))
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(filepath.Join(in.bin, "qsplice-frontend"), "validate", cfg)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("validate %s: %v\n%s", src, err, stderr.Bytes())
			}
			if !strings.Contains(stdout.String(), ": ok (") || !strings.Contains(stdout.String(), ", 0 warnings)") {
				t.Errorf("validate %s: %q, want ok with no warnings (stderr %q)", src, stdout.String(), stderr.String())
			}
		})
	}
}

// TestGenkeyWritesWhatExamplesSay: genkey writes 32 random bytes as hex
// with mode 0600 and refuses to replace a file, as examples/README.md
// and the config comments say.
func TestGenkeyWritesWhatExamplesSay(t *testing.T) {
	in := install(t)
	path := filepath.Join(t.TempDir(), "control.key")
	genkey(t, in.bin, path)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", info.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if key, err := hex.DecodeString(strings.TrimSpace(string(b))); err != nil || len(key) != 32 {
		t.Errorf("key file %q: want 32 bytes in hex", b)
	}
	if err := exec.Command(filepath.Join(in.bin, "qsplice-frontend"), "genkey", "-o", path).Run(); err == nil {
		t.Errorf("genkey replaced an existing key file")
	}
	b2, _ := os.ReadFile(path)
	if !bytes.Equal(b, b2) {
		t.Errorf("genkey changed an existing key file")
	}
}

// TestBackendEnvNamesRealFlags: every flag in examples/backend.env is
// one qsplice-backend has.
func TestBackendEnvNamesRealFlags(t *testing.T) {
	in := install(t)
	env, err := os.ReadFile("../../examples/backend.env")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^QSPLICE_BACKEND_FLAGS="([^"]*)"$`).FindSubmatch(env)
	if m == nil {
		t.Fatal("backend.env sets no QSPLICE_BACKEND_FLAGS=\"...\"")
	}
	help, _ := exec.Command(filepath.Join(in.bin, "qsplice-backend"), "-h").CombinedOutput()
	n := 0
	for _, f := range strings.Fields(string(m[1])) {
		if !strings.HasPrefix(f, "-") {
			continue
		}
		n++
		if !bytes.Contains(help, []byte("\n  "+f+" ")) && !bytes.Contains(help, []byte("\n  "+f+"\n")) {
			t.Errorf("backend.env: qsplice-backend has no flag %s", f)
		}
	}
	if n < 6 {
		t.Errorf("backend.env: %d flags, want the six required ones at least", n)
	}
}
