package e2e

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/experiment"
	"github.com/qsplice/qsplice/tools/loadgen"
	"github.com/qsplice/qsplice/tools/netns"
	"github.com/qsplice/qsplice/tools/session"
)

// TestLifoPriSweep runs the lab mode of the LIFO-Pri experiment briefly:
// single-fifo and lifo-pri at load 1.4, the model at a fifth of its
// times. It checks what holds on any run, however short: every request
// is accounted for, requests were served, the overload is real
// (requests wait in the front-end's queues), and the front-end served what the clients
// received; and LIFO-Pri puts its transactional classes first. Which
// policy does better for the shop is for the long runs to say.
//
// No warm-up and no drain: then every request the front-end saw came
// from a counted session, and its counters can be held against the load
// generator's.
func TestLifoPriSweep(t *testing.T) {
	base := needLab(t)
	cfg := experiment.DefaultLabConfig()
	cfg.BinDir = base.Config().BinDir
	cfg.Policies = []sched.Mode{sched.ModeSingleFIFO, sched.ModeLifoPri}
	cfg.Loads = []float64{1.4}
	// A session lasts about 13 s at this scale; 30 s reach full load.
	cfg.TimeScale = 0.2
	cfg.Warmup, cfg.Duration, cfg.Drain = 0, 30*time.Second, 0
	ctx, cancel := context.WithTimeout(context.Background(), 85*time.Second)
	defer cancel()
	results, err := experiment.RunLab(ctx, cfg)
	for _, r := range results {
		// RunLab has removed its labs, failing or not.
		if left, lerr := netns.List("qs-" + r.LabName + "-"); lerr != nil || len(left) > 0 {
			t.Errorf("lab %s left namespaces %v (%v)", r.LabName, left, lerr)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("%d results, want one per policy", len(results))
	}
	for _, r := range results {
		l := r.Lab
		t.Logf("%s: completed %.1f%% timed out %.1f%% dropped %.1f%% not generated %.1f%% failed %.1f%%, mean RT %.3fs (model time); per class %v; sessions %+v",
			l.Policy, l.CompletedPct, l.TimedOutPct, l.DroppedPct, l.NotGeneratedPct, r.FailedPct, l.MeanRTSeconds, l.PerClass, r.Loadgen.Sessions)
		checkAccounting(t, r)
		if l.Requests.Completed < 1000 {
			t.Errorf("%s: %d requests completed, want the cluster busy", l.Policy, l.Requests.Completed)
		}
		checkOverload(t, r)
		if l.Policy == sched.ModeLifoPri.String() {
			checkPriority(t, r)
		}
		checkFrontendAgrees(t, r)
	}
}

// checkOverload: requests queued. The front-end's queue-wait histogram
// says so directly: at load 1.4 the back-ends' slots are full most of
// the time, so a good share of requests (a quarter under single-fifo, an
// eighth under LIFO-Pri, whose priority classes wait for nothing) waits
// longer than 20 ms, about half a mean service at this time scale. On an
// idle cluster none would.
//
// Neither the clients' timeouts nor their mean response time make a
// test: a client that gives up closes its connection with a FIN, which
// HTTP allows as a half-close, so its request still runs; and under
// LIFO-Pri the completed requests are mostly those that waited little.
// CI run 14 saw LIFO-Pri's mean response at 1.18 mean services, and its
// timeouts at 1.37 times what service alone gives, under real overload.
func checkOverload(t *testing.T, r experiment.LabResult) {
	t.Helper()
	var waits, long int64
	for _, c := range r.Frontend {
		waits += c.Waits
		long += c.WaitedOver20ms
	}
	t.Logf("%s: %d of %d dispatched requests waited over 20 ms", r.Lab.Policy, long, waits)
	if waits == 0 || float64(long) < 0.04*float64(waits) {
		t.Errorf("%s: %d of %d dispatched requests waited over 20 ms: no sign of overload",
			r.Lab.Policy, long, waits)
	}
}

// checkPriority: under LIFO-Pri the four transactional classes go before
// the four browsing ones, so their requests wait, on average, well under
// half as long (measured: about 1 ms against 40).
func checkPriority(t *testing.T, r experiment.LabResult) {
	t.Helper()
	var meanWait [2]float64
	for group, classes := range [2][]experiment.FrontendClass{
		r.Frontend[session.Main:session.Login], r.Frontend[session.Login:session.NumPages]} {
		var sum float64
		var n int64
		for _, c := range classes {
			sum += c.WaitSum
			n += c.Waits
		}
		if n == 0 {
			t.Fatalf("%s: no %s requests dispatched", r.Lab.Policy, [2]string{"browsing", "transactional"}[group])
		}
		meanWait[group] = sum / float64(n)
	}
	if meanWait[1] >= meanWait[0]/2 {
		t.Errorf("%s: transactional requests waited %.1f ms on average, browsing ones %.1f ms: no priority",
			r.Lab.Policy, 1e3*meanWait[1], 1e3*meanWait[0])
	}
}

// checkAccounting: every class's counts add up, the classes add up to the
// total, and the shares of the total add up to 100%.
func checkAccounting(t *testing.T, r experiment.LabResult) {
	t.Helper()
	lg := r.Loadgen
	var sum loadgen.ClassResult
	for _, c := range lg.Classes {
		if c.Requested != c.Completed+c.TimedOut+c.Refused+c.Other+c.Errors {
			t.Errorf("%s %s: %+v does not add up", r.Lab.Policy, c.Name, c)
		}
		sum.Requested += c.Requested
		sum.Completed += c.Completed
		sum.TimedOut += c.TimedOut
		sum.Refused += c.Refused
		sum.NotGenerated += c.NotGenerated
	}
	tot := lg.Total
	if sum.Requested != tot.Requested || sum.Completed != tot.Completed || sum.TimedOut != tot.TimedOut ||
		sum.Refused != tot.Refused || sum.NotGenerated != tot.NotGenerated {
		t.Errorf("%s: classes add up to %+v, total %+v", r.Lab.Policy, sum, tot)
	}
	s := lg.Sessions
	if s.Started != s.Completed+s.Abandoned+s.Unfinished || s.Abandoned == 0 {
		t.Errorf("%s: sessions %+v do not add up, or none left", r.Lab.Policy, s)
	}
	if tot.NotGenerated == 0 {
		t.Errorf("%s: sessions left but no page counts as not generated", r.Lab.Policy)
	}
	l := r.Lab
	if pct := l.CompletedPct + l.TimedOutPct + l.DroppedPct + l.NotGeneratedPct + r.FailedPct; math.Abs(pct-100) > 1e-6 {
		t.Errorf("%s: shares add up to %.6f%%", l.Policy, pct)
	}
	if int64(l.Requests.Completed) != tot.Completed || int64(l.Requests.Dropped) != tot.Refused {
		t.Errorf("%s: result %+v is not qsplice-load's %+v", l.Policy, l.Requests, tot)
	}
}

// checkFrontendAgrees holds the front-end's per-class /metrics against
// what the clients got. Every page a client received the front-end
// counted as served; it also counts the few a back-end finished just
// after the client gave up, so served lies between completed and
// completed + timed out, give or take a few feedback messages in flight
// or lost. Each 503 the clients saw is a queue-full refusal.
func checkFrontendAgrees(t *testing.T, r experiment.LabResult) {
	t.Helper()
	for p, c := range r.Loadgen.Classes[:session.NumPages] {
		fe := r.Frontend[p]
		slack := max(3, c.Completed/100)
		if fe.Served < c.Completed-slack || fe.Served > c.Completed+c.TimedOut+slack {
			t.Errorf("%s %s: front-end served %d, clients completed %d and timed out %d",
				r.Lab.Policy, c.Name, fe.Served, c.Completed, c.TimedOut)
		}
		if d := fe.QueueFull - c.Refused; d < -slack || d > slack {
			t.Errorf("%s %s: front-end refused %d as queue-full, clients saw %d 503s",
				r.Lab.Policy, c.Name, fe.QueueFull, c.Refused)
		}
	}
}
