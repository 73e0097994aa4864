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
	"sync/atomic"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/pump"
	"github.com/qsplice/qsplice/splice/wire"
)

// Daemon is a running front-end: the engine and the controller, and the
// I/O around them.
type Daemon struct {
	cfg  Config
	log  *slog.Logger
	link link.Link
	// rawLink is the device under any capture wrapper.
	rawLink  link.Link
	engine   *splice.FrontEnd
	ctrl     *controller.Controller
	ctl      *controlConn
	adminLn  net.Listener // nil without an admin address
	adminReq chan chan Status

	out     controller.Output
	rxBatch [][]byte       // frames of one pass, for the engine
	rxVNet  []wire.VNetHdr // their virtio-net headers (checksum verdicts)
	inBatch []*pump.Frame  // their buffers, released after the pass's writes
	txBatch [][]byte       // frames of out being written together

	// The loop (loop.go): it sleeps in poller until the link is readable,
	// another goroutine hands it something (Wake), or the next deadline.
	poller *link.Poller
	rb     *link.Batch // a BatchLink's frames of one pass
	// scratch holds the segments of the pass's super-frames (GRO'd
	// client data) cut to MTU size for the engine; vnetRefused counts
	// frames whose virtio-net header could not be honoured.
	scratch     []byte
	vnetRefused uint64
	hup         atomic.Bool // SIGHUP seen, reload pending

	// start is the epoch of engine time: splice.Time is the monotonic
	// time since then, so a step of the wall clock moves no timer,
	// cookie slot or timestamp clock. last is the latest time handed out.
	start time.Time
	last  splice.Time

	drops, txErrors, ctlSendErrors uint64
	requestIDPrefix                uint32 // controller.Config.RequestIDPrefix
	reloads, reloadsFailed         uint64
}

// New opens the link, the control socket and the admin listener; Run
// closes them.
func New(cfg Config, log *slog.Logger) (*Daemon, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("frontend: bad configuration: %w", err)
	}
	var l link.Link
	switch cfg.LinkType {
	case "afpacket":
		if cfg.MAC == (wire.MAC{}) {
			ifi, err := net.InterfaceByName(cfg.Link)
			if err != nil {
				return nil, fmt.Errorf("frontend: link %s: %w", cfg.Link, err)
			}
			cfg.MAC = wire.MAC(ifi.HardwareAddr)
		}
		owned := append(append(cfg.VIPs[:0:0], cfg.VIPs...), cfg.Handoff)
		// Virtio-net headers always: on links with offloads on, client
		// frames arrive with partial checksums and GRO'd super-frames
		// that only the header describes; with offloads off the header
		// is all zero and costs nothing.
		a, err := link.OpenAFPacket(cfg.Link, link.AFPacketConfig{Filter: link.FilterIPv4Dst(owned), Promiscuous: true, VNetHdr: true, RxRing: cfg.RxRing})
		if err != nil {
			return nil, fmt.Errorf("frontend: %w", err)
		}
		l = a
	case "tap":
		t, err := link.OpenTAP(cfg.Link)
		if err != nil {
			return nil, fmt.Errorf("frontend: %w", err)
		}
		l = t
		if cfg.MAC == (wire.MAC{}) {
			cfg.MAC = randomMAC()
		}
	}
	ctl, err := listenControl(cfg.Control, cfg.Key, proto.NewIncarnation(time.Now()))
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("frontend: %w", err)
	}
	raw := l
	if cfg.Capture != "" {
		f, err := os.Create(cfg.Capture)
		if err != nil {
			l.Close()
			ctl.Close()
			return nil, fmt.Errorf("frontend: capture: %w", err)
		}
		pw, err := link.NewPcapWriter(f)
		if err != nil {
			l.Close()
			ctl.Close()
			return nil, err
		}
		l = link.NewRecorder(l, pw, time.Now)
	}
	d, err := newDaemon(cfg, log, l, ctl)
	if err != nil {
		l.Close()
		ctl.Close()
		return nil, err
	}
	d.rawLink = raw
	return d, nil
}

// newDaemon builds the engine and the controller around an open link and
// control socket.
func newDaemon(cfg Config, log *slog.Logger, l link.Link, ctl *controlConn) (*Daemon, error) {
	ecfg := splice.FrontEndConfig{
		MAC: cfg.MAC, VIPs: cfg.VIPs, Ports: cfg.Ports, HandoffAddr: cfg.Handoff,
		Linger: cfg.Linger, IdleTimeout: cfg.IdleTimeout, HeadTimeout: cfg.HeadTimeout, MaxHead: cfg.MaxHead,
		MaxFlows: cfg.MaxFlows, MaxFlowsPerSource: cfg.MaxFlowsPerSource, MaxPortsPerSource: cfg.MaxPortsPerSource,
		FlowLifetime: cfg.FlowLifetime, HalfCloseTimeout: cfg.HalfCloseTimeout,
	}
	if cfg.CookieSeed != "" {
		ecfg.CookieSecret = sha256.Sum256([]byte(cfg.CookieSeed))
	} else if _, err := rand.Read(ecfg.CookieSecret[:]); err != nil {
		return nil, err
	}
	eng, err := splice.NewFrontEnd(ecfg)
	if err != nil {
		return nil, fmt.Errorf("frontend: %w", err)
	}
	poller, err := link.NewPoller()
	if err != nil {
		return nil, fmt.Errorf("frontend: %w", err)
	}
	d := &Daemon{cfg: cfg, log: log, link: l, rawLink: l, engine: eng, ctl: ctl,
		adminReq: make(chan chan Status, 4), start: time.Now(), poller: poller}
	// RequestIDs of this run carry a prefix of their own (issue 9).
	var prefix [4]byte
	rand.Read(prefix[:])
	d.requestIDPrefix = binary.BigEndian.Uint32(prefix[:])
	ctrl, err := controller.New(d.controllerConfig(cfg), eng, d.now())
	if err != nil {
		poller.Close()
		return nil, fmt.Errorf("frontend: bad configuration: %w", err)
	}
	d.ctrl = ctrl
	if cfg.Admin != "" {
		if d.adminLn, err = net.Listen("tcp", cfg.Admin); err != nil {
			poller.Close()
			return nil, fmt.Errorf("frontend: admin %s: %w", cfg.Admin, err)
		}
	}
	return d, nil
}

// controllerConfig is the scheduling part of cfg, with the controller
// making the log records d's logger takes.
func (d *Daemon) controllerConfig(cfg Config) controller.Config {
	cc := ControllerConfig(cfg)
	cc.RequestIDPrefix = d.requestIDPrefix
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

// now is the current engine time: monotonic, and never earlier than a
// time handed out before. Each pass of the loop stamps its inputs once.
func (d *Daemon) now() splice.Time {
	if t := splice.Time(time.Since(d.start)); t > d.last {
		d.last = t
	}
	return d.last
}

// pass is one turn of the loop at now: frames go to the engine, the
// controller handles what the engine reported, then (control) the
// datagrams waiting on the control socket, the timers due run, and
// everything produced goes out: one batched write on the link, one on
// the control socket.
func (d *Daemon) pass(frames [][]byte, vnet []wire.VNetHdr, control bool, now splice.Time) {
	d.out.Reset()
	for i, f := range frames {
		d.engine.InputVNet(f, vnet[i], now, &d.out.Engine)
	}
	d.ctrl.HandleEvents(now, &d.out)
	if control {
		d.readControl(now)
	}
	d.finish(now)
}

// finish runs the timers due at now and acts on the output.
func (d *Daemon) finish(now splice.Time) {
	if d.engine.NextDeadline() <= now {
		d.engine.Tick(now, &d.out.Engine)
		d.ctrl.HandleEvents(now, &d.out)
	}
	if d.ctrl.NextDeadline() <= now {
		d.ctrl.Tick(now, &d.out)
	}
	d.flush()
}

// flush sends the datagrams, writes the frames and logs the records of
// the output.
func (d *Daemon) flush() {
	// The datagrams go first: a Splice is the next step of a handoff
	// and the shim's answer to it is, while the frames of the same pass
	// (the C2 handshake's ACK, forwarded client ACKs) are not waited
	// on. A sendmmsg(2) on the link costs tens of microseconds (the
	// kernel delivers the frames through the bridge in this call), so
	// sending the datagrams after it delayed every handoff by as much.
	for _, dg := range d.out.Datagrams {
		if err := d.ctl.queue(dg.To, dg.Msg); err != nil {
			d.controlSendFailed(1, fmt.Errorf("%v to %v: %w", dg.Msg.Type(), dg.To, err))
		}
	}
	if failed, err := d.ctl.sock.Flush(); failed > 0 || err != nil {
		d.controlSendFailed(failed, err)
	}
	d.txBatch = d.txBatch[:0]
	for _, f := range d.out.Engine.Frames {
		d.txBatch = append(d.txBatch, f.Data)
	}
	if len(d.txBatch) > 0 {
		if n, err := link.WriteFrames(d.link, d.txBatch); err != nil {
			d.txErrors += uint64(len(d.txBatch) - n)
			if d.txErrors < 10 || d.txErrors%1000 == 0 {
				d.log.Warn("link write failed", "err", err, "count", d.txErrors)
			}
		}
		clear(d.txBatch)
	}
	for _, r := range d.out.Logs {
		d.log.Log(context.Background(), r.Level, r.Msg, r.Args...)
	}
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
