package benchproxy

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The plot's panels hold the table's figures: qsplice's bar stacked with
// the process its target is about at the bottom, every round's total as
// a dot, and the target where the table puts it.
func TestPlotPanels(t *testing.T) {
	r := sampleResult()
	// Three rounds, qsplice's front-end at 100, 110 and 105 us per
	// request: the bar's front-end part is the median, the dots the
	// rounds' totals with the shim's 128.
	var rounds [][]*Round
	for _, s := range r.Systems {
		var rs []*Round
		for _, fe := range []float64{100, 110, 105} {
			one := sampleResult().system(s.Name)
			if s.Name == SystemQsplice {
				one.Small.CPUUSPerRequest[RoleFrontend] = fe
			}
			rs = append(rs, &Round{Bulk: one.Bulk, Small: one.Small, TTFB: one.TTFB})
		}
		rounds = append(rounds, rs)
	}
	for i, s := range r.Systems {
		s.setRounds(rounds[i])
	}
	panels := r.panels()
	if len(panels) != 3 {
		t.Fatalf("%d panels", len(panels))
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }
	bar := func(p plotPanel, system string) plotBar {
		t.Helper()
		for _, b := range p.bars {
			if b.system == system {
				return b
			}
		}
		t.Fatalf("%s: no bar for %s", p.title, system)
		return plotBar{}
	}
	systems := func(p plotPanel) []string {
		var out []string
		for _, b := range p.bars {
			out = append(out, b.system)
		}
		return out
	}
	bulk, small, ttfb := panels[0], panels[1], panels[2]
	if got := systems(bulk); !slices.Equal(got, []string{SystemNginx, SystemHAProxy, SystemShim, SystemQsplice}) {
		t.Errorf("bulk bars: %v (direct has no CPU figure)", got)
	}
	if q := bar(bulk, SystemQsplice); len(q.parts) != 2 || q.parts[0].role != RoleShim || !near(q.parts[0].value, 8.2) ||
		q.parts[1].role != RoleFrontend || !near(q.parts[1].value, 3.0) {
		t.Errorf("bulk qsplice: %+v, want shim 8.2 below front-end 3.0", q.parts)
	}
	if !near(bulk.target, 0.25*1.08) {
		t.Errorf("bulk target %v, want 0.25 x nginx's 1.08", bulk.target)
	}
	q := bar(small, SystemQsplice)
	if len(q.parts) != 2 || q.parts[0].role != RoleFrontend || !near(q.parts[0].value, 105) || q.parts[1].role != RoleShim {
		t.Errorf("1K qsplice: %+v, want the front-end's median 105 at the bottom", q.parts)
	}
	if len(q.rounds) != 3 || !near(q.rounds[0], 228) || !near(q.rounds[1], 238) || !near(q.rounds[2], 233) {
		t.Errorf("1K qsplice rounds: %v, want 228, 238, 233", q.rounds)
	}
	if s := bar(small, SystemShim); len(s.parts) != 1 || s.parts[0].role != RoleShim || !near(s.parts[0].value, 100) {
		t.Errorf("1K shim alone: %+v", s.parts)
	}
	if !near(small.target, 28) {
		t.Errorf("1K target %v, want nginx's 28", small.target)
	}
	if len(ttfb.bars) != len(Systems) || !near(ttfb.target, 433+200) || !near(bar(ttfb, SystemQsplice).total(), 829) {
		t.Errorf("TTFB: %d bars, target %v, qsplice %v", len(ttfb.bars), ttfb.target, bar(ttfb, SystemQsplice).total())
	}
	// Without nginx there is no CPU target to draw.
	r.Systems = slices.DeleteFunc(r.Systems, func(s *SystemResult) bool { return s.Name == SystemNginx })
	if p := r.panels(); !math.IsNaN(p[0].target) || !math.IsNaN(p[1].target) || math.IsNaN(p[2].target) {
		t.Errorf("targets without nginx: %v %v %v", p[0].target, p[1].target, p[2].target)
	}
}

// WriteFiles draws the plot beside the table: a PNG that decodes, and
// an SVG with the panels' titles.
func TestWriteFilesDrawsThePlot(t *testing.T) {
	dir := t.TempDir()
	if err := sampleResult().WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, PlotFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", PlotFile, err)
	}
	if b := img.Bounds(); b.Dx() <= 2*b.Dy() {
		t.Errorf("%s is %dx%d: three panels side by side should be wide", PlotFile, b.Dx(), b.Dy())
	}
	svg, err := os.ReadFile(filepath.Join(dir, "bench-proxy.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bulk: CPU-s per GB served", "1K close: CPU-us per request", "time to first byte", "shim alone", "each round"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
}
