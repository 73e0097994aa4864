// Package procstat reads what Linux's /proc says about a thread, for the
// tests that check a parked loop's thread really sleeps (the shim's
// gathering, link.UringTAP.Disarm). Not on any packet path.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// WakeUps is how often thread tid of process pid (pid 0: this process)
// has gone to sleep and been woken: its voluntary context switches.
func WakeUps(pid, tid int) (int, error) {
	path := fmt.Sprintf("/proc/%d/task/%d/status", pid, tid)
	if pid == 0 {
		path = fmt.Sprintf("/proc/self/task/%d/status", tid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return 0, fmt.Errorf("%s: %w", path, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s: no voluntary_ctxt_switches", path)
}
