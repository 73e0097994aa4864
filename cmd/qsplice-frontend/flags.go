package main

import (
	"errors"
	"fmt"

	"github.com/qsplice/qsplice/frontend"
	"github.com/qsplice/qsplice/internal/flagcheck"
)

// profile is -cpuprofile: serve starts it once everything was checked.
var profile string

// checkFlags refuses flag values outside the ranges the configuration
// file allows for the same settings (frontend/conf), before anything is
// opened or created.
func checkFlags(cfg *frontend.Config) error {
	var errs []error
	if cfg.QueueCapacity < 1 {
		errs = append(errs, fmt.Errorf("-queue %d: must be >= 1", cfg.QueueCapacity))
	}
	if cfg.HandoffAhead < 0 || cfg.HandoffAhead > 64 {
		errs = append(errs, fmt.Errorf("-handoff-ahead %d: must be 0..64", cfg.HandoffAhead))
	}
	errs = append(errs, flagcheck.Positive(flagcheck.Duration{Name: "keepalive", Value: cfg.KeepaliveInterval},
		flagcheck.Duration{Name: "linger", Value: cfg.Linger}, flagcheck.Duration{Name: "idle-timeout", Value: cfg.IdleTimeout},
		flagcheck.Duration{Name: "head-timeout", Value: cfg.HeadTimeout}))
	if cfg.Workers < 0 || cfg.Workers > 256 {
		errs = append(errs, fmt.Errorf("-workers %d: must be 0 (one per CPU) to 256", cfg.Workers))
	} else if cfg.Workers > 1 && cfg.LinkType == "tap" {
		errs = append(errs, fmt.Errorf("-workers %d: a TAP link takes one worker", cfg.Workers))
	}
	if cfg.LinkType != "afpacket" && cfg.LinkType != "tap" {
		errs = append(errs, fmt.Errorf("-link-type %q: want afpacket or tap", cfg.LinkType))
	}
	if cfg.Admin != "" {
		if err := flagcheck.HostPort(cfg.Admin); err != nil {
			errs = append(errs, fmt.Errorf("-admin %q: %v", cfg.Admin, err))
		}
	}
	return errors.Join(errs...)
}
