package frontend

import (
	"slices"

	"github.com/qsplice/qsplice/frontend/conf"
	"github.com/qsplice/qsplice/splice"
)

// reload re-reads the configuration file on SIGHUP. A file that does not
// parse, or a scheduler configuration the controller refuses, leaves the
// running configuration untouched. What can change live is the
// controller's to say (controller.Reload: customers, reservations, caps,
// weights, the credit scheduler's parameters, Retry-After, the normal
// size, the concurrency cap, the handoffs ahead). Link, addresses, ports
// and the control socket need a restart; a change to them is reported
// and ignored.
func (d *Daemon) reload() {
	f, err := conf.Load(d.cfg.ConfigPath)
	if err != nil {
		d.log.Error("reload refused: the configuration file is bad; still running the previous one", "file", d.cfg.ConfigPath, "err", err)
		d.countReloadFailed()
		return
	}
	next, err := FromFile(f)
	if err != nil {
		d.log.Error("reload refused; still running the previous configuration", "err", err)
		d.countReloadFailed()
		return
	}
	next.setDefaults()
	s0 := d.shards[0]
	s0.out.Reset()
	refused := false
	d.runController(s0, func(now splice.Time) {
		if err := d.ctrl.Reload(d.controllerConfig(next), now, &s0.out); err != nil {
			d.log.Error("reload refused by the scheduler; still running the previous configuration", "err", err)
			d.reloadsFailed++
			refused = true
			return
		}
		d.reloads++
	})
	s0.flushFrames()
	if refused {
		return
	}
	if next.Link != d.cfg.Link || next.Handoff != d.cfg.Handoff || next.Control != d.cfg.Control ||
		!slices.Equal(next.VIPs, d.cfg.VIPs) || !slices.Equal(next.Ports, d.cfg.Ports) {
		d.log.Warn("reload: link, addresses, ports and control socket changes need a restart; kept the running ones")
	}
	d.cfg.Credit = next.Credit
	d.cfg.Classify = next.Classify
	d.cfg.RetryAfter = next.RetryAfter
	d.cfg.NormalSize = next.NormalSize
	d.cfg.ConcurrencyCap = next.ConcurrencyCap
	d.cfg.HandoffAhead = next.HandoffAhead
	for _, w := range f.Check() {
		d.log.Warn("configuration warning", "warning", w.String())
	}
	d.log.Info("configuration reloaded", "file", d.cfg.ConfigPath, "customers", len(next.Credit.Customers))
}

// countReloadFailed counts a reload refused before it reached the
// controller (reloads are counted under ctrlMu, which status reads them
// under).
func (d *Daemon) countReloadFailed() {
	d.ctrlMu.Lock()
	d.reloadsFailed++
	d.ctrlMu.Unlock()
}
