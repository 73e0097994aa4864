// Command qsplice-bench-proxy measures qsplice against nginx and HAProxy
// as L7 proxies on this machine, in one run, and prints one table of
// ratios (issue 7). It is a thin shell over tools/benchproxy; run it
// with -h for what it builds and measures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/qsplice/qsplice/internal/version"
	"github.com/qsplice/qsplice/tools/benchproxy"
	"github.com/qsplice/qsplice/tools/content"
)

const usage = `qsplice-bench-proxy: qsplice against nginx and HAProxy as L7 proxies, one run,
one table of ratios (needs root: network namespaces, AF_PACKET, TAP, perf).

It builds, on addresses in 198.18.0.0/15 only, and removes afterwards:
  - the qsplice lab (qsplice-lab: client, front-end, one back-end running
    nginx and the shim), loaded through the VIP ("qsplice") and at the
    back-end's own address ("shim": every frame crosses the shim
    untranslated, no front-end, no splice: the floor of the shim's I/O);
  - a proxy chain of three namespaces, client -- proxy -- back-end, on
    198.18.7.0/24: the same nginx back-end and the same files, nginx
    (proxy_pass, upstream keepalive, HTTP/1.1) and HAProxy (mode http,
    http-keep-alive) in the middle, and "direct": the client talking to the
    back-end's kernel through plain IP forwarding, no proxy and no shim.
The chain's links get the offloads the lab's links have (-offloads).
nginx reuses its upstream connections, which the front-end cannot (a C2
per client connection); -nginx-upstream fresh makes it connect anew for
every request, so two runs tell what that costs a proxy.

For every system, in turn:
  bulk      wrk, SIZE objects over CONNS keep-alive connections: MB/s, and
            CPU-s per GB of the proxy, or of qsplice's front-end and shim,
            or of the shim alone (user+system time from /proc/PID/stat)
  1K close  wrk with Connection: close, SMALL-CONNS concurrent: requests/s,
            latency p99 and CPU-us per request
  TTFB      a Go client, sequential new connections for 1K: p50/p99 from
            before connect() to the first response byte
and for qsplice, under bulk load: system calls (raw_syscalls tracepoint) and
heap allocations (uprobe on runtime.mallocgc) per frame, counted with perf;
and for nginx, HAProxy and qsplice, where the CPU of the 1K close load goes:
perf samples the processes during one more such load, and the share of their
CPU spent inside their own system calls in the kernel's receive processing
of the frames they sent (a veth delivers on the sender's CPU; on separate
machines the receivers' CPU does it) is shown, with the CPU per request
less that share.

The table goes to stdout with the issue's targets; the raw figures to
OUT/result.json, the table to OUT/table.txt, and a plot of the three targeted
figures (CPU per GB, CPU per request, first byte: a bar per system, a dot per
round, the target as a dashed line) to OUT/bench-proxy.png and .svg. Progress
lines go to stderr. Other work on the machine makes the figures noisy: read ratios, and
on a shared machine run -rounds 3 (every load three times, the systems taking
turns; the table shows medians and how many rounds met each target).

flags:
`

func main() {
	d := benchproxy.DefaultOptions()
	duration := flag.Duration("duration", d.Duration, "length of each wrk load (bulk, 1K close) per system")
	size := flag.String("size", content.FormatSize(d.BulkSize), "object size of the bulk load (1K, 10M, ...)")
	conns := flag.Int("conns", d.BulkConns, "keep-alive connections of the bulk load")
	smallConns := flag.Int("small-conns", d.SmallConns, "concurrent connections of the 1K one-request-per-connection load")
	ttfb := flag.Int("ttfb-requests", d.TTFBRequests, "sequential requests timed for the time to first byte, per system")
	rounds := flag.Int("rounds", d.Rounds, "times every load runs for every system, in turns; the table shows each figure's median (3 or 5 on a busy machine)")
	window := flag.Duration("frame-window", d.FrameWindow, "how long qsplice's syscalls and allocations are counted under bulk load")
	only := flag.String("only", strings.Join(d.Only, ","), "systems to measure: "+strings.Join(benchproxy.Systems, ","))
	out := flag.String("out", "out/bench-proxy", "directory for result.json, table.txt and bench-proxy.png/.svg")
	offloads := flag.String("offloads", "lab", "link offloads (tx csum, TSO, GSO, GRO) of the lab and the chain: lab (the lab's default), on, off")
	workers := flag.Int("workers", 0, "-workers of both qsplice daemons (0: their default, one per CPU)")
	feArgs := flag.String("frontend-args", "", "extra flags of qsplice-frontend, space-separated (an A/B of one setting: -frontend-args '-rx-hold -1ms')")
	beArgs := flag.String("backend-args", "", "extra flags of qsplice-backend, space-separated (-backend-args '-tap-io uring')")
	upstream := flag.String("nginx-upstream", "pooled", "how nginx-as-proxy reaches the back-end: pooled (kept-alive connections, the default) or fresh (a new connection per request, as the front-end opens one per client connection: the difference is what an upstream connection per request costs a proxy)")
	bin := flag.String("bin", "", "directory of qsplice-frontend and qsplice-backend (default: this program's directory)")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usage)
		flag.PrintDefaults()
	}
	showVersion := version.Flag(flag.CommandLine)
	flag.Parse()
	if showVersion.Print(os.Stdout, "qsplice-bench-proxy") {
		return
	}
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments %q", flag.Args()))
	}
	switch {
	case *duration <= 0:
		fail(fmt.Errorf("-duration %v: must be > 0", *duration))
	case *conns < 1 || *smallConns < 1:
		fail(fmt.Errorf("-conns %d, -small-conns %d: each must be >= 1", *conns, *smallConns))
	case *ttfb < 1:
		fail(fmt.Errorf("-ttfb-requests %d: must be >= 1", *ttfb))
	case *rounds < 1:
		fail(fmt.Errorf("-rounds %d: must be >= 1", *rounds))
	case *window <= 0:
		fail(fmt.Errorf("-frame-window %v: must be > 0", *window))
	}
	o := benchproxy.Options{
		Duration: *duration, Rounds: *rounds, BulkConns: *conns, SmallConns: *smallConns, TTFBRequests: *ttfb,
		FrameWindow: *window, BinDir: *bin, Progress: os.Stderr, Workers: *workers,
		FrontendArgs: strings.Fields(*feArgs), BackendArgs: strings.Fields(*beArgs),
	}
	if *workers < 0 {
		fail(fmt.Errorf("-workers: %d, want 0 (the daemons' default) or more", *workers))
	}
	var err error
	if o.BulkSize, err = content.ParseSize(*size); err != nil {
		fail(fmt.Errorf("-size: %w", err))
	}
	if o.Only, err = benchproxy.ParseSystems(*only); err != nil {
		fail(fmt.Errorf("-only: %w", err))
	}
	switch *upstream {
	case "pooled":
	case "fresh":
		o.FreshUpstream = true
	default:
		fail(fmt.Errorf("-nginx-upstream: %q, want pooled or fresh", *upstream))
	}
	switch *offloads {
	case "lab":
	case "on", "off":
		on := *offloads == "on"
		o.Offloads = &on
	default:
		fail(fmt.Errorf("-offloads: %q, want lab, on or off", *offloads))
	}
	if os.Geteuid() != 0 {
		fail(fmt.Errorf("needs root (network namespaces, AF_PACKET, TAP, perf)"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := benchproxy.Run(ctx, o)
	if res != nil {
		fmt.Print("\n" + res.Table())
		if werr := res.WriteFiles(*out); werr != nil {
			fail(werr)
		}
		fmt.Fprintf(os.Stderr, "raw figures in %s/result.json, the plot in %s\n", *out, filepath.Join(*out, benchproxy.PlotFile))
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "qsplice-bench-proxy:", err)
	os.Exit(1)
}
