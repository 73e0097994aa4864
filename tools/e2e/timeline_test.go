package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/timeline"
	"github.com/qsplice/qsplice/tools/lab"
	"github.com/qsplice/qsplice/tools/replay"
)

// TestTimelinesOf200LabConnectionsMatchReplay (issue 11 item 2): a lab
// front-end with -timeline serves 200 connections (a request each); every
// one of them comes out with a timeline whose steps are in order, whose
// shim's first response byte comes after the request reached the shim
// (after the SpliceAck, or after the Splice the request left with or
// right behind), and whose steps are named as those of a replayed
// request (qsplice-replay -timeline of the committed capture), those of
// connections on a reused C2 (marked reused) too.
func TestTimelinesOf200LabConnectionsMatchReplay(t *testing.T) {
	const conns, parallel, size = 200, 8, 4 << 10
	file := filepath.Join(writableTempDir(t), "timeline.jsonl") // the front-end, run as nobody, writes it
	l := extraLab(t, "h", func(cfg *lab.Config) {
		cfg.Backends = 2
		cfg.FrontendArgs = append(cfg.FrontendArgs, "-timeline", file, "-linger", "1s")
	})
	client := l.HTTPClient("c1")
	client.Transport.(*http.Transport).DisableKeepAlives = true // a connection per request
	client.Timeout = 30 * time.Second
	url := vipURL(8080, size)
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	next := make(chan int, conns)
	for i := range conns {
		next <- i
	}
	close(next)
	for range parallel {
		wg.Go(func() {
			for range next {
				resp, err := client.Get(url)
				if err != nil {
					errs <- err
					continue
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && (resp.StatusCode != 200 || n != size) {
					err = fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("GET %s: %v", url, err)
	}

	// A connection's record is written when the front-end forgets it,
	// its linger (1 s) after the close: wait for all 200.
	ours := func(recs []timeline.Record) []timeline.Record {
		return slices.DeleteFunc(recs, func(r timeline.Record) bool {
			return r.Client.Addr() != l.ClientAddr(1) || r.Path != "/data/4K" || r.Request != 1
		})
	}
	var recs []timeline.Record
	for deadline := time.Now().Add(20 * time.Second); ; {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		all, err := timeline.Read(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if recs = ours(all); len(recs) >= conns || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the front-end's linger runs on its own clock
	}
	if len(recs) != conns {
		t.Fatalf("%d timelines of the %d connections", len(recs), conns)
	}

	want := replayedSteps(t)
	carried, reused := 0, 0
	for _, r := range recs {
		if err := r.CheckOrder(); err != nil {
			t.Error(err)
		}
		// The response comes after the request reached the shim: after
		// the SpliceAck, or, for a request that left before it, after
		// the Splice left. A request its Splice carried leaves with it
		// (the default for these GETs on a new C2); on a reused C2 it
		// follows its Splice at once, marked for the shim to hold until
		// it has the Splice, and the splice_ack step is the server's ACK
		// of it, which may come after the response has begun.
		fb, ok1 := r.Get(timeline.FirstByte)
		sent, _ := r.Get(timeline.RequestSent)
		after := timeline.SpliceAck
		if acked, ok := r.Get(timeline.SpliceAck); r.Carried || ok && sent < acked {
			after = timeline.SpliceSent
		}
		at, ok2 := r.Get(after)
		if !ok1 || !ok2 || fb <= at {
			t.Errorf("flow %d: first response byte at %d (%v), %v at %d (%v): not after it", r.Flow, fb, ok1, after, at, ok2)
		}
		if r.Carried {
			carried++
		}
		if r.Reused {
			reused++
			if r.C2SYNs != 0 || r.Carried {
				t.Errorf("flow %d: on a reused C2, %d C2 SYNs, carried %v", r.Flow, r.C2SYNs, r.Carried)
			}
		}
		if got := r.Steps(); !slices.Equal(got, want) {
			t.Errorf("flow %d: steps %v, replay's %v", r.Flow, got, want)
		}
		if r.Backend < 1 || r.Backend > 2 || r.ResponseBytes < size || r.Reason == "" {
			t.Errorf("flow %d: back-end %d, %d response bytes, reason %q", r.Flow, r.Backend, r.ResponseBytes, r.Reason)
		}
	}
	// Requests that found a slot free went in their Splice (early
	// requests, the default): some did.
	if carried == 0 {
		t.Errorf("none of %d requests went in its Splice", len(recs))
	}
	// These clients ask to close (no keep-alive), and the front-end keeps
	// their C2s for the next (pooled C2s, the default): most were reused.
	t.Logf("%d of %d connections carried their request in the Splice, %d on a reused C2", carried, len(recs), reused)
	if reused < len(recs)/2 {
		t.Errorf("%d of %d connections on a reused C2", reused, len(recs))
	}
	if t.Failed() {
		b, _ := os.ReadFile(file)
		t.Logf("first record: %.2000s", b)
	}
}

// replayedSteps are the steps of a request of the committed replay
// capture, replayed with timelines on.
func replayedSteps(t *testing.T) []timeline.Step {
	t.Helper()
	in, err := os.Open(filepath.Join("..", "replay", "testdata", "three-clients.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out := filepath.Join(t.TempDir(), "tl.jsonl")
	tf, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	_, err = replay.Run(replay.Config{Timeline: tf}, in, io.Discard)
	tf.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := timeline.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Backend != 0 && r.Request == 1 {
			return r.Steps()
		}
	}
	t.Fatal("no replayed request was handed off")
	return nil
}
