package frontend

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
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
	rxBatch [][]byte      // frames of one pass, for the engine
	inBatch []*pump.Frame // their buffers, released after the pass's writes
	txBatch [][]byte      // frames of out being written together

	// start is the epoch of engine time: splice.Time is the monotonic
	// time since then, so a step of the wall clock moves no timer,
	// cookie slot or timestamp clock. last is the latest time handed out.
	start time.Time
	last  splice.Time

	drops, txErrors, ctlSendErrors uint64
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
		a, err := link.OpenAFPacket(cfg.Link, link.AFPacketConfig{Filter: link.FilterIPv4Dst(owned), Promiscuous: true})
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
	ctl, err := listenControl(cfg.Control, cfg.Key)
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
	d := &Daemon{cfg: cfg, log: log, link: l, rawLink: l, engine: eng, ctl: ctl,
		adminReq: make(chan chan Status), start: time.Now()}
	ctrl, err := controller.New(d.controllerConfig(cfg), eng, d.now())
	if err != nil {
		return nil, fmt.Errorf("frontend: bad configuration: %w", err)
	}
	d.ctrl = ctrl
	if cfg.Admin != "" {
		if d.adminLn, err = net.Listen("tcp", cfg.Admin); err != nil {
			return nil, fmt.Errorf("frontend: admin %s: %w", cfg.Admin, err)
		}
	}
	return d, nil
}

// controllerConfig is the scheduling part of cfg, with the controller
// making the log records d's logger takes.
func (d *Daemon) controllerConfig(cfg Config) controller.Config {
	cc := ControllerConfig(cfg)
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

// Run serves until ctx ends or the link fails.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.link.Close()
	defer d.ctl.Close()
	if d.adminLn != nil {
		defer d.serveAdmin().Close() // closes the listener too
	}
	done := make(chan struct{})
	defer close(done)
	frames := pump.Start(d.link, 0, 256, 2048)
	ctlMsgs := d.ctl.start(done)
	hup := make(chan os.Signal, 1)
	if d.cfg.ConfigPath != "" {
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	d.log.Info("front-end up", "link", d.cfg.Link, "mac", d.cfg.MAC.String(), "vips", d.cfg.VIPs,
		"handoff", d.cfg.Handoff, "ports", d.cfg.Ports, "control", d.cfg.Control)
	for {
		d.sleepUntilDeadline(wake)
		select {
		case <-ctx.Done():
			return nil
		case f, ok := <-frames.C:
			if !ok {
				return fmt.Errorf("frontend: link %s: %w", d.link.Name(), frames.Err())
			}
			d.inputBatch(f, frames)
		case m := <-ctlMsgs:
			d.control(m)
		case <-wake.C:
			d.pass(nil, d.now())
		case reply := <-d.adminReq:
			reply <- d.status()
		case <-hup:
			d.reload()
		}
	}
}

// sleepUntilDeadline arms wake for the earliest of the engine's and the
// controller's deadlines: the loop sleeps until then or until input.
func (d *Daemon) sleepUntilDeadline(wake *time.Timer) {
	next := min(d.engine.NextDeadline(), d.ctrl.NextDeadline())
	if next == splice.Never {
		wake.Stop()
		return
	}
	wake.Reset(max(time.Duration(next-d.now()), 0))
}

// maxDrain bounds how many frames one pass of the loop takes before it
// writes.
const maxDrain = 64

// inputBatch takes first and whatever else the pump already holds into
// one pass: under load the loop wakes once per batch, not per frame.
// Output frames may alias input frames, which are released only after
// the writes.
func (d *Daemon) inputBatch(first *pump.Frame, frames *pump.Pump) {
	d.inBatch = append(d.inBatch[:0], first)
	for len(d.inBatch) < maxDrain {
		f, ok := tryReceive(frames.C)
		if !ok {
			break // nothing waiting, or closed: the loop sees which
		}
		d.inBatch = append(d.inBatch, f)
	}
	d.rxBatch = d.rxBatch[:0]
	for _, f := range d.inBatch {
		d.rxBatch = append(d.rxBatch, f.Data)
	}
	d.pass(d.rxBatch, d.now())
	clear(d.rxBatch)
	for i, f := range d.inBatch {
		f.Release()
		d.inBatch[i] = nil
	}
}

func tryReceive(c <-chan *pump.Frame) (*pump.Frame, bool) {
	select {
	case f, ok := <-c:
		return f, ok
	default:
		return nil, false
	}
}

// pass is one turn of the loop at now: frames go to the engine, the
// controller handles what the engine reported, the timers due run, and
// everything produced goes out (one batched write on the link).
func (d *Daemon) pass(frames [][]byte, now splice.Time) {
	d.out.Reset()
	for _, f := range frames {
		d.engine.Input(f, now, &d.out.Engine)
	}
	d.ctrl.HandleEvents(now, &d.out)
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

// flush writes the frames, sends the datagrams and logs the records of
// the output.
func (d *Daemon) flush() {
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
	for _, dg := range d.out.Datagrams {
		if err := d.ctl.send(dg.To, dg.Msg); err != nil {
			d.ctlSendErrors++
			if d.ctlSendErrors < 10 || d.ctlSendErrors%1000 == 0 {
				d.log.Warn("control send failed", "to", dg.To, "type", dg.Msg.Type().String(), "err", err, "count", d.ctlSendErrors)
			}
		}
	}
	for _, r := range d.out.Logs {
		d.log.Log(context.Background(), r.Level, r.Msg, r.Args...)
	}
}
