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

// Daemon is a running back-end shim: a thin loop that moves frames
// between the links and the engine (splice.Shim), control messages and
// engine events to and from the Agent, and the time into both.
type Daemon struct {
	cfg       Config
	log       *slog.Logger
	tap, wire link.Link
	wireRaw   *link.AFPacket
	shim      *splice.Shim
	agent     *Agent
	out       splice.Output
	aout      AgentOutput
	inBatch   []*pump.Frame // frames whose output is in out (inputBatch)
	wireBatch [][]byte      // out's wire frames, sent together
	conn      *net.UDPConn
	sendBuf   []byte
	mac       wire.MAC
	// epoch is the daemon's one clock: splice.Time is the monotonic time
	// since it, so a wall-clock step moves no timer.
	epoch       time.Time
	txErrors    uint64
	drops       uint64
	nextDropChk splice.Time
	adminReq    chan chan Status
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
	mac := wire.MAC(ifi.HardwareAddr)
	agent := NewAgent(AgentConfig{
		ID: cfg.ID, Addr: cfg.Addr, MAC: mac, ControlPort: cfg.ControlPort, WebPorts: cfg.WebPorts,
		Capacity: cfg.Capacity, Incarnation: binary.BigEndian.Uint64(inc[:]), SpliceDelay: cfg.SpliceDelay,
	})
	return &Daemon{
		cfg: cfg, log: log, tap: tap, wire: wl, shim: shim, wireRaw: w, agent: agent, mac: mac,
		adminReq: make(chan chan Status),
	}, nil
}

type ctlMsg struct {
	msg  proto.Message
	from netip.AddrPort
	err  error
}

// now reads the daemon's clock. Every input is stamped here, in the loop
// that feeds it, so time never goes backwards from one call to the next.
func (d *Daemon) now() splice.Time { return splice.Time(time.Since(d.epoch)) }

// Run serves until ctx ends. The control socket is opened here because
// its address lives on the TAP, whose carrier comes up only once the TAP
// is open (it is, since New).
func (d *Daemon) Run(ctx context.Context) error {
	defer d.tap.Close()
	defer d.wire.Close()
	d.epoch = time.Now()
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(d.cfg.Addr, d.cfg.ControlPort)))
	if err != nil {
		return fmt.Errorf("backend: control socket: %w", err)
	}
	d.conn = conn
	ctl := make(chan ctlMsg, 64)
	readerDone := make(chan struct{})
	defer func() {
		conn.Close() // ends the reader
		<-readerDone
	}()
	go func() {
		defer close(readerDone)
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
			select {
			case ctl <- ctlMsg{m, from, err}:
			case <-ctx.Done():
				return
			}
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
	timer := time.NewTimer(0)
	defer timer.Stop()
	d.log.Info("back-end shim up", "id", d.cfg.ID, "tap", d.cfg.TAP, "wire", d.cfg.Wire, "addr", d.cfg.Addr,
		"mac", d.mac.String(), "frontend", d.cfg.Frontend)
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
		case <-timer.C:
			d.timers()
		case reply := <-d.adminReq:
			reply <- d.status()
		}
		// No fixed ticker: sleep until the engine or the agent has work.
		timer.Reset(max(d.nextDeadline().Sub(d.now()), 0))
	}
}

func (d *Daemon) nextDeadline() splice.Time {
	return min(d.shim.NextDeadline(), d.agent.NextDeadline())
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
	now := d.now()
	d.out.Reset()
	d.inBatch = append(d.inBatch[:0], first)
	d.shim.Input(splice.Port(first.Port), first.Data, now, &d.out)
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
		d.shim.Input(splice.Port(f.Port), f.Data, now, &d.out)
	}
	d.flush(now)
	for i, f := range d.inBatch {
		f.Release()
		d.inBatch[i] = nil
	}
	d.checkDrops(now)
}

// flush writes the engine's output and hands its events to the agent.
func (d *Daemon) flush(now splice.Time) {
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
	if len(d.out.Events) == 0 {
		return
	}
	d.aout.Reset()
	d.agent.SetConcurrency(d.shim.Active())
	for _, ev := range d.out.Events {
		d.agent.Event(ev, now, &d.aout)
	}
	d.carryOut(now)
}

func (d *Daemon) writeFailed(l link.Link, err error) {
	d.txErrors++
	if d.txErrors < 10 || d.txErrors%1000 == 0 {
		d.log.Warn("write failed", "link", l.Name(), "err", err, "count", d.txErrors)
	}
}

// timers runs the engine's and the agent's due work.
func (d *Daemon) timers() {
	now := d.now()
	if d.shim.NextDeadline() <= now {
		d.out.Reset()
		d.shim.Tick(now, &d.out)
		d.flush(now)
	}
	if d.agent.NextDeadline() <= now {
		d.aout.Reset()
		d.agent.SetConcurrency(d.shim.Active())
		d.agent.Tick(now, &d.aout)
		d.carryOut(now)
	}
	d.checkDrops(now)
}

// checkDrops reads the wire socket's kernel drop counter, at most once a
// second and only when the loop is awake anyway: drops happen under load,
// when it always is.
func (d *Daemon) checkDrops(now splice.Time) {
	if now < d.nextDropChk {
		return
	}
	d.nextDropChk = now.Add(time.Second)
	if n, err := d.wireRaw.KernelDrops(); err == nil && n > 0 {
		d.drops += n
		d.log.Warn("wire socket dropped frames (loop fell behind)", "new", n, "total", d.drops)
	}
}

func (d *Daemon) control(m ctlMsg) {
	now := d.now()
	d.aout.Reset()
	if m.err != nil {
		d.agent.Malformed(m.from, m.err, &d.aout)
	} else {
		d.agent.SetConcurrency(d.shim.Active())
		d.agent.Control(m.from, m.msg, now, &d.aout)
	}
	d.carryOut(now)
}

// carryOut does what the agent asked for in d.aout: installs splices in
// the engine (each acknowledged after it is in place, so the ack goes out
// after the install), sends control messages and writes log lines.
func (d *Daemon) carryOut(now splice.Time) {
	for i := 0; i < len(d.aout.Install); i++ { // Installed appends to aout.Send only
		m := d.aout.Install[i]
		d.agent.Installed(m, d.shim.AddSplice(m, now), &d.aout)
	}
	for _, m := range d.aout.Send {
		d.send(m)
	}
	for _, r := range d.aout.Logs {
		d.log.LogAttrs(context.Background(), r.Level, r.Msg, r.Attrs...)
	}
}

func (d *Daemon) send(m proto.Message) {
	b, err := proto.Append(d.sendBuf[:0], d.cfg.Key, m)
	if err != nil {
		d.log.Error("encode control message", "type", m.Type().String(), "err", err)
		return
	}
	d.sendBuf = b
	if _, err := d.conn.WriteToUDPAddrPort(b, d.cfg.Frontend); err != nil {
		d.log.Debug("control send failed", "type", m.Type().String(), "err", err)
	}
}
