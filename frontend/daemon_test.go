package frontend

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/conf"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

// The daemon's test rig needs no privileges: the link is an in-memory
// pair whose other end plays the client and the back-end's kernel, and
// the back-end's shim is a UDP socket on the loopback.
var (
	vip       = netip.MustParseAddr("198.18.0.100")
	handoff   = netip.MustParseAddr("198.18.0.101")
	clientIP  = wire.IP4From(netip.MustParseAddr("198.18.0.5"))
	loopback  = netip.MustParseAddr("127.0.0.1")
	feMAC     = wire.MAC{2, 0, 0, 0, 0, 0xfe}
	clientMAC = wire.MAC{2, 0, 0, 0, 0, 0xc1}
	serverMAC = wire.MAC{2, 0, 0, 0, 0, 0xb1}
	testKey   = "3f9c2a51d07be48816fa3c92e5017d6bb4c8e02f9a7153dd06e1b87c4f2a9d30" // the master key
)

// writeConfig writes a configuration file for the rig with customer A's
// reservation.
func writeConfig(t *testing.T, path string, reservation string) {
	t.Helper()
	dir := filepath.Dir(path)
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte(testKey), 0o600); err != nil {
		t.Fatal(err)
	}
	y := "link: {interface: mem0, type: tap}\n" +
		"handoff: " + handoff.String() + "\n" +
		"control: {listen: 127.0.0.1:7400, key_file: " + filepath.Join(dir, "key") + "}\n" +
		"backends: {keepalive_interval: 1s}\n" +
		"scheduler: {default_customer: A}\n" +
		"listeners:\n  - {vip: " + vip.String() + ", port: 80, policy: credit}\n" +
		"customers:\n  - {name: A, domains: [a.example], reservation: " + reservation + "}\n"
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
}

type rig struct {
	t      *testing.T
	d      *Daemon
	wire   *link.Mem      // the far end of the front-end's link
	frames chan []byte    // what the front-end sent on it
	shim   *net.UDPConn   // the back-end's shim
	feCtl  netip.AddrPort // the front-end's control socket
	key    []byte         // back-end 1's, derived from the master
	codec  *proto.Codec   // back-end 1's, incarnation 9
}

func newRig(t *testing.T, cfgPath string, mods ...func(*Config)) *rig {
	t.Helper()
	f, err := conf.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := FromFile(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	cfg.MAC = feMAC
	cfg.Control = netip.AddrPortFrom(loopback, 0) // any free port
	cfg.Admin = "127.0.0.1:0"
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	feLink, far := link.NewMemPair(64)
	ctl, err := listenControl(cfg.Control, cfg.Key, proto.NewIncarnation(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDaemon(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), []link.Link{feLink}, ctl, daemonBoot{})
	if err != nil {
		t.Fatal(err)
	}
	shim, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		t.Fatal(err)
	}
	key, err := proto.DeriveKey(cfg.Key, 1)
	if err != nil {
		t.Fatal(err)
	}
	codec, err := proto.NewBackEndCodec(1, key, 9)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, d: d, wire: far, frames: make(chan []byte, 64), shim: shim,
		feCtl: ctl.sock.LocalAddr(), key: key, codec: codec}
	t.Cleanup(func() { shim.Close(); far.Close() })
	return r
}

// run starts the daemon's loop and a reader of its link; the returned
// function stops both and waits for them.
func (r *rig) run() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.d.Run(ctx) }()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		buf := make([]byte, 2048)
		for {
			n, err := r.wire.ReadFrame(buf)
			if err != nil {
				return
			}
			r.frames <- append([]byte(nil), buf[:n]...)
		}
	}()
	return func() {
		cancel()
		if err := <-errc; err != nil {
			r.t.Errorf("Run: %v", err)
		}
		r.wire.Close()
		<-readerDone
	}
}

// sendCtl sends m as back-end 1's shim does, and returns the datagram.
func (r *rig) sendCtl(m proto.Message) []byte {
	r.t.Helper()
	b, err := r.codec.Append(nil, m)
	if err != nil {
		r.t.Fatal(err)
	}
	r.sendRaw(b)
	return b
}

// sendRaw sends datagram b from the shim's socket.
func (r *rig) sendRaw(b []byte) {
	r.t.Helper()
	if _, err := r.shim.WriteToUDPAddrPort(b, r.feCtl); err != nil {
		r.t.Fatal(err)
	}
}

// recvCtl waits for the next control message of type T to the shim.
func recvCtl[T proto.Message](r *rig) T {
	r.t.Helper()
	buf := make([]byte, 2048)
	r.shim.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		n, _, err := r.shim.ReadFromUDPAddrPort(buf)
		if err != nil {
			r.t.Fatalf("waiting for a control message: %v", err)
		}
		m, err := r.codec.Decode(buf[:n])
		if err != nil {
			r.t.Fatal(err)
		}
		if v, ok := m.(T); ok {
			return v
		}
	}
}

// expectFrame waits for a TCP frame of the front-end's that match accepts.
func (r *rig) expectFrame(what string, match func(p *wire.Packet) bool) []byte {
	r.t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case f := <-r.frames:
			var p wire.Packet
			if wire.Parse(f, &p) == nil && p.Kind == wire.KindTCP && match(&p) {
				return f
			}
		case <-timeout:
			r.t.Fatalf("no %s from the front-end", what)
			return nil
		}
	}
}

// clientRequest opens a client connection from port with ISN isn to the
// VIP's port 80 and sends req in one segment; it returns the front-end's
// ISN (its SYN cookie).
func (r *rig) clientRequest(isn wire.Seq, port uint16, req []byte) wire.Seq {
	r.t.Helper()
	vip4 := wire.IP4From(vip)
	var so [8]byte
	syn := wire.SynOptions{MSS: 1460, WScale: -1}
	r.send(wire.TCPFrame{SrcMAC: clientMAC, DstMAC: feMAC, Src: clientIP, Dst: vip4, SrcPort: port, DstPort: 80,
		Seq: isn, Flags: wire.TCPFlagSYN, Window: 65535, Options: so[:syn.Encode(so[:])]})
	ourISN := parsed(r.t, r.expectFrame("SYN-ACK", func(p *wire.Packet) bool {
		return p.TCP.Has(wire.TCPFlagSYN | wire.TCPFlagACK)
	})).TCP.Seq()
	r.send(wire.TCPFrame{SrcMAC: clientMAC, DstMAC: feMAC, Src: clientIP, Dst: vip4, SrcPort: port, DstPort: 80,
		Seq: isn + 1, Ack: ourISN + 1, Flags: wire.TCPFlagACK | wire.TCPFlagPSH, Window: 65535, Payload: req})
	return ourISN
}

func (r *rig) send(tf wire.TCPFrame) {
	r.t.Helper()
	b := make([]byte, tf.Len())
	tf.Encode(b)
	if err := r.wire.WriteFrame(b); err != nil {
		r.t.Fatal(err)
	}
}

func parsed(t *testing.T, b []byte) *wire.Packet {
	var p wire.Packet
	if err := wire.Parse(b, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after the daemon stopped, %d before:\n%s",
				runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // goroutines end a moment after Run returns
	}
}

// One connection through the whole daemon: a back-end registers, a
// client's request is accepted, handed off (C2 SYN, Splice to the shim,
// the request on C2 once it confirms), and the shim's Feedback shows in
// the status and the metrics. When Run returns no goroutine is left.
func TestDaemonHandsOffAConnection(t *testing.T) {
	// The runtime's signal watcher starts with the first signal.Notify
	// and stays for good: start it before counting.
	warm := make(chan os.Signal, 1)
	signal.Notify(warm, syscall.SIGHUP)
	signal.Stop(warm)
	before := runtime.NumGoroutine()
	cfgPath := filepath.Join(t.TempDir(), "frontend.yaml")
	writeConfig(t, cfgPath, "100")
	r := newRig(t, cfgPath)
	stop := r.run()

	shimPort := r.shim.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	r.sendCtl(&proto.Register{BackendID: 1, IP: loopback, MAC: serverMAC, ControlPort: shimPort, Capacity: 5, Incarnation: 9})
	if ack := recvCtl[*proto.RegisterAck](r); ack.BackendID != 1 || ack.Incarnation != 9 || ack.KeepaliveInterval != time.Second {
		t.Fatalf("RegisterAck %+v", ack)
	}

	const clientISN, clientPort = wire.Seq(0x1000), 40001
	req := []byte("GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
	r.clientRequest(clientISN, clientPort, req)

	server := wire.IP4From(loopback)
	c2 := parsed(t, r.expectFrame("C2 SYN", func(p *wire.Packet) bool {
		return p.IP.Dst() == server && p.TCP.Flags() == wire.TCPFlagSYN
	}))
	if c2.TCP.Seq() != clientISN || c2.TCP.DstPort() != 80 {
		t.Fatalf("C2 SYN seq %v port %d, want the client's ISN and port 80", c2.TCP.Seq(), c2.TCP.DstPort())
	}
	hport := c2.TCP.SrcPort()
	var sso [8]byte
	ssyn := wire.SynOptions{MSS: 1460, WScale: -1}
	r.send(wire.TCPFrame{SrcMAC: serverMAC, DstMAC: feMAC, Src: server, Dst: wire.IP4From(handoff), SrcPort: 80, DstPort: hport,
		Seq: 0x9000, Ack: clientISN + 1, Flags: wire.TCPFlagSYN | wire.TCPFlagACK, Window: 65535, Options: sso[:ssyn.Encode(sso[:])]})
	sp := recvCtl[*proto.Splice](r)
	if sp.ClientPort != clientPort || sp.HandoffPort != hport || sp.BackendIP != loopback {
		t.Fatalf("Splice %+v", sp)
	}
	r.sendCtl(&proto.SpliceAck{RequestID: sp.RequestID, BackendID: 1, OK: true})
	onC2 := parsed(t, r.expectFrame("request on C2", func(p *wire.Packet) bool {
		return p.IP.Dst() == server && len(p.TCP.Payload()) > 0
	}))
	if string(onC2.TCP.Payload()) != string(req) {
		t.Fatalf("request on C2 %q", onC2.TCP.Payload())
	}
	r.sendCtl(&proto.Feedback{BackendID: 1, RequestID: sp.RequestID, ServiceTime: 5 * time.Millisecond, ResponseBytes: 100})
	var st Status
	for deadline := time.Now().Add(5 * time.Second); ; {
		var ok bool
		if st, ok = r.d.Snapshot(); !ok {
			t.Fatal("no snapshot")
		}
		if len(st.Backends) == 1 && st.Backends[0].Served == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond) // the Feedback crosses a socket
	}
	if b := st.Backends[0]; b.Served != 1 || b.Dispatched != 1 || b.InService != 0 || !b.Alive {
		t.Fatalf("back-end in the status: %+v", b)
	}
	if st.Engine.HandoffsDone != 1 || len(st.Customers) == 0 || st.Customers[0].Served != 1 {
		t.Fatalf("status: engine %+v, customers %+v", st.Engine, st.Customers)
	}
	// A datagram that does not decode is counted, not acted on.
	if _, err := r.shim.WriteToUDPAddrPort([]byte("not a control message"), r.feCtl); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); st.BadCtl == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond) // the datagram crosses a socket
		st, _ = r.d.Snapshot()
	}
	if st.BadCtl != 1 {
		t.Errorf("%d bad control messages counted, want 1", st.BadCtl)
	}
	// The admin server answers with the same figures.
	admin := "http://" + r.d.adminLn.Addr().String()
	var fromHTTP Status
	if err := getJSON(admin+"/status", &fromHTTP); err != nil {
		t.Fatal(err)
	}
	if len(fromHTTP.Backends) != 1 || fromHTTP.Backends[0].Served != 1 || fromHTTP.Engine.HandoffsDone != 1 {
		t.Errorf("/status: back-ends %+v, engine %+v", fromHTTP.Backends, fromHTTP.Engine)
	}
	checkHandoffMetrics(t, admin) // metrics_scrape_test.go
	stop()
	r.shim.Close()
	waitGoroutines(t, before)
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// Missing settings are each named.
func TestConfigValidation(t *testing.T) {
	var cfg Config
	cfg.setDefaults()
	err := cfg.validate()
	for _, want := range []string{"link:", "vip:", "handoff:", "ports:", "control:", "key:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("an empty configuration: %v, want an error about %s", err, want)
		}
	}
	cfg = Config{Link: "x", LinkType: "ring", VIPs: []netip.Addr{netip.MustParseAddr("::1")}}
	err = cfg.validate()
	for _, want := range []string{"link-type:", "vip: ::1 is not IPv4"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error about %s", cfg, err, want)
		}
	}
}

// A reload takes a new reservation; a file that does not parse changes
// nothing and is counted.
func TestDaemonReload(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "frontend.yaml")
	writeConfig(t, cfgPath, "100")
	r := newRig(t, cfgPath)
	writeConfig(t, cfgPath, "250")
	r.d.reload()
	if st := r.d.status(); st.Reloads != 1 || st.Customers[0].Reservation != 250 {
		t.Fatalf("after a reload: %d reloads, A reserves %v", st.Reloads, st.Customers[0].Reservation)
	}
	if err := os.WriteFile(cfgPath, []byte("link: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.d.reload()
	if st := r.d.status(); st.ReloadsFailed != 1 || st.Customers[0].Reservation != 250 {
		t.Fatalf("after a bad file: %d failed, A reserves %v", st.ReloadsFailed, st.Customers[0].Reservation)
	}
	r.d.ctl.Close() // Run, which would close them, never ran
	r.d.adminLn.Close()
}

// Engine and controller time never go back, whichever goroutine enters
// them: a shard's pass stamps its engine later than the controller may
// call it with (shard.go), and the engine is then given the later.
func TestDaemonClockNeverGoesBack(t *testing.T) {
	d := &Daemon{start: time.Now()}
	s := &shard{d: d}
	a := s.stamp(d.clock())
	s.last += 1e12 // as if the shard's pass had stamped a later time
	if b := s.stamp(d.clock()); b < a || b != s.last {
		t.Fatalf("engine time went from %v to %v, last %v", a, b, s.last)
	}
	// The controller calls the engine with its own, earlier, time.
	if got := s.stamp(a); got != s.last {
		t.Fatalf("the engine was given %v after %v", got, s.last)
	}
	c := d.ctrlStamp()
	d.ctrlLast += 1e12
	if got := d.ctrlStamp(); got < c || got != d.ctrlLast {
		t.Fatalf("controller time went from %v to %v", c, got)
	}
}

// TestDaemonSendsTheSpliceWithTheSYN: with SpliceAtSYN the Splice goes in
// the pass of C2's SYN, marked as sent with it, and the request goes once
// both the SYN-ACK and the SpliceAck came, in either order.
func TestDaemonSendsTheSpliceWithTheSYN(t *testing.T) {
	for _, ackFirst := range []bool{false, true} {
		cfgPath := filepath.Join(t.TempDir(), "frontend.yaml")
		writeConfig(t, cfgPath, "100")
		r := newRig(t, cfgPath, func(c *Config) { c.SpliceAtSYN = true })
		stop := r.run()
		shimPort := r.shim.LocalAddr().(*net.UDPAddr).AddrPort().Port()
		r.sendCtl(&proto.Register{BackendID: 1, IP: loopback, MAC: serverMAC, ControlPort: shimPort, Capacity: 5, Incarnation: 9})
		recvCtl[*proto.RegisterAck](r)

		const clientISN, clientPort = wire.Seq(0x2000), 40002
		req := []byte("GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
		ourISN := r.clientRequest(clientISN, clientPort, req)
		server := wire.IP4From(loopback)
		hport := parsed(t, r.expectFrame("C2 SYN", func(p *wire.Packet) bool {
			return p.IP.Dst() == server && p.TCP.Flags() == wire.TCPFlagSYN
		})).TCP.SrcPort()
		sp := recvCtl[*proto.Splice](r)
		if sp.Flags&proto.SpliceAtSYN == 0 || sp.HandoffPort != hport || sp.SeqDelta != uint32(ourISN) {
			t.Fatalf("Splice %+v, want one sent with the SYN of port %d", sp, hport)
		}
		var sso [8]byte
		ssyn := wire.SynOptions{MSS: 1460, WScale: -1}
		synAck := wire.TCPFrame{SrcMAC: serverMAC, DstMAC: feMAC, Src: server, Dst: wire.IP4From(handoff), SrcPort: 80, DstPort: hport,
			Seq: 0x9000, Ack: clientISN + 1, Flags: wire.TCPFlagSYN | wire.TCPFlagACK, Window: 65535, Options: sso[:ssyn.Encode(sso[:])]}
		if ackFirst {
			r.sendCtl(&proto.SpliceAck{RequestID: sp.RequestID, BackendID: 1, OK: true})
			// The ack is taken before the SYN-ACK comes: wait until
			// the controller has seen it.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				st, _ := r.d.Snapshot()
				if len(st.Backends) == 1 && st.Backends[0].InService == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the SpliceAck was not taken")
				}
			}
			r.send(synAck)
		} else {
			r.send(synAck)
			r.sendCtl(&proto.SpliceAck{RequestID: sp.RequestID, BackendID: 1, OK: true})
		}
		onC2 := parsed(t, r.expectFrame("request on C2", func(p *wire.Packet) bool {
			return p.IP.Dst() == server && len(p.TCP.Payload()) > 0
		}))
		if string(onC2.TCP.Payload()) != string(req) || onC2.TCP.Ack() != 0x9001 {
			t.Fatalf("ack first %v: request on C2 %q ack %#x", ackFirst, onC2.TCP.Payload(), uint32(onC2.TCP.Ack()))
		}
		stop()
	}
}
