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
// is accounted for, requests were served, the overload is real (the
// front-end refuses some), and the front-end served what the clients
// received. Which policy does better is for the long runs to say.
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
		checkOverload(t, cfg.Base, r)
		checkFrontendAgrees(t, r)
	}
}

// checkOverload: requests queued. Without queueing a request times out
// only when the client's patience (exponential, mean P) is shorter than
// its service (exponential, mean S_j), which happens with probability
// S_j/(S_j+P): 2.7% of requests over the model's mix, give or take 0.2%
// over the 10000 or so requests of this run. Waiting in an overloaded
// front-end's queues raises both the timeouts and the mean response
// time well above what service alone gives, however the noise falls.
func checkOverload(t *testing.T, model experiment.Config, r experiment.LabResult) {
	t.Helper()
	p := model.Model.TimeoutMean.Seconds()
	var noQueue float64
	tot := r.Loadgen.Total
	for j, c := range r.Loadgen.Classes[:session.NumPages] {
		s := model.ServiceMean[j].Seconds()
		noQueue += float64(c.Requested) * s / (s + p)
	}
	noQueue /= float64(tot.Requested)
	timedOut := float64(tot.TimedOut) / float64(tot.Requested)
	if timedOut < 1.3*noQueue {
		t.Errorf("%s: %.2f%% of requests timed out, %.2f%% would without queueing: no sign of overload",
			r.Lab.Policy, 100*timedOut, 100*noQueue)
	}
	if mean := model.MeanService().Seconds(); r.Lab.MeanRTSeconds < 1.2*mean {
		t.Errorf("%s: mean response time %.3fs against a mean service time of %.3fs: no queueing",
			r.Lab.Policy, r.Lab.MeanRTSeconds, mean)
	}
	if tot.TimedOut+tot.Refused == 0 {
		t.Errorf("%s: nothing timed out or dropped at load 1.4", r.Lab.Policy)
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
