package benchproxy

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/qsplice/qsplice/tools/content"
)

// Row is one line of the table: a figure for each system, qsplice's
// ratios against the others, and the target for it.
type Row struct {
	Figure string
	Format string             // of the values, e.g. "%.0f"
	Values map[string]float64 // by system; absent: does not apply or not measured
	// Ratios of qsplice's value to the proxies', to direct's and to the
	// shim's alone (NaN: none).
	VsNginx, VsHAProxy, VsDirect, VsShim float64
	Target                               string
	Verdict                              string // "met", "NOT met", "n/a", or "" (no target)
	// With several rounds, Values are each figure's median over them,
	// the verdict is the medians', and RoundsMet of RoundsDecided
	// rounds met the target on their own figures.
	RoundsMet, RoundsDecided int
}

// value picks a figure out of one system's result; ok is false when it
// does not apply or was not measured.
type value func(s *SystemResult) (float64, bool)

func bulkMBps(s *SystemResult) (float64, bool) {
	if s.Bulk == nil {
		return 0, false
	}
	return s.Bulk.MBPerSec, true
}

func smallRate(s *SystemResult) (float64, bool) {
	if s.Small == nil {
		return 0, false
	}
	return s.Small.RequestsPerSec, true
}

// smallP99 is the 1K close load's latency p99 in milliseconds (none in
// a result written before wrk's percentiles were recorded).
func smallP99(s *SystemResult) (float64, bool) {
	if s.Small == nil || s.Small.Wrk.LatencyP99 <= 0 {
		return 0, false
	}
	return float64(s.Small.Wrk.LatencyP99) / float64(time.Millisecond), true
}

// cpuFigure returns a per-role figure of a load: the proxies' own for
// nginx and HAProxy, the given qsplice roles (summed) for qsplice, and
// for the shim alone its own in the rows of the shim alone.
func cpuFigure(load func(*SystemResult) *Load, perUnit func(*Load) map[string]float64, qspliceRoles ...string) value {
	return func(s *SystemResult) (float64, bool) {
		l := load(s)
		if l == nil {
			return 0, false
		}
		roles := []string{RoleProxy}
		switch s.Name {
		case SystemQsplice:
			roles = qspliceRoles
		case SystemShim:
			if !slices.Equal(qspliceRoles, []string{RoleShim}) {
				return 0, false
			}
			roles = qspliceRoles
		}
		var sum float64
		for _, r := range roles {
			v, ok := perUnit(l)[r]
			if !ok {
				return 0, false
			}
			sum += v
		}
		return sum, true
	}
}

func bulkLoad(s *SystemResult) *Load        { return s.Bulk }
func smallLoad(s *SystemResult) *Load       { return s.Small }
func perGB(l *Load) map[string]float64      { return l.CPUSecondsPerGB }
func perRequest(l *Load) map[string]float64 { return l.CPUUSPerRequest }

func ttfbP50(s *SystemResult) (float64, bool) {
	if s.TTFB == nil {
		return 0, false
	}
	return s.TTFB.P50us, true
}

func ttfbP99(s *SystemResult) (float64, bool) {
	if s.TTFB == nil {
		return 0, false
	}
	return s.TTFB.P99us, true
}

// deliveryRole is the role whose delivery share stands for a system in
// the rows: the proxy's, or qsplice's given role.
func deliveryRole(s *SystemResult, qspliceRole string) string {
	switch s.Name {
	case SystemNginx, SystemHAProxy:
		return RoleProxy
	case SystemQsplice:
		return qspliceRole
	}
	return ""
}

// deliveryShare is the share of a system's CPU under the 1K close load
// spent delivering what it sent (delivery.go).
func deliveryShare(qspliceRole string) value {
	return func(s *SystemResult) (float64, bool) {
		d := s.delivery(deliveryRole(s, qspliceRole))
		if d == nil || d.Error != "" || d.Samples == 0 {
			return 0, false
		}
		return d.Share, true
	}
}

// ownPerRequest is a system's CPU per short request less the share it
// spent delivering what it sent: its own work.
func ownPerRequest(qspliceRole string) value {
	perReq, share := cpuFigure(smallLoad, perRequest, qspliceRole), deliveryShare(qspliceRole)
	return func(s *SystemResult) (float64, bool) {
		c, ok1 := perReq(s)
		d, ok2 := share(s)
		return c * (1 - d), ok1 && ok2
	}
}

func frameFigure(process string, perFrame func(*FrameCost) float64) value {
	return func(s *SystemResult) (float64, bool) {
		f := s.frameCost(process)
		if f == nil || f.Error != "" || f.Frames == 0 {
			return 0, false
		}
		return perFrame(f), true
	}
}

// check is a target: its text and the test of qsplice's value against
// the other systems' values.
type check struct {
	text string
	met  func(q float64, v map[string]float64) (bool, bool) // met, decidable
	once bool                                               // counted once, in no round (frame costs)
}

func atLeastDirectAndProxies(q float64, v map[string]float64) (bool, bool) {
	d, okD := v[SystemDirect]
	n, okN := v[SystemNginx]
	h, okH := v[SystemHAProxy]
	if !okD || !okN || !okH {
		return false, false
	}
	return q >= 0.8*d && q >= n && q >= h, true
}

func atMostTimesNginx(factor float64) func(q float64, v map[string]float64) (bool, bool) {
	return func(q float64, v map[string]float64) (bool, bool) {
		n, ok := v[SystemNginx]
		return q <= factor*n, ok
	}
}

func atMostDirectPlus(us float64) func(q float64, v map[string]float64) (bool, bool) {
	return func(q float64, v map[string]float64) (bool, bool) {
		d, ok := v[SystemDirect]
		return q <= d+us, ok
	}
}

func below(limit float64) func(q float64, v map[string]float64) (bool, bool) {
	return func(q float64, _ map[string]float64) (bool, bool) { return q < limit, true }
}

// allocsEpsilon: allocations are counted for the whole process, so a
// status handler or a timer may allocate a few times in a window of a
// million frames; anything below this many per frame is none on the
// packet path.
const allocsEpsilon = 0.001

var rowSpecs = []struct {
	figure, format string
	v              value
	target         *check
}{
	{"bulk: throughput, MB/s", "%.0f", bulkMBps,
		&check{text: ">=0.8x direct, >=proxies", met: atLeastDirectAndProxies}},
	{"bulk: CPU-s/GB, proxy | front-end", "%.2f", cpuFigure(bulkLoad, perGB, RoleFrontend),
		&check{text: "<=0.1x nginx", met: atMostTimesNginx(0.1)}},
	{"bulk: CPU-s/GB, proxy | shim", "%.2f", cpuFigure(bulkLoad, perGB, RoleShim),
		&check{text: "<=0.25x nginx", met: atMostTimesNginx(0.25)}},
	{"bulk: CPU-s/GB, proxy | front-end+shim", "%.2f", cpuFigure(bulkLoad, perGB, RoleFrontend, RoleShim), nil},
	{"1K close: requests/s", "%.0f", smallRate, nil},
	{"1K close: latency p99 ms", "%.1f", smallP99, nil},
	{"1K close: CPU-us/req, proxy | front-end", "%.1f", cpuFigure(smallLoad, perRequest, RoleFrontend),
		&check{text: "<=1x nginx", met: atMostTimesNginx(1)}},
	{"1K close: CPU-us/req, proxy | shim", "%.1f", cpuFigure(smallLoad, perRequest, RoleShim), nil},
	{"1K close: CPU-us/req, proxy | front-end+shim", "%.1f", cpuFigure(smallLoad, perRequest, RoleFrontend, RoleShim), nil},
	{"1K close: share delivering own sends, proxy | front-end", "%.2f", deliveryShare(RoleFrontend), nil},
	{"1K close: CPU-us/req less delivery, proxy | front-end", "%.1f", ownPerRequest(RoleFrontend), nil},
	{"TTFB 1K new conn: p50 us", "%.0f", ttfbP50,
		&check{text: "<=direct+200us", met: atMostDirectPlus(200)}},
	{"TTFB 1K new conn: p99 us", "%.0f", ttfbP99, nil},
	{"bulk: syscalls/frame, front-end", "%.3f", frameFigure(RoleFrontend, func(f *FrameCost) float64 { return f.SyscallsPerFrame }),
		&check{text: "<0.1", met: below(0.1), once: true}},
	{"bulk: syscalls/frame, shim", "%.3f", frameFigure(RoleShim, func(f *FrameCost) float64 { return f.SyscallsPerFrame }),
		&check{text: "<0.1", met: below(0.1), once: true}},
	{"bulk: allocs/frame, front-end", "%.4f", frameFigure(RoleFrontend, func(f *FrameCost) float64 { return f.MallocsPerFrame }),
		&check{text: "0 (<0.001 process-wide)", met: below(allocsEpsilon), once: true}},
	{"bulk: allocs/frame, shim", "%.4f", frameFigure(RoleShim, func(f *FrameCost) float64 { return f.MallocsPerFrame }),
		&check{text: "0 (<0.001 process-wide)", met: below(allocsEpsilon), once: true}},
}

// Rows computes the table's rows.
func (r *Result) Rows() []Row {
	views := r.roundViews()
	var rows []Row
	for _, spec := range rowSpecs {
		row := Row{Figure: spec.figure, Format: spec.format, Values: map[string]float64{},
			VsNginx: math.NaN(), VsHAProxy: math.NaN(), VsDirect: math.NaN(), VsShim: math.NaN()}
		perRound := make([]map[string]float64, len(views))
		for k, systems := range views {
			perRound[k] = map[string]float64{}
			for _, s := range systems {
				if v, ok := spec.v(s); ok {
					perRound[k][s.Name] = v
				}
			}
		}
		for _, s := range r.Systems {
			var vs []float64
			for _, values := range perRound {
				if v, ok := values[s.Name]; ok {
					vs = append(vs, v)
				}
			}
			if len(vs) > 0 {
				row.Values[s.Name] = median(vs)
			}
		}
		q, haveQ := row.Values[SystemQsplice]
		ratio := func(other string) float64 {
			o, ok := row.Values[other]
			if !haveQ || !ok || o == 0 {
				return math.NaN()
			}
			return q / o
		}
		row.VsNginx, row.VsHAProxy, row.VsDirect, row.VsShim = ratio(SystemNginx), ratio(SystemHAProxy), ratio(SystemDirect), ratio(SystemShim)
		if spec.target != nil {
			row.Target = spec.target.text
			row.Verdict = "n/a"
			if haveQ {
				if met, ok := spec.target.met(q, row.Values); ok {
					row.Verdict = map[bool]string{true: "met", false: "NOT met"}[met]
				}
			}
			if len(views) > 1 && !spec.target.once {
				for _, values := range perRound {
					q, ok := values[SystemQsplice]
					if !ok {
						continue
					}
					if met, ok := spec.target.met(q, values); ok {
						row.RoundsDecided++
						if met {
							row.RoundsMet++
						}
					}
				}
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// roundViews returns the systems as each round saw them: one view of
// r.Systems when there was one round, else one per round, its loads
// those of the round (the frame costs, counted once, in each).
func (r *Result) roundViews() [][]*SystemResult {
	n := 0
	for _, s := range r.Systems {
		n = max(n, len(s.Rounds))
	}
	if n == 0 {
		return [][]*SystemResult{r.Systems}
	}
	views := make([][]*SystemResult, n)
	for k := range views {
		for _, s := range r.Systems {
			v := &SystemResult{Name: s.Name, Frames: s.Frames, Deliveries: s.Deliveries}
			if k < len(s.Rounds) {
				v.Bulk, v.Small, v.TTFB = s.Rounds[k].Bulk, s.Rounds[k].Small, s.Rounds[k].TTFB
			}
			views[k] = append(views[k], v)
		}
	}
	return views
}

// median of a non-empty list: the middle value, or the mean of the two
// middle ones.
func median(vs []float64) float64 {
	vs = slices.Clone(vs)
	slices.Sort(vs)
	m := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[m]
	}
	return (vs[m-1] + vs[m]) / 2
}

// Table renders the result: a header with the settings, the rows, and
// notes on how each figure was measured and what went wrong.
func (r *Result) Table() string {
	var b strings.Builder
	st := r.Settings
	workers := "default (one per CPU)"
	if st.Workers > 0 {
		workers = fmt.Sprint(st.Workers)
	}
	fmt.Fprintf(&b, "qsplice bench-proxy  %s  %d CPUs  kernel %s  link offloads: %v  qsplice workers: %s\n",
		r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Host.CPUs, r.Host.Kernel, r.LinkOffloads, workers)
	if st.FreshUpstream {
		b.WriteString("nginx: a new upstream connection per request (-nginx-upstream fresh), not its default pool of kept-alive ones\n")
	}
	if len(st.FrontendArgs)+len(st.BackendArgs) > 0 {
		fmt.Fprintf(&b, "qsplice-frontend extra flags: %q  qsplice-backend extra flags: %q\n", st.FrontendArgs, st.BackendArgs)
	}
	fmt.Fprintf(&b, "bulk: %s objects, %d keep-alive connections, %gs; 1K close: %s objects, one connection per request, %d concurrent, %gs; TTFB: %d sequential requests\n",
		content.FormatSize(st.BulkSize), st.BulkConns, st.LoadSeconds, content.FormatSize(st.SmallSize), st.SmallConns, st.LoadSeconds, st.TTFBRequests)
	if st.Rounds > 1 {
		fmt.Fprintf(&b, "%d rounds, the systems taking turns in each: every figure is its median over the rounds, ratios and verdicts are the medians'\n", st.Rounds)
	}
	b.WriteString("\n")

	rows := r.Rows()
	figW := len("figure")
	for _, row := range rows {
		figW = max(figW, len(row.Figure))
	}
	const numW, ratioW = 9, 10
	fmt.Fprintf(&b, "%-*s", figW, "figure")
	for _, name := range []string{"direct", "nginx", "HAProxy", "shim", "qsplice"} {
		fmt.Fprintf(&b, " %*s", numW, name)
	}
	fmt.Fprintf(&b, " %*s %*s %*s %*s  %-26s %s\n", ratioW, "q/nginx", ratioW, "q/HAProxy", ratioW, "q/direct", ratioW, "q/shim", "target", "verdict")
	for _, row := range rows {
		fmt.Fprintf(&b, "%-*s", figW, row.Figure)
		for _, name := range Systems {
			cell := "-"
			if v, ok := row.Values[name]; ok {
				cell = fmt.Sprintf(row.Format, v)
			}
			fmt.Fprintf(&b, " %*s", numW, cell)
		}
		for _, x := range []float64{row.VsNginx, row.VsHAProxy, row.VsDirect, row.VsShim} {
			fmt.Fprintf(&b, " %*s", ratioW, formatRatio(x))
		}
		verdict := row.Verdict
		if row.RoundsDecided > 0 {
			verdict += fmt.Sprintf(" (rounds: %d of %d met)", row.RoundsMet, row.RoundsDecided)
		}
		fmt.Fprintf(&b, "  %-26s %s\n", row.Target, verdict)
	}
	b.WriteString(`
How to read it: columns are the systems, each measured in this run on this
machine; q/X is qsplice's figure divided by X's. "shim" is the lab's back-end
reached at its own address: every frame crosses the shim untranslated, with no
front-end and no splice, so its CPU is the floor of the shim's I/O (a TAP read
and an AF_PACKET write per frame) and q/shim in a shim row is what splicing
adds to it. "proxy | front-end" rows put qsplice's front-end next to the whole
proxy (nginx: master and workers, HAProxy: all threads); "proxy | shim" puts
the back-end shim there. CPU is user+system time from /proc/PID/stat over the
wrk run (kernel work done in a process's syscalls and softirqs counts for it);
MB and GB are 10^6 and 10^9 bytes read by wrk. TTFB runs from before connect()
to the first response byte. Syscalls and allocations are counted with perf
(tracepoint raw_syscalls:sys_enter, uprobe on runtime.mallocgc) in a separate
window of bulk load, per frame read or written on any of the daemon's links
(its /status counters); they are the whole process's, and the notes give them
per second, under load and at rest. A veth delivers a frame on the sender's
CPU, so a process's CPU includes the receiving kernel's work on what it sent
(for the front-end and the proxies, on separate machines the receivers' CPU
does it): "share delivering own sends" is the
share of perf's samples of the process, in a separate window of the 1K close
load, in net_rx_action inside its own system calls, and "less delivery" the
CPU per request without that share. Other programs on the machine share its
CPUs, so the figures are noisy: compare ratios, rerun to be sure.
`)
	var notes []string
	for _, s := range r.Systems {
		for _, phase := range slices.Sorted(maps.Keys(s.Failures)) {
			notes = append(notes, fmt.Sprintf("%s %s FAILED: %s", s.Name, phase, firstLine(s.Failures[phase])))
		}
		for _, nr := range s.namedRounds() {
			r := nr.round
			for _, l := range []namedLoad{{"bulk" + nr.suffix, r.Bulk}, {"1K close" + nr.suffix, r.Small}} {
				if l.load != nil && l.load.Loops != nil {
					notes = append(notes, fmt.Sprintf("%s %s: front-end %v", s.Name, l.name, l.load.Loops))
				}
				if l.load != nil && l.load.ShimLoops != nil {
					notes = append(notes, fmt.Sprintf("%s %s: shim %v", s.Name, l.name, l.load.ShimLoops))
				}
				if l.load != nil && l.load.Wrk.Errors() > 0 {
					w := l.load.Wrk
					notes = append(notes, fmt.Sprintf("%s %s: %d of %d requests failed (connect %d, read %d, write %d, status %d, timeout %d)",
						s.Name, l.name, w.Errors(), w.Requests, w.ErrConnect, w.ErrRead, w.ErrWrite, w.ErrStatus, w.ErrTimeout))
				}
			}
			if t := r.TTFB; t != nil && t.FirstReplies.Responses > 0 {
				notes = append(notes, fmt.Sprintf("%s TTFB%s: %v", s.Name, nr.suffix, t.FirstReplies))
			}
		}
		for _, d := range s.Deliveries {
			if d.Error != "" {
				notes = append(notes, fmt.Sprintf("%s %s delivery share not sampled: %s", s.Name, d.Role, firstLine(d.Error)))
			} else {
				notes = append(notes, fmt.Sprintf("%s %s under the 1K close load: %d of %d samples delivering what it sent in %.1fs",
					s.Name, d.Role, d.Delivering, d.Samples, d.Seconds))
			}
		}
		for _, f := range s.Frames {
			if f.Error != "" {
				notes = append(notes, fmt.Sprintf("%s %s syscalls/allocs not counted: %s", s.Name, f.Process, firstLine(f.Error)))
				continue
			}
			if f.Frames == 0 {
				continue // the load failed before counting
			}
			notes = append(notes, fmt.Sprintf("%s %s under bulk load: %d frames, %d syscalls, %d allocations in %.1fs (%.0f syscalls/s, %.0f allocs/s; at rest %.0f/s and %.0f/s; counted once the earlier phases' connections were gone, %.1fs after they ended)",
				s.Name, f.Process, f.Frames, f.Syscalls, f.Mallocs, f.Seconds,
				perSec(f.Syscalls, f.Seconds), perSec(f.Mallocs, f.Seconds), f.IdleSyscallsPerSec, f.IdleMallocsPerSec, f.SettleSeconds))
			if f.Loops != nil {
				notes = append(notes, fmt.Sprintf("%s %s while counted: %v", s.Name, f.Process, f.Loops))
			}
		}
	}
	if len(notes) > 0 {
		b.WriteString("\nnotes:\n")
		for _, n := range notes {
			b.WriteString("  " + n + "\n")
		}
	}
	return b.String()
}

// namedLoad is a load with its name in the notes.
type namedLoad struct {
	name string
	load *Load
}

// namedRound is a round's figures with what its notes add to each
// phase's name.
type namedRound struct {
	suffix string
	round  *Round
}

// namedRounds are the system's rounds for the notes: every round's, or
// with one round the system's own figures, unnumbered.
func (s *SystemResult) namedRounds() []namedRound {
	if len(s.Rounds) == 0 {
		return []namedRound{{"", &Round{Bulk: s.Bulk, Small: s.Small, TTFB: s.TTFB}}}
	}
	var out []namedRound
	for k, r := range s.Rounds {
		out = append(out, namedRound{fmt.Sprintf(" (round %d)", k+1), r})
	}
	return out
}

// firstLine keeps a note to one line; result.json has the whole error.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func perSec(n uint64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(n) / secs
}

func formatRatio(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	if x >= 10 {
		return fmt.Sprintf("%.0fx", x)
	}
	if x < 0.01 && x > 0 {
		return fmt.Sprintf("%.1gx", x)
	}
	return fmt.Sprintf("%.2fx", x)
}
