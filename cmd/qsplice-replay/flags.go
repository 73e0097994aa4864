package main

import (
	"errors"
	"fmt"

	"github.com/qsplice/qsplice/internal/flagcheck"
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
	errs = append(errs, flagcheck.Positive(
		flagcheck.Duration{Name: "control-delay", Value: c.ControlDelay}, flagcheck.Duration{Name: "link-delay", Value: c.LinkDelay},
		flagcheck.Duration{Name: "service-delay", Value: c.ServiceDelay}, flagcheck.Duration{Name: "head-timeout", Value: c.Engine.HeadTimeout},
		flagcheck.Duration{Name: "linger", Value: c.Engine.Linger}, flagcheck.Duration{Name: "idle-timeout", Value: c.Engine.IdleTimeout}))
	if c.Drain == 0 {
		errs = append(errs, errors.New("-drain 0: give a positive time, or a negative one to run until idle"))
	}
	return errors.Join(errs...)
}
