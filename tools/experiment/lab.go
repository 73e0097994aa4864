package experiment

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/internal/progress"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/lab"
	"github.com/qsplice/qsplice/tools/loadgen"
	"github.com/qsplice/qsplice/tools/session"
	"github.com/qsplice/qsplice/tools/testserver"
)

// LabConfig is the experiment run in the live lab: for each policy a lab
// of its own (Base.Backends back-ends running qsplice-testserver -shop
// behind their shims, a front-end whose listeners use the policy), and
// for each load a qsplice-load session run from the lab's client.
type LabConfig struct {
	// Base is the experiment as the simulator runs it: cluster, page
	// service means, client model, utilization interval and seed (its
	// Mode, Load, Warmup and Duration are set per run). The lab is built
	// from the same numbers, scaled by TimeScale.
	Base     Config
	Policies []sched.Mode
	Loads    []float64
	// Warmup, Duration and Drain are wall-clock times of each load's run:
	// sessions arriving in the Duration after Warmup are counted, and
	// followed for up to Drain after it (see loadgen.SessionConfig).
	Warmup, Duration, Drain time.Duration
	// TimeScale F multiplies every time of the model (service means,
	// think time, patience, the utilization interval), so the lab runs
	// the same experiment 1/F times faster at 1/F times the request
	// rate. Results are reported in model time (rates x F, times / F).
	TimeScale float64
	// BinDir holds the qsplice binaries.
	BinDir string
	// Log receives progress lines ([k/N] with the time left); nil: none.
	Log io.Writer
	// progress counts the sweep's runs (RunLab sets it).
	progress *progress.Progress
}

// DefaultLabConfig is the lab sweep of cmd/qsplice-experiment -lab: the
// simulator's defaults, at loads 0.7 and 1.4, in real time, with 60 s of
// warm-up (the simulator's: a session lasts about 67 s, so a shorter
// warm-up measures a system still filling up), 120 s counted and up to
// 60 s of drain.
func DefaultLabConfig() LabConfig {
	return LabConfig{
		Base:      DefaultConfig(sched.ModeLifoPri, 1),
		Policies:  Policies,
		Loads:     []float64{0.7, TableLoad},
		Warmup:    60 * time.Second,
		Duration:  120 * time.Second,
		Drain:     60 * time.Second,
		TimeScale: 1,
	}
}

// PresetLabConfig is the lab sweep of preset p in real time. The shop's
// is DefaultLabConfig. The retry preset's cluster serves 1/8 of the
// shop's request rate and its sessions last longer under overload (a
// page may take six patiences, 48 s on average, before the user leaves),
// so it counts 600 s after 180 s of warm-up (the simulator's) and
// follows sessions for up to 240 s after.
func PresetLabConfig(p Preset) (LabConfig, error) {
	base, err := PresetConfig(p, sched.ModeLifoPri, 1)
	if err != nil {
		return LabConfig{}, err
	}
	c := DefaultLabConfig()
	c.Base = base
	if p == PresetRetry {
		c.Warmup, c.Duration, c.Drain = base.Warmup, 600*time.Second, 240*time.Second
	}
	return c, nil
}

func (c LabConfig) validate() error {
	switch {
	case !(c.TimeScale > 0):
		return fmt.Errorf("experiment: time scale %v must be > 0", c.TimeScale)
	case len(c.Policies) == 0 || len(c.Loads) == 0:
		return errors.New("experiment: no policies or no loads")
	case c.Duration <= 0 || c.Warmup < 0 || c.Drain < 0:
		return errors.New("experiment: need Duration > 0, Warmup >= 0 and Drain >= 0")
	case c.Base.Backends > lab.MaxBackends:
		return fmt.Errorf("experiment: %d back-ends, the lab has room for %d", c.Base.Backends, lab.MaxBackends)
	}
	for _, l := range c.Loads {
		if !(l > 0) {
			return fmt.Errorf("experiment: load %v must be > 0", l)
		}
	}
	return c.Base.validate()
}

// scale is d in the lab's time: d x TimeScale.
func (c LabConfig) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.TimeScale)
}

// SimConfig is the simulator's run that matches the lab's run of mode at
// load: the same model, seed and counted window, in model time.
func (c LabConfig) SimConfig(mode sched.Mode, load float64) Config {
	s := c.Base
	s.Mode, s.Load = mode, load
	s.Warmup = time.Duration(float64(c.Warmup) / c.TimeScale)
	s.Duration = s.Warmup + time.Duration(float64(c.Duration)/c.TimeScale)
	return s
}

// testServerArgs are the shop pages with the model's service means.
func (c LabConfig) testServerArgs() []string {
	var means [session.NumPages]time.Duration
	for p, d := range c.Base.ServiceMean {
		means[p] = c.scale(d)
	}
	return []string{"-shop-service", testserver.FormatShopService(means)}
}

// frontendYAML is the front-end's configuration: every listener on the
// policy, the classes and queue sizes at their defaults (those the
// simulator uses), the utilization interval of the model.
func (c LabConfig) frontendYAML(stateDir string, mode sched.Mode) string {
	return lab.FrontendYAMLPolicy(stateDir, c.Base.Backends, c.Base.SlotsPerBackend, mode.String(), nil) +
		"lifo:\n  interval: " + c.scale(c.Base.UtilInterval).String() + "\n"
}

// sessionsSpec is qsplice-load's -sessions value for load: the model's
// client behaviour in lab time, and a refused page ending its session as
// in the simulator.
func (c LabConfig) sessionsSpec(load float64) string {
	m := c.Base.Model
	sim := c.Base
	sim.Load = load
	rate := sim.SessionRate() / c.TimeScale
	return fmt.Sprintf("rate=%s,think=%s,timeout=%s,retries=%d,abandon=%s,refused=leave",
		strconv.FormatFloat(rate, 'g', 10, 64), c.scale(m.ThinkMean), c.scale(m.TimeoutMean), m.Retries,
		strconv.FormatFloat(m.AbandonProb, 'g', -1, 64))
}

// RunLab runs the sweep, policy by policy, and returns one LabResult per
// policy and load, in that order, each next to the simulator's run of
// the same policy, load, seed and window. Every lab it builds is removed
// before it returns, also on errors and when ctx ends (then the results
// so far come back with ctx's error).
func RunLab(ctx context.Context, cfg LabConfig) ([]LabResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.BinDir == "" {
		return nil, errors.New("experiment: LabConfig.BinDir is required")
	}
	if err := checkModelAgrees(cfg.Base.Model); err != nil {
		return nil, err
	}
	dir, err := lab.SharedTempDir("qsplice-experiment-lab-") // the daemons read its files
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var out []LabResult
	runs := len(cfg.Policies) * len(cfg.Loads)
	cfg.progress = progress.New(cfg.Log, "lab sweep", runs, float64(runs))
	defer cfg.progress.Done()
	for _, mode := range cfg.Policies {
		res, err := runPolicy(ctx, cfg, dir, mode)
		out = append(out, res...)
		if err != nil {
			return out, fmt.Errorf("experiment: lab run of %v: %w", mode, err)
		}
	}
	return out, nil
}

// checkModelAgrees fails when the model's transitions are not those
// qsplice-load walks (it takes session.DefaultModel's and only the
// -sessions keys): the lab would run another experiment than the
// simulator.
func checkModelAgrees(m session.Model) error {
	d := session.DefaultModel()
	if m.Transitions != d.Transitions || m.Start != d.Start {
		return errors.New("experiment: the lab runs session.DefaultModel's transitions only")
	}
	return nil
}

// runPolicy builds a lab for mode, runs every load in it and removes it.
func runPolicy(ctx context.Context, cfg LabConfig, dir string, mode sched.Mode) (out []LabResult, err error) {
	var suffix [3]byte
	rand.Read(suffix[:])
	name := "x" + hex.EncodeToString(suffix[:])
	lc := lab.DefaultConfig(name)
	lc.Backends, lc.Capacity, lc.Clients = cfg.Base.Backends, cfg.Base.SlotsPerBackend, 1
	lc.BinDir = cfg.BinDir
	lc.StateDir = filepath.Join(dir, "state-"+name) // the lab creates it
	lc.Nginx, lc.Files = false, nil
	lc.BackendArgs = []string{"-linger", "1s"}
	lc.TestServerArgs = cfg.testServerArgs()
	lc.FrontendConfig = filepath.Join(dir, "frontend-"+name+".yaml")
	if err := os.WriteFile(lc.FrontendConfig, []byte(cfg.frontendYAML(lc.StateDir, mode)), 0o644); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Log, "%v: building lab %s (%d back-ends x %d)\n", mode, name, lc.Backends, lc.Capacity)
	l, err := lab.Up(ctx, lc)
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := l.Down(); derr != nil {
			err = errors.Join(err, fmt.Errorf("removing lab %s: %w", name, derr))
		}
		fmt.Fprintf(cfg.Log, "%v: lab %s removed\n", mode, name)
	}()
	for _, load := range cfg.Loads {
		r, err := runLoad(ctx, cfg, l, dir, mode, load)
		if err != nil {
			return out, fmt.Errorf("load %v: %w", load, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// runLoad offers one load to the lab and measures it.
func runLoad(ctx context.Context, cfg LabConfig, l *lab.Lab, dir string, mode sched.Mode, load float64) (LabResult, error) {
	client := l.HTTPClient("c1")
	client.Timeout = 5 * time.Second
	before, err := scrape(ctx, client)
	if err != nil {
		return LabResult{}, err
	}
	jsonPath := filepath.Join(dir, fmt.Sprintf("load-%s-%s.json", l.Config().Name, strconv.FormatFloat(load, 'f', -1, 64)))
	args := []string{filepath.Join(cfg.BinDir, "qsplice-load"),
		"-target", "http://" + lab.VIP + ":8080", "-sessions", cfg.sessionsSpec(load),
		"-warmup", cfg.Warmup.String(), "-duration", cfg.Duration.String(), "-drain", cfg.Drain.String(),
		"-seed", strconv.FormatUint(cfg.Base.Seed, 10), "-json", jsonPath, "-progress=false"}
	cfg.progress.Step(fmt.Sprintf("%v at load %.2f", mode, load), 1)
	fmt.Fprintf(cfg.Log, "%v: load %.2f for %v + %v warm-up (+ up to %v drain): %s\n",
		mode, load, cfg.Duration, cfg.Warmup, cfg.Drain, strings.Join(args[1:], " "))
	sampler := startLIFOSampler(ctx, client, cfg.scale(cfg.Base.UtilInterval), cfg.Warmup, cfg.Warmup+cfg.Duration)
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.NS("c1")}, args...)...)
	// ip netns exec becomes qsplice-load: SIGINT ends its run early with
	// the results so far written.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 30 * time.Second
	out, runErr := cmd.CombinedOutput()
	lifo := sampler.stop()
	if runErr != nil {
		return LabResult{}, errors.Join(ctx.Err(), fmt.Errorf("qsplice-load: %v\n%s", runErr, out))
	}
	var lr loadgen.SessionResult
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return LabResult{}, err
	}
	if err := json.Unmarshal(b, &lr); err != nil {
		return LabResult{}, fmt.Errorf("%s: %v", jsonPath, err)
	}
	after, err := settle(ctx, client, 30*time.Second)
	if err != nil {
		return LabResult{}, err
	}
	sim, err := Run(cfg.SimConfig(mode, load))
	if err != nil {
		return LabResult{}, err
	}
	r := newLabResult(cfg, mode, load, &lr, frontendDelta(before, after), lifo)
	r.Simulator, r.LabName = sim, l.Config().Name
	if lr.Interrupted {
		return r, errors.Join(ctx.Err(), errors.New("qsplice-load was interrupted"))
	}
	return r, nil
}

// lifoSampler reads the front-end's LIFO flag once per utilization
// interval while the counted window lasts: the lab's LIFOFraction.
type lifoSampler struct {
	cancel    context.CancelFunc
	done      chan struct{}
	mu        sync.Mutex
	on, total int
}

func startLIFOSampler(ctx context.Context, c *http.Client, every, from, to time.Duration) *lifoSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &lifoSampler{cancel: cancel, done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			at := time.Since(start)
			if at < from || at > to {
				continue
			}
			m, err := scrape(ctx, c)
			if err != nil {
				continue // a missed sample; the fraction is over those read
			}
			s.mu.Lock()
			s.total++
			if m["qsplice_lifo_browsing_lifo"] == 1 {
				s.on++
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// stop ends the sampling and returns the share of samples that found
// the browsing queues LIFO.
func (s *lifoSampler) stop() float64 {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total == 0 {
		return 0
	}
	return float64(s.on) / float64(s.total)
}
