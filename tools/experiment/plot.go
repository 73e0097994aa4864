package experiment

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/qsplice/qsplice/tools/session"
)

// Size of every plot: at the PNG's 96 dpi, 907 x 605 pixels.
const (
	plotWidth  = 24 * vg.Centimeter
	plotHeight = 16 * vg.Centimeter
)

// savePlot writes p as the PNG at path and, beside it, the same plot as
// SVG (path with .svg), which scales for print and slides.
func savePlot(p *plot.Plot, path string) error {
	if err := p.Save(plotWidth, plotHeight, path); err != nil {
		return err
	}
	return p.Save(plotWidth, plotHeight, svgPath(path))
}

// svgPath is the SVG beside the PNG at path.
func svgPath(path string) string { return strings.TrimSuffix(path, filepath.Ext(path)) + ".svg" }

// titled is title with the run's tag (preset, seed, window) under it.
func titled(title, tag string) string {
	if tag == "" {
		return title
	}
	return title + "\n" + tag
}

// ccdfFloor is where a P(RT > t) plot's t axis may end: every policy is
// below it by then, and what is left of the tails is too rare to read on
// the log scale. A run whose worst request waited 40 s would otherwise
// squeeze the others into the first tenth of the axis.
const ccdfFloor = 1e-3

// byPolicy groups results by policy name, keeping the order in which
// the policies first appear.
func byPolicy(results []Result) (names []string, groups map[string][]Result) {
	groups = make(map[string][]Result)
	for _, r := range results {
		if _, seen := groups[r.Policy]; !seen {
			names = append(names, r.Policy)
		}
		groups[r.Policy] = append(groups[r.Policy], r)
	}
	return names, groups
}

// atLoad returns the results at load, policy by policy.
func atLoad(results []Result, load float64) []Result {
	var out []Result
	for _, r := range results {
		if math.Abs(r.Load-load) < 1e-6 {
			out = append(out, r)
		}
	}
	return out
}

// PlotVsLoad draws y(result) against offered load, one line per policy,
// and saves it as a PNG at path.
// The legend goes in the top left corner, or the bottom right one when
// legendLow, whichever the lines leave free.
func PlotVsLoad(results []Result, title, tag, yLabel string, y func(Result) float64, legendLow bool, path string) error {
	p := plot.New()
	p.Title.Text = titled(title, tag)
	p.X.Label.Text = "offered load (x capacity)"
	p.X.Tick.Marker = plot.TickerFunc(loadTicks)
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.Legend.Top = !legendLow
	p.Legend.Left = !legendLow
	p.Legend.XOffs = -vg.Millimeter * 2
	p.Legend.YOffs = vg.Millimeter * 2
	if !legendLow {
		p.Legend.XOffs, p.Legend.YOffs = vg.Millimeter*4, -vg.Millimeter*2
	}
	p.Add(plotter.NewGrid())
	names, groups := byPolicy(results)
	var lines []any
	for _, name := range names {
		pts := make(plotter.XYs, len(groups[name]))
		for i, r := range groups[name] {
			pts[i] = plotter.XY{X: r.Load, Y: y(r)}
		}
		lines = append(lines, name, pts)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	return savePlot(p, path)
}

// PlotCCDF draws P(response time > t) of every policy at load on a
// logarithmic y axis and saves it as a PNG at path. Points where the
// probability is 0 cannot be drawn on a log scale and end the line.
func PlotCCDF(results []Result, load float64, tag, path string) error {
	p, err := ccdfPlot(results, load, tag)
	if err != nil {
		return err
	}
	return savePlot(p, path)
}

// ccdfPlot is PlotCCDF's plot: the t axis ends a tenth past where the
// last policy falls below ccdfFloor.
func ccdfPlot(results []Result, load float64, tag string) (*plot.Plot, error) {
	rows := atLoad(results, load)
	if len(rows) == 0 {
		return nil, fmt.Errorf("experiment: no results at load %v", load)
	}
	p := plot.New()
	p.Title.Text = titled(fmt.Sprintf("Response time distribution at offered load %.2f", load), tag)
	p.X.Label.Text = "t (s)"
	p.Y.Label.Text = "P(response time > t)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	var lines []any
	xmax := 0.0 // where the last policy falls below ccdfFloor
	for _, r := range rows {
		var pts plotter.XYs
		for _, c := range r.CCDF {
			if c.P <= 0 {
				break
			}
			pts = append(pts, plotter.XY{X: c.TSeconds, Y: c.P})
			if c.P >= ccdfFloor {
				xmax = max(xmax, c.TSeconds)
			}
		}
		lines = append(lines, r.Policy, pts)
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return nil, err
	}
	if xmax > 0 {
		p.X.Min, p.X.Max = 0, 1.1*xmax
		p.Y.Min = ccdfFloor / 2
	}
	return p, nil
}

// PlotPerClass draws completions per page class at load as grouped bars,
// one bar per policy in each group, and saves it as a PNG at path. The
// browsing and the transaction classes get a panel each, with its own
// linear y axis, because transaction pages are a few percent of the
// traffic and would not show next to browsing.
func PlotPerClass(results []Result, load float64, tag, path string) error {
	rows := atLoad(results, load)
	if len(rows) == 0 {
		return fmt.Errorf("experiment: no results at load %v", load)
	}
	panel := func(title string, first, last session.Stage) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = "requests completed in time"
		p.Y.Min = 0
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		width := vg.Points(14)
		highest := 0
		for i, r := range rows {
			var vals plotter.Values
			for j := first; j <= last; j++ {
				vals = append(vals, float64(r.PerClass[j]))
				highest = max(highest, r.PerClass[j])
			}
			bars, err := plotter.NewBarChart(vals, width)
			if err != nil {
				return nil, err
			}
			bars.Color = plotutil.Color(i)
			bars.LineStyle.Width = 0
			bars.Offset = vg.Length(float64(i)-float64(len(rows)-1)/2) * width
			p.Add(bars)
			p.Legend.Add(r.Policy, bars)
		}
		var names []string
		for j := first; j <= last; j++ {
			names = append(names, j.String())
		}
		p.NominalX(names...)
		p.Y.Max = 1.3 * float64(highest) // room for the legend above the bars
		return p, nil
	}
	browsing, err := panel(titled(fmt.Sprintf("Browsing pages, load %.2f", load), tag), session.Main, session.Details)
	if err != nil {
		return err
	}
	transactions, err := panel(titled(fmt.Sprintf("Transaction pages, load %.2f", load), tag), session.Login, session.Confirm)
	if err != nil {
		return err
	}
	draw2 := func(c vg.CanvasSizer) {
		dc := draw.New(c)
		tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadLeft: vg.Millimeter * 3,
			PadRight: vg.Millimeter * 3, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3}
		canvases := plot.Align([][]*plot.Plot{{browsing, transactions}}, tiles, dc)
		browsing.Draw(canvases[0][0])
		transactions.Draw(canvases[0][1])
	}
	img := vgimg.New(2*plotWidth, plotHeight)
	draw2(img)
	if err := writeFile(path, func(w io.Writer) error {
		_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
		return err
	}); err != nil {
		return err
	}
	svg := vgsvg.New(2*plotWidth, plotHeight)
	draw2(svg)
	return writeFile(svgPath(path), func(w io.Writer) error {
		_, err := svg.WriteTo(w)
		return err
	})
}

// loadTicks labels every 0.5 of load and marks every 0.1.
func loadTicks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for i := math.Ceil(lo*10 - 1e-9); i <= hi*10+1e-9; i++ {
		t := plot.Tick{Value: i / 10}
		if int(i)%5 == 0 {
			t.Label = strconv.FormatFloat(i/10, 'f', 1, 64)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// The loads at which the published experiment shows response-time
// distributions and per-class completions.
const (
	CCDFLoadBelow  = 0.94
	CCDFLoadAbove  = 1.47
	TableLoad      = 1.4
	resultsCSV     = "results.csv"
	resultsJSON    = "results.json"
	throughputPNG  = "throughput.png"
	responsePNG    = "mean_response_time.png"
	perClassPNG    = "per_class_1.40.png"
	ccdfPNGPattern = "rt_ccdf_%.2f.png"
)

// PlotAll writes the four kinds of plot into dir, each as PNG and SVG,
// their titles carrying tag (the preset and the run), and returns their
// paths.
func PlotAll(dir string, results []Result, tag string) ([]string, error) {
	var paths []string
	add := func(name string, err error) error {
		if err == nil {
			p := filepath.Join(dir, name)
			paths = append(paths, p, svgPath(p))
		}
		return err
	}
	name := throughputPNG
	if err := add(name, PlotVsLoad(results, "Throughput (requests completed in time)", tag, "requests/s",
		func(r Result) float64 { return r.ThroughputRPS }, true, filepath.Join(dir, name))); err != nil {
		return nil, err
	}
	name = responsePNG
	if err := add(name, PlotVsLoad(results, "Mean response time (all served requests)", tag, "seconds",
		func(r Result) float64 { return r.MeanRTSeconds }, false, filepath.Join(dir, name))); err != nil {
		return nil, err
	}
	for _, load := range []float64{CCDFLoadBelow, CCDFLoadAbove} {
		name = fmt.Sprintf(ccdfPNGPattern, load)
		if err := add(name, PlotCCDF(results, load, tag, filepath.Join(dir, name))); err != nil {
			return nil, err
		}
	}
	name = perClassPNG
	if err := add(name, PlotPerClass(results, TableLoad, tag, filepath.Join(dir, name))); err != nil {
		return nil, err
	}
	return paths, nil
}
