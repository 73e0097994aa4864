// Package progress prints where a long run is: "[k/N] what, 1m20s in,
// about 3m left". The tools that run for minutes (the experiments, the
// demo, calibration) print a line as each step starts, with the time left
// estimated from the steps so far weighted by their expected length, so a
// person at the terminal knows whether to wait or come back. A nil writer
// (the tools' -quiet) prints nothing.
//
// A run whose length is only bounded (a calibration climbs rates until one
// fails) counts its steps with UpTo: N is then the most steps it can take,
// Drop takes away those it will not, and the time left reads "at most".
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
	upTo  bool // n and total are upper bounds (UpTo)
	start time.Time
	now   func() time.Time
}

// New starts counting n steps of total weight total (n if every step
// weighs the same, or their expected durations) for the run what.
func New(w io.Writer, what string, n int, total float64) *Progress {
	return &Progress{w: w, what: what, n: n, total: total, start: time.Now(), now: time.Now}
}

// UpTo is New for a run that takes at most n steps of total weight at
// most total: its lines say how long is left at most.
func UpTo(w io.Writer, what string, n int, total float64) *Progress {
	p := New(w, what, n, total)
	p.upTo = true
	return p
}

// WithClock makes p read the time from now, and start counting now
// (tests drive the time-in and time-left figures with it).
func (p *Progress) WithClock(now func() time.Time) *Progress {
	p.now, p.start = now, now()
	return p
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

// Drop takes steps of total weight weight that will not run out of the
// count (a climb that ended before its last step), so that N and the
// time left count only what may still come.
func (p *Progress) Drop(steps int, weight float64) {
	if p == nil {
		return
	}
	p.n = max(p.n-steps, p.k)
	p.total = max(p.total-weight, p.done)
}

// eta is ", 1m20s in, about 3m left" once a step has finished.
func (p *Progress) eta() string {
	elapsed := p.now().Sub(p.start)
	finished := p.done
	if finished <= 0 || elapsed <= 0 {
		return ""
	}
	left := time.Duration(float64(elapsed) * (p.total - finished) / finished)
	if p.upTo {
		return fmt.Sprintf(", %v in, at most about %v left", round(elapsed), round(left))
	}
	return fmt.Sprintf(", %v in, about %v left", round(elapsed), round(left))
}

// Done reports the end of the run: the steps it took (fewer than N when
// it was cut short) and how long it took.
func (p *Progress) Done() {
	if p == nil || p.w == nil {
		return
	}
	fmt.Fprintf(p.w, "%s: %d steps in %v\n", p.what, p.k, round(p.now().Sub(p.start)))
}

func round(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}
