package frontend

import (
	"fmt"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/splice"
)

// Check refuses what New would refuse about cfg itself, without opening
// anything: the daemon's own checks (addresses, ports, key), the packet
// engine's configuration and the scheduler's. What it cannot know is the
// host: whether the interface exists, the addresses are free, the admin
// port can be bound. `qsplice-frontend validate` runs it after loading
// the key, so that a unit's ExecStartPre= fails where the start would.
func Check(cfg Config) error {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("frontend: bad configuration: %w", err)
	}
	eng, err := splice.NewFrontEnd(engineConfig(cfg))
	if err != nil {
		return fmt.Errorf("frontend: %w", err)
	}
	if _, err := controller.New(ControllerConfig(cfg), eng, 0); err != nil {
		return fmt.Errorf("frontend: bad configuration: %w", err)
	}
	return nil
}

// engineConfig is the packet engine's part of cfg, as newDaemon builds
// it (the cookie secret aside, which no configuration can get wrong).
// TODO(packaging): newDaemon should build its splice.FrontEndConfig with
// this function so that the two cannot drift; left to the owner of
// daemon.go.
func engineConfig(cfg Config) splice.FrontEndConfig {
	return splice.FrontEndConfig{
		MAC: cfg.MAC, VIPs: cfg.VIPs, Ports: cfg.Ports, HandoffAddr: cfg.Handoff,
		Linger: cfg.Linger, IdleTimeout: cfg.IdleTimeout, HeadTimeout: cfg.HeadTimeout, MaxHead: cfg.MaxHead,
		MaxFlows: cfg.MaxFlows, MaxFlowsPerSource: cfg.MaxFlowsPerSource, MaxPortsPerSource: cfg.MaxPortsPerSource,
		FlowLifetime: cfg.FlowLifetime, HalfCloseTimeout: cfg.HalfCloseTimeout,
	}
}
