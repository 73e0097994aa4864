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

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/pump"
	"github.com/qsplice/qsplice/splice/wire"
)

// Daemon is a running front-end.
type Daemon struct {
	cfg  Config
	log  *slog.Logger
	link link.Link
	// rawLink is the device under any capture wrapper.
	rawLink    link.Link
	drops      uint64
	engine     *splice.FrontEnd
	out        splice.Output
	inBatch    []*pump.Frame        // frames whose output is in out (inputBatch)
	txBatch    [][]byte             // frames of out being written together
	queues     []*queueSet          // one per policy in use
	byPort     map[uint16]*queueSet // listener port -> its policy's queue
	credit     *sched.Credit        // the credit queue's policy, if any
	lifo       *lifoControl         // shared by the class-based queues, if any
	disp       *sched.Dispatcher
	custs      map[string]*customerStats
	backends   map[uint32]*backendState
	dispatched map[splice.FlowID]uint32 // flows on a back-end, until closed
	// inService counts, per flow, requests being served: the back-end's
	// capacity counts requests, not connections, so an idle keep-alive
	// connection does not hold a slot.
	inService map[splice.FlowID]serving
	// followUp marks queued requests that came on an already spliced
	// connection: they go to that connection's back-end via Admit.
	followUp map[splice.FlowID]bool
	// parked holds follow-ups the scheduler released whose back-end had
	// no free slot; they go first when one frees.
	parked                 map[uint32][]parkedReq
	refunds                uint64
	reloads, reloadsFailed uint64
	pending                map[splice.FlowID]*pendingSplice
	ctl                    *controlConn
	adminReq               chan chan Status
	epoch                  time.Time
	txErrors               uint64
}

// New opens the link and the control socket.
func New(cfg Config, log *slog.Logger) (*Daemon, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("frontend: bad configuration: %w", err)
	}
	qs, err := buildQueues(&cfg, time.Now().UnixNano())
	if err != nil {
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
	ecfg := splice.FrontEndConfig{
		MAC: cfg.MAC, VIPs: cfg.VIPs, Ports: cfg.Ports, HandoffAddr: cfg.Handoff,
		Linger: cfg.Linger, IdleTimeout: cfg.IdleTimeout, HeadTimeout: cfg.HeadTimeout,
	}
	if cfg.CookieSeed != "" {
		ecfg.CookieSecret = sha256.Sum256([]byte(cfg.CookieSeed))
	} else if _, err := rand.Read(ecfg.CookieSecret[:]); err != nil {
		return nil, err
	}
	eng, err := splice.NewFrontEnd(ecfg)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("frontend: %w", err)
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
			return nil, err
		}
		l = link.NewRecorder(l, pw, time.Now)
	}
	return &Daemon{
		cfg: cfg, log: log, link: l, rawLink: raw, engine: eng,
		queues: qs.list, byPort: qs.byPort, credit: qs.credit, lifo: qs.lifo,
		custs:      make(map[string]*customerStats),
		disp:       sched.NewDispatcher(),
		backends:   make(map[uint32]*backendState),
		dispatched: make(map[splice.FlowID]uint32),
		inService:  make(map[splice.FlowID]serving),
		followUp:   make(map[splice.FlowID]bool),
		parked:     make(map[uint32][]parkedReq),
		pending:    make(map[splice.FlowID]*pendingSplice),
		ctl:        ctl,
		adminReq:   make(chan chan Status),
		epoch:      time.Now(),
	}, nil
}

func randomMAC() wire.MAC {
	var m wire.MAC
	rand.Read(m[:])
	m[0] = m[0]&0xfe | 0x02 // unicast, locally administered
	return m
}

// now converts wall time to engine time.
func (d *Daemon) now(t time.Time) splice.Time { return splice.Time(t.UnixNano()) }

// Run serves until ctx ends or the link fails.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.link.Close()
	defer d.ctl.Close()
	if d.cfg.Admin != "" {
		srv, err := d.startAdmin()
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	frames := pump.Start(d.link, 0, 256, 2048)
	ctlMsgs := d.ctl.start()
	hup := make(chan os.Signal, 1)
	if d.cfg.ConfigPath != "" {
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	d.log.Info("front-end up", "link", d.cfg.Link, "mac", d.cfg.MAC.String(), "vips", d.cfg.VIPs,
		"handoff", d.cfg.Handoff, "ports", d.cfg.Ports, "control", d.cfg.Control)
	for {
		select {
		case <-ctx.Done():
			return nil
		case f, ok := <-frames.C:
			if !ok {
				return fmt.Errorf("frontend: link %s: %w", d.link.Name(), frames.Err())
			}
			d.inputBatch(f, frames)
		case m := <-ctlMsgs:
			d.control(m, time.Now())
		case t := <-tick.C:
			d.timers(t)
		case reply := <-d.adminReq:
			reply <- d.status()
		case <-hup:
			d.reload()
		}
	}
}

// maxDrain bounds how many frames one pass of the loop takes before it
// writes.
const maxDrain = 64

// inputBatch feeds the engine first and whatever else the pump already
// holds, then writes everything in one batch (one sendmmsg(2) on
// AF_PACKET): under load the loop wakes once per batch, not per frame.
// Output frames may alias input frames, which are released only after
// the writes.
func (d *Daemon) inputBatch(first *pump.Frame, frames *pump.Pump) {
	d.out.Reset()
	d.inBatch = append(d.inBatch[:0], first)
	now := d.now(first.At)
	d.engine.Input(first.Data, now, &d.out)
	for len(d.inBatch) < maxDrain {
		f, ok := tryReceive(frames.C)
		if !ok {
			break // nothing waiting, or closed: the loop sees which
		}
		d.inBatch = append(d.inBatch, f)
		now = d.now(f.At)
		d.engine.Input(f.Data, now, &d.out)
	}
	d.flush(now)
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

func (d *Daemon) timers(t time.Time) {
	now := d.now(t)
	if d.engine.NextDeadline() <= now {
		d.out.Reset()
		d.engine.Tick(now, &d.out)
		d.flush(now)
	}
	d.out.Reset()
	d.expire(now)
	d.flush(now)
	d.lifoTimers(int64(now))
	d.resendSplices(t)
	d.checkBackends(t)
}

// flush writes the engine's frames and acts on its events. Acting on an
// event may call back into the engine, which appends to the same output;
// the loop runs until nothing new appeared.
func (d *Daemon) flush(now splice.Time) {
	sent, handled := 0, 0
	for sent < len(d.out.Frames) || handled < len(d.out.Events) {
		d.txBatch = d.txBatch[:0]
		for ; sent < len(d.out.Frames); sent++ {
			d.txBatch = append(d.txBatch, d.out.Frames[sent].Data)
		}
		if n, err := link.WriteFrames(d.link, d.txBatch); err != nil {
			d.txErrors += uint64(len(d.txBatch) - n)
			if d.txErrors < 10 || d.txErrors%1000 == 0 {
				d.log.Warn("link write failed", "err", err, "count", d.txErrors)
			}
		}
		clear(d.txBatch)
		for ; handled < len(d.out.Events); handled++ {
			d.event(d.out.Events[handled], now)
		}
	}
}
