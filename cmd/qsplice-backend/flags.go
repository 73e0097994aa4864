package main

import (
	"errors"
	"fmt"

	"github.com/qsplice/qsplice/backend"
	"github.com/qsplice/qsplice/internal/flagcheck"
)

// checkFlags refuses flag values the daemon would truncate, ignore or
// refuse only after opening its devices; the rest (capacity, workers,
// addresses, key) backend.New checks before it opens anything.
func checkFlags(cfg *backend.Config, id, controlPort uint, logFormat string) error {
	var errs []error
	if id == 0 || id > 1<<32-1 {
		errs = append(errs, fmt.Errorf("-id %d: must be 1..4294967295", id))
	}
	if controlPort == 0 || controlPort > 65535 {
		errs = append(errs, fmt.Errorf("-control-port %d: must be 1..65535", controlPort))
	}
	if cfg.Prefix < 1 || cfg.Prefix > 32 {
		errs = append(errs, fmt.Errorf("-prefix %d: must be 1..32", cfg.Prefix))
	}
	if cfg.Capacity < 1 || cfg.Capacity > 65535 {
		errs = append(errs, fmt.Errorf("-capacity %d: must be 1..65535", cfg.Capacity))
	}
	if cfg.Workers < 0 || cfg.Workers > 256 {
		errs = append(errs, fmt.Errorf("-workers %d: must be 0..256 (0: one per CPU)", cfg.Workers))
	}
	errs = append(errs, flagcheck.Positive(flagcheck.Duration{Name: "linger", Value: cfg.Linger},
		flagcheck.Duration{Name: "idle-timeout", Value: cfg.IdleTimeout}, flagcheck.Duration{Name: "response-quiet", Value: cfg.ResponseQuiet}))
	if cfg.SpliceDelay < 0 {
		errs = append(errs, fmt.Errorf("-splice-delay %v: must not be negative", cfg.SpliceDelay))
	}
	if logFormat != "text" && logFormat != "json" {
		errs = append(errs, fmt.Errorf("-log-format %q: want text or json", logFormat))
	}
	if cfg.Admin != "" {
		if err := flagcheck.HostPort(cfg.Admin); err != nil {
			errs = append(errs, fmt.Errorf("-admin %q: %v", cfg.Admin, err))
		}
	}
	return errors.Join(errs...)
}
