package controller

import (
	"cmp"
	"log/slog"
	"slices"
	"time"

	"github.com/qsplice/qsplice/splice"
)

// Reconciling our count of a back-end's requests with its own.
//
// A back-end slot is freed when the shim's Feedback for the request
// arrives. Feedback is a UDP datagram: if one is lost, or the shim never
// saw the end of a response, the slot would stay taken for as long as
// the connection lives, and a few such leaks stall the back-end. Each
// keepalive carries the number of requests the shim has in service. A
// request that reached the back-end more than reconcileAge ago is in
// that number while it is served; so when our count of such requests
// stays above the shim's for reconcileRounds keepalives in a row, the
// oldest excess ones are released (and counted). Younger requests may
// still be on their way (handoff, control round trip) and are never
// released this way.

const (
	reconcileRounds = 3
	reconcileAge    = 3 * time.Second
)

// reconcile compares be's reported concurrency with the requests we count
// as in service there.
func (c *Controller) reconcile(be *backend, reported int, now splice.Time, out *Output) {
	type old struct {
		rec *flowRec
		at  splice.Time
	}
	var olds []old
	for _, rec := range c.flows {
		if rec.be != be {
			continue
		}
		for _, r := range rec.serving {
			if r.sent && now.Sub(r.dispatched) > reconcileAge {
				olds = append(olds, old{rec, r.dispatched})
			}
		}
	}
	excess := len(olds) - reported
	if excess <= 0 {
		be.overCount = 0
		return
	}
	if be.overCount++; be.overCount < reconcileRounds {
		return
	}
	be.overCount = 0
	slices.SortFunc(olds, func(a, b old) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.rec.id, b.rec.id))
	})
	for _, o := range olds[:excess] {
		r := popFront(&o.rec.serving) // a flow's requests are in dispatch order
		c.release(be, r, now)
		be.reconciled++
	}
	c.log(out, slog.LevelWarn, "released back-end slots the back-end no longer reports in service",
		"backend", be.id, "released", excess, "reported", reported)
	c.fillSlots(be, now, out)
	c.dispatch(now, out)
}
