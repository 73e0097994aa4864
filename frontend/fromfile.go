package frontend

import (
	"fmt"

	"github.com/qsplice/qsplice/frontend/conf"
	"github.com/qsplice/qsplice/frontend/controller"
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
	cfg := fromFile(f)
	cfg.Key = key
	return cfg, nil
}

// fromFile is everything of f but the key.
func fromFile(f *conf.File) Config {
	cfg := Config{
		Link:              f.Link.Interface,
		LinkType:          string(f.Link.Type),
		MAC:               f.Link.MAC,
		Handoff:           f.Handoff,
		Control:           f.Control.Listen,
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
		MaxFlows:          limitFromFile(f.TCP.MaxFlows),
		MaxFlowsPerSource: limitFromFile(f.TCP.MaxFlowsPerSource),
		MaxPortsPerSource: limitFromFile(f.TCP.MaxPortsPerSource),
		FlowLifetime:      f.TCP.FlowLifetime,
		HalfCloseTimeout:  f.TCP.HalfCloseTimeout,
		QueueTimeout:      conf.DefaultFIFOQueueTimeout,
		RetryAfter:        f.Scheduler.RetryAfter,
		QueueCapacity:     f.Scheduler.QueueCapacity,
		Classify:          f.Classify,
		Credit:            CreditFromFile(f),
		Lifo: LifoConfig{
			Classes: f.Classes, Fallback: f.FallbackClass(), Upper: f.Lifo.Upper, Lower: f.Lifo.Lower,
			Interval: f.Lifo.Interval, SingleCap: f.Lifo.SingleCapacity, QueueTimeout: f.Lifo.QueueTimeout,
		},
		Feedback:   controller.FeedbackConfig{Policy: f.Feedback.Policy, Classifier: f.Feedback.Classifier},
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
		cfg.Listeners = append(cfg.Listeners, Listener{Port: l.Port, Policy: string(l.Policy), QueueTimeout: l.QueueTimeout})
		cfg.Ports = appendUnique(cfg.Ports, l.Port)
	}
	return cfg
}

// ControllerConfig is the scheduling part of cfg: what the front-end's
// controller runs by.
func ControllerConfig(cfg Config) controller.Config {
	return controller.Config{
		Ports: cfg.Ports, Listeners: cfg.Listeners, QueueCapacity: cfg.QueueCapacity, QueueTimeout: cfg.QueueTimeout,
		Credit: cfg.Credit, Lifo: cfg.Lifo, Feedback: cfg.Feedback, Classify: cfg.Classify, RetryAfter: cfg.RetryAfter,
		NormalSize: cfg.NormalSize, ConcurrencyCap: cfg.ConcurrencyCap, HandoffAhead: cfg.HandoffAhead,
		SlotWait: cfg.SlotWait, KeepaliveInterval: cfg.KeepaliveInterval, SpliceRetry: cfg.SpliceRetry,
		EarlyRequest: cfg.EarlyRequest,
	}
}

// SchedulerFromFile is the controller's configuration from a file, for
// tools that schedule as the front-end would without running it
// (qsplice-replay): no control key is needed.
func SchedulerFromFile(f *conf.File) controller.Config {
	cfg := fromFile(f)
	return ControllerConfig(cfg)
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

// limitFromFile: the file's 0 means no limit, the engine's a negative
// value.
func limitFromFile(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

func appendUnique(s []uint16, v uint16) []uint16 {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
