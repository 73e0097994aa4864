package frontend

import (
	"reflect"
	"slices"
	"time"

	"github.com/qsplice/qsplice/frontend/conf"
)

// reload re-reads the configuration file on SIGHUP. A file that does not
// parse, or a scheduler configuration the scheduler refuses, leaves the
// running configuration untouched. What can change live: customers,
// their domains, reservations, caps and weights, the credit scheduler's
// parameters and Retry-After. Link, addresses, ports, the control
// socket, listener policies, URL classes and the lifo settings need a
// restart; a change to them is reported and ignored.
func (d *Daemon) reload() {
	f, err := conf.Load(d.cfg.ConfigPath)
	if err != nil {
		d.log.Error("reload refused: the configuration file is bad; still running the previous one", "file", d.cfg.ConfigPath, "err", err)
		d.reloadsFailed++
		return
	}
	next, err := FromFile(f)
	if err != nil {
		d.log.Error("reload refused; still running the previous configuration", "err", err)
		d.reloadsFailed++
		return
	}
	if d.credit != nil {
		if err := d.credit.Reconfigure(next.Credit, int64(d.now(time.Now()))); err != nil {
			d.log.Error("reload refused by the scheduler; still running the previous configuration", "err", err)
			d.reloadsFailed++
			return
		}
	}
	if next.Link != d.cfg.Link || next.Handoff != d.cfg.Handoff || next.Control != d.cfg.Control ||
		!slices.Equal(next.VIPs, d.cfg.VIPs) || !slices.Equal(next.Ports, d.cfg.Ports) {
		d.log.Warn("reload: link, addresses, ports and control socket changes need a restart; kept the running ones")
	}
	if !reflect.DeepEqual(next.Lifo, d.cfg.Lifo) || !slices.Equal(next.Listeners, d.cfg.Listeners) {
		d.log.Warn("reload: listener policies, classes and lifo settings need a restart; kept the running ones")
	}
	d.cfg.Credit = next.Credit
	d.cfg.Classify = next.Classify
	d.cfg.RetryAfter = next.RetryAfter
	d.cfg.NormalSize = next.NormalSize
	d.cfg.ConcurrencyCap = next.ConcurrencyCap
	d.cfg.HandoffAhead = next.HandoffAhead
	for _, bs := range d.backends {
		d.syncDispatcher(bs)
	}
	d.reloads++
	for _, w := range f.Check() {
		d.log.Warn("configuration warning", "warning", w.String())
	}
	d.log.Info("configuration reloaded", "file", d.cfg.ConfigPath, "customers", len(next.Credit.Customers))
}
