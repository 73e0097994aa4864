// Command qsplice-backend runs the back-end shim: a bump in the wire
// between this host's kernel (on a TAP device) and the network (an
// AF_PACKET socket on the NIC) that rewrites spliced replies so they go
// from the VIP straight to the client.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/backend"
	"github.com/qsplice/qsplice/internal/flagcheck"
	"github.com/qsplice/qsplice/internal/gather"
	"github.com/qsplice/qsplice/internal/privilege"
	"github.com/qsplice/qsplice/internal/version"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

const usage = `qsplice-backend: the back-end shim of a TCP splicing web cluster.

  web server (kernel TCP, address -addr on TAP -tap)
        |  TAP
  [qsplice-backend]  passes every frame; rewrites replies of spliced
        |  AF_PACKET connections: source -> VIP, seq/TS/window translated,
     NIC -wire       sent straight to the client's next hop

The NIC (-wire) must carry no address of its own. With -offloads (the default)
TCP super-frames of up to 64 KiB cross the shim whole, with virtio-net headers
on the TAP and on the AF_PACKET socket, and the NIC's offloads may stay on.
With -offloads=false the shim moves MTU-sized frames only, and the NIC's
checksum and segmentation offloads must be off
(ethtool -K IF tx off tso off gso off gro off).

-workers N runs N packet loops, each on its own thread with its own share of
the connections (a TAP queue and an AF_PACKET socket in one fanout group).
While their traffic fits in one core, worker 0 serves every share and the
others sleep (-gather): fewer wake-ups and system calls per frame.

Usage: qsplice-backend -id N -wire IF -tap TAP -addr ADDR -frontend ADDR:PORT -key FILE [flags]
       qsplice-backend -version

Flags:
`

func main() {
	var (
		cfg       backend.Config
		id        = flag.Uint("id", 0, "back-end id (unique in the cluster, > 0)")
		addr      = flag.String("addr", "", "the kernel's IPv4 address on the TAP (web servers listen there)")
		fe        = flag.String("frontend", "", "front-end control address:port")
		ports     = flag.String("web-ports", "80", "TCP ports served by this host's web server(s), comma separated")
		handoffs  = flag.String("handoff", "", "the front-ends' handoff addresses (their -handoff), comma separated: only the kernel's SYN-ACKs to them are taken for handoff connections, so a client connecting to -addr itself is served at once (empty: learnt from the front-ends' Splices; until the first, every connection on a web port is taken for one, and with several front-ends the first handoff of each is refused)")
		keyFile   = flag.String("key", "", "file with this back-end's control key (hex, mode 0600): qsplice-frontend derivekey -master M -backend ID -o FILE")
		ctlPort   = flag.Uint("control-port", 7401, "UDP port this shim listens on for Splice messages")
		logLevel  = flag.String("log-level", "info", "debug, info, warn or error")
		logFormat = flag.String("log-format", "text", "text or json")
	)
	flag.StringVar(&cfg.Wire, "wire", "", "network interface towards the clients and the front-end (AF_PACKET)")
	flag.StringVar(&cfg.TAP, "tap", "", "TAP device that carries the kernel's address")
	flag.IntVar(&cfg.Capacity, "capacity", 5, "concurrent requests this back-end accepts (told to the front-end)")
	flag.DurationVar(&cfg.Linger, "linger", 5*time.Second, "how long a closed splice is kept for late segments")
	flag.DurationVar(&cfg.IdleTimeout, "idle-timeout", 15*time.Minute, "forget a splice with no packets for this long")
	flag.BoolVar(&cfg.SetupTAP, "tap-setup", true, "create and configure the TAP: -tap-mac, -addr/-prefix, up (it vanishes when the shim exits)")
	flag.IntVar(&cfg.Prefix, "prefix", 24, "prefix length of -addr on the TAP")
	tapMAC := flag.String("tap-mac", "", "MAC address for the TAP (the host's address on the wire); default: keep the kernel's")
	flag.StringVar(&cfg.Admin, "admin", "", "HTTP address for /status, normally on -addr (empty: off)")
	flag.DurationVar(&cfg.ResponseQuiet, "response-quiet", 20*time.Millisecond, "a response ends when the client has acknowledged everything and the server stayed silent this long")
	flag.BoolVar(&cfg.FastOpen, "fast-open", true, "put a request the front-end's Splice carries in the handoff connection's SYN when this host's kernel gave a TCP Fast Open cookie for the front-end's address (RFC 7413; the kernel needs net.ipv4.tcp_fastopen=3 and the server a listener with TCP_FASTOPEN, e.g. nginx's listen ... fastopen=N); the SYN-ACK says whether the kernel took it, and if not the request follows as without")
	flag.DurationVar(&cfg.SpliceDelay, "splice-delay", 0, "hold each Splice message this long before installing it (to study handoff ordering)")
	flag.StringVar(&cfg.Capture, "capture", "", "write every frame on the wire side to this pcap file (a .pcapng file also gets the control datagrams)")
	flag.BoolVar(&cfg.Offloads, "offloads", true, "move TCP super-frames with virtio-net headers (offload TAP, PACKET_VNET_HDR); off: water TAP and MTU-sized frames")
	flag.IntVar(&cfg.Workers, "workers", runtime.NumCPU(), "packet loops, one per thread, each with its own TAP queue, wire socket and share of the connections")
	// Slots by default since the shim's receive moderation (issue 7,
	// backend/moderate.go): a worker reads the wire after every hold,
	// which a ring lets it do without a system call; with recvmmsg each
	// burst of client ACKs during a hold cost an io_uring_enter to note
	// it and a recvmmsg to read it, a third of what the holds saved
	// (docs/results.md). Before, recvmmsg was the default: it made about
	// 0.02 system calls per frame, for 4 MiB of ring per worker. Blocks
	// add the retire timeout to every request and ACK that does not fill
	// a block (the 1K time to first byte grows by milliseconds).
	rxRing := flag.String("rx-ring", "slots", link.RingFlagUsage)
	// sendmmsg by default: on a veth (the lab's wire) the kernel copies a
	// transmit ring's pages again before crossing into the peer's
	// namespace, so the ring's own copy is extra; BenchmarkTxRingBump
	// measured about 0.30 CPU-s/GB with sendmmsg against 0.42 with it.
	txRing := flag.String("tx-ring", "off", link.TxRingFlagUsage)
	gatherFlag := flag.String("gather", backend.DefaultGather.String(), "offload TAP: "+gather.Usage("workers")+"; BELOW and ABOVE are shares of the CPU time the workers' threads use")
	tapIO := flag.String("tap-io", string(backend.TAPIOAuto), backend.TAPIOUsage)
	fastPath := flag.String("reply-fastpath", string(backend.FastPathEcho), backend.FastPathUsage)
	flag.BoolVar(&cfg.SYNFastPath, "syn-fastpath", true, backend.SYNFastPathUsage)
	flag.DurationVar(&cfg.RxHold, "rx-hold", backend.DefaultRxHold, "offload TAP: longest receive-moderation hold; under a steady stream of bulk super-frames from the TAP a worker waits up to this long so that one pass translates and sends several (0: never hold)")
	allowRoot := flag.Bool(privilege.AllowRootFlag, false, privilege.AllowRootUsage)
	showVersion := version.Flag(flag.CommandLine)
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usage)
		flag.PrintDefaults()
	}
	if len(os.Args) == 1 { // a bare run: the synopsis, not one missing flag
		flag.Usage()
		os.Exit(2)
	}
	flag.Parse()
	if showVersion.Print(os.Stdout, "qsplice-backend") {
		return
	}
	fail := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "qsplice-backend: "+format+"\n", a...)
		os.Exit(2)
	}
	if flag.NArg() > 0 {
		fail("unexpected argument %q (-h for help)", flag.Arg(0))
	}
	if err := checkFlags(&cfg, *id, *ctlPort, *logFormat); err != nil {
		fail("%v", err)
	}
	if err := privilege.Check("qsplice-backend", *allowRoot); err != nil {
		fail("%v", err)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		fail("-log-level: %v", err)
	}
	hopts := &slog.HandlerOptions{Level: lvl}
	var log *slog.Logger
	if *logFormat == "json" {
		log = slog.New(slog.NewJSONHandler(os.Stderr, hopts))
	} else {
		log = slog.New(slog.NewTextHandler(os.Stderr, hopts))
	}
	var err error
	if cfg.RxRing, err = link.ParseRingFlag(*rxRing); err != nil {
		fail("-rx-ring: %v", err)
	}
	if cfg.TxRing, err = link.ParseTxRingFlag(*txRing); err != nil {
		fail("-tx-ring: %v", err)
	}
	if cfg.Gather, err = gather.Parse(*gatherFlag); err != nil {
		fail("-gather: %v", err)
	}
	if cfg.TAPIO, err = backend.ParseTAPIO(*tapIO); err != nil {
		fail("-tap-io: %v", err)
	}
	if cfg.ReplyFastPath, err = backend.ParseFastPathMode(*fastPath); err != nil {
		fail("-reply-fastpath: %v", err)
	}
	cfg.ID = uint32(*id)
	cfg.ControlPort = uint16(*ctlPort)
	if *addr != "" {
		if cfg.Addr, err = netip.ParseAddr(*addr); err != nil {
			fail("-addr: %v", err)
		}
	}
	if *fe != "" {
		if cfg.Frontend, err = netip.ParseAddrPort(*fe); err != nil {
			fail("-frontend: %v", err)
		}
	}
	if cfg.WebPorts, err = flagcheck.Ports(*ports); err != nil {
		fail("-web-ports: %v", err)
	}
	if cfg.HandoffAddrs, err = flagcheck.Addrs(*handoffs); err != nil {
		fail("-handoff: %v", err)
	}
	for _, a := range cfg.HandoffAddrs {
		if !a.Is4() {
			fail("-handoff: %v is not an IPv4 address", a)
		}
	}
	if *tapMAC != "" {
		m, err := wire.ParseMAC(*tapMAC)
		if err != nil {
			fail("-tap-mac: %v", err)
		}
		cfg.TAPMAC = m
	}
	if *keyFile == "" {
		fail("-key: a key file is required")
	}
	if cfg.Key, err = proto.LoadKey(*keyFile); err != nil {
		fail("-key: %v", err)
	}
	d, err := backend.New(cfg, log)
	if err != nil {
		fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := d.Run(ctx); err != nil {
		log.Error("back-end shim stopped", "err", err)
		os.Exit(1)
	}
}
