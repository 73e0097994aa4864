package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/qsplice/qsplice/frontend"
)

// profile is -cpuprofile: serve starts it once everything was checked.
var profile string

// checkFlags refuses flag values outside the ranges the configuration
// file allows for the same settings (frontend/conf), before anything is
// opened or created.
func checkFlags(cfg *frontend.Config) error {
	var errs []error
	positive := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("-%s %v: must be > 0", name, d))
		}
	}
	if cfg.QueueCapacity < 1 {
		errs = append(errs, fmt.Errorf("-queue %d: must be >= 1", cfg.QueueCapacity))
	}
	if cfg.HandoffAhead < 0 || cfg.HandoffAhead > 64 {
		errs = append(errs, fmt.Errorf("-handoff-ahead %d: must be 0..64", cfg.HandoffAhead))
	}
	positive("keepalive", cfg.KeepaliveInterval)
	positive("linger", cfg.Linger)
	positive("idle-timeout", cfg.IdleTimeout)
	positive("head-timeout", cfg.HeadTimeout)
	if cfg.Workers < 0 || cfg.Workers > 256 {
		errs = append(errs, fmt.Errorf("-workers %d: must be 0 (one per CPU) to 256", cfg.Workers))
	} else if cfg.Workers > 1 && cfg.LinkType == "tap" {
		errs = append(errs, fmt.Errorf("-workers %d: a TAP link takes one worker", cfg.Workers))
	}
	if cfg.LinkType != "afpacket" && cfg.LinkType != "tap" {
		errs = append(errs, fmt.Errorf("-link-type %q: want afpacket or tap", cfg.LinkType))
	}
	if cfg.Admin != "" {
		if err := checkHostPort(cfg.Admin); err != nil {
			errs = append(errs, fmt.Errorf("-admin %q: %v", cfg.Admin, err))
		}
	}
	return errors.Join(errs...)
}

// checkHostPort accepts what net.Listen("tcp", s) can bind: a host (or
// nothing) and a port number.
func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want HOST:PORT")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("bad port %q", port)
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil && strings.ContainsAny(host, " /:") {
			return fmt.Errorf("bad host %q", host)
		}
	}
	return nil
}
