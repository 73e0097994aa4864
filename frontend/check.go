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
	// Every shard's engine configuration, as newDaemon builds them.
	var eng *splice.FrontEnd
	for i := range cfg.Workers {
		e, err := splice.NewFrontEnd(engineConfig(&cfg, i, cfg.Workers))
		if err != nil {
			return fmt.Errorf("frontend: %w", err)
		}
		if i == 0 {
			eng = e
		}
	}
	if _, err := controller.New(ControllerConfig(cfg), eng, 0); err != nil {
		return fmt.Errorf("frontend: bad configuration: %w", err)
	}
	return nil
}
