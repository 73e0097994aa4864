package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/tools/content"
	"github.com/qsplice/qsplice/tools/lab"
)

// TestShardedFrontEnd runs a front-end with three shards (-workers 3,
// more than this machine's cores, so that the shards interleave on every
// lock they share), built with the race detector, under 200 concurrent
// clients: half open a connection per request, half keep theirs for
// several. Every body must be exact; every shard must have served a fair
// part of the clients (the fanout hash spreads the even ports Linux
// clients connect from); no handoff may fail, which it would if a
// back-end's C2 reply reached a shard other than the one that chose its
// handoff port; and the race detector must stay silent while the
// controller, run by whichever shard has events, calls into the other
// shards' engines.
//
// Twice: with the workers trading their shards every 5 ms (-gather
// 2,0,5ms: gather whenever spread, spread whenever gathered), so that
// shards change loops hundreds of times mid-flow, frames queued on both
// sides of each handover (frontend/gather.go); and with one worker per
// shard always (-gather off). The front-end's default gathers or not by
// load, between the two; the other lab tests run it.
func TestShardedFrontEnd(t *testing.T) {
	base := needLab(t)
	bin := raceFrontend(t, base.Config().BinDir)
	tradeAndSpread(t, func(t *testing.T, gather string) loopCounts {
		st := shardedFrontEnd(t, bin, gather)
		return loopCounts{st.Gathers, st.Spreads, st.Gathered, true}
	})
}

// loopCounts is what a daemon's /status says of its workers' gathering;
// can: the daemon gathers at all on this lab.
type loopCounts struct {
	gathers, spreads uint64
	gathered, can    bool
}

// tradeAndSpread runs a sharded daemon's load twice: with the workers
// trading their shards every 5 ms (-gather 2,0,5ms), which must make at
// least 10 handovers each way (none where the daemon cannot gather), and
// with -gather off, which must make none.
func tradeAndSpread(t *testing.T, run func(t *testing.T, gather string) loopCounts) {
	t.Run("trading", func(t *testing.T) {
		c := run(t, "2,0,5ms")
		t.Logf("the workers gathered %d times and spread %d times", c.gathers, c.spreads)
		switch {
		case !c.can && c.gathers != 0:
			t.Errorf("the workers gathered %d times where they cannot", c.gathers)
		case c.can && (c.gathers < 10 || c.spreads < 10):
			t.Errorf("the workers gathered %d times and spread %d times, want at least 10 of each", c.gathers, c.spreads)
		}
	})
	t.Run("spread", func(t *testing.T) {
		if c := run(t, "off"); c.gathers != 0 || c.gathered {
			t.Errorf("-gather off: the workers gathered %d times (now %v)", c.gathers, c.gathered)
		}
	})
}

// shardedFrontEnd is TestShardedFrontEnd with -gather gather; it returns
// the front-end's status after the load.
func shardedFrontEnd(t *testing.T, bin, gather string) frontend.Status {
	l := extraLab(t, "w", func(cfg *lab.Config) {
		cfg.BinDir = bin
		cfg.Backends = 2
		cfg.FrontendArgs = []string{"-workers", "3", "-linger", "1s", "-gather", gather}
	})
	const conns, perConn = 200, 3
	failed := concurrentLoad(t, l, conns, perConn)
	st := frontendStatus(t, l)
	t.Logf("shards: %+v", st.Shards)
	if failed > 0 {
		t.Fatalf("%d clients failed", failed)
	}
	if st.Workers != 3 || len(st.Shards) != 3 {
		t.Fatalf("status reports %d workers, %d shards; want 3", st.Workers, len(st.Shards))
	}
	var requests uint64
	for _, s := range st.Shards {
		requests += s.Requests
	}
	if want := uint64(conns * perConn * 3 / 2); requests < want {
		t.Errorf("shards parsed %d requests, want at least %d", requests, want)
	}
	for i, s := range st.Shards {
		if s.Requests < requests/6 {
			t.Errorf("shard %d parsed %d of %d requests: the fanout did not spread the clients", i, s.Requests, requests)
		}
		if s.HandoffsFailed != 0 {
			t.Errorf("shard %d: %d handoffs failed", i, s.HandoffsFailed)
		}
	}
	log, err := os.ReadFile(l.LogPath("frontend"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "DATA RACE") {
		t.Fatalf("the race detector found a race in the sharded front-end:\n%s", log)
	}
	return st
}

// concurrentLoad runs conns clients at once, each making perConn rounds
// of 64 KiB GETs through the VIP: the even clients a connection per
// request, the odd ones two requests per connection. Every body must be
// exact; it reports the clients that failed (the first few as errors).
func concurrentLoad(t *testing.T, l *lab.Lab, conns, perConn int) int {
	t.Helper()
	const size = 64 << 10
	url := fmt.Sprintf("http://%s:8080/data/%s", lab.VIP, content.FormatSize(size))
	var wg sync.WaitGroup
	errs := make(chan error, conns*perConn)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perConn {
				c := oneConnClient(l)
				err := getAndCheck(c.Client, url, size)
				if i%2 == 0 {
					c.CloseIdleConnections() // a connection per request
				} else {
					err = errorsJoin(err, getAndCheck(c.Client, url, size))
					c.CloseIdleConnections()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed < 5 {
			t.Error(err)
		}
		failed++
	}
	return failed
}

// smallRequests returns a function that makes one request for 1 KiB
// through the VIP on a new connection and checks the body.
func smallRequests(t *testing.T, l *lab.Lab) func() {
	const size = 1 << 10
	url := fmt.Sprintf("http://%s:8080/data/%s", lab.VIP, content.FormatSize(size))
	return func() {
		t.Helper()
		c := oneConnClient(l)
		defer c.CloseIdleConnections()
		if err := getAndCheck(c.Client, url, size); err != nil {
			t.Fatal(err)
		}
	}
}

// requestUntilGathered makes one request after another until gathered
// says a daemon's workers gathered, for at most 10 s.
func requestUntilGathered(t *testing.T, request func(), gathered func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n := 1; ; n++ {
		request()
		if gathered() {
			t.Logf("gathered after %d requests", n)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not gathered after %d requests in 10 s", n)
		}
	}
}

// raceFrontend returns a directory with the binaries of dir and
// qsplice-frontend built with the race detector in its place.
func raceFrontend(t *testing.T, dir string) string {
	t.Helper()
	return raceBinary(t, dir, "qsplice-frontend")
}

// raceBinary returns a directory with the binaries of dir and the
// program name (a command of cmd/) built with the race detector in its
// place.
func raceBinary(t *testing.T, dir, name string) string {
	t.Helper()
	out := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == name {
			continue
		}
		if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(out, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "-race", "-o", filepath.Join(out, name), "github.com/qsplice/qsplice/cmd/"+name)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building a race-enabled %s: %v\n%s", name, err, b)
	}
	return out
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// TestFrontEndGathersItsShardsWhileTheLoadIsLight: at the default
// -gather, a front-end of two shards under a light load (sequential
// requests, a connection each) soon serves both from worker 0; from then
// on shard 1's flows are still served (the fanout still gives them to
// shard 1's socket, and its request count grows) while its own worker
// sleeps (its busy time does not move). It fails if gathering never
// happens, if a gathered shard's frames are not read, or if its parked
// worker still runs passes.
func TestFrontEndGathersItsShardsWhileTheLoadIsLight(t *testing.T) {
	needLab(t)
	l := extraLab(t, "g", func(cfg *lab.Config) {
		cfg.Backends = 1
		cfg.FrontendArgs = []string{"-workers", "2", "-linger", "1s"}
	})
	request := smallRequests(t, l)
	// The policy decides at the end of a 100 ms window, on worker 0's
	// passes; each request's Feedback reaches worker 0, so it passes.
	var st frontend.Status
	requestUntilGathered(t, request, func() bool { st = frontendStatus(t, l); return st.Gathered })
	if st.Gathers != 1 || st.Spreads != 0 {
		t.Errorf("%d gathers, %d spreads under a light load, want 1 and 0", st.Gathers, st.Spreads)
	}
	before := st.Shards[1]
	for range 60 {
		request()
	}
	st = frontendStatus(t, l)
	after := st.Shards[1]
	t.Logf("shard 1 before %+v, after %+v", before, after)
	if !st.Gathered || st.Spreads != 0 {
		t.Fatalf("spread again under a light load: gathered %v, %d spreads", st.Gathered, st.Spreads)
	}
	if after.Requests <= before.Requests {
		t.Errorf("shard 1 parsed no request of 60 while gathered (%d before, %d after): the fanout gives it about half", before.Requests, after.Requests)
	}
	if after.HandoffsFailed != 0 {
		t.Errorf("shard 1: %d handoffs failed", after.HandoffsFailed)
	}
	if after.BusySeconds != before.BusySeconds {
		t.Errorf("shard 1's own worker was busy for %.6f s more while its shard was gathered", after.BusySeconds-before.BusySeconds)
	}
}
