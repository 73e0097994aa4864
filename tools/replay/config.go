package replay

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

// Defaults, matching the lab (tools/lab).
const (
	DefaultVIP          = "198.18.0.100"
	DefaultHandoffAddr  = "198.18.0.101"
	DefaultMAC          = "02:00:c6:12:00:02"
	DefaultCookieSeed   = "replay"
	DefaultBackends     = 3
	DefaultCapacity     = 5
	DefaultControlDelay = 100 * time.Microsecond
	DefaultLinkDelay    = 50 * time.Microsecond
	DefaultServiceDelay = time.Millisecond
	DefaultDrain        = 30 * time.Second

	// MaxBackends keeps back-end addresses (.20+k) below the VIP (.100).
	MaxBackends = 79
)

// Config says how to replay. The zero value of every field takes the
// default named with it; a zero delay cannot be asked for (use 1ns).
type Config struct {
	// VIP is the client-facing address; zero takes the destination of
	// the capture's first SYN to one of Ports.
	VIP         netip.Addr
	HandoffAddr netip.Addr // source of the C2 connections (198.18.0.101)
	MAC         wire.MAC   // the front-end's MAC (02:00:c6:12:00:02)
	Ports       []uint16   // listening ports on the VIP (80)
	// CookieSeed derives the SYN-cookie secret as the front-end daemon
	// does: SHA-256 of the seed ("replay").
	CookieSeed string

	// Backends is the number of simulated back-ends (3), each serving
	// Capacity requests at once (5) on every port.
	Backends, Capacity int
	// Scheduler configures the front-end's controller, which schedules
	// the requests as the daemon does: listener policies, customers (by
	// Host), classes, timeouts. The zero value queues every port FIFO.
	// Its logs are not kept.
	Scheduler controller.Config
	// ControlDelay is the engine time a control message takes to a shim
	// and back: from the Splice to its SpliceAck, from a request's end of
	// service to its Feedback (100 µs).
	ControlDelay time.Duration
	// LinkDelay is the back-end's reaction time to a SYN or a FIN: the
	// round trip front-end -> back-end -> front-end (50 µs).
	LinkDelay time.Duration
	// ServiceDelay is the time from request bytes reaching a back-end to
	// its header-only ACK reaching the engine (1 ms).
	ServiceDelay time.Duration
	// Seed derives the back-ends' ISNs and timestamp clocks. Zero is a
	// valid seed.
	Seed uint64
	// Drain is how long timers keep running after the last capture frame
	// (30 s); negative runs until the engine has no deadline left.
	Drain time.Duration
	// RecomputeChecksums recomputes the IPv4 and TCP checksums of every
	// client frame before feeding it, for captures taken on the sending
	// host with checksum offload (partial checksums).
	RecomputeChecksums bool
	// RecordInput also writes the client frames fed to the engine (after
	// rewriting) into the output capture, before the engine's answers.
	RecordInput bool

	// Engine tunes the engine (timeouts, buffers). Its MAC, VIPs, Ports,
	// HandoffAddr and CookieSecret are replaced by the fields above, and
	// its SpliceAtSYN by ClassicSplice's opposite. Its PoolC2 is turned
	// off: the simulated back-ends have no shim to move a pooled C2, so
	// every replayed connection gets a C2 of its own, where
	// qsplice-frontend by default keeps them between connections
	// (docs/pooled-c2.md, "Not done").
	Engine splice.FrontEndConfig
	// ClassicSplice sends each Splice after C2's SYN-ACK, as the front-end
	// did before issue 7; by default it goes with the SYN, as
	// qsplice-frontend sends it (splice.FrontEndConfig.SpliceAtSYN).
	ClassicSplice bool

	// Timeline, if set, receives each connection's handoff timeline as
	// a JSON line, as qsplice-frontend -timeline writes them (issue 11,
	// timeline.go).
	Timeline io.Writer
}

func (c *Config) setDefaults() {
	if !c.HandoffAddr.IsValid() {
		c.HandoffAddr = netip.MustParseAddr(DefaultHandoffAddr)
	}
	if c.MAC == (wire.MAC{}) {
		c.MAC, _ = wire.ParseMAC(DefaultMAC)
	}
	if len(c.Ports) == 0 {
		c.Ports = []uint16{80}
	}
	if c.CookieSeed == "" {
		c.CookieSeed = DefaultCookieSeed
	}
	if c.Backends == 0 {
		c.Backends = DefaultBackends
	}
	if c.Capacity == 0 {
		c.Capacity = DefaultCapacity
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.ControlDelay, DefaultControlDelay)
	def(&c.LinkDelay, DefaultLinkDelay)
	def(&c.ServiceDelay, DefaultServiceDelay)
	def(&c.Drain, DefaultDrain)
}

func (c *Config) validate() error {
	if !c.VIP.Is4() || !c.HandoffAddr.Is4() {
		return errors.New("replay: VIP and HandoffAddr must be IPv4 addresses")
	}
	if c.VIP == c.HandoffAddr {
		return errors.New("replay: VIP and HandoffAddr must differ")
	}
	if c.Backends < 1 || c.Backends > MaxBackends {
		return fmt.Errorf("replay: Backends %d out of 1..%d", c.Backends, MaxBackends)
	}
	if c.Capacity < 1 || c.Capacity > 1<<16-1 {
		return fmt.Errorf("replay: Capacity %d out of 1..65535", c.Capacity)
	}
	for _, d := range []time.Duration{c.ControlDelay, c.LinkDelay, c.ServiceDelay} {
		if d < 0 {
			return errors.New("replay: delays must not be negative")
		}
	}
	for k := 1; k <= c.Backends; k++ {
		if a := backendAddr(k); a == c.VIP || a == c.HandoffAddr {
			return fmt.Errorf("replay: back-end %d's address %v is the VIP or the handoff address", k, a)
		}
	}
	return nil
}

// engineConfig is Engine with the addressing fields filled in.
func (c *Config) engineConfig() splice.FrontEndConfig {
	e := c.Engine
	e.MAC = c.MAC
	e.VIPs = []netip.Addr{c.VIP}
	e.Ports = append([]uint16(nil), c.Ports...)
	e.HandoffAddr = c.HandoffAddr
	e.CookieSecret = sha256.Sum256([]byte(c.CookieSeed))
	e.Timelines = c.Timeline != nil
	e.SpliceAtSYN = !c.ClassicSplice
	e.PoolC2 = false // no shim to move a pooled C2 (see Engine)
	return e
}

// schedulerConfig is Scheduler listening on Ports, quiet.
func (c *Config) schedulerConfig() controller.Config {
	sc := c.Scheduler
	if len(sc.Ports) == 0 {
		sc.Ports = append([]uint16(nil), c.Ports...)
	}
	sc.LogLevel = slog.LevelError + 1
	sc.Timelines = c.Timeline != nil
	return sc
}

// backendAddr is simulated back-end k's address, 198.18.0.(20+k).
func backendAddr(k int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 0, byte(20 + k)}) }

// backendMAC is simulated back-end k's MAC, 02:00:c6:12:00:(20+k).
func backendMAC(k int) wire.MAC { return wire.MAC{0x02, 0x00, 0xc6, 0x12, 0x00, byte(20 + k)} }
