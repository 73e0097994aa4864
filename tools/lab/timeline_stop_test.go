package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/timeline"
	"github.com/qsplice/qsplice/tools/netns"
)

// TestFrontendStopWritesTheConnectionsItStillHolds (issue 11): a
// front-end stopped while a connection is still open (keep-alive, idle)
// and another is closed but in its linger (30 s here) writes a record of
// each, marked at_stop, with the steps seen so far: the closed one's
// close included, the open one's not. Before, neither was written.
// Without the pool of C2s (-pool-c2=false): with it, the front-end
// closes a client connection that asked to close itself, and writes its
// record at once.
func TestFrontendStopWritesTheConnectionsItStillHolds(t *testing.T) {
	requireRoot(t)
	cfg := daemonConfig(t)
	dir := sharedTempDir(t)
	if err := os.Chmod(dir, 0o1777); err != nil { // the front-end runs as nobody
		t.Fatal(err)
	}
	file := filepath.Join(dir, "timeline.jsonl")
	cfg.Backends, cfg.Nginx = 1, false
	cfg.FrontendArgs = append(cfg.FrontendArgs, "-timeline", file, "-linger", "30s", "-pool-c2=false")
	l := upLab(t, cfg)

	// The open one: a request on a connection the client keeps.
	var open net.Conn
	err := netns.Do(l.NS("c1"), func() error {
		var err error
		open, err = net.DialTimeout("tcp4", VIP+":8080", 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.Write([]byte("GET /data/1K HTTP/1.1\r\nHost: lab\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	open.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(open), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, resp.Body); err != nil || n != 1<<10 {
		t.Fatalf("open connection: %d bytes, %v", n, err)
	}
	openPort := uint16(open.LocalAddr().(*net.TCPAddr).Port)
	// The closed one: a connection per request, lingering 30 s.
	c := l.HTTPClient("c1")
	c.Transport.(*http.Transport).DisableKeepAlives = true
	getThroughVIP(t, c, 8080, 2<<10)
	waitHeldAsWanted(t, l, openPort)

	if err := l.StopProcess(frontendName); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := timeline.Read(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	recs = slices.DeleteFunc(recs, func(r timeline.Record) bool {
		return r.Client.Addr() != l.ClientAddr(1) || (r.Path != "/data/1K" && r.Path != "/data/2K")
	})
	if len(recs) != 2 {
		b, _ := os.ReadFile(file)
		t.Fatalf("%d records of the two connections held at the stop:\n%s", len(recs), b)
	}
	for _, r := range recs {
		if !r.AtStop || r.Reason != "" {
			t.Errorf("flow %d (%s): at_stop %v, reason %q", r.Flow, r.Path, r.AtStop, r.Reason)
		}
		if err := r.CheckOrder(); err != nil {
			t.Error(err)
		}
		for _, s := range []timeline.Step{timeline.CookieACK, timeline.HeadComplete, timeline.SpliceAck, timeline.RequestSent, timeline.Feedback} {
			if _, ok := r.Get(s); !ok {
				t.Errorf("flow %d (%s): no %v", r.Flow, r.Path, s)
			}
		}
		_, closed := r.Get(timeline.Close)
		isOpen := r.Client.Port() == openPort
		if isOpen == closed || isOpen != (r.Path == "/data/1K") {
			t.Errorf("flow %d (%s, port %d): close stamped %v; the open connection (port %d) has none, the closed one has",
				r.Flow, r.Path, r.Client.Port(), closed, openPort)
		}
	}
}

// waitHeldAsWanted waits until the front-end has both Feedbacks (its
// back-end served 2) and the client's only socket to the VIP's port 8080
// is the open one: the closed connection's is gone or past the client's
// FIN being acknowledged (FIN_WAIT2 or TIME_WAIT), which the back-end
// can only do after the front-end forwarded that FIN. Which side closes
// first is a race: the client closes when it has the body's last byte
// (Content-Length), the server after writing it; when the server's FIN
// comes later, the client's socket waits 60 s in TIME_WAIT (a CI run
// failed on that).
func waitHeldAsWanted(t *testing.T, l *Lab, openPort uint16) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		served, others, err := heldState(l, openPort)
		if err == nil && served >= 2 && len(others) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("front-end served %d, client sockets to the VIP besides the open one (port:state) %v (%v)", served, others, err)
		}
		time.Sleep(50 * time.Millisecond) // polling the two states: no event reaches the test
	}
}

func heldState(l *Lab, openPort uint16) (served uint64, others []string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := l.FetchFrontendStatus(ctx)
	if err != nil {
		return 0, nil, err
	}
	var doc struct {
		Backends []struct {
			Served uint64 `json:"served"`
		} `json:"backends"`
	}
	if err := json.Unmarshal(st.Raw, &doc); err != nil || len(doc.Backends) != 1 {
		return 0, nil, fmt.Errorf("status: %v", err)
	}
	var tcp []byte
	err = netns.Do(l.NS("c1"), func() error {
		var err error
		tcp, err = os.ReadFile("/proc/thread-self/net/tcp") // the thread's namespace, c1's
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	// rem_address of VIP:8080 as /proc writes it: the address's four
	// bytes as a little-endian word, the port big-endian, in hex.
	vip := net.ParseIP(VIP).To4()
	remote := fmt.Sprintf("%02X%02X%02X%02X:%04X", vip[3], vip[2], vip[1], vip[0], 8080)
	for _, line := range strings.Split(string(tcp), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || f[2] != remote {
			continue
		}
		if f[3] == "05" || f[3] == "06" { // FIN_WAIT2, TIME_WAIT: the client's FIN was acknowledged
			continue
		}
		_, port, _ := strings.Cut(f[1], ":")
		if p, err := strconv.ParseUint(port, 16, 16); err == nil && uint16(p) != openPort {
			others = append(others, fmt.Sprintf("%d:%s", p, f[3]))
		}
	}
	return doc.Backends[0].Served, others, nil
}
