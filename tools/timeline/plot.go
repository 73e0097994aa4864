package timeline

import (
	"fmt"
	"image/color"
	"io"
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

// Find returns the record of flow id: the connection's own (request 1,
// written when it ends), not a keep-alive follow-up's, which comes
// earlier in the file.
func Find(recs []tl.Record, id uint64) (tl.Record, bool) {
	i := slices.IndexFunc(recs, func(r tl.Record) bool { return r.Flow == id && r.Request <= 1 })
	if i < 0 {
		i = slices.IndexFunc(recs, func(r tl.Record) bool { return r.Flow == id })
	}
	if i < 0 {
		return tl.Record{}, false
	}
	return recs[i], true
}

// retxStyles tells the retransmission kinds apart in a waterfall
// (filled glyphs, visible at a glance).
var retxStyles = map[string]struct {
	shape draw.GlyphDrawer
	color color.RGBA
}{
	"syn":         {draw.PyramidGlyph{}, color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}},
	"client_data": {draw.CircleGlyph{}, color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}},
	"client_sack": {draw.BoxGlyph{}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
	"c2_syn":      {draw.PyramidGlyph{}, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
	"splice":      {draw.BoxGlyph{}, color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}},
	"request":     {draw.CircleGlyph{}, color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}},
}

// addRetx draws r's retransmissions on the row at y, one glyph per
// kind, with a legend entry each.
func addRetx(p *plot.Plot, r tl.Record, start int64, y float64) error {
	byKind := map[string]plotter.XYs{}
	var kinds []string
	for _, x := range r.Retransmissions() {
		if _, ok := byKind[x.Kind]; !ok {
			kinds = append(kinds, x.Kind)
		}
		byKind[x.Kind] = append(byKind[x.Kind], plotter.XY{X: msOf(x.At - start), Y: y})
	}
	for _, k := range kinds {
		sc, err := plotter.NewScatter(byKind[k])
		if err != nil {
			return err
		}
		st, ok := retxStyles[k]
		if !ok {
			st.shape, st.color = draw.BoxGlyph{}, color.RGBA{A: 0xff}
		}
		sc.GlyphStyle.Shape, sc.GlyphStyle.Color, sc.GlyphStyle.Radius = st.shape, st.color, vg.Points(4)
		p.Add(sc)
		p.Legend.Add(fmt.Sprintf("%s x%d", k, len(byKind[k])), sc)
	}
	p.Legend.Top = true
	return nil
}

// Waterfall draws one connection's steps as a waterfall: a row per step
// that happened, top to bottom in Step order, each bar running from the
// step before it to the step itself (ms from the first step), the shim's
// placed steps with their uncertainty as error bars, and below them a
// row with the retransmissions seen on the connection, a glyph per kind
// at its time. It saves a PNG at path.
func Waterfall(r tl.Record, path string) error {
	steps := r.Steps()
	if len(steps) == 0 {
		return fmt.Errorf("timeline: flow %d has no steps", r.Flow)
	}
	rows := len(steps)
	retxRow := r.NumRetx > 0
	if retxRow {
		rows++
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
		y := float64(rows - 1 - i)
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
	if retxRow {
		if err := addRetx(p, r, start, 0); err != nil {
			return err
		}
		label := fmt.Sprintf("retransmissions %d", r.NumRetx)
		if n := len(r.Retransmissions()); n < r.NumRetx {
			label += fmt.Sprintf(" (first %d)", n)
		}
		ticks = append(ticks, plot.Tick{Value: 0, Label: label})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = -0.7, float64(rows)-0.3
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

// WriteRetx lists r's retransmissions, ms from its first step.
func WriteRetx(w io.Writer, r tl.Record) error {
	if r.NumRetx == 0 {
		_, err := fmt.Fprintf(w, "flow %d: no retransmission seen\n", r.Flow)
		return err
	}
	listed := r.Retransmissions()
	fmt.Fprintf(w, "flow %d: %d retransmissions seen", r.Flow, r.NumRetx)
	if len(listed) < r.NumRetx {
		fmt.Fprintf(w, ", the first %d", len(listed))
	}
	fmt.Fprintln(w, ":")
	start := r.Start()
	for _, x := range listed {
		fmt.Fprintf(w, "  %10.3f ms  %s\n", msOf(x.At-start), x.Kind)
	}
	return nil
}
