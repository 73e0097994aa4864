package replay

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
	"github.com/qsplice/qsplice/tools/netns"
)

// TestReplayRealCapture captures a real kernel client fetching a page from
// a real kernel server at the VIP (two throwaway namespaces joined by a
// veth) and replays that capture. Kernel ISNs, timestamp clocks, option
// layouts and partial checksums (tx offload stays on) are whatever Linux
// makes them, which the synthetic capture cannot promise.
func TestReplayRealCapture(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces; run the tests as root")
	}
	nsC, nsS := realNamespaces(t)
	const request = "GET /real HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n"

	var ln net.Listener
	if err := netns.Do(nsS, func() (err error) {
		ln, err = net.Listen("tcp4", DefaultVIP+":80")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the captured server\n")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

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
	go captureUntilClientFIN(sniffer, wire.IP4{198, 18, 0, 10}, captured)

	var conn net.Conn
	if err := netns.Do(nsC, func() (err error) {
		conn, err = net.DialTimeout("tcp4", DefaultVIP+":80", 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	if resp, err := io.ReadAll(conn); err != nil || !bytes.Contains(resp, []byte("hello from the captured server")) {
		t.Fatalf("the real exchange failed: %q, %v", resp, err)
	}
	conn.Close()

	var in []byte
	select {
	case in = <-captured:
	case <-time.After(10 * time.Second):
		t.Fatal("the capture never saw the client's FIN")
	}
	if in == nil {
		t.Fatal("capture failed")
	}

	cfg := Config{RecomputeChecksums: true}
	out, s := replay(t, cfg, in)
	again, _ := replay(t, cfg, in)
	if sum256(out) != sum256(again) {
		t.Error("two replays of the real capture differ")
	}
	if s.Requests != 1 || s.HandoffsDone != 1 || s.Drops["bad-cookie"] != 0 || s.ClientUnmapped != 0 || s.Closed["fin"] != 1 {
		var b bytes.Buffer
		s.WriteText(&b)
		t.Errorf("want 1 request spliced and closed by FIN, no bad cookie, nothing unmapped; got\n%s", b.String())
	}
	var c2Data []byte
	for i, d := range decodeCapture(t, out) {
		var p wire.Packet
		if err := wire.Parse(d.raw, &p); err != nil {
			t.Fatalf("output frame %d: %v", i+1, err)
		}
		if p.Kind != wire.KindTCP {
			continue
		}
		if p.TCP.Checksum() != p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()) {
			t.Errorf("output frame %d (%v -> %v) has a bad TCP checksum", i+1, p.IP.Src(), p.IP.Dst())
		}
		if p.IP.Src().Addr().String() == DefaultHandoffAddr {
			c2Data = append(c2Data, p.TCP.Payload()...)
		}
	}
	if string(c2Data) != request {
		t.Errorf("request on C2 = %q, want %q", c2Data, request)
	}
}

// TestReplayRealKeepAliveCapture captures a real kernel client sending
// three GETs on one keep-alive connection to a real server at the VIP and
// replays it: every GET reaches the simulated back-end, the second and
// third as admitted follow-ups.
func TestReplayRealKeepAliveCapture(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces; run the tests as root")
	}
	nsC, nsS := realNamespaces(t)
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
	var sniffer *link.AFPacket
	if err := netns.Do(nsC, func() (err error) {
		sniffer, err = link.OpenAFPacket("qrc0", link.AFPacketConfig{ReadOutgoing: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sniffer.Close() })
	captured := make(chan []byte, 1)
	go captureUntilClientFIN(sniffer, wire.IP4{198, 18, 0, 10}, captured)

	var conn net.Conn
	if err := netns.Do(nsC, func() (err error) {
		conn, err = net.DialTimeout("tcp4", DefaultVIP+":80", 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(conn)
	var requests string
	for _, path := range []string{"/one", "/two", "/three"} {
		req := "GET " + path + " HTTP/1.1\r\nHost: www.example.com\r\n\r\n"
		requests += req
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatalf("the real exchange failed at %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "hello "+path+"\n" {
			t.Fatalf("answer to %s: %q", path, body)
		}
	}
	conn.Close()
	var in []byte
	select {
	case in = <-captured:
	case <-time.After(10 * time.Second):
		t.Fatal("the capture never saw the client's FIN")
	}
	if in == nil {
		t.Fatal("capture failed")
	}

	cfg := Config{RecomputeChecksums: true}
	out, s := replay(t, cfg, in)
	again, _ := replay(t, cfg, in)
	if sum256(out) != sum256(again) {
		t.Error("two replays of the real capture differ")
	}
	if s.Requests != 3 || s.FollowUps != 2 || s.HandedOver != 3 || s.HandoffsDone != 1 || s.ClientUnmapped != 0 {
		var b bytes.Buffer
		s.WriteText(&b)
		t.Errorf("want 3 requests handed over on one handoff; got\n%s", b.String())
	}
	if got := c2Payload(t, out); string(got) != requests {
		t.Errorf("requests on C2 = %q, want %q", got, requests)
	}
}

// realNamespaces makes a client namespace (198.18.0.10 on qrc0) and a
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
	run(client, "ip", "addr", "add", "198.18.0.10/24", "dev", "qrc0")
	run(server, "ip", "addr", "add", DefaultVIP+"/24", "dev", "qrs0")
	run(client, "ip", "link", "set", "qrc0", "up")
	run(server, "ip", "link", "set", "qrs0", "up")
	return client, server
}

// captureUntilClientFIN records frames from l, stamped with the wall
// clock, until one from client carries FIN, and sends the pcap (nil on
// error) to done.
func captureUntilClientFIN(l link.Link, client wire.IP4, done chan<- []byte) {
	var buf bytes.Buffer
	w, err := link.NewPcapWriter(&buf)
	if err != nil {
		done <- nil
		return
	}
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
			done <- buf.Bytes()
			return
		}
	}
}
