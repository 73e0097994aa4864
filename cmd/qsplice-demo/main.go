// Command qsplice-demo runs the published guaranteed-rates scenario live:
// it builds the netns lab (5 back-ends x 5 concurrent, 20 ms service
// time, credit scheduler), checks byte-exact downloads through the VIP,
// offers every customer twice its reservation with qsplice-load, prints a
// table per customer and per back-end, and tears the lab down.
// `make demo` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/internal/version"
	"github.com/qsplice/qsplice/tools/demo"
)

func main() {
	var cfg demo.Config
	flag.StringVar(&cfg.BinDir, "bin", demo.DefaultBinDir(), "directory with the qsplice binaries")
	flag.DurationVar(&cfg.Duration, "duration", 30*time.Second, "measured load time")
	flag.Float64Var(&cfg.Offer, "offer", 2, "each customer offers this many times its reservation")
	flag.BoolVar(&cfg.SlowC, "slow-c", false, "customer C's requests take 40 ms (twice the typical service time)")
	flag.Float64Var(&cfg.Scale, "scale", 0.3, "multiply every rate and divide the service time by this (1 = the published figures; a 2-core host fits 0.3)")
	feArgs := flag.String("frontend-args", "", "extra qsplice-frontend flags, space separated (e.g. \"-cpuprofile /tmp/fe.prof\")")
	flag.StringVar(&cfg.Flood, "flood", "", "this customer (A, B, C or D) offers 10x its reservation")
	flag.BoolVar(&cfg.KeepLab, "keep", false, "leave the lab up afterwards")
	flag.StringVar(&cfg.Name, "name", "", "lab name (default: demo + random suffix)")
	quiet := flag.Bool("quiet", false, "no progress lines ([k/N] stage, time in, time left) on stderr")
	ahead := flag.Int("handoff-ahead", -1, "the front-end's backends.handoff_ahead: handoffs set up per back-end beyond its concurrency (-1: the configuration default, 2)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), `qsplice-demo: the guaranteed-rates scenario, live in the netns lab.

Customers A 500, B 100, C 400, D 150 req/s reserved on 5 back-ends x 5
concurrent requests at 20 ms (1250 req/s); each offers -offer times its
reservation. Prints, per customer: reservation, offered, served, attainment,
p50/p99 latency, rejections; per back-end: requests and bytes; and how few
bytes the front-end carried. Needs root.

Flags:
`)
		flag.PrintDefaults()
	}
	showVersion := version.Flag(flag.CommandLine)
	flag.Parse()
	if showVersion.Print(os.Stdout, "qsplice-demo") {
		return
	}
	if err := checkFlags(cfg, *ahead, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "qsplice-demo:", err)
		os.Exit(2)
	}
	cfg.FrontendArgs = strings.Fields(*feArgs)
	if *ahead >= 0 {
		cfg.HandoffAhead = ahead
	}
	if !*quiet {
		cfg.Progress = os.Stderr
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "qsplice-demo: needs root (network namespaces, AF_PACKET, TAP)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "qsplice-demo:", err)
		os.Exit(1)
	}
}
