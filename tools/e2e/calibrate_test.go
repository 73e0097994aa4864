package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/calibrate"
	"github.com/qsplice/qsplice/tools/lab"
)

// qsplice-calibrate live, short: 2 back-ends x 5 slots at 100 ms serve
// 100 req/s whatever the size (the test server's cost is its service
// time), so the fit must find 1/a near 100 req/s and a b that explains
// little of the utilization; the file it rewrites gets the numbers.
func TestCalibrateLive(t *testing.T) {
	l := extraLab(t, "k", func(cfg *lab.Config) {
		cfg.Backends, cfg.Capacity, cfg.ServiceTime = 2, 5, 100*time.Millisecond
	})
	dir := t.TempDir()
	file := filepath.Join(dir, "fe.yaml")
	if err := os.WriteFile(file, []byte("feedback:\n  content:\n    trees: 3\n    a: 0\n    b: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	jsonPath := filepath.Join(dir, "calibrate.json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", l.NS("c1"), filepath.Join(l.Config().BinDir, "qsplice-calibrate"),
		"-target", "http://"+lab.VIP+":8080", "-sizes", "1K,256K", "-start", "30", "-factor", "1.25",
		"-step", "2s", "-pause", "500ms", "-json", jsonPath, "-write", file)
	out, err := cmd.CombinedOutput()
	t.Logf("qsplice-calibrate:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	var res calibrate.Result
	b, err := os.ReadFile(jsonPath)
	if err == nil {
		err = json.Unmarshal(b, &res)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Sizes {
		if !s.Saturated || s.RMax < 60 || s.RMax > 130 {
			t.Errorf("size %d: Rmax %.1f req/s (saturated %v), want about 100", s.Size, s.RMax, s.Saturated)
		}
		if u := res.A*s.RMax + res.B*s.WMax; u < 0.8 || u > 1.2 {
			t.Errorf("size %d: the fit gives U = %.2f at saturation", s.Size, u)
		}
	}
	if res.A <= 0 || 1/res.A < 60 || 1/res.A > 140 || res.B*1e6*2 > 0.5 {
		t.Errorf("a = %g (1/a = %.1f req/s), b = %g: want 1/a near 100 and b small", res.A, 1/res.A, res.B)
	}
	text, _ := os.ReadFile(file)
	if !strings.Contains(string(text), "    a: "+calibrate.FormatNumber(res.A)) || strings.Contains(string(text), "    a: 0\n") {
		t.Errorf("rewritten file:\n%s", text)
	}
}
