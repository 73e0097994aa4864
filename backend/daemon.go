package backend

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qsplice/qsplice/internal/gather"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
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
	Key         []byte // this back-end's control key (proto.DeriveKey of the master for ID)
	Linger      time.Duration
	IdleTimeout time.Duration
	Capture     string // pcap of the wire side; "" disables
	// SetupTAP configures the TAP after opening it: TAPMAC (if set), the
	// address Addr/Prefix, link up. Off when something else owns that.
	SetupTAP bool
	Admin    string // HTTP address for /status and /metrics (on Addr); "" disables
	// SpliceDelay holds every Splice message this long before installing
	// and acknowledging it: a research and test knob that widens the
	// window between the front-end's Splice and the back-end's first
	// reply (handoff step 6).
	SpliceDelay time.Duration
	// FastOpen: see splice.ShimConfig.
	FastOpen bool
	// HandoffAddrs: see splice.ShimConfig (empty: learnt from Splices).
	HandoffAddrs []netip.Addr
	// ResponseQuiet: see splice.ShimConfig.
	ResponseQuiet time.Duration
	TAPMAC        wire.MAC
	Prefix        int
	// Offloads opens the TAP with virtio-net headers and offloads
	// (link.OffloadTAP) and the wire socket with PACKET_VNET_HDR, so TCP
	// super-frames of up to 64 KiB cross the shim whole. Off, the TAP is
	// the portable water adapter and the wire carries MTU-sized frames
	// only: the NIC's offloads must then be off.
	Offloads bool
	// Workers is the number of packet loops, each with its own engine
	// shard, TAP queue and wire socket in one fanout group (0: one per
	// CPU).
	Workers int
	// Gather lets worker 0's loop serve every shard while the loops are
	// busy for less than a share of one core (gather.go): fewer
	// wake-ups and system calls per frame. Offload path only. The zero
	// value never gathers; the flag's default is DefaultGather.
	Gather gather.Config
	// RxRing makes the wire sockets receive through a memory-mapped ring
	// (link.RingConfig); nil: recvmmsg.
	RxRing *link.RingConfig
	// TxRing makes the wire sockets send through a memory-mapped
	// transmit ring (link.TxRingConfig); nil: sendmmsg.
	TxRing *link.TxRingConfig

	// TAPIO is how the offload TAP's queues are read and written
	// (tapio.go); "" is auto. Without Offloads it does not apply.
	TAPIO TAPIO

	// ReplyFastPath runs the kernel's reply fast path when it can
	// (fastpath.go): a TC program on the TAP's egress translates the
	// replies in the middle of a response (FastPathMiddle), and with
	// FastPathEcho the other replies too, and sends them out of the wire
	// device, uncopied. It needs CAP_BPF and CAP_NET_ADMIN (TCX on Linux
	// 6.6+, else a clsact filter); without, the daemon says why and every reply crosses the shim as before.
	// The zero value is off; qsplice-backend's flag defaults to echo
	// (fastpath.go).
	ReplyFastPath FastPathMode
	// SYNFastPath runs the kernel's SYN fast path when it can
	// (synfast.go): a TC program on the wire's ingress hands the
	// front-end's SYNs that carry their request to the TAP itself. Like
	// ReplyFastPath it needs CAP_BPF and CAP_NET_ADMIN; the zero value is
	// off, qsplice-backend's flag defaults to on.
	SYNFastPath bool

	// RxHold bounds a receive-moderation hold (issue 7, moderate.go):
	// under a steady stream of bulk super-frames from the TAP a worker
	// waits up to this long before a pass, so that one pass translates
	// and sends several. 0 (or negative): never hold. Offload TAP only.
	RxHold time.Duration
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
	if _, err := ParseTAPIO(string(c.TAPIO)); err != nil {
		errs = append(errs, fmt.Errorf("tap-io: %w", err))
	}
	if c.Workers < 0 || c.Workers > 256 {
		errs = append(errs, fmt.Errorf("workers: %d out of 0..256", c.Workers))
	}
	if _, err := ParseFastPathMode(string(c.ReplyFastPath)); err != nil {
		errs = append(errs, err)
	}
	if err := c.Gather.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w (-gather)", err))
	}
	if err := proto.CheckKey(c.Key); err != nil {
		errs = append(errs, fmt.Errorf("key: this back-end's control key: %w (-key)", err))
	}
	return errors.Join(errs...)
}

// Daemon is a running back-end shim: Workers packet loops (worker.go),
// each a thin loop around its own engine shard, and on the first of them
// the control protocol's Agent. See doc.go for the data flow.
type Daemon struct {
	cfg     Config
	log     *slog.Logger
	mac     wire.MAC
	agent   *Agent // owned by workers[0]
	workers []*worker
	gather  *gathering // nil: each worker serves its own shard always
	// The devices: on the offload path one OffloadTAP queue per worker;
	// on the plain path one water TAP, read by readPlainTAP.
	taps     []*link.OffloadTAP
	plainTAP *link.TAP
	// tapSteering says how the kernel picks the TAP queue of a frame it
	// sends: "ports" (our steering program, every frame to the worker
	// that owns its connection), "flows" (the tun driver's flow table;
	// the program could not be attached), or "" with one queue.
	tapSteering string
	// fast is the kernel's reply fast path, nil when off; fastState says
	// which ("tcx: " and the mode, or "off" and why) for /status.
	fast      *link.ReplyFastPath
	fastState string
	// synFast is the kernel's SYN fast path, nil when off; synState
	// says which for /status.
	synFast  *link.SYNFastPath
	synState string
	// tapLinks are what the workers drive, one per queue: the queue's
	// UringTAP (also in urings) or the queue itself (tapio.go).
	tapLinks []link.BatchLink
	urings   []*link.UringTAP
	wires    []*link.AFPacket
	capture  *capture
	ctl      *link.ControlSocket // read and written by workers[0]
	// incarnation is this run's, in the agent's messages and the
	// control Codec's headers.
	incarnation uint64
	// epoch is the daemon's one clock: splice.Time is the monotonic time
	// since it, so a wall-clock step moves no timer.
	epoch time.Time
	// peak is the most requests in service at once over all shards,
	// as seen from the shards' published counts.
	peak     atomic.Int64
	stopping atomic.Bool
	done     chan struct{} // closed once the workers stopped
}

// New opens the devices: the TAP (creating and, with SetupTAP,
// configuring it), one wire socket per worker, the capture file.
func New(cfg Config, log *slog.Logger) (*Daemon, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("backend: bad configuration: %w", err)
	}
	n := cfg.Workers
	if n == 0 {
		n = runtime.NumCPU()
	}
	if cfg.Prefix == 0 {
		cfg.Prefix = 24
	}
	d := &Daemon{cfg: cfg, log: log, done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			d.closeDevices()
		}
	}()
	if err := d.openTAP(n); err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	if cfg.SetupTAP {
		if err := setupTAP(cfg.TAP, cfg.TAPMAC, netip.PrefixFrom(cfg.Addr, cfg.Prefix)); err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
	}
	ifi, err := net.InterfaceByName(cfg.TAP)
	if err != nil {
		return nil, fmt.Errorf("backend: %s: %w", cfg.TAP, err)
	}
	d.mac = wire.MAC(ifi.HardwareAddr)
	wifi, err := net.InterfaceByName(cfg.Wire)
	if err != nil {
		return nil, fmt.Errorf("backend: %s: %w", cfg.Wire, err)
	}
	// One fanout group per shim; groups are per network namespace.
	fanout := &link.Fanout{Group: uint16(os.Getpid()), Mode: link.FanoutPorts}
	for range n {
		// No PACKET_QDISC_BYPASS: measured in the lab, a bypassing socket
		// gets ENOBUFS whenever the veth's peer falls behind, and every
		// super-frame refused that way is a TCP loss; the qdisc is what
		// makes a full device wait instead.
		acfg := link.AFPacketConfig{Promiscuous: true, VNetHdr: cfg.Offloads, RxRing: cfg.RxRing, TxRing: cfg.TxRing}
		if n > 1 {
			acfg.Fanout = fanout
		}
		w, err := link.OpenAFPacket(cfg.Wire, acfg)
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		if err := w.TxRingError(); err != nil {
			log.Warn("wire: no transmit ring, sending with sendmmsg", "wire", cfg.Wire, "err", err)
		}
		d.wires = append(d.wires, w)
	}
	d.openReplyFastPath(wifi.Index, ifi.Index)
	d.openSYNFastPath(wifi.Index, ifi.Index)
	if cfg.Capture != "" {
		if d.capture, err = openCapture(cfg.Capture, cfg.Wire); err != nil {
			return nil, err
		}
	}
	// One incarnation for the agent's messages and the Codec's headers:
	// the start time, so the front-end can tell a restart from a replay
	// of an earlier run (proto.ReplayWindow).
	d.incarnation = proto.NewIncarnation(time.Now())
	d.agent = NewAgent(AgentConfig{
		ID: cfg.ID, Addr: cfg.Addr, MAC: d.mac, ControlPort: cfg.ControlPort, WebPorts: cfg.WebPorts,
		Capacity: cfg.Capacity, Incarnation: d.incarnation, SpliceDelay: cfg.SpliceDelay,
	})
	// Buffers: a link with vnet headers delivers super-frames; one
	// without delivers at most the MTU behind an Ethernet and VLAN header.
	wireBuf := max(2048, wifi.MTU+18)
	if cfg.Offloads {
		wireBuf = link.MaxFrame
	}
	for i := range n {
		w, err := d.newWorker(i, wireBuf)
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		d.workers = append(d.workers, w)
	}
	ok = true
	return d, nil
}

// openTAP opens the host side: n queues of an offload-capable TAP, or the
// water TAP.
func (d *Daemon) openTAP(n int) error {
	if !d.cfg.Offloads {
		t, err := link.OpenTAP(d.cfg.TAP)
		d.plainTAP = t
		return err
	}
	taps, err := link.OpenOffloadTAP(d.cfg.TAP, link.OffloadTAPConfig{Queues: n})
	if err != nil && errors.Is(err, unix.EINVAL) && d.cfg.SetupTAP && tapExists(d.cfg.TAP) {
		// A device made beforehand (ip tuntap add) in the other queue
		// mode cannot change it. Its owner expects us to configure it
		// (SetupTAP), and it would vanish when we close it anyway (see
		// link.OffloadTAP): make it again, as we need it.
		d.log.Info("recreating the TAP in multi-queue mode", "tap", d.cfg.TAP, "queues", n)
		if err := deleteLink(d.cfg.TAP); err != nil {
			return err
		}
		taps, err = link.OpenOffloadTAP(d.cfg.TAP, link.OffloadTAPConfig{Queues: n})
	}
	if err != nil {
		return err
	}
	d.taps = taps
	if len(taps) > 1 {
		// Every frame to the worker whose wire fanout member owns its
		// connection (link.OffloadTAP.SteerByPorts): without it, the
		// kernel's flow table sends a SYN-ACK, and whatever it sends on
		// a flow it forgot, to another worker half the time with two,
		// which must hand it over.
		d.tapSteering = "ports"
		if err := taps[0].SteerByPorts(); err != nil {
			d.tapSteering = "flows"
			args := []any{"err", err}
			if errors.Is(err, unix.EPERM) {
				args = append(args, "hint", "grant CAP_BPF to steer them (contrib/systemd/qsplice-backend.service; README, \"Privileges\")")
			}
			d.log.Warn("TAP queues steered by the kernel's flow table: frames of another worker's connections are handed over", args...)
		}
	}
	mode, _ := ParseTAPIO(string(d.cfg.TAPIO)) // validated
	d.tapLinks, d.urings, err = tapLinks(taps, mode, openURing, d.log)
	return err
}

// closeDevices closes whatever New opened; safe to call twice.
func (d *Daemon) closeDevices() {
	for _, w := range d.workers {
		w.poller.Close()
	}
	for _, u := range d.urings {
		u.Close() // and its queue
	}
	for _, t := range d.taps {
		t.Close()
	}
	if d.plainTAP != nil {
		d.plainTAP.Close()
	}
	if d.fast != nil {
		d.fast.Close() // detaches the program first
		d.fast = nil
	}
	if d.synFast != nil {
		d.synFast.Close()
		d.synFast = nil
	}
	for _, w := range d.wires {
		w.Close()
	}
	if d.capture != nil {
		if err := d.capture.Close(); err != nil {
			d.log.Warn("capture", "err", err)
		}
		d.capture = nil
	}
}

// now reads the daemon's clock. Every input is stamped with it in the
// loop that feeds it, so time never goes backwards from one call into an
// engine or the agent to the next.
func (d *Daemon) now() splice.Time { return splice.Time(time.Since(d.epoch)) }

// Run serves until ctx ends, then closes everything New opened. The
// control socket is opened here because its address lives on the TAP,
// whose carrier comes up only once the TAP is open (it is, since New).
func (d *Daemon) Run(ctx context.Context) error {
	defer d.closeDevices()
	d.epoch = time.Now()
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(d.cfg.Addr, d.cfg.ControlPort)))
	if err != nil {
		return fmt.Errorf("backend: control socket: %w", err)
	}
	defer conn.Close()
	if err := d.workers[0].attachControl(conn); err != nil {
		return fmt.Errorf("backend: control socket: %w", err)
	}
	// The control socket took conn over with a descriptor of its own
	// (link.NewControlSocket), which conn.Close does not release.
	defer d.ctl.Close()
	if d.cfg.Admin != "" {
		srv, err := d.startAdmin()
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	if err := d.startGathering(); err != nil {
		return err
	}
	if d.gather != nil {
		defer d.gather.close()
	}
	spareProcessor(len(d.workers))
	errc := make(chan error, len(d.workers)+1)
	var wg sync.WaitGroup
	for _, w := range d.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- w.run()
		}()
	}
	readerDone := make(chan struct{})
	if d.plainTAP != nil {
		go func() {
			defer close(readerDone)
			if err := d.readPlainTAP(); err != nil && !d.stopping.Load() {
				errc <- err
			}
		}()
	} else {
		close(readerDone)
	}
	stopOnCancel := context.AfterFunc(ctx, d.stop)
	defer stopOnCancel()
	d.log.Info("back-end shim up", "id", d.cfg.ID, "tap", d.cfg.TAP, "wire", d.cfg.Wire, "addr", d.cfg.Addr,
		"mac", d.mac.String(), "frontend", d.cfg.Frontend, "workers", len(d.workers), "offloads", d.cfg.Offloads, "tap-io", d.tapIO())
	err = <-errc // nil: stopped
	d.stop()
	wg.Wait()
	close(d.done)
	if d.plainTAP != nil {
		d.plainTAP.Close() // ends its reader
	}
	<-readerDone
	return err
}

// tapIO names how the TAP is read and written, for the log.
func (d *Daemon) tapIO() string {
	switch {
	case !d.cfg.Offloads:
		return "water"
	case len(d.urings) > 0:
		return string(TAPIOURing)
	}
	return string(TAPIORW)
}

// stop makes every worker return.
func (d *Daemon) stop() {
	d.stopping.Store(true)
	for _, w := range d.workers {
		w.poller.Wake()
	}
	if g := d.gather; g != nil {
		g.stopOnce.Do(func() { close(g.stop) })
	}
}

// shardOf is the worker that owns the C2 connection a Splice is about:
// the member of the wire's fanout group that receives its frames, which
// is also where the kernel's replies are steered (worker.go). The link
// package's FanoutShard is the one definition of that choice, so it is
// asked about a minimal frame of the connection.
func shardOf(m *proto.Splice, n int) int {
	var f [14 + 20 + 4]byte
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	f[14] = 0x45 // IPv4, 20-byte header
	f[14+9] = 6  // TCP
	binary.BigEndian.PutUint16(f[34:], m.BackendPort)
	binary.BigEndian.PutUint16(f[36:], m.HandoffPort)
	return link.FanoutShard(f[:], n)
}

// concurrency is the number of requests in service over all shards.
func (d *Daemon) concurrency() int {
	n := int64(0)
	for _, w := range d.workers {
		n += w.active.Load()
	}
	return int(n)
}

// spareProcessor gives the Go runtime one processor (P) more than the
// workers, unless it has that many already: the front-end's reason
// (frontend/loop.go), measured again here once receive moderation made
// the workers spend most of their idle time in long holds. With every P
// in a system call and none idle, sysmon retakes them and re-arms itself
// at its shortest period: under bulk load, two workers on GOMAXPROCS 2
// made sysmon sleep 2,000 times a second (nanosleep), against 350 with
// 3.
func spareProcessor(workers int) {
	if runtime.GOMAXPROCS(0) <= workers {
		runtime.GOMAXPROCS(workers + 1)
	}
}
