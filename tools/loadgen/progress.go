package loadgen

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// startProgress writes a progress line to w once a second until the
// returned function is called: elapsed time, each stream's sent/s and
// 2xx/s over the last second, and requests in flight. On a terminal each
// line overwrites the previous one; anywhere else (a log file, a pipe)
// lines are plain, one per second.
func startProgress(w io.Writer, r *runner) (stop func()) {
	if w == nil {
		return func() {}
	}
	terminal := isTerminal(w)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		sent := make([]int64, len(r.streams))
		ok := make([]int64, len(r.streams))
		last := r.start
		for {
			select {
			case <-done:
				if terminal {
					fmt.Fprintln(w)
				}
				return
			case now := <-ticker.C:
				line := progressLine(r, now, last, sent, ok)
				last = now
				if terminal {
					fmt.Fprintf(w, "\r%s\x1b[K", line)
				} else {
					fmt.Fprintln(w, line)
				}
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// progressLine formats one line and updates the previous counter values.
func progressLine(r *runner, now, last time.Time, sent, ok []int64) string {
	elapsed := now.Sub(r.start)
	perSecond := max(now.Sub(last).Seconds(), 1e-3)
	var b strings.Builder
	fmt.Fprintf(&b, "%5.0fs", elapsed.Seconds())
	if elapsed < r.cfg.Warmup {
		b.WriteString(" warmup")
	}
	for i, s := range r.streams {
		cs, co := s.liveSent.Load(), s.liveOK.Load()
		fmt.Fprintf(&b, " | %s sent %.0f/s ok %.0f/s", s.cfg.Name,
			float64(cs-sent[i])/perSecond, float64(co-ok[i])/perSecond)
		sent[i], ok[i] = cs, co
	}
	fmt.Fprintf(&b, " | in-flight %d", r.inFlight.Load())
	return b.String()
}

// isTerminal reports whether w is a character device such as a tty.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
