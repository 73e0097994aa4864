package experiment

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/conf"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/loadgen"
	"github.com/qsplice/qsplice/tools/session"
	"github.com/qsplice/qsplice/tools/testserver"
)

func halfScaleLab() LabConfig {
	cfg := DefaultLabConfig()
	cfg.TimeScale = 0.5
	cfg.Warmup, cfg.Duration = 30*time.Second, 60*time.Second
	return cfg
}

// Every time of the model is scaled the same way, and what the lab
// starts reads back as the model in lab time.
func TestLabScalesTheModel(t *testing.T) {
	cfg := halfScaleLab()
	args := cfg.testServerArgs()
	if len(args) != 2 || args[0] != "-shop-service" {
		t.Fatalf("test server args %q", args)
	}
	means, err := testserver.ParseShopService(args[1])
	if err != nil {
		t.Fatal(err)
	}
	for p, d := range cfg.Base.ServiceMean {
		if means[p] != d/2 {
			t.Errorf("%v: lab mean %v, want half of %v", session.Stage(p), means[p], d)
		}
	}

	sp, err := loadgen.ParseSessions(cfg.sessionsSpec(1.4))
	if err != nil {
		t.Fatal(err)
	}
	sim := cfg.SimConfig(sched.ModeLifoPri, 1.4)
	if math.Abs(sp.Rate-2*sim.SessionRate()) > 1e-6 {
		t.Errorf("session rate %v, want twice the simulator's %v", sp.Rate, sim.SessionRate())
	}
	m := sp.Model
	if m.ThinkMean != 3500*time.Millisecond || m.TimeoutMean != 4*time.Second || m.Retries != 2 ||
		m.AbandonProb != 0.5 || !sp.LeaveOnRefusal || m.Transitions != cfg.Base.Model.Transitions {
		t.Errorf("sessions %+v, want the model at half time, leaving on refusals", sp)
	}

	if sim.Warmup != 60*time.Second || sim.Duration != 180*time.Second || sim.Seed != cfg.Base.Seed || sim.Load != 1.4 {
		t.Errorf("simulator run %+v: want the lab's window in model time", sim)
	}

	f, err := conf.Parse("frontend.yaml", []byte(cfg.frontendYAML("/run/qsplice/x", sched.ModeSingleFIFO)))
	if err != nil {
		t.Fatalf("%v\n%s", err, cfg.frontendYAML("/run/qsplice/x", sched.ModeSingleFIFO))
	}
	if f.Lifo.Interval != 5*time.Second {
		t.Errorf("utilization interval %v, want half of %v", f.Lifo.Interval, cfg.Base.UtilInterval)
	}
	for _, l := range f.Listeners {
		if string(l.Policy) != "single-fifo" {
			t.Errorf("listener %+v, want single-fifo", l)
		}
	}
	if len(f.Classes) != len(sched.DefaultClasses()) {
		t.Errorf("%d classes, want the default %d", len(f.Classes), len(sched.DefaultClasses()))
	}
}

func TestLabConfigValidate(t *testing.T) {
	if err := halfScaleLab().validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*LabConfig){
		"timescale": func(c *LabConfig) { c.TimeScale = 0 },
		"duration":  func(c *LabConfig) { c.Duration = 0 },
		"drain":     func(c *LabConfig) { c.Drain = -time.Second },
		"loads":     func(c *LabConfig) { c.Loads = []float64{1, -1} },
		"policies":  func(c *LabConfig) { c.Policies = nil },
		"backends":  func(c *LabConfig) { c.Base.Backends = 500 },
	} {
		cfg := halfScaleLab()
		mod(&cfg)
		if err := cfg.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	m := session.DefaultModel()
	m.Transitions[session.Main][session.Exit], m.Transitions[session.Main][session.Browse] = 0.58, 0
	if checkModelAgrees(m) == nil {
		t.Error("a model qsplice-load does not walk was accepted")
	}
}

const metricsText = `# HELP qsplice_customer_served_total Requests the back-ends reported served.
# TYPE qsplice_customer_served_total counter
qsplice_customer_served_total{customer="main"} 40
qsplice_customer_served_total{customer="confirm"} 3
qsplice_customer_offered_total{customer="main"} 45
qsplice_customer_admitted_total{customer="main"} 44
qsplice_customer_rejected_total{customer="main",reason="queue-full"} 1
qsplice_customer_abandoned_total{customer="main"} 6
qsplice_customer_response_seconds_sum{customer="main"} 12.5
qsplice_customer_response_seconds_count{customer="main"} 40
qsplice_frontend_queue_length 2
qsplice_backend_active{backend="1"} 1
qsplice_backend_active{backend="2"} 3
qsplice_lifo_browsing_lifo 1
`

func TestParseMetricsAndDelta(t *testing.T) {
	after, err := parseMetrics(strings.NewReader(metricsText))
	if err != nil {
		t.Fatal(err)
	}
	if after["qsplice_lifo_browsing_lifo"] != 1 || after.sumPrefix("qsplice_backend_active{") != 4 {
		t.Fatalf("parsed %v", after)
	}
	before := metrics{`qsplice_customer_served_total{customer="main"}`: 10,
		`qsplice_customer_response_seconds_sum{customer="main"}`:   2.5,
		`qsplice_customer_response_seconds_count{customer="main"}`: 10}
	d := frontendDelta(before, after)
	want := FrontendClass{Offered: 45, Admitted: 44, Served: 30, QueueFull: 1, Abandoned: 6, ResponseSum: 10, Responses: 30}
	if d[session.Main] != want || d[session.Confirm].Served != 3 || d[session.Browse] != (FrontendClass{}) {
		t.Fatalf("delta %+v", d)
	}
	for _, bad := range []string{"qsplice_x", "qsplice_x{a=\"b\"} many"} {
		if _, err := parseMetrics(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// sampleLabResult is a lab run of lifo-pri at 1.4 at half time scale.
func sampleLabResult(t *testing.T) LabResult {
	t.Helper()
	cfg := halfScaleLab()
	lr := &loadgen.SessionResult{MeasuredS: 60, Sessions: loadgen.SessionCounts{Started: 100, Completed: 50, Abandoned: 45, Unfinished: 5}}
	var total loadgen.ClassResult
	for p := range session.NumPages {
		c := loadgen.ClassResult{Name: session.Stage(p).String(), Completed: int64(10 * (p + 1)), TimedOut: 2, Refused: 1,
			Other: int64(p % 2), Errors: 1, NotGenerated: 5}
		c.Requested = c.Completed + c.TimedOut + c.Refused + c.Other + c.Errors
		lr.Classes = append(lr.Classes, c)
		total.Requested += c.Requested
		total.Completed += c.Completed
		total.TimedOut += c.TimedOut
		total.Refused += c.Refused
		total.Other += c.Other
		total.Errors += c.Errors
		total.NotGenerated += c.NotGenerated
	}
	lr.Total = total
	var fe [session.NumPages]FrontendClass
	fe[session.Main] = FrontendClass{Served: 10, ResponseSum: 2, Responses: 10}
	fe[session.Browse] = FrontendClass{Served: 30, ResponseSum: 4, Responses: 30}
	r := newLabResult(cfg, sched.ModeLifoPri, 1.4, lr, fe, 0.25)
	sim, err := Run(func() Config { c := cfg.SimConfig(sched.ModeLifoPri, 1.4); c.Duration = 2 * c.Warmup; return c }())
	if err != nil {
		t.Fatal(err)
	}
	r.Simulator = sim
	return r
}

// The lab's counts become the simulator's figures, in model time, and
// the shares cover every request.
func TestNewLabResult(t *testing.T) {
	r := sampleLabResult(t)
	l := r.Lab
	// completed 360, timed out 16, refused 8, other 4, errors 8, not generated 40
	if l.Requests != (Outcomes{Completed: 360, TimedOut: 16, Dropped: 8, NotGenerated: 40}) || r.Failed != 12 {
		t.Fatalf("outcomes %+v, failed %d", l.Requests, r.Failed)
	}
	if sum := l.CompletedPct + l.TimedOutPct + l.DroppedPct + l.NotGeneratedPct + r.FailedPct; math.Abs(sum-100) > 1e-9 {
		t.Errorf("shares add up to %v%%", sum)
	}
	if math.Abs(l.CompletedPct-100*360.0/436) > 1e-9 {
		t.Errorf("completed %v%%, want 360 of 436", l.CompletedPct)
	}
	if l.PerClass[session.Main] != 10 || l.PerClass[session.Confirm] != 80 {
		t.Errorf("per class %v", l.PerClass)
	}
	// 360 completions in 60 s of lab time are 3 req/s of model time at
	// F = 0.5; a 0.15 s mean response in the lab is 0.3 s of model time.
	if math.Abs(l.ThroughputRPS-3) > 1e-9 || math.Abs(l.MeanRTSeconds-0.3) > 1e-9 {
		t.Errorf("throughput %v req/s, mean RT %vs; want 3 and 0.3 in model time", l.ThroughputRPS, l.MeanRTSeconds)
	}
	if l.Sessions != 100 || r.Unfinished != 5 || l.LIFOFraction != 0.25 || l.Policy != "lifo-pri" ||
		math.Abs(l.OfferedRPS-1.4*l.CapacityRPS) > 1e-9 {
		t.Errorf("result %+v", l)
	}
}

func TestWriteLabFiles(t *testing.T) {
	r := sampleLabResult(t)
	var b bytes.Buffer
	if err := WriteLabCSV(&b, []LabResult{r, r}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var sim bytes.Buffer
	if err := WriteCSV(&sim, []Result{r.Simulator}); err != nil {
		t.Fatal(err)
	}
	simHeader := strings.Split(strings.SplitN(sim.String(), "\n", 2)[0], ",")
	if len(rows) != 3 || strings.Join(rows[0][:len(simHeader)], ",") != strings.Join(simHeader, ",") {
		t.Fatalf("lab.csv header %v does not start with the simulator's %v", rows[0], simHeader)
	}
	if rows[1][0] != "lifo-pri" || rows[1][5] != "360" || rows[1][len(simHeader)] != "12" {
		t.Errorf("row %v", rows[1])
	}

	var tab bytes.Buffer
	if err := WriteLabTable(&tab, []LabResult{r}, 1.4); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lifo-pri     lab      82.6%", "lifo-pri     sim", "completed requests per class", "(5 unfinished)", "timescale 0.5"} {
		if !strings.Contains(tab.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tab.String())
		}
	}
	if err := WriteLabTable(&tab, []LabResult{r}, 0.7); err == nil {
		t.Error("a table at a load without results")
	}

	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Lab       map[string]any           `json:"lab"`
		Simulator map[string]any           `json:"simulator"`
		Frontend  map[string]FrontendClass `json:"frontend"`
		Failed    int                      `json:"failed"`
	}
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Frontend["browse"].Served != 30 || back.Failed != 12 || back.Lab["policy"] != "lifo-pri" || back.Simulator["policy"] != "lifo-pri" {
		t.Errorf("JSON %s", js)
	}
}
