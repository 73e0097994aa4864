package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/qsplice/qsplice/backend"
	"github.com/qsplice/qsplice/internal/procstat"
	"github.com/qsplice/qsplice/tools/lab"
)

// TestShardedShim runs a shim with three workers (-workers 3, more than
// this machine's cores), built with the race detector, under the 200
// concurrent clients of TestShardedFrontEnd. Every body must be exact,
// every worker's shard must have translated replies, and the race
// detector must stay silent.
//
// Twice: with the workers trading their shards every 5 ms (-gather
// 2,0,5ms: gather whenever spread, spread whenever gathered), so that
// shards change loops hundreds of times mid-flow, with frames queued for
// a hold on both sides of a handover and each TAP queue's read disarmed
// on one thread and armed on the other (backend/gather.go); and with one
// worker per shard always (-gather off). The shim's default gathers or
// not by load; the other lab tests run it. With the lab's offloads off
// the shim reads the portable TAP, where the workers never gather: the
// trading run then checks that they did not.
func TestShardedShim(t *testing.T) {
	base := needLab(t)
	bin := raceBinary(t, base.Config().BinDir, "qsplice-backend")
	tradeAndSpread(t, func(t *testing.T, gather string) loopCounts {
		st := shardedShim(t, bin, gather)
		return loopCounts{st.Gathers, st.Spreads, st.Gathered, st.Offloads}
	})
}

// shardedShim is TestShardedShim with -gather gather; it returns the
// shim's status after the load.
func shardedShim(t *testing.T, bin, gather string) backend.Status {
	l := extraLab(t, "s", func(cfg *lab.Config) {
		cfg.BinDir = bin
		cfg.Backends = 1
		cfg.BackendArgs = []string{"-workers", "3", "-linger", "1s", "-gather", gather}
	})
	failed := concurrentLoad(t, l, 200, 3)
	st := shimStatus(t, l, 1)
	if failed > 0 {
		t.Fatalf("%d clients failed", failed)
	}
	if len(st.Workers) != 3 {
		t.Fatalf("status reports %d workers, want 3", len(st.Workers))
	}
	for i, w := range st.Workers {
		t.Logf("worker %d: translated %d, handed over %d (lost %d), tx errors %d", i, w.Shim.Translated, w.HandedOver, w.HandoffsLost, w.TxErrors)
		if w.Shim.Translated < st.Shim.Translated/10 {
			t.Errorf("worker %d's shard translated %d of %d replies: the fanout did not spread the connections", i, w.Shim.Translated, st.Shim.Translated)
		}
		if w.TxErrors != 0 {
			t.Errorf("worker %d: %d writes failed", i, w.TxErrors)
		}
	}
	log, err := os.ReadFile(l.LogPath("backend-b1"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "DATA RACE") {
		t.Fatalf("the race detector found a race in the sharded shim:\n%s", log)
	}
	return st
}

// TestShimGathersItsShardsWhileTheLoadIsLight: at the default -gather, a
// shim of two workers under a light load (sequential requests, a
// connection each) soon serves both shards from worker 0; from then on
// worker 1's shard still translates replies (the fanout and the TAP
// still give it half the connections) while worker 1's thread sleeps:
// it is not woken once in 60 requests, which it would be for every
// frame of its TAP queue if its read had not moved to worker 0's thread
// (link.UringTAP.Disarm). It fails if gathering never happens, if a
// gathered shard's frames are not read, or if its parked thread wakes.
// With the lab's offloads off (the portable TAP, no gathering) it checks
// that the workers stay apart.
func TestShimGathersItsShardsWhileTheLoadIsLight(t *testing.T) {
	needLab(t)
	l := extraLab(t, "h", func(cfg *lab.Config) {
		cfg.Backends = 1
		cfg.BackendArgs = []string{"-workers", "2", "-linger", "1s"}
	})
	request := smallRequests(t, l)
	if st := shimStatus(t, l, 1); !st.Offloads {
		for range 30 {
			request()
		}
		if st = shimStatus(t, l, 1); st.Gathered || st.Gathers != 0 {
			t.Errorf("the portable TAP's workers gathered (%d times, now %v)", st.Gathers, st.Gathered)
		}
		return
	}
	var st backend.Status
	requestUntilGathered(t, request, func() bool { st = shimStatus(t, l, 1); return st.Gathered })
	if st.Gathers != 1 || st.Spreads != 0 {
		t.Errorf("%d gathers, %d spreads under a light load, want 1 and 0", st.Gathers, st.Spreads)
	}
	pid := shimPID(t, l)
	thread := st.Workers[1].Thread
	before, woke := st.Workers[1], threadWakeUps(t, pid, thread)
	for range 60 {
		request()
	}
	st = shimStatus(t, l, 1)
	after, wokeAfter := st.Workers[1], threadWakeUps(t, pid, thread)
	t.Logf("worker 1 (thread %d): translated %d -> %d, woke %d -> %d", thread, before.Shim.Translated, after.Shim.Translated, woke, wokeAfter)
	if !st.Gathered || st.Spreads != 0 {
		t.Fatalf("spread again under a light load: gathered %v, %d spreads", st.Gathered, st.Spreads)
	}
	if after.Shim.Translated <= before.Shim.Translated {
		t.Errorf("worker 1's shard translated nothing in 60 requests while gathered (%d before, %d after): the fanout gives it about half", before.Shim.Translated, after.Shim.Translated)
	}
	if wokeAfter-woke > 2 {
		t.Errorf("worker 1's thread woke %d times in 60 requests while its shard was gathered", wokeAfter-woke)
	}
}

// shimStatus fetches shim k's /status.
func shimStatus(t testing.TB, l *lab.Lab, k int) backend.Status {
	t.Helper()
	var st backend.Status
	adminJSON(t, l, fmt.Sprintf("back-end %d status", k), fmt.Sprintf("http://%s:%d/status", l.BackendAddr(k), lab.BackendAdminPort), &st)
	return st
}

// shimPID is the pid of the lab's first shim.
func shimPID(t *testing.T, l *lab.Lab) int {
	t.Helper()
	pid, err := l.PID("backend-b1")
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// threadWakeUps is how often a thread of process pid has gone to sleep
// and woken (its voluntary context switches).
func threadWakeUps(t *testing.T, pid, tid int) int {
	t.Helper()
	n, err := procstat.WakeUps(pid, tid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
