// Package progress prints where a long run is: "[k/N] what, 1m20s in,
// about 3m left". The tools that run for minutes (the experiments, the
// demo, calibration) print a line as each step starts, with the time left
// estimated from the steps so far weighted by their expected length, so a
// person at the terminal knows whether to wait or come back. A nil writer
// (the tools' -quiet) prints nothing.
package progress

import (
	"fmt"
	"io"
	"time"
)

// Progress counts the steps of a run.
type Progress struct {
	w     io.Writer
	what  string
	total float64 // the steps' weights added up
	done  float64
	n, k  int
	start time.Time
	now   func() time.Time
}

// New starts counting n steps of total weight total (n if every step
// weighs the same, or their expected durations) for the run what.
func New(w io.Writer, what string, n int, total float64) *Progress {
	return &Progress{w: w, what: what, n: n, total: total, start: time.Now(), now: time.Now}
}

// Step reports that the next step, of weight weight, starts: label says
// what it is. The previous steps' weight counts as done.
func (p *Progress) Step(label string, weight float64) {
	if p == nil {
		return
	}
	p.k++
	if p.w != nil {
		fmt.Fprintf(p.w, "%s [%d/%d] %s%s\n", p.what, p.k, p.n, label, p.eta())
	}
	p.done += weight
}

// eta is ", 1m20s in, about 3m left" once a step has finished.
func (p *Progress) eta() string {
	elapsed := p.now().Sub(p.start)
	finished := p.done
	if finished <= 0 || elapsed <= 0 {
		return ""
	}
	left := time.Duration(float64(elapsed) * (p.total - finished) / finished)
	return fmt.Sprintf(", %v in, about %v left", round(elapsed), round(left))
}

// Done reports the end of the run.
func (p *Progress) Done() {
	if p == nil || p.w == nil {
		return
	}
	fmt.Fprintf(p.w, "%s: %d steps in %v\n", p.what, p.n, round(p.now().Sub(p.start)))
}

func round(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}
