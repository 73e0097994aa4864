package experiment

import (
	"bytes"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/conf"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/tools/loadgen"
	"github.com/qsplice/qsplice/tools/session"
	"github.com/qsplice/qsplice/tools/testserver"
)

func TestPresetConfig(t *testing.T) {
	shop, err := PresetConfig(PresetShop, sched.ModeEightFIFO, 1.2)
	if err != nil || shop != DefaultConfig(sched.ModeEightFIFO, 1.2) {
		t.Fatalf("shop preset %+v, %v: want DefaultConfig", shop, err)
	}
	retry, err := PresetConfig(PresetRetry, sched.ModeEightFIFO, 1.2)
	if err != nil || retry.Mode != sched.ModeEightFIFO || retry.Load != 1.2 {
		t.Fatalf("retry preset %+v, %v", retry, err)
	}
	if err := retry.validate(); err != nil {
		t.Fatal(err)
	}
	// The premise of the preset: the single FIFO queue (100 requests)
	// holds about one patience of the cluster's work.
	if queued := 100 / retry.Capacity(); queued < 6 || queued > 9 {
		t.Errorf("a full single FIFO queue is %.1f s of work, want about the 8 s patience", queued)
	}
	if m := retry.Model; m.Retries != 5 || m.AbandonProb != 0.1 || m.TimeoutMean != 8*time.Second || m.ThinkMean != 7*time.Second {
		t.Errorf("retry clients %+v", m)
	}
	if retry.ServiceMean[session.Confirm] != 960*time.Millisecond || retry.Slots() != 5 {
		t.Errorf("retry cluster: %d slots, confirm %v", retry.Slots(), retry.ServiceMean[session.Confirm])
	}
	_, err = PresetConfig("shopping", sched.ModeLifoPri, 1)
	if err == nil || !strings.Contains(err.Error(), `"shopping"`) || !strings.Contains(err.Error(), "shop, retry") {
		t.Errorf("unknown preset: err = %v, want it named with the choices", err)
	}
	if got := Presets(); len(got) != 2 || got[0] != PresetShop || got[1] != PresetRetry {
		t.Errorf("Presets() = %v", got)
	}
}

// retryShared is one sweep of the retry preset at the default seed and
// full window over the loads the tests below look at.
var retryShared = struct {
	once    sync.Once
	results []Result
	err     error
}{}

var retryTestLoads = []float64{0.5, 0.7, TableLoad}

func retrySweep(t *testing.T) []Result {
	t.Helper()
	retryShared.once.Do(func() {
		retryShared.results, retryShared.err = Sweep(RetryConfig(sched.ModeLifoPri, 1),
			[]sched.Mode{sched.ModeSingleFIFO, sched.ModeLifoPri}, retryTestLoads)
	})
	if retryShared.err != nil {
		t.Fatal(retryShared.err)
	}
	return retryShared.results
}

// At 1.4 the retry preset gives the publication's sizes: single FIFO
// near 30% completed, LIFO-Pri above half, and several times the
// confirm pages.
func TestRetryPresetOverload(t *testing.T) {
	res := retrySweep(t)
	single := find(t, res, sched.ModeSingleFIFO, TableLoad)
	lp := find(t, res, sched.ModeLifoPri, TableLoad)
	if single.CompletedPct >= 40 {
		t.Errorf("single FIFO completed %.1f%%, want < 40%%", single.CompletedPct)
	}
	if lp.CompletedPct <= 50 {
		t.Errorf("LIFO-Pri completed %.1f%%, want > 50%%", lp.CompletedPct)
	}
	sc, lc := single.PerClass[session.Confirm], lp.PerClass[session.Confirm]
	if float64(lc) <= 2.5*float64(sc) {
		t.Errorf("confirm: LIFO-Pri %d, single FIFO %d; want more than 2.5x", lc, sc)
	}
	if lp.LIFOFraction < 0.9 {
		t.Errorf("browsing LIFO in only %.0f%% of the intervals at 1.4", 100*lp.LIFOFraction)
	}
}

// Below capacity the retry preset's LIFO-Pri costs nothing: the switch
// stays FIFO and response times are a single FIFO queue's.
func TestRetryPresetBelowCapacity(t *testing.T) {
	res := retrySweep(t)
	for _, load := range []float64{0.5, 0.7} {
		single := find(t, res, sched.ModeSingleFIFO, load)
		lp := find(t, res, sched.ModeLifoPri, load)
		if d := lp.MeanRTSeconds/single.MeanRTSeconds - 1; math.Abs(d) > 0.02 {
			t.Errorf("load %.1f: LIFO-Pri mean RT %.3fs, single FIFO %.3fs (%+.1f%%)", load, lp.MeanRTSeconds, single.MeanRTSeconds, 100*d)
		}
		if lp.LIFOFraction != 0 {
			t.Errorf("load %.1f: browsing LIFO in %.0f%% of the intervals", load, 100*lp.LIFOFraction)
		}
	}
}

// The same seed gives the same files; the shared sweep is compared with
// a second run made from scratch.
func TestRetryPresetDeterministic(t *testing.T) {
	a := retrySweep(t)
	b, err := Sweep(RetryConfig(sched.ModeLifoPri, 1), []sched.Mode{sched.ModeSingleFIFO, sched.ModeLifoPri}, retryTestLoads)
	if err != nil {
		t.Fatal(err)
	}
	if ca, cb := csvBytes(t, a), csvBytes(t, b); !bytes.Equal(ca, cb) {
		t.Fatalf("two runs of the retry preset differ:\n%s\n---\n%s", ca, cb)
	}
	var ja, jb bytes.Buffer
	if err := WriteJSON(&ja, a); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&jb, b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ja.Bytes(), jb.Bytes()) {
		t.Fatal("two runs of the retry preset wrote different JSON")
	}
}

// The retry preset's lab runs its cluster and clients: one request per
// back-end, the preset's page costs, retries and abandonment.
func TestRetryPresetLab(t *testing.T) {
	cfg, err := PresetLabConfig(PresetRetry)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TimeScale = 0.25
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Warmup != 180*time.Second || cfg.Duration != 600*time.Second || cfg.Drain != 240*time.Second {
		t.Errorf("lab windows %v %v %v", cfg.Warmup, cfg.Duration, cfg.Drain)
	}
	means, err := testserver.ParseShopService(cfg.testServerArgs()[1])
	if err != nil {
		t.Fatal(err)
	}
	if means[session.Main] != 60*time.Millisecond || means[session.Confirm] != 240*time.Millisecond {
		t.Errorf("test server means %v, want the preset's at a quarter", means)
	}
	sp, err := loadgen.ParseSessions(cfg.sessionsSpec(TableLoad))
	if err != nil {
		t.Fatal(err)
	}
	if m := sp.Model; m.Retries != 5 || m.AbandonProb != 0.1 || m.TimeoutMean != 2*time.Second || m.ThinkMean != 1750*time.Millisecond {
		t.Errorf("sessions %+v, want the retry clients at a quarter of the time", m)
	}
	y := cfg.frontendYAML("/run/qsplice/x", sched.ModeLifoPri)
	f, err := conf.Parse("frontend.yaml", []byte(y))
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	if f.Backends.ConcurrencyCap != 1 || f.Backends.Expected != 5 || f.Lifo.Interval != 15*time.Second {
		t.Errorf("front-end: cap %d, %d back-ends, utilization every %v", f.Backends.ConcurrencyCap, f.Backends.Expected, f.Lifo.Interval)
	}
	if _, err := PresetLabConfig("x"); err == nil {
		t.Error("an unknown preset's lab was configured")
	}
}
