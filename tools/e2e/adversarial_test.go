package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/flood"
	"github.com/qsplice/qsplice/tools/lab"
	"github.com/qsplice/qsplice/tools/loadgen"
)

// The live half of issue 9's adversarial suite (make test-adversarial;
// the unit half is the TestAdversarial* tests of each package). An
// attacker in a second client namespace (c2) floods the front-end with
// the project's own generator (cmd/qsplice-flood, package tools/flood)
// while the legitimate client in c1 is measured with qsplice-load.
// make e2e skips these (-skip AdversarialLive) so that make test runs
// the 30 s flood once, from test-adversarial.

// Names in the front-end's /status JSON that these tests read, in one
// place so they can be aligned with the engine's counters at merge.
const (
	// The per-source flow cap's refusals (issue 9, "Bounded state",
	// splice/limits.go): SYNs past the cap are dropped without an
	// answer, handshake ACKs past it (their SYN came while there was
	// room) are reset.
	refusedSYNSourcePath    = "limits.refused_syn_source"
	refusedAcceptSourcePath = "limits.refused_accept_source"
	flowsPath               = "engine.flows"
	spareBytesPath          = "engine.spare_bytes"
	heapInusePath           = "heap_inuse_bytes"
	heapAllocPath           = "heap_alloc_bytes"
	kernelDropsPath         = "kernel_drops"
	heapLivePath            = "heap_live_bytes"
	gcCyclesPath            = "gc_cycles"
)

// Addresses of the attack. The heads source is in the lab's subnet but
// owned by no kernel (hosts are .2-.101), so the front-end's answers
// reach the attacker's MAC and its kernel drops them without a RST.
const (
	attackerHost = "c2"
	headsSource  = "198.18.0.200"
)

// synFloodRate is the live SYN flood's rate, SYNs per second; the
// front-end must answer at least most of them for the run to count.
// QSPLICE_FLOOD_RATE overrides it for measurements. Measured on the
// 2-core development machine shared with other test runs: at 10,000/s
// the front-end answered every SYN (no kernel drops); at 20,000/s, with
// the generator on the same two cores, its socket dropped 6-21% of the
// frames, the legitimate client's SYNs among them.
const synFloodRate = 10000

// TestAdversarialLiveSynFlood: a 30 s SYN flood from spoofed addresses
// in 198.18.128.0/17 does not hurt a legitimate client: its requests
// succeed at >= 99% and their p99 latency stays within 2x of the same
// load unloaded (with an absolute floor, see latencyBound), and the
// front-end's heap stays flat (sampled every second, printed).
func TestAdversarialLiveSynFlood(t *testing.T) {
	requireLive(t)
	l := extraLab(t, "f", func(cfg *lab.Config) { cfg.Clients = 2 })
	st := rawStatus(t, l)
	feMAC, _ := st["mac"].(string)
	rate := float64(synFloodRate)
	if v := os.Getenv("QSPLICE_FLOOD_RATE"); v != "" {
		fmt.Sscan(v, &rate)
	}

	// The sampler starts with the unloaded run, so the heap's growth
	// from the legitimate traffic alone can be told from the flood's.
	heap := startHeapSampler(t, l)
	before := legitLoad(t, l, 8*time.Second)
	floodStart := time.Since(heap.start)
	logLoad(t, "unloaded, before", before)

	const floodFor = 30 * time.Second
	floodDone := startFlood(t, l, "-mode", "syn", "-target", lab.VIP+":80,8080", "-dst-mac", feMAC,
		"-rate", fmt.Sprint(rate), "-duration", floodFor.String())
	// The load's 2 s warm-up puts its measured window inside the flood.
	loaded := legitLoad(t, l, floodFor-3*time.Second)
	sum := floodDone()
	all := heap.stop()
	after := legitLoad(t, l, 8*time.Second)
	unloadedPhase, series := all.split(floodStart)
	logLoad(t, "during the flood", loaded)
	logLoad(t, "unloaded, after", after)
	t.Logf("attacker: %v", sum)
	all.log(t)
	t.Logf("the flood started at %.0fs; heap in use grew %.0f B/s with the legitimate client alone, %.0f B/s during the flood (GC cycles included)", floodStart.Seconds(),
		unloadedPhase.growth(), series.growth())
	if len(unloadedPhase.samples) < 5 || len(series.samples) < 20 {
		t.Fatalf("only %d samples before and %d during the flood: /status did not answer", len(unloadedPhase.samples), len(series.samples))
	}

	// The flood really reached the front-end: most SYNs were answered
	// with a cookie (those that were not were dropped by the kernel's
	// socket buffer or the front-end's own limits).
	if sum.Sent < uint64(rate*floodFor.Seconds()*0.8) {
		t.Errorf("the generator sent only %d SYNs in %v at %g/s", sum.Sent, floodFor, rate)
	}
	if sum.Answered < sum.Sent/2 {
		t.Errorf("the front-end answered %d of %d SYNs: the flood did not exercise it", sum.Answered, sum.Sent)
	}
	checkSuccess(t, "during the flood", loaded, 0.99)
	// The bound is against the run before the flood. The run after it
	// is not a baseline (that would let a busy machine excuse a bad
	// flood run); it is there to tell, when the bound fails, whether the
	// front-end was still slow without the flood: then the machine was
	// busy, not the flood effective.
	base, got := smallP99(before), smallP99(loaded)
	if bound := latencyBound(base); got > bound {
		t.Errorf("p99 of the 1 KiB requests %.2f ms during the flood, %.2f ms unloaded before it (%.2f ms after it): over the bound %.2f ms",
			got, base, smallP99(after), bound)
	}
	// Flat: the heap at the end of the flood is within a quarter (and at
	// least 4 MiB, one arena of small allocations plus GC pacing) of the
	// heap at its start. SYN cookies keep no state before the final ACK,
	// so nothing a spoofed SYN does should be left on the heap.
	first, last := series.samples[0].inuse, series.samples[len(series.samples)-1].inuse
	if slack := max(first/4, 4<<20); last > first+slack {
		t.Errorf("front-end heap in use grew from %d to %d bytes during the flood (bound +%d)", first, last, slack)
	}
}

// requireLive fails the test, instead of letting it skip, when make
// test-adversarial asked for the live tests (QSPLICE_ADVERSARIAL_LIVE=
// required) and there is no lab: they must not pass by not running.
func requireLive(t *testing.T) {
	t.Helper()
	if theLab == nil && os.Getenv("QSPLICE_ADVERSARIAL_LIVE") == "required" {
		t.Fatal("QSPLICE_ADVERSARIAL_LIVE=required but there is no lab (the live adversarial tests need root)")
	}
}

// latencyBound is the p99 the loaded run may reach: twice the unloaded
// p99, but never less than the unloaded p99 plus 10 ms. The floor: on a
// 2-core machine the attacker, the front-end, two shims, two test
// servers and the load generator share the cores, so a thread that
// becomes runnable can wait a few scheduler slices (3-4 ms each with
// two CPUs) for one; an unloaded p99 of a millisecond or two, doubled,
// would measure that wait and not the front-end. What the bound is for
// stays far above the floor: a legitimate SYN lost to the flood costs a
// 1 s retransmission, and a front-end queueing behind the flood shows
// as tens to hundreds of milliseconds.
func latencyBound(unloadedP99 float64) float64 { return max(2*unloadedP99, unloadedP99+10) }

// TestAdversarialLiveStateExhaustion: 100,000 flows from one source,
// each a completed handshake and a partial head followed by silence,
// while a second source (c1) is served normally. Past the per-source cap
// the front-end refuses the attacker's flows (counted in /status), the
// legitimate client's requests succeed, and once the attacker's flows
// have expired the front-end's heap is back within 10% of where it
// started (what the first collection after they expired found live,
// less the spare records and buffers the engines keep by design,
// against the heap in use before).
func TestAdversarialLiveStateExhaustion(t *testing.T) {
	requireLive(t)
	l := extraLab(t, "x", func(cfg *lab.Config) { cfg.Clients = 2 })
	st := rawStatus(t, l)
	feMAC, _ := st["mac"].(string)
	const flows = 100_000
	// The heap in use before the attack, garbage not yet collected
	// included: an upper bound of what is live then. After the attack
	// the test reads what a collection found live once the attacker's
	// flows were gone (see waitForGC), so a leftover shows in full.
	heapBefore, _ := lookupNumber(st, heapInusePath)
	refusedSYNBefore, hasCounter := lookupNumber(st, refusedSYNSourcePath)
	refusedAcceptBefore, _ := lookupNumber(st, refusedAcceptSourcePath)

	heap := startHeapSampler(t, l)
	floodDone := startFlood(t, l, "-mode", "heads", "-target", lab.VIP+":80,8080", "-dst-mac", feMAC,
		"-source", headsSource, "-rate", "10000", "-flows", fmt.Sprint(flows), "-duration", "0", "-linger", "2s")
	legit := legitLoad(t, l, 10*time.Second)
	sum := floodDone()
	// The attacker's flows end with the head deadline (408) and the
	// linger after it; wait until the front-end holds none of them.
	// /status may fail meanwhile (503: the event loop did not answer
	// within 2 s while it expired the flood's flows): count, retry.
	c := l.HTTPClient("c1")
	c.Timeout = 5 * time.Second
	busy := 0
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		st, err := fetchStatus(c)
		if err != nil {
			busy++
		} else if n, _ := lookupNumber(st, flowsPath); n <= 2 {
			break
		}
		time.Sleep(time.Second)
	}
	if busy > 0 {
		t.Logf("/status failed %d times while the attacker's flows expired", busy)
	}
	series := heap.stop()
	after := rawStatus(t, l)
	flowsLeft, _ := lookupNumber(after, flowsPath)
	heapAfter := waitForGC(t, l, after)
	// The engines keep spare flow records and request buffers for the
	// next connections, up to 256 of each per shard after a load that
	// used them (splice/flow.go): 0.8 MB in the runs that found this,
	// about 6% of the heap before, which a fresh front-end does not
	// hold. That is memory kept by design, not left behind by the
	// attack, and without it the check failed one run in three.
	spare, _ := lookupNumber(after, spareBytesPath)
	refusedSYNAfter, _ := lookupNumber(after, refusedSYNSourcePath)
	refusedAcceptAfter, _ := lookupNumber(after, refusedAcceptSourcePath)
	refusedSYN := refusedSYNAfter - refusedSYNBefore
	refused := refusedSYN + refusedAcceptAfter - refusedAcceptBefore
	logLoad(t, "second source during the attack", legit)
	t.Logf("attacker: %v", sum)
	series.log(t)
	t.Logf("heap: %.0f bytes in use before the attack, %.0f live after its flows expired (%+.1f%%), %.0f of them spare records and buffers",
		heapBefore, heapAfter, 100*(heapAfter/heapBefore-1), spare)

	// Every SYN reached the front-end: answered, or dropped by the cap.
	if sum.Sent != flows || float64(sum.Answered)+refusedSYN < flows*9/10 {
		t.Errorf("the attacker sent %d SYNs, %d were answered and %.0f refused by the per-source cap: the attack did not reach the front-end",
			sum.Sent, sum.Answered, refusedSYN)
	}
	checkSuccess(t, "second source", legit, 0.99)
	peak := series.peakFlows()
	if peak > flows/2 {
		t.Errorf("the front-end held up to %d flows for one source: no per-source cap", peak)
	}
	switch {
	case !hasCounter:
		t.Errorf("/status has no %q: the per-source cap's refusals are not counted", refusedSYNSourcePath)
	case refused < flows/2:
		t.Errorf("the per-source cap refused %.0f of %d flows from one source, want most of them", refused, flows)
	}
	t.Logf("per-source cap: %.0f SYNs dropped, %.0f handshake ACKs reset", refusedSYN, refused-refusedSYN)
	if flowsLeft > 2 {
		t.Errorf("%.0f flows left 90 s after the attack: the attacker's flows do not expire", flowsLeft)
	}
	if heapAfter-spare > 1.10*heapBefore {
		t.Errorf("heap live %.0f bytes after the flows expired (%.0f of them spares), %.0f in use before: more than 10%% above", heapAfter, spare, heapBefore)
	}
}

// legitLoad runs the legitimate client in c1 for d (after a 1 s warm-up):
// 1 KiB requests at 100/s, one connection each (every request a new
// handshake through the SYN-cookie path the flood hits), and 1 MiB
// downloads at 4/s.
func legitLoad(t *testing.T, l *lab.Lab, d time.Duration) loadgen.Result {
	t.Helper()
	out := filepath.Join(t.TempDir(), "load.json")
	cmd := l.Command("c1", filepath.Join(l.Config().BinDir, "qsplice-load"), "-target", fmt.Sprintf("http://%s:8080", lab.VIP),
		"-duration", d.String(), "-warmup", "2s", "-timeout", "5s", "-json", out, "-progress=false",
		"-stream", "name=small,rate=100,path=/data/1K", "-stream", "name=download,rate=4,path=/data/1M")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("qsplice-load: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res loadgen.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func logLoad(t *testing.T, what string, r loadgen.Result) {
	t.Helper()
	for _, s := range append(r.Streams, r.Total) {
		t.Logf("%s: %-8s sent %5d  2xx %5d  other %d  errors %+v  p50 %.2f ms  p99 %.2f ms  max %.2f ms",
			what, s.Name, s.Sent, s.Completed.OK, s.Completed.Total()-s.Completed.OK, s.Errors, s.Latency.P50Ms, s.Latency.P99Ms, s.Latency.MaxMs)
	}
}

func checkSuccess(t *testing.T, what string, r loadgen.Result, want float64) {
	t.Helper()
	tot := r.Total
	if tot.Offered == 0 || float64(tot.Completed.OK) < want*float64(tot.Offered) {
		t.Errorf("%s: %d of %d requests offered succeeded, want >= %.0f%%", what, tot.Completed.OK, tot.Offered, 100*want)
	}
}

func smallP99(r loadgen.Result) float64 {
	for _, s := range r.Streams {
		if s.Name == "small" {
			return s.Latency.P99Ms
		}
	}
	return 0
}

// startFlood runs qsplice-flood in the attacker's namespace; the returned
// function waits for it and returns its summary.
func startFlood(t *testing.T, l *lab.Lab, args ...string) func() flood.Summary {
	t.Helper()
	out := filepath.Join(t.TempDir(), "flood.json")
	// At a lower priority: the attacker stands for another machine, but
	// in the lab it shares the front-end's two cores, and the CPU it
	// takes from the front-end is an artefact of the lab, not something
	// a real attacker on the LAN could do.
	argv := append([]string{"nice", "-n", "10", filepath.Join(l.Config().BinDir, "qsplice-flood"), "-i", "eth0", "-json", out}, args...)
	cmd := l.Command(attackerHost, argv...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var waitErr error
	wait := func() { once.Do(func() { waitErr = cmd.Wait() }) }
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
		wait()
	})
	return func() flood.Summary {
		t.Helper()
		wait()
		if waitErr != nil {
			t.Fatalf("qsplice-flood: %v\n%s", waitErr, log.String())
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("qsplice-flood summary: %v\n%s", err, log.String())
		}
		var s flood.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		t.Logf("qsplice-flood output:\n%s", strings.TrimSpace(log.String()))
		return s
	}
}

// heapSample is one second of the front-end as /status shows it.
type heapSample struct {
	at           time.Duration
	inuse, alloc uint64
	flows        uint64
	kernelDrops  uint64 // frames the kernel dropped before the front-end read them
}

type heapSeries struct{ samples []heapSample }

// split cuts the series at time at.
func (s heapSeries) split(at time.Duration) (before, after heapSeries) {
	for i, x := range s.samples {
		if x.at >= at {
			return heapSeries{s.samples[:i]}, heapSeries{s.samples[i:]}
		}
	}
	return s, heapSeries{}
}

// growth is the change of heap in use per second over the series.
func (s heapSeries) growth() float64 {
	if len(s.samples) < 2 {
		return 0
	}
	a, b := s.samples[0], s.samples[len(s.samples)-1]
	return (float64(b.inuse) - float64(a.inuse)) / (b.at - a.at).Seconds()
}

func (s heapSeries) log(t *testing.T) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "front-end heap, one sample a second:\n%6s %14s %14s %8s %12s\n", "t", "heap_inuse", "heap_alloc", "flows", "kernel_drops")
	for _, x := range s.samples {
		fmt.Fprintf(&b, "%5.0fs %14d %14d %8d %12d\n", x.at.Seconds(), x.inuse, x.alloc, x.flows, x.kernelDrops)
	}
	t.Log(b.String())
}

func (s heapSeries) peakFlows() uint64 {
	var p uint64
	for _, x := range s.samples {
		p = max(p, x.flows)
	}
	return p
}

type heapSampler struct {
	start time.Time
	stopc chan struct{}
	done  chan heapSeries
}

func (h heapSampler) stop() heapSeries {
	close(h.stopc)
	return <-h.done
}

// startHeapSampler reads the front-end's /status once a second (the
// first sample at once) until stop.
func startHeapSampler(t *testing.T, l *lab.Lab) heapSampler {
	h := heapSampler{start: time.Now(), stopc: make(chan struct{}), done: make(chan heapSeries, 1)}
	c := l.HTTPClient("c1")
	c.Timeout = 3 * time.Second
	start := h.start
	go func() {
		var s heapSeries
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if st, err := fetchStatus(c); err == nil {
				inuse, _ := lookupNumber(st, heapInusePath)
				alloc, _ := lookupNumber(st, heapAllocPath)
				flows, _ := lookupNumber(st, flowsPath)
				drops, _ := lookupNumber(st, kernelDropsPath)
				s.samples = append(s.samples, heapSample{at: time.Since(start), inuse: uint64(inuse), alloc: uint64(alloc),
					flows: uint64(flows), kernelDrops: uint64(drops)})
			}
			select {
			case <-h.stopc:
				h.done <- s
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-h.stopc:
		default:
			h.stop()
		}
	})
	return h
}

// rawStatus is the front-end's /status as generic JSON, so a test can
// name a counter by its path (see the constants above).
func rawStatus(t *testing.T, l *lab.Lab) map[string]any {
	t.Helper()
	c := l.HTTPClient("c1")
	c.Timeout = 5 * time.Second
	st, err := fetchStatus(c)
	if err != nil {
		t.Fatalf("front-end status: %v", err)
	}
	return st
}

func fetchStatus(c *http.Client) (map[string]any, error) {
	resp, err := c.Get(lab.AdminURL + "/status")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status: %s", resp.Status)
	}
	var st map[string]any
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// lookupNumber follows a dotted path ("engine.flows") into decoded JSON.
func lookupNumber(st map[string]any, path string) (float64, bool) {
	var v any = st
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return 0, false
		}
		if v, ok = m[k]; !ok {
			return 0, false
		}
	}
	n, ok := v.(float64)
	return n, ok
}

// waitForGC waits until the front-end has finished a collection after
// the status st was read and returns what that collection found live.
// An idle daemon allocates too little to start one, but the Go runtime
// forces a collection when none ran for two minutes, so this ends within
// about that; no endpoint to trigger one is needed (an unauthenticated
// admin address that makes the daemon collect on demand would be a gift
// to anyone who can reach it).
func waitForGC(t *testing.T, l *lab.Lab, st map[string]any) float64 {
	t.Helper()
	start, ok := lookupNumber(st, gcCyclesPath)
	if !ok {
		t.Fatalf("/status has no %q", gcCyclesPath)
	}
	c := l.HTTPClient("c1")
	c.Timeout = 5 * time.Second
	begun := time.Now()
	for time.Since(begun) < 150*time.Second {
		time.Sleep(time.Second)
		now, err := fetchStatus(c)
		if err != nil {
			continue
		}
		if n, _ := lookupNumber(now, gcCyclesPath); n > start {
			live, _ := lookupNumber(now, heapLivePath)
			t.Logf("a collection finished %.0f s after the flows expired", time.Since(begun).Seconds())
			return live
		}
	}
	t.Fatalf("no collection in %v after the flows expired", time.Since(begun).Round(time.Second))
	return 0
}
