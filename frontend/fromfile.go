package frontend

import (
	"fmt"

	"github.com/qsplice/qsplice/frontend/conf"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/sched"
)

// FromFile turns a parsed configuration file into the daemon's Config,
// loading the control key it names.
func FromFile(f *conf.File) (Config, error) {
	key, err := proto.LoadKey(f.Control.KeyFile)
	if err != nil {
		return Config{}, fmt.Errorf("%s: control.key_file: %w", f.Name, err)
	}
	cfg := Config{
		Link:              f.Link.Interface,
		LinkType:          string(f.Link.Type),
		MAC:               f.Link.MAC,
		Handoff:           f.Handoff,
		Control:           f.Control.Listen,
		Key:               key,
		Capture:           f.Capture,
		KeepaliveInterval: f.Backends.KeepaliveInterval,
		SpliceRetry:       f.Backends.SpliceRetry,
		ConcurrencyCap:    f.Backends.ConcurrencyCap,
		HandoffAhead:      f.Backends.HandoffAhead,
		Linger:            f.TCP.Linger,
		IdleTimeout:       f.TCP.IdleTimeout,
		HeadTimeout:       f.TCP.HeadTimeout,
		MaxHead:           f.TCP.MaxHead,
		CookieSeed:        f.TCP.CookieSeed,
		RetryAfter:        f.Scheduler.RetryAfter,
		QueueCapacity:     f.Scheduler.QueueCapacity,
		Classify:          f.Classify,
		Credit:            CreditFromFile(f),
		Lifo: LifoConfig{
			Classes: f.Classes, Fallback: f.FallbackClass(), Upper: f.Lifo.Upper, Lower: f.Lifo.Lower,
			Interval: f.Lifo.Interval, SingleCap: f.Lifo.SingleCapacity, QueueTimeout: f.Lifo.QueueTimeout,
		},
		ConfigPath: f.Name,
	}
	cfg.NormalSize.Min, cfg.NormalSize.Max = uint64(f.Scheduler.NormalSize.Min), uint64(f.Scheduler.NormalSize.Max)
	if f.Admin.IsValid() {
		cfg.Admin = f.Admin.String()
	}
	seenVIP := map[string]bool{}
	for _, l := range f.Listeners {
		if !seenVIP[l.VIP.String()] {
			seenVIP[l.VIP.String()] = true
			cfg.VIPs = append(cfg.VIPs, l.VIP)
		}
		cfg.Listeners = append(cfg.Listeners, Listener{Port: l.Port, Policy: string(l.Policy)})
		cfg.Ports = appendUnique(cfg.Ports, l.Port)
	}
	return cfg, nil
}

// CreditFromFile is the credit scheduler's part of a configuration file.
func CreditFromFile(f *conf.File) sched.CreditConfig {
	cc := sched.CreditConfig{
		Default:        f.Scheduler.DefaultCustomer,
		Cycle:          f.Scheduler.Cycle,
		TypicalService: f.Scheduler.TypicalServiceTime,
		BalanceLimit:   f.Scheduler.BalanceLimit,
		DebtLimit:      f.Scheduler.DebtLimit,
		QueueTimeout:   f.Scheduler.QueueTimeout,
		CapWindow:      f.Scheduler.CapWindow,
	}
	for _, c := range f.Customers {
		qc := c.QueueCapacity
		if qc == 0 {
			qc = f.Scheduler.QueueCapacity
		}
		cc.Customers = append(cc.Customers, sched.CustomerSpec{
			Name: c.Name, Reservation: c.Reservation, Cap: c.Cap, Weight: c.Weight, QueueCap: qc,
		})
	}
	return cc
}

func appendUnique(s []uint16, v uint16) []uint16 {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
