package frontend

import (
	"errors"
	"fmt"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// queueSet is one scheduling policy and the request at its head that
// found no back-end yet.
type queueSet struct {
	name    string
	policy  sched.Policy
	waiting *sched.Request
	// lifo is policy when it is a class-based one: its requests are
	// classified by path, not by Host.
	lifo *sched.LifoPri
	// timeout, when > 0, also expires the head request in waiting,
	// which the policy no longer holds.
	timeout time.Duration
}

type queues struct {
	list   []*queueSet
	byPort map[uint16]*queueSet
	credit *sched.Credit
	lifo   *lifoControl // nil when no listener classifies by path
}

// buildQueues creates the policies the listeners ask for: one credit
// scheduler shared by every credit listener (customers are global), one
// LifoPri per class-based policy in use (lifo-pri, eight-fifo,
// single-fifo), sharing one classifier and utilization meter, and one FIFO
// for the rest. now starts the meter's first interval.
func buildQueues(cfg *Config, now int64) (queues, error) {
	qs := queues{byPort: make(map[uint16]*queueSet)}
	var credit, fifo *queueSet
	byMode := map[sched.Mode]*queueSet{}
	get := func(policy string) (*queueSet, error) {
		if mode, ok := lifoPolicies[policy]; ok {
			if q := byMode[mode]; q != nil {
				return q, nil
			}
			if qs.lifo == nil {
				lc, err := newLifoControl(cfg.Lifo, now)
				if err != nil {
					return nil, err
				}
				qs.lifo = lc
			}
			p, err := qs.lifo.newPolicy(cfg.Lifo, mode)
			if err != nil {
				return nil, err
			}
			q := &queueSet{name: policy, policy: p, lifo: p, timeout: cfg.Lifo.QueueTimeout}
			byMode[mode] = q
			qs.list = append(qs.list, q)
			return q, nil
		}
		switch policy {
		case "credit":
			if credit == nil {
				c, err := sched.NewCredit(cfg.Credit)
				if err != nil {
					return nil, err
				}
				credit = &queueSet{name: "credit", policy: c}
				qs.credit = c
				qs.list = append(qs.list, credit)
			}
			return credit, nil
		case "fifo", "":
			if fifo == nil {
				fifo = &queueSet{name: "fifo", policy: sched.NewFIFO(cfg.QueueCapacity)}
				qs.list = append(qs.list, fifo)
			}
			return fifo, nil
		}
		return nil, fmt.Errorf("listener policy %q is not credit, fifo, lifo-pri, eight-fifo or single-fifo", policy)
	}
	for _, l := range cfg.Listeners {
		q, err := get(l.Policy)
		if err != nil {
			return qs, err
		}
		qs.byPort[l.Port] = q
	}
	for _, p := range cfg.Ports {
		if qs.byPort[p] == nil {
			q, _ := get("fifo")
			qs.byPort[p] = q
		}
	}
	return qs, nil
}

func (d *Daemon) customer(host string) string {
	if d.cfg.Classify != nil {
		return d.cfg.Classify(host)
	}
	if d.cfg.Credit.Default != "" {
		return d.cfg.Credit.Default
	}
	return "default"
}

func (d *Daemon) event(ev splice.Event, now splice.Time) {
	switch ev.Kind {
	case splice.EvRequest:
		d.request(ev, now)
	case splice.EvSplice:
		d.sendSplice(ev, now)
	case splice.EvClosed:
		delete(d.pending, ev.Flow)
		if b, ok := d.dispatched[ev.Flow]; ok {
			delete(d.dispatched, ev.Flow)
			if bs := d.backends[b]; bs != nil {
				bs.closed++
				bs.forwardedBytes += ev.Bytes
			}
		}
		d.requestDone(ev.Flow, true, 0, now)
		d.log.Debug("closed", "flow", ev.Flow, "reason", ev.Reason.String(), "backend", ev.Backend)
	case splice.EvAnswered:
		d.log.Info("answered by front-end", "flow", ev.Flow, "status", ev.Status, "reason", ev.Detail)
	}
}

// request classifies and queues a parsed request, or answers it at once
// when its queue refuses it.
func (d *Daemon) request(ev splice.Event, now splice.Time) {
	r := ev.Request
	q := d.byPort[r.Port]
	var cust string
	if q.lifo != nil {
		cust = d.lifo.class(r.Path) // LifoPri queues by class name
	} else {
		cust = d.customer(r.Host)
	}
	cs := d.stats(cust)
	cs.offered++
	req := sched.Request{ID: sched.RequestID(ev.Flow), Customer: cust, Host: r.Host, Path: r.Path, Port: r.Port, Arrival: int64(now)}
	err := q.policy.Enqueue(req, int64(now))
	if err == nil {
		if ev.FollowUp {
			d.followUp[ev.Flow] = true
		}
		d.log.Debug("request", "flow", ev.Flow, "client", r.Client, "method", r.Method, "host", r.Host,
			"path", r.Path, "customer", cust, "follow_up", ev.FollowUp)
		d.dispatch(now)
		return
	}
	reason, status := "queue-full", 503
	switch {
	case errors.Is(err, sched.ErrOverCap):
		reason, status = "over-cap", 429
	case errors.Is(err, sched.ErrUnknownCustomer):
		reason = "unknown-customer"
	}
	d.reject(ev.Flow, ev.FollowUp, cust, reason, status, now)
}

// reject answers a request the scheduler will not run. A follow-up on a
// spliced connection is answered inside its stream once the back-end's
// previous response has ended (splice.FrontEnd.RejectFollowUp); should
// the engine no longer hold it as waiting, the connection is reset.
func (d *Daemon) reject(flow splice.FlowID, followUp bool, cust, reason string, status int, now splice.Time) {
	d.stats(cust).rejected[reason]++
	d.log.Info("request rejected", "flow", flow, "customer", cust, "reason", reason, "status", status, "follow_up", followUp)
	var retry time.Duration
	if status == 503 {
		retry = d.cfg.RetryAfter
	}
	if followUp {
		if err := d.engine.RejectFollowUp(flow, status, reason, retry, now, &d.out); err != nil {
			d.engine.Abort(flow, now, &d.out)
		}
		return
	}
	d.engine.Reject(flow, status, reason, retry, now, &d.out)
}

// expire answers requests that waited past the queue timeout.
func (d *Daemon) expire(now splice.Time) {
	timedOut := func(r sched.Request) {
		flow := splice.FlowID(r.ID)
		fu := d.followUp[flow]
		delete(d.followUp, flow)
		d.reject(flow, fu, r.Customer, "queue-timeout", 503, now)
	}
	if d.credit != nil {
		d.credit.Expire(int64(now), timedOut)
	}
	for _, q := range d.queues {
		if q.lifo != nil {
			q.lifo.Expire(int64(now), timedOut)
		}
		if w := q.waiting; w != nil && q.timeout > 0 && now.Sub(splice.Time(w.Arrival)) > q.timeout {
			q.waiting = nil
			timedOut(*w)
		}
	}
}

// dispatch hands queued requests to back-ends while some have room,
// taking the policies in turn.
func (d *Daemon) dispatch(now splice.Time) {
	for progress := true; progress; {
		progress = false
		for _, q := range d.queues {
			if d.dispatchOne(q, now) {
				progress = true
			}
		}
	}
}

// dispatchOne moves the head of q on, if it can; it reports whether a
// request left the queue.
func (d *Daemon) dispatchOne(q *queueSet, now splice.Time) bool {
	if q.waiting == nil {
		r, ok := q.policy.Next(int64(now))
		if !ok {
			return false
		}
		q.waiting = &r
	}
	r := q.waiting
	flow := splice.FlowID(r.ID)
	if d.followUp[flow] {
		delete(d.followUp, flow)
		q.waiting = nil
		b, ok := d.dispatched[flow]
		if !ok {
			return true // the connection ended while its request waited
		}
		if d.hasRoom(b) {
			d.admit(flow, b, *r, now)
		} else {
			d.parked[b] = append(d.parked[b], parkedReq{flow, *r})
		}
		return true
	}
	id, ok := d.disp.Pick(r.Port)
	if !ok {
		return false
	}
	bs := d.backends[uint32(id)]
	q.waiting = nil
	err := d.engine.Dispatch(flow, splice.Backend{ID: bs.id, IP: bs.ip, MAC: bs.mac, Port: r.Port}, now, &d.out)
	if err != nil {
		// The client went away while queued: nothing to do.
		d.log.Debug("dispatch skipped", "flow", r.ID, "err", err)
		return true
	}
	d.dispatched[flow] = bs.id
	d.startServing(flow, bs.id, *r, now)
	bs.dispatched++
	return true
}

// parkedReq is a follow-up released by the scheduler, waiting for a slot
// on its connection's back-end.
type parkedReq struct {
	flow splice.FlowID
	req  sched.Request
}

// serving is a flow's back-end and the requests it is serving there,
// oldest first (responses come back in request order).
type serving struct {
	backend uint32
	reqs    []servingReq
}

type servingReq struct {
	customer   string
	arrival    splice.Time
	dispatched splice.Time
	sent       bool        // on C2 to the back-end: holds one of its slots
	sentAt     splice.Time // when it was sent
}

// accounting is what a policy may add to the Policy seam: charge
// correction from measured service time, and refunds for requests that
// a dead back-end never served.
type accounting interface {
	Complete(customer string, service time.Duration)
	Refund(customer string)
}

func (d *Daemon) accounting() (accounting, bool) {
	if d.credit == nil {
		return nil, false
	}
	return d.credit, true
}

// capacity is what a back-end may run at once: its registered figure,
// bounded by the configured cap.
func (d *Daemon) capacity(bs *backendState) int {
	if d.cfg.ConcurrencyCap > 0 && d.cfg.ConcurrencyCap < bs.capacity {
		return d.cfg.ConcurrencyCap
	}
	return bs.capacity
}

func (d *Daemon) startServing(flow splice.FlowID, b uint32, r sched.Request, now splice.Time) {
	s := d.inService[flow]
	s.backend = b
	s.reqs = append(s.reqs, servingReq{customer: r.Customer, arrival: splice.Time(r.Arrival), dispatched: now})
	d.inService[flow] = s
	d.disp.Start(sched.BackendID(b))
	cs := d.stats(r.Customer)
	cs.admitted++
	cs.wait.observe(now.Sub(splice.Time(r.Arrival)))
}

// admit lets a follow-up request through to its connection's back-end.
func (d *Daemon) admit(flow splice.FlowID, b uint32, r sched.Request, now splice.Time) {
	if err := d.engine.Admit(flow, now, &d.out); err != nil {
		d.log.Debug("admit skipped", "flow", flow, "err", err)
		return
	}
	d.startServing(flow, b, r, now)
	if bs := d.backends[b]; bs != nil {
		bs.followUps++
		d.markSent(flow, bs, now) // Admit sent it
	}
}

// refundFlow gives back the credit of every request in service on flow
// and forgets them.
func (d *Daemon) refundFlow(flow splice.FlowID, now splice.Time) {
	s := d.inService[flow]
	if acc, ok := d.accounting(); ok {
		for _, r := range s.reqs {
			acc.Refund(r.customer)
			d.stats(r.customer).refunded++
		}
	}
	delete(d.inService, flow)
	for _, r := range s.reqs {
		d.releaseReq(s.backend, r, now)
	}
	if bs := d.backends[s.backend]; bs != nil {
		d.fillSlots(bs, now)
	}
}

// requestDone frees the back-end slot of the oldest request on flow when
// its back-end reported it served (correcting the customer's charge with
// the service time), or of all of them when the connection closed.
func (d *Daemon) requestDone(flow splice.FlowID, all bool, service time.Duration, now splice.Time) {
	s, ok := d.inService[flow]
	if !ok {
		return
	}
	n := 1
	if all {
		n = len(s.reqs)
	}
	n = min(n, len(s.reqs))
	if !all && n == 1 {
		r := s.reqs[0]
		if acc, ok := d.accounting(); ok {
			acc.Complete(r.customer, service)
		}
		if bs := d.backends[s.backend]; bs != nil && r.sent {
			slot := now.Sub(r.sentAt)
			bs.slotsTimed++
			bs.slotTotal += slot
			bs.slotExcess += slot - service
		}
		cs := d.stats(r.customer)
		cs.served++
		cs.response.observe(r.dispatched.Sub(r.arrival) + service)
	}
	done := s.reqs[:n]
	s.reqs = s.reqs[n:]
	if len(s.reqs) == 0 {
		delete(d.inService, flow)
	} else {
		d.inService[flow] = s
	}
	for _, r := range done {
		d.releaseReq(s.backend, r, now)
	}
	if bs := d.backends[s.backend]; bs != nil {
		d.fillSlots(bs, now)
	}
	d.dispatch(now)
}
