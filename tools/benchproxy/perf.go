package benchproxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Syscalls and allocations are counted from outside the daemons with
// perf(1): the raw_syscalls:sys_enter tracepoint counts every system call
// a process makes, and a uprobe on runtime.mallocgc, the Go runtime's one
// entry for heap allocations, counts every allocation. Both count only
// the given process (all its threads that exist when perf attaches) and
// cost nothing when they do not fire; a uprobe hit costs a trap, so the
// window in which they run is not the one the CPU figures come from.
const (
	syscallEvent = "raw_syscalls:sys_enter"
	mallocSymbol = "runtime.mallocgc"
)

// errNoPerf is why nothing perf measures was measured.
var errNoPerf = errors.New("perf is not installed (Debian package linux-perf)")

// ParsePerfStat reads the output of perf stat -x, and returns the count of
// every event by name. "<not counted>" (the task never ran while the
// counter was on) counts as 0; "<not supported>" is an error.
func ParsePerfStat(out string) (map[string]uint64, error) {
	counts := make(map[string]uint64)
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// value,unit,event,run-time,percentage,metric,metric-unit
		f := strings.Split(line, ",")
		if len(f) < 3 || f[2] == "" {
			return nil, fmt.Errorf("perf stat: unexpected line %q", line)
		}
		switch v := f[0]; v {
		case "<not counted>":
			counts[f[2]] += 0
		case "<not supported>":
			return nil, fmt.Errorf("perf stat: event %s not supported", f[2])
		default:
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("perf stat: %s: count %q: %w", f[2], v, err)
			}
			counts[f[2]] += n
		}
	}
	if len(counts) == 0 {
		return nil, fmt.Errorf("perf stat wrote no counts: %q", out)
	}
	return counts, nil
}

// perfProbes owns the uprobe events this run defined, under one group
// name unique to the run, so that removing them cannot touch anyone
// else's (the events' own names must be unique too: see newFrameCounter).
type perfProbes struct {
	group  string
	events []string
}

// addMalloc defines a uprobe on runtime.mallocgc in binary and returns
// its event name (group:name).
func (p *perfProbes) addMalloc(name, binary string) (string, error) {
	event := p.group + ":" + name
	out, err := exec.Command("perf", "probe", "-q", "-x", binary, "-a", event+"="+mallocSymbol).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("perf probe -x %s %s: %v: %s", binary, mallocSymbol, err, strings.TrimSpace(string(out)))
	}
	p.events = append(p.events, event)
	return event, nil
}

// remove deletes every event of the group; nothing to do if none was
// defined.
func (p *perfProbes) remove() error {
	if len(p.events) == 0 {
		return nil
	}
	out, err := exec.Command("perf", "probe", "-q", "-d", p.group+":*").CombinedOutput()
	if err != nil {
		return fmt.Errorf("perf probe -d %s:*: %v: %s", p.group, err, strings.TrimSpace(string(out)))
	}
	p.events = nil
	return nil
}

// perfCount counts events in process pid for about window, and returns
// the counts and when counting began and ended (as seen from here).
func perfCount(ctx context.Context, dir, tag string, pid int, events []string, window time.Duration) (counts map[string]uint64, began, ended time.Time, err error) {
	outFile := filepath.Join(dir, fmt.Sprintf("perf-%s-%d.csv", tag, pid))
	args := []string{"stat", "-x,", "-o", outFile}
	for _, e := range events {
		args = append(args, "-e", e)
	}
	args = append(args, "-p", strconv.Itoa(pid), "--", "sleep", strconv.FormatFloat(window.Seconds(), 'f', 3, 64))
	cmd := exec.CommandContext(ctx, "perf", args...)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		return nil, began, ended, fmt.Errorf("perf stat: %w", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	// perf opens and enables the counters, then lets its child exec the
	// workload: a child named sleep means the window has begun.
	if err := waitChild(cmd.Process.Pid, "sleep", exited, 10*time.Second); err != nil {
		cmd.Process.Kill()
		<-exited
		return nil, began, ended, fmt.Errorf("perf stat: %w (%v): %s", err, waitErr, strings.TrimSpace(stderr.String()))
	}
	began = time.Now()
	<-exited
	ended = time.Now()
	if waitErr != nil {
		return nil, began, ended, fmt.Errorf("perf stat -p %d: %v: %s", pid, waitErr, strings.TrimSpace(stderr.String()))
	}
	data, err := os.ReadFile(outFile)
	if err != nil {
		return nil, began, ended, err
	}
	if counts, err = ParsePerfStat(string(data)); err != nil {
		return nil, began, ended, err
	}
	for _, e := range events {
		if _, ok := counts[e]; !ok {
			return nil, began, ended, fmt.Errorf("perf stat: no count for %s in %q", e, data)
		}
	}
	return counts, began, ended, nil
}

// waitChild polls until process parent has a child whose command name is
// comm, or parent exits, or the timeout passes.
func waitChild(parent int, comm string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", parent, parent))
		for _, c := range strings.Fields(string(children)) {
			name, _ := os.ReadFile("/proc/" + c + "/comm")
			if strings.TrimSpace(string(name)) == comm {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s child after %v", comm, timeout)
		}
		select {
		case <-exited:
			return errors.New("exited before its workload ran")
		case <-tick.C:
		}
	}
}
