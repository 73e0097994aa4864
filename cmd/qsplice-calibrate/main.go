// Command qsplice-calibrate measures the constants a and b of the
// feedback policy's utilization U = a*R + b*W (package tools/calibrate):
// for each object size it raises the request rate step by step until
// errors appear or the latency runs away, regresses 1 = a*Rmax + b*Wmax
// over the sizes, and prints the two numbers as the feedback section's
// keys, or with -write rewrites them into a front-end configuration file
// (other lines and comments kept). Run it from a client host of the
// cluster, e.g. in the lab:
//
//	ip netns exec qs-NAME-c1 qsplice-calibrate -target http://198.18.0.100:8080 -write fe.yaml
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/qsplice/qsplice/internal/version"
	"github.com/qsplice/qsplice/tools/calibrate"
	"github.com/qsplice/qsplice/tools/content"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "qsplice-calibrate:", err)
		os.Exit(1)
	}
}

type options struct {
	version  bool
	cfg      calibrate.Config
	write    string // -write FILE
	jsonPath string
	quiet    bool // no progress or per-step lines
}

const usageHead = `Usage: qsplice-calibrate -target URL [-sizes 1K,64K,1M] [-write FILE] [flags]

Measures a and b of the feedback policy's utilization U = a*R + b*W. For each
size it offers GET /data/<size> at rates rising by -factor from -start, each
for -step, until a step fails (more than -max-errors of its requests without
a 2xx, or its mean latency above -latency-factor times the first step's and
by -latency-floor: the queue is growing),
keeps the best clean step as (Rmax, Wmax), and fits 1 = a*Rmax + b*Wmax over
the sizes (least squares, a, b >= 0). Prints the feedback.content keys; -write
sets them in a configuration file, keeping its other lines and comments.

Flags:
`

func parseFlags(args []string, output io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("qsplice-calibrate", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprint(output, usageHead)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.cfg.Target, "target", "", "base `URL` of the VIP, e.g. http://198.18.0.100:8080 (required)")
	fs.StringVar(&o.cfg.Host, "host", "", "Host header (default: the target's host)")
	sizes := fs.String("sizes", "1K,64K,1M", "object `sizes`, comma-separated, served as /data/<size>")
	fs.Float64Var(&o.cfg.Start, "start", calibrate.DefaultStart, "first `rate` tried, req/s (must be served cleanly)")
	fs.Float64Var(&o.cfg.Factor, "factor", calibrate.DefaultFactor, "each step's rate is the one before times `F`")
	fs.Float64Var(&o.cfg.MaxRate, "max-rate", calibrate.DefaultMaxRate, "highest `rate` tried, req/s")
	fs.DurationVar(&o.cfg.Step, "step", calibrate.DefaultStep, "`time` each rate is offered")
	fs.DurationVar(&o.cfg.Pause, "pause", calibrate.DefaultPause, "quiet `time` after each step")
	fs.Float64Var(&o.cfg.MaxErrors, "max-errors", calibrate.DefaultMaxErrors, "a step fails above this `fraction` of requests without a 2xx")
	fs.Float64Var(&o.cfg.LatencyFactor, "latency-factor", calibrate.DefaultLatencyFactor, "a step fails when its mean latency exceeds `F` x the first step's (and by -latency-floor)")
	fs.DurationVar(&o.cfg.LatencyFloor, "latency-floor", calibrate.DefaultLatencyFloor, "a step fails on latency only when its mean exceeds the first step's by this `time` too")
	fs.DurationVar(&o.cfg.Timeout, "timeout", calibrate.DefaultTimeout, "per-request `time` limit")
	fs.Uint64Var(&o.cfg.Seed, "seed", 1, "seed of the Poisson arrivals")
	fs.StringVar(&o.write, "write", "", "set a and b in this front-end configuration `FILE`")
	fs.StringVar(&o.jsonPath, "json", "", "write every step and the fit as JSON to `FILE`")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines ([k/N] step, time in, time left) nor per-step results on stderr")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.version {
		return o, nil
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.cfg.Target == "" {
		return o, errors.New("-target is required")
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := content.ParseSize(strings.TrimSpace(s))
		if err != nil {
			return o, fmt.Errorf("-sizes: %v", err)
		}
		o.cfg.Sizes = append(o.cfg.Sizes, n)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.version {
		fmt.Fprintln(stdout, version.Line("qsplice-calibrate"))
		return nil
	}
	// Read the file first: a bad path should not cost a calibration.
	var orig []byte
	if o.write != "" {
		if orig, err = os.ReadFile(o.write); err != nil {
			return err
		}
	}
	if !o.quiet {
		o.cfg.Log = stderr
	}
	res, err := calibrate.Run(ctx, o.cfg)
	if o.jsonPath != "" {
		b, jerr := json.MarshalIndent(res, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(o.jsonPath, append(b, '\n'), 0o644)
		}
		err = errors.Join(err, jerr)
	}
	if err != nil {
		return err
	}
	for _, s := range res.Sizes {
		note := ""
		if !s.Saturated {
			note = " (not saturated at -max-rate: a lower bound)"
		}
		fmt.Fprintf(stderr, "size %s: Rmax %.1f req/s, Wmax %.2f MB/s%s\n", content.FormatSize(s.Size), s.RMax, s.WMax/1e6, note)
	}
	fmt.Fprint(stdout, calibrate.Snippet(res.A, res.B))
	if o.write == "" {
		return nil
	}
	out, err := calibrate.RewriteConfig(string(orig), res.A, res.B)
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.write, []byte(out), 0o644); err != nil {
		return err
	}
	fmt.Fprintln(stderr, "wrote a and b into", o.write)
	return nil
}
