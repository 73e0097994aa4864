package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/qsplice/qsplice/tools/loadgen"
	"github.com/qsplice/qsplice/tools/session"
)

// sessionMode turns the flags into a session run's configuration.
func (o *options) sessionMode(spec, host string, maxSessions int) error {
	switch {
	case o.cfg.Target == "":
		return errors.New("-target is required")
	case spec == "":
		return errors.New("-wsesslog needs -sessions rate=R for the session arrival rate")
	case len(o.cfg.Streams) > 0:
		return errors.New("-stream and -sessions are different modes: give one")
	case maxSessions <= 0:
		return errors.New("-max-sessions must be positive")
	case o.drain < 0:
		return errors.New("-drain must not be negative")
	}
	sp, err := loadgen.ParseSessions(spec)
	if err != nil {
		return err
	}
	sc := &loadgen.SessionConfig{
		Target: o.cfg.Target, Host: host, Sessions: sp, Warmup: o.cfg.Warmup, Duration: o.cfg.Duration,
		Drain: o.drain, MaxSessions: maxSessions, Seed: o.cfg.Seed,
	}
	if o.wsesslog != "" {
		f, err := os.Open(o.wsesslog)
		if err != nil {
			return err
		}
		defer f.Close()
		if sc.Log, err = session.ReadWsesslog(f); err != nil {
			return fmt.Errorf("%s: %w", o.wsesslog, err)
		}
		if len(sc.Log) == 0 {
			return fmt.Errorf("%s: no sessions", o.wsesslog)
		}
	}
	o.sessions = sc
	return nil
}

// writeSessionTable prints one line per page class, the total and the
// session counts.
func writeSessionTable(w io.Writer, res *loadgen.SessionResult) {
	if res.Interrupted {
		fmt.Fprintf(w, "interrupted: %.1fs of %.1fs measured\n", res.MeasuredS, res.DurationS)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join([]string{"class", "requested", "completed", "timed-out", "refused",
		"other", "errors", "not-gen", "done%", "p50ms", "p99ms", ""}, "\t"))
	for _, c := range append(res.Classes, res.Total) {
		pct := 0.0
		if c.Requested > 0 {
			pct = 100 * float64(c.Completed) / float64(c.Requested)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.2f\t%.2f\t\n", c.Name, c.Requested, c.Completed,
			c.TimedOut, c.Refused, c.Other, c.Errors, c.NotGenerated, pct, c.Latency.P50Ms, c.Latency.P99Ms)
	}
	tw.Flush()
	s := res.Sessions
	fmt.Fprintf(w, "sessions: %d started, %d completed, %d abandoned, %d unfinished, %d not started\n",
		s.Started, s.Completed, s.Abandoned, s.Unfinished, s.NotStarted)
}
