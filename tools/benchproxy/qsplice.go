package benchproxy

import (
	"context"
	"strconv"
	"time"

	"github.com/qsplice/qsplice/tools/lab"
)

// upLab builds the qsplice lab the benchmark measures: one client, the
// front-end, one back-end with nginx and the shim (capacity 64, so that
// the back-end's slots never limit the loads). With daemons false only
// the network is built: the run still needs the lab's link settings.
// o's Offloads, when set, overrides the lab's default link offloads; its
// Workers, when above 0, is both daemons' -workers; its FrontendArgs and
// BackendArgs go to the daemons after everything else.
func upLab(ctx context.Context, name, stateDir string, sizes []int64, daemons bool, o Options) (*lab.Lab, error) {
	cfg := lab.DefaultConfig(name)
	cfg.StateDir = stateDir
	if o.BinDir != "" {
		cfg.BinDir = o.BinDir
	}
	cfg.Backends, cfg.Clients = 1, 1
	cfg.Nginx, cfg.TestServer, cfg.Daemons = daemons, false, daemons
	cfg.Capacity = 64
	cfg.Files = sizes
	cfg.ReadyTimeout = 30 * time.Second
	if o.Offloads != nil {
		cfg.Offloads = *o.Offloads
	}
	if o.Workers > 0 {
		w := []string{"-workers", strconv.Itoa(o.Workers)}
		cfg.FrontendArgs = append(cfg.FrontendArgs, w...)
		cfg.BackendArgs = append(cfg.BackendArgs, w...)
	}
	cfg.FrontendArgs = append(cfg.FrontendArgs, o.FrontendArgs...)
	cfg.BackendArgs = append(cfg.BackendArgs, o.BackendArgs...)
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := clientSysctls(l.NS("c1")); err != nil {
		return l, err
	}
	return l, nil
}

// Lab process names (tools/lab's).
const (
	labFrontend = "frontend"
	labShim     = "backend-b1"
)
