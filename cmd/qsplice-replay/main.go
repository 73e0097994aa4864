// Command qsplice-replay replays a pcap of client traffic through the
// front-end packet engine with simulated back-ends and writes what the
// engine sent to another pcap. The model (which frames are fed, how the
// client's numbers are moved onto our SYN cookies, what the back-ends do)
// is described in package tools/replay; this command adds flags, files and
// the summary.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/frontend/conf"
	"github.com/qsplice/qsplice/internal/version"
	"github.com/qsplice/qsplice/splice/wire"
	"github.com/qsplice/qsplice/tools/replay"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "qsplice-replay:", err)
		os.Exit(1)
	}
}

const usageHead = `Usage: qsplice-replay -in client.pcap -out engine.pcap [flags]
       qsplice-replay -live -in client.pcap -target ADDR:PORT [flags]   (against a live server; -live -h)

Feeds the client frames of a capture (ARP, and IPv4 to the VIP: -vip, or the
destination of the first SYN to -ports) to the
qsplice front-end engine at the capture's own timestamps, schedules the
requests with the front-end's own controller (-config FILE: the listener
policies and customers of a front-end configuration, so Host headers map
to customers as they would live; keep-alive follow-ups are scheduled and
admitted too), plays N simulated back-ends (198.18.0.(20+k), each serving
-capacity requests at once: answer the C2 handshake, ACK the request after
-service-delay, close after the client) and their shims (splice confirmed
after -control-delay, Feedback after the service), and writes every frame
the engine and the back-ends sent to -out, stamped with engine time. Frames
from the VIP or from back-ends in the capture are the old system's output
and are not fed. -out is written to a temporary file and renamed when the
run succeeds.

The capture was made against another front-end, whose ISN (SYN cookie) and
timestamp clock differ from ours: each client frame's ACK number, SACK
edges and TS echo are shifted per connection by (our SYN-ACK - captured
SYN-ACK) so they fit this engine. The captured SYN-ACK is used if present,
else the client's first ACK. Same input and flags, same output, byte for
byte. A summary goes to stdout (-json for JSON).

Flags:
`

// options are the command's flags.
type options struct {
	version bool // -version: print it, nothing else
	in, out string
	json    bool
	config  string
	// timeline is the -timeline file: each connection's handoff
	// timeline, as qsplice-frontend -timeline writes them.
	timeline string
	cfg      replay.Config
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	c := &o.cfg
	fs := flag.NewFlagSet("qsplice-replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHead)
		fs.PrintDefaults()
		fmt.Fprint(stderr, "\n")
		runLive([]string{"-h"}, io.Discard, stderr) // the -live mode's flags (live.go)
	}
	var vip, handoff, mac, ports string
	fs.StringVar(&o.in, "in", "", "input capture (pcap or pcapng, Ethernet link type); required")
	fs.StringVar(&o.out, "out", "", "output capture (pcap, nanosecond timestamps); required")
	fs.BoolVar(&o.json, "json", false, "print the summary as JSON")
	fs.StringVar(&vip, "vip", "", "the VIP clients connected to (default: the destination of the capture's first SYN to -ports)")
	fs.StringVar(&handoff, "handoff", replay.DefaultHandoffAddr, "source address of the handoff connections (C2)")
	fs.StringVar(&mac, "mac", replay.DefaultMAC, "the front-end's MAC")
	fs.StringVar(&ports, "ports", "80", "comma-separated listening ports on the VIP")
	fs.StringVar(&c.CookieSeed, "cookie-seed", replay.DefaultCookieSeed, "SYN-cookie secret seed (SHA-256 of it, as qsplice-frontend)")
	fs.StringVar(&o.config, "config", "", "front-end configuration file: schedule with its listener policies and customers; its first VIP and its ports unless -vip or -ports are given")
	fs.IntVar(&c.Backends, "backends", replay.DefaultBackends, "number of simulated back-ends (1..79)")
	fs.IntVar(&c.Capacity, "capacity", replay.DefaultCapacity, "requests each simulated back-end serves at once")
	fs.DurationVar(&c.ControlDelay, "control-delay", replay.DefaultControlDelay, "engine time a control message takes to a shim and back (Splice to SpliceAck, end of service to Feedback)")
	fs.DurationVar(&c.LinkDelay, "link-delay", replay.DefaultLinkDelay, "back-end's reaction time to a SYN or FIN (front-end round trip)")
	fs.DurationVar(&c.ServiceDelay, "service-delay", replay.DefaultServiceDelay, "time from request bytes to the back-end's ACK of them")
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the back-ends' ISNs and timestamp clocks")
	fs.DurationVar(&c.Drain, "drain", replay.DefaultDrain, "engine time to keep running timers after the last frame; negative: until idle")
	fs.BoolVar(&c.RecomputeChecksums, "recompute-checksums", false, "recompute client frames' checksums (captures with tx checksum offload)")
	fs.BoolVar(&c.RecordInput, "record-input", false, "also write the (rewritten) client frames fed to the engine to -out")
	fs.DurationVar(&c.Engine.HeadTimeout, "head-timeout", 10*time.Second, "engine: a client must finish its request head within this (408)")
	fs.DurationVar(&c.Engine.Linger, "linger", 5*time.Second, "engine: how long a closed flow is kept for late segments")
	fs.DurationVar(&c.Engine.IdleTimeout, "idle-timeout", 15*time.Minute, "engine: spliced flow idle limit")
	atSYN := fs.Bool("splice-at-syn", true, "engine: send a request's Splice with the handoff SYN, as qsplice-frontend does by default (false: after the SYN-ACK)")
	fs.StringVar(&o.timeline, "timeline", "", "write each connection's handoff timeline to this file, one JSON line per connection, as qsplice-frontend -timeline (qsplice-timeline reads it)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	c.ClassicSplice = !*atSYN
	if o.version {
		return o, nil
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q (see -h)", fs.Args())
	}
	if o.in == "" || o.out == "" {
		return o, errors.New("-in and -out are required (see -h)")
	}
	if err := checkRanges(c); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.config != "" {
		f, err := conf.Load(o.config)
		if err != nil {
			return o, err
		}
		c.Scheduler = frontend.SchedulerFromFile(f)
		if !set["ports"] {
			ports = joinPorts(c.Scheduler.Ports)
		}
		if !set["vip"] && len(f.Listeners) > 0 {
			vip = f.Listeners[0].VIP.String()
		}
	}
	var err error
	if vip != "" {
		if c.VIP, err = netip.ParseAddr(vip); err != nil {
			return o, fmt.Errorf("-vip: %v", err)
		}
	}
	if c.HandoffAddr, err = netip.ParseAddr(handoff); err != nil {
		return o, fmt.Errorf("-handoff: %v", err)
	}
	if c.MAC, err = wire.ParseMAC(mac); err != nil {
		return o, fmt.Errorf("-mac: %v", err)
	}
	if c.Ports, err = parsePorts(ports); err != nil {
		return o, fmt.Errorf("-ports: %v", err)
	}
	return o, nil
}

func joinPorts(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}

func parsePorts(s string) ([]uint16, error) {
	var ports []uint16
	for _, f := range strings.Split(s, ",") {
		p, err := strconv.ParseUint(strings.TrimSpace(f), 10, 16)
		if err != nil || p == 0 {
			return nil, fmt.Errorf("bad port %q", f)
		}
		ports = append(ports, uint16(p))
	}
	return ports, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	for _, a := range args {
		if a == "-live" || a == "--live" || a == "-live=true" {
			return runLive(args, stdout, stderr) // live.go
		}
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.version {
		fmt.Fprintln(stdout, version.Line("qsplice-replay"))
		return nil
	}
	if same, err := sameFile(o.in, o.out); err != nil || same {
		if err == nil {
			err = fmt.Errorf("-out %s is the input capture: it would be destroyed", o.out)
		}
		return err
	}
	in, err := os.Open(o.in)
	if err != nil {
		return err
	}
	defer in.Close()
	// Written aside and renamed when complete, so that a failed run
	// leaves whatever -out held before.
	out, err := os.CreateTemp(filepath.Dir(o.out), "."+filepath.Base(o.out)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name()) // fails harmlessly once renamed
	var tf *os.File
	var tw *bufio.Writer
	if o.timeline != "" {
		if tf, err = os.Create(o.timeline); err != nil {
			return err
		}
		tw = bufio.NewWriter(tf)
		o.cfg.Timeline = tw
	}
	sum, err := replay.Run(o.cfg, in, out)
	if tw != nil {
		if ferr := tw.Flush(); err == nil {
			err = ferr
		}
		if cerr := tf.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(out.Name(), o.out)
	}
	if err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	return sum.WriteText(stdout)
}

// sameFile reports whether a and b name the same file (b may not exist).
func sameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}
