// Package benchproxy measures qsplice against nginx and HAProxy as L7
// reverse proxies, on one machine, in one run, and renders one table of
// ratios next to issue 7's targets. cmd/qsplice-bench-proxy (make
// bench-proxy) is its command line.
//
// Where it sits: beside tools/e2e's benchmarks, outside the data path. It
// builds two networks of namespaces and removes them again, also when it
// fails or is interrupted:
//
//	qsplice lab (tools/lab, 198.18.0.0/24)      proxy chain (198.18.7.0/24)
//	c1 --- bridge --- fe (qsplice-frontend)    c --- p --- b
//	              \-- b1: shim, tap0, nginx          |     nginx :80 (as b1's)
//	                                                 nginx :8081 (proxy_pass,
//	                                                 upstream keepalive)
//	                                                 HAProxy :8082 (mode http)
//	                                                 ip_forward: "direct"
//
// nginx keeps its upstream connections alive; with Options.FreshUpstream
// (-nginx-upstream fresh) it connects anew for every request, as the
// front-end opens a C2 for every client connection, and the difference
// between two runs is what that costs a proxy.
//
// The chain's back-end serves the same files with the same nginx settings
// as the lab's back-end, and its links get the lab's offloads, so the
// five systems (direct, nginx, HAProxy, the shim alone, qsplice through
// the VIP) move the same bytes over the same kind of link. "Direct" is the
// client talking to the back-end's kernel through plain IP forwarding: the
// baseline for throughput and time to first byte. "Shim" is the lab's
// client talking to the lab's back-end at its own address: every frame
// crosses the shim (TAP and AF_PACKET) untranslated, and the front-end
// takes no part. It is the baseline of the shim's rows: what the shim
// costs only to move frames between its two devices, which splicing
// cannot go below.
//
// For every system in turn (each load runs for all systems before the
// next load starts, so a change in the machine's other work spreads over
// all of them):
//
//   - bulk: wrk, large objects over keep-alive connections; MB/s, and CPU
//     seconds per GB of the proxy (all its processes) or of qsplice's
//     front-end and shim, from utime+stime in /proc/PID/stat;
//   - 1K close: wrk with Connection: close, one connection per request;
//     requests/s, latency p99 and CPU microseconds per request;
//   - TTFB: a Go client making sequential new connections; p50 and p99
//     from before connect() to the first response byte; for qsplice the
//     notes say how many responses' first reply the back-end's kernel
//     echoed (the shim's /status counters around the measurement: the
//     rest waited for the shim to wake);
//   - frame costs (qsplice): during a separate bulk run, perf counts the
//     front-end's and the shim's system calls (raw_syscalls:sys_enter) and
//     heap allocations (a uprobe on runtime.mallocgc), divided by the
//     frames each moved, from their /status link counters;
//   - where the CPU goes (nginx, HAProxy, qsplice): after the rounds, the
//     1K close load once more while perf samples the processes' stacks;
//     the share of samples in the kernel's receive processing inside the
//     process's own system calls is what a veth makes the sender pay for
//     delivering its frames (delivery.go), and the table shows the CPU
//     per request without it too: the processes' own work.
//
// With Options.Rounds above 1 (-rounds; make bench-proxy runs 3) the
// three loads run that many times in turn, and the table takes every
// figure's median over the rounds, the ratios and verdicts of the
// medians, and counts the rounds that met each target on their own
// figures: one round on a shared machine can land in another program's
// burst. The frame costs and where the CPU goes are measured once.
//
// The Result holds the raw figures (result.json); Rows and Table derive
// the ratios and verdicts, WritePlot draws the targeted figures with
// every round's (bench-proxy.png and .svg). The parsers of what the tools print (wrk's
// summary line, /proc/PID/stat, perf stat -x, ethtool -k) are pure,
// tested and fuzzed; the root test runs the whole benchmark with
// one-second loads.
package benchproxy
