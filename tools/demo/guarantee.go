package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/tools/lab"
	"github.com/qsplice/qsplice/tools/loadgen"
)

// Customer is one customer of the guaranteed-rates scenario.
type Customer struct {
	Name        string
	Reservation float64 // req/s
	// Service overrides the test server's service time for this
	// customer's requests (?service=), e.g. 40ms for "C takes twice as
	// long"; 0 keeps the server's default.
	Service time.Duration
	Weight  float64
}

// Published is the scenario of the guaranteed-rates paper as
// docs/architecture.md §6 gives it: 5 back-ends x 5 concurrent, 20 ms
// typical service time (1250 req/s), customers A 500, B 100, C 400, D 150
// req/s.
var Published = []Customer{{Name: "A", Reservation: 500}, {Name: "B", Reservation: 100}, {Name: "C", Reservation: 400}, {Name: "D", Reservation: 150}}

// GuaranteeConfig says how to run the scenario.
type GuaranteeConfig struct {
	Customers    []Customer
	Backends     int           // 5
	Capacity     int           // 5 concurrent requests per back-end
	ServiceTime  time.Duration // 20 ms
	Offer        float64       // each customer offers Offer x its reservation (2)
	Duration     time.Duration // measured (30 s)
	Warmup       time.Duration // 2 s
	QueueTimeout time.Duration // 300 ms: how long a request may wait before 503
	// Scale multiplies every rate and divides the service time, keeping
	// the published utilisations (1 = the published figures). On a 2-core
	// lab host, 2300 new connections a second through five shims, a
	// front-end and the load generator saturate the CPU, and the per-request
	// handoff then takes long enough to eat into the back-ends' capacity;
	// at 0.3 every customer gets its reservation (see the README).
	Scale float64
	// Flood names a customer that offers FloodFactor x its reservation
	// instead of Offer x.
	Flood       string
	FloodFactor float64 // 10
	// FrontendArgs are extra qsplice-frontend flags (-cpuprofile, -log-level).
	FrontendArgs []string
	// HandoffAhead sets the front-end's backends.handoff_ahead; nil
	// keeps the configuration default.
	HandoffAhead *int
	// Progress gets a line as each stage starts, with the time left
	// (stages.go); nil: none. BeforeLabel names what RunGuarantee's
	// before function does, for its line.
	Progress    io.Writer
	BeforeLabel string

	now func() time.Time // the progress lines' clock; nil: time.Now (tests)
}

// GuaranteeResult is the per-customer outcome, one row per customer.
type GuaranteeResult struct {
	Rows     []GuaranteeRow
	Frontend frontend.Status
	Load     *loadgen.Result
}

// GuaranteeRow is one customer's line in the table.
type GuaranteeRow struct {
	Name                             string
	Reservation, Offered             float64 // req/s
	Served                           float64 // 2xx/s
	Attainment                       float64 // Served / Reservation
	P50, P99                         time.Duration
	Rejected503, Rejected429, Errors int64
	Charged                          float64 // credits charged by the front-end
	FrontendRejects                  map[string]uint64
}

func (g *GuaranteeConfig) defaults() {
	if g.Customers == nil {
		g.Customers = Published
	}
	if g.Backends == 0 {
		g.Backends = 5
	}
	if g.Capacity == 0 {
		g.Capacity = 5
	}
	if g.ServiceTime == 0 {
		g.ServiceTime = 20 * time.Millisecond
	}
	if g.Offer == 0 {
		g.Offer = 2
	}
	if g.Duration == 0 {
		g.Duration = 30 * time.Second
	}
	if g.Warmup == 0 {
		g.Warmup = 2 * time.Second
	}
	if g.QueueTimeout == 0 {
		g.QueueTimeout = 300 * time.Millisecond
	}
	if g.FloodFactor == 0 {
		g.FloodFactor = 10
	}
	if g.Scale == 0 {
		g.Scale = 1
	}
	if g.Scale != 1 {
		scaled := make([]Customer, len(g.Customers))
		for i, c := range g.Customers {
			c.Reservation *= g.Scale
			if c.Service > 0 {
				c.Service = time.Duration(float64(c.Service) / g.Scale)
			}
			scaled[i] = c
		}
		g.Customers = scaled
		g.ServiceTime = time.Duration(float64(g.ServiceTime) / g.Scale)
		g.Scale = 1
	}
}

func host(c Customer) string { return strings.ToLower(c.Name) + ".example" }

// RunGuarantee builds a lab for the scenario, offers the load with
// qsplice-load from the client namespace, and returns the table. The lab
// is torn down before it returns unless keep is set.
func RunGuarantee(ctx context.Context, name, binDir string, g GuaranteeConfig, keep bool, w io.Writer, before func(*lab.Lab) error) (res GuaranteeResult, err error) {
	g.defaults()
	tmp, err := lab.SharedTempDir("qsplice-guarantee-") // the daemons read its files
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	lc := lab.DefaultConfig(name)
	lc.Backends, lc.Capacity, lc.ServiceTime = g.Backends, g.Capacity, g.ServiceTime
	lc.BinDir = binDir
	lc.Nginx = false
	lc.Files = nil
	lc.FrontendConfig = filepath.Join(tmp, "frontend.yaml")
	lc.FrontendArgs = g.FrontendArgs
	var lcs []lab.Customer
	for _, c := range g.Customers {
		lcs = append(lcs, lab.Customer{Name: c.Name, Domains: []string{host(c)}, Reservation: c.Reservation, Weight: c.Weight})
	}
	y := lab.FrontendYAML(lc.StateDir, g.Backends, g.Capacity, lcs,
		fmt.Sprintf("  typical_service_time: %v", g.ServiceTime),
		fmt.Sprintf("  queue_timeout: %v", g.QueueTimeout))
	if g.HandoffAhead != nil {
		y = lab.SetBackendsOption(y, "handoff_ahead", strconv.Itoa(*g.HandoffAhead))
	}
	if err := os.WriteFile(lc.FrontendConfig, []byte(y), 0o644); err != nil {
		return res, err
	}
	out := filepath.Join(tmp, "load.json")
	args, offered := g.loadArgs(binDir, out)
	st := g.stages(name, before != nil, offered, keep)
	p := st.progress(g.Progress, g.now)
	defer p.Done()

	p.Step(st.lab.label, st.lab.weight)
	l, err := lab.Up(ctx, lc)
	if err != nil {
		return res, err
	}
	defer func() {
		p.Step(st.end.label, st.end.weight)
		if keep {
			fmt.Fprintf(w, "== lab %q left up; remove it with: qsplice-lab down -name %s\n", name, name)
			return
		}
		if derr := l.Down(); derr != nil && err == nil {
			err = derr
		}
	}()

	if before != nil {
		p.Step(st.before.label, st.before.weight)
		if err := before(l); err != nil {
			return res, err
		}
	}
	cmd := l.Command("c1", args...)
	cmd.Stderr = w
	stop := make(chan struct{})
	stepped := make(chan struct{})
	go func() { defer close(stepped); stepLoad(p, st.load, stop) }()
	b, err := cmd.Output()
	close(stop)
	<-stepped
	if err != nil {
		return res, fmt.Errorf("qsplice-load: %v\n%s", err, b)
	}
	if b, err = os.ReadFile(out); err != nil {
		return res, err
	}
	res.Load = &loadgen.Result{}
	if err := json.Unmarshal(b, res.Load); err != nil {
		return res, err
	}
	// Feedback follows each response by at most the shim's quiet period.
	time.Sleep(200 * time.Millisecond)
	if res.Frontend, err = status(ctx, l); err != nil {
		return res, err
	}
	res.Rows = g.rows(res.Load, res.Frontend)
	return res, nil
}

// loadArgs is the qsplice-load command line of the scenario, writing its
// result to out, and the rate it offers in all.
func (g *GuaranteeConfig) loadArgs(binDir, out string) ([]string, float64) {
	args := []string{filepath.Join(binDir, "qsplice-load"), "-target", fmt.Sprintf("http://%s:8080", lab.VIP),
		"-duration", g.Duration.String(), "-warmup", g.Warmup.String(), "-timeout", "5s", "-json", out, "-progress=false"}
	var offered float64
	for _, c := range g.Customers {
		path := "/data/1K"
		if c.Service > 0 {
			path += "?service=" + c.Service.String()
		}
		rate := c.Reservation * g.Offer
		if c.Name == g.Flood {
			rate = c.Reservation * g.FloodFactor
		}
		offered += rate
		args = append(args, "-stream", fmt.Sprintf("name=%s,host=%s,rate=%g,path=%s", c.Name, host(c), rate, path))
	}
	return args, offered
}

// rows are the table's lines: each customer's load result beside what
// the front-end says of it.
func (g *GuaranteeConfig) rows(load *loadgen.Result, st frontend.Status) []GuaranteeRow {
	fe := map[string]frontend.CustomerStatus{}
	for _, c := range st.Customers {
		fe[c.Name] = c
	}
	var rows []GuaranteeRow
	for _, c := range g.Customers {
		for _, s := range load.Streams {
			if s.Name != c.Name {
				continue
			}
			row := GuaranteeRow{
				Name: c.Name, Reservation: c.Reservation, Offered: float64(s.Offered) / load.MeasuredS,
				Served: s.ThroughputOK, P50: ms2d(s.Latency.P50Ms), P99: ms2d(s.Latency.P99Ms),
				Rejected503: s.Completed.ServiceUnavailable, Rejected429: s.Completed.TooManyRequests,
				Errors: s.Errors.Total(), Charged: fe[c.Name].Charged, FrontendRejects: fe[c.Name].Rejected,
			}
			if c.Reservation > 0 {
				row.Attainment = row.Served / c.Reservation
			}
			rows = append(rows, row)
		}
	}
	return rows
}

func ms2d(ms float64) time.Duration { return time.Duration(ms * 1e6) }

// PrintGuarantee writes the per-customer table.
func PrintGuarantee(w io.Writer, res GuaranteeResult) {
	fmt.Fprintf(w, "\n== per customer (rates over the measured window; latency from the intended send time)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "customer\treservation\toffered\tserved\tattainment\tp50 ms\tp99 ms\t503\t429\terrors\tcharged credits\tfront-end rejects\t")
	for _, r := range res.Rows {
		var rej []string
		for reason, n := range r.FrontendRejects {
			rej = append(rej, fmt.Sprintf("%s=%d", reason, n))
		}
		sort.Strings(rej)
		fmt.Fprintf(tw, "%s\t%.0f/s\t%.0f/s\t%.1f/s\t%.1f%%\t%.1f\t%.1f\t%d\t%d\t%d\t%.0f\t%s\t\n",
			r.Name, r.Reservation, r.Offered, r.Served, 100*r.Attainment, ms(r.P50), ms(r.P99),
			r.Rejected503, r.Rejected429, r.Errors, r.Charged, strings.Join(rej, " "))
	}
	tw.Flush()
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
