package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/qsplice/qsplice/tools/netns"
)

// ProcessState is one row of the process table in a status report.
type ProcessState struct {
	Name   string
	Host   string
	PID    int
	Alive  bool
	Detail string // why it is not alive
}

// PID is the pid of the lab's running process name ("frontend",
// "backend-b1", ...), or why there is none.
func (l *Lab) PID(name string) (int, error) {
	for _, p := range l.Processes() {
		if p.Name == name {
			if !p.Alive {
				return 0, fmt.Errorf("lab process %s is not running: %s", name, p.Detail)
			}
			return p.PID, nil
		}
	}
	return 0, fmt.Errorf("lab has no process %s", name)
}

// Processes reports every process of the lab's configuration.
func (l *Lab) Processes() []ProcessState {
	var rows []ProcessState
	for _, p := range l.processes() {
		s := l.status(p)
		rows = append(rows, ProcessState{Name: p.name, Host: p.host, PID: s.pid, Alive: s.alive, Detail: s.detail})
	}
	return rows
}

// WriteStatus prints the lab's namespaces, their links and addresses, its
// processes, and the front-end's /status document if it answers.
func (l *Lab) WriteStatus(ctx context.Context, w io.Writer) error {
	c := l.cfg
	fmt.Fprintf(w, "lab %s: %d client(s), %d back-end(s), state in %s, logs in %s\n",
		c.Name, c.Clients, c.Backends, c.StateDir, l.statePath(logDir))
	if ok, missing := l.topologyComplete(); !ok {
		fmt.Fprintf(w, "INCOMPLETE: missing %s\n", missing)
	}

	if imp := l.Impairments(); len(imp) > 0 {
		fmt.Fprintln(w, "\nimpairments (both directions, qsplice-lab impair):")
		for _, h := range l.Hosts() {
			if spec, ok := imp[h]; ok {
				fmt.Fprintf(w, "  %s: %s\n", h, spec)
			}
		}
	}

	fmt.Fprintln(w, "\nnamespaces and links:")
	present, err := netns.List(nsPrefix(c.Name))
	if err != nil {
		return err
	}
	for _, ns := range present {
		fmt.Fprintf(w, "  %s\n", ns)
		out, err := exec.Command("ip", "-n", ns, "-br", "addr", "show").CombinedOutput()
		if err != nil {
			fmt.Fprintf(w, "    (ip: %v: %s)\n", err, strings.TrimSpace(string(out)))
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if !strings.HasPrefix(line, "lo ") {
				fmt.Fprintf(w, "    %s\n", strings.Join(strings.Fields(line), "  "))
			}
		}
	}
	if len(present) == 0 {
		fmt.Fprintln(w, "  (none)")
	}

	fmt.Fprintln(w, "\nprocesses:")
	rows := l.Processes()
	for _, r := range rows {
		state := "alive"
		if !r.Alive {
			state = "DEAD: " + r.Detail
		}
		fmt.Fprintf(w, "  %-16s %-4s pid %-7d %s\n", r.Name, r.Host, r.PID, state)
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "  (none configured)")
	}
	l.writeVMStatus(w)

	if !c.Daemons {
		return nil
	}
	fmt.Fprintf(w, "\nfront-end %s/status:\n", AdminURL)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := l.FetchFrontendStatus(ctx)
	if err != nil {
		fmt.Fprintf(w, "  unreachable: %v\n", err)
		return nil
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, st.Raw, "  ", "  ") != nil {
		pretty.Reset()
		pretty.Write(st.Raw)
	}
	fmt.Fprintf(w, "  %s\n", pretty.String())
	return nil
}
