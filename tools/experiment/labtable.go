package experiment

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/loadgen"
	"github.com/qsplice/qsplice/tools/session"
)

// LabResult is one lab run, in the simulator's terms and units, next to
// the simulator's run of the same policy, load, seed and window.
type LabResult struct {
	// Lab is the lab run as a simulator Result, in model time: rates are
	// the lab's times TimeScale, times are the lab's divided by it. What
	// the lab cannot measure stays zero: Wasted (the front-end learns
	// that a client left, see the package comment) and CCDF. Sessions
	// counts those started in the window; MeanRTSeconds is the
	// front-end's mean response time over the requests it served.
	Lab Result `json:"lab"`
	// Failed are answers the simulator has no word for: statuses other
	// than 2xx and 503, and connection errors (Other + Errors of
	// loadgen). FailedPct is of the same total as Lab's percentages.
	Failed    int     `json:"failed"`
	FailedPct float64 `json:"failed_pct"`
	// Unfinished sessions were still going when the drain ended: their
	// later pages are in no count.
	Unfinished int64   `json:"sessions_unfinished"`
	TimeScale  float64 `json:"timescale"`
	// LabName is the lab the run used (namespaces qs-LabName-*), removed
	// by the time RunLab returns.
	LabName string `json:"lab_name"`
	// Frontend is what the front-end counted per page class over the
	// run (warm-up and drain included), by class name in JSON.
	Frontend [session.NumPages]FrontendClass `json:"-"`
	// Loadgen is qsplice-load's own result.
	Loadgen *loadgen.SessionResult `json:"loadgen"`
	// Simulator is the simulator's run of the same policy, load, seed
	// and window (LabConfig.SimConfig).
	Simulator Result `json:"simulator"`
}

// MarshalJSON writes Frontend keyed by class name.
func (r LabResult) MarshalJSON() ([]byte, error) {
	type plain LabResult // without this method
	fe := make(map[string]FrontendClass, session.NumPages)
	for p, c := range r.Frontend {
		fe[session.Stage(p).String()] = c
	}
	return json.Marshal(struct {
		plain
		Frontend map[string]FrontendClass `json:"frontend"`
	}{plain(r), fe})
}

// newLabResult turns qsplice-load's counts and the front-end's into the
// simulator's figures. The outcome total is every request the counted
// sessions sent or would have sent: completed + timed out + dropped
// (503) + failed + not generated.
func newLabResult(cfg LabConfig, mode sched.Mode, load float64, lr *loadgen.SessionResult,
	fe [session.NumPages]FrontendClass, lifo float64) LabResult {
	sim := cfg.SimConfig(mode, load)
	r := LabResult{TimeScale: cfg.TimeScale, Loadgen: lr, Frontend: fe,
		Unfinished: lr.Sessions.Unfinished}
	res := &r.Lab
	res.Policy, res.Load = mode.String(), load
	res.CapacityRPS = sim.Capacity()
	res.OfferedRPS = load * res.CapacityRPS
	res.Sessions = int(lr.Sessions.Started)
	t := lr.Total
	res.Requests = Outcomes{Completed: int(t.Completed), TimedOut: int(t.TimedOut),
		Dropped: int(t.Refused), NotGenerated: int(t.NotGenerated)}
	r.Failed = int(t.Other + t.Errors)
	for _, c := range lr.Classes {
		if p, ok := stageByName(c.Name); ok {
			res.PerClass[p] = int(c.Completed)
		}
	}
	if total := float64(res.Requests.Total() + r.Failed); total > 0 {
		res.CompletedPct = 100 * float64(res.Requests.Completed) / total
		res.TimedOutPct = 100 * float64(res.Requests.TimedOut) / total
		res.DroppedPct = 100 * float64(res.Requests.Dropped) / total
		res.NotGeneratedPct = 100 * float64(res.Requests.NotGenerated) / total
		r.FailedPct = 100 * float64(r.Failed) / total
	}
	if lr.MeasuredS > 0 {
		res.ThroughputRPS = float64(t.Completed) / lr.MeasuredS * cfg.TimeScale
	}
	var sum float64
	var n int64
	for _, c := range fe {
		sum += c.ResponseSum
		n += c.Responses
	}
	if n > 0 {
		res.MeanRTSeconds = sum / float64(n) / cfg.TimeScale
	}
	res.LIFOFraction = lifo
	return r
}

func stageByName(name string) (session.Stage, bool) {
	for p := range session.NumPages {
		if session.Stage(p).String() == name {
			return session.Stage(p), true
		}
	}
	return session.Exit, false
}

// WriteLabCSV writes one row per lab run with the simulator's columns
// (WriteCSV; wasted is empty: the lab does not measure it), then the
// lab's own: failed, failed_pct, sessions_unfinished, timescale, and
// the front-end's served and queue-full counts over all classes.
func WriteLabCSV(w io.Writer, results []LabResult) error {
	cw := csv.NewWriter(w)
	header := append(csvHeader(), "failed", "failed_pct", "sessions_unfinished", "timescale", "fe_served", "fe_queue_full")
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, lr := range results {
		row := csvRow(lr.Lab, false) // the lab does not measure wasted work
		var served, full int64
		for _, c := range lr.Frontend {
			served += c.Served
			full += c.QueueFull
		}
		row = append(row, strconv.Itoa(lr.Failed), csvFloat(lr.FailedPct), strconv.FormatInt(lr.Unfinished, 10), csvFloat(lr.TimeScale),
			strconv.FormatInt(served, 10), strconv.FormatInt(full, 10))
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteLabTable prints the published comparison at one load, as
// WriteTable does, with each policy's lab row followed by its simulator
// row, and a "failed" column for the lab's other statuses and errors.
// Rates and times are in model time.
func WriteLabTable(w io.Writer, results []LabResult, load float64) error {
	var rows []LabResult
	for _, r := range results {
		if math.Abs(r.Lab.Load-load) < 1e-6 {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("experiment: no lab results at load %v", load)
	}
	first := rows[0]
	fmt.Fprintf(w, "offered load %.2f (%.1f req/s on a capacity of %.1f req/s; lab at timescale %g: %.1f req/s of wall-clock time)\n",
		load, first.Lab.OfferedRPS, first.Lab.CapacityRPS, first.TimeScale, first.Lab.OfferedRPS/first.TimeScale)
	fmt.Fprintf(w, "%-12s %-4s %9s %9s %9s %9s %9s %8s %8s\n", "policy", "run",
		"completed", "timed out", "dropped", "not gen.", "failed", "req/s", "mean RT")
	line := func(run string, r Result, failedPct float64) {
		fmt.Fprintf(w, "%-12s %-4s %8.1f%% %8.1f%% %8.1f%% %8.1f%% %8.1f%% %8.1f %7.2fs\n", r.Policy, run,
			r.CompletedPct, r.TimedOutPct, r.DroppedPct, r.NotGeneratedPct, failedPct, r.ThroughputRPS, r.MeanRTSeconds)
	}
	for _, r := range rows {
		line("lab", r.Lab, r.FailedPct)
		line("sim", r.Simulator, 0)
	}
	fmt.Fprintf(w, "\ncompleted requests per class\n%-12s %-4s", "policy", "run")
	for j := range session.NumPages {
		fmt.Fprintf(w, " %8s", session.Stage(j))
	}
	fmt.Fprintln(w)
	perClass := func(run string, r Result) {
		fmt.Fprintf(w, "%-12s %-4s", r.Policy, run)
		for _, c := range r.PerClass {
			fmt.Fprintf(w, " %8d", c)
		}
		fmt.Fprintln(w)
	}
	for _, r := range rows {
		perClass("lab", r.Lab)
		perClass("sim", r.Simulator)
	}
	fmt.Fprintln(w, "\nsessions counted (lab: started in the window; unfinished: cut after the drain)")
	for _, r := range rows {
		fmt.Fprintf(w, "%-12s lab %6d (%d unfinished)  sim %6d\n", r.Lab.Policy, r.Lab.Sessions, r.Unfinished, r.Simulator.Sessions)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// WriteLabAll writes lab.csv, lab.json (lab runs with their simulator
// runs and qsplice-load's results) and sim.csv (the matching simulator
// runs, as WriteCSV writes them) into dir, creating it, and returns the
// paths written.
func WriteLabAll(dir string, results []LabResult) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	sims := make([]Result, len(results))
	for i, r := range results {
		sims[i] = r.Simulator
	}
	files := []struct {
		name  string
		write func(io.Writer) error
	}{
		{"lab.csv", func(w io.Writer) error { return WriteLabCSV(w, results) }},
		{"lab.json", func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(results)
		}},
		{"sim.csv", func(w io.Writer) error { return WriteCSV(w, sims) }},
	}
	var paths []string
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := writeFile(path, f.write); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}
