package benchproxy

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The plot: the three figures the targets are about, one panel each,
// every system a bar. A bar is a median over the rounds (stacked by
// process for qsplice, each part its process's median, so the top of a
// stack need not be the median of the totals) and the dots on it are the
// rounds' own totals, so a reader sees at once how far apart the rounds
// were, which the table's medians hide. A dashed line marks the
// target: 0.25x nginx's CPU per GB (the shim's), nginx's CPU per request
// (the front-end's), direct + 200 us for the first byte.

// PlotFile is the plot's name in the output directory, as PNG; the SVG
// beside it has the same name with .svg.
const PlotFile = "bench-proxy.png"

// plotBar is one system's bar in a panel: its parts, stacked in order,
// and every round's total.
type plotBar struct {
	system string
	name   string // under the bar
	parts  []plotPart
	rounds []float64
}

// plotPart is one process's share of a bar.
type plotPart struct {
	role  string
	value float64
}

func (b plotBar) total() float64 {
	var sum float64
	for _, p := range b.parts {
		sum += p.value
	}
	return sum
}

// plotPanel is one figure: a bar per system that has it, and the target
// (NaN: none).
type plotPanel struct {
	title, unit string
	bars        []plotBar
	target      float64
	targetText  string
}

// The stacking order of qsplice's bar: the process the panel's target is
// about at the bottom, where its top can be read against the target's
// line.
var (
	shimFirst     = []string{RoleShim, RoleFrontend}
	frontendFirst = []string{RoleFrontend, RoleShim}
)

// panels computes the plot's figures from the result.
func (r *Result) panels() []plotPanel {
	views := r.roundViews()
	cpuPanel := func(title, unit string, load func(*SystemResult) *Load, perUnit func(*Load) map[string]float64, qspliceRoles []string) plotPanel {
		p := plotPanel{title: title, unit: unit}
		for i, s := range r.Systems {
			roles := map[string][]string{SystemNginx: {RoleProxy}, SystemHAProxy: {RoleProxy},
				SystemShim: {RoleShim}, SystemQsplice: qspliceRoles}[s.Name]
			if roles == nil {
				continue
			}
			bar := plotBar{system: s.Name, name: r.systemName(s.Name)}
			for _, role := range roles {
				var vs []float64
				for _, view := range views {
					if l := load(view[i]); l != nil {
						if v, ok := perUnit(l)[role]; ok {
							vs = append(vs, v)
						}
					}
				}
				if len(vs) > 0 {
					bar.parts = append(bar.parts, plotPart{role, median(vs)})
				}
			}
			for _, view := range views {
				if l := load(view[i]); l != nil {
					var sum float64
					for _, role := range roles {
						sum += perUnit(l)[role]
					}
					bar.rounds = append(bar.rounds, sum)
				}
			}
			if len(bar.parts) > 0 {
				p.bars = append(p.bars, bar)
			}
		}
		return p
	}
	bulk := cpuPanel("bulk: CPU-s per GB served", "CPU-s/GB", bulkLoad, perGB, shimFirst)
	small := cpuPanel("1K close: CPU-us per request", "CPU-us/request", smallLoad, perRequest, frontendFirst)
	ttfb := plotPanel{title: "time to first byte, new connection: p50", unit: "us"}
	for i, s := range r.Systems {
		bar := plotBar{system: s.Name, name: r.systemName(s.Name)}
		var vs []float64
		for _, view := range views {
			if t := view[i].TTFB; t != nil {
				vs = append(vs, t.P50us)
			}
		}
		if len(vs) > 0 {
			bar.parts, bar.rounds = []plotPart{{"", median(vs)}}, vs
			ttfb.bars = append(ttfb.bars, bar)
		}
	}
	byName := func(p plotPanel, name string) (plotBar, bool) {
		for _, b := range p.bars {
			if b.system == name {
				return b, true
			}
		}
		return plotBar{}, false
	}
	bulk.target, small.target, ttfb.target = math.NaN(), math.NaN(), math.NaN()
	if n, ok := byName(bulk, SystemNginx); ok {
		bulk.target, bulk.targetText = 0.25*n.total(), "shim target: 0.25x nginx"
	}
	if n, ok := byName(small, SystemNginx); ok {
		small.target, small.targetText = n.total(), "front-end target: 1x nginx"
	}
	if d, ok := byName(ttfb, SystemDirect); ok {
		ttfb.target, ttfb.targetText = d.total()+200, "target: direct + 200 us"
	}
	return []plotPanel{bulk, small, ttfb}
}

// Colours of the parts of a bar, by process.
var roleColors = map[string]color.Color{
	RoleProxy:    color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff},
	RoleShim:     color.RGBA{R: 0xdd, G: 0x84, B: 0x52, A: 0xff},
	RoleFrontend: color.RGBA{R: 0x55, G: 0xa8, B: 0x68, A: 0xff},
	"":           color.RGBA{R: 0x8c, G: 0x8c, B: 0x8c, A: 0xff},
}

// Names in the legend and under the bars.
var (
	roleNames   = map[string]string{RoleProxy: "proxy", RoleShim: "shim", RoleFrontend: "front-end"}
	systemNames = map[string]string{SystemDirect: "direct", SystemNginx: "nginx", SystemHAProxy: "HAProxy",
		SystemShim: "shim alone", SystemQsplice: "qsplice"}
)

// systemName is what the plot calls a system: nginx says how it reached
// the back-end when that was not through its pool (-nginx-upstream).
func (r *Result) systemName(system string) string {
	if system == SystemNginx && r.Settings.FreshUpstream {
		return "nginx, fresh"
	}
	return systemNames[system]
}

// plainTicks are gonum's default ticks labelled without trailing zeros
// (250, not 250.00).
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', -1, 64)
		}
	}
	return ticks
}

// plotOf draws one panel.
func plotOf(p plotPanel) (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.title
	pl.Y.Label.Text = p.unit
	pl.Y.Min = 0
	pl.Y.Tick.Marker = plainTicks{}
	pl.Legend.Top = true
	pl.Add(plotter.NewGrid())
	var names []string
	highest := 0.0
	if !math.IsNaN(p.target) {
		highest = p.target
	}
	width := vg.Points(28)
	// One bar chart per stacking level, its value 0 for systems with
	// fewer parts, each stacked on the one below: a stack needs
	// equal-length values. A level's colour is that of its process;
	// qsplice's parts are the only ones above the first level.
	var below *plotter.BarChart
	legend := map[string]bool{}
	levels := 0
	for _, b := range p.bars {
		levels = max(levels, len(b.parts))
	}
	for level := range levels {
		// Each part of this level is its own chart, so that it gets its
		// process's colour; the others of the chart are 0.
		charts := map[string]plotter.Values{}
		var order []string
		for i, b := range p.bars {
			if level >= len(b.parts) {
				continue
			}
			role := b.parts[level].role
			if charts[role] == nil {
				charts[role] = make(plotter.Values, len(p.bars))
				order = append(order, role)
			}
			charts[role][i] = b.parts[level].value
		}
		var top *plotter.BarChart
		for _, role := range order {
			bars, err := plotter.NewBarChart(charts[role], width)
			if err != nil {
				return nil, err
			}
			bars.Color = roleColors[role]
			bars.LineStyle.Width = 0
			if below != nil {
				bars.StackOn(below)
			}
			pl.Add(bars)
			top = bars
			if role != "" && !legend[role] {
				pl.Legend.Add(roleNames[role], bars)
				legend[role] = true
			}
		}
		below = top
	}
	var dots plotter.XYs
	for i, b := range p.bars {
		names = append(names, b.name)
		highest = max(highest, b.total())
		for _, v := range b.rounds {
			dots = append(dots, plotter.XY{X: float64(i), Y: v})
			highest = max(highest, v)
		}
	}
	pl.NominalX(names...)
	if len(dots) > 0 {
		s, err := plotter.NewScatter(dots)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle.Shape = draw.CircleGlyph{}
		s.GlyphStyle.Radius = vg.Points(2.5)
		s.GlyphStyle.Color = color.Black
		pl.Add(s)
		pl.Legend.Add("each round", s)
	}
	if !math.IsNaN(p.target) && len(p.bars) > 0 {
		line, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: p.target}, {X: float64(len(p.bars)) - 0.5, Y: p.target}})
		if err != nil {
			return nil, err
		}
		line.Color = color.RGBA{R: 0xc0, A: 0xff}
		line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		line.Width = vg.Points(1.5)
		pl.Add(line)
		pl.Legend.Add(p.targetText, line)
	}
	pl.Y.Max = 1.45 * highest // room for the legend above the bars
	if pl.Y.Max == 0 {
		pl.Y.Max = 1
	}
	return pl, nil
}

// WritePlot draws the three panels side by side into path (PNG) and the
// same beside it as SVG.
func (r *Result) WritePlot(path string) error {
	var plots []*plot.Plot
	for _, p := range r.panels() {
		pl, err := plotOf(p)
		if err != nil {
			return fmt.Errorf("plot %q: %w", p.title, err)
		}
		plots = append(plots, pl)
	}
	const panelW, panelH = 13 * vg.Centimeter, 11 * vg.Centimeter
	drawAll := func(c vg.CanvasSizer) {
		tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Centimeter, PadLeft: 3 * vg.Millimeter,
			PadRight: 3 * vg.Millimeter, PadTop: 3 * vg.Millimeter, PadBottom: 3 * vg.Millimeter}
		canvases := plot.Align([][]*plot.Plot{plots}, tiles, draw.New(c))
		for i, pl := range plots {
			pl.Draw(canvases[0][i])
		}
	}
	w := panelW * vg.Length(len(plots))
	img := vgimg.New(w, panelH)
	drawAll(img)
	var png bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&png); err != nil {
		return err
	}
	if err := os.WriteFile(path, png.Bytes(), 0o644); err != nil {
		return err
	}
	svg := vgsvg.New(w, panelH)
	drawAll(svg)
	var sb bytes.Buffer
	if _, err := svg.WriteTo(&sb); err != nil {
		return err
	}
	return os.WriteFile(svgPathOf(path), sb.Bytes(), 0o644)
}

// svgPathOf is the SVG beside the PNG at path.
func svgPathOf(path string) string { return strings.TrimSuffix(path, filepath.Ext(path)) + ".svg" }
