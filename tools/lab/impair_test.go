package lab

import (
	"bytes"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/tools/netns"
)

func TestParseImpair(t *testing.T) {
	c, err := ParseImpair("delay=20ms,jitter=5ms,loss=1%,reorder=0.5%,rate=100mbit,seed=7,limit=50")
	want := link.ImpairConfig{Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Loss: 0.01,
		Reorder: 0.005, RateBitsPerSec: 100e6, Seed: 7, QueueLimit: 50}
	if err != nil || c != want {
		t.Fatalf("got %+v, %v; want %+v", c, err, want)
	}
	if c, err := ParseImpair("loss=0.02,rate=1.5gbit"); err != nil || c.Loss != 0.02 || c.RateBitsPerSec != 1.5e9 {
		t.Errorf("fraction and gbit: %+v, %v", c, err)
	}
	for _, bad := range []string{"", "delay", "delay=fast", "loss=150%", "loss=-1%", "jitter=5ms", "rate=0mbit", "colour=red", "delay=-1ms"} {
		if _, err := ParseImpair(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// connectTimes dials the VIP's port 8080 n times from c1 and returns the
// times the handshakes took, sorted. The front-end answers a SYN itself,
// so this is the client's round trip to the front-end.
func connectTimes(t *testing.T, l *Lab, n int) []time.Duration {
	t.Helper()
	var ds []time.Duration
	err := netns.Do(l.NS("c1"), func() error {
		for range n {
			start := time.Now()
			c, err := net.DialTimeout("tcp4", VIP+":8080", 5*time.Second)
			if err != nil {
				continue // a lost SYN waits for its retransmission; the median copes
			}
			ds = append(ds, time.Since(start))
			c.Close()
		}
		return nil
	})
	if err != nil || len(ds) < n/2 {
		t.Fatalf("%d of %d connections: %v", len(ds), n, err)
	}
	slices.Sort(ds)
	return ds
}

// TestImpairDelaysLosesAndClears: `impair c1 delay=20ms,loss=1%` puts
// 40 ms on the client's round trip (20 each way), downloads through the
// VIP stay byte-exact through the loss, status names it, and clear gives
// the link back as it was; the lab's cleanup then checks that Down
// leaves nothing (the relay, its veths, its state file).
func TestImpairDelaysLosesAndClears(t *testing.T) {
	requireRoot(t)
	cfg := daemonConfig(t)
	if _, err := buildCmd("qsplice-lab"); err != nil { // the relay
		t.Fatal(err)
	}
	cfg.Backends, cfg.Nginx = 1, false
	l := upLab(t, cfg)
	c := l.HTTPClient("c1")
	c.Timeout = 30 * time.Second
	getThroughVIP(t, c, 8080, 1<<10) // everything up and learnt
	before := connectTimes(t, l, 9)[4]
	if err := l.Impair("c1", "delay=20ms,loss=1%,seed=3"); err != nil {
		t.Fatal(err)
	}
	during := connectTimes(t, l, 9)[4]
	if during < 40*time.Millisecond || during > before+200*time.Millisecond {
		t.Errorf("median handshake %v impaired (%v before), want 40 ms more", during, before)
	}
	for range 3 {
		getThroughVIP(t, c, 8080, 1<<20) // checks the content
	}
	var st bytes.Buffer
	if err := l.WriteStatus(t.Context(), &st); err != nil || !strings.Contains(st.String(), "c1: delay=20ms,loss=1%,seed=3") {
		t.Errorf("status does not show the impairment (%v):\n%s", err, st.String())
	}
	if err := l.ClearImpair("c1"); err != nil {
		t.Fatal(err)
	}
	if after := connectTimes(t, l, 9)[4]; after > before+10*time.Millisecond {
		t.Errorf("median handshake %v after clear, %v before", after, before)
	}
	if linkExists(l.NS("sw"), "c1i") || len(l.Impairments()) != 0 {
		t.Error("clear left the relay's devices or its state")
	}
	getThroughVIP(t, c, 8080, 1<<20)
	if err := l.Impair("c9", "delay=1ms"); err == nil {
		t.Error("an impairment for a host the lab does not have was accepted")
	}
}
