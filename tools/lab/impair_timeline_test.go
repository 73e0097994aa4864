package lab

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/timeline"
	tltool "github.com/qsplice/qsplice/tools/timeline"
)

// TestImpairedDownloadsShowRetransmissionsInTimelines (issue 11, Done
// means): with `impair c1 delay=20ms,loss=1%` the client's path delays
// and loses frames both ways; downloads through the VIP stay
// sha256-exact, and the front-end's timelines show the retransmissions:
// each connection's record lists them at their times (the client's SACK
// reports of lost response bytes above all, which the back-end's
// retransmissions answer), in order, within the connection's life, and
// qsplice-timeline's summary counts them.
func TestImpairedDownloadsShowRetransmissionsInTimelines(t *testing.T) {
	requireRoot(t)
	const downloads, size = 3, 1 << 20
	cfg := daemonConfig(t)
	if _, err := buildCmd("qsplice-lab"); err != nil { // the relay
		t.Fatal(err)
	}
	dir := sharedTempDir(t)
	if err := os.Chmod(dir, 0o1777); err != nil { // the front-end runs as nobody
		t.Fatal(err)
	}
	file := filepath.Join(dir, "timeline.jsonl")
	cfg.Backends, cfg.Nginx = 1, false
	cfg.FrontendArgs = append(cfg.FrontendArgs, "-timeline", file, "-linger", "1s")
	l := upLab(t, cfg)
	c := l.HTTPClient("c1")
	c.Transport.(*http.Transport).DisableKeepAlives = true // a connection, and a record, per download
	getThroughVIP(t, c, 8080, 1<<10)                       // everything up and learnt
	if err := l.Impair("c1", "delay=20ms,loss=1%,seed=11"); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for range downloads {
		getThroughVIP(t, c, 8080, size) // checks length and sha256
	}
	t.Logf("%d downloads of 1 MiB at 20 ms delay and 1%% loss each way in %v", downloads, time.Since(began).Round(time.Millisecond))

	// A record is written when the front-end forgets its connection, its
	// linger (1 s) after the close.
	var recs []timeline.Record
	for deadline := time.Now().Add(20 * time.Second); ; {
		recs = impairedRecords(t, file, l)
		if len(recs) >= downloads || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the front-end's linger runs on its own clock
	}
	if len(recs) != downloads {
		t.Fatalf("%d records of the %d impaired downloads", len(recs), downloads)
	}
	sacks := 0
	for _, r := range recs {
		if err := r.CheckOrder(); err != nil {
			t.Error(err)
		}
		syn, ok := r.Get(timeline.CookieACK)
		if !ok {
			t.Fatalf("flow %d has no cookie_ack", r.Flow)
		}
		// With -timeline the engines read every SYN, also those the
		// link answered (frontend/synhide.go).
		if _, ok := r.Get(timeline.SYN); !ok {
			t.Errorf("flow %d has no syn step", r.Flow)
		}
		marks := r.Retransmissions()
		if !slices.IsSortedFunc(marks, func(a, b timeline.Retx) int { return int(a.At - b.At) }) {
			t.Errorf("flow %d: retransmissions out of order: %v", r.Flow, marks)
		}
		for _, m := range marks {
			if m.Kind != "syn" && m.At < syn {
				t.Errorf("flow %d: %s retransmission %v before the connection was made", r.Flow, m.Kind, time.Duration(syn-m.At))
			}
			if m.Kind == "client_sack" {
				sacks++
			}
		}
		var listed []string
		for _, m := range marks {
			listed = append(listed, fmt.Sprintf("%s@%v", m.Kind, time.Duration(m.At-r.Start()).Round(time.Millisecond)))
		}
		t.Logf("flow %d: %d retransmissions seen: %v", r.Flow, r.NumRetx, listed)
	}
	if sacks == 0 {
		t.Errorf("no client_sack retransmission in %d downloads of 1 MiB at 1%% loss", downloads)
	}
	sum := tltool.Summarize(recs)
	if sum.Retransmissions < sacks || sum.RetxConnections == 0 || sum.RetxByKind["client_sack"] != sacks {
		t.Errorf("summary: %d retransmissions on %d connections, by kind %v; the records list %d client_sack",
			sum.Retransmissions, sum.RetxConnections, sum.RetxByKind, sacks)
	}
	if t.Failed() {
		b, _ := os.ReadFile(file)
		t.Logf("timelines:\n%.4000s", b)
	}
}

// impairedRecords reads the records of c1's 1 MiB downloads.
func impairedRecords(t *testing.T, file string, l *Lab) []timeline.Record {
	t.Helper()
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := timeline.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(all, func(r timeline.Record) bool {
		return r.Client.Addr() != l.ClientAddr(1) || r.Path != "/data/1M" || r.Request != 1
	})
}
