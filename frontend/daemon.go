package frontend

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net"
	"os"
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
	rawLink link.Link
	drops   uint64
	engine  *splice.FrontEnd
	out     splice.Output
	queue   sched.Policy
	disp    *sched.Dispatcher
	// waiting is the queue head that found no free back-end yet.
	waiting    *sched.Request
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
	parked   map[uint32][]parkedReq
	refunds  uint64
	pending  map[splice.FlowID]*pendingSplice
	ctl      *controlConn
	adminReq chan chan Status
	epoch    time.Time
	txErrors uint64
}

// New opens the link and the control socket.
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
		queue:      sched.NewFIFO(cfg.QueueCapacity),
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
			d.input(f)
			// Drain what else is ready before looking at timers.
			for i := 0; i < 64; i++ {
				select {
				case f, ok = <-frames.C:
					if !ok {
						return fmt.Errorf("frontend: link %s: %w", d.link.Name(), frames.Err())
					}
					d.input(f)
					continue
				default:
				}
				break
			}
		case m := <-ctlMsgs:
			d.control(m, time.Now())
		case t := <-tick.C:
			d.timers(t)
		case reply := <-d.adminReq:
			reply <- d.status()
		}
	}
}

func (d *Daemon) input(f *pump.Frame) {
	now := d.now(f.At)
	d.out.Reset()
	d.engine.Input(f.Data, now, &d.out)
	d.flush(now)
	f.Release()
}

func (d *Daemon) timers(t time.Time) {
	now := d.now(t)
	if d.engine.NextDeadline() <= now {
		d.out.Reset()
		d.engine.Tick(now, &d.out)
		d.flush(now)
	}
	d.resendSplices(t)
	d.checkBackends(t)
}

// flush writes the engine's frames and acts on its events. Acting on an
// event may call back into the engine, which appends to the same output;
// the loop runs until nothing new appeared.
func (d *Daemon) flush(now splice.Time) {
	sent, handled := 0, 0
	for sent < len(d.out.Frames) || handled < len(d.out.Events) {
		for ; sent < len(d.out.Frames); sent++ {
			if err := d.link.WriteFrame(d.out.Frames[sent].Data); err != nil {
				d.txErrors++
				if d.txErrors < 10 || d.txErrors%1000 == 0 {
					d.log.Warn("link write failed", "err", err, "count", d.txErrors)
				}
			}
		}
		for ; handled < len(d.out.Events); handled++ {
			d.event(d.out.Events[handled], now)
		}
	}
}

func (d *Daemon) event(ev splice.Event, now splice.Time) {
	switch ev.Kind {
	case splice.EvRequest:
		r := ev.Request
		req := sched.Request{ID: sched.RequestID(ev.Flow), Host: r.Host, Path: r.Path, Port: r.Port, Arrival: int64(now)}
		if err := d.queue.Enqueue(req, int64(now)); err != nil {
			d.log.Info("request rejected", "flow", ev.Flow, "reason", "queue full", "host", r.Host, "follow_up", ev.FollowUp)
			if ev.FollowUp {
				// No HTTP answer is possible inside a spliced stream; a
				// reset makes the client retry on a new connection.
				d.engine.Abort(ev.Flow, now, &d.out)
			} else {
				d.engine.Reject(ev.Flow, 503, "queue full", time.Second, now, &d.out)
			}
			return
		}
		if ev.FollowUp {
			d.followUp[ev.Flow] = true
		}
		d.log.Debug("request", "flow", ev.Flow, "client", r.Client, "method", r.Method, "host", r.Host, "path", r.Path)
		d.dispatch(now)
	case splice.EvSplice:
		d.sendSplice(ev, now)
	case splice.EvClosed:
		delete(d.pending, ev.Flow)
		if b, ok := d.dispatched[ev.Flow]; ok {
			delete(d.dispatched, ev.Flow)
			if bs := d.backends[b]; bs != nil {
				bs.closed++
				bs.forwardedBytes += ev.Bytes
			}
		}
		d.requestDone(ev.Flow, true, 0, now)
		d.log.Debug("closed", "flow", ev.Flow, "reason", ev.Reason.String(), "backend", ev.Backend)
	case splice.EvAnswered:
		d.log.Info("answered by front-end", "flow", ev.Flow, "status", ev.Status, "reason", ev.Detail)
	}
}

// parkedReq is a follow-up released by the scheduler, waiting for a slot
// on its connection's back-end.
type parkedReq struct {
	flow     splice.FlowID
	customer string
}

// serving is a flow's back-end and the customers of the requests it is
// serving there, oldest first (responses come back in request order).
type serving struct {
	backend   uint32
	customers []string
}

// accounting is what a policy may add to the Policy seam: charge
// correction from measured service time, and refunds for requests that
// a dead back-end never served.
type accounting interface {
	Complete(customer string, service time.Duration)
	Refund(customer string)
}

func (d *Daemon) startServing(flow splice.FlowID, b uint32, customer string) {
	s := d.inService[flow]
	s.backend = b
	s.customers = append(s.customers, customer)
	d.inService[flow] = s
	d.disp.Start(sched.BackendID(b))
}

// refundFlow gives back the credit of every request in service on flow.
func (d *Daemon) refundFlow(flow splice.FlowID) {
	s := d.inService[flow]
	if acc, ok := d.queue.(accounting); ok {
		for _, c := range s.customers {
			acc.Refund(c)
			d.refunds++
		}
	}
}

// dispatch hands queued requests to back-ends while some have room.
func (d *Daemon) dispatch(now splice.Time) {
	for {
		if d.waiting == nil {
			r, ok := d.queue.Next(int64(now))
			if !ok {
				return
			}
			d.waiting = &r
		}
		r := d.waiting
		flow := splice.FlowID(r.ID)
		if d.followUp[flow] {
			delete(d.followUp, flow)
			d.waiting = nil
			b, ok := d.dispatched[flow]
			if !ok {
				continue // the connection ended while its request waited
			}
			if d.hasRoom(b) {
				d.admit(flow, b, r.Customer, now)
			} else {
				d.parked[b] = append(d.parked[b], parkedReq{flow, r.Customer})
			}
			continue
		}
		id, ok := d.disp.Pick(r.Port)
		if !ok {
			return
		}
		bs := d.backends[uint32(id)]
		d.waiting = nil
		err := d.engine.Dispatch(flow, splice.Backend{ID: bs.id, IP: bs.ip, MAC: bs.mac, Port: r.Port}, now, &d.out)
		if err != nil {
			// The client went away while queued: nothing to do.
			d.log.Debug("dispatch skipped", "flow", r.ID, "err", err)
			continue
		}
		d.dispatched[flow] = bs.id
		d.startServing(flow, bs.id, r.Customer)
		bs.dispatched++
	}
}

func (d *Daemon) hasRoom(b uint32) bool {
	bs := d.backends[b]
	return bs != nil && bs.alive && d.disp.Active(sched.BackendID(b)) < bs.capacity
}

// admit lets a follow-up request through to its connection's back-end.
func (d *Daemon) admit(flow splice.FlowID, b uint32, customer string, now splice.Time) {
	if err := d.engine.Admit(flow, now, &d.out); err != nil {
		d.log.Debug("admit skipped", "flow", flow, "err", err)
		return
	}
	d.startServing(flow, b, customer)
	if bs := d.backends[b]; bs != nil {
		bs.followUps++
	}
}

// requestDone frees the back-end slot of the oldest request on flow when
// its back-end reported it served (service > 0 corrects the customer's
// charge), or of all of them when the connection closed (service 0).
func (d *Daemon) requestDone(flow splice.FlowID, all bool, service time.Duration, now splice.Time) {
	s, ok := d.inService[flow]
	if !ok {
		return
	}
	n := 1
	if all {
		n = len(s.customers)
	}
	n = min(n, len(s.customers))
	if acc, ok := d.queue.(accounting); ok && !all && n == 1 {
		acc.Complete(s.customers[0], service)
	}
	s.customers = s.customers[n:]
	if len(s.customers) == 0 {
		delete(d.inService, flow)
	} else {
		d.inService[flow] = s
	}
	for i := 0; i < n; i++ {
		d.disp.Done(sched.BackendID(s.backend))
	}
	for len(d.parked[s.backend]) > 0 && d.hasRoom(s.backend) {
		p := d.parked[s.backend][0]
		d.parked[s.backend] = d.parked[s.backend][1:]
		d.admit(p.flow, s.backend, p.customer, now)
	}
	d.dispatch(now)
}
