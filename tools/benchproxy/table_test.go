package benchproxy

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sampleResult is a run with the figures of issue 7's table, plus a
// direct path and frame costs.
func sampleResult() *Result {
	load := func(mbps float64, requests int64, cpu map[string]time.Duration) *Load {
		secs := 10.0
		return newLoad(WrkSummary{Requests: requests, Bytes: int64(mbps * 1e6 * secs), Duration: 10 * time.Second}, cpu)
	}
	// CPU seconds for 10 s of bulk: s/GB x GB moved.
	cpuFor := func(mbps, perGB float64) time.Duration {
		return time.Duration(perGB * mbps * 10 / 1000 * float64(time.Second))
	}
	cpuPerReq := func(rate, us float64) time.Duration {
		return time.Duration(us * rate * 10 * float64(time.Microsecond))
	}
	return &Result{
		Started: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
		Host:    Host{CPUs: 2, Kernel: "6.1"},
		Settings: Settings{BulkSize: 10 << 20, BulkConns: 8, SmallSize: 1024, SmallConns: 16,
			LoadSeconds: 10, TTFBRequests: 2000, FrameWindowSecs: 5},
		Systems: []*SystemResult{
			{Name: SystemDirect, Bulk: load(2000, 1900, nil), Small: load(1, 300000, nil),
				TTFB: &TTFB{Samples: 2000, P50us: 433, P99us: 900}},
			{Name: SystemNginx, Bulk: load(924, 880, map[string]time.Duration{RoleProxy: cpuFor(924, 1.08)}),
				Small: load(1, 254000, map[string]time.Duration{RoleProxy: cpuPerReq(25400, 28)}),
				TTFB:  &TTFB{Samples: 2000, P50us: 500, P99us: 1000}},
			{Name: SystemHAProxy, Bulk: load(1670, 1600, map[string]time.Duration{RoleProxy: cpuFor(1670, 0.75)}),
				Small: load(1, 72000, map[string]time.Duration{RoleProxy: cpuPerReq(7200, 60)}),
				TTFB:  &TTFB{Samples: 2000, P50us: 520, P99us: 1100}},
			{Name: SystemShim, Bulk: load(130, 124, map[string]time.Duration{RoleShim: cpuFor(130, 7.5)}),
				Small: load(1, 60000, map[string]time.Duration{RoleShim: cpuPerReq(6000, 100)}),
				TTFB:  &TTFB{Samples: 2000, P50us: 600, P99us: 1500}},
			{Name: SystemQsplice,
				Bulk: load(122, 116, map[string]time.Duration{RoleFrontend: cpuFor(122, 3.0), RoleShim: cpuFor(122, 8.2)}),
				Small: load(1, 59000, map[string]time.Duration{
					RoleFrontend: cpuPerReq(5900, 105), RoleShim: cpuPerReq(5900, 128)}),
				TTFB: &TTFB{Samples: 2000, P50us: 829, P99us: 3000},
				Frames: []*FrameCost{
					{Process: RoleFrontend, Frames: 1000, Syscalls: 50, Mallocs: 0, Loops: &Loops{Shards: 2, GatheredAtEnd: true}},
					{Process: RoleShim, Error: "perf is not installed"},
				}},
		},
	}
}

func TestRowsRatiosAndVerdicts(t *testing.T) {
	r := sampleResult()
	for _, s := range r.Systems {
		for _, f := range s.Frames {
			f.derive()
		}
	}
	rows := r.Rows()
	byFigure := map[string]Row{}
	for _, row := range rows {
		byFigure[row.Figure] = row
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }
	nan := math.NaN()
	// The shim alone has a value in throughput, time to first byte and
	// its own CPU rows; none in the front-end's or the sums.
	cases := []struct {
		figure                       string
		q, vsNginx, vsDirect, vsShim float64 // NaN: none
		verdict                      string
	}{
		{"bulk: throughput, MB/s", 122, 122.0 / 924, 122.0 / 2000, 122.0 / 130, "NOT met"},
		{"bulk: CPU-s/GB, proxy | front-end", 3.0, 3.0 / 1.08, nan, nan, "NOT met"},
		{"bulk: CPU-s/GB, proxy | shim", 8.2, 8.2 / 1.08, nan, 8.2 / 7.5, "NOT met"},
		{"bulk: CPU-s/GB, proxy | front-end+shim", 11.2, 11.2 / 1.08, nan, nan, ""},
		{"1K close: requests/s", 5900, 5900.0 / 25400, 5900.0 / 30000, 5900.0 / 6000, ""},
		{"1K close: CPU-us/req, proxy | front-end", 105, 105.0 / 28, nan, nan, "NOT met"},
		{"1K close: CPU-us/req, proxy | shim", 128, 128.0 / 28, nan, 128.0 / 100, ""},
		{"TTFB 1K new conn: p50 us", 829, 829.0 / 500, 829.0 / 433, 829.0 / 600, "NOT met"},
		{"bulk: syscalls/frame, front-end", 0.05, nan, nan, nan, "met"},
		{"bulk: allocs/frame, front-end", 0, nan, nan, nan, "met"},
	}
	for _, c := range cases {
		row, ok := byFigure[c.figure]
		if !ok {
			t.Errorf("no row %q", c.figure)
			continue
		}
		if q := row.Values[SystemQsplice]; !near(q, c.q) {
			t.Errorf("%s: qsplice %v, want %v", c.figure, q, c.q)
		}
		for _, x := range []struct {
			name      string
			got, want float64
		}{{"vs nginx", row.VsNginx, c.vsNginx}, {"vs direct", row.VsDirect, c.vsDirect}, {"vs shim", row.VsShim, c.vsShim}} {
			if math.IsNaN(x.want) != math.IsNaN(x.got) || !math.IsNaN(x.want) && !near(x.got, x.want) {
				t.Errorf("%s: %s %v, want %v", c.figure, x.name, x.got, x.want)
			}
		}
		if row.Verdict != c.verdict {
			t.Errorf("%s: verdict %q, want %q", c.figure, row.Verdict, c.verdict)
		}
	}
	// The shim's frame costs were not counted: no value, verdict n/a.
	if row := byFigure["bulk: syscalls/frame, shim"]; row.Verdict != "n/a" || len(row.Values) != 0 {
		t.Errorf("uncounted shim row: %+v", row)
	}
}

func TestVerdictsWhenMet(t *testing.T) {
	r := sampleResult()
	q := r.system(SystemQsplice)
	q.Bulk = newLoad(WrkSummary{Requests: 1, Bytes: 1700e7, Duration: 10 * time.Second},
		map[string]time.Duration{RoleFrontend: 1 * time.Second, RoleShim: 2 * time.Second}) // 0.06 and 0.12 s/GB
	q.Small.CPUUSPerRequest[RoleFrontend] = 27
	q.TTFB.P50us = 633 // direct + 200
	for _, row := range r.Rows() {
		if row.Target != "" && !strings.Contains(row.Figure, "/frame") && row.Verdict != "met" {
			t.Errorf("%s: %q with qsplice %v", row.Figure, row.Verdict, row.Values[SystemQsplice])
		}
	}
}

func TestTableAndFiles(t *testing.T) {
	r := sampleResult()
	q := r.system(SystemQsplice)
	q.Small.Wrk.ErrRead = 7
	r.system(SystemHAProxy).Failures = map[string]string{"TTFB": "request 3 to x: connection reset\nmore detail"}
	q.Bulk.Loops = &Loops{Shards: 2, GatheredAtEnd: true}
	q.Bulk.ShimLoops = &Loops{Shards: 2, Gathers: 1, Spreads: 1}
	q.Small.Loops = &Loops{Shards: 2, Gathers: 3, Spreads: 2, GatheredAtEnd: true}
	table := r.Table()
	for _, want := range []string{
		"bulk: throughput, MB/s", "122", "924", "1670", "0.13x", "<=0.1x nginx", "NOT met",
		"shim", "q/shim", "1.09x", // the spliced shim's CPU per GB over the shim's alone
		"qsplice 1K close: 7 of 59000 requests failed", "shim syscalls/allocs not counted: perf is not installed",
		"link offloads: tx off, tso off, gso off, gro off",
		"haproxy TTFB FAILED: request 3 to x: connection reset\n",
		"qsplice bulk: front-end 2 shards, all on worker 0 throughout\n",
		"qsplice frontend while counted: 2 shards, all on worker 0 throughout\n",
		"qsplice bulk: shim 2 shards, gathered on worker 0 once and spread once; one worker each at the end\n",
		"qsplice 1K close: front-end 2 shards, gathered on worker 0 3 times and spread 2 times; all on worker 0 at the end\n",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	dir := t.TempDir()
	if err := r.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if got := back.system(SystemNginx).Bulk.CPUSecondsPerGB[RoleProxy]; math.Abs(got-1.08) > 1e-3 {
		t.Errorf("nginx CPU-s/GB in the JSON = %v, want 1.08", got)
	}
	if back.Table() != table {
		t.Error("the table of the JSON's result differs from the original's")
	}
}

// The note on a daemon's workers says what the counters of one load
// mean, for each way a load can go.
func TestLoopsNote(t *testing.T) {
	for _, c := range []struct {
		l    Loops
		want string
	}{
		{Loops{Shards: 1}, "one worker"},
		{Loops{Shards: 2, GatheredAtEnd: true}, "2 shards, all on worker 0 throughout"},
		{Loops{Shards: 3}, "3 shards, one worker each throughout"},
		{Loops{Shards: 2, Gathers: 1}, "2 shards, gathered on worker 0 once and spread 0 times; one worker each at the end"},
	} {
		if got := c.l.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.l, got, c.want)
		}
	}
	before := &Loops{Shards: 2, Gathers: 5, Spreads: 4}
	after := &Loops{Shards: 2, Gathers: 7, Spreads: 4, GatheredAtEnd: true}
	if got := *after.since(before); got != (Loops{Shards: 2, Gathers: 2, GatheredAtEnd: true}) {
		t.Errorf("since = %+v", got)
	}
}

// The first-byte note says how often the kernel echoed a response's
// first reply, per round, from the shim's counters before and after.
func TestFirstRepliesNote(t *testing.T) {
	before := FirstReplies{Responses: 100, Echoed: 40}
	after := FirstReplies{Responses: 140, Echoed: 70}
	if got := after.since(before); got != (FirstReplies{Responses: 40, Echoed: 30}) {
		t.Fatalf("since = %+v", got)
	}
	r := &Result{Systems: []*SystemResult{{Name: SystemQsplice}}}
	r.Systems[0].setRounds([]*Round{
		{TTFB: &TTFB{Samples: 10, P50us: 300}},
		{TTFB: &TTFB{Samples: 10, P50us: 310, FirstReplies: after.since(before)}},
	})
	table := r.Table()
	want := "qsplice TTFB (round 2): the kernel echoed the first reply of 30 of 40 responses (75%)"
	if !strings.Contains(table, want) {
		t.Errorf("the table's notes lack %q:\n%s", want, table)
	}
	if strings.Contains(table, "TTFB (round 1): the kernel") {
		t.Errorf("a round without counts has a note:\n%s", table)
	}
}

func TestPercentile(t *testing.T) {
	var samples []time.Duration
	for i := 100; i >= 1; i-- {
		samples = append(samples, time.Duration(i)*time.Microsecond)
	}
	s := summarizeTTFB(samples)
	if s.Samples != 100 || s.P50us != 50 || s.P99us != 99 || s.MeanUS != 50.5 {
		t.Errorf("got %+v", s)
	}
	if one := summarizeTTFB([]time.Duration{7 * time.Microsecond}); one.P50us != 7 || one.P99us != 7 {
		t.Errorf("one sample: %+v", one)
	}
}

// With several rounds every figure is its median over the rounds, the
// verdict the median's, and the rounds that met a target on their own
// figures are counted: here the front-end's CPU per request meets
// nginx's in two rounds of three, the median (26 against 28) meets it,
// and the time to first byte misses direct + 200 in every round.
func TestRoundsMediansAndRoundVerdicts(t *testing.T) {
	feUS := []float64{26, 31, 20}    // nginx: 28 in every round
	ttfb := []float64{700, 829, 650} // direct: 433
	var rounds [][]*Round            // by system
	for _, s := range sampleResult().Systems {
		var rs []*Round
		for k := range feUS {
			one := sampleResult().system(s.Name)
			if s.Name == SystemQsplice {
				one.Small.CPUUSPerRequest[RoleFrontend] = feUS[k]
				one.TTFB.P50us = ttfb[k]
				one.Bulk.MBPerSec = float64(100 + k)
			}
			rs = append(rs, &Round{Bulk: one.Bulk, Small: one.Small, TTFB: one.TTFB})
		}
		rounds = append(rounds, rs)
	}
	r := sampleResult()
	r.Settings.Rounds = 3
	for _, f := range r.system(SystemQsplice).Frames {
		f.derive()
	}
	for i, s := range r.Systems {
		s.setRounds(rounds[i])
	}
	q := r.system(SystemQsplice)
	if len(q.Rounds) != 3 || q.TTFB.P50us != 700 || q.Bulk.MBPerSec != 101 {
		t.Fatalf("setRounds: %d rounds, TTFB of the median round %v (want 700), bulk %v (want 101)", len(q.Rounds), q.TTFB.P50us, q.Bulk.MBPerSec)
	}
	byFigure := map[string]Row{}
	for _, row := range r.Rows() {
		byFigure[row.Figure] = row
	}
	for _, c := range []struct {
		figure       string
		q            float64
		verdict      string
		met, decided int
	}{
		{"1K close: CPU-us/req, proxy | front-end", 26, "met", 2, 3},
		{"TTFB 1K new conn: p50 us", 700, "NOT met", 0, 3},
		{"bulk: throughput, MB/s", 101, "NOT met", 0, 3},
		// Counted once, in no round: no round verdicts.
		{"bulk: syscalls/frame, front-end", 0.05, "met", 0, 0},
	} {
		row := byFigure[c.figure]
		if got := row.Values[SystemQsplice]; got != c.q || row.Verdict != c.verdict || row.RoundsMet != c.met || row.RoundsDecided != c.decided {
			t.Errorf("%s: qsplice %v, %q, %d of %d rounds met; want %v, %q, %d of %d",
				c.figure, got, row.Verdict, row.RoundsMet, row.RoundsDecided, c.q, c.verdict, c.met, c.decided)
		}
	}
	table := r.Table()
	for _, want := range []string{"3 rounds, the systems taking turns", "met (rounds: 2 of 3 met)", "NOT met (rounds: 0 of 3 met)"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median of an even count = %v, want 2.5", got)
	}
}

// TestSmallLatencyP99Row: the 1K close load's p99 is wrk's, in
// milliseconds; a result written before wrk's percentiles were recorded
// has no value in that row rather than a zero.
func TestSmallLatencyP99Row(t *testing.T) {
	withP99 := &SystemResult{Name: SystemQsplice, Small: &Load{Wrk: WrkSummary{LatencyP99: 1050 * time.Millisecond}}}
	if v, ok := smallP99(withP99); !ok || v != 1050 {
		t.Errorf("p99 of 1.05 s: %v %v, want 1050 ms", v, ok)
	}
	for _, s := range []*SystemResult{{Name: SystemNginx, Small: &Load{}}, {Name: SystemDirect}} {
		if v, ok := smallP99(s); ok {
			t.Errorf("%s without a p99: value %v", s.Name, v)
		}
	}
}
