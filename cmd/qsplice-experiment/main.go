// Command qsplice-experiment runs the simulated LIFO-Pri e-commerce
// experiment (package tools/experiment) for the three front-end policies
// over a sweep of offered loads, writes results.csv, results.json and PNG
// plots into -out, and prints the published comparison table at load 1.4.
//
//	qsplice-experiment -out DIR [-loads 0.5:2.5:0.1] [-duration 600s] [-seed 1]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/experiment"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "qsplice-experiment:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("qsplice-experiment", flag.ContinueOnError)
	out := fs.String("out", "", "directory for results.csv, results.json and the plots (required)")
	loadsFlag := fs.String("loads", "0.5:2.5:0.1", "offered loads as from:to:step, in units of capacity")
	duration := fs.Duration("duration", 600*time.Second, "simulated time per run (sessions arriving in its first minute are not counted)")
	seed := fs.Uint64("seed", 1, "random seed; the same seed gives the same files")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		fs.Usage()
		return errors.New("-out is required")
	}
	loads, err := parseLoads(*loadsFlag)
	if err != nil {
		return err
	}
	base := experiment.DefaultConfig(sched.ModeLifoPri, 1)
	base.Duration = *duration
	base.Seed = *seed
	start := time.Now()
	results, err := experiment.Sweep(base, experiment.Policies, experiment.WithPublishedLoads(loads))
	if err != nil {
		return err
	}
	paths, err := experiment.WriteAll(*out, results)
	if err != nil {
		return err
	}
	if err := experiment.WriteTable(os.Stdout, results, experiment.TableLoad); err != nil {
		return err
	}
	fmt.Printf("%d runs in %v; wrote:\n  %s\n", len(results), time.Since(start).Round(time.Millisecond), strings.Join(paths, "\n  "))
	return nil
}

// parseLoads reads "from:to:step".
func parseLoads(s string) ([]float64, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("-loads %q: want from:to:step", s)
	}
	var v [3]float64
	for i, p := range parts {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || !(f > 0) {
			return nil, fmt.Errorf("-loads %q: %q is not a positive number", s, p)
		}
		v[i] = f
	}
	loads := experiment.Loads(v[0], v[1], v[2])
	if len(loads) == 0 {
		return nil, fmt.Errorf("-loads %q: from is above to", s)
	}
	return loads, nil
}
