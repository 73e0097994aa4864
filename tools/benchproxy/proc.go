package benchproxy

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/tools/netns"
	"golang.org/x/sys/unix"
)

// proc is a process of the chain, in its own process group so that
// stopping it stops its workers too.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, once done is closed
	log  string
}

func startProc(dir, name, ns string, argv ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy
	cmd := netns.Command(ns, argv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// deadErr says that the process exited, with the end of its log.
func (p *proc) deadErr() error {
	data, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return fmt.Errorf("%s exited (%v); end of %s:\n%s", p.name, p.err, p.log, strings.Join(lines, "\n"))
}

// waitListening dials addr from the client namespace until it answers,
// the process exits, or 15 s pass.
func (p *proc) waitListening(ctx context.Context, clientNS, addr string) error {
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.exited() {
			return p.deadErr()
		}
		var conn net.Conn
		err := netns.Do(clientNS, func() error {
			dctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			var d net.Dialer
			var err error
			conn, err = d.DialContext(dctx, "tcp4", addr)
			return err
		})
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not accept on %s: %v", p.name, addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// stop ends the process group: SIGTERM, SIGKILL after 3 s.
func (p *proc) stop() error {
	pgid := p.cmd.Process.Pid
	if !p.exited() {
		_ = unix.Kill(-pgid, unix.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(3 * time.Second):
			_ = unix.Kill(-pgid, unix.SIGKILL)
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
				return fmt.Errorf("%s (pid %d) survives SIGKILL", p.name, pgid)
			}
		}
	}
	_ = unix.Kill(-pgid, unix.SIGKILL) // workers that outlived the master
	return nil
}
