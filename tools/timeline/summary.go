// Package timeline summarises and plots the handoff timelines the
// front-end (qsplice-frontend -timeline) and replay (qsplice-replay
// -timeline) write, one record per connection (frontend/timeline): the
// percentiles of each step's offset from the SYN and of each step-to-step
// gap, a waterfall of one connection's steps, and the CDF of each step's
// offset. qsplice-timeline is its command.
package timeline

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"time"

	tl "github.com/qsplice/qsplice/frontend/timeline"
)

// Percentiles of a set of durations (nearest rank).
type Percentiles struct {
	N             int
	P50, P90, P99 time.Duration
}

// percentiles sorts ds and takes its nearest-rank percentiles.
func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return ds[min(max(i, 0), len(ds)-1)]
	}
	return Percentiles{N: len(ds), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99)}
}

// StepSummary is one step's figures.
type StepSummary struct {
	Step tl.Step
	// FromSYN: the step's offset from the connection's SYN (records with
	// both).
	FromSYN Percentiles
	// Gap: the step's offset from the step before it in Step order (the
	// records with both); none for the SYN.
	Gap  Percentiles
	Prev tl.Step
}

// Summary is what Summarize finds in a set of records.
type Summary struct {
	Records int
	// AtStop counts the records the front-end wrote when it stopped, of
	// connections it still held (open or lingering).
	AtStop int
	// OutOfOrder counts records whose steps break their order
	// (tl.Record.CheckOrder); FirstErr is the first such error.
	OutOfOrder int
	FirstErr   string
	// MaxShimUncertainty is the largest uncertainty of a placed step.
	MaxShimUncertainty time.Duration
	// Connections whose handoff repeated something: the client's SYN,
	// the C2 SYN, the Splice, the request on C2.
	SYNRetries, C2SYNRetries, SpliceResent, RequestResent int
	// Retransmissions seen in all (tl.Record.NumRetx), the connections
	// with any, and the listed ones by kind.
	Retransmissions, RetxConnections int
	RetxByKind                       map[string]int

	Steps []StepSummary // one per step, in Step order
}

// Summarize computes the percentiles of every step's offset from the SYN
// and of every gap between adjacent steps. Keep-alive follow-ups' records
// (Request > 1) have no SYN: they count in the gaps between the steps
// they have.
func Summarize(recs []tl.Record) Summary {
	s := Summary{Records: len(recs), RetxByKind: map[string]int{}}
	from := make([][]time.Duration, tl.NumSteps)
	gaps := make([][]time.Duration, tl.NumSteps)
	for i := range recs {
		r := &recs[i]
		if err := r.CheckOrder(); err != nil {
			if s.OutOfOrder == 0 {
				s.FirstErr = err.Error()
			}
			s.OutOfOrder++
		}
		s.MaxShimUncertainty = max(s.MaxShimUncertainty, r.ShimUncertainty)
		count := func(n *int, yes bool) {
			if yes {
				*n++
			}
		}
		count(&s.SYNRetries, r.SYNs > 1)
		count(&s.C2SYNRetries, r.C2SYNs > 1)
		count(&s.SpliceResent, r.SpliceSends > 1)
		count(&s.RequestResent, r.RequestResends > 0)
		count(&s.RetxConnections, r.NumRetx > 0)
		count(&s.AtStop, r.AtStop)
		s.Retransmissions += r.NumRetx
		for _, x := range r.Retransmissions() {
			s.RetxByKind[x.Kind]++
		}
		syn, hasSYN := r.Get(tl.SYN)
		for st := range tl.NumSteps {
			t, ok := r.Get(st)
			if !ok {
				continue
			}
			if hasSYN {
				from[st] = append(from[st], time.Duration(t-syn))
			}
			if st > 0 {
				if p, ok := r.Get(st - 1); ok {
					gaps[st] = append(gaps[st], time.Duration(t-p))
				}
			}
		}
	}
	for st := range tl.NumSteps {
		ss := StepSummary{Step: st, FromSYN: percentiles(from[st])}
		if st > 0 {
			ss.Prev, ss.Gap = st-1, percentiles(gaps[st])
		}
		s.Steps = append(s.Steps, ss)
	}
	return s
}

// Write prints s as two tables: offsets from the SYN, then gaps.
func (s Summary) Write(w io.Writer) error {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e6) }
	fmt.Fprintf(w, "records %d (%d of connections still held at the stop), out of order %d", s.Records, s.AtStop, s.OutOfOrder)
	if s.FirstErr != "" {
		fmt.Fprintf(w, " (first: %s)", s.FirstErr)
	}
	fmt.Fprintf(w, "\nconnections with retransmissions: syn %d, c2 syn %d, splice %d, request %d\n",
		s.SYNRetries, s.C2SYNRetries, s.SpliceResent, s.RequestResent)
	fmt.Fprintf(w, "retransmissions seen: %d on %d connections", s.Retransmissions, s.RetxConnections)
	if len(s.RetxByKind) > 0 {
		kinds := slices.Sorted(maps.Keys(s.RetxByKind))
		fmt.Fprint(w, " (listed: ")
		for i, k := range kinds {
			if i > 0 {
				fmt.Fprint(w, ", ")
			}
			fmt.Fprintf(w, "%s %d", k, s.RetxByKind[k])
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "first_byte and last_byte are placed on the front-end's clock within +-%v at most\n\n", s.MaxShimUncertainty)
	fmt.Fprintf(w, "%-14s %7s %10s %10s %10s   (ms from syn)\n", "step", "n", "p50", "p90", "p99")
	for _, st := range s.Steps {
		p := st.FromSYN
		if p.N == 0 {
			fmt.Fprintf(w, "%-14s %7d\n", st.Step, 0)
			continue
		}
		fmt.Fprintf(w, "%-14s %7d %10s %10s %10s\n", st.Step, p.N, ms(p.P50), ms(p.P90), ms(p.P99))
	}
	fmt.Fprintf(w, "\n%-30s %7s %10s %10s %10s   (ms)\n", "gap", "n", "p50", "p90", "p99")
	for _, st := range s.Steps[1:] {
		p := st.Gap
		name := st.Prev.String() + " -> " + st.Step.String()
		if p.N == 0 {
			fmt.Fprintf(w, "%-30s %7d\n", name, 0)
			continue
		}
		fmt.Fprintf(w, "%-30s %7d %10s %10s %10s\n", name, p.N, ms(p.P50), ms(p.P90), ms(p.P99))
	}
	_, err := fmt.Fprintln(w)
	return err
}
