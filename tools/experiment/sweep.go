package experiment

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/session"
)

// Policies are the three front-end policies compared, in the order
// tables and plots list them.
var Policies = []sched.Mode{sched.ModeSingleFIFO, sched.ModeEightFIFO, sched.ModeLifoPri}

// Loads returns from, from+step, ... up to and including to (within
// rounding), each rounded to 1e-9 so that 0.5+9x0.1 prints as 1.4.
func Loads(from, to, step float64) []float64 {
	var out []float64
	if !(step > 0) || to < from {
		return out
	}
	for i := 0; ; i++ {
		l := math.Round((from+float64(i)*step)*1e9) / 1e9
		if l > to+step/1e3 {
			return out
		}
		out = append(out, l)
	}
}

// Sweep runs base for every policy at every load, on up to GOMAXPROCS
// goroutines, and returns the results policy by policy, each in load
// order. Runs share nothing, so the results do not depend on scheduling.
func Sweep(base Config, policies []sched.Mode, loads []float64) ([]Result, error) {
	out := make([]Result, len(policies)*len(loads))
	errs := make([]error, len(out))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				cfg := base
				cfg.Mode = policies[i/len(loads)]
				cfg.Load = loads[i%len(loads)]
				out[i], errs[i] = Run(cfg)
			}
		}()
	}
	for i := range out {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// WriteCSV writes one row per result with the outcome counts and shares,
// throughput, mean response time, LIFO share and per-class completions.
func WriteCSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader()); err != nil {
		return err
	}
	for _, r := range results {
		if err := cw.Write(csvRow(r, true)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// csvHeader names WriteCSV's columns; WriteLabCSV starts with them too.
func csvHeader() []string {
	header := []string{"policy", "load", "offered_rps", "capacity_rps", "sessions",
		"completed", "timed_out", "dropped", "not_generated",
		"completed_pct", "timed_out_pct", "dropped_pct", "not_generated_pct",
		"wasted", "throughput_rps", "mean_rt_s", "lifo_fraction"}
	for j := range session.NumPages {
		header = append(header, "completed_"+session.Stage(j).String())
	}
	return header
}

// csvRow is r under csvHeader; wasted is left empty when the run did not
// measure it.
func csvRow(r Result, wastedMeasured bool) []string {
	n := strconv.Itoa
	wasted := ""
	if wastedMeasured {
		wasted = n(r.Wasted)
	}
	row := []string{r.Policy, csvFloat(r.Load), csvFloat(r.OfferedRPS), csvFloat(r.CapacityRPS), n(r.Sessions),
		n(r.Requests.Completed), n(r.Requests.TimedOut), n(r.Requests.Dropped), n(r.Requests.NotGenerated),
		csvFloat(r.CompletedPct), csvFloat(r.TimedOutPct), csvFloat(r.DroppedPct), csvFloat(r.NotGeneratedPct),
		wasted, csvFloat(r.ThroughputRPS), csvFloat(r.MeanRTSeconds), csvFloat(r.LIFOFraction)}
	for _, c := range r.PerClass {
		row = append(row, n(c))
	}
	return row
}

func csvFloat(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }

// WriteJSON writes the results, response-time CCDFs included, as an
// indented JSON array.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

// WriteTable prints the published comparison for the results at one
// load: the outcome shares and completions per class of each policy.
func WriteTable(w io.Writer, results []Result, load float64) error {
	var rows []Result
	for _, r := range results {
		if math.Abs(r.Load-load) < 1e-6 {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("experiment: no results at load %v", load)
	}
	fmt.Fprintf(w, "offered load %.2f (%.1f req/s on a capacity of %.1f req/s)\n",
		load, rows[0].OfferedRPS, rows[0].CapacityRPS)
	fmt.Fprintf(w, "%-12s %9s %9s %9s %9s %8s %8s\n", "policy", "completed", "timed out", "dropped", "not gen.", "req/s", "mean RT")
	for _, r := range rows {
		fmt.Fprintf(w, "%-12s %8.1f%% %8.1f%% %8.1f%% %8.1f%% %8.1f %7.2fs\n", r.Policy,
			r.CompletedPct, r.TimedOutPct, r.DroppedPct, r.NotGeneratedPct, r.ThroughputRPS, r.MeanRTSeconds)
	}
	fmt.Fprintf(w, "\ncompleted requests per class\n%-12s", "policy")
	for j := range session.NumPages {
		fmt.Fprintf(w, " %8s", session.Stage(j))
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "%-12s", r.Policy)
		for _, c := range r.PerClass {
			fmt.Fprintf(w, " %8d", c)
		}
		fmt.Fprintln(w)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// WithPublishedLoads returns loads plus the loads the published figures
// are drawn at (CCDFLoadBelow, CCDFLoadAbove, TableLoad), sorted, without
// duplicates.
func WithPublishedLoads(loads []float64) []float64 {
	out := append([]float64{CCDFLoadBelow, CCDFLoadAbove, TableLoad}, loads...)
	slices.Sort(out)
	return slices.CompactFunc(out, func(a, b float64) bool { return math.Abs(a-b) < 1e-6 })
}

// WriteAll writes results.csv, results.json and the plots into dir,
// creating it, and returns the paths written; tag names the run in the
// plots' titles (e.g. "preset shop, seed 1, sessions arriving in [60s, 600s)").
func WriteAll(dir string, results []Result, tag string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for name, write := range map[string]func(io.Writer, []Result) error{
		resultsCSV: WriteCSV, resultsJSON: WriteJSON,
	} {
		path := filepath.Join(dir, name)
		if err := writeFile(path, func(w io.Writer) error { return write(w, results) }); err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	slices.Sort(paths)
	plots, err := PlotAll(dir, results, tag)
	return append(paths, plots...), err
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := write(w); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
