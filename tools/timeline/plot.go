package timeline

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	tl "github.com/qsplice/qsplice/frontend/timeline"
)

// Size of every PNG.
const (
	plotWidth  = 18 * vg.Centimeter
	plotHeight = 11 * vg.Centimeter
)

func msOf(d int64) float64 { return float64(d) / float64(time.Millisecond) }

// Find returns the record of flow id.
func Find(recs []tl.Record, id uint64) (tl.Record, bool) {
	i := slices.IndexFunc(recs, func(r tl.Record) bool { return r.Flow == id })
	if i < 0 {
		return tl.Record{}, false
	}
	return recs[i], true
}

// Waterfall draws one connection's steps as a waterfall: a row per step
// that happened, top to bottom in Step order, each bar running from the
// step before it to the step itself (ms from the first step), the shim's
// placed steps with their uncertainty as error bars. It saves a PNG at
// path.
func Waterfall(r tl.Record, path string) error {
	steps := r.Steps()
	if len(steps) == 0 {
		return fmt.Errorf("timeline: flow %d has no steps", r.Flow)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("flow %d  back-end %d", r.Flow, r.Backend)
	if r.Client.IsValid() {
		p.Title.Text += "  client " + r.Client.String()
	}
	if r.Path != "" {
		p.Title.Text += "  " + r.Method + " " + r.Path
	}
	if r.Reason != "" {
		p.Title.Text += "  (" + r.Reason + ")"
	}
	p.X.Label.Text = "ms from " + steps[0].String()
	p.Add(plotter.NewGrid())
	start := r.Start()
	var ticks []plot.Tick
	var placed plotter.XYs
	var errs plotter.XErrors
	prev := start
	for i, s := range steps {
		y := float64(len(steps) - 1 - i)
		t := r.At[s]
		from, to := msOf(prev-start), msOf(t-start)
		bar, err := plotter.NewLine(plotter.XYs{{X: from, Y: y}, {X: to, Y: y}})
		if err != nil {
			return err
		}
		bar.Width = vg.Points(7)
		bar.Color = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
		if s.Placed() {
			bar.Color = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
			u := msOf(int64(r.ShimUncertainty))
			placed = append(placed, plotter.XY{X: to, Y: y})
			errs = append(errs, struct{ Low, High float64 }{u, u})
		}
		mark, err := plotter.NewScatter(plotter.XYs{{X: to, Y: y}})
		if err != nil {
			return err
		}
		mark.GlyphStyle.Shape = draw.CircleGlyph{}
		mark.GlyphStyle.Radius = vg.Points(2.5)
		p.Add(bar, mark)
		ticks = append(ticks, plot.Tick{Value: y, Label: fmt.Sprintf("%s %.3f", s, to)})
		if t > prev {
			prev = t
		}
	}
	if len(placed) > 0 {
		eb, err := plotter.NewXErrorBars(struct {
			plotter.XYer
			plotter.XErrorer
		}{placed, errs})
		if err != nil {
			return err
		}
		p.Add(eb)
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = -0.7, float64(len(steps))-0.3
	return p.Save(plotWidth, plotHeight, path)
}

// CDFs draws, for every step that some record has, the CDF of its offset
// from the SYN over the records with both, one PNG per step in dir
// (cdf-<step>.png). It returns the files written.
func CDFs(recs []tl.Record, dir string) ([]string, error) {
	var files []string
	for s := range tl.NumSteps {
		var ds []float64
		for i := range recs {
			syn, ok1 := recs[i].Get(tl.SYN)
			t, ok2 := recs[i].Get(s)
			if ok1 && ok2 {
				ds = append(ds, msOf(t-syn))
			}
		}
		if len(ds) == 0 || s == tl.SYN {
			continue
		}
		slices.Sort(ds)
		pts := make(plotter.XYs, len(ds))
		for i, d := range ds {
			pts[i] = plotter.XY{X: d, Y: float64(i+1) / float64(len(ds))}
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: offset from syn, %d connections", s, len(ds))
		p.X.Label.Text = "ms from syn"
		p.Y.Label.Text = "fraction of connections"
		p.Y.Min, p.Y.Max = 0, 1
		p.Add(plotter.NewGrid())
		line, err := plotter.NewLine(pts)
		if err != nil {
			return files, err
		}
		line.StepStyle = plotter.PostStep
		p.Add(line)
		path := filepath.Join(dir, "cdf-"+s.String()+".png")
		if err := p.Save(plotWidth, plotHeight, path); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}
