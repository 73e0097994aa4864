package frontend

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

// controlConn is the UDP socket for the control protocol.
type controlConn struct {
	conn *net.UDPConn
	key  []byte
	// BadMessages counts datagrams that failed to decode (bad key,
	// version, truncation); read by the loop only via Status.
	bad uint64
}

type ctlMsg struct {
	msg  proto.Message
	from netip.AddrPort
	err  error
}

func listenControl(addr netip.AddrPort, key []byte) (*controlConn, error) {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, fmt.Errorf("control socket %v: %w", addr, err)
	}
	return &controlConn{conn: c, key: key}, nil
}

func (c *controlConn) Close() error { return c.conn.Close() }

// start reads datagrams in a goroutine and delivers decoded messages.
func (c *controlConn) start() <-chan ctlMsg {
	ch := make(chan ctlMsg, 256)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := c.conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			m, err := proto.Unmarshal(c.key, buf[:n])
			ch <- ctlMsg{msg: m, from: from, err: err}
		}
	}()
	return ch
}

func (c *controlConn) send(to netip.AddrPort, m proto.Message) error {
	b, err := proto.Marshal(c.key, m)
	if err != nil {
		return err
	}
	_, err = c.conn.WriteToUDPAddrPort(b, to)
	return err
}

// backendState is what the front-end knows of one back-end.
type backendState struct {
	id          uint32
	ip          netip.Addr
	mac         wire.MAC
	ctl         netip.AddrPort
	ports       []uint16
	capacity    int
	incarnation uint64
	alive       bool
	lastSeen    time.Time
	probeSent   time.Time // when we probed a silent back-end; zero when not probing
	deaths      uint64
	overCount   int    // keepalives in a row reporting fewer requests than we count
	reconciled  uint64 // slots released by reconcile
	reported    int    // concurrency the back-end last reported

	dispatched, closed, served uint64
	followUps                  uint64 // keep-alive requests admitted to it
	responseBytes              uint64
	forwardedBytes             uint64
	serviceTotal               time.Duration
	// What a slot costs beyond the service time: the handoff (dispatch to
	// the shim's SpliceAck) and the whole slot time of served requests.
	handoffs              uint64
	handoffTotal          time.Duration
	slotsTimed            uint64
	slotTotal, slotExcess time.Duration

	sent         int             // requests on C2 to it, not yet reported done: its slots in use
	ready        []splice.FlowID // handed off ahead, waiting for a slot (slots.go)
	heldHandoffs uint64          // handoffs that had to wait ready
	peakReported int             // highest concurrency its shim reported
}

type pendingSplice struct {
	msg     proto.Splice
	backend uint32
	sentAt  time.Time
	tries   int
}

func (d *Daemon) control(m ctlMsg, now time.Time) {
	if m.err != nil {
		d.ctl.bad++
		if d.ctl.bad < 10 || d.ctl.bad%1000 == 0 {
			d.log.Warn("bad control message", "from", m.from, "err", m.err, "count", d.ctl.bad)
		}
		return
	}
	switch msg := m.msg.(type) {
	case *proto.Register:
		d.register(msg, now)
	case *proto.Keepalive:
		if bs := d.backends[msg.BackendID]; bs != nil && bs.incarnation == msg.Incarnation {
			// The echo tells the shim we still know it; a shim that stops
			// hearing echoes (say, the front-end restarted) registers again.
			d.ctl.send(bs.ctl, &proto.Keepalive{BackendID: bs.id, Incarnation: bs.incarnation, Seq: msg.Seq})
			bs.lastSeen = now
			bs.reported = int(msg.Concurrency)
			bs.peakReported = max(bs.peakReported, bs.reported)
			t := d.now(now)
			d.out.Reset()
			d.reconcile(bs, bs.reported, t)
			d.flush(t)
			if !bs.alive {
				bs.alive = true
				d.disp.SetAlive(sched.BackendID(bs.id), true)
				d.log.Info("back-end alive again", "backend", bs.id)
			}
		}
	case *proto.SpliceAck:
		if bs := d.backends[msg.BackendID]; bs != nil {
			bs.lastSeen = now
		}
		flow := splice.FlowID(msg.RequestID)
		p := d.pending[flow]
		if p == nil {
			return // a duplicate ack of a resent Splice
		}
		delete(d.pending, flow)
		t := d.now(now)
		if s, ok := d.inService[flow]; ok && len(s.reqs) > 0 {
			if bs := d.backends[s.backend]; bs != nil {
				bs.handoffs++
				bs.handoffTotal += t.Sub(s.reqs[0].dispatched)
			}
		}
		d.out.Reset()
		if !msg.OK {
			d.log.Warn("shim refused splice", "flow", flow, "backend", msg.BackendID, "reason", msg.Reason)
			d.engine.Abort(flow, t, &d.out)
		} else {
			d.spliceConfirmed(flow, t)
		}
		d.flush(t)
	case *proto.Feedback:
		if bs := d.backends[msg.BackendID]; bs != nil {
			bs.served++
			bs.responseBytes += msg.ResponseBytes
			bs.serviceTotal += msg.ServiceTime
			bs.reported = int(msg.Concurrency)
			bs.peakReported = max(bs.peakReported, bs.reported)
			bs.lastSeen = now
		}
		d.noteSize(splice.FlowID(msg.RequestID), msg.ResponseBytes)
		t := d.now(now)
		d.out.Reset()
		d.requestDone(splice.FlowID(msg.RequestID), false, msg.ServiceTime, t)
		// Where the response ended lets a refused follow-up on the same
		// connection be answered in its stream; a flow already gone or
		// not spliced has no use for it.
		_ = d.engine.ResponseEnded(splice.FlowID(msg.RequestID), msg.ResponseEnd, t, &d.out)
		d.flush(t)
	case *proto.Close:
		d.log.Debug("back-end closed", "request", msg.RequestID, "backend", msg.BackendID, "reason", msg.Reason)
	default:
		d.log.Warn("unexpected control message", "type", m.msg.Type().String(), "from", m.from)
	}
}

func (d *Daemon) register(r *proto.Register, now time.Time) {
	bs := d.backends[r.BackendID]
	if bs == nil {
		bs = &backendState{id: r.BackendID}
		d.backends[r.BackendID] = bs
	}
	restarted := bs.incarnation != r.Incarnation
	bs.ip, bs.mac, bs.ports, bs.capacity = r.IP, r.MAC, r.WebPorts, int(r.Capacity)
	bs.ctl = netip.AddrPortFrom(r.IP, r.ControlPort)
	bs.incarnation = r.Incarnation
	bs.alive = true
	bs.lastSeen = now
	d.syncDispatcher(bs)
	d.disp.SetAlive(sched.BackendID(r.BackendID), true)
	if restarted {
		d.log.Info("back-end registered", "backend", r.BackendID, "ip", r.IP, "mac", wire.MAC(r.MAC).String(),
			"ports", r.WebPorts, "capacity", r.Capacity)
	}
	err := d.ctl.send(bs.ctl, &proto.RegisterAck{BackendID: r.BackendID, Incarnation: r.Incarnation, KeepaliveInterval: d.cfg.KeepaliveInterval})
	if err != nil {
		d.log.Warn("register ack failed", "backend", r.BackendID, "err", err)
	}
	d.dispatch(d.now(now))
}

func (d *Daemon) sendSplice(ev splice.Event, now splice.Time) {
	bs := d.backends[ev.Backend]
	if bs == nil {
		d.engine.Abort(ev.Flow, now, &d.out)
		return
	}
	p := &pendingSplice{msg: ev.Splice, backend: ev.Backend, sentAt: time.Unix(0, int64(now)), tries: 1}
	d.pending[ev.Flow] = p
	if err := d.ctl.send(bs.ctl, &p.msg); err != nil {
		d.log.Warn("splice send failed", "flow", ev.Flow, "backend", ev.Backend, "err", err)
	}
}

// resendSplices repeats Splice messages whose ack has not come: UDP may
// lose them, and the engine gives up on its own deadline.
func (d *Daemon) resendSplices(now time.Time) {
	for flow, p := range d.pending {
		if now.Sub(p.sentAt) < d.cfg.SpliceRetry {
			continue
		}
		bs := d.backends[p.backend]
		if bs == nil || p.tries >= 8 {
			delete(d.pending, flow)
			continue
		}
		p.tries++
		p.sentAt = now
		d.ctl.send(bs.ctl, &p.msg)
	}
}

// checkBackends declares back-ends dead. A back-end that has been silent
// for 1.25 keepalive intervals (no keepalive, feedback or ack) is probed
// once; if the probe is not answered within half an interval it is dead:
// at most 1.75 intervals after its last sign of life, inside the two the
// design allows.
func (d *Daemon) checkBackends(now time.Time) {
	iv := d.cfg.KeepaliveInterval
	for _, bs := range d.backends {
		if !bs.alive {
			continue
		}
		silent := now.Sub(bs.lastSeen)
		switch {
		case bs.probeSent.IsZero() && silent > iv*5/4:
			bs.probeSent = now
			d.ctl.send(bs.ctl, &proto.Keepalive{BackendID: bs.id, Incarnation: bs.incarnation, Seq: 0})
		case !bs.probeSent.IsZero() && bs.probeSent.After(bs.lastSeen) && now.Sub(bs.probeSent) > iv/2:
			d.backendDead(bs, now)
		case !bs.probeSent.IsZero() && !bs.probeSent.After(bs.lastSeen):
			bs.probeSent = time.Time{} // it answered
		}
	}
}

// backendDead stops dispatching to bs and resets every connection spliced
// to it (design trap 13): their clients see a RST, not a hang, and the
// requests in service there are refunded when the flows close.
func (d *Daemon) backendDead(bs *backendState, now time.Time) {
	bs.alive = false
	bs.probeSent = time.Time{}
	bs.deaths++
	d.disp.SetAlive(sched.BackendID(bs.id), false)
	if acc, ok := d.accounting(); ok {
		for _, p := range d.parked[bs.id] {
			acc.Refund(p.req.Customer) // charged by the scheduler, never run
			d.stats(p.req.Customer).refunded++
		}
	}
	d.parked[bs.id] = nil
	bs.ready = nil // their flows are reset below
	t := d.now(now)
	d.out.Reset()
	var aborted int
	for flow, b := range d.dispatched {
		if b == bs.id {
			d.refundFlow(flow, t)
			d.engine.Abort(flow, t, &d.out)
			aborted++
		}
	}
	d.log.Warn("back-end dead: no keepalive and no answer to a probe", "backend", bs.id,
		"last_seen", bs.lastSeen.Format(time.RFC3339Nano), "connections_reset", aborted)
	d.flush(t)
}
