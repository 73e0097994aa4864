package benchproxy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Where a short request's CPU goes. On this machine every link is a veth,
// and a veth delivers a frame on the sender's CPU: the receiving kernel's
// whole receive path (IP, TCP, the socket's wake-up of its reader, a
// bridge, a TAP, a packet socket) runs inside the sender's system call, as
// a softirq at its local_bh_enable, and /proc/PID/stat bills it to the
// sender. A front-end that opens a back-end connection per client
// connection is billed that way for the back-end kernel's accept of C2's
// SYN; nginx-as-proxy, whose upstream connections are kept alive, is not.
// On separate machines that work is the receivers'. So after the rounds,
// the 1K close load runs once more for each proxy and for qsplice while
// perf samples their processes' kernel stacks, and a sample counts as
// delivering when it is in net_rx_action inside one of the process's own
// system calls (do_syscall_64 below it). The table shows that share and
// the CPU per request without it: the comparison of the processes' own
// work. Sampling perturbs the load, so this window is not the one the
// CPU figures come from.

// deliveryMarker and syscallMarker are the kernel functions a delivering
// sample's stack holds: the receive softirq, run from a system call.
const (
	deliveryMarker = "net_rx_action"
	syscallMarker  = "do_syscall_64"
)

// deliveryRate is perf's sampling frequency, per CPU-second of the
// sampled processes: a prime, so as not to beat with the loops' own
// periods.
const deliveryRate = 997

// Delivery is one process role's share of CPU samples spent delivering
// what it sent, under the 1K close load.
type Delivery struct {
	Role       string  `json:"role"`
	Seconds    float64 `json:"window_seconds"`
	Samples    int     `json:"samples"`
	Delivering int     `json:"delivering_samples"`
	Share      float64 `json:"share"`
	// Error says why the role was not sampled (perf missing, ...).
	Error string `json:"error,omitempty"`
}

// StackCounts are one process's samples and those of them delivering.
type StackCounts struct{ Samples, Delivering int }

// ParsePerfStacks reads the output of perf script -F pid,ip,sym with
// call graphs: per sample a line holding the pid, then one line per frame
// (a tab, the address, the symbol), then a blank line. It counts each
// pid's samples, and those whose stack holds both deliveryMarker and
// syscallMarker.
func ParsePerfStacks(out string) (map[int]StackCounts, error) {
	counts := map[int]StackCounts{}
	pid, inSample := 0, false
	rx, sys := false, false
	end := func() {
		if !inSample {
			return
		}
		c := counts[pid]
		c.Samples++
		if rx && sys {
			c.Delivering++
		}
		counts[pid] = c
		inSample, rx, sys = false, false, false
	}
	for n, line := range strings.Split(out, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			end()
		case line[0] == '\t':
			if !inSample {
				return nil, fmt.Errorf("perf script line %d: a frame before any sample: %q", n+1, line)
			}
			f := strings.Fields(line)
			if len(f) < 2 {
				continue // an address without a symbol
			}
			switch f[1] {
			case deliveryMarker:
				rx = true
			case syscallMarker:
				sys = true
			}
		default:
			end()
			p, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil || p < 0 {
				return nil, fmt.Errorf("perf script line %d: not a pid: %q", n+1, line)
			}
			pid, inSample = p, true
		}
	}
	end()
	if len(counts) == 0 {
		return nil, fmt.Errorf("perf script gave no samples")
	}
	return counts, nil
}

// sampleDelivery runs the 1K close load against t for window and two
// seconds more, samples t's processes with perf for window from one
// second in, and returns a Delivery per role.
func (r *run) sampleDelivery(ctx context.Context, t target, window time.Duration) []*Delivery {
	var roles []string
	pids := map[string][]int{} // by role
	var all []int
	var out []*Delivery
	fail := func(err error) []*Delivery {
		for _, role := range roles {
			out = append(out, &Delivery{Role: role, Error: err.Error()})
		}
		return out
	}
	for _, role := range []string{RoleProxy, RoleFrontend, RoleShim} {
		if f, ok := t.cpu[role]; ok {
			roles = append(roles, role)
			p, err := f()
			if err != nil {
				return fail(err)
			}
			pids[role] = p
			all = append(all, p...)
		}
	}
	if len(roles) == 0 {
		return nil
	}
	if _, err := exec.LookPath("perf"); err != nil {
		return fail(errNoPerf)
	}
	wait, err := wrkRun{ns: t.ns, url: t.url(SmallSize), conns: r.o.SmallConns, duration: window + 2*time.Second,
		close: true, script: r.script}.start(ctx)
	if err != nil {
		return fail(err)
	}
	// Let the load reach its pace before the window.
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	counts, serr := r.perfStacks(ctx, t.name, all, window)
	if _, err := wait(); err != nil && serr == nil {
		serr = err
	}
	if serr != nil {
		return fail(serr)
	}
	for _, role := range roles {
		d := &Delivery{Role: role, Seconds: window.Seconds()}
		for _, p := range pids[role] {
			c := counts[p]
			d.Samples += c.Samples
			d.Delivering += c.Delivering
		}
		if d.Samples == 0 {
			d.Error = "no samples: the processes did not run"
		} else {
			d.Share = float64(d.Delivering) / float64(d.Samples)
		}
		out = append(out, d)
	}
	return out
}

// perfStacks samples the processes' stacks for window and counts them.
func (r *run) perfStacks(ctx context.Context, tag string, pids []int, window time.Duration) (map[int]StackCounts, error) {
	list := make([]string, len(pids))
	for i, p := range pids {
		list[i] = strconv.Itoa(p)
	}
	data := filepath.Join(r.dir, "perf-delivery-"+tag+".data")
	rec := exec.CommandContext(ctx, "perf", "record", "-q", "-e", "cpu-clock", "-F", strconv.Itoa(deliveryRate),
		"--call-graph", "fp", "-p", strings.Join(list, ","), "-o", data,
		"--", "sleep", strconv.FormatFloat(window.Seconds(), 'f', 3, 64))
	if out, err := rec.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("perf record -p %s: %v: %s", strings.Join(list, ","), err, strings.TrimSpace(string(out)))
	}
	defer os.Remove(data)
	script := exec.CommandContext(ctx, "perf", "script", "-i", data, "-F", "pid,ip,sym")
	var stderr strings.Builder
	script.Stderr = &stderr
	out, err := script.Output()
	if err != nil {
		return nil, fmt.Errorf("perf script: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return ParsePerfStacks(string(out))
}
