package frontend

import (
	"fmt"
	"github.com/qsplice/qsplice/splice"
	"io"
	"math"
	"sort"
	"time"
)

// customerStats are the per-customer counters behind /status and /metrics.
type customerStats struct {
	offered, admitted, served, refunded uint64
	outsideNormal                       uint64            // responses outside the normal-size range
	rejected                            map[string]uint64 // by reason: queue-full, queue-timeout, over-cap, unknown-customer
	wait, response                      histogram
}

func (d *Daemon) stats(customer string) *customerStats {
	cs := d.custs[customer]
	if cs == nil {
		cs = &customerStats{rejected: make(map[string]uint64)}
		d.custs[customer] = cs
	}
	return cs
}

// histogramBounds are the upper bounds (seconds) of the latency buckets:
// 1 ms to 10 s, roughly logarithmic.
var histogramBounds = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10}

// histogram is a fixed-bucket latency histogram in the Prometheus
// cumulative form, plus the sum for the mean.
type histogram struct {
	counts [14]uint64 // len(histogramBounds)+1: the last is +Inf
	sum    float64
	n      uint64
}

func (h *histogram) observe(d time.Duration) {
	v := d.Seconds()
	i := sort.SearchFloat64s(histogramBounds, v)
	h.counts[i]++
	h.sum += v
	h.n++
}

// quantile estimates a quantile by linear interpolation inside the
// bucket it falls in (bucket resolution; good enough for a status table).
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := q * float64(h.n)
	var cum float64
	lower := 0.0
	for i, c := range h.counts {
		upper := math.Inf(1)
		if i < len(histogramBounds) {
			upper = histogramBounds[i]
		}
		if cum+float64(c) >= rank && c > 0 {
			if math.IsInf(upper, 1) {
				return time.Duration(lower * 1e9)
			}
			frac := (rank - cum) / float64(c)
			return time.Duration((lower + frac*(upper-lower)) * 1e9)
		}
		cum += float64(c)
		lower = upper
	}
	return time.Duration(lower * 1e9)
}

// writeProm writes h as a Prometheus histogram with the given labels.
func (h *histogram) writeProm(w io.Writer, name, labels string) {
	var cum uint64
	for i, b := range histogramBounds {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{%s,le=\"%g\"} %d\n", name, labels, b, cum)
	}
	cum += h.counts[len(histogramBounds)]
	fmt.Fprintf(w, "%s_bucket{%s,le=\"+Inf\"} %d\n", name, labels, cum)
	fmt.Fprintf(w, "%s_sum{%s} %g\n", name, labels, h.sum)
	fmt.Fprintf(w, "%s_count{%s} %d\n", name, labels, h.n)
}

// CustomerStatus is one customer in Status.
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
	OutsideNormal uint64            `json:"outside_normal_size"`
	Rejected      map[string]uint64 `json:"rejected"`
	WaitP50Ms     float64           `json:"wait_p50_ms"`
	RespP50Ms     float64           `json:"response_p50_ms"`
	RespP99Ms     float64           `json:"response_p99_ms"`
	RespMeanMs    float64           `json:"response_mean_ms"`
}

// customerStatus merges the scheduler's view of each customer with the
// daemon's counters.
func (d *Daemon) customerStatus() []CustomerStatus {
	var out []CustomerStatus
	seen := map[string]bool{}
	res := map[string]float64{}
	for _, c := range d.cfg.Credit.Customers {
		res[c.Name] = c.Reservation
	}
	add := func(name string) *CustomerStatus {
		seen[name] = true
		cs := d.stats(name)
		out = append(out, CustomerStatus{
			Name: name, Reservation: res[name],
			Offered: cs.offered, Admitted: cs.admitted, Served: cs.served, Refunded: cs.refunded,
			OutsideNormal: cs.outsideNormal,
			Rejected:      cs.rejected,
			WaitP50Ms:     ms(cs.wait.quantile(0.5)),
			RespP50Ms:     ms(cs.response.quantile(0.5)),
			RespP99Ms:     ms(cs.response.quantile(0.99)),
			RespMeanMs:    meanMs(&cs.response),
		})
		return &out[len(out)-1]
	}
	if d.credit != nil {
		for _, cst := range d.credit.Snapshot(int64(d.now(time.Now()))) {
			c := add(cst.Name)
			c.Balance, c.Queued, c.Charged = cst.Balance, cst.Queued, cst.Charged
		}
	}
	// Class-based queues report per class; a class two such policies
	// share (say lifo-pri and single-fifo listeners) adds up.
	classAt := map[string]int{}
	for _, q := range d.queues {
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
		// The head request that found no back-end yet still waits.
		if w := q.waiting; w != nil {
			if i, ok := classAt[w.Customer]; ok {
				out[i].Queued++
			}
		}
	}
	names := make([]string, 0, len(d.custs))
	for name := range d.custs {
		if !seen[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		add(n)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func meanMs(h *histogram) float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n) * 1e3
}

// writeCustomerMetrics renders the per-customer series.
func writeCustomerMetrics(b io.Writer, st *Status) {
	g := func(name, help, typ string) { fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ) }
	counter := func(name, help string, v func(c *CustomerStatus) uint64) {
		g(name, help, "counter")
		for i := range st.Customers {
			fmt.Fprintf(b, "%s{customer=%q} %d\n", name, st.Customers[i].Name, v(&st.Customers[i]))
		}
	}
	counter("qsplice_customer_offered_total", "Requests that arrived.", func(c *CustomerStatus) uint64 { return c.Offered })
	counter("qsplice_customer_admitted_total", "Requests dispatched to a back-end.", func(c *CustomerStatus) uint64 { return c.Admitted })
	counter("qsplice_customer_served_total", "Requests the back-ends reported served.", func(c *CustomerStatus) uint64 { return c.Served })
	counter("qsplice_customer_outside_normal_size_total", "Responses whose size fell outside the normal-size range the reservations assume.", func(c *CustomerStatus) uint64 { return c.OutsideNormal })
	counter("qsplice_customer_refunded_total", "Requests refunded because their back-end died.", func(c *CustomerStatus) uint64 { return c.Refunded })
	g("qsplice_customer_rejected_total", "Requests answered by the front-end instead of served, by reason.", "counter")
	for _, c := range st.Customers {
		reasons := make([]string, 0, len(c.Rejected))
		for r := range c.Rejected {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		for _, r := range reasons {
			fmt.Fprintf(b, "qsplice_customer_rejected_total{customer=%q,reason=%q} %d\n", c.Name, r, c.Rejected[r])
		}
	}
	g("qsplice_customer_charged_credits_total", "Credits charged, corrected by measured service time.", "counter")
	for _, c := range st.Customers {
		fmt.Fprintf(b, "qsplice_customer_charged_credits_total{customer=%q} %g\n", c.Name, c.Charged)
	}
	g("qsplice_customer_balance_credits", "Current credit balance.", "gauge")
	for _, c := range st.Customers {
		fmt.Fprintf(b, "qsplice_customer_balance_credits{customer=%q} %g\n", c.Name, c.Balance)
	}
	g("qsplice_customer_queue_wait_seconds", "Time from arrival to dispatch.", "histogram")
	for _, c := range st.Customers {
		h := st.hists[c.Name]
		h[0].writeProm(b, "qsplice_customer_queue_wait_seconds", fmt.Sprintf("customer=%q", c.Name))
	}
	g("qsplice_customer_response_seconds", "Queue wait plus the service time the back-end measured.", "histogram")
	for _, c := range st.Customers {
		h := st.hists[c.Name]
		h[1].writeProm(b, "qsplice_customer_response_seconds", fmt.Sprintf("customer=%q", c.Name))
	}
}

// noteSize counts a response outside the normal-size range against the
// customer of the request it answered (the oldest in service on its
// flow). Charging itself follows the measured service time; this count
// shows an operator when "typical" stopped being typical for a customer.
func (d *Daemon) noteSize(flow splice.FlowID, bytes uint64) {
	n := d.cfg.NormalSize
	s, ok := d.inService[flow]
	if n.Max == 0 || !ok || len(s.reqs) == 0 {
		return
	}
	if bytes < n.Min || bytes > n.Max {
		d.stats(s.reqs[0].customer).outsideNormal++
	}
}
