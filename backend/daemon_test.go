package backend

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qsplice/qsplice/internal/exposition"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
	"github.com/qsplice/qsplice/tools/netns"
	"golang.org/x/sys/unix"
)

// A two-host rig for the daemon: namespace "be" runs the shim between
// its TAP (the kernel's address, backendAddr) and wire0; namespace "fe"
// is the other end of wire0 and plays the front-end, with its own kernel
// on feAddr. Everything the back-end's kernel says to the front-end (the
// control protocol, HTTP answers) crosses the shim both ways.
var (
	feAddr      = netip.MustParseAddr("198.18.99.1")
	backendAddr = netip.MustParseAddr("198.18.99.2")
	// testMaster is the front-end's master key, testKey back-end 3's.
	testMaster, _ = hex.DecodeString("3f9c2a51d07be48816fa3c92e5017d6bb4c8e02f9a7153dd06e1b87c4f2a9d30")
	testKey, _    = proto.DeriveKey(testMaster, 3)
)

type daemonRig struct {
	feCodec  *proto.Codec // the front-end's side of the control protocol
	t        *testing.T
	be, fe   string
	offloads bool
	workers  int
	ctl      *net.UDPConn // the fake front-end's control socket, in fe
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces, a TAP and AF_PACKET; CI runs as root")
	}
}

func newNS(t *testing.T, prefix string) string {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := prefix + "-" + hex.EncodeToString(b[:])
	if err := netns.Add(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(name); err != nil {
			t.Errorf("remove namespace %s: %v", name, err)
		}
	})
	return name
}

func run(t *testing.T, ns string, arg ...string) {
	t.Helper()
	if err := netns.Run(ns, arg...); err != nil {
		t.Fatal(err)
	}
}

// newDaemonRig builds the two namespaces. With offloads the veth keeps
// its checksum and segmentation offloads on, as a real NIC does, and the
// daemon runs with virtio-net headers; without, both are off.
func newDaemonRig(t *testing.T, offloads bool, workers int) *daemonRig {
	requireRoot(t)
	r := &daemonRig{t: t, be: newNS(t, "qsbe"), fe: newNS(t, "qsfe"), offloads: offloads, workers: workers}
	var err error
	if r.feCodec, err = proto.NewFrontEndCodec(testMaster, proto.NewIncarnation(time.Now())); err != nil {
		t.Fatal(err)
	}
	run(t, r.be, "ip", "link", "set", "lo", "up")
	run(t, r.fe, "ip", "link", "set", "lo", "up")
	run(t, r.be, "ip", "link", "add", "wire0", "type", "veth", "peer", "name", "eth0", "netns", r.fe)
	run(t, r.be, "ip", "link", "set", "wire0", "up")
	run(t, r.fe, "ip", "addr", "add", feAddr.String()+"/24", "dev", "eth0")
	run(t, r.fe, "ip", "link", "set", "eth0", "up")
	// The plain path carries no vnet headers: frames from the veth must
	// have complete checksums (docs/architecture.md §7).
	for _, ns := range []string{r.be, r.fe} {
		if offloads {
			break
		}
		dev := map[string]string{r.be: "wire0", r.fe: "eth0"}[ns]
		if err := netns.Do(ns, func() error { return link.DisableOffloads(dev) }); err != nil {
			t.Fatal(err)
		}
	}
	err = netns.Do(r.fe, func() (err error) {
		r.ctl, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(feAddr, 7400)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.ctl.Close() })
	return r
}

func (r *daemonRig) config() Config {
	return Config{
		ID: 3, Wire: "wire0", TAP: "tap0", Addr: backendAddr, Frontend: netip.AddrPortFrom(feAddr, 7400),
		ControlPort: 7401, WebPorts: []uint16{80}, Capacity: 5, Key: testKey, SetupTAP: true, Prefix: 24,
		TAPMAC: wire.MAC{2, 0, 0, 0x99, 0, 2}, Admin: netip.AddrPortFrom(backendAddr, exposition.DefaultAdminPort).String(),
		Offloads: r.offloads, Workers: r.workers,
		RxHold: DefaultRxHold, // receive moderation on, as qsplice-backend runs (issue 7)
	}
}

// start runs a Daemon in the back-end namespace until the returned stop
// is called; stop returns Run's error.
func (r *daemonRig) start(cfg Config) (stop func() error) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(testWriter{r.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() {
		errc <- netns.Do(r.be, func() error {
			d, err := New(cfg, log)
			if err != nil {
				return err
			}
			return d.Run(ctx)
		})
	}()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(10 * time.Second):
			r.t.Fatal("daemon did not stop within 10 s")
			return nil
		}
	}
	r.t.Cleanup(func() { stop() })
	return stop
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// recv waits for the next control message of type T, skipping others
// (keepalives, repeated Registers), and returns it with its sender.
func recv[T proto.Message](r *daemonRig, within time.Duration) (T, netip.AddrPort) {
	r.t.Helper()
	buf := make([]byte, proto.MaxDatagram)
	deadline := time.Now().Add(within)
	for {
		r.ctl.SetReadDeadline(deadline)
		n, from, err := r.ctl.ReadFromUDPAddrPort(buf)
		if err != nil {
			r.t.Fatalf("waiting for %T: %v", *new(T), err)
		}
		if _, err := r.feCodec.Decode(buf[:n]); err != nil {
			r.t.Fatalf("bad control message from the shim: %v", err)
		}
		// The Codec's message is its own until the next Decode: the
		// caller gets one of its own.
		_, m, err := proto.Unmarshal(testKey, buf[:n])
		if err != nil {
			r.t.Fatal(err)
		}
		if m, ok := m.(T); ok {
			return m, from
		}
	}
}

func (r *daemonRig) send(to netip.AddrPort, m proto.Message) {
	r.t.Helper()
	b, err := r.feCodec.Append(nil, m)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.ctl.WriteToUDPAddrPort(b, to); err != nil {
		r.t.Fatal(err)
	}
}

// status fetches /status from the fe namespace, through the shim.
func (r *daemonRig) status() Status {
	r.t.Helper()
	var st Status
	err := netns.Do(r.fe, func() error {
		conn, err := net.DialTimeout("tcp4", netip.AddrPortFrom(backendAddr, exposition.DefaultAdminPort).String(), 5*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(conn, "GET /status HTTP/1.1\r\nHost: be\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&st)
	})
	if err != nil {
		r.t.Fatalf("/status: %v", err)
	}
	return st
}

// waitGoroutines waits until no more goroutines run than before did:
// some end a moment after Run returns (the HTTP server's, the link
// readers unblocked by Close).
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after the daemon stopped, %d before:\n%s",
				runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// variants are the daemon's data paths: the offload path with one and
// two workers, and the plain path (water TAP, MTU-sized frames).
var variants = []struct {
	name     string
	offloads bool
	workers  int
}{
	{"offloads-1", true, 1},
	{"offloads-2", true, 2},
	{"plain-1", false, 1},
	{"plain-2", false, 2},
}

func TestDaemonControlProtocolAndNoLeaks(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			r := newDaemonRig(t, v.offloads, v.workers)
			before := runtime.NumGoroutine()
			stop := r.start(r.config())
			r.controlProtocol()
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			waitGoroutines(t, before)
		})
	}
}

func (r *daemonRig) controlProtocol() {
	t := r.t
	reg, shim := recv[*proto.Register](r, 10*time.Second)
	if reg.BackendID != 3 || reg.IP != backendAddr || reg.MAC != [6]byte{2, 0, 0, 0x99, 0, 2} ||
		reg.ControlPort != 7401 || reg.Capacity != 5 || shim != netip.AddrPortFrom(backendAddr, 7401) {
		t.Fatalf("Register %+v from %v", reg, shim)
	}
	// Unacknowledged, it comes again, from the same run. (When: the
	// agent's interval is checked with explicit times in
	// TestAgentRegistersUntilAcknowledged; timing two datagrams here
	// measured when this goroutine got to read them, and on a loaded
	// machine both were already queued.)
	again, _ := recv[*proto.Register](r, 5*time.Second)
	if again.Incarnation != reg.Incarnation {
		t.Fatalf("incarnation changed from %x to %x", reg.Incarnation, again.Incarnation)
	}
	// An interval of a second: the rig echoes one keepalive only, and the
	// shim registers again after three missed echoes, which at 100 ms a
	// loaded machine reached before the steps below were done.
	r.send(shim, &proto.RegisterAck{BackendID: 3, Incarnation: reg.Incarnation, KeepaliveInterval: time.Second})
	ka, _ := recv[*proto.Keepalive](r, 5*time.Second)
	if ka.Seq == 0 || ka.Incarnation != reg.Incarnation {
		t.Fatalf("keepalive %+v", ka)
	}
	r.send(shim, &proto.Keepalive{BackendID: 3, Incarnation: reg.Incarnation, Seq: ka.Seq})

	// Splices for this host are installed, each in its shard, and
	// acknowledged; one naming another back-end is refused with the
	// engine's reason.
	ln := r.listenWeb(80)
	defer ln.Close()
	// Two handoff ports whose connections the fanout puts on different
	// workers (of two).
	second := uint16(40002)
	for wire.PortsHash(second, 80)%2 == wire.PortsHash(40001, 80)%2 {
		second++
	}
	for _, port := range []uint16{40001, second} {
		conn, sp := r.dialC2(uint64(port), port)
		defer conn.Close()
		r.send(shim, sp)
		if a, _ := recv[*proto.SpliceAck](r, 2*time.Second); !a.OK || a.RequestID != uint64(port) || a.BackendID != 3 {
			t.Fatalf("ack %+v, want OK for request %d", a, port)
		}
	}
	bad := testSplice(12, 40003)
	bad.BackendIP = netip.MustParseAddr("198.18.99.3")
	r.send(shim, bad)
	if a, _ := recv[*proto.SpliceAck](r, 2*time.Second); a.OK || a.RequestID != 12 || a.Reason == "" {
		t.Fatalf("ack %+v, want a refusal of request 12", a)
	}
	// A probe is answered at once (well inside the 1 s interval).
	r.send(shim, &proto.Keepalive{BackendID: 3, Incarnation: reg.Incarnation, Seq: 0})
	recv[*proto.Keepalive](r, 2*time.Second)
	// Garbage is counted, not fatal. Nothing answers it, so the status is
	// read until the shim has counted it (it used to be read once, and on
	// a loaded machine before the datagram was read).
	r.ctl.WriteToUDPAddrPort([]byte("not a control message"), shim)
	st := r.status()
	for deadline := time.Now().Add(5 * time.Second); st.Control.BadMessages == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // polling the status, the one thing that shows the count
		st = r.status()
	}
	if !st.Registered || st.ID != 3 || st.Entries != 2 || st.Shim.Splices != 2 ||
		st.Control.SplicesRefused != 1 || st.Control.Probes != 1 || st.Control.BadMessages != 1 ||
		st.Wire.RxFrames == 0 || st.TAP.RxFrames == 0 || len(st.Workers) != r.workers || st.Offloads != r.offloads {
		t.Fatalf("status %+v", st)
	}
	if r.workers == 2 && (st.Workers[0].Entries != 1 || st.Workers[1].Entries != 1) {
		t.Fatalf("splices per shard %d and %d, want one each", st.Workers[0].Entries, st.Workers[1].Entries)
	}
	// Every datagram the front-end sent (the RegisterAck, the echo,
	// three Splices, the probe and the garbage) was taken off the wire,
	// by shard 0 (the fanout sends it all UDP), checksums verified or
	// vouched for by the vnet header; none was dropped.
	if st.Shim.ControlTaken != 7 || st.Workers[0].Shim.ControlTaken != 7 || st.Shim.ControlDrops() != 0 {
		t.Fatalf("control datagrams taken off the wire: %d (shard 0: %d), dropped %d; want 7, 7, 0",
			st.Shim.ControlTaken, st.Workers[0].Shim.ControlTaken, st.Shim.ControlDrops())
	}
	// The answers went back on the wire in frames the shim built, which
	// the front-end's kernel took (the three SpliceAcks and the probe's
	// answer were received above); the Registers went through the socket.
	if st.ControlSent.Wire < 4 || st.ControlSent.Socket < 2 {
		t.Fatalf("control datagrams sent %+v, want at least 4 on the wire and the 2 Registers on the socket", st.ControlSent)
	}
}

func testSplice(id uint64, handoffPort uint16) *proto.Splice {
	return &proto.Splice{BackendID: 3, RequestID: id, ClientIP: netip.MustParseAddr("198.18.99.50"), ClientPort: 5555,
		VIP: netip.MustParseAddr("198.18.99.100"), VIPPort: 80, HandoffIP: feAddr, HandoffPort: handoffPort,
		BackendIP: backendAddr, BackendPort: 80, SeqDelta: 1000, ClientNextHopMAC: [6]byte{2, 0, 0, 0x99, 0, 0x50},
		RequestEnd: 0}
}

// listenWeb listens on the back-end's address and port in its namespace,
// before the TAP carries the address (IP_FREEBIND). The kernel completes
// handshakes into the backlog; nothing accepts them.
func (r *daemonRig) listenWeb(port uint16) net.Listener {
	r.t.Helper()
	var ln net.Listener
	err := netns.Do(r.be, func() (err error) {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1) })
			return serr
		}}
		ln, err = lc.Listen(context.Background(), "tcp4", netip.AddrPortFrom(backendAddr, port).String())
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return ln
}

// dialC2 opens C2 from the fe namespace's handoff port to the web server
// on port 80 and returns it with request id's Splice for it. The shim
// takes a Splice only for a handshake it saw, with a RequestEnd just past
// the handoff end's ISN, which is read off the wire: the SYN-ACK's ACK.
func (r *daemonRig) dialC2(id uint64, port uint16) (net.Conn, *proto.Splice) {
	t := r.t
	t.Helper()
	var sniff *link.AFPacket
	if err := netns.Do(r.fe, func() (err error) {
		sniff, err = link.OpenAFPacket("eth0", link.AFPacketConfig{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sniff.Close()
	isn := make(chan wire.Seq, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := sniff.ReadFrame(buf)
			if err != nil {
				return
			}
			var p wire.Packet
			const synAck = uint8(wire.TCPFlagSYN | wire.TCPFlagACK)
			if wire.Parse(buf[:n], &p) == nil && p.Kind == wire.KindTCP && p.TCP.SrcPort() == 80 &&
				p.TCP.DstPort() == port && p.TCP.Flags()&synAck == synAck {
				isn <- p.TCP.Ack() - 1
				return
			}
		}
	}()
	var conn net.Conn
	err := netns.Do(r.fe, func() (err error) {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(feAddr, port)), Timeout: 5 * time.Second}
		conn, err = d.Dial("tcp4", netip.AddrPortFrom(backendAddr, 80).String())
		return err
	})
	if err != nil {
		t.Fatalf("C2 from port %d: %v", port, err)
	}
	select {
	case s := <-isn:
		sp := testSplice(id, port)
		sp.RequestEnd = uint32(s + 1)
		return conn, sp
	case <-time.After(5 * time.Second):
		conn.Close()
		t.Fatalf("no SYN-ACK seen for the C2 from port %d", port)
	}
	return nil, nil
}

func TestDaemonSpliceDelay(t *testing.T) {
	r := newDaemonRig(t, true, 1)
	cfg := r.config()
	cfg.SpliceDelay = 200 * time.Millisecond
	cfg.Admin = ""
	ln := r.listenWeb(80)
	defer ln.Close()
	stop := r.start(cfg)
	_, shim := recv[*proto.Register](r, 10*time.Second)
	conn, sp := r.dialC2(21, 40002)
	defer conn.Close()
	t0 := time.Now()
	r.send(shim, sp)
	if a, _ := recv[*proto.SpliceAck](r, 3*time.Second); !a.OK || a.RequestID != 21 {
		t.Fatalf("ack %+v", a)
	}
	if waited := time.Since(t0); waited < 200*time.Millisecond {
		t.Fatalf("acknowledged after %v, before the 200 ms delay", waited)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestDaemonTranslatesSplicedReplies runs a real C2 connection through
// the shim: the fe namespace's kernel plays the front-end's handoff end,
// and the web server's reply must leave on the wire from the VIP to the
// client, on every data path and in whichever shard owns the connection.
func TestDaemonTranslatesSplicedReplies(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			r := newDaemonRig(t, v.offloads, v.workers)
			var ln net.Listener
			err := netns.Do(r.be, func() (err error) {
				// Bound before the TAP carries the address: IP_FREEBIND.
				lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
					var serr error
					c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1) })
					return serr
				}}
				ln, err = lc.Listen(context.Background(), "tcp4", netip.AddrPortFrom(backendAddr, 80).String())
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						defer c.Close()
						buf := make([]byte, 64)
						if n, _ := c.Read(buf); n > 0 {
							c.Write([]byte("reply to " + string(buf[:n])))
						}
					}()
				}
			}()
			var sniff *link.AFPacket
			if err := netns.Do(r.fe, func() (err error) {
				sniff, err = link.OpenAFPacket("eth0", link.AFPacketConfig{Promiscuous: true})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			translated := make(chan []byte, 16)
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := sniff.ReadFrame(buf)
					if err != nil {
						return
					}
					var p wire.Packet
					if wire.Parse(buf[:n], &p) == nil && p.Kind == wire.KindTCP &&
						p.IP.Src() == wire.IP4(netip.MustParseAddr("198.18.99.100").As4()) && len(p.TCP.Payload()) > 0 {
						translated <- append([]byte(nil), buf[:n]...)
					}
				}
			}()
			defer sniff.Close()

			stop := r.start(r.config())
			_, shim := recv[*proto.Register](r, 10*time.Second)
			// Two handoff ports whose connections the fanout puts on different
			// workers (of two).
			second := uint16(40002)
			for wire.PortsHash(second, 80)%2 == wire.PortsHash(40001, 80)%2 {
				second++
			}
			for _, port := range []uint16{40001, second} {
				// C2 first, then its Splice, then the request: the
				// handoff's order.
				conn, sp := r.dialC2(uint64(port), port)
				r.send(shim, sp)
				if a, _ := recv[*proto.SpliceAck](r, 2*time.Second); !a.OK {
					t.Fatalf("ack %+v", a)
				}
				conn.Write([]byte("GET"))
				select {
				case f := <-translated:
					var p wire.Packet
					wire.Parse(f, &p)
					if p.IP.Dst() != wire.IP4(netip.MustParseAddr("198.18.99.50").As4()) || p.TCP.SrcPort() != 80 ||
						p.TCP.DstPort() != 5555 || p.Eth.Dst() != (wire.MAC{2, 0, 0, 0x99, 0, 0x50}) ||
						string(p.TCP.Payload()) != "reply to GET" {
						t.Fatalf("translated reply %v -> %v:%d, payload %q", p.IP.Src(), p.IP.Dst(), p.TCP.DstPort(), p.TCP.Payload())
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("no translated reply for the connection from port %d", port)
				}
				conn.Close()
			}
			st := r.status()
			if st.Shim.Translated == 0 {
				t.Fatalf("status %+v: nothing translated", st)
			}
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(Config{Workers: -1}, slog.Default())
	if err == nil {
		t.Fatal("empty config accepted")
	}
	for _, want := range []string{"id:", "wire/tap:", "addr:", "frontend:", "web-ports:", "capacity:", "key:", "workers:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestNewFailsOnMissingDevices(t *testing.T) {
	r := newDaemonRig(t, true, 2)
	cfg := r.config()
	cfg.Wire = "nosuch0"
	err := netns.Do(r.be, func() error {
		_, err := New(cfg, slog.Default())
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "nosuch0") {
		t.Fatalf("New with a missing wire device: %v", err)
	}
	// Everything New opened is closed again: the TAP is gone.
	if err := netns.Run(r.be, "ip", "link", "show", "tap0"); err == nil {
		t.Fatal("tap0 left behind by a failed New")
	}
}

// TestDaemonRecreatesSingleQueueTAP: a TAP made beforehand without
// multi_queue (as ip tuntap add does by default) is made again with one
// queue per worker.
func TestDaemonRecreatesSingleQueueTAP(t *testing.T) {
	r := newDaemonRig(t, true, 2)
	run(t, r.be, "ip", "tuntap", "add", "tap0", "mode", "tap")
	stop := r.start(r.config())
	recv[*proto.Register](r, 10*time.Second)
	if st := r.status(); len(st.Workers) != 2 {
		t.Fatalf("%d workers", len(st.Workers))
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestShardOfMatchesFanout(t *testing.T) {
	// shardOf must name the fanout member that receives the C2
	// connection's frames in both directions.
	for _, n := range []int{1, 2, 3, 4, 7} {
		for _, hp := range []uint16{1, 40001, 40002, 65535} {
			m := &proto.Splice{BackendPort: 8080, HandoffPort: hp}
			for _, f := range [][]byte{tcpFrame(8080, hp), tcpFrame(hp, 8080)} {
				if got, want := shardOf(m, n), link.FanoutShard(f, n); got != want {
					t.Fatalf("n %d handoff port %d: shardOf %d, fanout %d", n, hp, got, want)
				}
			}
		}
	}
}

// tcpFrame is an Ethernet/IPv4/TCP frame from sport to dport.
func tcpFrame(sport, dport uint16) []byte {
	f := make([]byte, 14+20+20)
	f[12], f[13] = 0x08, 0x00
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 6
	ip[2], ip[3] = 0, 40
	copy(ip[12:], []byte{198, 18, 99, 1, 198, 18, 99, 2})
	tcp := ip[20:]
	tcp[0], tcp[1], tcp[2], tcp[3] = byte(sport>>8), byte(sport), byte(dport>>8), byte(dport)
	tcp[12] = 5 << 4
	return f
}

// TestDaemonPacketPathAllocatesNothing moves a bulk TCP transfer through
// a running daemon and counts the process's allocations per frame the
// shim read: the workers' passes (poll, batch reads, engine, batch
// writes) must not allocate. The frame count proves the path ran.
func TestDaemonPacketPathAllocatesNothing(t *testing.T) {
	for _, v := range []struct {
		name     string
		offloads bool
		workers  int
	}{{"offloads-2", true, 2}, {"plain-1", false, 1}} {
		t.Run(v.name, func(t *testing.T) {
			r := newDaemonRig(t, v.offloads, v.workers)
			size := 32 << 20
			if v.offloads {
				size = 128 << 20
			}
			var ln net.Listener
			if err := netns.Do(r.be, func() (err error) {
				lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
					var serr error
					c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1) })
					return serr
				}}
				ln, err = lc.Listen(context.Background(), "tcp4", netip.AddrPortFrom(backendAddr, 8080).String())
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				chunk := make([]byte, 256<<10)
				for sent := 0; sent < size; sent += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
			stop := r.start(r.config())
			recv[*proto.Register](r, 10*time.Second)
			var conn net.Conn
			if err := netns.Do(r.fe, func() (err error) {
				conn, err = net.DialTimeout("tcp4", netip.AddrPortFrom(backendAddr, 8080).String(), 5*time.Second)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			buf := make([]byte, 256<<10)
			// Warm up: buffers and slices grow to their working size.
			for range 16 {
				if _, err := io.ReadFull(conn, buf); err != nil {
					t.Fatal(err)
				}
			}
			before := r.status()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			got := 4 << 20
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			for got < size {
				n, err := conn.Read(buf)
				if err != nil {
					t.Fatalf("after %d bytes: %v", got, err)
				}
				got += n
			}
			runtime.ReadMemStats(&m1)
			after := r.status()
			frames := (after.TAP.RxFrames + after.Wire.RxFrames) - (before.TAP.RxFrames + before.Wire.RxFrames)
			allocs := m1.Mallocs - m0.Mallocs
			t.Logf("%d frames through the shim, %d allocations in the process (%.4f per frame)",
				frames, allocs, float64(allocs)/float64(frames))
			if frames < 500 {
				t.Fatalf("only %d frames through the shim: the transfer did not take the measured path", frames)
			}
			if holds := rxHolds(after) - rxHolds(before); v.offloads && holds == 0 {
				t.Fatal("no receive-moderation hold during a bulk transfer: the held path did not run")
			}
			if inWait := after.Wire.TxInWait - before.Wire.TxInWait; v.offloads && inWait == 0 {
				t.Fatal("no wire frame sent inside a hold during a bulk transfer: the path did not run")
			}
			// A keepalive or two and the test's own reads may allocate;
			// one allocation per frame anywhere would be thousands.
			if float64(allocs) > 0.02*float64(frames) {
				t.Fatalf("%d allocations for %d frames", allocs, frames)
			}
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}

// rxHolds is the receive-moderation holds of every worker (issue 7).
func rxHolds(st Status) (n uint64) {
	for _, w := range st.Workers {
		n += w.RxHolds
	}
	return n
}
