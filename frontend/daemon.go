package frontend

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/frontend/timeline"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

// Daemon is a running front-end: its shards (each an engine and its
// link, shard.go), the controller, and the I/O around them.
type Daemon struct {
	cfg      Config
	log      *slog.Logger
	shards   []*shard
	ctl      *controlConn
	adminLn  net.Listener // nil without an admin address
	adminReq chan chan Status
	hup      atomic.Bool // SIGHUP seen, reload pending

	// The controller and what only it touches, under ctrlMu (shard.go):
	// engines is its view of the shards' engines, ctrlLast the latest
	// time it was given. ctrlDeadline is its next deadline, published
	// for the shards' loops: whichever wakes first runs its timers.
	ctrlMu       sync.Mutex
	ctrl         *controller.Controller
	engines      *shardedEngine
	ctrlLast     splice.Time
	ctrlDeadline atomic.Int64
	// Written under ctrlMu: datagrams that could not be sent, and the
	// reloads (shard 0's goroutine, under ctrlMu).
	ctlSendErrors          uint64
	reloads, reloadsFailed uint64
	// ctlFramesSent counts the Splices sent as frames on the link
	// (linkcontrol.go), under ctrlMu; linkCtl is their source, zero if
	// none may be.
	ctlFramesSent uint64
	linkCtl       linkControlSource
	linkCtlOff    string // why linkCtl is zero

	// start is the epoch of engine time: splice.Time is the monotonic
	// time since then, so a step of the wall clock moves no timer,
	// cookie slot or timestamp clock.
	start time.Time

	requestIDPrefix uint32 // controller.Config.RequestIDPrefix

	timelines *timeline.Writer // Config.Timeline's, under ctrlMu; nil: none

	gather *gathering // nil: one loop per shard always (gather.go)

	// syna answers SYNs in the kernel (synanswer.go); nil: the engines
	// do. synaState says how it is attached, or why not. Shard 0's
	// loop keeps its keys.
	syna      *synAnswer
	synaState string
}

// New opens the link, the control socket and the admin listener; Run
// closes them.
func New(cfg Config, log *slog.Logger) (*Daemon, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("frontend: bad configuration: %w", err)
	}
	// Whether the control protocol runs on the link (linkcontrol.go):
	// the link's filter, the socket and the shards depend on it.
	lc, _ := linkControlFrom(&cfg)
	if err := resolveMAC(&cfg); err != nil {
		return nil, err
	}
	boot, err := newBoot(&cfg)
	if err != nil {
		return nil, err
	}
	// The SYN answer before the sockets (synanswer.go).
	var synErr error
	boot.syna, boot.synaState, synErr = openSYNAnswer(&cfg, boot.secret, boot.base)
	if synErr != nil {
		log.Warn("no SYN answer in the kernel: the engine answers every SYN", bpfErrArgs(synErr)...)
	} else if boot.syna == nil && cfg.SYNAnswer {
		log.Info("SYNs answered by the engine", "reason", strings.TrimPrefix(boot.synaState, "off: "))
	}
	hide, why := hidesSYNs(&cfg, boot.syna)
	if boot.syna != nil && !hide {
		log.Info("the engines read every SYN", "reason", why)
	}
	links, err := openLinks(&cfg, lc, hide)
	if err == nil && hide {
		if boot.arp, err = openARP(&cfg); err != nil {
			for _, l := range links {
				l.Close()
			}
		}
	}
	if err != nil {
		boot.syna.close()
		return nil, err
	}
	closeAll := func() {
		for _, l := range links {
			l.Close()
		}
		if boot.arp != nil {
			boot.arp.Close()
		}
		boot.syna.close()
	}
	ctl, err := listenControl(cfg.Control, cfg.Key, proto.NewIncarnation(time.Now()))
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("frontend: %w", err)
	}
	if lc.on() {
		// The shards take the control datagrams off the link: the
		// socket must not read them again.
		if err := ctl.sock.RefuseFrom(lc.ifindex); err != nil {
			closeAll()
			ctl.Close()
			return nil, fmt.Errorf("frontend: %w", err)
		}
	}
	raw := append([]link.Link(nil), links...)
	if cfg.Capture != "" {
		// pcap, or pcapng with the control datagrams too (.pcapng).
		capture, err := link.CreateCapture(cfg.Capture, cfg.Link, time.Now)
		if err != nil {
			closeAll()
			ctl.Close()
			return nil, fmt.Errorf("frontend: capture: %w", err)
		}
		capture.Annotate(link.FrontEndNotes(cfg.VIPs, cfg.Handoff))
		for i, l := range links {
			links[i] = capture.Record(l)
		}
		capture.RecordControl(ctl.sock)
	}
	d, err := newDaemon(cfg, log, links, ctl, boot)
	if err == nil {
		err = d.openTimelines()
	}
	if err != nil {
		closeAll()
		ctl.Close()
		return nil, err
	}
	for i, s := range d.shards {
		s.rawLink = raw[i]
	}
	return d, nil
}

// openLinks opens the link of each worker: an AF_PACKET socket per
// worker, members of one fanout group when there are several (shard.go),
// or the TAP device. lc says whether the filter also keeps the control
// datagrams (linkcontrol.go); hide, that the sockets read IPv4 after tc
// ingress, where the SYNs the program answered are gone (synhide.go).
func openLinks(cfg *Config, lc linkControlSource, hide bool) ([]link.Link, error) {
	switch cfg.LinkType {
	case "afpacket":
		owned := append(append(cfg.VIPs[:0:0], cfg.VIPs...), cfg.Handoff)
		// Virtio-net headers always: on links with offloads on, client
		// frames arrive with partial checksums and GRO'd super-frames
		// that only the header describes; with offloads off the header
		// is all zero and costs nothing.
		filter := link.FilterIPv4Dst(owned)
		if lc.on() {
			// And the datagrams for the control socket (linkcontrol.go).
			filter = link.FilterIPv4DstAndUDP(owned, lc.src.Addr())
		}
		acfg := link.AFPacketConfig{Filter: filter, Promiscuous: true, VNetHdr: true, RxRing: cfg.RxRing}
		if hide {
			acfg.Protocol = unix.ETH_P_IP
		}
		if cfg.Workers > 1 {
			acfg.Fanout = &link.Fanout{Group: uint16(os.Getpid()), Mode: link.FanoutPorts}
		}
		var links []link.Link
		for range cfg.Workers {
			a, err := link.OpenAFPacket(cfg.Link, acfg)
			if err != nil {
				for _, l := range links {
					l.Close()
				}
				return nil, fmt.Errorf("frontend: %w", err)
			}
			links = append(links, a)
		}
		return links, nil
	default: // "tap"; validate allows one worker only
		t, err := link.OpenTAP(cfg.Link)
		if err != nil {
			return nil, fmt.Errorf("frontend: %w", err)
		}
		if cfg.MAC == (wire.MAC{}) {
			cfg.MAC = randomMAC()
		}
		return []link.Link{t}, nil
	}
}

// resolveMAC sets an afpacket link's MAC to the interface's unless
// configured; a TAP link's is made up in openLinks.
func resolveMAC(cfg *Config) error {
	if cfg.LinkType != "afpacket" || cfg.MAC != (wire.MAC{}) {
		return nil
	}
	ifi, err := net.InterfaceByName(cfg.Link)
	if err != nil {
		return fmt.Errorf("frontend: link %s: %w", cfg.Link, err)
	}
	cfg.MAC = wire.MAC(ifi.HardwareAddr)
	return nil
}

// daemonBoot is what is fixed before the links open: engine time's
// start (and the monotonic clock's reading of it), the SYN-cookie secret,
// and the SYN answer, which both depend on and which must be attached
// before the sockets open (synanswer.go).
type daemonBoot struct {
	start     time.Time
	base      uint64 // CLOCK_MONOTONIC at start, ns
	secret    [32]byte
	syna      *synAnswer
	synaState string
	// arp is shard 0's ARP socket when the links hide the SYNs the
	// program answered (synhide.go); nil when they read every protocol.
	arp *link.AFPacket
}

// newBoot starts engine time now and makes the secret: from
// Config.CookieSeed, or random.
func newBoot(cfg *Config) (daemonBoot, error) {
	b := daemonBoot{start: time.Now(), synaState: "off"}
	b.base = monotonicNow()
	if cfg.CookieSeed != "" {
		b.secret = sha256.Sum256([]byte(cfg.CookieSeed))
	} else if _, err := rand.Read(b.secret[:]); err != nil {
		return b, err
	}
	return b, nil
}

// newDaemon builds a shard around each open link, and the controller;
// boot is newBoot's, with the SYN answer if there is one (zero: made here,
// without).
func newDaemon(cfg Config, log *slog.Logger, links []link.Link, ctl *controlConn, boot daemonBoot) (*Daemon, error) {
	if boot.start.IsZero() {
		var err error
		if boot, err = newBoot(&cfg); err != nil {
			return nil, err
		}
	}
	secret := boot.secret
	d := &Daemon{cfg: cfg, log: log, ctl: ctl, adminReq: make(chan chan Status, 4), start: boot.start,
		syna: boot.syna, synaState: boot.synaState}
	d.linkCtl, d.linkCtlOff = linkControlOf(&cfg)
	if d.linkCtl.on() {
		d.linkCtl.src = ctl.sock.LocalAddr() // its port, if -control left it to the kernel
	}
	fail := func(err error) (*Daemon, error) {
		for _, s := range d.shards {
			s.poller.Close()
		}
		return nil, err
	}
	for i, l := range links {
		ecfg := engineConfig(&cfg, i, len(links))
		ecfg.CookieSecret = secret
		// With hidden SYNs every SYN an engine reads is one the program
		// passed on: the engine's to answer.
		ecfg.LinkAnswersSYNs = d.syna != nil && boot.arp == nil
		if d.linkCtl.on() {
			ecfg.ControlAddr, ecfg.ControlMAC = d.linkCtl.src, d.linkCtl.mac
		}
		eng, err := splice.NewFrontEnd(ecfg)
		if err != nil {
			return fail(fmt.Errorf("frontend: %w", err))
		}
		poller, err := link.NewPoller()
		if err != nil {
			return fail(fmt.Errorf("frontend: %w", err))
		}
		sh := &shard{d: d, idx: i, link: l, rawLink: l, poller: poller, engine: eng}
		sh.wakeP.Store(poller) // its own loop serves it (gather.go)
		if d.linkCtl.on() {
			sh.lctl = newLinkControl()
		}
		d.shards = append(d.shards, sh)
	}
	if boot.arp != nil {
		d.shards[0].arp, d.shards[0].arpBatch = boot.arp, link.NewBatch(arpBatchFrames, arpFrameSize)
	}
	d.engines = &shardedEngine{shards: d.shards, touched: make([]bool, len(d.shards))}
	// RequestIDs of this run carry a prefix of their own (issue 9).
	var prefix [4]byte
	rand.Read(prefix[:])
	d.requestIDPrefix = binary.BigEndian.Uint32(prefix[:])
	ctrl, err := controller.New(d.controllerConfig(cfg), d.engines, d.clock())
	if err != nil {
		return fail(fmt.Errorf("frontend: bad configuration: %w", err))
	}
	d.ctrl = ctrl
	d.ctrlDeadline.Store(int64(ctrl.NextDeadline()))
	if cfg.Admin != "" {
		if d.adminLn, err = net.Listen("tcp", cfg.Admin); err != nil {
			return fail(fmt.Errorf("frontend: admin %s: %w", cfg.Admin, err))
		}
	}
	return d, nil
}

// engineConfig is the configuration of shard i of n. The limits on
// state are the whole front-end's: each shard takes its share (rounded
// up), the port hash spreading every source's connections over the
// shards.
func engineConfig(cfg *Config, i, n int) splice.FrontEndConfig {
	share := func(v int) int {
		if v <= 0 {
			return v // a default (0) or no limit (< 0)
		}
		return (v + n - 1) / n
	}
	maxFlows := cfg.MaxFlows
	if maxFlows == 0 && n > 1 {
		maxFlows = splice.FrontEndConfig{}.WithDefaults().MaxFlows
	}
	perSource := cfg.MaxFlowsPerSource
	if perSource == 0 && n > 1 {
		perSource = splice.FrontEndConfig{}.WithDefaults().MaxFlowsPerSource
	}
	ports := cfg.MaxPortsPerSource
	if ports == 0 && n > 1 {
		ports = splice.FrontEndConfig{}.WithDefaults().MaxPortsPerSource
	}
	return splice.FrontEndConfig{
		MAC: cfg.MAC, VIPs: cfg.VIPs, Ports: cfg.Ports, HandoffAddr: cfg.Handoff,
		Linger: cfg.Linger, IdleTimeout: cfg.IdleTimeout, HeadTimeout: cfg.HeadTimeout, MaxHead: cfg.MaxHead,
		MaxFlows: share(maxFlows), MaxFlowsPerSource: share(perSource), MaxPortsPerSource: share(ports),
		FlowLifetime: cfg.FlowLifetime, HalfCloseTimeout: cfg.HalfCloseTimeout,
		HandoffPortFirst: cfg.HandoffPortFirst, HandoffPortLast: cfg.HandoffPortLast,
		Shard: i, Shards: n,
		Timelines:   cfg.Timeline != "",
		SpliceAtSYN: cfg.SpliceAtSYN,
		PoolC2:      cfg.PoolC2, PoolPerBackend: cfg.PoolPerBackend, PoolIdle: cfg.PoolIdle, PoolAckDelay: cfg.PoolAckDelay,
		FastOpen:      cfg.FastOpen,
		FastOpenInSYN: cfg.FastOpenInSYN,
	}
}

// controllerConfig is the scheduling part of cfg, with the controller
// making the log records d's logger takes.
func (d *Daemon) controllerConfig(cfg Config) controller.Config {
	cc := ControllerConfig(cfg)
	cc.RequestIDPrefix = d.requestIDPrefix
	cc.Timelines = cfg.Timeline != ""
	cc.LogLevel = slog.LevelError
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn} {
		if d.log.Enabled(context.Background(), l) {
			cc.LogLevel = l
			break
		}
	}
	return cc
}

func randomMAC() wire.MAC {
	var m wire.MAC
	rand.Read(m[:])
	m[0] = m[0]&0xfe | 0x02 // unicast, locally administered
	return m
}

// clock is the time since start on the monotonic clock, the time every
// input is stamped with (shard.stamp, ctrlStamp).
func (d *Daemon) clock() splice.Time { return splice.Time(time.Since(d.start)) }

// ctrlStamp is the controller's time for an entry now: never earlier than
// a time it was given before. Called with ctrlMu held.
func (d *Daemon) ctrlStamp() splice.Time {
	d.ctrlLast = max(d.ctrlLast, d.clock())
	return d.ctrlLast
}

// ctrlDue: the controller's timers are due at now.
func (d *Daemon) ctrlDue(now splice.Time) bool {
	return splice.Time(d.ctrlDeadline.Load()) <= now
}

// runController runs the controller for shard s under ctrlMu: f hands it
// its input at the controller's time, then its timers due run and the
// control datagrams it produced are sent, before the pass's frames (see
// sendDatagrams). Afterwards the shards whose engines it moved to an
// earlier deadline than they sleep until are woken to recompute it
// (shardedEngine.on). No shard is woken for the controller's own
// deadline: s computes its sleep after this pass and takes it into
// account (shard.sleep), and any shard runs the controller's due timers.
func (d *Daemon) runController(s *shard, f func(now splice.Time)) {
	d.ctrlMu.Lock()
	now := d.ctrlStamp()
	f(now)
	if d.ctrl.NextDeadline() <= now {
		d.ctrl.Tick(now, &s.out)
	}
	s.splicesAfter = d.sendDatagrams(s, false)
	d.writeTimelines(&s.out)
	d.ctrlDeadline.Store(int64(d.ctrl.NextDeadline()))
	touched := d.engines.touched
	var wake [8]int
	woken := wake[:0]
	self := s.loopPoller()
	for i, t := range touched {
		// Not the loop running this pass: it computes its sleep again
		// before it waits, for every shard it serves.
		if t && d.shards[i].loopPoller() != self {
			woken = append(woken, i)
		}
		touched[i] = false
	}
	d.ctrlMu.Unlock()
	for _, i := range woken {
		d.shards[i].loopPoller().Wake()
	}
}

// sendDatagrams sends the control datagrams of out. They go before the
// pass's frames: a Splice is the next step of a handoff and the shim's
// answer to it is, while the frames of the same pass (the C2
// handshake's ACK, forwarded client ACKs) are not waited on. A
// sendmmsg(2) on the link costs tens of microseconds (the kernel
// delivers the frames through the bridge in this call), so sending the
// datagrams after it delayed every handoff by as much. A Splice sent
// with its SYN is the exception: the SYN is the step waited on, and the
// shim's loop would read the Splice first and handle it (decode, check
// its tag, hand it to another worker) while the SYN waits. So those go
// after the pass's frames (late): the first call leaves them and reports
// whether it did, the second sends only them. Unless the SYN asks for
// Fast Open (its Splice says so: proto.SpliceImplicitAck, which the
// engine sets exactly then): a shim that knows the cookie holds
// such a SYN until its Splice has come, to put the request in it, so
// the SYN waits for the Splice either way, and a Splice behind it only
// starts that wait later (wire to TAP at the shim, p50 in the lab: 46-56
// us behind, 31-36 ahead; docs/results.md). Called with ctrlMu held: the
// Codec numbers what it seals.
//
// A Splice that can go as a frame on s's link (linkcontrol.go) is
// queued there by the first call, at its place among the pass's
// frames, and its Datagram's Msg cleared so that the second call skips
// it.
func (d *Daemon) sendDatagrams(s *shard, late bool) (left bool) {
	out := &s.out
	for i := range out.Datagrams {
		dg := &out.Datagrams[i]
		if dg.Msg == nil {
			continue // sent as a frame by the first call
		}
		m, ok := dg.Msg.(*proto.Splice)
		withSYN := ok && m.Flags&(proto.SpliceAtSYN|proto.SpliceImplicitAck) == proto.SpliceAtSYN
		if ok && !late {
			framed, err := s.lctl.queueSplice(d.linkCtl, d.ctl.codec, dg, withSYN)
			if err != nil {
				d.controlSendFailed(1, fmt.Errorf("%v to %v: %w", dg.Msg.Type(), dg.To, err))
				dg.Msg = nil
				continue
			}
			if framed {
				d.ctlFramesSent++
				dg.Msg = nil
				continue
			}
		}
		if withSYN != late {
			left = left || withSYN
			continue
		}
		if err := d.ctl.queue(dg.To, dg.Msg); err != nil {
			d.controlSendFailed(1, fmt.Errorf("%v to %v: %w", dg.Msg.Type(), dg.To, err))
		}
	}
	if failed, err := d.ctl.sock.Flush(); failed > 0 || err != nil {
		d.controlSendFailed(failed, err)
	}
	return left
}

// controlSendFailed counts control datagrams that could not be encoded or
// sent, logging the first few failures and then every thousandth.
func (d *Daemon) controlSendFailed(n int, err error) {
	for range n {
		d.ctlSendErrors++
		if d.ctlSendErrors < 10 || d.ctlSendErrors%1000 == 0 {
			d.log.Warn("control send failed", "err", err, "count", d.ctlSendErrors)
		}
	}
}
