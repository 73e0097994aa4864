package benchproxy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/netns"
)

// needRoot skips when not root, with the reason; as root (CI) the
// benchmark's programs must be there.
func needRoot(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the benchmark builds network namespaces, AF_PACKET and TAP devices, and runs perf")
	}
	for _, p := range []string{"wrk", "nginx", "haproxy", "perf", "ethtool", "ip"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%v (.ci/run installs it)", err)
		}
	}
	return binaries(t)
}

// binaries returns a directory with the qsplice binaries: QSPLICE_BIN
// when set (make builds them first), otherwise freshly built.
func binaries(t *testing.T) string {
	if dir := os.Getenv("QSPLICE_BIN"); dir != "" {
		return dir
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"github.com/qsplice/qsplice/cmd/qsplice-frontend", "github.com/qsplice/qsplice/cmd/qsplice-backend")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the daemons: %v\n%s", err, out)
	}
	return dir
}

// syncBuffer collects progress lines from the run's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// leftovers lists what a run named id left behind: namespaces of the
// lab and the chain, perf probes of its group.
func leftovers(t *testing.T, id string) []string {
	t.Helper()
	var left []string
	for _, prefix := range []string{"qs-bp" + id + "-", "qsbp-" + id + "-"} {
		names, err := netns.List(prefix)
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, names...)
	}
	out, _ := exec.Command("perf", "probe", "-l").CombinedOutput()
	if strings.Contains(string(out), "qsbp"+id+":") {
		left = append(left, "perf probes: "+string(out))
	}
	return left
}

// TestRunMeasuresEverySystem runs the whole benchmark with one-second
// loads and checks that every figure of the table is there and sane, and
// that nothing is left behind.
func TestRunMeasuresEverySystem(t *testing.T) {
	bin := needRoot(t)
	var progress syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{Duration: time.Second, BulkSize: 1 << 20, TTFBRequests: 100,
		FrameWindow: time.Second, BinDir: bin, Progress: &progress})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	t.Logf("progress:\n%s\n%s", progress.String(), res.Table())
	if left := leftovers(t, res.ID); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if len(res.Systems) != len(Systems) {
		t.Fatalf("%d systems measured, want %d", len(res.Systems), len(Systems))
	}
	for _, s := range res.Systems {
		for name, l := range map[string]*Load{"bulk": s.Bulk, "1K close": s.Small} {
			if l == nil || l.Wrk.Requests == 0 || l.MBPerSec <= 0 || l.RequestsPerSec <= 0 {
				t.Errorf("%s %s: %+v", s.Name, name, l)
				continue
			}
			if errs := l.Wrk.Errors(); errs*10 > l.Wrk.Requests {
				t.Errorf("%s %s: %d of %d requests failed", s.Name, name, errs, l.Wrk.Requests)
			}
			roles := map[string][]string{SystemNginx: {RoleProxy}, SystemHAProxy: {RoleProxy},
				SystemShim: {RoleShim}, SystemQsplice: {RoleFrontend, RoleShim}}[s.Name]
			for _, role := range roles {
				if l.CPUSeconds[role] <= 0 {
					t.Errorf("%s %s: %s used no CPU", s.Name, name, role)
				}
			}
		}
		if s.TTFB == nil || s.TTFB.Samples != 100 || s.TTFB.P50us <= 0 || s.TTFB.P99us < s.TTFB.P50us {
			t.Errorf("%s TTFB: %+v", s.Name, s.TTFB)
		}
	}
	q := res.system(SystemQsplice)
	if len(q.Frames) != 2 {
		t.Fatalf("frame costs: %+v", q.Frames)
	}
	for _, f := range q.Frames {
		// Every daemon makes syscalls to move frames; how many per frame
		// is what the benchmark is for.
		if f.Error != "" || f.Frames == 0 || f.Syscalls == 0 || f.Seconds < 0.5 {
			t.Errorf("%s frame costs: %+v", f.Process, f)
		}
	}
	// The proxies and both daemons were sampled under the 1K close load,
	// and each delivered some of what it sent on its own CPU: every one
	// of them sends on veths.
	for name, roles := range map[string][]string{SystemNginx: {RoleProxy}, SystemHAProxy: {RoleProxy},
		SystemQsplice: {RoleFrontend, RoleShim}} {
		s := res.system(name)
		for _, role := range roles {
			d := s.delivery(role)
			if d == nil || d.Error != "" || d.Samples < 50 || d.Delivering == 0 || d.Share >= 1 {
				t.Errorf("%s %s delivery: %+v", name, role, d)
			}
		}
	}
	// Every row has a figure from every system it applies to, and every
	// row with a target a verdict.
	for _, row := range res.Rows() {
		want := []string{SystemQsplice}
		switch {
		case strings.HasPrefix(row.Figure, "bulk: throughput"), strings.HasSuffix(row.Figure, "requests/s"), strings.HasPrefix(row.Figure, "TTFB"):
			want = Systems
		case strings.HasSuffix(row.Figure, "| shim"):
			want = []string{SystemNginx, SystemHAProxy, SystemShim, SystemQsplice}
		case strings.Contains(row.Figure, "CPU"), strings.Contains(row.Figure, "delivering"):
			want = []string{SystemNginx, SystemHAProxy, SystemQsplice}
		}
		for _, s := range want {
			if v, ok := row.Values[s]; !ok || v <= 0 && !strings.Contains(row.Figure, "allocs") {
				t.Errorf("%s: %s has %v (present %v)", row.Figure, s, v, ok)
			}
		}
		if row.Target != "" && row.Verdict != "met" && row.Verdict != "NOT met" {
			t.Errorf("%s: verdict %q", row.Figure, row.Verdict)
		}
	}
	table := res.Table()
	for _, s := range []string{"direct", "nginx", "HAProxy", "shim", "qsplice", "q/nginx", "q/shim"} {
		if !strings.Contains(table, s) {
			t.Errorf("table lacks %q", s)
		}
	}
}

// TestRunCleansUpWhenCancelled stops a run in the middle of its first
// load: it must fail, and remove the lab, the chain and its processes.
func TestRunCleansUpWhenCancelled(t *testing.T) {
	bin := needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	progress := &cancelOn{cancel: cancel, trigger: "bulk: nginx"}
	res, err := Run(ctx, Options{Duration: 5 * time.Second, BulkSize: 1 << 20, BinDir: bin,
		Only: []string{SystemNginx, SystemQsplice}, Progress: progress})
	if err == nil {
		t.Fatalf("a cancelled run succeeded: %+v", res)
	}
	id := progress.id()
	if id == "" {
		t.Fatalf("no run id in the progress lines:\n%s", progress.buf.String())
	}
	if left := leftovers(t, id); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	dir := strings.TrimSuffix(err.Error()[strings.LastIndex(err.Error(), "kept in ")+len("kept in "):], ")")
	if _, serr := os.Stat(dir); serr != nil {
		t.Errorf("the error names %q as the kept work directory: %v\n%v", dir, serr, err)
	}
	for _, log := range []string{"chain/proxy-nginx.log", "lab-logs/frontend.log"} {
		if _, serr := os.Stat(filepath.Join(dir, log)); serr != nil {
			t.Errorf("a failed run did not keep %s: %v", log, serr)
		}
	}
	os.RemoveAll(dir)
}

// cancelOn cancels the run when a progress line holds trigger.
type cancelOn struct {
	cancel  func()
	trigger string
	buf     syncBuffer
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.buf.Write(p)
	if strings.Contains(string(p), c.trigger) {
		c.cancel()
	}
	return len(p), nil
}

// id reads the run's id from its first progress line ("lab bpID").
func (c *cancelOn) id() string {
	var id string
	for _, line := range strings.Split(c.buf.String(), "\n") {
		if _, rest, ok := strings.Cut(line, "(lab bp"); ok {
			fmt.Sscanf(rest, "%6s", &id)
			return id
		}
	}
	return ""
}
