package controller

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"

	"github.com/qsplice/qsplice/splice"
)

// Reload makes cfg current where that can happen live: customers, their
// reservations, caps and weights, the credit scheduler's parameters,
// Classify, Retry-After, the normal size, the concurrency cap and the
// handoffs ahead. A configuration the credit scheduler refuses is
// returned as an error and changes nothing. Listener policies, classes,
// lifo and feedback settings, the FIFO capacity and the timing of the
// control protocol need a restart: a change to them is logged and
// ignored.
func (c *Controller) Reload(cfg Config, now splice.Time, out *Output) error {
	now = c.advance(now)
	cfg.setDefaults()
	if c.credit != nil {
		if err := c.credit.Reconfigure(cfg.Credit, int64(now)); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
	}
	if !reflect.DeepEqual(cfg.Lifo, c.cfg.Lifo) || !reflect.DeepEqual(cfg.Feedback, c.cfg.Feedback) ||
		!slices.Equal(cfg.Listeners, c.cfg.Listeners) || !slices.Equal(cfg.Ports, c.cfg.Ports) ||
		cfg.QueueCapacity != c.cfg.QueueCapacity {
		c.log(out, slog.LevelWarn, "reload: listener policies, classes, lifo and feedback settings and the queue capacity need a restart; kept the running ones")
	}
	if cfg.KeepaliveInterval != c.cfg.KeepaliveInterval || cfg.SpliceRetry != c.cfg.SpliceRetry ||
		cfg.SpliceTries != c.cfg.SpliceTries || cfg.SlotWait != c.cfg.SlotWait {
		c.log(out, slog.LevelWarn, "reload: keepalive interval, splice retry and slot wait changes need a restart; kept the running ones")
	}
	c.cfg.Credit = cfg.Credit
	c.cfg.Classify = cfg.Classify
	c.cfg.RetryAfter = cfg.RetryAfter
	c.cfg.NormalSize = cfg.NormalSize
	c.cfg.ConcurrencyCap = cfg.ConcurrencyCap
	c.cfg.HandoffAhead = cfg.HandoffAhead
	c.cfg.LogLevel = cfg.LogLevel
	for _, q := range c.queues {
		if q.credit {
			q.timeout = cfg.Credit.QueueTimeout
		}
	}
	for _, be := range c.order {
		c.syncDispatcher(be)
	}
	c.updateSlots(now)
	for _, be := range c.order {
		c.fillSlots(be, now, out)
	}
	c.dispatch(now, out)
	c.drain(now, out)
	return nil
}
