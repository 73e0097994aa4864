package experiment

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Files WriteFeedbackAll writes.
const (
	feedbackCSV        = "feedback.csv"
	feedbackJSON       = "feedback.json"
	feedbackQueuesPNG  = "feedback_queues.png"
	feedbackProQoSPNG  = "feedback_proqos.png"
	feedbackAdaptPNG   = "feedback_adaptation.png"
	feedbackQualityPNG = "feedback_quality.png"
)

// WriteFeedbackCSV writes one row per class and period.
func WriteFeedbackCSV(w io.Writer, res FeedbackResult) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"t_s", "offered_load", "utilization", "g", "class", "queued", "period_end_q", "period_in", "period_out", "reserve",
		"target_queue", "pro_qos", "target_share", "quality", "dispatched", "refused"}); err != nil {
		return err
	}
	for _, p := range res.Series {
		for _, c := range p.Classes {
			quality := ""
			if !math.IsNaN(c.Quality) {
				quality = csvFloat(c.Quality)
			}
			periodEnd, in, out := "", "", ""
			if c.PeriodEndQ != noPeriodEnd {
				periodEnd, in, out = strconv.Itoa(c.PeriodEndQ), strconv.Itoa(c.PeriodIn), strconv.Itoa(c.PeriodOut)
			}
			row := []string{csvFloat(p.TSeconds), csvFloat(p.Load), csvFloat(p.U), csvFloat(p.G), c.Name,
				strconv.Itoa(c.Queued), periodEnd, in, out, strconv.Itoa(c.Reserve), strconv.Itoa(c.TargetQueue),
				csvFloat(c.ProQoS), csvFloat(c.Share), quality,
				strconv.FormatUint(c.Dispatched, 10), strconv.FormatUint(c.Refused, 10)}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteFeedbackJSON writes the result, summary first.
func WriteFeedbackJSON(w io.Writer, res FeedbackResult) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		CapacityRPS float64         `json:"capacity_rps"`
		Trees       int             `json:"trees"`
		Summary     FeedbackSummary `json:"summary"`
		Series      []FeedbackPoint `json:"series"`
	}{res.CapacityRPS, res.Trees, res.Summary, res.Series})
}

// WriteFeedbackSummary prints the summary as a short table.
func WriteFeedbackSummary(w io.Writer, res FeedbackResult) error {
	s := res.Summary
	fmt.Fprintf(w, "feedback policy, step load on a capacity of %.0f req/s\n", res.CapacityRPS)
	fmt.Fprintf(w, "%-8s %14s %10s %22s %9s %16s\n", "class", "served frac.", "ratio", "periods within 20% q*", "(judged)",
		"(sampled queue)")
	for i, c := range res.Series[0].Classes {
		fmt.Fprintf(w, "%-8s %14.3f %10.2f %21.0f%% %9d %15.0f%%\n", c.Name, s.ServedFraction[i], s.RatioToLast[i],
			100*s.WithinTarget[i], s.PeriodEndsJudged[i], 100*s.WithinTargetSampled[i])
	}
	if res.Trees > 1 {
		fmt.Fprintf(w, "U (per second) settled in 0.85 +/- 0.05 %.0f s after the step up, strictly, %.0f s with 80%% of the "+
			"seconds in it and all in +/- 0.10 (-1: never); from 10 s after the step: mean %.3f, worst second %.3f off, "+
			"%.0f%% of the seconds in the band; G back at M %.2f s after the step down\n",
			s.USettleSeconds, s.USettleTolerantSeconds, s.USteadyMean, s.USteadyWorst, 100*s.USteadyInBand, s.GRecoverSeconds)
	}
	_, err := fmt.Fprintf(w, "%d queue timeouts, %d overload refusals (503)\n\n", s.QueueTimeouts, s.OverloadRefusals)
	return err
}

// timePlot is a plot against time with a grid and the legend at the top
// right.
func timePlot(title, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// addSeries adds one line per class of y(point, class) and, when ref is
// given, the class's reference as a dashed line of the same colour.
func addSeries(p *plot.Plot, res FeedbackResult, y, ref func(FeedbackPoint, int) float64, refName string) error {
	for i, c := range res.Series[0].Classes {
		var pts, refs plotter.XYs
		for _, pt := range res.Series {
			if v := y(pt, i); !math.IsNaN(v) {
				pts = append(pts, plotter.XY{X: pt.TSeconds, Y: v})
			}
			if ref != nil {
				refs = append(refs, plotter.XY{X: pt.TSeconds, Y: ref(pt, i)})
			}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		p.Add(line)
		p.Legend.Add(c.Name, line)
		if ref != nil {
			r, err := plotter.NewLine(refs)
			if err != nil {
				return err
			}
			r.Color = plotutil.Color(i)
			r.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(r)
			if i == 0 {
				p.Legend.Add(refName, r)
			}
		}
	}
	return nil
}

// PlotFeedback writes the four plots of a run into dir and returns their
// paths: queue lengths against target_q, proQoS against the target
// shares, U and G/M with the offered load, and the quality served per
// class.
func PlotFeedback(dir string, res FeedbackResult) ([]string, error) {
	if len(res.Series) == 0 {
		return nil, fmt.Errorf("experiment: no samples to plot")
	}
	var paths []string
	save := func(p *plot.Plot, name string) error {
		path := filepath.Join(dir, name)
		if err := savePlot(p, path); err != nil {
			return err
		}
		paths = append(paths, path, svgPath(path))
		return nil
	}
	// The loop's q(t) at each period's end, what the criterion is
	// judged on; the queue sampled in mid-period swings by the dispatch
	// bursts (see fillPeriodEnds).
	q := timePlot("Queue length per class at each period's end, q(t) (dashed: target_q)", "requests queued")
	if err := addSeries(q, res, func(p FeedbackPoint, i int) float64 {
		if v := p.Classes[i].PeriodEndQ; v != noPeriodEnd {
			return float64(v)
		}
		return math.NaN()
	},
		func(p FeedbackPoint, i int) float64 { return float64(p.Classes[i].TargetQueue) }, "target_q"); err != nil {
		return nil, err
	}
	if err := save(q, feedbackQueuesPNG); err != nil {
		return nil, err
	}
	pq := timePlot("proQoS per class (dashed: target share)", "proQoS")
	pq.Y.Max = 1
	if err := addSeries(pq, res, func(p FeedbackPoint, i int) float64 { return p.Classes[i].ProQoS },
		func(p FeedbackPoint, i int) float64 { return p.Classes[i].Share }, "target share"); err != nil {
		return nil, err
	}
	if err := save(pq, feedbackProQoSPNG); err != nil {
		return nil, err
	}
	trees := float64(max(res.Trees, 1))
	ad := timePlot("Content adaptation: U per period and per second (band 0.85 +/- 0.05), G / M, offered load / 2", "")
	ad.Y.Max = 1.2
	var u, g, load, perSec, lo, hi plotter.XYs
	for _, pt := range res.Series {
		u = append(u, plotter.XY{X: pt.TSeconds, Y: pt.U})
		g = append(g, plotter.XY{X: pt.TSeconds, Y: pt.G / trees})
		load = append(load, plotter.XY{X: pt.TSeconds, Y: pt.Load / 2})
	}
	// U over each whole second, drawn as steps: what "settles" is
	// judged on.
	for k, us := range res.Summary.USeconds {
		perSec = append(perSec, plotter.XY{X: float64(k), Y: us}, plotter.XY{X: float64(k + 1), Y: us})
	}
	if n := len(res.Summary.USeconds); n > 0 {
		lo = plotter.XYs{{X: 0, Y: 0.85 - uBand}, {X: float64(n), Y: 0.85 - uBand}}
		hi = plotter.XYs{{X: 0, Y: 0.85 + uBand}, {X: float64(n), Y: 0.85 + uBand}}
	}
	if err := plotutil.AddLines(ad, "U per period", u, "U per second", perSec, "G / M", g, "load / 2", load); err != nil {
		return nil, err
	}
	if len(lo) > 0 {
		for _, band := range []plotter.XYs{lo, hi} {
			l, err := plotter.NewLine(band)
			if err != nil {
				return nil, err
			}
			l.Color = color.Gray{Y: 120}
			l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			ad.Add(l)
		}
	}
	if err := save(ad, feedbackAdaptPNG); err != nil {
		return nil, err
	}
	ql := timePlot("Quality served per class (mean tree / M per period)", "quality")
	ql.Y.Max = 1.05
	if err := addSeries(ql, res, func(p FeedbackPoint, i int) float64 { return p.Classes[i].Quality }, nil, ""); err != nil {
		return nil, err
	}
	if err := save(ql, feedbackQualityPNG); err != nil {
		return nil, err
	}
	return paths, nil
}

// WriteFeedbackAll writes feedback.csv, feedback.json and the plots into
// dir, creating it, and returns the paths written.
func WriteFeedbackAll(dir string, res FeedbackResult) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range []struct {
		name  string
		write func(io.Writer, FeedbackResult) error
	}{{feedbackCSV, WriteFeedbackCSV}, {feedbackJSON, WriteFeedbackJSON}} {
		path := filepath.Join(dir, f.name)
		if err := writeFile(path, func(w io.Writer) error { return f.write(w, res) }); err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	plots, err := PlotFeedback(dir, res)
	return append(paths, plots...), err
}

// RunFeedbackCommand is qsplice-experiment -policy feedback: the default
// feedback experiment with the given seed (and End, when > 0), its files
// written into dir and its summary printed. The live run is
// RunFeedbackLabCommand.
func RunFeedbackCommand(dir string, seed uint64, end time.Duration, lab bool, stdout io.Writer) error {
	if lab {
		return fmt.Errorf("-policy feedback: the live run is RunFeedbackLabCommand")
	}
	cfg := DefaultFeedbackConfig()
	cfg.Seed = seed
	if end > 0 {
		cfg.End = end
		cfg.Down = min(cfg.Down, end)
		cfg.Up = min(cfg.Up, cfg.Down)
	}
	res, err := RunFeedback(cfg)
	if err != nil {
		return err
	}
	paths, err := WriteFeedbackAll(dir, res)
	if err != nil {
		return err
	}
	if err := WriteFeedbackSummary(stdout, res); err != nil {
		return err
	}
	for _, p := range paths {
		fmt.Fprintln(stdout, "wrote", p)
	}
	return nil
}
