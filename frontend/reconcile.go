package frontend

import (
	"sort"
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

// reconcile compares back-end b's reported concurrency with the requests
// we count as in service there.
func (d *Daemon) reconcile(bs *backendState, reported int, now splice.Time) {
	type old struct {
		flow splice.FlowID
		at   splice.Time
	}
	var olds []old
	for flow, s := range d.inService {
		if s.backend != bs.id {
			continue
		}
		for _, r := range s.reqs {
			if r.sent && now.Sub(r.dispatched) > reconcileAge {
				olds = append(olds, old{flow, r.dispatched})
			}
		}
	}
	excess := len(olds) - reported
	if excess <= 0 {
		bs.overCount = 0
		return
	}
	if bs.overCount++; bs.overCount < reconcileRounds {
		return
	}
	bs.overCount = 0
	sort.Slice(olds, func(i, j int) bool { return olds[i].at < olds[j].at })
	for _, o := range olds[:excess] {
		s := d.inService[o.flow]
		r := s.reqs[0] // a flow's requests are in dispatch order
		s.reqs = s.reqs[1:]
		if len(s.reqs) == 0 {
			delete(d.inService, o.flow)
		} else {
			d.inService[o.flow] = s
		}
		d.releaseReq(bs.id, r, now)
		bs.reconciled++
	}
	d.fillSlots(bs, now)
	d.log.Warn("released back-end slots the back-end no longer reports in service",
		"backend", bs.id, "released", excess, "reported", reported)
	d.dispatch(now)
}
