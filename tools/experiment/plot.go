package experiment

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/qsplice/qsplice/tools/session"
)

// Size of every PNG.
const (
	plotWidth  = 16 * vg.Centimeter
	plotHeight = 11 * vg.Centimeter
)

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
func PlotVsLoad(results []Result, title, yLabel string, y func(Result) float64, legendLow bool, path string) error {
	p := plot.New()
	p.Title.Text = title
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
	return p.Save(plotWidth, plotHeight, path)
}

// PlotCCDF draws P(response time > t) of every policy at load on a
// logarithmic y axis and saves it as a PNG at path. Points where the
// probability is 0 cannot be drawn on a log scale and end the line.
func PlotCCDF(results []Result, load float64, path string) error {
	rows := atLoad(results, load)
	if len(rows) == 0 {
		return fmt.Errorf("experiment: no results at load %v", load)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Response time distribution at offered load %.2f", load)
	p.X.Label.Text = "t (s)"
	p.Y.Label.Text = "P(response time > t)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	var lines []any
	for _, r := range rows {
		var pts plotter.XYs
		for _, c := range r.CCDF {
			if c.P <= 0 {
				break
			}
			pts = append(pts, plotter.XY{X: c.TSeconds, Y: c.P})
		}
		lines = append(lines, r.Policy, pts)
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return err
	}
	return p.Save(plotWidth, plotHeight, path)
}

// PlotPerClass draws completions per page class at load as grouped bars,
// one bar per policy in each group, and saves it as a PNG at path. The
// browsing and the transaction classes get a panel each, with its own
// linear y axis, because transaction pages are a few percent of the
// traffic and would not show next to browsing.
func PlotPerClass(results []Result, load float64, path string) error {
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
	browsing, err := panel(fmt.Sprintf("Browsing pages, load %.2f", load), session.Main, session.Details)
	if err != nil {
		return err
	}
	transactions, err := panel(fmt.Sprintf("Transaction pages, load %.2f", load), session.Login, session.Confirm)
	if err != nil {
		return err
	}
	img := vgimg.New(2*plotWidth, plotHeight)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadLeft: vg.Millimeter * 3,
		PadRight: vg.Millimeter * 3, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3}
	panels := [][]*plot.Plot{{browsing, transactions}}
	canvases := plot.Align(panels, tiles, dc)
	browsing.Draw(canvases[0][0])
	transactions.Draw(canvases[0][1])
	return writeFile(path, func(w io.Writer) error {
		_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
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

// PlotAll writes the four kinds of plot into dir and returns their paths.
func PlotAll(dir string, results []Result) ([]string, error) {
	var paths []string
	add := func(name string, err error) error {
		if err == nil {
			paths = append(paths, filepath.Join(dir, name))
		}
		return err
	}
	name := throughputPNG
	if err := add(name, PlotVsLoad(results, "Throughput (requests completed in time)", "requests/s",
		func(r Result) float64 { return r.ThroughputRPS }, true, filepath.Join(dir, name))); err != nil {
		return nil, err
	}
	name = responsePNG
	if err := add(name, PlotVsLoad(results, "Mean response time (all served requests)", "seconds",
		func(r Result) float64 { return r.MeanRTSeconds }, false, filepath.Join(dir, name))); err != nil {
		return nil, err
	}
	for _, load := range []float64{CCDFLoadBelow, CCDFLoadAbove} {
		name = fmt.Sprintf(ccdfPNGPattern, load)
		if err := add(name, PlotCCDF(results, load, filepath.Join(dir, name))); err != nil {
			return nil, err
		}
	}
	name = perClassPNG
	if err := add(name, PlotPerClass(results, TableLoad, filepath.Join(dir, name))); err != nil {
		return nil, err
	}
	return paths, nil
}
