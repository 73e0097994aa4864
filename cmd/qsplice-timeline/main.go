// Command qsplice-timeline reads the handoff timelines that
// qsplice-frontend -timeline and qsplice-replay -timeline write (one JSON
// line per connection), prints the percentiles of each step's offset
// from the SYN and of each step-to-step gap and the retransmissions seen,
// and plots a waterfall of one connection (its retransmissions listed and
// drawn on a row of their own) and a CDF of each step.
//
//	qsplice-timeline [-conn ID -waterfall FILE.png] [-cdf DIR] [-check] FILE
//
// -check exits 1 when a record's steps are out of order (see
// frontend/timeline: the shim's first and last response byte are placed
// on the front-end's clock within the uncertainty each record carries).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	tl "github.com/qsplice/qsplice/frontend/timeline"
	"github.com/qsplice/qsplice/internal/version"
	"github.com/qsplice/qsplice/tools/timeline"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "qsplice-timeline:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("qsplice-timeline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: qsplice-timeline [-conn ID -waterfall FILE.png] [-cdf DIR] [-check] TIMELINE.jsonl")
		fs.PrintDefaults()
	}
	conn := fs.Uint64("conn", 0, "the connection (flow id) to draw a waterfall of")
	waterfall := fs.String("waterfall", "", "write the -conn connection's waterfall to this PNG")
	cdfDir := fs.String("cdf", "", "write a CDF of each step's offset from the SYN into this directory (cdf-STEP.png)")
	check := fs.Bool("check", false, "exit 1 if any record's steps are out of order")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.Line("qsplice-timeline"))
		return nil
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("one timeline file, please")
	}
	if (*waterfall != "") != (*conn != 0) {
		return errors.New("-waterfall and -conn go together")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	recs, err := tl.Read(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	sum := timeline.Summarize(recs)
	if err := sum.Write(stdout); err != nil {
		return err
	}
	if *waterfall != "" {
		r, ok := timeline.Find(recs, *conn)
		if !ok {
			return fmt.Errorf("no connection %d in %s", *conn, fs.Arg(0))
		}
		if err := timeline.Waterfall(r, *waterfall); err != nil {
			return err
		}
		if err := timeline.WriteRetx(stdout, r); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "wrote", *waterfall)
	}
	if *cdfDir != "" {
		if err := os.MkdirAll(*cdfDir, 0o755); err != nil {
			return err
		}
		files, err := timeline.CDFs(recs, *cdfDir)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %d CDFs into %s\n", len(files), *cdfDir)
	}
	if *check && sum.OutOfOrder > 0 {
		return fmt.Errorf("%d of %d records out of order; first: %s", sum.OutOfOrder, sum.Records, sum.FirstErr)
	}
	return nil
}
