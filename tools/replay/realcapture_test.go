package replay

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
	"github.com/qsplice/qsplice/tools/netns"
)

// Real kernel captures: a client namespace and a server namespace (the
// VIP on a real kernel web server) joined by a veth, the client's side
// captured while real clients fetch pages. Kernel ISNs, timestamp
// clocks, option layouts and partial checksums (tx offload stays on) are
// whatever Linux makes them, which the synthetic captures cannot promise.
// Each capture is replayed twice (the outputs must be identical), every
// request must reach a simulated back-end, and the output must read
// cleanly in tshark.

const clientAddr = "198.18.0.10"

// TestReplayRealCapture: one connection, one GET.
func TestReplayRealCapture(t *testing.T) {
	const request = "GET /real HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n"
	in := realCapture(t, 1, func(nsC string) {
		conn := dialIn(t, nsC)
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, request); err != nil {
			t.Fatal(err)
		}
		if resp, err := io.ReadAll(conn); err != nil || !bytes.Contains(resp, []byte("hello /real")) {
			t.Fatalf("the real exchange failed: %q, %v", resp, err)
		}
		conn.Close()
	})
	out, s := replayReal(t, in)
	if s.Requests != 1 || s.HandedOver != 1 || s.HandoffsDone != 1 || s.Drops["bad-cookie"] != 0 || s.ClientUnmapped != 0 || s.Closed["fin"] != 1 {
		t.Errorf("want 1 request spliced and closed by FIN, no bad cookie, nothing unmapped; got\n%s", summaryText(s))
	}
	if got := c2Payload(t, out); string(got) != request {
		t.Errorf("request on C2 = %q, want %q", got, request)
	}
}

// TestReplayRealKeepAliveCapture: curl fetches three pages on one
// keep-alive connection; every GET reaches the simulated back-end, the
// second and third as admitted follow-ups.
func TestReplayRealKeepAliveCapture(t *testing.T) {
	in := realCapture(t, 1, func(nsC string) {
		var args []string
		for _, p := range []string{"one", "two", "three"} {
			args = append(args, "-o", "/dev/null", "http://"+DefaultVIP+"/"+p)
		}
		if err := netns.Run(nsC, append([]string{"curl", "-sS", "--max-time", "10"}, args...)...); err != nil {
			t.Fatal(err)
		}
	})
	out, s := replayReal(t, in)
	if s.Requests != 3 || s.FollowUps != 2 || s.HandedOver != 3 || s.HandoffsDone != 1 || s.ClientUnmapped != 0 {
		t.Errorf("want 3 requests handed over on one handoff; got\n%s", summaryText(s))
	}
	got := string(c2Payload(t, out))
	for _, p := range []string{"one", "two", "three"} {
		if strings.Count(got, "GET /"+p+" HTTP/1.1\r\n") != 1 {
			t.Errorf("GET /%s not on C2 exactly once:\n%s", p, got)
		}
	}
}

// TestReplayRealConcurrentCapture: four connections open at once, each
// with its GET in flight before any answer.
func TestReplayRealConcurrentCapture(t *testing.T) {
	in := realCapture(t, 4, func(nsC string) { fourConcurrentGETs(t, nsC, "c") })
	out, s := replayReal(t, in)
	if s.Requests != 4 || s.HandedOver != 4 || s.HandoffsDone != 4 || s.ClientUnmapped != 0 || s.Closed["fin"] != 4 {
		t.Errorf("want 4 requests spliced and closed by FIN; got\n%s", summaryText(s))
	}
	got := string(c2Payload(t, out))
	for i := range 4 {
		if strings.Count(got, fmt.Sprintf("GET /c%d ", i)) != 1 {
			t.Errorf("GET /c%d not on C2 exactly once", i)
		}
	}
}

// realCapture runs a Go web server at the VIP in one namespace and a
// client in another, and returns the capture of the client's side once
// fins client connections have sent their FIN.
func realCapture(t *testing.T, fins int, client func(nsC string)) []byte {
	t.Helper()
	return realCaptureFrom(t, serveGo, fins, client)
}

// serveGo serves "hello <path>" with net/http at the VIP inside nsS.
func serveGo(t *testing.T, nsS string) {
	var ln net.Listener
	if err := netns.Do(nsS, func() (err error) {
		ln, err = net.Listen("tcp4", DefaultVIP+":80")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s\n", r.URL.Path)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// realCaptureFrom is realCapture with the server serve starts in the
// server namespace.
func realCaptureFrom(t *testing.T, serve func(t *testing.T, nsS string), fins int, client func(nsC string)) []byte {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces; run the tests as root")
	}
	nsC, nsS := realNamespaces(t)
	serve(t, nsS)

	// Open the capture before the client sends anything, reading the
	// client's own frames too.
	var sniffer *link.AFPacket
	if err := netns.Do(nsC, func() (err error) {
		sniffer, err = link.OpenAFPacket("qrc0", link.AFPacketConfig{ReadOutgoing: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sniffer.Close() })
	captured := make(chan []byte, 1)
	go captureUntilClientFINs(sniffer, wire.IP4From(mustAddr(clientAddr)), fins, captured)
	client(nsC)
	select {
	case in := <-captured:
		if in == nil {
			t.Fatal("capture failed")
		}
		return in
	case <-time.After(10 * time.Second):
		t.Fatal("the capture never saw the clients' FINs")
		return nil
	}
}

func dialIn(t *testing.T, ns string) net.Conn {
	t.Helper()
	var conn net.Conn
	if err := netns.Do(ns, func() (err error) {
		conn, err = net.DialTimeout("tcp4", DefaultVIP+":80", 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return conn
}

// fourConcurrentGETs opens four connections to the VIP from nsC, sends a
// GET /<prefix><i> on each before reading any answer, and checks each
// answer names its own path.
func fourConcurrentGETs(t *testing.T, nsC, prefix string) {
	var conns []net.Conn
	for range 4 {
		conns = append(conns, dialIn(t, nsC))
	}
	for i, c := range conns {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /%s%d HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n", prefix, i)
	}
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := io.ReadAll(c)
			if err != nil || !bytes.Contains(resp, fmt.Appendf(nil, "hello /%s%d", prefix, i)) {
				t.Errorf("connection %d: %q, %v", i, resp, err)
			}
			c.Close()
		}()
	}
	wg.Wait()
}

// replayReal replays a real capture twice (the outputs must be
// identical), checks the output's TCP checksums and that tshark finds
// nothing malformed in it.
func replayReal(t *testing.T, in []byte) ([]byte, Summary) {
	t.Helper()
	// The simulated handoff must run ahead of the captured client: a real
	// server answered it at once, and the client's ACKs of that response
	// reaching the engine before it spliced the connection would
	// acknowledge bytes the engine never sent, which it drops (RFC 5961,
	// splice/fe_validate.go).
	cfg := Config{RecomputeChecksums: true, ControlDelay: 1, LinkDelay: 1, ServiceDelay: 1}
	out, s := replay(t, cfg, in)
	again, _ := replay(t, cfg, in)
	if sum256(out) != sum256(again) {
		t.Error("two replays of the real capture differ")
	}
	for i, d := range decodeCapture(t, out) {
		var p wire.Packet
		if err := wire.Parse(d.raw, &p); err != nil {
			t.Fatalf("output frame %d: %v", i+1, err)
		}
		if p.Kind == wire.KindTCP && p.TCP.Checksum() != p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()) {
			t.Errorf("output frame %d (%v -> %v) has a bad TCP checksum", i+1, p.IP.Src(), p.IP.Dst())
		}
	}
	tsharkClean(t, out)
	return out, s
}

// tsharkClean fails if tshark finds a malformed frame or an expert error
// in capture (CI installs tshark; without it the check is skipped).
func tsharkClean(t *testing.T, capture []byte) {
	t.Helper()
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Log("tshark not installed: output not checked with it")
		return
	}
	path := filepath.Join(t.TempDir(), "out.pcap")
	if err := os.WriteFile(path, capture, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command("tshark", "-r", path, "-Y", `_ws.malformed || _ws.expert.severity >= "error"`).Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	if len(bytes.TrimSpace(b)) != 0 {
		t.Errorf("tshark finds errors in the output:\n%s", b)
	}
}

func summaryText(s Summary) string {
	var b bytes.Buffer
	s.WriteText(&b)
	return b.String()
}

// realNamespaces makes a client namespace (clientAddr on qrc0) and a
// server namespace (the VIP on qrs0) joined by a veth created inside them,
// removed when the test ends.
func realNamespaces(t *testing.T) (client, server string) {
	var sfx [4]byte
	if _, err := rand.Read(sfx[:]); err != nil {
		t.Fatal(err)
	}
	client, server = "qsrp-c-"+hex.EncodeToString(sfx[:]), "qsrp-s-"+hex.EncodeToString(sfx[:])
	for _, ns := range []string{client, server} {
		if err := netns.Add(ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := netns.Delete(ns); err != nil {
				t.Errorf("removing namespace %s: %v", ns, err)
			}
		})
	}
	run := func(ns string, args ...string) {
		t.Helper()
		if err := netns.Run(ns, args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{client, server} {
		run(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
		run(ns, "ip", "link", "set", "lo", "up")
	}
	run(client, "ip", "link", "add", "qrc0", "type", "veth", "peer", "name", "qrs0", "netns", server)
	run(client, "ip", "addr", "add", clientAddr+"/24", "dev", "qrc0")
	run(server, "ip", "addr", "add", DefaultVIP+"/24", "dev", "qrs0")
	run(client, "ip", "link", "set", "qrc0", "up")
	run(server, "ip", "link", "set", "qrs0", "up")
	return client, server
}

// captureUntilClientFINs records frames from l, stamped with the wall
// clock, until fins connections of client have sent a FIN, and sends the
// pcap (nil on error) to done.
func captureUntilClientFINs(l link.Link, client wire.IP4, fins int, done chan<- []byte) {
	var buf bytes.Buffer
	w, err := link.NewPcapWriter(&buf)
	if err != nil {
		done <- nil
		return
	}
	finished := map[uint16]bool{}
	frame := make([]byte, 65536)
	for {
		n, err := l.ReadFrame(frame)
		if err != nil {
			done <- nil
			return
		}
		if w.WriteFrame(time.Now(), frame[:n]) != nil {
			done <- nil
			return
		}
		var p wire.Packet
		if wire.Parse(frame[:n], &p) == nil && p.Kind == wire.KindTCP && p.IP.Src() == client && p.TCP.Has(wire.TCPFlagFIN) {
			if finished[p.TCP.SrcPort()] = true; len(finished) == fins {
				done <- buf.Bytes()
				return
			}
		}
	}
}
