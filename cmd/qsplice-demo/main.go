// Command qsplice-demo builds the netns lab, runs load through the VIP,
// prints what each back-end served and what the front-end carried, and
// tears the lab down. `make demo` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/tools/demo"
)

func main() {
	var cfg demo.Config
	flag.StringVar(&cfg.BinDir, "bin", demo.DefaultBinDir(), "directory with the qsplice binaries")
	flag.IntVar(&cfg.Backends, "backends", 3, "number of back-ends")
	flag.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long wrk runs")
	flag.IntVar(&cfg.Connections, "connections", 100, "wrk connections")
	flag.DurationVar(&cfg.ServiceTime, "service-time", 2*time.Millisecond, "test server service time per request")
	flag.BoolVar(&cfg.KeepLab, "keep", false, "leave the lab up afterwards")
	flag.StringVar(&cfg.Name, "name", "", "lab name (default: demo + random suffix)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "qsplice-demo: build the lab, run load through the VIP, print per-back-end results, tear down.\nNeeds root and wrk.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
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
