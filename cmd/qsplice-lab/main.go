// Command qsplice-lab builds and removes the qsplice test network (network
// namespaces on one bridge, with web servers and the qsplice daemons), and
// runs commands and captures inside it. It is a thin shell over tools/lab;
// run it with -h for the picture.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/qsplice/qsplice/internal/version"
	"github.com/qsplice/qsplice/tools/content"
	"github.com/qsplice/qsplice/tools/lab"
)

const picture = `qsplice-lab builds a test network out of network namespaces (needs root).

              qs-N-sw: bridge br0, one Ethernet segment, 198.18.0.0/24
        +--------------------+---------------------+-------------------+
        c1                   fe                    b1        ...       bK   switch-side veths
        |                    |                     |                   |
   +----eth0 .10---+   +-----eth0 .2------+   +----eth0 (no address, promisc)-----+
   | qs-N-c1       |   | qs-N-fe          |   | qs-N-bK                           |
   | client        |   | qsplice-frontend |   | qsplice-backend shim: eth0<->tap0 |
   | c2 is .11 ... |   | VIP .100 and     |   | tap0 .(20+k)                      |
   +---------------+   | handoff .101 in  |   |   MAC 02:00:c6:12:00:(20+k)       |
                       | userspace; admin |   | nginx :80, qsplice-testserver     |
                       | :7404/status     |   |   :8080 on the back-end kernel    |
                       +------------------+   +-----------------------------------+

Offloads (tx csum, TSO, GSO, GRO) stay on, as on real links (up -offloads=false
turns them off on every lab link); IPv6 is off. The back-ends accept TCP Fast
Open (net.ipv4.tcp_fastopen=3, listeners with TCP_FASTOPEN 256; up
-fast-open=false leaves it off).
State (key, pidfiles, logs, nginx config and files, lab.json) is kept in
-state-dir, so down, status, capture and exec need only -name.

usage:
  qsplice-lab up      [flags]                 build and start (idempotent)
  qsplice-lab down    [-name N] [-state-dir D] stop and remove everything
  qsplice-lab prune   [-older D] [-match RE]
                      remove every lab (named by RE) left with no process in any
                      of its namespaces, made more than D (10m) ago: what a run
                      killed before its teardown leaves behind
  qsplice-lab status  [-name N] [-state-dir D]
  qsplice-lab capture [-name N] [-count N] [-duration D] LINK FILE
                      LINK is a host (c1, fe, b1...): its switch port, both directions
  qsplice-lab exec    [-name N] HOST -- CMD [ARG...]
                      run CMD in HOST's namespace (sw, c1, fe, b1...)
  qsplice-lab impair  [-name N] HOST SPEC|clear
                      impair HOST's path both ways in userspace (netem's work):
                      SPEC is delay=20ms,jitter=5ms,loss=1%,reorder=0.5%,rate=100mbit[,seed=N]
  qsplice-lab -version
`

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "-version" || os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println(version.Line("qsplice-lab"))
		return
	}
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "-help" || os.Args[1] == "--help" || os.Args[1] == "help" {
		fmt.Fprint(os.Stderr, picture)
		fmt.Fprintln(os.Stderr, "\nflags of up (the other verbs take -name and -state-dir; capture also -count, -duration):")
		fs, _ := upFlags()
		fs.SetOutput(os.Stderr)
		fs.PrintDefaults()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	verb, args := os.Args[1], os.Args[2:]
	var err error
	switch verb {
	case "up":
		err = cmdUp(ctx, args)
	case "down":
		err = cmdDown(args)
	case "prune":
		err = cmdPrune(args)
	case "status":
		err = cmdStatus(ctx, args)
	case "capture":
		err = cmdCapture(ctx, args)
	case "exec":
		err = cmdExec(args)
	case "impair":
		err = cmdImpair(args)
	case "relay": // started by impair in the switch namespace
		err = cmdRelay(args)
	default:
		err = fmt.Errorf("unknown verb %q (up, down, prune, status, capture, exec, impair; -h for help)", verb)
	}
	var exit exitCode
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if errors.As(err, &exit) {
		os.Exit(int(exit))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "qsplice-lab:", err)
		os.Exit(1)
	}
}

// exitCode passes a command's exit status through exec.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// labFlags are the flags every verb has.
type labFlags struct{ name, stateDir string }

func (f *labFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.name, "name", "lab", "lab name, [a-z0-9]{1,8}; namespaces are qs-NAME-*")
	fs.StringVar(&f.stateDir, "state-dir", "", "state directory (default /run/qsplice/NAME)")
}

func upFlags() (*flag.FlagSet, func() (lab.Config, error)) {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	var lf labFlags
	lf.register(fs)
	d := lab.DefaultConfig("lab")
	backends := fs.Int("backends", d.Backends, fmt.Sprintf("number of back-end hosts b1..bK (1..%d)", lab.MaxBackends))
	clients := fs.Int("clients", d.Clients, fmt.Sprintf("number of client hosts c1..cN (1..%d)", lab.MaxClients))
	bin := fs.String("bin", d.BinDir, "directory holding qsplice-frontend, qsplice-backend, qsplice-testserver")
	nginx := fs.Bool("nginx", d.Nginx, "run nginx on port 80 of each back-end")
	testServer := fs.Bool("testserver", d.TestServer, "run qsplice-testserver on port 8080 of each back-end")
	daemons := fs.Bool("daemons", d.Daemons, "run qsplice-backend on each back-end and qsplice-frontend")
	offloads := fs.Bool("offloads", d.Offloads, "keep checksum offload, TSO, GSO and GRO on on the lab's links (as in real deployments); off: MTU-sized frames with complete checksums only")
	fastOpen := fs.Bool("fast-open", d.FastOpen, "make the back-ends accept TCP Fast Open (RFC 7413), so the shims can put a handed-off request in the handoff connection's SYN: net.ipv4.tcp_fastopen=3 in each back-end, nginx listening with fastopen=256, qsplice-testserver with -fast-open 256; false: the kernel's default (1, client only) and listeners without it, for comparison")
	feTAP := fs.Bool("frontend-tap", false, "run the front-end as a userspace host on a TAP (vip0) bridged to its wire, as a VM sees it")
	vm := fs.String("vm", "", "hosts that are QEMU guests on a TAP of the lab's bridge: back-ends (b1,b2: the guest runs the test server on :8080 and the shim, no nginx) and fe, the front-end (KVM if usable, else TCG)")
	topologyOnly := fs.Bool("topology-only", false, "build the network only, start no process")
	serviceTime := fs.Duration("service-time", d.ServiceTime, "qsplice-testserver service time per request")
	capacity := fs.Int("capacity", d.Capacity, "concurrent requests each back-end accepts (qsplice-backend -capacity)")
	files := fs.String("files", "0,1K,1M,64M", "sizes of the files nginx serves as /data/SIZE")
	feArgs := fs.String("frontend-args", "", "extra arguments for qsplice-frontend (split at spaces)")
	beArgs := fs.String("backend-args", "", "extra arguments for each qsplice-backend (split at spaces)")
	readyTimeout := fs.Duration("ready-timeout", d.ReadyTimeout, "how long to wait for each process to become ready")
	userConfig := fs.String("config", "", "run the front-end from this YAML file (customers, classes, policies, listeners on the VIP "+lab.VIP+"); the lab replaces its link, handoff, control and admin sections, and checks it as `qsplice-frontend validate` does first")
	return fs, func() (lab.Config, error) {
		// lab.Config takes 0 for its defaults; on the command line a 0
		// is a mistake, refused before anything is built.
		switch {
		case *capacity < 1 || *capacity > 65535:
			return lab.Config{}, fmt.Errorf("-capacity %d: must be 1..65535", *capacity)
		case *clients < 1:
			return lab.Config{}, fmt.Errorf("-clients %d: must be 1..%d", *clients, lab.MaxClients)
		case *readyTimeout <= 0:
			return lab.Config{}, fmt.Errorf("-ready-timeout %v: must be > 0", *readyTimeout)
		case *serviceTime < 0:
			return lab.Config{}, fmt.Errorf("-service-time %v: must not be negative", *serviceTime)
		}
		cfg := lab.DefaultConfig(lf.name)
		cfg.StateDir = lf.stateDir
		if *userConfig != "" {
			if *feTAP {
				return cfg, fmt.Errorf("-config: the lab runs a user's configuration on AF_PACKET only, not with -frontend-tap")
			}
			stateDir := lf.stateDir
			if stateDir == "" {
				stateDir = lab.DefaultStateDir(lf.name)
			}
			text, replaced, err := lab.UserFrontendConfig(*userConfig, stateDir)
			if err != nil {
				return cfg, err
			}
			if len(replaced) > 0 {
				fmt.Fprintf(os.Stderr, "qsplice-lab: %s: the lab sets %s itself\n", *userConfig, strings.Join(replaced, ", "))
			}
			cfg.FrontendConfigText = text
		}
		cfg.Backends, cfg.Clients, cfg.BinDir = *backends, *clients, *bin
		cfg.Nginx, cfg.TestServer, cfg.Daemons = *nginx, *testServer, *daemons
		cfg.FrontendTAP = *feTAP
		vms, vmFE, err := lab.ParseVMHosts(*vm)
		if err != nil {
			return cfg, err
		}
		cfg.VMBackends, cfg.VMFrontend = vms, vmFE
		cfg.Offloads = *offloads
		cfg.FastOpen = *fastOpen
		if *topologyOnly {
			cfg.Nginx, cfg.TestServer, cfg.Daemons = false, false, false
		}
		cfg.ServiceTime, cfg.Capacity, cfg.ReadyTimeout = *serviceTime, *capacity, *readyTimeout
		cfg.FrontendArgs, cfg.BackendArgs = strings.Fields(*feArgs), strings.Fields(*beArgs)
		cfg.Files = nil
		for _, s := range strings.Split(*files, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			n, err := content.ParseSize(s)
			if err != nil {
				return cfg, fmt.Errorf("-files: %w", err)
			}
			cfg.Files = append(cfg.Files, n)
		}
		return cfg, nil
	}
}

func cmdUp(ctx context.Context, args []string) error {
	fs, config := upFlags()
	if _, _, err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := config()
	if err != nil {
		return err
	}
	start := time.Now()
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		return err
	}
	c := l.Config()
	if l.Reused() {
		fmt.Printf("lab %s is already up and its processes are alive; left as it is\n", c.Name)
		return nil
	}
	fmt.Printf("lab %s up in %v: %d client(s), %d back-end(s), VIP %s, state in %s\n",
		c.Name, time.Since(start).Round(time.Millisecond), c.Clients, c.Backends, lab.VIP, c.StateDir)
	stateFlag := ""
	if cfg.StateDir != "" {
		stateFlag = " -state-dir " + c.StateDir
	}
	fmt.Printf("try: qsplice-lab exec -name %s%s c1 -- curl -sI http://%s/\n", c.Name, stateFlag, lab.VIP)
	return nil
}

// cmdPrune removes the labs lab.Abandoned finds (lab.Prune): nothing runs in them
// any more, and they are old enough that no run can still be building
// them.
func cmdPrune(args []string) error {
	fs := flag.NewFlagSet("prune", flag.ContinueOnError)
	older := fs.Duration("older", 10*time.Minute, "only labs whose namespaces were all made longer ago than this (a lab being built has no process for a moment)")
	match := fs.String("match", "", "only labs whose name matches this regular expression (default: every lab)")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("prune: unexpected arguments %q", pos)
	}
	if *older < 0 {
		return fmt.Errorf("prune: -older %v: must not be negative", *older)
	}
	re, err := regexp.Compile(*match)
	if err != nil {
		return fmt.Errorf("prune: -match: %w", err)
	}
	removed, err := lab.Prune(re.MatchString, *older, time.Now())
	for _, name := range removed {
		fmt.Printf("lab %s removed: nothing ran in it\n", name)
	}
	if len(removed) == 0 && err == nil {
		fmt.Println("no abandoned lab")
	}
	return err
}

func cmdDown(args []string) error {
	fs := flag.NewFlagSet("down", flag.ContinueOnError)
	var lf labFlags
	lf.register(fs)
	if _, _, err := parse(fs, args); err != nil {
		return err
	}
	if err := lab.Down(lf.name, lf.stateDir); err != nil {
		return err
	}
	fmt.Printf("lab %s down\n", lf.name)
	return nil
}

func cmdStatus(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	var lf labFlags
	lf.register(fs)
	if _, _, err := parse(fs, args); err != nil {
		return err
	}
	l, err := lab.Open(lf.name, lf.stateDir)
	if err != nil {
		return fmt.Errorf("%w (is lab %s up?)", err, lf.name)
	}
	return l.WriteStatus(ctx, os.Stdout)
}

// cmdImpair puts an impairment on a host's path, or clears it.
func cmdImpair(args []string) error {
	fs := flag.NewFlagSet("impair", flag.ContinueOnError)
	var lf labFlags
	lf.register(fs)
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return errors.New("impair: want HOST SPEC or HOST clear, e.g. impair c1 delay=20ms,jitter=5ms,loss=1%,reorder=0.5%,rate=100mbit")
	}
	host, spec := pos[0], pos[1]
	if spec != "clear" {
		if _, err := lab.ParseImpair(spec); err != nil {
			return err
		}
	}
	l, err := lab.Open(lf.name, lf.stateDir)
	if err != nil {
		return fmt.Errorf("%w (is lab %s up?)", err, lf.name)
	}
	if spec == "clear" {
		if err := l.ClearImpair(host); err != nil {
			return err
		}
		fmt.Printf("%s: no impairment\n", host)
		return nil
	}
	if err := l.Impair(host, spec); err != nil {
		return err
	}
	fmt.Printf("%s: %s, both directions (its link runs with offloads off meanwhile)\n", host, spec)
	return nil
}

// cmdRelay is the impairment relay process itself.
func cmdRelay(args []string) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	a := fs.String("a", "", "device")
	b := fs.String("b", "", "device")
	spec := fs.String("spec", "", "impairment")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := lab.ParseImpair(*spec)
	if err != nil {
		return err
	}
	if *a == "" || *b == "" {
		return errors.New("relay: want -a DEV -b DEV")
	}
	return lab.RunRelay(*a, *b, cfg)
}

func cmdCapture(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	var lf labFlags
	lf.register(fs)
	count := fs.Int("count", 0, "stop after this many frames (0: no limit)")
	duration := fs.Duration("duration", 0, "stop after this long (0: until SIGINT/SIGTERM)")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return errors.New("capture: want LINK FILE, e.g. capture fe /tmp/fe.pcap")
	}
	l, err := lab.Open(lf.name, lf.stateDir)
	if err != nil {
		return err
	}
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	fmt.Fprintf(os.Stderr, "capturing on %s's switch port into %s\n", pos[0], pos[1])
	frames, err := l.Capture(ctx, pos[0], pos[1], *count)
	fmt.Fprintf(os.Stderr, "%d frames\n", frames)
	return err
}

func cmdExec(args []string) error {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	var lf labFlags
	lf.register(fs)
	pos, command, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || len(command) == 0 {
		return errors.New("exec: want HOST -- CMD [ARG...]")
	}
	l, err := lab.Open(lf.name, lf.stateDir)
	if err != nil {
		return err
	}
	cmd := l.Command(pos[0], command...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The child gets the terminal's signals itself; ours must not kill it
	// before it has a chance to handle them.
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return exitCode(ee.ExitCode())
	}
	return err
}

// parse accepts flags anywhere among the positional arguments (Go's flag
// package stops at the first one), and returns what follows "--" apart.
func parse(fs *flag.FlagSet, args []string) (positional, afterDashes []string, err error) {
	for i, a := range args {
		if a == "--" {
			args, afterDashes = args[:i], args[i+1:]
			break
		}
	}
	fs.SetOutput(io.Discard)
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(os.Stderr, picture)
				fmt.Fprintf(os.Stderr, "\nflags of %s:\n", fs.Name())
				fs.SetOutput(os.Stderr)
				fs.PrintDefaults()
			}
			return nil, nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, afterDashes, nil
		}
		positional, args = append(positional, args[0]), args[1:]
	}
}
