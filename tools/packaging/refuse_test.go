package packaging

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// run runs an installed binary with a deadline (a binary that accepted
// what it should refuse may go on to build a lab or flood a link) and
// returns its exit status and output.
func run(t *testing.T, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var o, e bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Dir = t.TempDir()
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		code = ee.ExitCode()
	default:
		t.Fatalf("%s %q: %v (still running after 20 s: it accepted the flags)", filepath.Base(bin), args, err)
	}
	return code, o.String(), e.String()
}

// TestFlagsRefusedBeforeActing: each binary refuses flag values out of
// range, unknown names and stray arguments with an error naming the flag
// and a non-zero exit, before it opens or creates anything (the file
// named in mustNotExist is one it would create). The lab-building
// commands get -bin /nonexistent as well, so that a binary that let a
// bad value through stops at its program check instead of building a
// lab.
func TestFlagsRefusedBeforeActing(t *testing.T) {
	in := install(t)
	tmp := t.TempDir()
	prof, jsonOut, pcapOut := filepath.Join(tmp, "fe.prof"), filepath.Join(tmp, "out.json"), filepath.Join(tmp, "out.pcap")
	fe := []string{"-link", "nosuch0", "-vip", "198.18.0.100", "-handoff", "198.18.0.101", "-control", "198.18.0.2:7400", "-key", "/nonexistent"}
	be := []string{"-id", "1", "-wire", "nosuch0", "-tap", "nosuch1", "-addr", "198.18.0.21", "-frontend", "198.18.0.2:7400", "-key", "/nonexistent"}
	load := []string{"-target", "http://198.18.0.100", "-stream", "name=A,rate=10"}
	flood := []string{"-i", "nosuch0", "-target", "198.18.0.100:80"}
	replay := []string{"-in", "/nonexistent.pcap", "-out", pcapOut}
	for _, tc := range []struct {
		name, bin    string
		args         []string
		want         string // in stderr
		mustNotExist string
	}{
		{"frontend queue 0", "qsplice-frontend", append([]string{"-cpuprofile", prof, "-queue", "0"}, fe...), "-queue 0", prof},
		{"frontend handoff-ahead 65", "qsplice-frontend", append([]string{"-handoff-ahead", "65"}, fe...), "-handoff-ahead 65", ""},
		{"frontend negative head-timeout", "qsplice-frontend", append([]string{"-head-timeout", "-1s"}, fe...), "-head-timeout", ""},
		{"frontend workers -1", "qsplice-frontend", append([]string{"-workers", "-1"}, fe...), "-workers -1", ""},
		{"frontend workers on tap", "qsplice-frontend", append([]string{"-workers", "2", "-link-type", "tap"}, fe...), "-workers 2", ""},
		{"frontend link-type", "qsplice-frontend", append([]string{"-link-type", "pcap"}, fe...), "-link-type", ""},
		{"frontend log-format", "qsplice-frontend", append([]string{"-log-format", "xml"}, fe...), "-log-format", ""},
		{"frontend stray argument", "qsplice-frontend", append(fe, "validat"), `unexpected argument "validat"`, ""},
		{"frontend admin", "qsplice-frontend", append([]string{"-admin", "198.18.0.2"}, fe...), "-admin", ""},
		{"backend admin", "qsplice-backend", append(be, "-admin", "198.18.0.21:99999"), "-admin", ""},
		{"backend id too big", "qsplice-backend", append(be, "-id", "4294967296"), "-id 4294967296", ""},
		{"backend control-port", "qsplice-backend", append(be, "-control-port", "70000"), "-control-port 70000", ""},
		{"backend prefix", "qsplice-backend", append(be, "-prefix", "33"), "-prefix 33", ""},
		{"backend capacity", "qsplice-backend", append(be, "-capacity", "0"), "-capacity 0", ""},
		{"backend log-format", "qsplice-backend", append(be, "-log-format", "xml"), "-log-format", ""},
		{"demo flood Z", "qsplice-demo", []string{"-bin", "/nonexistent", "-flood", "Z"}, `-flood "Z": no such customer`, ""},
		{"demo offer 0", "qsplice-demo", []string{"-bin", "/nonexistent", "-offer", "0"}, "-offer 0", ""},
		{"demo name", "qsplice-demo", []string{"-bin", "/nonexistent", "-name", "Not-A-Lab"}, "-name", ""},
		{"replay backends 0", "qsplice-replay", append(replay, "-backends", "0"), "-backends 0", pcapOut},
		{"replay backends 80", "qsplice-replay", append(replay, "-backends", "80"), "-backends 80", pcapOut},
		{"replay capacity 0", "qsplice-replay", append(replay, "-capacity", "0"), "-capacity 0", pcapOut},
		{"replay service-delay 0", "qsplice-replay", append(replay, "-service-delay", "0s"), "-service-delay", pcapOut},
		{"load duration 0", "qsplice-load", append(load, "-json", jsonOut, "-duration", "0s"), "-duration", jsonOut},
		{"load conns-per-stream", "qsplice-load", append(load, "-json", jsonOut, "-conns-per-stream", "-1"), "-conns-per-stream", jsonOut},
		{"flood rate 0", "qsplice-flood", append(flood, "-rate", "0"), "-rate 0", ""},
		{"flood dst-mac", "qsplice-flood", append(flood, "-dst-mac", "zz:00"), "-dst-mac", ""},
		{"flood mode", "qsplice-flood", append(flood, "-mode", "ack"), `-mode "ack"`, ""},
		{"bench-proxy duration 0", "qsplice-bench-proxy", []string{"-bin", "/nonexistent", "-duration", "0s"}, "-duration", ""},
		{"bench-proxy only", "qsplice-bench-proxy", []string{"-bin", "/nonexistent", "-only", "squid"}, "-only", ""},
		{"testserver service-time", "qsplice-testserver", []string{"-listen", "127.0.0.1:0", "-service-time", "-1s"}, "-service-time", ""},
		{"experiment timescale 0", "qsplice-experiment", []string{"-out", filepath.Join(tmp, "exp"), "-timescale", "0"}, "-timescale", filepath.Join(tmp, "exp")},
		{"experiment policy", "qsplice-experiment", []string{"-out", filepath.Join(tmp, "exp"), "-policies", "lifo"}, "lifo", filepath.Join(tmp, "exp")},
		{"lab backends 0", "qsplice-lab", []string{"up", "-bin", "/nonexistent", "-name", "pkgtst", "-backends", "0"}, "0 back-ends", ""},
		{"lab capacity 0", "qsplice-lab", []string{"up", "-bin", "/nonexistent", "-name", "pkgtst", "-capacity", "0"}, "-capacity 0", ""},
		{"lab ready-timeout 0", "qsplice-lab", []string{"up", "-bin", "/nonexistent", "-name", "pkgtst", "-ready-timeout", "0s"}, "-ready-timeout", ""},
		{"unknown flag", "qsplice-load", []string{"-no-such-flag"}, "-no-such-flag", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, filepath.Join(in.bin, tc.bin), tc.args...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("%s %q: exit %d, stderr %q; want a refusal naming %q", tc.bin, tc.args, code, stderr, tc.want)
			}
			if tc.mustNotExist != "" {
				if _, err := os.Stat(tc.mustNotExist); err == nil {
					t.Errorf("%s created %s before refusing", tc.bin, tc.mustNotExist)
					os.RemoveAll(tc.mustNotExist)
				}
			}
		})
	}
}

// TestBareDaemonPrintsSynopsis: a daemon run with no arguments prints its
// usage (not one missing flag) on stderr and exits 2.
func TestBareDaemonPrintsSynopsis(t *testing.T) {
	in := install(t)
	for _, c := range []string{"qsplice-frontend", "qsplice-backend"} {
		code, stdout, stderr := run(t, filepath.Join(in.bin, c))
		if code != 2 || !strings.Contains(stderr, "Usage: "+c) || !strings.Contains(stderr, "-version") || stdout != "" {
			t.Errorf("%s with no arguments: exit %d, stderr %.200q; want exit 2 and the synopsis on stderr", c, code, stderr)
		}
	}
}

// TestValidateChecksKeyFile: `qsplice-frontend validate` refuses a
// configuration whose key file the daemon would refuse (it said ok
// before), names the problem, and never quotes the key file's content.
func TestValidateChecksKeyFile(t *testing.T) {
	in := install(t)
	cfg, err := os.ReadFile("../../examples/frontend.yaml")
	if err != nil {
		t.Fatal(err)
	}
	secret := "correct horse battery staple, a passphrase and not a key"
	for _, tc := range []struct {
		name    string
		content string // "" : no key file
		mode    os.FileMode
		want    string
	}{
		{"missing", "", 0, "no such file"},
		{"group readable", "gen", 0o640, "mode 0640"},
		{"passphrase", secret, 0o600, "not a key in hex"},
		{"all zero", strings.Repeat("00", 32), 0o600, "weak key"},
		{"text as hex", hex.EncodeToString([]byte("The quick brown fox jumps over the lazy dog")), 0o600, "printable"},
		{"short", "0123456789abcdef", 0o600, "weak key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "frontend.yaml")
			if err := os.WriteFile(path, cfg, 0o644); err != nil {
				t.Fatal(err)
			}
			key := filepath.Join(dir, "control.key")
			switch tc.content {
			case "":
			case "gen":
				genkey(t, in.bin, key)
				os.Chmod(key, tc.mode)
			default:
				if err := os.WriteFile(key, []byte(tc.content+"\n"), tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			code, stdout, stderr := run(t, filepath.Join(in.bin, "qsplice-frontend"), "validate", path)
			if code != 1 || !strings.Contains(stderr, tc.want) || strings.Contains(stdout, "ok") {
				t.Errorf("validate with key %s: exit %d, stdout %q, stderr %q; want exit 1 naming %q", tc.name, code, stdout, stderr, tc.want)
			}
			if strings.Contains(stderr, "horse") || strings.Contains(stderr, "636f7272") {
				t.Errorf("validate quoted the key file: %q", stderr)
			}
		})
	}
}

// TestErrorsQuoteShortExcerpts: a configuration, a key file or a capture
// that is a large blob of junk gets an error of a few lines, not the
// file back.
func TestErrorsQuoteShortExcerpts(t *testing.T) {
	in := install(t)
	dir := t.TempDir()
	junkLine := strings.Repeat("qsplice-junk ", 20000) // one 260 KB line
	files := map[string]string{
		"line.yaml":   junkLine + "\n",
		"list.yaml":   "link: [" + junkLine + "\n",
		"binary.yaml": "\x00\x01\x02" + junkLine,
		"key.yaml":    "link: {interface: eth0}\nhandoff: 192.0.2.101\ncontrol: {listen: 192.0.2.2:7400, key_file: junk.key}\nlisteners: [{vip: 192.0.2.100, port: 80}]\n",
		"junk.key":    junkLine,
		"junk.pcap":   junkLine,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		bin  string
		args []string
	}{
		{"qsplice-frontend", []string{"validate", filepath.Join(dir, "line.yaml")}},
		{"qsplice-frontend", []string{"validate", filepath.Join(dir, "list.yaml")}},
		{"qsplice-frontend", []string{"validate", filepath.Join(dir, "binary.yaml")}},
		{"qsplice-frontend", []string{"validate", filepath.Join(dir, "key.yaml")}},
		{"qsplice-frontend", []string{"-config", filepath.Join(dir, "line.yaml")}},
		{"qsplice-replay", []string{"-in", filepath.Join(dir, "junk.pcap"), "-out", filepath.Join(dir, "out.pcap")}},
		{"qsplice-replay", []string{"-in", filepath.Join(dir, "junk.pcap"), "-out", filepath.Join(dir, "out.pcap"), "-config", filepath.Join(dir, "line.yaml")}},
	} {
		code, stdout, stderr := run(t, filepath.Join(in.bin, tc.bin), tc.args...)
		if code == 0 {
			t.Errorf("%s %q: exit 0 on junk", tc.bin, tc.args)
		}
		if n := len(stdout) + len(stderr); n > 1000 || strings.Count(stderr, "qsplice-junk") > 3 {
			t.Errorf("%s %q: %d bytes of output, %d junk words quoted: %.300q", tc.bin, tc.args, n, strings.Count(stderr, "qsplice-junk"), stderr)
		}
	}
}
