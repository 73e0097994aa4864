package controller

import (
	"slices"

	"github.com/qsplice/qsplice/splice"
)

// LiveTimelines is the engine call that says what it saw so far of a
// connection not closed yet: splice.FrontEnd.LiveTimeline. An Engine
// without it gets records of the controller's steps alone at the stop.
type LiveTimelines interface {
	LiveTimeline(id splice.FlowID) (splice.FlowTimeline, uint64, bool)
}

var _ LiveTimelines = (*splice.FrontEnd)(nil)

// FlushTimelines puts in out.Timelines, in flow order, the record of
// every connection the controller still holds: open, or closed and
// waiting out its linger, whose record would have gone out at the
// linger's end. Each is marked AtStop, with the steps seen so far and no
// reason. A connection closed and waiting for a late Feedback
// (latefeedback.go) is settled: its record goes out as at the wait's
// end, with its reason. The daemon calls it once, when it stops; a
// connection flushed writes no second record if it closes afterwards.
func (c *Controller) FlushTimelines(now splice.Time, out *Output) {
	if !c.cfg.Timelines {
		return
	}
	c.advance(now)
	ids := make([]splice.FlowID, 0, len(c.flows)+len(c.late))
	for id, rec := range c.flows {
		if !rec.tl.flushed {
			ids = append(ids, id)
		}
	}
	for id := range c.late {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	lt, _ := c.eng.(LiveTimelines)
	for _, id := range ids {
		if _, ok := c.late[id]; ok {
			c.settleLate(id, out)
			continue
		}
		rec := c.flows[id]
		var et splice.FlowTimeline
		var forwarded uint64
		if lt != nil {
			et, forwarded, _ = lt.LiveTimeline(id)
		}
		r := c.tlRecord(rec, "", forwarded, &et)
		r.AtStop = true
		out.Timelines = append(out.Timelines, r)
		rec.tl.flushed = true
	}
}
