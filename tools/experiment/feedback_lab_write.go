package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
)

// feedbackLabJSON is the live run's own file beside the simulated run's:
// each class's counts at the clients and at the front-end.
const (
	feedbackLabJSON  = "feedback_lab.json"
	feedbackLoadJSON = "feedback_load.json" // qsplice-load's own result
)

// WriteFeedbackLabAll writes the files of WriteFeedbackAll (the series,
// summary and plots) and feedback_lab.json into dir.
func WriteFeedbackLabAll(dir string, res FeedbackLabResult) ([]string, error) {
	paths, err := WriteFeedbackAll(dir, res.FeedbackResult)
	if err != nil {
		return paths, err
	}
	path := filepath.Join(dir, feedbackLabJSON)
	err = writeFile(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Lab           string             `json:"lab"`
			CapacityRPS   float64            `json:"capacity_rps"`
			Trees         int                `json:"trees"`
			MissedSamples int                `json:"missed_samples"`
			Summary       FeedbackSummary    `json:"summary"`
			Classes       []FeedbackLabClass `json:"classes"`
		}{res.LabName, res.CapacityRPS, res.Trees, res.MissedSamples, res.Summary, res.Classes})
	})
	paths = append(paths, path)
	if err != nil || res.Load == nil {
		return paths, err
	}
	path = filepath.Join(dir, feedbackLoadJSON)
	err = writeFile(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res.Load)
	})
	return append(paths, path), err
}

// WriteFeedbackLabSummary prints the summary and each class's counts.
func WriteFeedbackLabSummary(w io.Writer, res FeedbackLabResult) error {
	if len(res.Series) > 0 {
		if err := WriteFeedbackSummary(w, res.FeedbackResult); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "%-8s %7s %7s %7s %9s %8s %7s | %8s %10s %8s  %s\n", "class", "sent", "2xx", "503", "503+R-A",
		"timeout", "failed", "fe-in", "fe-dispat", "fe-503", "trees served (client 1..M / front-end 1..M)")
	for _, c := range res.Classes {
		var fe []uint64
		if len(c.FETrees) > 1 {
			fe = c.FETrees[1:]
		}
		var cl []int64
		if len(c.ClientTrees) > 1 {
			cl = c.ClientTrees[1:]
		}
		fmt.Fprintf(w, "%-8s %7d %7d %7d %9d %8d %7d | %8d %10d %8d  %v / %v\n", c.Name, c.Sent, c.OK, c.Refused,
			c.RetryAfter, c.TimedOut, c.Failed, c.Arrived, c.Dispatched, c.FERefused, cl, fe)
	}
	for _, c := range res.Classes {
		if n, k := c.NewSessions, c.KnownSessions; n != nil && k != nil {
			frac := func(a, b int64) float64 {
				if b == 0 {
					return 0
				}
				return float64(a) / float64(b)
			}
			fmt.Fprintf(w, "%-8s new sessions %d: %.1f%% 2xx, %d 503, %d timed out; known sessions %d: %.1f%% 2xx, %d 503, %d timed out\n",
				c.Name, n.Sent, 100*frac(n.OK, n.Sent), n.Refused, n.TimedOut, k.Sent, 100*frac(k.OK, k.Sent), k.Refused, k.TimedOut)
		}
	}
	_, err := fmt.Fprintf(w, "%d of %d periods not sampled\n", res.MissedSamples, len(res.Series))
	return err
}

// RunFeedbackLabCommand is qsplice-experiment -policy feedback -lab: cfg
// run live, its files written into dir and its summary printed.
func RunFeedbackLabCommand(ctx context.Context, dir string, cfg FeedbackLabConfig, stdout io.Writer) error {
	if cfg.Log == nil {
		cfg.Log = stdout
	}
	res, err := RunFeedbackLab(ctx, cfg)
	if err != nil && len(res.Series) == 0 {
		return err
	}
	paths, werr := WriteFeedbackLabAll(dir, res)
	if werr != nil {
		return fmt.Errorf("%v (run: %v)", werr, err)
	}
	if serr := WriteFeedbackLabSummary(stdout, res); serr != nil {
		return serr
	}
	for _, p := range paths {
		fmt.Fprintln(stdout, "wrote", p)
	}
	return err
}
