package backend

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/pump"
	"github.com/qsplice/qsplice/splice/wire"
)

// Config configures the shim daemon.
type Config struct {
	ID          uint32
	Wire        string         // NIC name (AF_PACKET)
	TAP         string         // TAP device the kernel's address is on
	Addr        netip.Addr     // the kernel's address (on the TAP)
	Frontend    netip.AddrPort // front-end control address
	ControlPort uint16         // UDP port we listen on (on Addr)
	WebPorts    []uint16
	Capacity    int
	Key         []byte
	Linger      time.Duration
	IdleTimeout time.Duration
	Capture     string // pcap of the wire side; "" disables
	// SetupTAP configures the TAP after opening it: TAPMAC (if set), the
	// address Addr/Prefix, link up. Off when something else owns that.
	SetupTAP bool
	Admin    string // HTTP address for /status (on Addr); "" disables
	// SpliceDelay holds every Splice message this long before installing
	// and acknowledging it: a research and test knob that widens the
	// window between the front-end's Splice and the back-end's first
	// reply (handoff step 6).
	SpliceDelay time.Duration
	// ResponseQuiet: see splice.ShimConfig.
	ResponseQuiet time.Duration
	TAPMAC        wire.MAC
	Prefix        int
}

func (c *Config) validate() error {
	var errs []error
	if c.ID == 0 {
		errs = append(errs, errors.New("id: back-end id must be > 0 (-id)"))
	}
	if c.Wire == "" || c.TAP == "" {
		errs = append(errs, errors.New("wire/tap: both interfaces are required (-wire, -tap)"))
	}
	if !c.Addr.Is4() {
		errs = append(errs, errors.New("addr: the kernel's IPv4 address is required (-addr)"))
	}
	if !c.Frontend.IsValid() {
		errs = append(errs, errors.New("frontend: the front-end control address is required (-frontend)"))
	}
	if len(c.WebPorts) == 0 {
		errs = append(errs, errors.New("web-ports: at least one port (-web-ports)"))
	}
	if c.Capacity <= 0 || c.Capacity > 65535 {
		errs = append(errs, fmt.Errorf("capacity: %d out of 1..65535", c.Capacity))
	}
	if len(c.Key) < 16 {
		errs = append(errs, errors.New("key: control key missing or shorter than 16 bytes (-key)"))
	}
	return errors.Join(errs...)
}

// Daemon is a running back-end shim.
type Daemon struct {
	cfg         Config
	log         *slog.Logger
	tap, wire   link.Link
	shim        *splice.Shim
	out         splice.Output
	inBatch     []*pump.Frame // frames whose output is in out (inputBatch)
	wireBatch   [][]byte      // out's wire frames, sent together
	conn        *net.UDPConn
	mac         wire.MAC
	incarnation uint64
	registered  bool
	keepalive   time.Duration
	seq         uint64
	lastReg     time.Time
	lastKA      time.Time
	lastEcho    time.Time // last keepalive echoed by the front-end
	txErrors    uint64
	wireRaw     *link.AFPacket
	drops       uint64
	lastDropChk time.Time
	adminReq    chan chan Status
	delayed     []delayedSplice
}

type delayedSplice struct {
	msg *proto.Splice
	due time.Time
}

// New opens the devices and the control socket.
func New(cfg Config, log *slog.Logger) (*Daemon, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("backend: bad configuration: %w", err)
	}
	tap, err := link.OpenTAP(cfg.TAP)
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	if cfg.SetupTAP {
		if cfg.Prefix == 0 {
			cfg.Prefix = 24
		}
		if err := setupTAP(cfg.TAP, cfg.TAPMAC, netip.PrefixFrom(cfg.Addr, cfg.Prefix)); err != nil {
			tap.Close()
			return nil, fmt.Errorf("backend: %w", err)
		}
	}
	ifi, err := net.InterfaceByName(cfg.TAP)
	if err != nil {
		tap.Close()
		return nil, fmt.Errorf("backend: %s: %w", cfg.TAP, err)
	}
	w, err := link.OpenAFPacket(cfg.Wire, link.AFPacketConfig{Promiscuous: true})
	if err != nil {
		tap.Close()
		return nil, fmt.Errorf("backend: %w", err)
	}
	var wl link.Link = w
	if cfg.Capture != "" {
		if wl, err = openCapture(w, cfg.Capture); err != nil {
			tap.Close()
			w.Close()
			return nil, err
		}
	}
	shim, err := splice.NewShim(splice.ShimConfig{HostIP: cfg.Addr, Linger: cfg.Linger, IdleTimeout: cfg.IdleTimeout, ResponseQuiet: cfg.ResponseQuiet})
	if err != nil {
		tap.Close()
		wl.Close()
		return nil, fmt.Errorf("backend: %w", err)
	}
	var inc [8]byte
	rand.Read(inc[:])
	return &Daemon{
		cfg: cfg, log: log, tap: tap, wire: wl, shim: shim, wireRaw: w,
		adminReq:    make(chan chan Status),
		mac:         wire.MAC(ifi.HardwareAddr),
		incarnation: binary.BigEndian.Uint64(inc[:]),
		keepalive:   time.Second,
	}, nil
}

type ctlMsg struct {
	msg  proto.Message
	from netip.AddrPort
	err  error
}

// Run serves until ctx ends. The control socket is opened here because
// its address lives on the TAP, whose carrier comes up only once the TAP
// is open (it is, since New).
func (d *Daemon) Run(ctx context.Context) error {
	defer d.tap.Close()
	defer d.wire.Close()
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(d.cfg.Addr, d.cfg.ControlPort)))
	if err != nil {
		return fmt.Errorf("backend: control socket: %w", err)
	}
	d.conn = conn
	defer conn.Close()
	ctl := make(chan ctlMsg, 64)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			m, err := proto.Unmarshal(d.cfg.Key, buf[:n])
			ctl <- ctlMsg{m, from, err}
		}
	}()
	if d.cfg.Admin != "" {
		srv, err := d.startAdmin()
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	host := pump.Start(d.tap, uint8(splice.PortHost), 256, 2048)
	wirep := pump.Start(d.wire, uint8(splice.PortWire), 256, 2048)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	d.log.Info("back-end shim up", "id", d.cfg.ID, "tap", d.cfg.TAP, "wire", d.cfg.Wire, "addr", d.cfg.Addr,
		"mac", d.mac.String(), "frontend", d.cfg.Frontend)
	d.register(time.Now())
	for {
		select {
		case <-ctx.Done():
			return nil
		case f, ok := <-host.C:
			if !ok {
				return fmt.Errorf("backend: %s: %w", d.tap.Name(), host.Err())
			}
			d.inputBatch(f, host, wirep)
		case f, ok := <-wirep.C:
			if !ok {
				return fmt.Errorf("backend: %s: %w", d.wire.Name(), wirep.Err())
			}
			d.inputBatch(f, host, wirep)
		case m := <-ctl:
			d.control(m)
		case t := <-tick.C:
			d.timers(t)
		case reply := <-d.adminReq:
			reply <- d.status()
		}
	}
}

// maxDrain bounds how many frames one pass of the loop takes before it
// writes: enough to amortise the wake-up and the syscall, few enough that
// the first frame of a batch is not held long.
const maxDrain = 32

// inputBatch runs the shim over first and whatever else already waits on
// the two pumps, then writes all of it: under load the loop wakes once
// per batch rather than once per frame, and the wire side goes out in
// one sendmmsg(2). Output frames may alias their input frames, so these
// are released only after the writes.
func (d *Daemon) inputBatch(first *pump.Frame, host, wirep *pump.Pump) {
	d.out.Reset()
	d.inBatch = append(d.inBatch[:0], first)
	d.shim.Input(splice.Port(first.Port), first.Data, splice.Time(first.At.UnixNano()), &d.out)
drain:
	for len(d.inBatch) < maxDrain {
		var f *pump.Frame
		var ok bool
		select {
		case f, ok = <-host.C:
		case f, ok = <-wirep.C:
		default:
			break drain
		}
		if !ok {
			break // the loop sees the closed pump next
		}
		d.inBatch = append(d.inBatch, f)
		d.shim.Input(splice.Port(f.Port), f.Data, splice.Time(f.At.UnixNano()), &d.out)
	}
	d.flush()
	for i, f := range d.inBatch {
		f.Release()
		d.inBatch[i] = nil
	}
}

func (d *Daemon) flush() {
	d.wireBatch = d.wireBatch[:0]
	for _, fr := range d.out.Frames {
		if fr.Port != splice.PortHost {
			d.wireBatch = append(d.wireBatch, fr.Data)
			continue
		}
		if err := d.tap.WriteFrame(fr.Data); err != nil {
			d.writeFailed(d.tap, err)
		}
	}
	if _, err := link.WriteFrames(d.wire, d.wireBatch); err != nil {
		d.writeFailed(d.wire, err)
	}
	clear(d.wireBatch) // no references to frames that go back to the pumps
	for _, ev := range d.out.Events {
		if ev.Kind == splice.EvResponseDone {
			d.log.Debug("response done", "request", ev.RequestID, "service", ev.ServiceTime, "bytes", ev.Bytes)
			d.send(&proto.Feedback{
				BackendID: d.cfg.ID, RequestID: ev.RequestID, ServiceTime: ev.ServiceTime,
				ResponseBytes: ev.Bytes, Concurrency: uint16(d.shim.Active()), ResponseEnd: ev.ResponseEnd,
			})
		}
	}
}

func (d *Daemon) writeFailed(l link.Link, err error) {
	d.txErrors++
	if d.txErrors < 10 || d.txErrors%1000 == 0 {
		d.log.Warn("write failed", "link", l.Name(), "err", err, "count", d.txErrors)
	}
}

func (d *Daemon) timers(t time.Time) {
	now := splice.Time(t.UnixNano())
	if d.shim.NextDeadline() <= now {
		d.out.Reset()
		d.shim.Tick(now, &d.out)
		d.flush()
	}
	if d.registered && t.Sub(d.lastEcho) > 3*d.keepalive {
		d.registered = false
		d.log.Warn("front-end stopped answering keepalives; registering again")
	}
	for len(d.delayed) > 0 && !t.Before(d.delayed[0].due) {
		d.installSplice(d.delayed[0].msg)
		d.delayed = d.delayed[1:]
	}
	if t.Sub(d.lastDropChk) >= time.Second {
		d.lastDropChk = t
		if n, err := d.wireRaw.KernelDrops(); err == nil && n > 0 {
			d.drops += n
			d.log.Warn("wire socket dropped frames (loop fell behind)", "new", n, "total", d.drops)
		}
	}
	switch {
	case !d.registered && t.Sub(d.lastReg) >= time.Second:
		d.register(t)
	case d.registered && t.Sub(d.lastKA) >= d.keepalive:
		d.seq++
		d.lastKA = t
		d.send(&proto.Keepalive{BackendID: d.cfg.ID, Incarnation: d.incarnation, Seq: d.seq, Concurrency: uint16(d.shim.Active())})
	}
}

func (d *Daemon) register(t time.Time) {
	d.lastReg = t
	d.send(&proto.Register{
		BackendID: d.cfg.ID, IP: d.cfg.Addr, MAC: d.mac, ControlPort: d.cfg.ControlPort,
		WebPorts: d.cfg.WebPorts, Capacity: uint16(d.cfg.Capacity), Incarnation: d.incarnation,
	})
}

func (d *Daemon) send(m proto.Message) {
	b, err := proto.Marshal(d.cfg.Key, m)
	if err != nil {
		d.log.Error("encode control message", "type", m.Type().String(), "err", err)
		return
	}
	if _, err := d.conn.WriteToUDPAddrPort(b, d.cfg.Frontend); err != nil {
		d.log.Debug("control send failed", "type", m.Type().String(), "err", err)
	}
}

func (d *Daemon) control(m ctlMsg) {
	if m.err != nil {
		d.log.Warn("bad control message", "from", m.from, "err", m.err)
		return
	}
	switch msg := m.msg.(type) {
	case *proto.RegisterAck:
		if msg.Incarnation != d.incarnation {
			return
		}
		if !d.registered {
			d.log.Info("registered with front-end", "keepalive", msg.KeepaliveInterval)
		}
		d.registered = true
		d.lastEcho = time.Now()
		if msg.KeepaliveInterval > 0 {
			d.keepalive = msg.KeepaliveInterval
		}
	case *proto.Splice:
		if d.cfg.SpliceDelay > 0 {
			d.delayed = append(d.delayed, delayedSplice{msg, time.Now().Add(d.cfg.SpliceDelay)})
			return
		}
		d.installSplice(msg)
	case *proto.Keepalive:
		if msg.Incarnation != d.incarnation {
			return
		}
		d.lastEcho = time.Now()
		if msg.Seq == 0 {
			// The front-end probes a back-end it has not heard from:
			// answer at once.
			d.seq++
			d.lastKA = time.Now()
			d.send(&proto.Keepalive{BackendID: d.cfg.ID, Incarnation: d.incarnation, Seq: d.seq, Concurrency: uint16(d.shim.Active())})
		}
	default:
		d.log.Warn("unexpected control message", "type", m.msg.Type().String())
	}
}

// installSplice puts the translation in place, then acknowledges: the
// front-end sends the request only after the ack, so no reply can come
// before the shim knows how to translate it.
func (d *Daemon) installSplice(msg *proto.Splice) {
	err := d.shim.AddSplice(msg, splice.Time(time.Now().UnixNano()))
	ack := &proto.SpliceAck{RequestID: msg.RequestID, BackendID: d.cfg.ID, OK: err == nil}
	if err != nil {
		ack.Reason = err.Error()
		d.log.Warn("splice refused", "request", msg.RequestID, "err", err)
	}
	d.send(ack)
}
