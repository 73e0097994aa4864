package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/frontend/conf"
	"github.com/qsplice/qsplice/internal/gather"
	"github.com/qsplice/qsplice/splice/link"
)

// configFlags are the flags -config replaces; setting one alongside it is
// refused rather than silently ignored.
var configFlags = map[string]bool{
	"link": true, "link-type": true, "vip": true, "handoff": true, "ports": true, "control": true,
	"key": true, "mac": true, "admin": true, "capture": true, "queue": true, "keepalive": true,
	"linger": true, "idle-timeout": true, "head-timeout": true, "cookie-seed": true, "handoff-ahead": true,
}

// tuning holds the flags that are not configuration but combine with
// -config: a debugging switch (-pprof), tuning (-rx-ring, -workers, -gather, -rx-hold,
// -ring-wait, -early-request, -splice-at-syn, -control-socket-only) and
// the handoff timelines
// (-timeline).
type tuning struct {
	pprof   bool
	rxRing  *link.RingConfig
	workers int
	gather  gather.Config
	rxHold  time.Duration
	// ringWait: which waits send the pass's frames in io_uring.
	ringWait string
	// earlyRequest: a safe request goes with its Splice; spliceAtSYN:
	// the Splice goes with C2's SYN.
	earlyRequest, spliceAtSYN bool
	// poolC2: handoff connections kept alive between client connections.
	poolC2         bool
	poolPerBackend int
	poolIdle       time.Duration
	poolAckDelay   time.Duration
	// synAnswer: SYNs are answered in the kernel.
	synAnswer bool
	// fastOpen: C2's SYN asks for a Fast Open cookie when the Splice
	// carries the request.
	fastOpen bool
	// fastOpenInSYN: and carries the cookie and the request itself.
	fastOpenInSYN bool
	// controlSocketOnly: no Splice goes as a frame on the link.
	controlSocketOnly bool
	// timeline is an output, like a profile: it combines with -config.
	timeline string
}

func runFromFile(path string, tune tuning, log *slog.Logger, fail func(string, ...any)) {
	flag.Visit(func(f *flag.Flag) {
		if configFlags[f.Name] {
			fail("-%s cannot be combined with -config: set it in %s", f.Name, path)
		}
	})
	f, err := conf.Load(path)
	if err != nil {
		fail("%v", err)
	}
	for _, w := range f.Check() {
		log.Warn("configuration warning", "warning", w.String())
	}
	cfg, err := frontend.FromFile(f)
	if err != nil {
		fail("%v", err)
	}
	cfg.Pprof = tune.pprof
	cfg.RxRing = tune.rxRing
	cfg.Workers = tune.workers
	cfg.Gather = tune.gather
	cfg.RxHold = tune.rxHold
	cfg.RingWait = tune.ringWait
	cfg.EarlyRequest = tune.earlyRequest
	cfg.SpliceAtSYN = tune.spliceAtSYN
	cfg.PoolC2, cfg.PoolPerBackend, cfg.PoolIdle, cfg.PoolAckDelay = tune.poolC2, tune.poolPerBackend, tune.poolIdle, tune.poolAckDelay
	cfg.SYNAnswer = tune.synAnswer
	cfg.FastOpen = tune.fastOpen
	cfg.FastOpenInSYN = tune.fastOpenInSYN
	cfg.ControlSocketOnly = tune.controlSocketOnly
	cfg.Timeline = tune.timeline
	serve(cfg, log, fail)
}

// validate checks configuration files as -config would at start: the
// file (errors with file, line and key), its key file (proto.LoadKey:
// present, mode 0600 or stricter, a strong key in hex) and what the
// daemon, the packet engine and the scheduler refuse (frontend.Check).
// Errors make it exit 1; warnings are printed but pass. It opens no
// socket and needs no privilege beyond reading the files, so a systemd
// unit runs it as ExecStartPre=.
func validate(files []string) int {
	return validateTo(files, os.Stdout, os.Stderr)
}

func validateTo(files []string, stdout, stderr io.Writer) int {
	if len(files) == 0 || strings.HasPrefix(files[0], "-") {
		fmt.Fprintln(stderr, "usage: qsplice-frontend validate FILE...")
		return 2
	}
	status := 0
	for _, path := range files {
		f, err := conf.Load(path)
		if err != nil {
			fmt.Fprintln(stderr, err)
			status = 1
			continue
		}
		ws := f.Check()
		for _, w := range ws {
			fmt.Fprintln(stderr, "warning:", w.String())
		}
		cfg, err := frontend.FromFile(f) // its errors name the file
		if err == nil {
			if err = frontend.Check(cfg); err != nil {
				err = fmt.Errorf("%s: %w", path, err)
			}
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			status = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: ok (%d listeners, %d customers, %d warnings)\n", path, len(f.Listeners), len(f.Customers), len(ws))
	}
	return status
}
