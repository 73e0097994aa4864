package experiment

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/content"
	"github.com/qsplice/qsplice/tools/lab"
	"github.com/qsplice/qsplice/tools/loadgen"
)

// The feedback experiment live (issue 10 item 8): a lab whose front-end
// runs the feedback policy, back-ends serving the site in content trees
// (qsplice-testserver -trees), qsplice-load in the client namespace
// offering one stream per class (Host <class>.example, each its weight's
// share of the load) that steps from Low to High times the capacity at
// Up and back at Down. A sampler reads the front-end's /status every
// period and records the same series as the simulated run (RunFeedback),
// so the same summary and plots come out; the clients' own counts and
// the front-end's are kept beside them to check that they agree.

// FeedbackLabConfig is one live run; DefaultFeedbackLabConfig documents
// every value.
type FeedbackLabConfig struct {
	// Backends x Slots requests at once, each taking Service at full
	// quality (the test server's service time; tree k takes k/M of it)
	// and returning Size bytes (tree k: content.TreeSize).
	Backends, Slots int
	Service         time.Duration
	Size            int64
	Classes         []string
	Weights         []float64
	Low, High       float64
	Up, Down, End   time.Duration
	Trees           int
	TargetUtil      float64
	// A and B calibrate U = A*R + B*W; both 0: B = 1 / (capacity x
	// Size), exact for the test server, whose cost is proportional to
	// the tree as its bytes are (qsplice-calibrate measures them).
	A, B float64
	// Sessions > 0 turns session awareness on (session_cookie: sid) and
	// has each class's requests carry the cookies of that many sessions.
	Sessions int
	// SessionRequests > 0 ends each session after that many requests, a
	// new one taking its place (loadgen.Stream.SessionRequests): one
	// request in SessionRequests starts a session.
	SessionRequests int
	// Policy holds the loop's settings (Period, TargetQueue, Q0, Q1,
	// RefusePeriods, ...); zero fields take the lab's defaults below or
	// the policy's.
	Policy sched.FeedbackConfig
	// ClientAddrs is how many addresses the clients' connections come
	// from, in turn (at most 64, and Backends at most 11: they are
	// 198.18.0.32 on, added to the client namespace): the content
	// adaptor splits G between clients by a hash of their address, so
	// one address would see all or nothing.
	ClientAddrs int
	// Timeout is the clients' per-request timeout: far above what the
	// loop lets a request wait, so a timeout is a failure of the policy.
	Timeout time.Duration
	Seed    uint64
	BinDir  string
	Log     io.Writer // progress lines; nil: none
	// BeforeLoad, when set, runs once the lab is up, before the load
	// (tests check the content trees through the VIP there); an error
	// ends the run.
	BeforeLoad func(ctx context.Context, l *lab.Lab) error
}

// Lab defaults of the loop: a period of 100 ms sees about 25 requests at
// the default capacity, and a target of 20 per class keeps the waits
// well under a second. The utilization controller's gain is 4: with G
// moved at every dispatch (sched's contentAdaptor) it keeps every second
// of U within 0.85 +/- 0.05 in 40 of 40 seeds of the lab-rate model with
// constant service times, the policy's default 1 in 31
// (TestFeedbackLabRateSettlesStrictly).
const (
	labFeedbackPeriod      = 100 * time.Millisecond
	labFeedbackTargetQueue = 20
	labFeedbackGain        = 4.0
)

// DefaultFeedbackLabConfig is a minute on the 2-core lab machine: 5
// back-ends x 5 slots at 100 ms (250 req/s) of 16 KiB objects, gold 3,
// silver 2, bronze 1, 0.5x the capacity, 2x from 10 s to 40 s, 60 s in
// all, three content trees, U* = 0.85.
func DefaultFeedbackLabConfig() FeedbackLabConfig {
	return FeedbackLabConfig{
		Backends: 5, Slots: 5, Service: 100 * time.Millisecond, Size: 16 << 10,
		Classes: []string{"gold", "silver", "bronze"}, Weights: []float64{3, 2, 1},
		Low: 0.5, High: 2, Up: 10 * time.Second, Down: 40 * time.Second, End: 60 * time.Second,
		Trees: 3, TargetUtil: sched.DefaultFeedbackUtilization,
		ClientAddrs: 32, Timeout: 10 * time.Second, Seed: 1,
	}
}

// Capacity is the request rate the lab serves at full quality.
func (c FeedbackLabConfig) Capacity() float64 {
	return float64(c.Backends*c.Slots) / c.Service.Seconds()
}

// simConfig is the simulated run's view of c, for validation and the
// summary.
func (c FeedbackLabConfig) simConfig() FeedbackConfig {
	return FeedbackConfig{Backends: c.Backends, Slots: c.Slots, Service: c.Service, Bytes: uint64(c.Size),
		Classes: c.Classes, Weights: c.Weights, Low: c.Low, High: c.High, Up: c.Up, Down: c.Down, End: c.End,
		Trees: c.Trees, TargetUtil: c.TargetUtil, Seed: c.Seed, Policy: c.Policy}
}

func (c FeedbackLabConfig) validate() error {
	if err := c.simConfig().validate(); err != nil {
		return err
	}
	switch {
	case c.Backends > lab.MaxBackends:
		return fmt.Errorf("experiment: %d back-ends, the lab has room for %d", c.Backends, lab.MaxBackends)
	case c.Size < 0 || c.Trees > 255:
		return errors.New("experiment: Size must be >= 0 and Trees <= 255")
	case !(c.Low > 0) && !(c.High > 0):
		return errors.New("experiment: Low or High must be > 0")
	case c.Timeout <= 0:
		return errors.New("experiment: Timeout must be > 0")
	case c.ClientAddrs < 0 || c.ClientAddrs > 64 || c.ClientAddrs > 0 && c.Backends > 11:
		return errors.New("experiment: ClientAddrs must be in 0..64, with at most 11 back-ends")
	case c.BinDir == "":
		return errors.New("experiment: BinDir is required")
	}
	for _, name := range c.Classes {
		if name == "" || strings.ContainsAny(name, " ,:=/\"'") {
			return fmt.Errorf("experiment: class name %q", name)
		}
	}
	return nil
}

// period is the loop's period T, the sampling period too.
func (c FeedbackLabConfig) period() time.Duration {
	if c.Policy.Period > 0 {
		return c.Policy.Period
	}
	return labFeedbackPeriod
}

// calibration is (a, b) as written into the front-end's configuration.
func (c FeedbackLabConfig) calibration() (a, b float64) {
	if c.A != 0 || c.B != 0 || c.Trees < 2 {
		return c.A, c.B
	}
	return 0, 1 / (c.Capacity() * float64(max(c.Size, 1)))
}

// FrontendYAML is the front-end's configuration for this run in the lab
// whose state directory is stateDir: every listener on the feedback
// policy, one class per Classes with its weight and Host <class>.example.
func (c FeedbackLabConfig) FrontendYAML(stateDir string) string {
	p := c.Policy
	var b strings.Builder
	b.WriteString(lab.FrontendYAMLPolicy(stateDir, c.Backends, c.Slots, "feedback", nil))
	b.WriteString("feedback:\n")
	fmt.Fprintf(&b, "  period: %v\n", c.period())
	tq := p.TargetQueue
	if tq == 0 {
		tq = labFeedbackTargetQueue
	}
	fmt.Fprintf(&b, "  target_queue: %d\n", tq)
	num := func(key string, v float64) {
		if v != 0 {
			fmt.Fprintf(&b, "  %s: %s\n", key, strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	integer := func(key string, v int) {
		if v != 0 {
			fmt.Fprintf(&b, "  %s: %d\n", key, v)
		}
	}
	num("q0", p.Q0)
	num("q1", p.Q1)
	integer("history", p.History)
	integer("refuse_periods", p.RefusePeriods)
	integer("log_length", p.LogLength)
	num("merge_gain", p.MergeGain)
	fmt.Fprintf(&b, "  seed: %d\n", c.Seed)
	if c.Sessions > 0 {
		fmt.Fprintf(&b, "  session_cookie: %s\n", loadgen.DefaultSessionCookie)
	}
	a, bb := c.calibration()
	fmt.Fprintf(&b, "  content:\n    trees: %d\n    a: %s\n    b: %s\n    target_utilization: %s\n",
		c.Trees, strconv.FormatFloat(a, 'g', -1, 64), strconv.FormatFloat(bb, 'g', -1, 64),
		strconv.FormatFloat(c.TargetUtil, 'g', -1, 64))
	gain := p.Gain
	if gain == 0 {
		gain = labFeedbackGain
	}
	fmt.Fprintf(&b, "    gain: %s\n", strconv.FormatFloat(gain, 'g', -1, 64))
	fmt.Fprintf(&b, "  fallback: %s\n  classes:\n", c.Classes[len(c.Classes)-1])
	for i, name := range c.Classes {
		fmt.Fprintf(&b, "    - name: %s\n      weight: %s\n      hosts: [%q]\n", name,
			strconv.FormatFloat(c.Weights[i], 'g', -1, 64), classHost(name))
	}
	return b.String()
}

func classHost(class string) string { return class + ".example" }

// Steps is the step load as qsplice-load's factors of the capacity.
func (c FeedbackLabConfig) Steps() []loadgen.LoadStep {
	steps := []loadgen.LoadStep{{At: 0, Factor: c.Low}}
	switch {
	case c.Up == 0:
		steps[0].Factor = c.High
	case c.Up < c.End:
		steps = append(steps, loadgen.LoadStep{At: c.Up, Factor: c.High})
	}
	if c.Down > c.Up && c.Down < c.End {
		steps = append(steps, loadgen.LoadStep{At: c.Down, Factor: c.Low})
	}
	return steps
}

// Streams are the classes' streams at factor 1: each its weight's share
// of the capacity, to /data/<Size>.
func (c FeedbackLabConfig) Streams() []loadgen.Stream {
	var total float64
	for _, w := range c.Weights {
		total += w
	}
	var out []loadgen.Stream
	for i, name := range c.Classes {
		out = append(out, loadgen.Stream{Name: name, Host: classHost(name), Path: "/data/" + content.FormatSize(c.Size),
			Rate: c.Capacity() * c.Weights[i] / total, Arrival: loadgen.Poisson, Sessions: c.Sessions,
			SessionRequests: c.SessionRequests})
	}
	return out
}

// loadArgs is qsplice-load's command line for the run.
func (c FeedbackLabConfig) loadArgs(jsonPath string) []string {
	args := []string{filepath.Join(c.BinDir, "qsplice-load"), "-target", "http://" + lab.VIP + ":8080",
		"-warmup", "0s", "-duration", c.End.String(), "-timeout", c.Timeout.String(),
		"-steps", loadgen.FormatSteps(c.Steps()), "-seed", strconv.FormatUint(c.Seed, 10),
		"-json", jsonPath, "-progress=false"}
	if src := c.clientAddrs(); len(src) > 0 {
		list := make([]string, len(src))
		for i, a := range src {
			list[i] = a.String()
		}
		args = append(args, "-sources", strings.Join(list, ","))
	}
	for _, st := range c.Streams() {
		spec := fmt.Sprintf("name=%s,host=%s,path=%s,rate=%s", st.Name, st.Host, st.Path, strconv.FormatFloat(st.Rate, 'g', -1, 64))
		if st.Sessions > 0 {
			spec += ",sessions=" + strconv.Itoa(st.Sessions)
		}
		if st.Sessions > 0 && st.SessionRequests > 0 {
			spec += ",session-requests=" + strconv.Itoa(st.SessionRequests)
		}
		args = append(args, "-stream", spec)
	}
	return args
}

// clientAddrs are the addresses the clients' connections come from:
// 198.18.0.32 on, above every back-end's of a lab with at most 11.
func (c FeedbackLabConfig) clientAddrs() []netip.Addr {
	var out []netip.Addr
	for i := range c.ClientAddrs {
		out = append(out, netip.AddrFrom4([4]byte{198, 18, 0, byte(32 + i)}))
	}
	return out
}

// addClientAddrs configures the clients' extra addresses in c1.
func addClientAddrs(l *lab.Lab, addrs []netip.Addr) error {
	for _, a := range addrs {
		if out, err := l.Command("c1", "ip", "addr", "add", a.String()+"/32", "dev", "eth0").CombinedOutput(); err != nil {
			return fmt.Errorf("adding %v to c1: %v: %s", a, err, out)
		}
	}
	return nil
}

// FeedbackLabClass is what one class came to, at the clients and at the
// front-end, over the whole run.
type FeedbackLabClass struct {
	Name string `json:"name"`
	// The clients' counts (qsplice-load): requests sent, answered 2xx,
	// 503 and 503 with Retry-After, timed out, failed otherwise, and the
	// 2xx per content tree the back-ends named (index 1..M).
	Sent        int64   `json:"client_sent"`
	NotSent     int64   `json:"client_not_sent"`
	OK          int64   `json:"client_2xx"`
	Refused     int64   `json:"client_503"`
	RetryAfter  int64   `json:"client_503_retry_after"`
	Other       int64   `json:"client_other_status"`
	TimedOut    int64   `json:"client_timed_out"`
	Failed      int64   `json:"client_failed_otherwise"`
	ClientTrees []int64 `json:"client_trees"`
	// With sessions: the requests that started a session and those of
	// sessions the front-end had seen.
	NewSessions   *loadgen.SessionKindCounts `json:"client_new_sessions,omitempty"`
	KnownSessions *loadgen.SessionKindCounts `json:"client_known_sessions,omitempty"`
	// The front-end's counts (Status.Feedback, the run's difference):
	// requests that reached the policy, dispatched, refused (loop,
	// overload, full, expired), and the trees it chose per request.
	Arrived    uint64   `json:"frontend_arrived"`
	Dispatched uint64   `json:"frontend_dispatched"`
	FERefused  uint64   `json:"frontend_refused"`
	FEOverload uint64   `json:"frontend_overload"` // of FERefused: tree 0
	FELoop     uint64   `json:"frontend_loop"`     // of FERefused: kept in reserve refuse_periods periods
	FETrees    []uint64 `json:"frontend_trees"`
}

// FeedbackLabResult is a live run: the series and summary of the
// simulated run's shape, and each class's counts.
type FeedbackLabResult struct {
	FeedbackResult
	Classes []FeedbackLabClass `json:"classes"`
	// MissedSamples counts periods whose /status did not answer in time
	// (their point repeats the one before).
	MissedSamples int    `json:"missed_samples"`
	LabName       string `json:"lab"`
	// Load is qsplice-load's result (written as feedback_load.json).
	Load *loadgen.Result `json:"-"`
}

// RunFeedbackLab builds a lab, runs cfg in it and removes it, also on
// errors and when ctx ends.
func RunFeedbackLab(ctx context.Context, cfg FeedbackLabConfig) (res FeedbackLabResult, err error) {
	if err := cfg.validate(); err != nil {
		return res, err
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	dir, err := os.MkdirTemp("", "qsplice-feedback-lab-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	// The daemons may run unprivileged: they read the configuration and
	// the state below dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		return res, err
	}
	var suffix [3]byte
	rand.Read(suffix[:])
	name := "f" + hex.EncodeToString(suffix[:])
	lc := lab.DefaultConfig(name)
	lc.Backends, lc.Capacity, lc.Clients = cfg.Backends, cfg.Slots, 1
	lc.BinDir = cfg.BinDir
	lc.StateDir = filepath.Join(dir, "state")
	lc.Nginx, lc.Files = false, nil
	lc.ServiceTime = cfg.Service
	lc.BackendArgs = []string{"-linger", "1s"}
	lc.TestServerArgs = []string{"-trees", strconv.Itoa(cfg.Trees)}
	lc.FrontendConfig = filepath.Join(dir, "frontend.yaml")
	if err := os.WriteFile(lc.FrontendConfig, []byte(cfg.FrontendYAML(lc.StateDir)), 0o644); err != nil {
		return res, err
	}
	fmt.Fprintf(logw, "feedback: building lab %s (%d back-ends x %d, %v per request: %.0f req/s)\n",
		name, cfg.Backends, cfg.Slots, cfg.Service, cfg.Capacity())
	l, err := lab.Up(ctx, lc)
	if err != nil {
		return res, err
	}
	defer func() {
		if derr := l.Down(); derr != nil {
			err = errors.Join(err, fmt.Errorf("removing lab %s: %w", name, derr))
		}
		fmt.Fprintf(logw, "feedback: lab %s removed\n", name)
	}()
	if cfg.BeforeLoad != nil {
		if err := cfg.BeforeLoad(ctx, l); err != nil {
			return res, err
		}
	}
	res, err = runFeedbackInLab(ctx, cfg, l, dir, logw)
	res.LabName = name
	return res, err
}

// runFeedbackInLab offers the step load to a running lab and measures it.
func runFeedbackInLab(ctx context.Context, cfg FeedbackLabConfig, l *lab.Lab, dir string, logw io.Writer) (FeedbackLabResult, error) {
	var res FeedbackLabResult
	client := l.HTTPClient("c1")
	client.Timeout = 5 * time.Second
	before, err := fetchStatus(ctx, client)
	if err != nil {
		return res, err
	}
	if before.Feedback == nil {
		return res, errors.New("the front-end has no feedback listener")
	}
	if err := addClientAddrs(l, cfg.clientAddrs()); err != nil {
		return res, err
	}
	jsonPath := filepath.Join(dir, "load.json")
	args := cfg.loadArgs(jsonPath)
	fmt.Fprintf(logw, "feedback: %v of load: %s\n", cfg.End, strings.Join(args[1:], " "))
	sampler := startStatusSampler(ctx, client, cfg.period(), cfg.End)
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.NS("c1")}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 30 * time.Second
	out, runErr := cmd.CombinedOutput()
	samples, missed := sampler.stop()
	if runErr != nil {
		return res, errors.Join(ctx.Err(), fmt.Errorf("qsplice-load: %v\n%s", runErr, out))
	}
	var lr loadgen.Result
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(b, &lr); err != nil {
		return res, fmt.Errorf("%s: %v", jsonPath, err)
	}
	after, err := settleStatus(ctx, client, 30*time.Second)
	if err != nil {
		return res, err
	}
	res.FeedbackResult = feedbackSeries(cfg, samples)
	res.MissedSamples = missed
	res.Load = &lr
	res.Classes = labClasses(&lr, before.Feedback, after.Feedback)
	for _, c := range res.Classes {
		res.Summary.QueueTimeouts += int(c.TimedOut)
		res.Summary.OverloadRefusals += int(c.FEOverload)
	}
	if lr.Interrupted {
		return res, errors.Join(ctx.Err(), errors.New("qsplice-load was interrupted"))
	}
	return res, nil
}

// feedbackSeries turns the samples (one per period, nil where missed)
// into the simulated run's series and summary.
func feedbackSeries(cfg FeedbackLabConfig, samples []statusObs) FeedbackResult {
	period := cfg.period()
	a, b := cfg.calibration()
	out := FeedbackResult{CapacityRPS: cfg.Capacity(), Trees: cfg.Trees, A: a, B: b}
	var prev *controller.FeedbackStatus
	steps := cfg.Steps()
	for k, o := range samples {
		f := o.f
		if f == nil {
			f = prev
		}
		if f == nil {
			continue
		}
		at := time.Duration(k+1) * period
		pt := FeedbackPoint{TSeconds: at.Seconds(), Load: loadgen.FactorAt(steps, at-1), U: f.U, G: f.G,
			Completions: f.Completions, Bytes: f.Bytes}
		for i, c := range f.Classes {
			cp := FeedbackClassPoint{Name: c.Name, Queued: c.Queued, Reserve: c.Reserve, TargetQueue: c.TargetQueue,
				ProQoS: c.ProQoS, Share: c.Share, Dispatched: c.Dispatched, Refused: c.Refused + c.Overload + c.Full + c.Expired,
				Quality: math.NaN()}
			var n, sum float64
			for tree, count := range c.Trees {
				if prev != nil && i < len(prev.Classes) && tree < len(prev.Classes[i].Trees) {
					count -= prev.Classes[i].Trees[tree]
				}
				n += float64(count)
				sum += float64(count) * float64(tree) / float64(cfg.Trees)
			}
			if n > 0 {
				q := sum / n
				cp.Quality, cp.QualityJSON = q, &q
			}
			pt.Classes = append(pt.Classes, cp)
		}
		out.Series = append(out.Series, pt)
		prev = f
	}
	fillPeriodEnds(out.Series, samples, period)
	if len(out.Series) > 0 {
		out.Summary = summarizeFeedback(cfg.simConfig(), out.Series, period, a, b)
	}
	return out
}

// labClasses puts the clients' and the front-end's counts side by side.
func labClasses(lr *loadgen.Result, before, after *controller.FeedbackStatus) []FeedbackLabClass {
	var out []FeedbackLabClass
	for _, s := range lr.Streams {
		c := FeedbackLabClass{Name: s.Name, Sent: s.Sent, NotSent: s.NotSent, OK: s.Completed.OK,
			Refused: s.Completed.ServiceUnavailable, RetryAfter: s.RetryAfter.ServiceUnavailable,
			Other: s.Completed.TooManyRequests + s.Completed.Other, TimedOut: s.Errors.Timeout,
			Failed: s.Errors.ConnectRefused + s.Errors.Reset + s.Errors.Other, ClientTrees: s.Trees,
			NewSessions: s.NewSessions, KnownSessions: s.KnownSessions}
		for i, a := range after.Classes {
			if a.Name != s.Name || i >= len(before.Classes) {
				continue
			}
			b := before.Classes[i]
			c.Arrived = a.Arrived - b.Arrived
			c.Dispatched = a.Dispatched - b.Dispatched
			c.FERefused = (a.Refused + a.Overload + a.Full + a.Expired) - (b.Refused + b.Overload + b.Full + b.Expired)
			c.FEOverload, c.FELoop = a.Overload-b.Overload, a.Refused-b.Refused
			c.FETrees = make([]uint64, len(a.Trees))
			for k := range a.Trees {
				c.FETrees[k] = a.Trees[k]
				if k < len(b.Trees) {
					c.FETrees[k] -= b.Trees[k]
				}
			}
		}
		out = append(out, c)
	}
	return out
}
