// Command qsplice-frontend runs the front-end: it owns the VIP(s), accepts
// client connections, reads each request head and splices the connection
// to a back-end web server whose shim (qsplice-backend) sends the response
// straight to the client.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/internal/flagcheck"
	"github.com/qsplice/qsplice/internal/gather"
	"github.com/qsplice/qsplice/internal/privilege"
	"github.com/qsplice/qsplice/internal/version"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

const usage = `qsplice-frontend: the front-end of a TCP splicing web cluster.

  client --SYN/request--> [front-end: VIP] --C2 (client's ISN)--> back-end web server
  client <--------- response, rewritten by the back-end shim, never via the front-end

The front-end answers ARP for -vip and -handoff itself; neither address may be
configured on a kernel interface. Back-ends (qsplice-backend) register over UDP
at -control; -key is the control protocol's master key, and each back-end
holds only the key derived from it for its id (genkey, derivekey).

Usage: qsplice-frontend -config FILE              (SIGHUP reloads FILE)
       qsplice-frontend validate FILE...          (check files and their key files; warnings too)
       qsplice-frontend -link IF -vip ADDR -handoff ADDR -control ADDR:PORT -key FILE [flags]
       qsplice-frontend genkey -o FILE            (a new master key)
       qsplice-frontend derivekey -master FILE -backend N -o FILE   (back-end N's key)
       qsplice-frontend -version

Flags:
`

// subcommands are the commands besides running the front-end, by name.
var subcommands = map[string]func(args []string) int{
	"validate": validate,
}

func main() {
	if len(os.Args) > 1 {
		if cmd := subcommands[os.Args[1]]; cmd != nil {
			os.Exit(cmd(os.Args[2:]))
		}
	}
	var (
		cfg       frontend.Config
		vips      = flag.String("vip", "", "client-facing virtual IPv4 address(es), comma separated")
		handoff   = flag.String("handoff", "", "IPv4 address the front-end uses as the source of handoff connections (C2)")
		ports     = flag.String("ports", "80", "listening TCP ports on the VIPs; a request is sent to the same port on a back-end")
		hports    = flag.String("handoff-ports", "20000-60999", "FIRST-LAST: source ports of the handoff connections to each back-end (each back-end has the whole range; a port comes back to a back-end after range/rate seconds, and one whose TIME-WAIT there would refuse the new SYN is passed over)")
		control   = flag.String("control", "", "UDP address:port for back-end control messages (a kernel address of this host)")
		keyFile   = flag.String("key", "", "file with the control protocol's master key (hex, mode 0600; make one with genkey)")
		mac       = flag.String("mac", "", "MAC address to use (default: the interface's for afpacket, random for tap)")
		logLevel  = flag.String("log-level", "info", "debug, info, warn or error")
		logFormat = flag.String("log-format", "text", "text or json")
	)
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to this file until the front-end stops")
	configFile := flag.String("config", "", "YAML configuration file (then no other configuration flags); SIGHUP reloads it")
	flag.StringVar(&cfg.Link, "link", "", "network interface (afpacket) or TAP device name (tap)")
	flag.StringVar(&cfg.LinkType, "link-type", "afpacket", "afpacket: bump on a kernel interface; tap: pure userspace host on a TAP device")
	flag.StringVar(&cfg.Admin, "admin", "", "HTTP address for /status and /metrics (empty: off)")
	flag.BoolVar(&cfg.Pprof, "pprof", false, "also serve Go's profiler under /debug/pprof/ on -admin (CPU and allocation profiles)")
	flag.StringVar(&cfg.Capture, "capture", "", "write every frame on the link to this pcap file (a .pcapng file also gets the control datagrams)")
	flag.StringVar(&cfg.Timeline, "timeline", "", "write each connection's handoff timeline to this file, one JSON line per connection (qsplice-timeline reads it)")
	// Slots by default: measured in the lab under a download (wrk, 8
	// connections, 64M), they take the front-end's recvmmsg calls (about
	// 0.2 per frame) to none with the 1K time to first byte unchanged,
	// for a 4 MiB ring in place of the 4 MiB socket buffer. Blocks cut
	// its system calls by three quarters (fewer wake-ups) but every frame
	// that does not fill a block waits the retire timeout: the 1K time
	// to first byte grows from about 0.9 to 4 ms at 1ms, 8 ms at 2ms.
	rxRing := flag.String("rx-ring", "slots", "afpacket link: "+link.RingFlagUsage)
	// -workers: shards, each an engine on its own AF_PACKET fanout member
	// and goroutine (frontend/shard.go); the scheduler stays global.
	flag.IntVar(&cfg.Workers, "workers", 0, "afpacket link: packet engines, each on its own core and socket of one fanout group (0: one per CPU)")
	gatherFlag := flag.String("gather", gather.Default.String(), "afpacket link: "+gather.Usage("workers"))
	flag.DurationVar(&cfg.RxHold, "rx-hold", 0, "afpacket link: longest receive-moderation hold; under a steady stream of client ACKs a worker waits up to this long so that one pass forwards many (0: 2ms; negative: never hold)")
	flag.StringVar(&cfg.RingWait, "ring-wait", frontend.RingWaitHolds, "afpacket link: which waits of a worker happen in io_uring, sending the frames of the pass just ended in the same io_uring_enter (one system call per pass where sendmmsg and epoll_wait make two): holds (the receive-moderation holds of a bulk load), all, or off")
	flag.IntVar(&cfg.QueueCapacity, "queue", 1024, "requests that may wait for a back-end; beyond that clients get 503")
	flag.DurationVar(&cfg.KeepaliveInterval, "keepalive", time.Second, "keepalive interval told to back-ends")
	flag.BoolVar(&cfg.EarlyRequest, "early-request", true, "let a safe first request (GET, HEAD, OPTIONS, TRACE) whose back-end has a slot free go with its Splice, not at the shim's SpliceAck: with -splice-at-syn the Splice carries it and the shim sends it as the back-end's SYN-ACK passes, so it does not wait for the SYN-ACK to reach the front-end and come back; without, it follows the Splice and the shim holds it until the Splice is in place; false: every request waits for the SpliceAck")
	flag.BoolVar(&cfg.ControlSocketOnly, "control-socket-only", false, "run the control protocol through the control socket only; by default, on an AF_PACKET link whose interface has the -control address, a request's Splice goes as a frame in the batch of its pass, and the back-ends' datagrams are read off the link with the frames (the socket then refuses what came through the link): about a system call less per request")
	flag.BoolVar(&cfg.FastOpen, "fast-open", true, "when a Splice carries its request, ask in the handoff connection's SYN for the back-end kernel's TCP Fast Open cookie (RFC 7413): a shim that has one puts the request in the SYN, and the back-end's server reads it while the SYN-ACK is on its way out (the back-end needs net.ipv4.tcp_fastopen=3 and a server listening with TCP_FASTOPEN, e.g. nginx's listen ... fastopen=N; without, nothing changes); false: no cookie option")
	flag.BoolVar(&cfg.FastOpenInSYN, "fast-open-in-syn", true, "with -fast-open, once a back-end's SYN-ACK gave its kernel's cookie, put the cookie and the request in the SYN here, not at the shim: the SYN needs nothing from the shim, and a shim running its SYN fast path (qsplice-backend -syn-fastpath) has its kernel take it from the wire, a shim wake-up less before the first byte; false: the shim fills the SYN")
	flag.BoolVar(&cfg.PoolC2, "pool-c2", true, "keep a handoff connection whose client closed (or asked to close) an idle connection, and give it to the next request for the same back-end instead of opening one: no accept, handshake or close at the back-end for that request (docs/pooled-c2.md; /status: c2_pooled, c2_reused); -pool-c2=false opens a C2 per client connection")
	flag.IntVar(&cfg.PoolPerBackend, "pool-per-backend", 64, "with -pool-c2, the most idle handoff connections kept for one back-end")
	flag.DurationVar(&cfg.PoolAckDelay, "pool-ack-delay", time.Millisecond, "with -pool-c2, how long the client's last ACK of a pooled handoff connection's response waits for the next request on it to carry it, a frame saved per request under load (keep it below the server's loss probe, two round trips plus 2 ms; negative: send it at once)")
	flag.DurationVar(&cfg.PoolIdle, "pool-idle", 30*time.Second, "with -pool-c2, how long an idle handoff connection is kept before it is reset: keep it below the back-ends' keep-alive timeout (nginx: keepalive_timeout, 75s by default)")
	flag.BoolVar(&cfg.SpliceAtSYN, "splice-at-syn", true, "send a request's Splice with the handoff connection's SYN (when the request is buffered whole and not rewritten): the shim completes it from the back-end's SYN-ACK and acknowledges it as that passes, a round trip to the shim less before the request leaves; false: after the SYN-ACK, as before")
	flag.BoolVar(&cfg.SYNAnswer, "syn-answer", true, frontend.SYNAnswerUsage)
	flag.IntVar(&cfg.HandoffAhead, "handoff-ahead", 2, "handoffs set up per back-end beyond its concurrency, so the C2 handshake and Splice round trip take no slot time (0: inside the slot)")
	flag.DurationVar(&cfg.Linger, "linger", 5*time.Second, "how long a closed connection is remembered for late segments")
	flag.DurationVar(&cfg.IdleTimeout, "idle-timeout", 15*time.Minute, "a spliced connection with no client packet for this long is reset")
	flag.DurationVar(&cfg.HeadTimeout, "head-timeout", 10*time.Second, "a client must send its request head within this time (else 408)")
	flag.StringVar(&cfg.CookieSeed, "cookie-seed", "", "derive the SYN-cookie secret from this string (default: random each start)")
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
	if showVersion.Print(os.Stdout, "qsplice-frontend") {
		return
	}
	log := newLogger(*logLevel, *logFormat)
	fail := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "qsplice-frontend: "+format+"\n", a...)
		os.Exit(2)
	}
	if flag.NArg() > 0 {
		fail("unexpected argument %q (commands: validate, genkey, derivekey; -h for help)", flag.Arg(0))
	}
	if err := checkFlags(&cfg); err != nil {
		fail("%v", err)
	}
	if err := privilege.Check("qsplice-frontend", *allowRoot); err != nil {
		fail("%v", err)
	}
	profile = *cpuProfile
	var err error
	if cfg.Gather, err = gather.Parse(*gatherFlag); err != nil {
		fail("-gather: %v", err)
	}
	if cfg.RxRing, err = link.ParseRingFlag(*rxRing); err != nil {
		fail("-rx-ring: %v", err)
	}
	if *configFile != "" {
		runFromFile(*configFile, tuning{pprof: cfg.Pprof, rxRing: cfg.RxRing, workers: cfg.Workers, gather: cfg.Gather, rxHold: cfg.RxHold, ringWait: cfg.RingWait, earlyRequest: cfg.EarlyRequest, spliceAtSYN: cfg.SpliceAtSYN, poolC2: cfg.PoolC2, poolPerBackend: cfg.PoolPerBackend, poolIdle: cfg.PoolIdle, poolAckDelay: cfg.PoolAckDelay, synAnswer: cfg.SYNAnswer, fastOpen: cfg.FastOpen, fastOpenInSYN: cfg.FastOpenInSYN, controlSocketOnly: cfg.ControlSocketOnly, timeline: cfg.Timeline}, log, fail)
		return
	}
	if cfg.VIPs, err = flagcheck.Addrs(*vips); err != nil {
		fail("-vip: %v", err)
	}
	if *handoff != "" {
		if cfg.Handoff, err = netip.ParseAddr(*handoff); err != nil {
			fail("-handoff: %v", err)
		}
	}
	if cfg.Ports, err = flagcheck.Ports(*ports); err != nil {
		fail("-ports: %v", err)
	}
	if cfg.HandoffPortFirst, cfg.HandoffPortLast, err = parsePortRange(*hports); err != nil {
		fail("-handoff-ports: %v", err)
	}
	if *control != "" {
		if cfg.Control, err = netip.ParseAddrPort(*control); err != nil {
			fail("-control: %v", err)
		}
	}
	if *keyFile == "" {
		fail("-key: a key file is required")
	}
	if cfg.Key, err = proto.LoadKey(*keyFile); err != nil {
		fail("-key: %v", err)
	}
	if *mac != "" {
		if cfg.MAC, err = wire.ParseMAC(*mac); err != nil {
			fail("-mac: %v", err)
		}
	}
	serve(cfg, log, fail)
}

// serve runs the front-end until SIGINT or SIGTERM.
func serve(cfg frontend.Config, log *slog.Logger, fail func(string, ...any)) {
	if err := frontend.Check(cfg); err != nil {
		fail("%v", err)
	}
	// The profile is created once every flag and the configuration have
	// been checked: a refused start leaves no file behind.
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			fail("-cpuprofile: %v", err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	d, err := frontend.New(cfg, log)
	if err != nil {
		fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := d.Run(ctx); err != nil {
		log.Error("front-end stopped", "err", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func newLogger(level, format string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		fmt.Fprintf(os.Stderr, "qsplice-frontend: -log-level: %v\n", err)
		os.Exit(2)
	}
	if format != "text" && format != "json" {
		fmt.Fprintf(os.Stderr, "qsplice-frontend: -log-format: %q is neither text nor json\n", format)
		os.Exit(2)
	}
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// parsePortRange reads FIRST-LAST, 1 <= FIRST <= LAST <= 65535.
func parsePortRange(s string) (first, last uint16, err error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not FIRST-LAST", s)
	}
	f, errA := strconv.ParseUint(strings.TrimSpace(a), 10, 16)
	l, errB := strconv.ParseUint(strings.TrimSpace(b), 10, 16)
	if errA != nil || errB != nil || f == 0 || l < f {
		return 0, 0, fmt.Errorf("%q is not a port range FIRST-LAST with 1 <= FIRST <= LAST <= 65535", s)
	}
	return uint16(f), uint16(l), nil
}
