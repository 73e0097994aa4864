package benchproxy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat. The kernel
// reports them in USER_HZ, which is 100 on every Linux architecture
// regardless of the kernel's own tick rate (sysconf(_SC_CLK_TCK)).
const userHZ = 100

// ProcStat is the part of /proc/PID/stat the benchmark reads. For a
// process (thread-group leader), the CPU times cover all its threads,
// live and exited.
type ProcStat struct {
	PID   int
	Comm  string
	State byte
	PGRP  int    // process group
	UTime uint64 // user CPU, in clock ticks (1/userHZ s)
	STime uint64 // system CPU, in clock ticks
}

// CPU is the process's user plus system time.
func (s ProcStat) CPU() time.Duration {
	return time.Duration(s.UTime+s.STime) * (time.Second / userHZ)
}

// ParseProcStat parses the contents of /proc/PID/stat. The command name
// is in parentheses and may itself hold spaces and parentheses, so the
// fields are counted from the last ')'.
func ParseProcStat(data []byte) (ProcStat, error) {
	var s ProcStat
	open := bytes.IndexByte(data, '(')
	closing := bytes.LastIndexByte(data, ')')
	// The comm is followed by " S " (the one-letter state) in the
	// kernel's format; anything else is not a stat line.
	rest := data[closing+1:]
	if open < 1 || closing < open || len(rest) < 4 || rest[0] != ' ' || rest[2] != ' ' || !isStateLetter(rest[1]) {
		return s, fmt.Errorf("proc stat: no \"(comm) S \" in %q", truncate(data))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data[:open])))
	if err != nil {
		return s, fmt.Errorf("proc stat: pid: %w", err)
	}
	s.PID, s.Comm, s.State = pid, string(data[open+1:closing]), rest[1]
	// After the state: ppid(4) pgrp(5) session(6) tty_nr(7) tpgid(8)
	// flags(9) minflt(10) cminflt(11) majflt(12) cmajflt(13) utime(14)
	// stime(15); index 0 here is field 4.
	f := strings.Fields(string(rest[3:]))
	if len(f) < 12 {
		return s, fmt.Errorf("proc stat: %d fields after the state, want at least 12", len(f))
	}
	if s.PGRP, err = strconv.Atoi(f[1]); err != nil {
		return s, fmt.Errorf("proc stat: pgrp: %w", err)
	}
	if s.UTime, err = strconv.ParseUint(f[10], 10, 64); err != nil {
		return s, fmt.Errorf("proc stat: utime: %w", err)
	}
	if s.STime, err = strconv.ParseUint(f[11], 10, 64); err != nil {
		return s, fmt.Errorf("proc stat: stime: %w", err)
	}
	return s, nil
}

func truncate(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

// readProcStat reads one process's stat.
func readProcStat(pid int) (ProcStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcStat{}, err
	}
	return ParseProcStat(data)
}

// cpuOf sums the CPU time of the given processes. A process that has
// gone is an error: its time would silently drop out of a difference.
func cpuOf(pids []int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		s, err := readProcStat(pid)
		if err != nil {
			return 0, fmt.Errorf("cpu of pid %d: %w", pid, err)
		}
		total += s.CPU()
	}
	return total, nil
}

// groupPids returns the live processes of a process group: a proxy's
// master and the workers it forked.
func groupPids(pgid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		s, err := ParseProcStat(data)
		if err == nil && s.PGRP == pgid && s.State != 'Z' {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("no live process in group %d", pgid)
	}
	return pids, nil
}

// isStateLetter reports whether c can be a process state: the kernel
// writes one ASCII letter (R, S, D, Z, T, t, X, I, ...).
func isStateLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
