package replay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// pcapBuilder writes a capture of hand-made TCP segments.
type pcapBuilder struct {
	t   *testing.T
	buf bytes.Buffer
	w   *pcapgo.Writer
	at  time.Time
}

func newPcapBuilder(t *testing.T) *pcapBuilder {
	b := &pcapBuilder{t: t, at: time.Unix(1700000000, 0)}
	b.w = pcapgo.NewWriter(&b.buf)
	if err := b.w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *pcapBuilder) seg(src, dst netip.AddrPort, seq, ack uint32, syn, ackf bool, payload string) {
	b.t.Helper()
	b.at = b.at.Add(time.Millisecond)
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()), Seq: seq, Ack: ack, SYN: syn, ACK: ackf, PSH: payload != "", Window: 500}
	tcp.SetNetworkLayerForChecksum(ip)
	sb := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp, gopacket.Payload(payload)); err != nil {
		b.t.Fatal(err)
	}
	data := sb.Bytes()
	if err := b.w.WritePacket(gopacket.CaptureInfo{Timestamp: b.at, CaptureLength: len(data), Length: len(data)}, data); err != nil {
		b.t.Fatal(err)
	}
}

// conn writes a whole connection: handshake, then each request and its
// response (split into two segments, the second first to show the
// reassembly), then nothing more.
func (b *pcapBuilder) conn(client, server netip.AddrPort, reqs, resps []string) {
	cs, ss := uint32(1000), uint32(50000)
	b.seg(client, server, cs, 0, true, false, "")
	b.seg(server, client, ss, cs+1, true, true, "")
	cn, sn := cs+1, ss+1
	for i := range reqs {
		b.seg(client, server, cn, sn, false, true, reqs[i])
		cn += uint32(len(reqs[i]))
		half := len(resps[i]) / 2
		b.seg(server, client, sn+uint32(half), cn, false, true, resps[i][half:])
		b.seg(server, client, sn, cn, false, true, resps[i][:half])
		sn += uint32(len(resps[i]))
	}
}

func get(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: h\r\n\r\n" }
func ok(body string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

var (
	liveClient = netip.MustParseAddrPort("198.18.0.10:40000")
	liveServer = netip.MustParseAddrPort("198.18.0.100:8080")
)

// TestReadLiveCaptureFindsEachExchange: a keep-alive connection with
// three requests and a connection with one, responses reassembled from
// out-of-order segments: each request's bytes, method and target, each
// response's status, length and body hash.
func TestReadLiveCaptureFindsEachExchange(t *testing.T) {
	b := newPcapBuilder(t)
	b.conn(liveClient, liveServer, []string{get("/a"), get("/b"), get("/c")}, []string{ok("alpha"), ok("bravo!"), ok("")})
	second := netip.AddrPortFrom(liveClient.Addr(), 40002)
	b.conn(second, liveServer, []string{get("/d")}, []string{"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nno!"})
	conns, err := ReadLiveCapture(bytes.NewReader(b.buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 2 || len(conns[0].Exchanges) != 3 || len(conns[1].Exchanges) != 1 {
		t.Fatalf("conns %+v", conns)
	}
	want := []struct {
		target string
		status int
		body   string
	}{{"/a", 200, "alpha"}, {"/b", 200, "bravo!"}, {"/c", 200, ""}, {"/d", 404, "no!"}}
	all := append(conns[0].Exchanges, conns[1].Exchanges...)
	for i, w := range want {
		e := all[i]
		if e.Target != w.target || e.Status != w.status || e.BodyLen != int64(len(w.body)) ||
			!e.HaveSHA || e.BodySHA != sha256.Sum256([]byte(w.body)) || string(e.Request) != get(w.target) {
			t.Errorf("exchange %d: %+v, want %+v", i, e, w)
		}
	}
	if conns[1].Start <= conns[0].Start {
		t.Errorf("second connection starts at %v, first at %v", conns[1].Start, conns[0].Start)
	}
}

// TestRunLiveChecksEveryResponse plays the capture against a server
// that answers as captured (all correct), then against one that differs
// in status, length and body (each caught).
func TestRunLiveChecksEveryResponse(t *testing.T) {
	b := newPcapBuilder(t)
	b.conn(liveClient, liveServer, []string{get("/a"), get("/b"), get("/c")}, []string{ok("alpha"), ok("bravo!"), ok("charlie")})
	conns, err := ReadLiveCapture(bytes.NewReader(b.buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{"/a": "alpha", "/b": "bravo!", "/c": "charlie"}
	run := func(h http.HandlerFunc) LiveSummary {
		srv := httptest.NewServer(h)
		defer srv.Close()
		to := netip.MustParseAddrPort(strings.TrimPrefix(srv.URL, "http://"))
		servers, err := MapServers(conns, to, nil)
		if err != nil {
			t.Fatal(err)
		}
		return RunLive(context.Background(), conns, LiveOptions{Servers: servers, Speed: 0, CheckBody: true, Timeout: 5 * time.Second})
	}
	s := run(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, bodies[r.URL.Path]) })
	if !s.Correct() || s.OK != 3 || s.Connections != 1 {
		t.Fatalf("as captured: %+v", s)
	}
	s = run(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			w.WriteHeader(500)
			fmt.Fprint(w, "alpha")
		case "/b":
			fmt.Fprint(w, "bravo")
		default:
			fmt.Fprint(w, "CHARLIE")
		}
	})
	if s.Correct() || s.WrongStatus != 1 || s.WrongLen != 1 || s.WrongBody != 1 {
		t.Fatalf("different server: %s%+v", s, s.Results)
	}
}

// TestMapServersRefusesWhatItCannotMap: a capture with two servers needs
// each mapped; the error names them.
func TestMapServersRefusesWhatItCannotMap(t *testing.T) {
	b := newPcapBuilder(t)
	b.conn(liveClient, liveServer, []string{get("/a")}, []string{ok("x")})
	other := netip.MustParseAddrPort("198.18.0.100:80")
	b.conn(netip.AddrPortFrom(liveClient.Addr(), 40001), other, []string{get("/b")}, []string{ok("y")})
	conns, err := ReadLiveCapture(bytes.NewReader(b.buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	target := netip.MustParseAddrPort("198.18.0.100:9999")
	if _, err := MapServers(conns, target, nil); err == nil || !strings.Contains(err.Error(), "198.18.0.100:80") || !strings.Contains(err.Error(), "-map") {
		t.Errorf("two servers, one target: %v", err)
	}
	m, err := MapServers(conns, netip.AddrPort{}, map[netip.AddrPort]netip.AddrPort{liveServer: target, other: target})
	if err != nil || len(m) != 2 {
		t.Errorf("both mapped: %v %v", m, err)
	}
	if _, err := MapServers(nil, target, nil); err == nil {
		t.Error("an empty capture was accepted")
	}
}
