// Command qsplice-flood is the attacker of qsplice's live adversarial
// tests: a SYN flood from spoofed addresses (198.18.128.0/17 only), or
// state exhaustion from one source with handshakes and partial request
// heads, over a raw AF_PACKET socket. See package tools/flood.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/internal/version"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
	"github.com/qsplice/qsplice/tools/flood"
)

const usageHead = `Usage: qsplice-flood -i IFACE -target ADDR:PORT[,PORT...] [-mode syn|heads] [flags]

Sends attack traffic at a qsplice front-end's VIP from a host on the same
Ethernet segment, with its own frames on a raw AF_PACKET socket (root or
CAP_NET_RAW; run it in the namespace that owns IFACE, e.g.
ip netns exec qs-NAME-c2 qsplice-flood ...). For the lab and tests only.

Modes:
  syn    SYNs from source addresses drawn at random from -spoof, which must
         lie inside 198.18.128.0/17 (any other range is refused), with random
         source ports and ISNs. -rate is SYNs per second.
  heads  From ONE source address (-source), complete handshakes (the SYN-ACK
         is read on the same socket and answered), send a partial request
         head on the final ACK, then stay silent: a state-exhaustion attacker.
         No kernel sockets are used, so up to 64,512 flows per target port
         are possible. -source must not be an address this host's kernel
         owns (the kernel would reset the handshakes); the generator
         answers ARP for it. -rate is new flows per second.

A line of progress is printed every second on stderr, and a summary at the
end: SYNs sent, answered (SYN-ACKs), refused/reset (RSTs), and in heads
mode the heads the target acknowledged (flows it holds) and the flows it
answered with data or FIN (a 408, a 503).

Flags:
`

type options struct {
	version  bool // -version: print it, nothing else
	iface    string
	cfg      flood.Config
	dstMAC   string
	jsonPath string
	progress bool
}

func parseFlags(args []string, output io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("qsplice-flood", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprint(output, usageHead)
		fs.PrintDefaults()
	}
	target := fs.String("target", "", "the VIP and its port(s), `ADDR:PORT[,PORT...]` (required)")
	mode := fs.String("mode", string(flood.ModeSYN), "`syn` or heads")
	spoof := fs.String("spoof", flood.SpoofPrefix.String(), "syn mode: source `PREFIX`, inside "+flood.SpoofPrefix.String())
	source := fs.String("source", "", "heads mode: the one source `ADDR` (not owned by this host's kernel)")
	defHead := strconv.Quote(flood.DefaultHead)
	head := fs.String("head", defHead[1:len(defHead)-1], "heads mode: the partial request `head`, escapes such as \\r\\n decoded as in a Go string")
	fs.StringVar(&o.iface, "i", "", "the `interface` to send on (required)")
	fs.StringVar(&o.dstMAC, "dst-mac", "", "the target's (or gateway's) `MAC`; default: ask with ARP")
	fs.Float64Var(&o.cfg.Rate, "rate", 10000, "`N` SYNs (in heads mode new flows) per second")
	fs.DurationVar(&o.cfg.Duration, "duration", 10*time.Second, "how long to send; 0: until -flows are open (heads) or interrupted")
	fs.IntVar(&o.cfg.Flows, "flows", 0, "heads mode: stop after this many flows (0: as many as the ports allow)")
	fs.DurationVar(&o.cfg.Linger, "linger", time.Second, "keep counting answers this long after the last SYN")
	fs.Uint64Var(&o.cfg.Seed, "seed", 0, "seed of the random addresses, ports and ISNs (0: a random seed)")
	fs.StringVar(&o.jsonPath, "json", "", "also write the summary as JSON to `FILE` (- for stdout)")
	fs.BoolVar(&o.progress, "progress", true, "print a progress line on stderr once a second")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.version {
		return o, nil
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case !(o.cfg.Rate > 0) || o.cfg.Rate > 10e6:
		return o, fmt.Errorf("-rate %g: must be > 0 and at most 10,000,000", o.cfg.Rate)
	case o.cfg.Duration < 0:
		return o, errors.New("-duration must not be negative")
	case o.cfg.Flows < 0:
		return o, errors.New("-flows must not be negative")
	case o.cfg.Linger < 0:
		return o, errors.New("-linger must not be negative")
	}
	if o.iface == "" || *target == "" {
		return o, errors.New("-i and -target are required (-h explains)")
	}
	o.cfg.Mode = flood.Mode(*mode)
	host, ports, ok := strings.Cut(*target, ":")
	if !ok {
		return o, fmt.Errorf("-target %q: want ADDR:PORT[,PORT...]", *target)
	}
	var err error
	if o.cfg.Target, err = netip.ParseAddr(host); err != nil || !o.cfg.Target.Is4() {
		return o, fmt.Errorf("-target %q: %q is not an IPv4 address", *target, host)
	}
	for _, p := range strings.Split(ports, ",") {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return o, fmt.Errorf("-target %q: bad port %q", *target, p)
		}
		o.cfg.Ports = append(o.cfg.Ports, uint16(n))
	}
	switch o.cfg.Mode {
	case flood.ModeSYN:
		if o.cfg.Spoof, err = netip.ParsePrefix(*spoof); err != nil {
			return o, fmt.Errorf("-spoof: %v", err)
		}
		if err := flood.CheckSpoofPrefix(o.cfg.Spoof); err != nil {
			return o, err
		}
	case flood.ModeHeads:
		if o.cfg.Source, err = netip.ParseAddr(*source); err != nil || !o.cfg.Source.Is4() {
			return o, fmt.Errorf("heads mode needs -source, an IPv4 address (got %q)", *source)
		}
		h, err := strconv.Unquote(`"` + strings.ReplaceAll(*head, `"`, `\"`) + `"`)
		if err != nil {
			return o, fmt.Errorf("-head: %v", err)
		}
		o.cfg.Head = []byte(h)
	default:
		return o, fmt.Errorf("-mode %q: want syn or heads", *mode)
	}
	if o.cfg.Duration == 0 && o.cfg.Mode == flood.ModeSYN {
		return o, errors.New("syn mode needs a -duration")
	}
	if o.dstMAC != "" { // checked here, before the socket is opened
		if _, err := wire.ParseMAC(o.dstMAC); err != nil {
			return o, fmt.Errorf("-dst-mac: %v", err)
		}
	}
	return o, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "qsplice-flood:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.version {
		fmt.Fprintln(stdout, version.Line("qsplice-flood"))
		return nil
	}
	ifi, err := net.InterfaceByName(o.iface)
	if err != nil {
		return err
	}
	copy(o.cfg.SrcMAC[:], ifi.HardwareAddr)
	lk, err := link.OpenAFPacket(o.iface, link.AFPacketConfig{})
	if err != nil {
		return err
	}
	defer lk.Close()
	if o.dstMAC != "" {
		if o.cfg.DstMAC, err = wire.ParseMAC(o.dstMAC); err != nil {
			return fmt.Errorf("-dst-mac: %v", err)
		}
	} else {
		from := o.cfg.Source
		if o.cfg.Mode == flood.ModeSYN {
			if from, err = firstIPv4(ifi); err != nil {
				return fmt.Errorf("%v; give -dst-mac", err)
			}
		}
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		o.cfg.DstMAC, err = flood.ResolveMAC(actx, lk, o.cfg.SrcMAC, from, o.cfg.Target)
		cancel()
		if err != nil {
			return err
		}
	}
	if o.cfg.Seed == 0 {
		o.cfg.Seed = uint64(time.Now().UnixNano())
	}
	fmt.Fprintf(stderr, "qsplice-flood: %s mode on %s (%v) to %v ports %v via %v at %g/s\n",
		o.cfg.Mode, o.iface, o.cfg.SrcMAC, o.cfg.Target, o.cfg.Ports, o.cfg.DstMAC, o.cfg.Rate)
	var progress io.Writer
	if o.progress {
		progress = stderr
	}
	sum, err := flood.Run(ctx, o.cfg, lk, progress)
	fmt.Fprintln(stdout, sum)
	if o.jsonPath != "" {
		b, _ := json.MarshalIndent(sum, "", "  ")
		b = append(b, '\n')
		if o.jsonPath == "-" {
			stdout.Write(b)
		} else if werr := os.WriteFile(o.jsonPath, b, 0o644); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	return err
}

// firstIPv4 is the interface's first IPv4 address: the sender of the
// ARP request in syn mode.
func firstIPv4(ifi *net.Interface) (netip.Addr, error) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP.To4()); ok && n.IP.To4() != nil {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("%s has no IPv4 address to ask ARP from", ifi.Name)
}
