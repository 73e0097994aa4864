package calibrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/qsplice/qsplice/internal/progress"
	"github.com/qsplice/qsplice/tools/content"
	"github.com/qsplice/qsplice/tools/loadgen"
)

// Config is one calibration run. Zero fields take the defaults below.
type Config struct {
	// Target is the VIP's base URL (http://198.18.0.100:8080); Host the
	// Host header (empty: the target's); Sizes the object sizes, served
	// as /data/<size> (the test server's and the lab nginx's paths).
	Target string
	Host   string
	Sizes  []int64
	// Start is the first rate tried (req/s), each step Factor times the
	// one before, up to MaxRate.
	Start, Factor, MaxRate float64
	// Step is how long each rate is offered, Pause the quiet time after
	// it for queues to drain.
	Step, Pause time.Duration
	// A step fails when more than MaxErrors of its requests got no 2xx
	// answer, or when its mean latency exceeds LatencyFactor times the
	// first step's and by more than LatencyFloor (at the start rate the
	// cluster is idle, so that mean is the service time; above the
	// capacity the queue grows through the step, and the mean with it).
	// The mean, not a high percentile: one slow connect must not end
	// the climb.
	MaxErrors     float64
	LatencyFactor float64
	LatencyFloor  time.Duration
	Timeout       time.Duration
	Seed          uint64
	// Probe offers one rate for one step; nil sends it with loadgen
	// from this host. Tests replace it.
	Probe func(ctx context.Context, size int64, rate float64, d time.Duration) (Step, error)
	// Log gets a progress line as each step starts ("[k/N] size 1K at
	// 57.5 req/s, 40s in, at most about 3m left", N counting the steps up
	// to MaxRate of the sizes still to climb) and a line with its
	// outcome; nil: none (the command's -quiet).
	Log io.Writer

	now func() time.Time // the progress lines' clock; nil: time.Now (tests set it)
}

// Defaults for Config's zero fields.
const (
	DefaultStart         = 50.0
	DefaultFactor        = 1.15
	DefaultMaxRate       = 20000.0
	DefaultStep          = 3 * time.Second
	DefaultPause         = time.Second
	DefaultMaxErrors     = 0.01
	DefaultLatencyFactor = 3.0
	DefaultLatencyFloor  = 50 * time.Millisecond
	DefaultTimeout       = 5 * time.Second
)

// DefaultSizes spread from per-request-bound to per-byte-bound objects.
var DefaultSizes = []int64{1 << 10, 64 << 10, 1 << 20}

// Step is one rate offered for one step.
type Step struct {
	Rate   float64 `json:"rate"`        // offered req/s
	OKRate float64 `json:"ok_per_s"`    // 2xx answers per second
	Bytes  float64 `json:"bytes_per_s"` // body bytes per second of the 2xx answers
	// Errors is the fraction of the offered requests without a 2xx.
	Errors float64 `json:"errors"`
	MeanMs float64 `json:"mean_ms"` // of the 2xx answers
	P50Ms  float64 `json:"p50_ms"`  // of the 2xx answers
	P99Ms  float64 `json:"p99_ms"`  // of every request sent
	Failed bool    `json:"failed"`
}

// SizeResult is one size's steps and its saturation point.
type SizeResult struct {
	Point
	Steps []Step `json:"steps"`
	// Saturated is false when MaxRate was reached without a failure:
	// the point is then a lower bound.
	Saturated bool `json:"saturated"`
}

// Result is a calibration: each size's steps, and a and b.
type Result struct {
	Sizes []SizeResult `json:"sizes"`
	A     float64      `json:"a"`
	B     float64      `json:"b"`
}

func (c Config) withDefaults() (Config, error) {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Start, DefaultStart)
	def(&c.Factor, DefaultFactor)
	def(&c.MaxRate, DefaultMaxRate)
	def(&c.MaxErrors, DefaultMaxErrors)
	def(&c.LatencyFactor, DefaultLatencyFactor)
	if c.Step == 0 {
		c.Step = DefaultStep
	}
	if c.Pause == 0 {
		c.Pause = DefaultPause
	}
	if c.LatencyFloor == 0 {
		c.LatencyFloor = DefaultLatencyFloor
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Sizes == nil {
		c.Sizes = DefaultSizes
	}
	switch {
	case !(c.Start > 0) || !(c.Factor > 1) || !(c.MaxRate >= c.Start) || math.IsInf(c.MaxRate, 0):
		return c, errors.New("calibrate: need Start > 0, Factor > 1 and MaxRate >= Start")
	case !(c.MaxErrors >= 0 && c.MaxErrors < 1) || !(c.LatencyFactor > 1):
		return c, errors.New("calibrate: need 0 <= MaxErrors < 1 and LatencyFactor > 1")
	case c.Step <= 0 || c.Pause < 0 || c.Timeout <= 0:
		return c, errors.New("calibrate: need Step > 0, Pause >= 0 and Timeout > 0")
	case len(c.Sizes) < 2:
		return c, errors.New("calibrate: need at least two sizes")
	case c.Probe == nil && c.Target == "":
		return c, errors.New("calibrate: Target is required")
	}
	for _, s := range c.Sizes {
		if s < 0 {
			return c, fmt.Errorf("calibrate: size %d", s)
		}
	}
	if c.Probe == nil {
		c.Probe = c.loadProbe
	}
	return c, nil
}

// Run calibrates: for each size, rates rising by Factor from Start until
// a step fails, the best clean step its saturation point; then Fit.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Result{}, err
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	climb := cfg.climbSteps()
	p := progress.UpTo(cfg.Log, "calibration", climb*len(cfg.Sizes), float64(climb*len(cfg.Sizes)))
	if cfg.now != nil {
		p.WithClock(cfg.now)
	}
	defer p.Done()
	var res Result
	var points []Point
	for _, size := range cfg.Sizes {
		sr, err := saturate(ctx, cfg, size, logw, p)
		// The climb stops at the first failed step: the rates above it
		// will not be tried.
		p.Drop(climb-len(sr.Steps), float64(climb-len(sr.Steps)))
		res.Sizes = append(res.Sizes, sr)
		if err != nil {
			return res, err
		}
		points = append(points, sr.Point)
	}
	res.A, res.B, err = Fit(points)
	return res, err
}

// climbSteps is how many rates a climb tries at most: from Start by
// Factor up to MaxRate, as saturate steps through them.
func (c Config) climbSteps() int {
	n := 0
	for rate := c.Start; rate <= c.MaxRate*(1+1e-9); rate *= c.Factor {
		n++
	}
	return n
}

// saturate raises the rate for one size until a step fails.
func saturate(ctx context.Context, cfg Config, size int64, logw io.Writer, p *progress.Progress) (SizeResult, error) {
	sr := SizeResult{Point: Point{Size: size}}
	var baseMean float64
	floor := float64(cfg.LatencyFloor) / 1e6
	for rate := cfg.Start; rate <= cfg.MaxRate*(1+1e-9); rate *= cfg.Factor {
		p.Step(fmt.Sprintf("size %s at %.1f req/s", content.FormatSize(size), rate), 1)
		st, err := cfg.Probe(ctx, size, rate, cfg.Step)
		if err != nil {
			return sr, err
		}
		st.Rate = rate
		first := baseMean == 0
		if first {
			baseMean = st.MeanMs
		}
		st.Failed = st.Errors > cfg.MaxErrors ||
			!first && st.MeanMs > cfg.LatencyFactor*baseMean && st.MeanMs > baseMean+floor
		sr.Steps = append(sr.Steps, st)
		fmt.Fprintf(logw, "size %s: %7.1f req/s offered, %7.1f 2xx/s, %6.2f MB/s, %5.2f%% errors, mean %.1f ms, p99 %.1f ms%s\n",
			content.FormatSize(size), rate, st.OKRate, st.Bytes/1e6, 100*st.Errors, st.MeanMs, st.P99Ms, map[bool]string{true: "  FAILED"}[st.Failed])
		if st.Failed {
			sr.Saturated = true
			break
		}
		if st.OKRate > sr.RMax {
			sr.RMax, sr.WMax = st.OKRate, st.Bytes
		}
		select {
		case <-ctx.Done():
			return sr, ctx.Err()
		case <-time.After(cfg.Pause):
		}
	}
	if sr.RMax == 0 {
		return sr, fmt.Errorf("calibrate: size %s: the first step, %g req/s, already failed; lower the start rate", content.FormatSize(size), cfg.Start)
	}
	return sr, nil
}

// loadProbe offers rate for d with loadgen, a new connection per
// request (as clients arrive), Poisson arrivals.
func (c Config) loadProbe(ctx context.Context, size int64, rate float64, d time.Duration) (Step, error) {
	res, err := loadgen.Run(ctx, loadgen.Config{
		Target: c.Target, Duration: d, Timeout: c.Timeout, Seed: c.Seed,
		Streams: []loadgen.Stream{{Name: "calibrate", Host: c.Host, Path: "/data/" + content.FormatSize(size),
			Rate: rate, Arrival: loadgen.Poisson}},
	}, nil)
	if err != nil {
		return Step{}, err
	}
	if res.Interrupted {
		return Step{}, ctx.Err()
	}
	return stepOf(res.Total, d), nil
}

// stepOf condenses a loadgen result of window d.
func stepOf(t loadgen.StreamResult, d time.Duration) Step {
	st := Step{OKRate: t.ThroughputOK, MeanMs: t.Latency.MeanMs, P50Ms: t.Latency.P50Ms, P99Ms: t.LatencyAll.P99Ms}
	if d > 0 {
		// Body bytes of every answer: the 2xx carry all but a few.
		st.Bytes = float64(t.BodyBytes) / d.Seconds()
	}
	if t.Offered > 0 {
		st.Errors = float64(t.Offered-t.Completed.OK) / float64(t.Offered)
	}
	return st
}
