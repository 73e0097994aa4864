package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/qsplice/qsplice/tools/replay"
)

// checkRanges refuses flag values that replay.Config would replace by
// its defaults without a word (a zero count or delay) or refuse only
// after the files are opened.
func checkRanges(c *replay.Config) error {
	var errs []error
	if c.Backends < 1 || c.Backends > replay.MaxBackends {
		errs = append(errs, fmt.Errorf("-backends %d: must be 1..%d", c.Backends, replay.MaxBackends))
	}
	if c.Capacity < 1 || c.Capacity > 1<<16-1 {
		errs = append(errs, fmt.Errorf("-capacity %d: must be 1..65535", c.Capacity))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"control-delay", c.ControlDelay}, {"link-delay", c.LinkDelay}, {"service-delay", c.ServiceDelay},
		{"head-timeout", c.Engine.HeadTimeout}, {"linger", c.Engine.Linger}, {"idle-timeout", c.Engine.IdleTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("-%s %v: must be > 0", d.name, d.v))
		}
	}
	if c.Drain == 0 {
		errs = append(errs, errors.New("-drain 0: give a positive time, or a negative one to run until idle"))
	}
	return errors.Join(errs...)
}
