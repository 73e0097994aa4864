// Command qsplice-experiment runs the LIFO-Pri e-commerce experiment
// (package tools/experiment) for the three front-end policies over a
// sweep of offered loads. By default it simulates: it writes results.csv,
// results.json and PNG plots into -out and prints the published
// comparison table at load 1.4. With -lab it runs the same experiment in
// live labs (network namespaces, the real front-end, back-end shims and
// test servers, qsplice-load as the shoppers), writes lab.csv, lab.json
// and sim.csv, and prints the table of each load with the simulator's
// rows of the same policy, load, seed and window beside the lab's.
//
//	qsplice-experiment -out DIR [-model shop|retry|all] [-loads 0.5:2.5:0.1] [-duration D] [-seed 1]
//	qsplice-experiment -lab -out DIR [-model shop|retry|all] [-loads 0.7,1.4]
//	                   [-policies single-fifo,eight-fifo,lifo-pri] [-timescale 1]
//	                   [-duration D] [-warmup D] [-drain D] [-seed 1] [-bin DIR]
//
// -model picks the preset (experiment.Presets): all (the default when
// simulating) runs each and writes into DIR/shop and DIR/retry, one
// preset writes into DIR itself. A lab sweep takes minutes per preset,
// so with -lab the default is shop. Times not given are the preset's:
// in simulation its window (600 s for shop, 4500 s for retry), in the
// lab its warm-up, counted window and drain (shop 60 s, 120 s, 60 s;
// retry 180 s, 600 s, 240 s) times -timescale, in wall-clock time.
//
// -policy feedback runs the feedback policy's step-load experiment
// instead (issue 10): simulated, or live with -lab (a lab of 5 back-ends
// x 5 slots at 100 ms serving 3 content trees, qsplice-load offering
// gold, silver and bronze streams 3:2:1, the front-end's /status read
// every period), writing feedback.csv, feedback.json, four PNGs and,
// live, feedback_lab.json:
//
//	qsplice-experiment -policy feedback [-lab] -out DIR [-duration 60s]
//	                   [-step-up 10s] [-step-down 40s] [-low 0.5] [-high 2]
//	                   [-trees 3] [-gain K] [-sessions N [-session-requests 10]] [-seed 1] [-bin DIR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/internal/version"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/experiment"
	"github.com/qsplice/qsplice/tools/lab"
)

func main() {
	// Every SIGINT or SIGTERM only cancels ctx, so that a second Ctrl-C
	// during a lab's tear-down cannot leave namespaces behind.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "qsplice-experiment:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	version   bool // -version: print it, nothing else
	out       string
	lab       bool
	models    []experiment.Preset
	loads     []float64
	policies  []sched.Mode
	timescale float64
	seed      uint64
	bin       string
	policy    string // "feedback": the feedback policy's experiment (issue 10)
	quiet     bool   // no progress lines
	// The feedback experiment's step (-policy feedback): load low x the
	// capacity, high from stepUp to stepDown; 0 or negative: the default.
	stepUp, stepDown time.Duration
	low, high        float64
	trees            int     // content trees M; 0: the default
	gain             float64 // the utilization controller's k; 0: the default
	sessions         int     // session cookies per class; 0: session awareness off
	sessionRequests  int     // requests per session; 0: sessions never end
	// duration, warmup and drain are those given on the command line;
	// the ones not given (durationSet and so on false) are each preset's.
	duration, warmup, drain          time.Duration
	durationSet, warmupSet, drainSet bool
}

func parseFlags(args []string, output io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("qsplice-experiment", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.out, "out", "", "directory for the result files (required)")
	fs.BoolVar(&o.lab, "lab", false, "run in live labs (needs root) instead of simulating")
	modelFlag := fs.String("model", "", "model preset: "+presetChoices()+" (default all; with -lab shop); all writes into one subdirectory of -out per preset")
	loadsFlag := fs.String("loads", "", "offered loads in units of capacity, from:to:step or a comma list (default 0.5:2.5:0.1; with -lab 0.7,1.4)")
	policiesFlag := fs.String("policies", "single-fifo,eight-fifo,lifo-pri", "policies to compare, comma-separated")
	fs.DurationVar(&o.duration, "duration", 0, "simulated time per run, the preset's warm-up included (default shop 600s, retry 4500s); with -lab the wall-clock window after the warm-up (default shop 120s, retry 600s, x timescale)")
	fs.DurationVar(&o.warmup, "warmup", 0, "-lab: wall-clock warm-up before the counted window (default shop 60s, retry 180s, x timescale)")
	fs.DurationVar(&o.drain, "drain", 0, "-lab: follow the counted sessions up to this long after the window, arrivals going on (default shop 60s, retry 240s, x timescale)")
	fs.Float64Var(&o.timescale, "timescale", 1, "-lab: multiply the model's service times, think time, patience and utilization interval by this `F` (0.5 runs twice as fast at twice the request rate); results stay in model time")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed; in simulation the same seed gives the same files")
	fs.StringVar(&o.bin, "bin", lab.ExecutableDir(), "-lab: directory holding the qsplice binaries")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.BoolVar(&o.quiet, "quiet", false, "-lab: no progress lines ([k/N] run, time in, time left) on stderr")
	fs.StringVar(&o.policy, "policy", "", "feedback: run the feedback policy's step-load experiment instead of the sweep (simulated, or live with -lab: 60 s by default, -duration for longer)")
	fs.DurationVar(&o.stepUp, "step-up", 0, "-policy feedback: `time` of the step up to -high (default 10s)")
	fs.DurationVar(&o.stepDown, "step-down", 0, "-policy feedback: `time` of the step back down to -low (default 40s)")
	fs.Float64Var(&o.low, "low", 0, "-policy feedback: load before and after the step, x capacity (default 0.5)")
	fs.Float64Var(&o.high, "high", 0, "-policy feedback: load during the step, x capacity (default 2)")
	fs.IntVar(&o.trees, "trees", 0, "-policy feedback -lab: content trees `M` (1: no content adaptation; default 3)")
	fs.IntVar(&o.sessions, "sessions", 0, "-policy feedback -lab: turn session awareness on (cookie sid) and have each class's requests carry the cookies of `N` sessions in turn")
	fs.IntVar(&o.sessionRequests, "session-requests", 10, "-policy feedback -lab -sessions: a session ends after `K` requests, a new one taking its place (0: never)")
	fs.Float64Var(&o.gain, "gain", 0, "-policy feedback -lab: the utilization controller's gain `k` in G += k(U*-U) per period (default the policy's)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.version {
		return o, nil
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.out == "" {
		fs.Usage()
		return o, errors.New("-out is required")
	}
	if *loadsFlag == "" {
		*loadsFlag = "0.5:2.5:0.1"
		if o.lab {
			*loadsFlag = "0.7,1.4"
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.durationSet, o.warmupSet, o.drainSet = set["duration"], set["warmup"], set["drain"]
	if *modelFlag == "" {
		*modelFlag = "all"
		if o.lab {
			*modelFlag = string(experiment.PresetShop)
		}
	}
	var err error
	if o.models, err = parseModels(*modelFlag); err != nil {
		return o, err
	}
	if o.loads, err = parseLoads(*loadsFlag); err != nil {
		return o, err
	}
	if o.policies, err = parsePolicies(*policiesFlag); err != nil {
		return o, err
	}
	switch {
	case (o.durationSet && o.duration <= 0) || o.warmup < 0 || o.drain < 0:
		return o, errors.New("-duration must be positive, -warmup and -drain not negative")
	case !(o.timescale > 0):
		return o, errors.New("-timescale must be > 0")
	case o.policy != "" && o.policy != "feedback":
		return o, fmt.Errorf("-policy %q: the only one is feedback (-policies chooses the sweep's)", o.policy)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	if o.version {
		fmt.Fprintln(stdout, version.Line("qsplice-experiment"))
		return nil
	}
	if o.policy == "feedback" && o.lab {
		return experiment.RunFeedbackLabCommand(ctx, o.out, o.feedbackLabConfig(), stdout)
	}
	if o.policy == "feedback" {
		return experiment.RunFeedbackCommand(o.out, o.seed, o.duration, o.lab, stdout)
	}
	for _, p := range o.models {
		dir := o.out
		if len(o.models) > 1 {
			dir = filepath.Join(o.out, string(p))
		}
		if o.lab {
			err = runLab(ctx, o, p, dir, stdout)
		} else {
			err = simulate(o, p, dir, stdout)
		}
		if err != nil {
			return fmt.Errorf("model %s: %w", p, err)
		}
	}
	return nil
}

// feedbackLabConfig is the live feedback run with the command line's
// seed, binaries and times: -duration is the whole run, -step-up and
// -step-down the step's times (each kept within the run).
func (o options) feedbackLabConfig() experiment.FeedbackLabConfig {
	cfg := experiment.DefaultFeedbackLabConfig()
	cfg.Seed, cfg.BinDir = o.seed, o.bin
	if o.durationSet {
		cfg.End = o.duration
	}
	if o.stepUp > 0 {
		cfg.Up = o.stepUp
	}
	if o.stepDown > 0 {
		cfg.Down = o.stepDown
	}
	if o.low > 0 {
		cfg.Low = o.low
	}
	if o.high > 0 {
		cfg.High = o.high
	}
	if o.trees > 0 {
		cfg.Trees = o.trees
	}
	if o.gain > 0 {
		cfg.Policy.Gain = o.gain
	}
	cfg.Sessions, cfg.SessionRequests = o.sessions, o.sessionRequests
	cfg.Down = min(cfg.Down, cfg.End)
	cfg.Up = min(cfg.Up, cfg.Down)
	return cfg
}

// simConfig is preset p's simulation with the command line's seed and,
// if given, duration.
func (o options) simConfig(p experiment.Preset) (experiment.Config, error) {
	base, err := experiment.PresetConfig(p, sched.ModeLifoPri, 1)
	if err != nil {
		return base, err
	}
	if o.durationSet {
		base.Duration = o.duration
	}
	base.Seed = o.seed
	return base, nil
}

// labConfig is preset p's lab sweep with the command line's settings;
// times not given are the preset's times -timescale.
func (o options) labConfig(p experiment.Preset) (experiment.LabConfig, error) {
	cfg, err := experiment.PresetLabConfig(p)
	if err != nil {
		return cfg, err
	}
	scaled := func(d time.Duration) time.Duration { return time.Duration(float64(d) * o.timescale) }
	cfg.Warmup, cfg.Duration, cfg.Drain = scaled(cfg.Warmup), scaled(cfg.Duration), scaled(cfg.Drain)
	if o.warmupSet {
		cfg.Warmup = o.warmup
	}
	if o.durationSet {
		cfg.Duration = o.duration
	}
	if o.drainSet {
		cfg.Drain = o.drain
	}
	cfg.Base.Seed = o.seed
	cfg.Policies, cfg.Loads = o.policies, o.loads
	cfg.TimeScale, cfg.BinDir = o.timescale, o.bin
	return cfg, nil
}

// simulate runs preset p's sweep, writes its files into dir and prints
// its table at the published load under a heading naming the preset.
func simulate(o options, p experiment.Preset, dir string, stdout io.Writer) error {
	base, err := o.simConfig(p)
	if err != nil {
		return err
	}
	if base.Duration <= base.Warmup {
		return fmt.Errorf("-duration %v does not reach past the warm-up of %v", base.Duration, base.Warmup)
	}
	start := time.Now()
	results, err := experiment.Sweep(base, o.policies, experiment.WithPublishedLoads(o.loads))
	if err != nil {
		return err
	}
	tag := fmt.Sprintf("preset %s, seed %d, sessions arriving in [%v, %v)", p, base.Seed, base.Warmup, base.Duration)
	paths, err := experiment.WriteAll(dir, results, tag)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "== model %s: %s\n== counted: sessions arriving in [%v, %v), seed %d\n",
		p, base.Summary(), base.Warmup, base.Duration, base.Seed)
	if err := experiment.WriteTable(stdout, results, experiment.TableLoad); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d runs in %v; wrote:\n  %s\n\n", len(results), time.Since(start).Round(time.Millisecond), strings.Join(paths, "\n  "))
	return nil
}

// runLab runs preset p's sweep in live labs and prints each load's table.
func runLab(ctx context.Context, o options, p experiment.Preset, dir string, stdout io.Writer) error {
	cfg, err := o.labConfig(p)
	if err != nil {
		return err
	}
	cfg.Log = os.Stderr
	if o.quiet {
		cfg.Log = nil
	}
	start := time.Now()
	results, runErr := experiment.RunLab(ctx, cfg)
	if len(results) == 0 {
		return runErr
	}
	paths, err := experiment.WriteLabAll(dir, results)
	if err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprintf(stdout, "== model %s: %s\n== lab at timescale %g: %v warm-up, %v counted, up to %v drain per load, seed %d\n",
		p, cfg.Base.Summary(), cfg.TimeScale, cfg.Warmup, cfg.Duration, cfg.Drain, cfg.Base.Seed)
	for _, load := range o.loads {
		if err := experiment.WriteLabTable(stdout, results, load); err != nil {
			continue // a load the interrupted sweep did not reach
		}
	}
	fmt.Fprintf(stdout, "%d lab runs in %v; wrote:\n  %s\n\n", len(results), time.Since(start).Round(time.Second), strings.Join(paths, "\n  "))
	return runErr
}

// parseModels reads -model: one preset's name or all.
func parseModels(s string) ([]experiment.Preset, error) {
	if s == "all" {
		return experiment.Presets(), nil
	}
	for _, p := range experiment.Presets() {
		if string(p) == s {
			return []experiment.Preset{p}, nil
		}
	}
	return nil, fmt.Errorf("-model %q: want one of %s", s, presetChoices())
}

// presetChoices is the -model values, as usage and errors list them.
func presetChoices() string {
	var names []string
	for _, p := range experiment.Presets() {
		names = append(names, string(p))
	}
	return strings.Join(append(names, "all"), ", ")
}

// parseLoads reads "from:to:step" or a comma-separated list.
func parseLoads(s string) ([]float64, error) {
	sep := ","
	if strings.Contains(s, ":") {
		sep = ":"
	}
	parts := strings.Split(s, sep)
	v := make([]float64, len(parts))
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(f > 0) {
			return nil, fmt.Errorf("-loads %q: %q is not a positive number", s, p)
		}
		v[i] = f
	}
	if sep == "," {
		return v, nil
	}
	if len(v) != 3 {
		return nil, fmt.Errorf("-loads %q: want from:to:step or a comma list", s)
	}
	loads := experiment.Loads(v[0], v[1], v[2])
	if len(loads) == 0 {
		return nil, fmt.Errorf("-loads %q: from is above to", s)
	}
	return loads, nil
}

// parsePolicies reads a comma-separated list of policy names.
func parsePolicies(s string) ([]sched.Mode, error) {
	var out []sched.Mode
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, m := range experiment.Policies {
			if m.String() == name {
				out, found = append(out, m), true
			}
		}
		if !found {
			return nil, fmt.Errorf("-policies %q: no policy %q (single-fifo, eight-fifo, lifo-pri)", s, name)
		}
	}
	return out, nil
}
