// Package lab builds, runs and removes the qsplice test network: network
// namespaces standing in for hosts on one Ethernet segment, with the web
// servers and the qsplice daemons running inside them.
//
// Where it sits: outside the data path. End-to-end tests and the
// qsplice-lab command call Up to get a running lab, send traffic from a
// client namespace to the VIP, capture on any switch port, and call Down.
//
//	           qs-N-sw: bridge br0
//	  +-------------+-------------+-------------+
//	  c1            fe            b1   ...      bK      (veth, switch side)
//	  |             |             |             |
//	eth0          eth0          eth0          eth0      (veth, host side)
//	qs-N-c1       qs-N-fe       qs-N-b1       qs-N-bK
//	.10           .2 (+VIP .100 and          tap0 .21 ... .(20+K), bridged to
//	              handoff .101 in userspace) eth0 by the back-end shim
//
// All addresses are in 198.18.0.0/24. Offloads (checksum, TSO, GSO, GRO)
// stay on by default, as on real links, so both daemons see super-frames
// and partial checksums in virtio-net headers; Config.Offloads = false turns
// them off on every lab link (complete checksums, MTU-sized frames only;
// see docs/architecture.md §7). IPv6 is off. The state directory records what
// Up did, so Down, Open and the CLI work from the lab's name alone.
package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/qsplice/qsplice/internal/exposition"
	"github.com/qsplice/qsplice/tools/netns"
)

// Addresses the daemons are configured with.
const (
	VIP          = "198.18.0.100" // service address, owned by the front-end in userspace
	HandoffAddr  = "198.18.0.101" // source of the front-end's C2 connections, userspace too
	FrontendAddr = "198.18.0.2"   // the front-end's kernel address (control, admin)
	AdminURL     = "http://198.18.0.2:7404"
	PrefixLen    = 24
	// FrontendTAPMAC is the front-end's MAC when it runs on a TAP.
	FrontendTAPMAC = "02:00:c6:12:00:64"
	// BackendAdminPort serves each shim's /status and /metrics on its
	// kernel address; the front-end's admin port (in AdminURL and
	// adminAddr) is the same.
	BackendAdminPort = exposition.DefaultAdminPort

	controlAddr = "198.18.0.2:7400"
	controlPort = "7401"
	adminAddr   = "198.18.0.2:7404"
	webPorts    = "80,8080"
)

// Limits that keep every host address below the VIP (.100).
const (
	MaxBackends = 79 // back-end k is .20+k
	MaxClients  = 10 // client i is .9+i, below the first back-end
)

// Config says what lab to build. It is saved as lab.json in the state
// directory; Down and Open read it back.
type Config struct {
	Name     string // [a-z0-9]{1,8}; namespaces are qs-Name-*
	Backends int    // K back-end hosts b1..bK
	Clients  int    // client hosts c1..cN

	StateDir string // default /run/qsplice/Name
	BinDir   string // where the qsplice-* binaries are; default: the running executable's directory

	Nginx      bool // nginx on port 80 of each back-end
	TestServer bool // qsplice-testserver on port 8080 of each back-end
	Daemons    bool // qsplice-backend shims and qsplice-frontend
	// FrontendTAP runs the front-end as a pure userspace host on a TAP
	// device (vip0) bridged to the wire inside its namespace, the way a
	// VM on a TAP bridge sees it, instead of AF_PACKET on eth0.
	FrontendTAP bool
	// Offloads keeps TX checksum offload, TSO, GSO and GRO on on every
	// veth and bridge of the lab, as they are on every real deployment:
	// the shim and the front-end then read partial checksums and TCP
	// super-frames and must handle them (virtio-net headers). Off, the
	// wire carries MTU-sized frames with complete checksums only.
	Offloads bool
	// FastOpen makes every back-end's kernel accept TCP Fast Open (RFC
	// 7413), as a deployment whose shim puts the handed-off request in
	// C2's SYN configures it (docs/architecture.md, step 6):
	// net.ipv4.tcp_fastopen=3 in the back-end's namespace (or VM), nginx
	// listening with fastopen=256 and qsplice-testserver with -fast-open
	// 256. Off, the sysctl keeps the kernel's default (1: client only)
	// and the servers listen without TCP_FASTOPEN.
	FastOpen bool
	// FrontendConfig, when set, is a YAML file the front-end runs from
	// (qsplice-frontend -config FILE) instead of the lab's flags; it must
	// use the lab's addresses (see FrontendYAML).
	FrontendConfig string
	// FrontendConfigText, when set, is the front-end's configuration
	// itself (what UserFrontendConfig makes of a user's file): the lab
	// writes it into its state directory and runs the front-end from it.
	FrontendConfigText string `json:",omitempty"`

	// Trees > 1 has nginx serve the Files in that many content trees
	// (issue 10; see nginxtrees.go): /tree<k>/data/<size> for k < Trees.
	Trees int

	ServiceTime  time.Duration // qsplice-testserver -service-time
	Capacity     int           // qsplice-backend -capacity
	Files        []int64       // sizes served by nginx under /data/
	FrontendArgs []string      // extra arguments for qsplice-frontend
	BackendArgs  []string      // extra arguments for every qsplice-backend
	ReadyTimeout time.Duration // how long Up waits for each readiness check
	// TestServerArgs are extra arguments for every qsplice-testserver
	// (e.g. -shop for the LIFO-Pri shop pages).
	TestServerArgs []string
	// DaemonUID and DaemonGID are what the daemons run as, holding only
	// CAP_NET_ADMIN and CAP_NET_RAW (privilege.go; README, "Privileges").
	// DaemonUID 0 runs them as root with -allow-root.
	DaemonUID, DaemonGID uint32

	// VM back-ends (vm.go): the back-ends listed here are QEMU guests on
	// a TAP of the lab's bridge instead of namespaces.
	VMBackends []int  `json:",omitempty"`
	VMKernel   string `json:",omitempty"` // guest kernel; default: the newest /boot/vmlinuz-* with modules, cloud flavour first
	VMBinDir   string `json:",omitempty"` // static qsplice-testserver, qsplice-backend, qsplice-frontend; default: BinDir/static, else BinDir
	// VMFrontend makes the front-end host a QEMU guest too (vmfe.go).
	VMFrontend bool `json:",omitempty"`
}

// DefaultConfig returns the configuration the CLI starts from.
func DefaultConfig(name string) Config {
	return Config{
		Name:         name,
		Backends:     2,
		Clients:      1,
		StateDir:     defaultStateDir(name),
		BinDir:       ExecutableDir(),
		Nginx:        true,
		TestServer:   true,
		Daemons:      true,
		Offloads:     true,
		FastOpen:     true,
		Capacity:     5,
		Files:        []int64{0, 1 << 10, 1 << 20, 64 << 20},
		ReadyTimeout: 15 * time.Second,
		DaemonUID:    DaemonNobody,
		DaemonGID:    DaemonNobody,
	}
}

func defaultStateDir(name string) string { return filepath.Join("/run/qsplice", name) }

// DefaultStateDir is where a lab named name keeps its state unless told
// otherwise.
func DefaultStateDir(name string) string { return defaultStateDir(name) }

// ExecutableDir is the directory of the running executable, symbolic
// links resolved: where the qsplice binaries are by default; "" if
// unknown.
func ExecutableDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	return filepath.Dir(exe)
}

var validName = regexp.MustCompile(`^[a-z0-9]{1,8}$`)

func checkName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("lab: name %q must match [a-z0-9]{1,8}", name)
	}
	return nil
}

// normalized fills in defaults for zero fields and validates the result.
func (c Config) normalized() (Config, error) {
	if err := checkName(c.Name); err != nil {
		return c, err
	}
	if c.StateDir == "" {
		c.StateDir = defaultStateDir(c.Name)
	}
	if c.BinDir == "" {
		c.BinDir = ExecutableDir()
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = 15 * time.Second
	}
	if c.Capacity <= 0 {
		c.Capacity = 5
	}
	if c.Clients == 0 {
		c.Clients = 1
	}
	if c.Backends < 1 || c.Backends > MaxBackends {
		return c, fmt.Errorf("lab: %d back-ends, want 1..%d", c.Backends, MaxBackends)
	}
	if c.Clients < 1 || c.Clients > MaxClients {
		return c, fmt.Errorf("lab: %d clients, want 1..%d", c.Clients, MaxClients)
	}
	if c.Trees < 0 || c.Trees > 255 {
		return c, fmt.Errorf("lab: %d content trees, want 0..255", c.Trees)
	}
	for _, size := range c.Files {
		if size < 0 {
			return c, fmt.Errorf("lab: negative file size %d", size)
		}
	}
	if err := c.normalizeVM(); err != nil {
		return c, err
	}
	abs, err := filepath.Abs(c.StateDir)
	if err != nil {
		return c, err
	}
	c.StateDir = abs
	return c, nil
}

// Lab is a built lab. A Lab returned by Up holds the processes it started
// and reaps them; one returned by Open knows them by their pidfiles.
type Lab struct {
	cfg    Config
	reused bool

	mu       sync.Mutex
	children map[string]*child // processes started by this Lab, by name
}

// Open returns the lab recorded in stateDir (default /run/qsplice/NAME)
// without changing it. It fails if there is no record.
func Open(name, stateDir string) (*Lab, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if stateDir == "" {
		stateDir = defaultStateDir(name)
	}
	cfg, err := readConfig(stateDir)
	if err != nil {
		return nil, err
	}
	if cfg.Name != name {
		return nil, fmt.Errorf("lab: %s records lab %q, not %q", stateDir, cfg.Name, name)
	}
	return newLab(cfg), nil
}

func newLab(cfg Config) *Lab {
	return &Lab{cfg: cfg, children: make(map[string]*child)}
}

// Config returns the configuration the lab was built with.
func (l *Lab) Config() Config { return l.cfg }

// Reused reports whether Up found this lab already running and left it as
// it was instead of building it.
func (l *Lab) Reused() bool { return l.reused }

// NS returns the namespace of a host: "c1" -> "qs-N-c1". Hosts are sw, fe,
// c1..cN and b1..bK.
func (l *Lab) NS(host string) string { return nsName(l.cfg.Name, host) }

func nsName(lab, host string) string { return "qs-" + lab + "-" + host }

func nsPrefix(lab string) string { return "qs-" + lab + "-" }

// Hosts returns every host name of the lab except the switch, in the
// order they are built: clients, front-end, back-ends.
func (l *Lab) Hosts() []string {
	var hosts []string
	for i := 1; i <= l.cfg.Clients; i++ {
		hosts = append(hosts, clientHost(i))
	}
	hosts = append(hosts, "fe")
	for k := 1; k <= l.cfg.Backends; k++ {
		hosts = append(hosts, backendHost(k))
	}
	return hosts
}

func clientHost(i int) string  { return "c" + strconv.Itoa(i) }
func backendHost(k int) string { return "b" + strconv.Itoa(k) }

// checkHost rejects host names that are not part of this lab.
func (l *Lab) checkHost(host string) error {
	if host == "sw" {
		return nil
	}
	for _, h := range l.Hosts() {
		if h == host {
			return nil
		}
	}
	return fmt.Errorf("lab %s: no host %q (hosts: sw %s)", l.cfg.Name, host, strings.Join(l.Hosts(), " "))
}

// Command returns a command that runs arg in the host's namespace.
func (l *Lab) Command(host string, arg ...string) *exec.Cmd {
	return netns.Command(l.NS(host), arg...)
}

// BackendAddr returns back-end k's address (the kernel address on its tap0).
func (l *Lab) BackendAddr(k int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 18, 0, byte(20 + k)})
}

// BackendMAC returns the MAC address of back-end k's tap0.
func (l *Lab) BackendMAC(k int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x00, 0xc6, 0x12, 0x00, byte(20 + k)}
}

// ClientAddr returns client i's address.
func (l *Lab) ClientAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 0, byte(9 + i)}) }

// Sysctl sets a sysctl in the host's namespace; key is in sysctl(8) form
// ("net.ipv4.tcp_sack") or a path below /proc/sys ("net/ipv4/tcp_sack").
func (l *Lab) Sysctl(host, key, value string) error {
	if err := l.checkHost(host); err != nil {
		return err
	}
	return sysctlIn(l.NS(host), key, value)
}

func sysctlIn(ns, key, value string) error {
	path := key
	if !strings.Contains(key, "/") {
		path = strings.ReplaceAll(key, ".", "/")
	}
	path = filepath.Join("/proc/sys", filepath.Clean("/"+path))
	// /proc/sys/net resolves against the namespace of the opening thread.
	err := netns.Do(ns, func() error { return os.WriteFile(path, []byte(value), 0) })
	if err != nil {
		return fmt.Errorf("lab: sysctl %s=%s in %s: %w", key, value, ns, err)
	}
	return nil
}

// Dial connects from inside the host's namespace, as a program on that
// host would.
func (l *Lab) Dial(ctx context.Context, host, network, address string) (net.Conn, error) {
	if err := l.checkHost(host); err != nil {
		return nil, err
	}
	return dialIn(ctx, l.NS(host), network, address)
}

func dialIn(ctx context.Context, ns, network, address string) (net.Conn, error) {
	var conn net.Conn
	err := netns.Do(ns, func() error {
		// The socket is created on this (locked) thread, so it belongs to
		// the namespace; a literal address means no resolver goroutines.
		var d net.Dialer
		var err error
		conn, err = d.DialContext(ctx, network, address)
		return err
	})
	return conn, err
}

// HTTPClient returns a client whose connections start in the host's
// namespace. Keep-alives are on, as a browser's would be.
func (l *Lab) HTTPClient(host string) *http.Client {
	ns := l.NS(host)
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			return dialIn(ctx, ns, network, address)
		},
		DisableCompression: true,
	}}
}

// errNoLab is wrapped by errors about a state directory without a lab.
var errNoLab = errors.New("no lab recorded")
