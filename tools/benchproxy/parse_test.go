package benchproxy

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses: fields count from the
	// last ')'.
	line := "4242 (nginx: worker (x) ) S 4200 4200 4200 0 -1 4194624 1000 0 0 0 1234 567 0 0 20 0 1 0 100 1000 100 18446744073709551615\n"
	s, err := ParseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := ProcStat{PID: 4242, Comm: "nginx: worker (x) ", State: 'S', PGRP: 4200, UTime: 1234, STime: 567}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	if got, want := s.CPU(), 18010*time.Millisecond; got != want {
		t.Errorf("CPU() = %v, want %v", got, want)
	}
	for _, bad := range []string{
		"", "4242 nginx S 1 2", "x (a) S 1 2 3 4 5 6 7 8 9 10 11 12",
		"1 (a) S 1 2 3 4 5 6 7 8 9 10 11", // utime but no stime
		"1 (a) S 1 x 3 4 5 6 7 8 9 10 11 12", "1 (a) S 1 2 3 4 5 6 7 8 9 10 -1 12",
		"1 (a) SS 1 2 3 4 5 6 7 8 9 10 11 12",
	} {
		if _, err := ParseProcStat([]byte(bad)); err == nil {
			t.Errorf("ParseProcStat(%q) accepted", bad)
		}
	}
}

// TestOwnProcessCPU reads this test's own stat: spinning shows up in its
// CPU time (however busy the machine is: the loop runs until it does),
// and its process group holds it.
func TestOwnProcessCPU(t *testing.T) {
	before, err := cpuOf([]int{os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		for spin := time.Now(); time.Since(spin) < 10*time.Millisecond; {
		}
		now, err := cpuOf([]int{os.Getpid()})
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 50*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s of spinning counted %v of CPU", now-before)
		}
	}
	self, err := readProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	group, err := groupPids(self.PGRP)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range group {
		found = found || p == os.Getpid()
	}
	if !found {
		t.Errorf("group %d = %v, without this process %d", self.PGRP, group, os.Getpid())
	}
	if _, err := cpuOf([]int{1 << 30}); err == nil {
		t.Error("cpuOf of a pid that does not exist succeeded")
	}
}

// wrkOutput is what wrk prints with wrkScript: its own summary, then the
// script's line.
const wrkOutput = `Running 10s test @ http://198.18.7.2:8081/data/10M
  2 threads and 8 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    88.83ms   21.03ms 219.56ms   73.12%
    Req/Sec    45.12     10.01    70.00     68.00%
  901 requests in 10.01s, 8.81GB read
Requests/sec:     90.01
Transfer/sec:      0.88GB
qsplice-bench-wrk requests=901 bytes=9447961201 duration_us=10010123 connect=0 read=2 write=0 status=1 timeout=3 p50_us=86012 p99_us=201377
`

func TestParseWrk(t *testing.T) {
	w, err := ParseWrk(wrkOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := WrkSummary{Requests: 901, Bytes: 9447961201, Duration: 10010123 * time.Microsecond,
		ErrRead: 2, ErrStatus: 1, ErrTimeout: 3, LatencyP50: 86012 * time.Microsecond, LatencyP99: 201377 * time.Microsecond}
	if w != want {
		t.Fatalf("got %+v, want %+v", w, want)
	}
	if w.Errors() != 6 {
		t.Errorf("Errors() = %d, want 6", w.Errors())
	}
	line := "qsplice-bench-wrk requests=1 bytes=2 duration_us=3 connect=0 read=0 write=0 status=0 timeout=0 p50_us=1 p99_us=2"
	for name, bad := range map[string]string{
		"no line":        "Running 10s test\n",
		"missing field":  strings.Replace(line, " timeout=0", "", 1),
		"no percentile":  strings.Replace(line, " p99_us=2", "", 1),
		"unknown field":  line + " extra=1",
		"negative":       strings.Replace(line, "bytes=2", "bytes=-2", 1),
		"not a number":   strings.Replace(line, "bytes=2", "bytes=2.5e9", 1),
		"zero duration":  strings.Replace(line, "duration_us=3", "duration_us=0", 1),
		"no equals sign": strings.Replace(line, "read=0", "read", 1),
	} {
		if _, err := ParseWrk(bad); err == nil {
			t.Errorf("%s: ParseWrk(%q) accepted", name, bad)
		}
	}
}

func TestWrkArgs(t *testing.T) {
	keep := wrkRun{ns: "n", url: "http://a/data/10M", conns: 8, duration: 10 * time.Second, script: "/s.lua"}.args()
	if got, want := strings.Join(keep, " "), "wrk -t 2 -c 8 -d 10s --timeout 30s -s /s.lua http://a/data/10M"; got != want {
		t.Errorf("bulk: %q, want %q", got, want)
	}
	closing := wrkRun{url: "u", conns: 1, duration: 300 * time.Millisecond, close: true, script: "s"}.args()
	if got, want := strings.Join(closing, " "), "wrk -t 1 -c 1 -d 1s --timeout 30s -s s -H Connection: close u"; got != want {
		t.Errorf("close: %q, want %q", got, want)
	}
}

func TestParsePerfStat(t *testing.T) {
	out := `# started on Tue Dec  1 14:16:00 2026

4183225,,raw_syscalls:sys_enter,2234227,100.00,,
98,,qsbp1a2b3c:frontend_malloc,2234227,100.00,,
<not counted>,,qsbp1a2b3c:shim_malloc,0,100.00,,
`
	got, err := ParsePerfStat(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"raw_syscalls:sys_enter": 4183225, "qsbp1a2b3c:frontend_malloc": 98, "qsbp1a2b3c:shim_malloc": 0}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if n, ok := got[k]; !ok || n != v {
			t.Errorf("%s = %d (present %v), want %d", k, n, ok, v)
		}
	}
	for _, bad := range []string{"", "# only a comment\n", "<not supported>,,raw_syscalls:sys_enter,0,100.00,,",
		"12,,", "x,,raw_syscalls:sys_enter,1,100,,", "-1,,e,1,100,,"} {
		if _, err := ParsePerfStat(bad); err == nil {
			t.Errorf("ParsePerfStat(%q) accepted", bad)
		}
	}
}

const ethtoolShow = `Features for eth0:
rx-checksumming: on
tx-checksumming: off
	tx-checksum-ipv4: off [fixed]
	tx-checksum-ip-generic: off
scatter-gather: on
tcp-segmentation-offload: off
	tx-tcp-segmentation: off
generic-segmentation-offload: on
generic-receive-offload: off [fixed]
large-receive-offload: off [fixed]
`

func TestParseOffloads(t *testing.T) {
	got, err := ParseOffloads(ethtoolShow)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Offloads{GSO: true}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if s := got.String(); s != "tx off, tso off, gso on, gro off" {
		t.Errorf("String() = %q", s)
	}
	if args := strings.Join((Offloads{TX: true, TSO: true, GSO: true, GRO: true}).ethtoolArgs(), " "); args != "tx on tso on gso on gro on" {
		t.Errorf("ethtool args %q", args)
	}
	if _, err := ParseOffloads(strings.Replace(ethtoolShow, "generic-segmentation-offload: on\n", "", 1)); err == nil {
		t.Error("accepted ethtool output without gso")
	}
	if _, err := ParseOffloads(strings.Replace(ethtoolShow, "tcp-segmentation-offload: off", "tcp-segmentation-offload: maybe", 1)); err == nil {
		t.Error("accepted a feature that is neither on nor off")
	}
}

func TestParseSystems(t *testing.T) {
	got, err := ParseSystems(" qsplice, NGINX,qsplice,,direct")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "qsplice,nginx,direct" {
		t.Errorf("got %v", got)
	}
	for _, bad := range []string{"", ",", "nginx,squid"} {
		if _, err := ParseSystems(bad); err == nil {
			t.Errorf("ParseSystems(%q) accepted", bad)
		}
	}
}

func TestScaleFrames(t *testing.T) {
	if got := scaleFrames(1000, 2*time.Second, 1500*time.Millisecond); got != 750 {
		t.Errorf("scaled to %d, want 750", got)
	}
	if got := scaleFrames(1000, time.Second, 2*time.Second); got != 1000 {
		t.Errorf("a window longer than the span scaled to %d, want 1000", got)
	}
}
