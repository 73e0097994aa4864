package frontend

import (
	"fmt"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/frontend/timeline"
)

// Handoff timelines (issue 11): with Config.Timeline the engines stamp
// their steps, the controller assembles a record per connection, and
// these write them, one JSON line each, from the controller's critical
// section (runController), where every shard's records are made.

// openTimelines creates the timeline file, if one is configured.
func (d *Daemon) openTimelines() error {
	if d.cfg.Timeline == "" {
		return nil
	}
	w, err := timeline.Create(d.cfg.Timeline)
	if err != nil {
		return fmt.Errorf("frontend: timeline: %w", err)
	}
	d.timelines = w
	return nil
}

// writeTimelines writes the records of out. Called with ctrlMu held. A
// write error is logged once and ends the timelines, not the front-end.
func (d *Daemon) writeTimelines(out *controller.Output) {
	if d.timelines == nil || len(out.Timelines) == 0 {
		return
	}
	if err := d.timelines.Write(out.Timelines); err != nil {
		d.log.Error("timeline file write failed; no more timelines", "file", d.cfg.Timeline, "err", err)
		d.timelines.Close()
		d.timelines = nil
	}
}

// closeTimelines writes the records of the connections still held (open,
// or lingering after their close: their records would have gone out at
// the linger's end), marked at_stop, then flushes and closes the file.
// Run calls it after the shards' loops ended.
func (d *Daemon) closeTimelines() {
	d.ctrlMu.Lock()
	defer d.ctrlMu.Unlock()
	if d.timelines != nil {
		var out controller.Output
		d.ctrl.FlushTimelines(d.ctrlStamp(), &out)
		d.writeTimelines(&out)
	}
	if d.timelines != nil {
		if err := d.timelines.Close(); err != nil {
			d.log.Warn("timeline file close failed", "file", d.cfg.Timeline, "err", err)
		}
		d.timelines = nil
	}
}
