package e2e

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/qsplice/qsplice/tools/lab"
)

// TestHandoffPortsReusedInTheBackendsTimeWait: with a handoff port range
// of 256, sequential connections (a request each, which the server closes
// first) come back to each port within the back-end kernel's TIME-WAIT
// every 256. The client's kernel draws each connection's ISN and
// timestamps at random, and C2 carries them, so a port taken blindly is
// refused half the time (the back-end answers the old connection's ACK,
// the front-end resets it and sends the SYN again: a round trip more).
// The front-end keeps port records once its handoffs walk the ports
// faster than the TIME-WAIT lasts (or a first such reset comes;
// splice/fe_timewait.go), and from the next round on passes over the
// ports that would refuse: after 500 connections to warm up (the ports
// taken before the records started are taken blindly once more),
// 1,000 more need no reset. The front-end keeps no pool of C2s here
// (-pool-c2=false): with one, a client's close leaves its C2 open for
// the next, and the server closes only what the pool cannot take.
func TestHandoffPortsReusedInTheBackendsTimeWait(t *testing.T) {
	const warmup, conns, size = 500, 1000, 1 << 10
	l := extraLab(t, "w", func(cfg *lab.Config) {
		cfg.Backends = 1
		cfg.FrontendArgs = append(cfg.FrontendArgs, "-handoff-ports", "30000-30255", "-linger", "20ms", "-pool-c2=false")
	})
	get := closingGetter(t, l, size)
	for i := range warmup {
		get(i)
	}
	before := frontendStatus(t, l)
	for i := range conns {
		get(warmup + i)
	}
	after := frontendStatus(t, l)
	// The back-end's kernel holds the TIME-WAITs the ports came back to.
	tw := handoffPortsIn(t, l, "time-wait", 256)
	resets := after.Engine.HandoffTimeWaitResets - before.Engine.HandoffTimeWaitResets
	inTW := after.Engine.HandoffPortsInTimeWait - before.Engine.HandoffPortsInTimeWait
	done := after.Engine.HandoffsDone - before.Engine.HandoffsDone
	t.Logf("warm-up: %d connections, %d old connections reset; then %d connections over 256 handoff ports: %d handoffs, %d back-end TIME-WAITs on them, %d SYNs sent into a refusing TIME-WAIT, %d old connections reset",
		warmup, before.Engine.HandoffTimeWaitResets, conns, done, tw, inTW, resets)
	if tw < 128 {
		t.Fatalf("%d TIME-WAITs on the handoff ports in the back-end: the server did not close first, the test shows nothing", tw)
	}
	if done < conns {
		t.Errorf("%d handoffs done for %d connections", done, conns)
	}
	if resets > inTW {
		t.Errorf("%d old connections reset, but only %d SYNs went to a port the front-end knew refused them: its record is wrong (splice/fe_timewait.go)", resets, inTW)
	}
	if inTW > conns/50 {
		t.Errorf("%d of %d SYNs went to a refusing port with about 200 free to choose from", inTW, conns)
	}
}

// TestHandoffPortsAfterAFrontEndRestart: a restarted front-end has no
// records of the back-end's TIME-WAITs, so its first pass over the
// handoff ports meets them blindly and about half its SYNs are answered
// with an old connection's ACK, while the shim still lingers on those
// connections. Each such answer must reach the front-end (not be
// translated towards the old client: with the SYN fast path it may come
// before the shim reads the SYN), and the SYN sent after the front-end's
// RST must reach the kernel after it (through the shim, not overtaking
// it on the fast path): every connection then gets its answer without
// waiting for the SYN's timer. And the new front-end gets a Fast Open
// cookie of its own though the shim holds the old one's. Without a pool
// of C2s (-pool-c2=false), for the TIME-WAITs; with one, see
// TestPooledC2sOfAFrontEndBeforeItsRestart.
func TestHandoffPortsAfterAFrontEndRestart(t *testing.T) {
	const ports, size = 256, 1 << 10
	l := extraLab(t, "t", func(cfg *lab.Config) {
		cfg.Backends = 1
		cfg.BackendArgs = []string{"-linger", "30s"}
		cfg.FrontendArgs = append(cfg.FrontendArgs, "-handoff-ports", "30000-30255", "-linger", "20ms", "-pool-c2=false")
	})
	get := closingGetter(t, l, size)
	for i := range 2 * ports {
		get(i)
	}
	if err := l.StopProcess("frontend"); err != nil {
		t.Fatal(err)
	}
	if err := l.StartProcess("frontend"); err != nil {
		t.Fatal(err)
	}
	shimBefore := shimStatus(t, l, 1)
	for i := range ports {
		get(2*ports + i)
	}
	fe, shim := frontendStatus(t, l), shimStatus(t, l, 1)
	resets := fe.Engine.HandoffTimeWaitResets
	superseded := shim.Shim.EntriesSuperseded - shimBefore.Shim.EntriesSuperseded
	fast := shim.SYNFast.Frames - shimBefore.SYNFast.Frames
	t.Logf("after the restart: %d connections, %d old connections reset, %d lingering entries superseded, %d SYNs taken by the kernel from the wire, %d retransmissions",
		ports, resets, superseded, fast, fe.Engine.Retransmits)
	if resets < ports/8 {
		t.Fatalf("%d of %d SYNs met a TIME-WAIT that refused them: the test shows nothing", resets, ports)
	}
	if fe.Engine.Retransmits != 0 {
		t.Errorf("%d retransmissions: a SYN refused from a TIME-WAIT waited for its timer", fe.Engine.Retransmits)
	}
	if superseded < ports/2 {
		t.Errorf("%d lingering entries superseded by %d new connections on their tuples", superseded, ports)
	}
	// The shim holds a cookie from the front-end before; the new one
	// must get its own (proto.SpliceKeepsCookie) to fill its SYNs.
	if shim.SYNFastPath == "tcx: ingress" && fast < ports/4 {
		t.Errorf("the kernel took %d SYNs from the wire after the restart, of %d connections: the front-end never got a cookie of its own", fast, ports)
	}
}

// closingGetter returns a function that fetches size bytes through the
// VIP on a new connection each time, with Connection: close (so the
// server closes first and its kernel keeps the TIME-WAIT), and fails the
// test, naming connection i, unless they come whole.
func closingGetter(t *testing.T, l *lab.Lab, size int) func(i int) {
	client := l.HTTPClient("c1")
	client.Transport.(*http.Transport).DisableKeepAlives = true
	client.Timeout = 30 * time.Second
	url := vipURL(8080, int64(size))
	return func(i int) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(body) != size {
			t.Fatalf("connection %d: status %d, %d bytes (%.80q), %v", i, resp.StatusCode, len(body), body, err)
		}
	}
}
