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
//	qsplice-experiment -out DIR [-loads 0.5:2.5:0.1] [-duration 600s] [-seed 1]
//	qsplice-experiment -lab -out DIR [-loads 0.7,1.4] [-policies single-fifo,eight-fifo,lifo-pri]
//	                   [-timescale 1] [-duration 120s] [-warmup 60s] [-drain 60s] [-seed 1] [-bin DIR]
//
// Lab times are wall-clock; those not given are the model's (a minute of
// warm-up, two counted, one of drain) times -timescale.
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

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/experiment"
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
	out       string
	lab       bool
	loads     []float64
	policies  []sched.Mode
	duration  time.Duration
	warmup    time.Duration
	drain     time.Duration
	timescale float64
	seed      uint64
	bin       string
}

func parseFlags(args []string, output io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("qsplice-experiment", flag.ContinueOnError)
	fs.SetOutput(output)
	lc := experiment.DefaultLabConfig()
	fs.StringVar(&o.out, "out", "", "directory for the result files (required)")
	fs.BoolVar(&o.lab, "lab", false, "run in live labs (needs root) instead of simulating")
	loadsFlag := fs.String("loads", "", "offered loads in units of capacity, from:to:step or a comma list (default 0.5:2.5:0.1; with -lab 0.7,1.4)")
	policiesFlag := fs.String("policies", "single-fifo,eight-fifo,lifo-pri", "policies to compare, comma-separated")
	fs.DurationVar(&o.duration, "duration", 0, "counted time per run: simulated time, sessions arriving in the first minute not counted (default 600s); with -lab the wall-clock window after the warm-up (default 120s x timescale)")
	fs.DurationVar(&o.warmup, "warmup", 0, "-lab: wall-clock warm-up before the counted window (default 60s x timescale: about one session's length)")
	fs.DurationVar(&o.drain, "drain", 0, "-lab: follow the counted sessions up to this long after the window, arrivals going on (default 60s x timescale)")
	fs.Float64Var(&o.timescale, "timescale", 1, "-lab: multiply the model's service times, think time, patience and utilization interval by this `F` (0.5 runs twice as fast at twice the request rate); results stay in model time")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed; in simulation the same seed gives the same files")
	fs.StringVar(&o.bin, "bin", executableDir(), "-lab: directory holding the qsplice binaries")
	if err := fs.Parse(args); err != nil {
		return o, err
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
	// Lab times not given are the model's defaults in lab time.
	scaled := func(d time.Duration) time.Duration { return time.Duration(float64(d) * o.timescale) }
	if !set["warmup"] {
		o.warmup = scaled(lc.Warmup)
	}
	if !set["drain"] {
		o.drain = scaled(lc.Drain)
	}
	if !set["duration"] {
		o.duration = 600 * time.Second
		if o.lab {
			o.duration = scaled(lc.Duration)
		}
	}
	var err error
	if o.loads, err = parseLoads(*loadsFlag); err != nil {
		return o, err
	}
	if o.policies, err = parsePolicies(*policiesFlag); err != nil {
		return o, err
	}
	switch {
	case o.duration <= 0 || o.warmup < 0 || o.drain < 0:
		return o, errors.New("-duration must be positive, -warmup and -drain not negative")
	case !(o.timescale > 0):
		return o, errors.New("-timescale must be > 0")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	if o.lab {
		return runLab(ctx, o, stdout)
	}
	base := experiment.DefaultConfig(sched.ModeLifoPri, 1)
	base.Duration = o.duration
	base.Seed = o.seed
	start := time.Now()
	results, err := experiment.Sweep(base, o.policies, experiment.WithPublishedLoads(o.loads))
	if err != nil {
		return err
	}
	paths, err := experiment.WriteAll(o.out, results)
	if err != nil {
		return err
	}
	if err := experiment.WriteTable(stdout, results, experiment.TableLoad); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d runs in %v; wrote:\n  %s\n", len(results), time.Since(start).Round(time.Millisecond), strings.Join(paths, "\n  "))
	return nil
}

// runLab runs the sweep in live labs and prints each load's table.
func runLab(ctx context.Context, o options, stdout io.Writer) error {
	cfg := experiment.DefaultLabConfig()
	cfg.Base.Seed = o.seed
	cfg.Policies, cfg.Loads = o.policies, o.loads
	cfg.Warmup, cfg.Duration, cfg.Drain = o.warmup, o.duration, o.drain
	cfg.TimeScale, cfg.BinDir = o.timescale, o.bin
	cfg.Log = os.Stderr
	start := time.Now()
	results, runErr := experiment.RunLab(ctx, cfg)
	if len(results) == 0 {
		return runErr
	}
	paths, err := experiment.WriteLabAll(o.out, results)
	if err != nil {
		return errors.Join(runErr, err)
	}
	for _, load := range o.loads {
		if err := experiment.WriteLabTable(stdout, results, load); err != nil {
			continue // a load the interrupted sweep did not reach
		}
	}
	fmt.Fprintf(stdout, "%d lab runs in %v; wrote:\n  %s\n", len(results), time.Since(start).Round(time.Second), strings.Join(paths, "\n  "))
	return runErr
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

func executableDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	return filepath.Dir(exe)
}
