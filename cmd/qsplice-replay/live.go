package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/tools/replay"
)

const liveUsage = `Usage: qsplice-replay -live -in client.pcap (-target ADDR:PORT | -map CAPTURED=LIVE,...) [flags]

Plays the client side of a capture against a running server -- a lab's VIP
(qsplice-lab exec c1 -- qsplice-replay -live ...) -- with the kernel's own
sockets: each captured connection is dialled at its captured time (scaled by
-speed), sends the captured requests, each at its captured moment or once
the response before it is in, and each response is checked against the
captured one: status, body length and, with -check-body, the body's SHA-256
where the capture holds the whole body. The summary counts what matched;
the exit status is 1 if anything did not.

Flags:
`

// runLive is qsplice-replay -live.
func runLive(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("qsplice-replay -live", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, liveUsage)
		fs.PrintDefaults()
	}
	fs.Bool("live", true, "play the capture against a live server (this mode)")
	in := fs.String("in", "", "the capture (pcap or pcapng, Ethernet); required")
	target := fs.String("target", "", "where the connections of a capture with one server go, ADDR:PORT")
	mapping := fs.String("map", "", "where each captured server's connections go: CAPTURED=LIVE,... (ADDR:PORT each)")
	speed := fs.Float64("speed", 1, "play the capture's timing this many times faster; 0: as fast as the responses come")
	checkBody := fs.Bool("check-body", false, "also compare each body's SHA-256 with the captured one (off: a server whose content differs per back-end, like the lab's, answers other bytes of the same length)")
	timeout := fs.Duration("timeout", 30*time.Second, "each request's time limit")
	jsonOut := fs.Bool("json", false, "print the summary and every result as JSON")
	verbose := fs.Bool("v", false, "print each request's result")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q (see -live -h)", fs.Args())
	case *in == "":
		return errors.New("-live needs -in (see -live -h)")
	case *speed < 0:
		return fmt.Errorf("-speed %g: must be >= 0", *speed)
	case *timeout <= 0:
		return fmt.Errorf("-timeout %v: must be > 0", *timeout)
	}
	var to netip.AddrPort
	if *target != "" {
		var err error
		if to, err = netip.ParseAddrPort(*target); err != nil {
			return fmt.Errorf("-target: %v", err)
		}
	}
	m := map[netip.AddrPort]netip.AddrPort{}
	for _, kv := range strings.Split(*mapping, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		a, b, ok := strings.Cut(kv, "=")
		from, err1 := netip.ParseAddrPort(a)
		dst, err2 := netip.ParseAddrPort(b)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("-map %q: want CAPTURED=LIVE with ADDR:PORT on each side", kv)
		}
		m[from] = dst
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	conns, err := replay.ReadLiveCapture(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	servers, err := replay.MapServers(conns, to, m)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := replay.RunLive(ctx, conns, replay.LiveOptions{Servers: servers, Speed: *speed, CheckBody: *checkBody, Timeout: *timeout})
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(s); err != nil {
			return err
		}
	} else {
		if *verbose {
			for _, r := range s.Results {
				fmt.Fprintf(stdout, "conn %d request %d %s: %s (status %d, want %d; %d bytes, want %d; %v)\n",
					r.Conn, r.Index, r.Target, r.Verdict, r.Got, r.Want, r.GotLen, r.WantLen, r.Duration.Round(time.Microsecond))
			}
		}
		fmt.Fprint(stdout, s.String())
	}
	if !s.Correct() {
		return errors.New("live replay: not every response matched the capture")
	}
	return nil
}
