package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/qsplice/qsplice/tools/demo"
)

// labName is what tools/lab accepts as a lab name.
var labName = regexp.MustCompile(`^[a-z0-9]{1,8}$`)

// checkFlags refuses values the demo would otherwise take silently (a
// -flood naming no customer) or fail on minutes later, before the lab is
// built.
func checkFlags(cfg demo.Config, ahead int, args []string) error {
	var errs []error
	if len(args) > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q (-h for help)", args[0]))
	}
	if cfg.Flood != "" {
		var names []string
		found := false
		for _, c := range demo.Published {
			names = append(names, c.Name)
			found = found || c.Name == cfg.Flood
		}
		if !found {
			errs = append(errs, fmt.Errorf("-flood %q: no such customer (want one of %s)", cfg.Flood, strings.Join(names, ", ")))
		}
	}
	if cfg.Duration <= 0 {
		errs = append(errs, fmt.Errorf("-duration %v: must be > 0", cfg.Duration))
	}
	if !(cfg.Offer > 0) {
		errs = append(errs, fmt.Errorf("-offer %g: must be > 0", cfg.Offer))
	}
	if !(cfg.Scale > 0) || cfg.Scale > 10 {
		errs = append(errs, fmt.Errorf("-scale %g: must be > 0 and at most 10", cfg.Scale))
	}
	if ahead < -1 || ahead > 64 {
		errs = append(errs, fmt.Errorf("-handoff-ahead %d: must be -1 (the default) or 0..64", ahead))
	}
	if cfg.Name != "" && !labName.MatchString(cfg.Name) {
		errs = append(errs, fmt.Errorf("-name %q: a lab name is 1 to 8 of a-z and 0-9", cfg.Name))
	}
	return errors.Join(errs...)
}
