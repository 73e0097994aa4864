package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/qsplice/qsplice/tools/netns"
)

// Up builds the lab and starts its processes, returning when they are all
// ready. It is idempotent: a lab of the same configuration that is complete
// and running is returned as it is (Reused reports true); anything else
// left under this name (a half-built lab, a different configuration) is
// torn down and rebuilt. If Up fails, it removes what it built.
func Up(ctx context.Context, cfg Config) (*Lab, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	l := newLab(cfg)
	if err := l.checkPrograms(); err != nil {
		return nil, err
	}
	if err := checkStateDirOwned(cfg.StateDir); err != nil {
		return nil, err
	}
	if existing := runningLab(cfg); existing != nil {
		existing.reused = true
		return existing, nil
	}
	// Content files survive the rebuild: they depend only on (id, size).
	if err := teardown(cfg.Name, cfg.StateDir, nil, true); err != nil {
		return nil, fmt.Errorf("lab: clearing the previous lab %s: %w", cfg.Name, err)
	}
	if err := l.build(ctx); err != nil {
		if derr := teardown(cfg.Name, cfg.StateDir, l, false); derr != nil {
			err = errors.Join(err, fmt.Errorf("lab: and removing it again: %w", derr))
		}
		return nil, err
	}
	return l, nil
}

// runningLab returns the recorded lab if it has cfg's configuration, all
// its devices, and all its processes alive; otherwise nil.
func runningLab(cfg Config) *Lab {
	recorded, err := readConfig(cfg.StateDir)
	if err != nil {
		return nil
	}
	a, _ := json.Marshal(recorded)
	b, _ := json.Marshal(cfg)
	if string(a) != string(b) {
		return nil
	}
	l := newLab(recorded)
	if ok, _ := l.topologyComplete(); !ok {
		return nil
	}
	if l.checkAlive(l.processes()) != nil {
		return nil
	}
	return l
}

// build creates the state directory and topology, then starts the web
// servers, waits for them, starts the daemons and waits for the front-end
// to see every back-end.
func (l *Lab) build(ctx context.Context) error {
	if err := l.initState(); err != nil {
		return err
	}
	if err := l.buildTopology(); err != nil {
		return err
	}
	var started []procSpec
	for _, daemons := range []bool{false, true} {
		var checks []*readyCheck
		for _, p := range l.processes() {
			// A VM front-end is QEMU, not a daemon, but it starts with
			// them: its ready check waits for the shims' registrations.
			if (p.daemon || p.name == frontendName) != daemons {
				continue
			}
			if err := l.start(p); err != nil {
				return err
			}
			started = append(started, p)
			if p.ready != nil {
				checks = append(checks, p.ready)
			}
		}
		if err := l.waitReady(ctx, started, checks); err != nil {
			return err
		}
	}
	return nil
}

// Down removes the lab: it stops its processes (SIGTERM, SIGKILL after 3s),
// kills anything else left in its namespaces, deletes every namespace named
// qs-NAME-*, and removes the state directory (default /run/qsplice/NAME).
// It succeeds when there is nothing to remove.
func Down(name, stateDir string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if stateDir == "" {
		stateDir = defaultStateDir(name)
	}
	return teardown(name, stateDir, nil, false)
}

// Down removes the lab, as the package-level Down does.
func (l *Lab) Down() error {
	return teardown(l.cfg.Name, l.cfg.StateDir, l, false)
}

// teardown removes a lab, best effort: it carries on past errors and
// returns them all. l, when known, supplies the process handles.
func teardown(name, stateDir string, l *Lab, keepFiles bool) error {
	var errs []error
	if l == nil {
		if cfg, err := readConfig(stateDir); err == nil && cfg.Name == name {
			cfg.StateDir = stateDir
			l = newLab(cfg)
		}
	}
	if l != nil {
		errs = append(errs, l.stopAll())
	}
	namespaces, err := netns.List(nsPrefix(name))
	errs = append(errs, err)
	for _, ns := range namespaces {
		errs = append(errs, killNamespace(ns))
	}
	for _, ns := range namespaces {
		errs = append(errs, netns.Delete(ns))
	}
	errs = append(errs, removeState(stateDir, keepFiles))
	return errors.Join(errs...)
}

// stopAll stops the front-end first, so that it does not spend its last
// moments declaring back-ends dead, then everything else in parallel.
func (l *Lab) stopAll() error {
	var errs []error
	var rest []procSpec
	for _, p := range l.processes() {
		if p.name == frontendName {
			errs = append(errs, l.stop(p))
		} else {
			rest = append(rest, p)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range rest {
		wg.Go(func() {
			if err := l.stop(p); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// StopProcess stops one lab process by name ("frontend", "backend-b2",
// "nginx-b1", "testserver-b1"), for tests that kill parts of the system.
func (l *Lab) StopProcess(name string) error {
	p, err := l.spec(name)
	if err != nil {
		return err
	}
	return l.stop(p)
}

// StartProcess starts a stopped lab process again and waits until it is
// ready: a web server accepts connections, the front-end reports every
// back-end alive, a back-end shim is reported alive by the front-end if the
// front-end runs (which may still be its report from before the restart).
func (l *Lab) StartProcess(name string) error {
	p, err := l.spec(name)
	if err != nil {
		return err
	}
	if s := l.status(p); s.alive {
		return fmt.Errorf("lab: %s is already running (pid %d)", name, s.pid)
	}
	if err := l.start(p); err != nil {
		return err
	}
	watch := []procSpec{p}
	var checks []*readyCheck
	if p.ready != nil {
		checks = append(checks, p.ready)
	}
	if (p.daemon || l.isVM(p.backend)) && p.backend > 0 { // a VM back-end's shim is in the guest
		if fe, err := l.spec(frontendName); err == nil && l.status(fe).alive {
			watch = append(watch, fe)
			checks = append(checks, l.shimRegisteredCheck(p.backend), l.frontendCheck(p.backend))
		}
	}
	return l.waitReady(context.Background(), watch, checks)
}
