package benchproxy

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The systems, in the order they are measured and shown.
const (
	SystemDirect  = "direct"  // the back-end's kernel, no proxy, no shim
	SystemNginx   = "nginx"   // nginx as an L7 reverse proxy
	SystemHAProxy = "haproxy" // HAProxy in HTTP mode
	// SystemShim is the lab's back-end reached at its own address: every
	// frame crosses the shim, untranslated, and no front-end takes part.
	// What the shim costs there is the floor of its I/O (a TAP read and
	// an AF_PACKET write per super-frame), the baseline of its CPU rows.
	SystemShim    = "shim"
	SystemQsplice = "qsplice" // the VIP: front-end + 1 back-end with the shim
)

// Systems lists every system in display order.
var Systems = []string{SystemDirect, SystemNginx, SystemHAProxy, SystemShim, SystemQsplice}

// The processes whose CPU is measured, by role.
const (
	RoleProxy    = "proxy"    // nginx or HAProxy, all its processes
	RoleFrontend = "frontend" // qsplice-frontend
	RoleShim     = "shim"     // qsplice-backend on the back-end
)

// Result is one run: its settings and every system's figures. It is
// written as result.json; the table is computed from it.
type Result struct {
	// ID names the run's namespaces (qs-bpID-*, qsbp-ID-*) and perf
	// probe group (qsbpID).
	ID       string    `json:"run_id"`
	Started  time.Time `json:"started"`
	Host     Host      `json:"host"`
	Settings Settings  `json:"settings"`
	// LinkOffloads are the qsplice lab's link offloads, given to the
	// proxy chain's links too.
	LinkOffloads Offloads        `json:"link_offloads"`
	Systems      []*SystemResult `json:"systems"`
}

// Host says where the run happened.
type Host struct {
	CPUs   int    `json:"cpus"`
	Kernel string `json:"kernel"`
}

// Settings are the loads as run.
type Settings struct {
	BulkSize        int64   `json:"bulk_size_bytes"`
	BulkConns       int     `json:"bulk_connections"`
	SmallSize       int64   `json:"small_size_bytes"`
	SmallConns      int     `json:"small_connections"`
	LoadSeconds     float64 `json:"load_seconds"`
	TTFBRequests    int     `json:"ttfb_requests"`
	FrameWindowSecs float64 `json:"frame_window_seconds"`
	// Rounds is how many times every load ran for every system.
	Rounds int `json:"rounds"`
	// Workers is the qsplice daemons' -workers (0: their default, one
	// per CPU).
	Workers int `json:"workers"`
	// FrontendArgs and BackendArgs are the daemons' extra flags.
	FrontendArgs []string `json:"frontend_args,omitempty"`
	BackendArgs  []string `json:"backend_args,omitempty"`
	// FreshUpstream: nginx-as-proxy opened a new upstream connection per
	// request (Options.FreshUpstream) instead of reusing kept-alive ones.
	FreshUpstream bool `json:"nginx_fresh_upstream,omitempty"`
}

// SystemResult is one system's figures; a nil part was not measured.
type SystemResult struct {
	Name string `json:"name"`
	// Bulk, Small and TTFB are the loads' figures; with several rounds,
	// each is that of the round with the median headline figure (MB/s,
	// requests/s, p50), and the table takes every figure's median over
	// Rounds instead.
	Bulk  *Load `json:"bulk,omitempty"`  // large objects, keep-alive
	Small *Load `json:"small,omitempty"` // small objects, one connection per request
	TTFB  *TTFB `json:"ttfb,omitempty"`
	// Rounds are every round's figures, in the order they ran (only
	// when there were several).
	Rounds []*Round `json:"rounds,omitempty"`
	// Frames are qsplice's per-frame costs, one per daemon.
	Frames []*FrameCost `json:"frame_costs,omitempty"`
	// Deliveries are, per process role, the share of its CPU under the
	// 1K close load spent delivering the frames it sent (delivery.go),
	// sampled once after the rounds.
	Deliveries []*Delivery `json:"deliveries,omitempty"`
	// Failures are the measurements that failed, by phase ("bulk",
	// "1K close", "TTFB", "frame costs"), with the error.
	Failures map[string]string `json:"failures,omitempty"`
}

// Round is one round of a system's loads; a nil part was not measured.
type Round struct {
	Bulk  *Load `json:"bulk,omitempty"`
	Small *Load `json:"small,omitempty"`
	TTFB  *TTFB `json:"ttfb,omitempty"`
}

// setRounds keeps a system's rounds and picks, for each load, the round
// whose headline figure is the median (the lower middle one of an even
// count) as the system's own.
func (s *SystemResult) setRounds(rounds []*Round) {
	if len(rounds) == 1 {
		s.Bulk, s.Small, s.TTFB = rounds[0].Bulk, rounds[0].Small, rounds[0].TTFB
		return
	}
	s.Rounds = rounds
	s.Bulk = medianOf(rounds, func(r *Round) *Load { return r.Bulk }, func(l *Load) float64 { return l.MBPerSec })
	s.Small = medianOf(rounds, func(r *Round) *Load { return r.Small }, func(l *Load) float64 { return l.RequestsPerSec })
	s.TTFB = medianOf(rounds, func(r *Round) *TTFB { return r.TTFB }, func(t *TTFB) float64 { return t.P50us })
}

func medianOf[T any](rounds []*Round, part func(*Round) *T, headline func(*T) float64) *T {
	var have []*T
	for _, r := range rounds {
		if p := part(r); p != nil {
			have = append(have, p)
		}
	}
	if len(have) == 0 {
		return nil
	}
	slices.SortStableFunc(have, func(a, b *T) int { return cmp.Compare(headline(a), headline(b)) })
	return have[(len(have)-1)/2]
}

func (s *SystemResult) delivery(role string) *Delivery {
	for _, d := range s.Deliveries {
		if d.Role == role {
			return d
		}
	}
	return nil
}

func (s *SystemResult) frameCost(process string) *FrameCost {
	for _, f := range s.Frames {
		if f.Process == process {
			return f
		}
	}
	return nil
}

// Load is one wrk run and the CPU its system's processes spent meanwhile.
type Load struct {
	Wrk        WrkSummary         `json:"wrk"`
	CPUSeconds map[string]float64 `json:"cpu_seconds"` // by role
	// Derived figures, for readers of the JSON.
	MBPerSec        float64            `json:"mb_per_s"` // 10^6 bytes
	RequestsPerSec  float64            `json:"requests_per_s"`
	CPUSecondsPerGB map[string]float64 `json:"cpu_seconds_per_gb"` // 10^9 bytes
	CPUUSPerRequest map[string]float64 `json:"cpu_us_per_request"`
	// Loops and ShimLoops are how qsplice's front-end and shim ran their
	// workers during the load (qsplice only; nil if a daemon's /status
	// could not be read).
	Loops     *Loops `json:"frontend_loops,omitempty"`
	ShimLoops *Loops `json:"shim_loops,omitempty"`
}

// Loops is how a daemon's workers served its shards during a load (the
// daemons' -gather): how many shards, how often worker 0 took them all
// (gathered) or gave them back (spread), and whether it served them all
// when the load ended.
type Loops struct {
	Shards        int    `json:"shards"`
	Gathers       uint64 `json:"gathers"`
	Spreads       uint64 `json:"spreads"`
	GatheredAtEnd bool   `json:"gathered_at_end"`
}

// String says it in a few words for the notes.
func (l *Loops) String() string {
	switch {
	case l.Shards < 2:
		return "one worker"
	case l.Gathers == 0 && l.Spreads == 0 && l.GatheredAtEnd:
		return fmt.Sprintf("%d shards, all on worker 0 throughout", l.Shards)
	case l.Gathers == 0 && l.Spreads == 0:
		return fmt.Sprintf("%d shards, one worker each throughout", l.Shards)
	}
	end := "one worker each"
	if l.GatheredAtEnd {
		end = "all on worker 0"
	}
	return fmt.Sprintf("%d shards, gathered on worker 0 %s and spread %s; %s at the end", l.Shards, times(l.Gathers), times(l.Spreads), end)
}

func times(n uint64) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

func newLoad(w WrkSummary, cpu map[string]time.Duration) *Load {
	l := &Load{Wrk: w, CPUSeconds: map[string]float64{},
		CPUSecondsPerGB: map[string]float64{}, CPUUSPerRequest: map[string]float64{}}
	secs := w.Duration.Seconds()
	l.MBPerSec = float64(w.Bytes) / 1e6 / secs
	l.RequestsPerSec = float64(w.Requests) / secs
	for role, d := range cpu {
		l.CPUSeconds[role] = d.Seconds()
		if w.Bytes > 0 {
			l.CPUSecondsPerGB[role] = d.Seconds() / (float64(w.Bytes) / 1e9)
		}
		if w.Requests > 0 {
			l.CPUUSPerRequest[role] = d.Seconds() * 1e6 / float64(w.Requests)
		}
	}
	return l
}

// FrameCost is one daemon's system calls and heap allocations per frame
// during bulk load, counted with perf (see perf.go). Frames are those the
// daemon read or wrote on any of its links, from its /status counters.
type FrameCost struct {
	Process string  `json:"process"` // RoleFrontend or RoleShim
	Seconds float64 `json:"window_seconds"`
	// Frames is the estimate for the window: FramesRead moved between
	// two readings of /status SpanSeconds apart, scaled to the window.
	Frames      uint64  `json:"frames"`
	FramesRead  uint64  `json:"frames_between_readings"`
	SpanSeconds float64 `json:"readings_span_seconds"`
	Syscalls    uint64  `json:"syscalls"`
	Mallocs     uint64  `json:"mallocs"`
	// SettleSeconds is how long the connections of the earlier phases
	// took to go (their linger ends) before the load began; the count is
	// of the bulk load alone (frameCounter.settle).
	SettleSeconds float64 `json:"settle_seconds"`
	// The same counts at rest, with no load, per second.
	IdleSyscallsPerSec float64 `json:"idle_syscalls_per_s"`
	IdleMallocsPerSec  float64 `json:"idle_mallocs_per_s"`
	// Loops is how the daemon's workers served its shards during the
	// window (nil if its /status could not be read).
	Loops *Loops `json:"loops,omitempty"`
	// Derived.
	SyscallsPerFrame float64 `json:"syscalls_per_frame"`
	MallocsPerFrame  float64 `json:"mallocs_per_frame"`
	// Error says why the costs could not be counted (perf missing, ...).
	Error string `json:"error,omitempty"`
}

func (f *FrameCost) derive() {
	if f.Frames > 0 {
		f.SyscallsPerFrame = float64(f.Syscalls) / float64(f.Frames)
		f.MallocsPerFrame = float64(f.Mallocs) / float64(f.Frames)
	}
}

func (r *Result) system(name string) *SystemResult {
	for _, s := range r.Systems {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// WriteFiles writes result.json, table.txt and the plot (PlotFile, PNG
// and SVG) into dir.
func (r *Result) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "table.txt"), []byte(r.Table()), 0o644); err != nil {
		return err
	}
	return r.WritePlot(filepath.Join(dir, PlotFile))
}
