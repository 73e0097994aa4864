package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/content"
	"github.com/qsplice/qsplice/tools/experiment"
	"github.com/qsplice/qsplice/tools/lab"
	"github.com/qsplice/qsplice/tools/loadgen"
)

// checkTreesThroughVIP fetches /data/<size> and each lower tree's
// /tree<k>/data/<size> through the VIP while the cluster is idle (G = M,
// so the policy serves what was asked) and checks each body byte for
// byte against the tree it names.
func checkTreesThroughVIP(ctx context.Context, l *lab.Lab, size int64, trees int) error {
	c := l.HTTPClient("c1")
	c.Timeout = 5 * time.Second
	for tree := 1; tree <= trees; tree++ {
		path := content.TreePath("/data/"+content.FormatSize(size), tree, trees)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+lab.VIP+":8080"+path, nil)
		req.Host = "gold.example"
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		got, _ := strconv.Atoi(resp.Header.Get("X-Content-Tree"))
		id, _ := strconv.ParseUint(resp.Header.Get("X-Backend-Id"), 10, 32)
		want, _ := io.ReadAll(content.NewTreeBody(uint32(id), size, got, trees))
		if resp.StatusCode != http.StatusOK || got != tree || !bytes.Equal(body, want) {
			return fmt.Errorf("%s: %s, tree %d of back-end %d, %d bytes: not tree %d's %d bytes", path, resp.Status, got, id,
				len(body), tree, content.TreeSize(size, tree, trees))
		}
	}
	return nil
}

// A live run of the feedback experiment (issue 10 item 8): a step from
// 0.5 to 2 times the capacity (5 back-ends x 5 slots at 100 ms: 250
// req/s) for 25 s and back. U, over each whole second, settles within
// 10 s of the step and stays, read strictly (issue 10's "U settles
// within 10 s at 0.85 +/- 0.05 and stays there": every second from then
// to the step down within +/- 0.05; with G moved at every dispatch,
// sched's contentAdaptor) when the front-end ran throughout (no status
// sample missed), and G is back at M within 10 s of the step down. Every request
// is accounted for, the refused ones got 503 with Retry-After and no
// client timed out, the trees served lie in 1..M, and the front-end's
// counts agree with the clients'. The content trees answer byte-exact
// through the VIP before the load.
func TestFeedbackExperimentLive(t *testing.T) {
	base := needLab(t)
	cfg := experiment.DefaultFeedbackLabConfig()
	cfg.Up, cfg.Down, cfg.End = 3*time.Second, 28*time.Second, 31*time.Second
	cfg.BeforeLoad = func(ctx context.Context, l *lab.Lab) error { return checkTreesThroughVIP(ctx, l, cfg.Size, cfg.Trees) }
	res := runFeedbackLive(t, base, cfg)

	if want := int(cfg.End / (100 * time.Millisecond)); len(res.Series) < want*9/10 {
		t.Errorf("%d points for %d periods", len(res.Series), want)
	}
	for _, p := range res.Series {
		if p.G < 0 || p.G > float64(cfg.Trees) || p.U < 0 || p.U > 2 {
			t.Fatalf("at %.1f s: U %v, G %v", p.TSeconds, p.U, p.G)
		}
	}
	var refused int64
	for _, c := range res.Classes {
		for _, s := range res.Load.Streams {
			if s.Name == c.Name && (s.Offered != s.Sent+s.NotSent || s.Sent != s.Completed.Total()+s.Errors.Total()) {
				t.Errorf("%s: offered %d, sent %d, not sent %d, answered %d, failed %d", c.Name, s.Offered, s.Sent,
					s.NotSent, s.Completed.Total(), s.Errors.Total())
			}
		}
		if c.NotSent != 0 || c.TimedOut != 0 || c.Other != 0 {
			t.Errorf("%s: %d not sent, %d timed out, %d other answers", c.Name, c.NotSent, c.TimedOut, c.Other)
		}
		if c.RetryAfter != c.Refused {
			t.Errorf("%s: %d 503s, %d with Retry-After", c.Name, c.Refused, c.RetryAfter)
		}
		// A request that failed on the wire may or may not have reached
		// the policy; every other one is counted the same on both sides.
		slack := uint64(c.Failed)
		if c.Failed > c.Sent/200 {
			t.Errorf("%s: %d of %d requests failed", c.Name, c.Failed, c.Sent)
		}
		if diff(c.Arrived, uint64(c.Sent)) > slack || diff(c.Dispatched, uint64(c.OK)) > slack || c.FERefused != uint64(c.Refused) {
			t.Errorf("%s: front-end arrived %d, dispatched %d, refused %d; clients sent %d, 2xx %d, 503 %d",
				c.Name, c.Arrived, c.Dispatched, c.FERefused, c.Sent, c.OK, c.Refused)
		}
		if len(c.ClientTrees) > cfg.Trees+1 || len(c.FETrees) != cfg.Trees+1 || c.FETrees[0] != 0 {
			t.Errorf("%s: trees served %v (clients), %v (front-end); want 1..%d", c.Name, c.ClientTrees, c.FETrees, cfg.Trees)
		}
		var named int64
		for _, n := range c.ClientTrees {
			named += n
		}
		if named != c.OK {
			t.Errorf("%s: %d answers 2xx, %d named their tree", c.Name, c.OK, named)
		}
		// Once the front-end rewrites request targets (issue 10 item 6),
		// the clients receive exactly the trees it chose.
		if n := len(c.ClientTrees); n > 0 && named > c.ClientTrees[n-1] {
			for k := 1; k < len(c.FETrees); k++ {
				var got int64
				if k < len(c.ClientTrees) {
					got = c.ClientTrees[k]
				}
				if uint64(got) != c.FETrees[k] {
					t.Errorf("%s: tree %d: front-end chose it %d times, clients received it %d times", c.Name, k, c.FETrees[k], got)
				}
			}
		}
		var served uint64
		for _, n := range c.FETrees {
			served += n
		}
		if served != c.Dispatched {
			t.Errorf("%s: %d dispatched, %d counted per tree", c.Name, c.Dispatched, served)
		}
		refused += c.Refused
	}
	if refused == 0 {
		t.Error("no request refused at twice the capacity")
	}
	s := res.Summary
	t.Logf("U per second %.2f; settled %v s after the step up (strictly: %v s; -1: never); from 10 s after it: mean %.3f, "+
		"worst second %.3f off, %.0f%% of the seconds within 0.85 +/- 0.05; G back at M %.1f s after the step down",
		s.USeconds, s.USettleTolerantSeconds, s.USettleSeconds, s.USteadyMean, s.USteadyWorst, 100*s.USteadyInBand, s.GRecoverSeconds)
	// A front-end that misses its status samples is not running for
	// whole periods: the machine is overloaded by other work, and the
	// back-ends idle while nobody dispatches, which no setting of the
	// loop can make up for (TestFeedbackLabRateStallsDoNotWindGUp). On a
	// machine that lets it run (in this lab 0-1 of 420 samples missed)
	// U holds the criterion; on one that stalls it (14 of 310 missed at
	// a load average of 22 on 2 cores) single seconds fall to 0.5.
	switch missed := float64(res.MissedSamples) / float64(max(len(res.Series), 1)); {
	case missed > 0.02:
		t.Logf("U's settling not judged: the front-end missed %d of %d status samples (the machine stalls it)",
			res.MissedSamples, len(res.Series))
	case res.MissedSamples == 0:
		// Strictly: every second from at most 10 s after the step up on
		// within 0.85 +/- 0.05. With G stepped once a period on the
		// completions that failed on arrival noise alone in most runs
		// (strict settle 15-26 s, a CI run one second at 0.952); moved at
		// every dispatch, live seconds stay within about 0.035 of U*.
		if s.USettleSeconds < 0 || s.USettleSeconds > 10 || math.Abs(s.USteadyMean-0.85) > 0.02 {
			t.Errorf("U settled strictly %v s after the step up (-1: never), mean %.3f from 10 s after it; want within 10 s, and 0.85 +/- 0.02",
				s.USettleSeconds, s.USteadyMean)
		}
	default:
		// A sample missed: the front-end did not run for a period, its
		// back-ends idled and then got the backlog, which no setting
		// of G answers (a run with 1 of 310 missed: 0.74, then 0.90, the
		// other seconds within 0.83-0.88). The seconds from 10 s after
		// the step up: mean at U* and four in five within the band.
		t.Logf("U's strict settling not judged: %d of %d status samples missed", res.MissedSamples, len(res.Series))
		if math.Abs(s.USteadyMean-0.85) > 0.02 || s.USteadyInBand < 0.8 {
			t.Errorf("from 10 s after the step up, U's seconds have mean %.3f and %.0f%% within 0.85 +/- 0.05; want 0.85 +/- 0.02 and 80%%",
				s.USteadyMean, 100*s.USteadyInBand)
		}
	}
	if s.GRecoverSeconds < 0 || s.GRecoverSeconds > 10 {
		t.Errorf("G back at M %v s after the step down, want within 10 s", s.GRecoverSeconds)
	}
}

// The queue loops bind, live: the step from 0.5 to 2 times the capacity
// with one content tree (nothing to degrade), target_q 20 per class.
// The served fractions keep 3:2:1 within 10%, every refusal is a 503
// with Retry-After, no client times out, and no class starves at the
// step up: every class's slowest response takes under 5 s. Before, the
// planned merge's weights wound up through the half load (every class
// served all it asked, proQoS 1/3 each), bronze's to the floor, and
// after the step bronze got no dispatch for seconds: its slowest
// responses took 9.5-9.8 s in runs of 42 s, and one in a few timed out
// at the clients' 10 s (sched's Feedback.planWeights).
//
// Issue 10's "queue length per priority stays within +/- 20% of
// target_q after the transient" is judged on the loop's own q(t), the
// admitted queue at each of the policy's period ends, which the
// front-end's status keeps for the last 64 periods: every class within
// 20% in at least 90% of the periods of the overload's second half,
// while the front-end ran (see wantQueuesWithinTarget). Before, the
// sampler read the queue at its own phase of the period, and within the
// period the queue swings by what the dispatch bursts take out (see
// sched's queueLoop): gold read 57-100% (mean 83%) in 12 runs, and the
// criterion was only logged. On the period ends gold read 92%, 94%,
// 100%, 98%, 94%, 100% and 100% in 7 runs (its samples 42-87%), silver
// 98-100%, bronze 100%: 98-100% at load averages of 2-3, 92-94% at 5-7
// while other labs ran. Every period end out of the band was above it,
// in a period whose out fell to about half (gold 3-10 against 15.5,
// all classes together 6-16 against the cluster's 25: the front-end or
// the back-ends stalled by the machine's load) while the loop admitted
// its target_in; the next periods' smaller target_in brought it back.
// An eighth run, 17 of 290 status samples missed at a load average of
// 7.5, had gold at 89% (periods with no dispatch at all) and is not
// judged.
// (Before the merge fix: bronze's slowest response 9,498 ms here; after
// it 2,516 and 2,782 ms.)
func TestFeedbackLoopsBindLive(t *testing.T) {
	base := needLab(t)
	cfg := experiment.DefaultFeedbackLabConfig()
	cfg.Trees = 1
	cfg.Up, cfg.Down, cfg.End = 3*time.Second, 27*time.Second, 29*time.Second
	res := runFeedbackLive(t, base, cfg)
	for _, c := range res.Classes {
		wantEveryRefusalAnswered(t, c)
	}
	for _, st := range res.Load.Streams {
		t.Logf("%s: 2xx latency p50 %.0f ms, p99 %.0f ms, slowest %.0f ms", st.Name, st.Latency.P50Ms, st.Latency.P99Ms,
			st.Latency.MaxMs)
		if st.Latency.MaxMs >= 5000 {
			t.Errorf("%s: slowest response %.0f ms: the class starved", st.Name, st.Latency.MaxMs)
		}
	}
	if r := res.Summary.RatioToLast; math.Abs(r[0]-3)/3 > 0.1 || math.Abs(r[1]-2)/2 > 0.1 {
		t.Errorf("served ratios %.2f:%.2f:1, want 3:2:1 within 10%%", r[0], r[1])
	}
	wantQueuesWithinTarget(t, cfg, res, 0.9)
}

// wantQueuesWithinTarget judges issue 10's queue criterion on the loop's
// q(t) at each period's end over the overload's second half (the
// summary's WithinTarget): every class within 20% of target_q in at
// least minWithin of the periods, and no period of the window without
// its period end. The periods out of the band are logged with their in
// and out (q(t) = q(t-T) + in - out) and the out of all classes
// together, the cluster's pace (25 a period at full speed), to say why.
//
// The share is judged only while the front-end ran throughout, as U's
// settling is in TestFeedbackExperimentLive: at most 2% of the status
// samples missed. A front-end the machine stalls dispatches nothing for
// whole periods (all classes' out 0-5 against 25, in the periods whose
// samples it missed) while its queues fill up to target_in, and every
// class ends those periods and the next few above the band, which no
// setting of the loop can help (a run with 17 of 290 samples missed at
// a load average of 7.5: gold 89%).
func wantQueuesWithinTarget(t *testing.T, cfg experiment.FeedbackLabConfig, res experiment.FeedbackLabResult, minWithin float64) {
	t.Helper()
	s := res.Summary
	stalled := float64(res.MissedSamples) > 0.02*float64(len(res.Series))
	period := 100 * time.Millisecond
	if cfg.Policy.Period > 0 {
		period = cfg.Policy.Period
	}
	// The summary's window: the points k (at (k+1) periods) from the
	// overload's middle, excluded, to the step down.
	mid, down := int((cfg.Up+(cfg.Down-cfg.Up)/2)/period)-1, int(cfg.Down/period)-1
	want := down - mid
	for i, c := range cfg.Classes {
		var out []string
		for _, p := range res.Series {
			k := int(math.Round(p.TSeconds/period.Seconds())) - 1
			cp := p.Classes[i]
			if k <= mid || k > down || cp.PeriodEndQ < 0 {
				continue
			}
			if math.Abs(float64(cp.PeriodEndQ-cp.TargetQueue)) > 0.2*float64(cp.TargetQueue) {
				var all int // the period's out over every class: the back-ends' pace
				for _, o := range p.Classes {
					all += o.PeriodOut
				}
				out = append(out, fmt.Sprintf("%.1fs q %d (in %d out %d, all classes out %d, sampled %d)", p.TSeconds,
					cp.PeriodEndQ, cp.PeriodIn, cp.PeriodOut, all, cp.Queued))
			}
		}
		t.Logf("%s: %.0f%% of %d period ends within 20%% of target_q (%.0f%% of the samples); out of the band: %v",
			c, 100*s.WithinTarget[i], s.PeriodEndsJudged[i], 100*s.WithinTargetSampled[i], out)
		if s.PeriodEndsJudged[i] < want {
			t.Errorf("%s: %d period ends read of the window's %d", c, s.PeriodEndsJudged[i], want)
		}
		switch {
		case stalled:
			t.Logf("%s: the share is not judged: the front-end missed %d of %d status samples (the machine stalls it)",
				c, res.MissedSamples, len(res.Series))
		case s.WithinTarget[i] < minWithin:
			t.Errorf("%s: %.0f%% of the period ends within 20%% of target_q; want >= %.0f%%", c, 100*s.WithinTarget[i],
				100*minWithin)
		}
	}
}

// Known sessions alone beyond the capacity, live: every stream's requests
// carry session cookies, one request in 50 starting a session, so at
// twice the capacity (one content tree: nothing to degrade) the known
// sessions bring 1.96 times what the back-ends serve. The loop holds
// their excess in reserve and refuses it with 503 + Retry-After within
// refuse_periods periods: no client times out (before, the known
// sessions' queue grew until they did), and the known sessions get the
// capacity: at most 1/1.96 = 51% of theirs during the overload, all of it
// before and after.
func TestFeedbackKnownSessionsBeyondCapacityLive(t *testing.T) {
	base := needLab(t)
	cfg := experiment.DefaultFeedbackLabConfig()
	cfg.Trees = 1
	cfg.Sessions, cfg.SessionRequests = 50, 50
	cfg.Up, cfg.Down, cfg.End = 2*time.Second, 14*time.Second, 16*time.Second
	res := runFeedbackLive(t, base, cfg)
	known, _ := sessionCounts(t, res)
	if known.Refused == 0 {
		t.Error("no known-session request refused at 1.96 times the capacity")
	}
	// About half on a machine that lets the back-ends run at their
	// nominal rate; 43% measured at a load average of 23 on 2 cores.
	if float64(known.OK) < 0.3*float64(known.Sent) {
		t.Errorf("known sessions completed %d of %d, want the capacity's worth (about half)", known.OK, known.Sent)
	}
}

// Known sessions within the capacity while new ones overload it, live:
// one class, one request in two starting a session (session-requests 2),
// so that at 1.4 times the capacity the known sessions bring 0.7 of it
// and the new sessions the other 0.7 (one content tree: nothing to
// degrade; 0.7 leaves room for back-ends slowed by a busy machine). The
// known sessions' requests complete (issue 10: ">= 95% while new
// sessions take the refusals"), the new sessions take the 503s, and no
// client times out.
//
// One class, because with several the proportional differentiation
// decides first: at 1.6 times the capacity, 3:2:1 in served fractions
// leaves bronze 27% of its requests (gold 80%, silver 54%), fewer than
// its known sessions' 50%, and a run with the three classes served
// gold's known sessions 100%, silver's 93% and bronze's 53% (its new
// ones 16%). Sessions go first within their class, as the item
// 2 says; the classes' shares are the merge's.
func TestFeedbackSessionsCompleteWhileNewOnesAreRefusedLive(t *testing.T) {
	base := needLab(t)
	cfg := experiment.DefaultFeedbackLabConfig()
	cfg.Trees = 1
	cfg.Classes, cfg.Weights = []string{"shop"}, []float64{1}
	cfg.High = 1.4
	cfg.Sessions, cfg.SessionRequests = 50, 2
	cfg.Up, cfg.Down, cfg.End = 2*time.Second, 14*time.Second, 16*time.Second
	res := runFeedbackLive(t, base, cfg)
	known, fresh := sessionCounts(t, res)
	if float64(known.OK) < 0.95*float64(known.Sent) {
		t.Errorf("known sessions completed %d of %d, want >= 95%%", known.OK, known.Sent)
	}
	if fresh.Refused == 0 || fresh.Refused < 10*known.Refused {
		t.Errorf("new sessions refused %d, known %d: the new sessions should take the refusals", fresh.Refused, known.Refused)
	}
}

// sessionCounts sums the clients' counts of known-session and
// new-session requests over the classes and logs them, after checking
// that every refusal was a 503 with Retry-After; and no request may have
// timed out.
func sessionCounts(t *testing.T, res experiment.FeedbackLabResult) (known, fresh loadgen.SessionKindCounts) {
	t.Helper()
	for _, c := range res.Classes {
		wantEveryRefusalAnswered(t, c)
		if c.KnownSessions == nil || c.NewSessions == nil {
			t.Fatalf("%s: no session counts", c.Name)
		}
		t.Logf("%s: known %d sent, %d 2xx, %d 503; new %d sent, %d 2xx, %d 503", c.Name, c.KnownSessions.Sent,
			c.KnownSessions.OK, c.KnownSessions.Refused, c.NewSessions.Sent, c.NewSessions.OK, c.NewSessions.Refused)
		for _, k := range []struct{ sum, c *loadgen.SessionKindCounts }{{&known, c.KnownSessions}, {&fresh, c.NewSessions}} {
			k.sum.Sent += k.c.Sent
			k.sum.OK += k.c.OK
			k.sum.Refused += k.c.Refused
			k.sum.TimedOut += k.c.TimedOut
		}
	}
	t.Logf("known sessions: %d sent, %d 2xx, %d 503, %d timed out; new: %d sent, %d 2xx, %d 503, %d timed out",
		known.Sent, known.OK, known.Refused, known.TimedOut, fresh.Sent, fresh.OK, fresh.Refused, fresh.TimedOut)
	if known.TimedOut+fresh.TimedOut != 0 {
		t.Errorf("%d requests timed out", known.TimedOut+fresh.TimedOut)
	}
	return known, fresh
}

func diff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// The lab's nginx serves the content trees too: through the VIP on port
// 80, /data/<size> is tree M and /tree<k>/data/<size> tree k, each byte
// for byte, each naming its tree.
func TestContentTreesNginxLive(t *testing.T) {
	const size, trees = 16 << 10, 3
	l := extraLab(t, "n", func(cfg *lab.Config) {
		cfg.Backends, cfg.Nginx, cfg.TestServer = 2, true, false
		cfg.Files, cfg.Trees = []int64{size}, trees
	})
	c := l.HTTPClient("c1")
	c.Timeout = 5 * time.Second
	for round := range 2 { // both back-ends, most likely
		for tree := 1; tree <= trees; tree++ {
			path := content.TreePath("/data/"+content.FormatSize(size), tree, trees)
			resp, err := c.Get("http://" + lab.VIP + ":80" + path)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			got, _ := strconv.Atoi(resp.Header.Get("X-Content-Tree"))
			id, _ := strconv.ParseUint(resp.Header.Get("X-Backend-Id"), 10, 32)
			want, _ := io.ReadAll(content.NewTreeBody(uint32(id), size, tree, trees))
			if resp.StatusCode != http.StatusOK || got != tree || !bytes.Equal(body, want) {
				t.Errorf("round %d, %s: %s, tree %d, back-end %d, %d bytes; want tree %d's %d bytes", round, path,
					resp.Status, got, id, len(body), tree, len(want))
			}
		}
	}
}

// runFeedbackLive runs the feedback experiment in a lab of its own with
// base's binaries and logs its summary table.
func runFeedbackLive(t *testing.T, base *lab.Lab, cfg experiment.FeedbackLabConfig) experiment.FeedbackLabResult {
	t.Helper()
	cfg.BinDir = base.Config().BinDir
	cfg.Log = testWriter{t}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := experiment.RunFeedbackLab(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	experiment.WriteFeedbackLabSummary(&table, res)
	t.Logf("capacity %.0f req/s, %d of %d status samples missed:\n%s", cfg.Capacity(), res.MissedSamples, len(res.Series),
		table.String())
	return res
}

// wantEveryRefusalAnswered: no client of the class timed out, every 503
// carried Retry-After, and nothing but 2xx and 503 came back.
func wantEveryRefusalAnswered(t *testing.T, c experiment.FeedbackLabClass) {
	t.Helper()
	if c.TimedOut != 0 || c.RetryAfter != c.Refused || c.Other != 0 {
		t.Errorf("%s: %d timed out, %d 503s of which %d with Retry-After, %d other answers", c.Name, c.TimedOut,
			c.Refused, c.RetryAfter, c.Other)
	}
}
