package controller

import (
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
)

// customerStats are the per-customer counters behind /status and /metrics.
type customerStats struct {
	offered, admitted, served, refunded uint64
	// abandoned counts requests whose client left while they waited.
	abandoned     uint64
	outsideNormal uint64            // responses outside the normal-size range
	rejected      map[string]uint64 // by reason: queue-full, queue-timeout, over-cap, slot-wait, ...
	wait          Histogram
	response      Histogram
}

func (c *Controller) stats(customer string) *customerStats {
	cs := c.custs[customer]
	if cs == nil {
		cs = &customerStats{rejected: make(map[string]uint64)}
		c.custs[customer] = cs
	}
	return cs
}

// noteSize counts a response outside the normal-size range against the
// customer of the request it answered (the oldest in service on its
// flow). Charging itself follows the measured service time; this count
// shows an operator when "typical" stopped being typical for a customer.
func (c *Controller) noteSize(rec *flowRec, bytes uint64) {
	n := c.cfg.NormalSize
	if n.Max == 0 || rec == nil || len(rec.serving) == 0 {
		return
	}
	if bytes < n.Min || bytes > n.Max {
		c.stats(rec.serving[0].customer).outsideNormal++
	}
}

// HistogramBounds are the upper bounds (seconds) of the latency buckets:
// 1 ms to 10 s, roughly logarithmic.
var HistogramBounds = [...]float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10}

// Histogram is a fixed-bucket latency histogram: Counts[i] counts values
// up to HistogramBounds[i] (above the one before), the last one those
// beyond; Sum and N give the mean.
type Histogram struct {
	Counts [len(HistogramBounds) + 1]uint64
	Sum    float64 // seconds
	N      uint64
}

// Observe adds one value.
func (h *Histogram) Observe(d time.Duration) {
	v := d.Seconds()
	i := sort.SearchFloat64s(HistogramBounds[:], v)
	h.Counts[i]++
	h.Sum += v
	h.N++
}

// Quantile estimates a quantile by linear interpolation inside the
// bucket it falls in (bucket resolution; good enough for a status table).
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.N == 0 {
		return 0
	}
	rank := q * float64(h.N)
	var cum float64
	lower := 0.0
	for i, n := range h.Counts {
		upper := math.Inf(1)
		if i < len(HistogramBounds) {
			upper = HistogramBounds[i]
		}
		if cum+float64(n) >= rank && n > 0 {
			if math.IsInf(upper, 1) {
				return time.Duration(lower * 1e9)
			}
			frac := (rank - cum) / float64(n)
			return time.Duration((lower + frac*(upper-lower)) * 1e9)
		}
		cum += float64(n)
		lower = upper
	}
	return time.Duration(lower * 1e9)
}

// Mean is the mean value, 0 without values.
func (h *Histogram) Mean() time.Duration {
	if h.N == 0 {
		return 0
	}
	return time.Duration(h.Sum / float64(h.N) * 1e9)
}

// Status is the controller's part of the front-end's /status.
type Status struct {
	Backends  []BackendStatus  `json:"backends"`
	Customers []CustomerStatus `json:"customers"`
	// Refunds counts charges given back: requests that never reached a
	// back-end or whose back-end died.
	Refunds uint64 `json:"refunds"`
	// LateFeedbacks counts requests whose Feedback came after their
	// connection closed, within the wait (latefeedback.go), and were
	// charged what they cost; LateUnreported those whose Feedback did not
	// come by the wait's end, charged as typical requests.
	LateFeedbacks  uint64 `json:"late_feedbacks"`
	LateUnreported uint64 `json:"late_unreported"`
	// Queue is the number of requests waiting for a back-end.
	Queue int `json:"queue"`
	// Lifo is the class-based policies' state; nil without them.
	Lifo *LifoStatus `json:"lifo,omitempty"`
	// Feedback is the feedback policy's state; nil without it.
	Feedback *FeedbackStatus `json:"feedback,omitempty"`
	// Flows is the number of connections the controller keeps a record
	// of (queued, being handed off or in service).
	Flows int `json:"controller_flows"`
	// ControlRefused counts control messages refused, by reason: those
	// the controller refused (binding.go) and, added by the daemon,
	// those its Codec refused (proto.RefusalReason).
	ControlRefused map[string]uint64 `json:"control_refused"`
}

// BackendStatus is one back-end in Status.
type BackendStatus struct {
	ID             uint32  `json:"id"`
	IP             string  `json:"ip"`
	MAC            string  `json:"mac"`
	Alive          bool    `json:"alive"`
	Deaths         uint64  `json:"deaths"`
	Capacity       int     `json:"capacity"`
	Active         int     `json:"active"`
	Reported       int     `json:"reported_concurrency"`
	Dispatched     uint64  `json:"dispatched"`
	FollowUps      uint64  `json:"follow_ups"`
	Reconciled     uint64  `json:"slots_reconciled"`
	Closed         uint64  `json:"closed"`
	Served         uint64  `json:"served"`
	ResponseBytes  uint64  `json:"response_bytes"`
	ForwardedBytes uint64  `json:"forwarded_bytes"`
	MeanServiceMs  float64 `json:"mean_service_ms"`
	// MeanHandoffMs is dispatch to the shim's SpliceAck (C2 handshake
	// and Splice round trip); MeanSlotMs is the time served requests held
	// a slot (sent on C2 to Feedback), and MeanSlotExcessMs its part
	// beyond the service time the back-end measured: what a request
	// costs the cluster on top of its work.
	MeanHandoffMs    float64 `json:"mean_handoff_ms"`
	MeanSlotMs       float64 `json:"mean_slot_ms"`
	MeanSlotExcessMs float64 `json:"mean_slot_excess_ms"`
	// InService counts requests sent to it and not reported done (at
	// most its capacity); Ready the connections handed off ahead and
	// waiting for one of those slots; HeldHandoffs how many ever waited;
	// Parked the follow-ups waiting for a slot. PeakReported is the
	// highest concurrency its shim ever reported.
	InService    int    `json:"in_service"`
	Ready        int    `json:"ready"`
	HeldHandoffs uint64 `json:"held_handoffs"`
	Parked       int    `json:"parked"`
	PeakReported int    `json:"peak_reported_concurrency"`
	// For /metrics (issue 12): the exact sum of the service times the
	// back-end reported, and the handoff, slot and service times as
	// histograms.
	ServiceSeconds float64   `json:"service_seconds"`
	Handoff        Histogram `json:"-"`
	Slot           Histogram `json:"-"`
	Service        Histogram `json:"-"`
}

// CustomerStatus is one customer (or, for class-based listeners, one
// class) in Status.
type CustomerStatus struct {
	Name          string            `json:"name"`
	Reservation   float64           `json:"reservation"`
	Balance       float64           `json:"balance"`
	Queued        int               `json:"queued"`
	Charged       float64           `json:"charged_credits"`
	Offered       uint64            `json:"offered"`
	Admitted      uint64            `json:"admitted"`
	Served        uint64            `json:"served"`
	Refunded      uint64            `json:"refunded"`
	Abandoned     uint64            `json:"abandoned"`
	OutsideNormal uint64            `json:"outside_normal_size"`
	Rejected      map[string]uint64 `json:"rejected"`
	WaitP50Ms     float64           `json:"wait_p50_ms"`
	RespP50Ms     float64           `json:"response_p50_ms"`
	RespP99Ms     float64           `json:"response_p99_ms"`
	RespMeanMs    float64           `json:"response_mean_ms"`
	// Wait (arrival to dispatch) and Response (wait plus the measured
	// service time), for /metrics.
	Wait     Histogram `json:"-"`
	Response Histogram `json:"-"`
}

// LifoStatus is the class-based policies' state in Status.
type LifoStatus struct {
	// Utilization is that of the last complete interval.
	Utilization float64 `json:"utilization"`
	// LIFO says whether lifo-pri serves browsing requests newest first.
	LIFO    bool `json:"lifo"`
	SlotsIn int  `json:"slots_in_use"`
}

// Status is a snapshot of the controller's state at now. It changes
// nothing the scheduling depends on.
func (c *Controller) Status(now splice.Time) Status {
	now = max(now, c.now)
	st := Status{Refunds: c.refunds, LateFeedbacks: c.lateServed, LateUnreported: c.lateUnreported, Flows: len(c.flows), Backends: []BackendStatus{}, ControlRefused: maps.Clone(c.refused)}
	if st.ControlRefused == nil {
		st.ControlRefused = map[string]uint64{}
	}
	for _, q := range c.queues {
		st.Queue += q.policy.Len()
		if q.hasHead {
			st.Queue++
		}
	}
	st.Customers = c.customerStatus(now)
	if c.lifo != nil {
		st.Lifo = &LifoStatus{Utilization: c.lifo.last, LIFO: c.lifo.lifo(), SlotsIn: c.lifo.meter.InUse()}
	}
	st.Feedback = c.feedbackStatus(now)
	for _, be := range c.order {
		b := BackendStatus{
			ID: be.id, IP: be.ip.String(), MAC: be.mac.String(), Alive: be.alive, Deaths: be.deaths,
			Capacity: be.capacity, Active: c.disp.Active(sched.BackendID(be.id)), Reported: be.reported,
			Dispatched: be.dispatched, FollowUps: be.followUps, Reconciled: be.reconciled, Closed: be.closed,
			Served: be.served, ResponseBytes: be.responseBytes, ForwardedBytes: be.forwardedBytes,
			InService: be.sent, Ready: len(be.ready), HeldHandoffs: be.heldHandoffs, Parked: len(be.parked),
			PeakReported:   be.peakReported,
			ServiceSeconds: be.serviceTotal.Seconds(),
			Handoff:        be.handoffTimes, Slot: be.slotTimes, Service: be.serviceTimes,
		}
		b.MeanServiceMs = meanMs(be.serviceTotal, be.served)
		b.MeanHandoffMs = meanMs(be.handoffTotal, be.handoffs)
		b.MeanSlotMs = meanMs(be.slotTotal, be.slotsTimed)
		b.MeanSlotExcessMs = meanMs(be.slotExcess, be.slotsTimed)
		st.Backends = append(st.Backends, b)
	}
	return st
}

func meanMs(total time.Duration, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return millis(total) / float64(n)
}

func millis(d time.Duration) float64 { return float64(d) / 1e6 }

// customerStatus merges the scheduler's view of each customer with the
// controller's counters: credit customers in configuration order, then
// classes, then any other name seen, sorted.
func (c *Controller) customerStatus(now splice.Time) []CustomerStatus {
	var out []CustomerStatus
	seen := map[string]bool{}
	res := map[string]float64{}
	for _, cu := range c.cfg.Credit.Customers {
		res[cu.Name] = cu.Reservation
	}
	add := func(name string) *CustomerStatus {
		seen[name] = true
		cs := c.stats(name)
		out = append(out, CustomerStatus{
			Name: name, Reservation: res[name],
			Offered: cs.offered, Admitted: cs.admitted, Served: cs.served, Refunded: cs.refunded,
			Abandoned: cs.abandoned, OutsideNormal: cs.outsideNormal,
			Rejected:   maps.Clone(cs.rejected),
			WaitP50Ms:  millis(cs.wait.Quantile(0.5)),
			RespP50Ms:  millis(cs.response.Quantile(0.5)),
			RespP99Ms:  millis(cs.response.Quantile(0.99)),
			RespMeanMs: millis(cs.response.Mean()),
			Wait:       cs.wait, Response: cs.response,
		})
		return &out[len(out)-1]
	}
	if c.credit != nil {
		for _, cst := range c.credit.Snapshot(int64(now)) {
			cu := add(cst.Name)
			cu.Balance, cu.Queued, cu.Charged = cst.Balance, cst.Queued, cst.Charged
		}
	}
	// Class-based queues report per class; a class two such policies
	// share (say lifo-pri and single-fifo listeners) adds up.
	classAt := map[string]int{}
	for _, q := range c.queues {
		if q.lifo == nil {
			continue
		}
		for _, cst := range q.lifo.Snapshot() {
			i, ok := classAt[cst.Name]
			if !ok {
				if seen[cst.Name] {
					continue // also a credit customer: keep the credit view
				}
				add(cst.Name)
				i = len(out) - 1
				classAt[cst.Name] = i
			}
			out[i].Queued += cst.Queued
		}
	}
	// The feedback classes likewise.
	if c.fb != nil {
		for _, cst := range c.fb.policy.Snapshot() {
			if seen[cst.Name] {
				for i := range out {
					if out[i].Name == cst.Name {
						out[i].Queued += cst.Queued + cst.Reserve
					}
				}
				continue
			}
			add(cst.Name).Queued = cst.Queued + cst.Reserve
		}
	}
	names := make([]string, 0, len(c.custs))
	for name := range c.custs {
		if !seen[name] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		add(n)
	}
	// The head request of a queue that found no back-end yet still waits.
	for _, q := range c.queues {
		if !q.hasHead {
			continue
		}
		for i := range out {
			if out[i].Name == q.head.Customer {
				out[i].Queued++
				break
			}
		}
	}
	return out
}
