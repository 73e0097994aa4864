package frontend

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/splice"
)

// LimitsStatus is what bounds the engine's state (splice/limits.go): the
// limits in force (0: off), how much of them is in use, and what they
// refused or ended.
type LimitsStatus struct {
	MaxFlows          int     `json:"max_flows"`
	MaxFlowsPerSource int     `json:"max_flows_per_source"`
	MaxPortsPerSource int     `json:"max_ports_per_source"`
	FlowLifetime      float64 `json:"flow_lifetime_seconds"`
	HalfCloseTimeout  float64 `json:"half_close_timeout_seconds"`
	HeadTimeout       float64 `json:"head_timeout_seconds"`

	Flows        uint64 `json:"flows"`
	Sources      uint64 `json:"sources"`       // client addresses holding flows or ports
	HandoffPorts uint64 `json:"handoff_ports"` // handoff connections held

	RefusedSYNFlows     uint64 `json:"refused_syn_flows"`     // SYNs dropped: max_flows
	RefusedSYNSource    uint64 `json:"refused_syn_source"`    // SYNs dropped: max_flows_per_source
	RefusedAcceptFlows  uint64 `json:"refused_accept_flows"`  // cookie ACKs reset: max_flows
	RefusedAcceptSource uint64 `json:"refused_accept_source"` // cookie ACKs reset: max_flows_per_source
	RefusedPortsSource  uint64 `json:"refused_ports_source"`  // dispatches refused: max_ports_per_source
	HeadDeadlineFreed   uint64 `json:"head_deadline_freed"`   // silent clients reset at the head deadline
	LifetimeExpired     uint64 `json:"lifetime_expired"`      // flows reset at flow_lifetime
	HalfClosedReleased  uint64 `json:"half_closed_released"`  // ports freed after the back-end's FIN
	Evicted             uint64 `json:"evicted"`               // headless flows reset to make room at max_flows
	TablesRebuilt       uint64 `json:"tables_rebuilt"`        // maps rebuilt smaller after a peak
}

// limitsStatus reports the engine's limits as configured in cfg (the
// engine's defaults where cfg leaves them 0) and its counters es.
func limitsStatus(cfg *Config, es *splice.FrontEndStats) LimitsStatus {
	ecfg := splice.FrontEndConfig{MaxFlows: cfg.MaxFlows, MaxFlowsPerSource: cfg.MaxFlowsPerSource,
		MaxPortsPerSource: cfg.MaxPortsPerSource, FlowLifetime: cfg.FlowLifetime,
		HalfCloseTimeout: cfg.HalfCloseTimeout, HeadTimeout: cfg.HeadTimeout}
	ecfg = ecfg.WithDefaults()
	off := func(n int) int { return max(n, 0) }
	return LimitsStatus{
		MaxFlows: off(ecfg.MaxFlows), MaxFlowsPerSource: off(ecfg.MaxFlowsPerSource),
		MaxPortsPerSource: off(ecfg.MaxPortsPerSource),
		FlowLifetime:      max(ecfg.FlowLifetime, 0).Seconds(),
		HalfCloseTimeout:  max(ecfg.HalfCloseTimeout, 0).Seconds(),
		HeadTimeout:       ecfg.HeadTimeout.Seconds(),
		Flows:             es.Flows, Sources: es.Sources, HandoffPorts: es.HandoffPorts,
		RefusedSYNFlows: es.RefusedSYNFlows, RefusedSYNSource: es.RefusedSYNSource,
		RefusedAcceptFlows: es.RefusedAcceptFlows, RefusedAcceptSource: es.RefusedAcceptSource,
		RefusedPortsSource: es.RefusedPortsSource, HeadDeadlineFreed: es.HeadDeadlineFreed,
		LifetimeExpired: es.LifetimeExpired, HalfClosedReleased: es.HalfClosedReleased, Evicted: es.Evicted,
		TablesRebuilt: es.TablesRebuilt,
	}
}

// writeLimitMetrics renders LimitsStatus.
func writeLimitMetrics(b io.Writer, l *LimitsStatus) {
	g := func(name, help, typ string) { fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ) }
	g("qsplice_frontend_limit", "Bounds on the engine's state as configured (0: off; durations in seconds).", "gauge")
	fmt.Fprintf(b, "qsplice_frontend_limit{limit=\"max_flows\"} %d\n", l.MaxFlows)
	fmt.Fprintf(b, "qsplice_frontend_limit{limit=\"max_flows_per_source\"} %d\n", l.MaxFlowsPerSource)
	fmt.Fprintf(b, "qsplice_frontend_limit{limit=\"max_ports_per_source\"} %d\n", l.MaxPortsPerSource)
	fmt.Fprintf(b, "qsplice_frontend_limit{limit=\"head_timeout\"} %g\n", l.HeadTimeout)
	fmt.Fprintf(b, "qsplice_frontend_limit{limit=\"flow_lifetime\"} %g\n", l.FlowLifetime)
	fmt.Fprintf(b, "qsplice_frontend_limit{limit=\"half_close_timeout\"} %g\n", l.HalfCloseTimeout)
	g("qsplice_frontend_sources", "Client addresses holding flows not handed off or handoff ports.", "gauge")
	fmt.Fprintf(b, "qsplice_frontend_sources %d\n", l.Sources)
	g("qsplice_frontend_handoff_ports", "Handoff connections (C2) held.", "gauge")
	fmt.Fprintf(b, "qsplice_frontend_handoff_ports %d\n", l.HandoffPorts)
	g("qsplice_frontend_limit_refusals_total", "What the limits refused: SYNs dropped, handshake ACKs reset, dispatches answered 503.", "counter")
	for _, r := range []struct {
		limit, what string
		n           uint64
	}{
		{"max_flows", "syn", l.RefusedSYNFlows},
		{"max_flows_per_source", "syn", l.RefusedSYNSource},
		{"max_flows", "accept", l.RefusedAcceptFlows},
		{"max_flows_per_source", "accept", l.RefusedAcceptSource},
		{"max_ports_per_source", "dispatch", l.RefusedPortsSource},
	} {
		fmt.Fprintf(b, "qsplice_frontend_limit_refusals_total{limit=%q,what=%q} %d\n", r.limit, r.what, r.n)
	}
	g("qsplice_frontend_limit_closes_total", "Connections a limit ended: silent at the head deadline, past the flow lifetime, idle after the back-end's FIN, evicted without a head when the table was full.", "counter")
	fmt.Fprintf(b, "qsplice_frontend_limit_closes_total{limit=\"head_timeout\"} %d\n", l.HeadDeadlineFreed)
	fmt.Fprintf(b, "qsplice_frontend_limit_closes_total{limit=\"flow_lifetime\"} %d\n", l.LifetimeExpired)
	fmt.Fprintf(b, "qsplice_frontend_limit_closes_total{limit=\"half_close_timeout\"} %d\n", l.HalfClosedReleased)
	fmt.Fprintf(b, "qsplice_frontend_limit_closes_total{limit=\"max_flows\"} %d\n", l.Evicted)
	g("qsplice_frontend_tables_rebuilt_total", "Engine tables rebuilt smaller after a peak, so a flood's memory goes back.", "counter")
	fmt.Fprintf(b, "qsplice_frontend_tables_rebuilt_total %d\n", l.TablesRebuilt)
}

// writeMetrics renders Status in the Prometheus text format.
func writeMetrics(w io.Writer, st *Status) {
	var b strings.Builder
	g := func(name, help, typ string) { fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ) }
	g("qsplice_frontend_frames_total", "Frames through the front-end link by direction.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_frames_total{dir=\"rx\"} %d\n", st.Engine.RxFrames)
	fmt.Fprintf(&b, "qsplice_frontend_frames_total{dir=\"tx\"} %d\n", st.Engine.TxFrames)
	g("qsplice_frontend_drops_total", "Frames dropped by the engine, by reason.", "counter")
	reasons := make([]string, 0, len(st.Drops))
	for r := range st.Drops {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(&b, "qsplice_frontend_drops_total{reason=%q} %d\n", r, st.Drops[r])
	}
	g("qsplice_frontend_rsts_suppressed_total", "RSTs to segments without a connection not sent: over the RST rate limit.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_rsts_suppressed_total %d\n", st.Engine.RSTsSuppressed)
	g("qsplice_frontend_control_refused_total", "Control datagrams refused, by reason (forged, replayed, reflected, from the wrong address, ...).", "counter")
	refusals := make([]string, 0, len(st.ControlRefused))
	for r := range st.ControlRefused {
		refusals = append(refusals, r)
	}
	sort.Strings(refusals)
	for _, r := range refusals {
		fmt.Fprintf(&b, "qsplice_frontend_control_refused_total{reason=%q} %d\n", r, st.ControlRefused[r])
	}
	g("qsplice_frontend_flows", "Client connections held by the engine.", "gauge")
	fmt.Fprintf(&b, "qsplice_frontend_flows %d\n", st.Engine.Flows)
	g("qsplice_frontend_refunds_total", "Charged requests given back to their customers.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_refunds_total %d\n", st.Refunds)
	g("qsplice_frontend_queue_length", "Requests waiting for a back-end.", "gauge")
	fmt.Fprintf(&b, "qsplice_frontend_queue_length %d\n", st.Queue)
	g("qsplice_frontend_requests_total", "Request heads parsed.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_requests_total %d\n", st.Engine.Requests)
	g("qsplice_frontend_handoffs_total", "Handoffs by outcome.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_handoffs_total{outcome=\"done\"} %d\n", st.Engine.HandoffsDone)
	fmt.Fprintf(&b, "qsplice_frontend_handoffs_total{outcome=\"failed\"} %d\n", st.Engine.HandoffsFailed)
	g("qsplice_frontend_follow_ups_total", "Requests that followed on spliced keep-alive connections, by what became of them besides scheduling.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_follow_ups_total{outcome=\"seen\"} %d\n", st.Engine.FollowUps)
	fmt.Fprintf(&b, "qsplice_frontend_follow_ups_total{outcome=\"unfollowable\"} %d\n", st.Engine.FollowUpsUnfollowable)
	fmt.Fprintf(&b, "qsplice_frontend_follow_ups_total{outcome=\"refused_in_stream\"} %d\n", st.Engine.FollowUpsRefused)
	fmt.Fprintf(&b, "qsplice_frontend_follow_ups_total{outcome=\"refused_reset\"} %d\n", st.Engine.FollowUpsReset)
	g("qsplice_frontend_chunked_bodies_total", "Chunked request bodies followed to their end.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_chunked_bodies_total %d\n", st.Engine.ChunkedBodies)
	g("qsplice_frontend_challenge_acks_total", "Challenge ACKs (RFC 5961) to segments not accepted, sent or held back by the rate limit.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_challenge_acks_total{outcome=\"sent\"} %d\n", st.Engine.ChallengeAcks)
	fmt.Fprintf(&b, "qsplice_frontend_challenge_acks_total{outcome=\"limited\"} %d\n", st.Engine.ChallengeAcksLimited)
	g("qsplice_frontend_reply_payload_bytes_total", "Back-end reply payload bytes that reached the front-end (0 with one-way splicing).", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_reply_payload_bytes_total %d\n", st.Engine.ReplyPayloadBytes)
	g("qsplice_frontend_forwarded_bytes_total", "Client payload bytes forwarded after splicing.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_forwarded_bytes_total %d\n", st.Engine.ForwardedBytes)
	writeLimitMetrics(&b, &st.Limits)
	writeCustomerMetrics(&b, st)
	if st.Lifo != nil {
		g("qsplice_lifo_utilization", "Cluster utilization over the last LIFO-Pri interval (busy slot time / slot time).", "gauge")
		fmt.Fprintf(&b, "qsplice_lifo_utilization %g\n", st.Lifo.Utilization)
		g("qsplice_lifo_browsing_lifo", "1 while lifo-pri serves browsing requests newest first.", "gauge")
		lifo := 0
		if st.Lifo.LIFO {
			lifo = 1
		}
		fmt.Fprintf(&b, "qsplice_lifo_browsing_lifo %d\n", lifo)
	}
	g("qsplice_backend_alive", "1 while the back-end answers keepalives.", "gauge")
	for _, be := range st.Backends {
		alive := 0
		if be.Alive {
			alive = 1
		}
		fmt.Fprintf(&b, "qsplice_backend_alive{backend=\"%d\"} %d\n", be.ID, alive)
	}
	g("qsplice_backend_active", "Requests dispatched to the back-end and not closed.", "gauge")
	for _, be := range st.Backends {
		fmt.Fprintf(&b, "qsplice_backend_active{backend=\"%d\"} %d\n", be.ID, be.Active)
	}
	g("qsplice_backend_served_total", "Responses the back-end reported.", "counter")
	for _, be := range st.Backends {
		fmt.Fprintf(&b, "qsplice_backend_served_total{backend=\"%d\"} %d\n", be.ID, be.Served)
	}
	g("qsplice_backend_service_seconds_total", "Sum of the service times the back-end reported (divide by served for the mean).", "counter")
	for _, be := range st.Backends {
		fmt.Fprintf(&b, "qsplice_backend_service_seconds_total{backend=\"%d\"} %g\n", be.ID, be.MeanServiceMs*float64(be.Served)/1e3)
	}
	g("qsplice_backend_reported_concurrency", "Requests in service as the back-end's shim last reported.", "gauge")
	for _, be := range st.Backends {
		fmt.Fprintf(&b, "qsplice_backend_reported_concurrency{backend=\"%d\"} %d\n", be.ID, be.Reported)
	}
	g("qsplice_frontend_link_kernel_drops_total", "Frames the kernel dropped because the front-end's socket buffer was full.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_link_kernel_drops_total %d\n", st.KernelDrops)
	g("qsplice_backend_response_bytes_total", "Response bytes the back-end reported sending straight to clients.", "counter")
	for _, be := range st.Backends {
		fmt.Fprintf(&b, "qsplice_backend_response_bytes_total{backend=\"%d\"} %d\n", be.ID, be.ResponseBytes)
	}
	w.Write([]byte(b.String()))
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
	counter("qsplice_customer_refunded_total", "Charged requests given back: never reached a back-end, or their back-end died.", func(c *CustomerStatus) uint64 { return c.Refunded })
	counter("qsplice_customer_abandoned_total", "Requests whose client left while they waited.", func(c *CustomerStatus) uint64 { return c.Abandoned })
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
	for i := range st.Customers {
		c := &st.Customers[i]
		writeHistogram(b, &c.Wait, "qsplice_customer_queue_wait_seconds", fmt.Sprintf("customer=%q", c.Name))
	}
	g("qsplice_customer_response_seconds", "Queue wait plus the service time the back-end measured.", "histogram")
	for i := range st.Customers {
		c := &st.Customers[i]
		writeHistogram(b, &c.Response, "qsplice_customer_response_seconds", fmt.Sprintf("customer=%q", c.Name))
	}
}

// writeHistogram writes h as a Prometheus histogram with the given labels.
func writeHistogram(w io.Writer, h *controller.Histogram, name, labels string) {
	var cum uint64
	for i, b := range controller.HistogramBounds {
		cum += h.Counts[i]
		fmt.Fprintf(w, "%s_bucket{%s,le=\"%g\"} %d\n", name, labels, b, cum)
	}
	cum += h.Counts[len(controller.HistogramBounds)]
	fmt.Fprintf(w, "%s_bucket{%s,le=\"+Inf\"} %d\n", name, labels, cum)
	fmt.Fprintf(w, "%s_sum{%s} %g\n", name, labels, h.Sum)
	fmt.Fprintf(w, "%s_count{%s} %d\n", name, labels, h.N)
}
