package benchproxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/qsplice/qsplice/tools/content"
	"github.com/qsplice/qsplice/tools/lab"
	"golang.org/x/sys/unix"
)

// Options say what to run. Zero fields take the defaults of DefaultOptions.
type Options struct {
	Duration     time.Duration // each wrk load
	BulkSize     int64         // object size of the bulk load
	BulkConns    int           // keep-alive connections of the bulk load
	SmallConns   int           // concurrent one-request connections of the 1K load
	TTFBRequests int           // sequential requests timed per system
	FrameWindow  time.Duration // how long syscalls and allocations are counted
	Only         []string      // systems to measure (Systems' names)
	// Rounds is how many times every load runs for every system, the
	// systems taking turns within each round; the table shows each
	// figure's median over the rounds and how many rounds met each
	// target. On a shared machine one round can land in another
	// program's burst; the median of three rarely does.
	Rounds int
	// Offloads, when set, turns the lab's link offloads (TSO, GSO, GRO,
	// checksums) on or off; nil keeps the lab's default. The proxy chain
	// gets what the lab's links have, so every system moves its bytes over
	// the same kind of link.
	Offloads *bool
	// Workers, when above 0, is the -workers of both qsplice daemons;
	// 0 keeps their default (one per CPU).
	Workers int
	// FrontendArgs and BackendArgs are extra flags of the qsplice
	// daemons, for an A/B of one setting (-rx-hold -1, -tap-io uring).
	FrontendArgs, BackendArgs []string
	// FreshUpstream makes nginx-as-proxy open a new connection to the
	// back-end for every request, as qsplice's front-end does for every
	// client connection, instead of reusing its pool of keep-alive
	// connections (the default, and what an nginx in front of a busy
	// back-end is set to). The difference between two runs is what an
	// upstream connection per request costs a proxy on this machine.
	FreshUpstream bool
	BinDir        string    // the qsplice binaries; default the running executable's directory
	Progress      io.Writer // progress lines; nil: none
}

// SmallSize is the object size of the one-connection-per-request load and
// of the time-to-first-byte requests.
const SmallSize = 1 << 10

// DefaultOptions are the loads of issue 7's table.
func DefaultOptions() Options {
	return Options{
		Duration:     10 * time.Second,
		BulkSize:     10 << 20,
		BulkConns:    8,
		SmallConns:   16,
		TTFBRequests: 2000,
		FrameWindow:  5 * time.Second,
		Rounds:       1,
		Only:         slices.Clone(Systems),
	}
}

func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions()
	if o.Duration <= 0 {
		o.Duration = d.Duration
	}
	if o.BulkSize <= 0 {
		o.BulkSize = d.BulkSize
	}
	if o.BulkConns <= 0 {
		o.BulkConns = d.BulkConns
	}
	if o.SmallConns <= 0 {
		o.SmallConns = d.SmallConns
	}
	if o.TTFBRequests <= 0 {
		o.TTFBRequests = d.TTFBRequests
	}
	if o.FrameWindow <= 0 {
		o.FrameWindow = d.FrameWindow
	}
	if o.Rounds <= 0 {
		o.Rounds = d.Rounds
	}
	if len(o.Only) == 0 {
		o.Only = d.Only
	}
	for _, s := range o.Only {
		if !slices.Contains(Systems, s) {
			return o, fmt.Errorf("unknown system %q (systems: %s)", s, strings.Join(Systems, ","))
		}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o, nil
}

// ParseSystems reads a comma-separated list of systems.
func ParseSystems(list string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		s = strings.ToLower(strings.TrimSpace(s))
		if s == "" {
			continue
		}
		if !slices.Contains(Systems, s) {
			return nil, fmt.Errorf("unknown system %q (systems: %s)", s, strings.Join(Systems, ","))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no system selected")
	}
	return out, nil
}

// target is one system as the loads see it.
type target struct {
	name string
	ns   string                           // the client's namespace
	addr string                           // host:port the client connects to
	cpu  map[string]func() ([]int, error) // processes whose CPU counts, by role
	// loops read the daemons' gathering counters, by role (qsplice
	// only).
	loops map[string]func(context.Context) (*Loops, error)
	// responses reads the shim's count of responses and of those whose
	// first reply the kernel echoed (qsplice only).
	responses func(context.Context) (FirstReplies, error)
}

func (t target) url(size int64) string {
	return "http://" + t.addr + "/data/" + content.FormatSize(size)
}

// run is the state of one Run.
type run struct {
	o        Options
	start    time.Time
	id       string
	dir      string
	script   string
	cleanups []func() error  // run in reverse order when Run returns
	systems  []*SystemResult // the result's, by target
	failed   bool            // Run is returning an error
}

func (r *run) progress(format string, args ...any) {
	fmt.Fprintf(r.o.Progress, "[%4.0fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

// Run builds the qsplice lab and the proxy chain, measures every selected
// system under each load, and removes everything again, also when it
// fails. On success the work directory goes too; on failure it is kept
// (its logs) and the error names it.
func Run(ctx context.Context, o Options) (res *Result, err error) {
	o, err = o.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkTools(o.Only); err != nil {
		return nil, err
	}
	r := &run{o: o, start: time.Now()}
	var suffix [3]byte
	rand.Read(suffix[:])
	r.id = hex.EncodeToString(suffix[:])
	if r.dir, err = lab.SharedTempDir("qsplice-bench-proxy-"); err != nil {
		return nil, err
	}
	defer func() {
		r.failed = err != nil
		var errs []error
		for i := len(r.cleanups) - 1; i >= 0; i-- {
			errs = append(errs, r.cleanups[i]())
		}
		if cerr := errors.Join(errs...); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleaning up: %w", cerr))
		}
		if err != nil {
			err = fmt.Errorf("%w\n(logs and configurations kept in %s)", err, r.dir)
			return
		}
		os.RemoveAll(r.dir)
	}()
	r.script = filepath.Join(r.dir, "summary.lua")
	if err := os.WriteFile(r.script, []byte(wrkScript), 0o644); err != nil {
		return nil, err
	}
	res, err = r.measure(ctx)
	return res, err
}

func (r *run) measure(ctx context.Context) (*Result, error) {
	o := r.o
	res := &Result{ID: r.id, Started: r.start, Host: hostInfo(), Settings: Settings{
		BulkSize: o.BulkSize, BulkConns: o.BulkConns, SmallSize: SmallSize, SmallConns: o.SmallConns,
		LoadSeconds: o.Duration.Round(time.Second).Seconds(), TTFBRequests: o.TTFBRequests,
		FrameWindowSecs: o.FrameWindow.Seconds(), Rounds: o.Rounds, Workers: o.Workers,
		FrontendArgs: o.FrontendArgs, BackendArgs: o.BackendArgs, FreshUpstream: o.FreshUpstream,
	}}
	selected := func(s string) bool { return slices.Contains(o.Only, s) }
	sizes := []int64{SmallSize, o.BulkSize}

	// The qsplice lab first: its links decide the chain's offloads.
	withQsplice := selected(SystemQsplice)
	withDaemons := withQsplice || selected(SystemShim)
	r.progress("building the qsplice lab (lab bp%s%s)", r.id, map[bool]string{true: "", false: ", network only"}[withDaemons])
	l, err := upLab(ctx, "bp"+r.id, filepath.Join(r.dir, "lab"), sizes, withDaemons, o)
	if l != nil {
		r.cleanups = append(r.cleanups, func() error {
			// Down removes the lab's state directory; a failed run keeps
			// its logs.
			if r.failed {
				os.CopyFS(filepath.Join(r.dir, "lab-logs"), os.DirFS(filepath.Dir(l.LogPath(labFrontend))))
			}
			return l.Down()
		})
	}
	if err != nil {
		return nil, err
	}
	if res.LinkOffloads, err = readOffloads(l.NS("c1"), "eth0"); err != nil {
		return nil, err
	}
	r.progress("link offloads (the lab's, given to the chain): %v", res.LinkOffloads)
	var targets []target
	if selected(SystemDirect) || selected(SystemNginx) || selected(SystemHAProxy) {
		c := &chain{prefix: "qsbp-" + r.id + "-", dir: filepath.Join(r.dir, "chain")}
		if err := os.MkdirAll(c.dir, 0o755); err != nil {
			return nil, err
		}
		r.cleanups = append(r.cleanups, c.down)
		r.progress("building the proxy chain (namespaces %s{c,p,b}, 198.18.7.0/24)", c.prefix)
		if err := buildChain(c, res.LinkOffloads); err != nil {
			return nil, err
		}
		c.freshUpstream = o.FreshUpstream
		if err := c.startServers(ctx, sizes, map[string]bool{SystemNginx: selected(SystemNginx), SystemHAProxy: selected(SystemHAProxy)}); err != nil {
			return nil, err
		}
		clientNS := c.ns("c")
		if selected(SystemDirect) {
			targets = append(targets, target{name: SystemDirect, ns: clientNS, addr: fmt.Sprintf("%s:%d", chainBackendAddr, backendPort)})
		}
		if selected(SystemNginx) {
			targets = append(targets, target{name: SystemNginx, ns: clientNS, addr: fmt.Sprintf("%s:%d", chainProxyAddr, nginxProxyPort),
				cpu: map[string]func() ([]int, error){RoleProxy: func() ([]int, error) { return c.proxyPids(proxyNginxName) }}})
		}
		if selected(SystemHAProxy) {
			targets = append(targets, target{name: SystemHAProxy, ns: clientNS, addr: fmt.Sprintf("%s:%d", chainProxyAddr, haproxyPort),
				cpu: map[string]func() ([]int, error){RoleProxy: func() ([]int, error) { return c.proxyPids(haproxyName) }}})
		}
	}
	var shimPid int
	if withDaemons {
		if shimPid, err = l.PID(labShim); err != nil {
			return nil, err
		}
	}
	if selected(SystemShim) {
		targets = append(targets, target{name: SystemShim, ns: l.NS("c1"), addr: netip.AddrPortFrom(l.BackendAddr(1), backendPort).String(),
			cpu:   map[string]func() ([]int, error){RoleShim: func() ([]int, error) { return []int{shimPid}, nil }},
			loops: map[string]func(context.Context) (*Loops, error){RoleShim: func(ctx context.Context) (*Loops, error) { return shimLoops(ctx, l) }}})
	}
	var frames *frameCounter
	if withQsplice {
		fePid, err := l.PID(labFrontend)
		if err != nil {
			return nil, err
		}
		if frames, err = r.newFrameCounter(l, fePid, shimPid); err != nil {
			return nil, err
		}
		r.progress("qsplice at rest: counting the daemons' syscalls and allocations for %v", idleWindow)
		frames.atRest(ctx)
		targets = append(targets, target{name: SystemQsplice, ns: l.NS("c1"), addr: lab.VIP + ":80",
			cpu: map[string]func() ([]int, error){
				RoleFrontend: func() ([]int, error) { return []int{fePid}, nil },
				RoleShim:     func() ([]int, error) { return []int{shimPid}, nil },
			},
			loops: map[string]func(context.Context) (*Loops, error){
				RoleFrontend: func(ctx context.Context) (*Loops, error) { return frontendLoops(ctx, l) },
				RoleShim:     func(ctx context.Context) (*Loops, error) { return shimLoops(ctx, l) },
			},
			responses: func(ctx context.Context) (FirstReplies, error) { return shimFirstReplies(ctx, l) }})
	}
	for _, t := range targets {
		res.Systems = append(res.Systems, &SystemResult{Name: t.name})
	}
	r.systems = res.Systems

	// Each load for every system in turn, so that a change in the
	// machine's other work spreads over all of them. A system that fails
	// a measurement does not stop the others: its failure goes into the
	// result and the notes, and Run returns an error at the end.
	rounds := make([][]*Round, len(targets)) // by target, then round
	var failures []error
	failed := func(s *SystemResult, phase string, err error) error {
		if o.Rounds > 1 {
			phase = fmt.Sprintf("%s (round %d)", phase, len(rounds[slices.Index(res.Systems, s)]))
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", s.Name, phase, err)
		}
		if s.Failures == nil {
			s.Failures = map[string]string{}
		}
		s.Failures[phase] = err.Error()
		failures = append(failures, fmt.Errorf("%s %s failed", s.Name, phase))
		r.progress("  FAILED: %v", err)
		return nil
	}
	for round := 1; round <= o.Rounds; round++ {
		if err := r.round(ctx, round, targets, rounds, failed); err != nil {
			return nil, err
		}
	}
	for i := range targets {
		res.Systems[i].setRounds(rounds[i])
	}
	if withQsplice {
		q := res.system(SystemQsplice)
		t := targets[slices.Index(res.Systems, q)]
		r.progress("syscalls and allocations per frame: qsplice under bulk load, counted for %v", o.FrameWindow)
		err := frames.underLoad(ctx, t)
		q.Frames = frames.costs()
		if err != nil {
			if err := failed(q, "frame costs", err); err != nil {
				return nil, err
			}
		}
		for _, f := range q.Frames {
			if f.Error != "" {
				r.progress("  %s: not counted: %s", f.Process, f.Error)
			} else if f.Frames > 0 {
				r.progress("  %s: %.3f syscalls/frame, %.4f allocs/frame (%d frames)", f.Process, f.SyscallsPerFrame, f.MallocsPerFrame, f.Frames)
			}
		}
	}
	for i, t := range targets {
		if t.name != SystemNginx && t.name != SystemHAProxy && t.name != SystemQsplice {
			continue
		}
		r.progress("where the CPU goes: %s under the 1K close load, sampled for %v", t.name, o.FrameWindow)
		res.Systems[i].Deliveries = r.sampleDelivery(ctx, t, o.FrameWindow)
		for _, d := range res.Systems[i].Deliveries {
			if d.Error != "" {
				r.progress("  %s: not sampled: %s", d.Role, d.Error)
			} else {
				r.progress("  %s: %.0f%% of %d samples delivering what it sent", d.Role, 100*d.Share, d.Samples)
			}
		}
	}
	r.progress("done; removing the lab and the chain")
	return res, errors.Join(failures...)
}

// round runs each load for every target in turn and appends what it
// measured to rounds[i] (target i). A failed measurement goes to failed,
// which returns an error only when the run must stop.
func (r *run) round(ctx context.Context, round int, targets []target, rounds [][]*Round,
	failed func(*SystemResult, string, error) error) error {
	o := r.o
	of := ""
	if o.Rounds > 1 {
		of = fmt.Sprintf(" (round %d of %d)", round, o.Rounds)
	}
	for i := range targets {
		rounds[i] = append(rounds[i], &Round{})
	}
	this := func(i int) *Round { return rounds[i][round-1] }
	for i, t := range targets {
		r.progress("bulk%s: %s, %s objects over %d keep-alive connections for %v", of, t.name, content.FormatSize(o.BulkSize), o.BulkConns, o.Duration)
		load, err := r.load(ctx, t, wrkRun{ns: t.ns, url: t.url(o.BulkSize), conns: o.BulkConns, duration: o.Duration, script: r.script})
		if err != nil {
			if err := failed(r.systems[i], "bulk", err); err != nil {
				return err
			}
			continue
		}
		this(i).Bulk = load
		r.progress("  %.0f MB/s%s", load.MBPerSec, cpuSummary(load.CPUSecondsPerGB, "CPU-s/GB"))
	}
	for i, t := range targets {
		r.progress("1K close%s: %s, one connection per request, %d concurrent, for %v", of, t.name, o.SmallConns, o.Duration)
		load, err := r.load(ctx, t, wrkRun{ns: t.ns, url: t.url(SmallSize), conns: o.SmallConns, duration: o.Duration, close: true, script: r.script})
		if err != nil {
			if err := failed(r.systems[i], "1K close", err); err != nil {
				return err
			}
			continue
		}
		this(i).Small = load
		r.progress("  %.0f requests/s%s", load.RequestsPerSec, cpuSummary(load.CPUUSPerRequest, "CPU-us/request"))
	}
	for i, t := range targets {
		r.progress("TTFB%s: %s, %d sequential new connections", of, t.name, o.TTFBRequests)
		before, counted := r.firstReplies(ctx, t)
		tt, err := measureTTFB(ctx, t.ns, t.addr, "/data/"+content.FormatSize(SmallSize), o.TTFBRequests)
		if err != nil {
			if err := failed(r.systems[i], "TTFB", err); err != nil {
				return err
			}
			continue
		}
		r.progress("  p50 %.0f us, p99 %.0f us", tt.P50us, tt.P99us)
		if after, ok := r.firstReplies(ctx, t); ok && counted {
			tt.FirstReplies = after.since(before)
			r.progress("  %v", tt.FirstReplies)
		}
		this(i).TTFB = &tt
	}
	return nil
}

// firstReplies reads t's count of responses and of their first replies
// the kernel echoed, if t has one; ok is false without (the reason
// goes to the progress).
func (r *run) firstReplies(ctx context.Context, t target) (f FirstReplies, ok bool) {
	if t.responses == nil {
		return f, false
	}
	f, err := t.responses(ctx)
	if err != nil {
		r.progress("  first replies not counted: %v", err)
		return f, false
	}
	return f, true
}

func cpuSummary(m map[string]float64, unit string) string {
	var parts []string
	for _, role := range []string{RoleProxy, RoleFrontend, RoleShim} {
		if v, ok := m[role]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f", role, v))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ", " + unit + ": " + strings.Join(parts, ", ")
}

// load runs wrk against a target and reads the CPU of its processes
// before and after.
func (r *run) load(ctx context.Context, t target, w wrkRun) (*Load, error) {
	pids := map[string][]int{}
	before := map[string]time.Duration{}
	for role, f := range t.cpu {
		p, err := f()
		if err != nil {
			return nil, err
		}
		pids[role] = p
		if before[role], err = cpuOf(p); err != nil {
			return nil, err
		}
	}
	loopsBefore := map[string]*Loops{}
	for role, read := range t.loops {
		if l, err := read(ctx); err != nil {
			r.progress("  %s workers not read: %v", role, err)
		} else {
			loopsBefore[role] = l
		}
	}
	wait, err := w.start(ctx)
	if err != nil {
		return nil, err
	}
	summary, err := wait()
	if err != nil {
		return nil, err
	}
	used := map[string]time.Duration{}
	for role, p := range pids {
		after, err := cpuOf(p)
		if err != nil {
			return nil, err
		}
		used[role] = after - before[role]
	}
	load := newLoad(summary, used)
	for _, role := range []string{RoleFrontend, RoleShim} {
		before, read := loopsBefore[role], t.loops[role]
		if before == nil || read == nil {
			continue
		}
		after, err := read(ctx)
		if err != nil {
			r.progress("  %s workers not read: %v", role, err)
			continue
		}
		l := after.since(before)
		if role == RoleFrontend {
			load.Loops = l
		} else {
			load.ShimLoops = l
		}
		r.progress("  %s: %v", role, l)
	}
	return load, nil
}

// checkTools fails early when a program the selected systems need is
// missing.
func checkTools(only []string) error {
	need := []string{"ip", "ethtool", "wrk", "nginx"}
	if slices.Contains(only, SystemHAProxy) {
		need = append(need, "haproxy")
	}
	var errs []error
	for _, p := range need {
		if _, err := exec.LookPath(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func hostInfo() Host {
	h := Host{CPUs: runtime.NumCPU()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return h
}
