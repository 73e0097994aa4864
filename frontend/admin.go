package frontend

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
)

// Status is the front-end's state as /status reports it.
type Status struct {
	Link      string           `json:"link"`
	MAC       string           `json:"mac"`
	VIPs      []string         `json:"vips"`
	Handoff   string           `json:"handoff"`
	Ports     []uint16         `json:"ports"`
	Backends  []BackendStatus  `json:"backends"`
	Customers []CustomerStatus `json:"customers"`
	// hists are the customers' histograms, copied for /metrics.
	hists         map[string][2]histogram
	Refunds       uint64 `json:"refunds"`
	Reloads       uint64 `json:"reloads"`
	ReloadsFailed uint64 `json:"reloads_failed"`
	Queue         int    `json:"queue"`
	// Lifo is the class-based policies' state; nil without them.
	Lifo     *LifoStatus       `json:"lifo,omitempty"`
	Engine   EngineStatus      `json:"engine"`
	LinkStat link.Stats        `json:"link_stats"`
	Drops    map[string]uint64 `json:"drops"`
	Uptime   float64           `json:"uptime_seconds"`
	BadCtl   uint64            `json:"bad_control_messages"`
	// KernelDrops counts frames the kernel dropped because the AF_PACKET
	// socket's buffer was full (the event loop fell behind).
	KernelDrops uint64 `json:"kernel_drops"`
}

// BackendStatus is one back-end in Status.
type BackendStatus struct {
	ID             uint32  `json:"id"`
	IP             string  `json:"ip"`
	MAC            string  `json:"mac"`
	Alive          bool    `json:"alive"`
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
	// waiting for one of those slots; HeldHandoffs how many ever waited.
	// PeakReported is the highest concurrency its shim ever reported.
	InService    int    `json:"in_service"`
	Ready        int    `json:"ready"`
	HeldHandoffs uint64 `json:"held_handoffs"`
	PeakReported int    `json:"peak_reported_concurrency"`
}

// EngineStatus is the engine's counters.
type EngineStatus struct {
	Flows             uint64            `json:"flows"`
	RxFrames          uint64            `json:"rx_frames"`
	TxFrames          uint64            `json:"tx_frames"`
	Accepted          uint64            `json:"accepted"`
	Requests          uint64            `json:"requests"`
	HandoffsStarted   uint64            `json:"handoffs_started"`
	HandoffsDone      uint64            `json:"handoffs_done"`
	HandoffsFailed    uint64            `json:"handoffs_failed"`
	Retransmits       uint64            `json:"retransmits"`
	ForwardedFrames   uint64            `json:"forwarded_frames"`
	ForwardedBytes    uint64            `json:"forwarded_bytes"`
	HandedOffBytes    uint64            `json:"handed_off_bytes"`
	ReplyPayloadBytes uint64            `json:"reply_payload_bytes"`
	FollowUps         uint64            `json:"follow_ups"`
	FollowUpsUntrack  uint64            `json:"follow_ups_untracked"`
	FollowUpsRefused  uint64            `json:"follow_ups_refused"` // answered in their stream
	FollowUpsReset    uint64            `json:"follow_ups_reset"`   // refused, but the stream had to be reset
	AckStorms         uint64            `json:"ack_storms"`
	Answered          map[string]uint64 `json:"answered"`
	States            map[string]int    `json:"flow_states"`
}

func (d *Daemon) status() Status {
	es := d.engine.Stats()
	st := Status{
		Link: d.cfg.Link, MAC: d.cfg.MAC.String(), Handoff: d.cfg.Handoff.String(), Ports: d.cfg.Ports,
		LinkStat: d.link.Stats(), Uptime: time.Since(d.epoch).Seconds(), BadCtl: d.ctl.bad,
		Drops: map[string]uint64{},
		Engine: EngineStatus{
			Flows: es.Flows, RxFrames: es.RxFrames, TxFrames: es.TxFrames, Accepted: es.Accepted,
			Requests: es.Requests, HandoffsStarted: es.HandoffsStarted, HandoffsDone: es.HandoffsDone,
			HandoffsFailed: es.HandoffsFailed, Retransmits: es.Retransmits, ForwardedFrames: es.ForwardedFrames,
			ForwardedBytes: es.ForwardedBytes, HandedOffBytes: es.HandedOffBytes, ReplyPayloadBytes: es.ReplyPayloadBytes,
			FollowUps: es.FollowUps, FollowUpsUntrack: es.FollowUpsUntracked, AckStorms: es.AckStorms,
			FollowUpsRefused: es.FollowUpsRefused, FollowUpsReset: es.FollowUpsReset,
			Answered: map[string]uint64{},
			States:   d.engine.FlowStates(),
		},
		Backends: []BackendStatus{},
	}
	for _, q := range d.queues {
		st.Queue += q.policy.Len()
		if q.waiting != nil {
			st.Queue++
		}
	}
	st.Customers = d.customerStatus()
	if d.lifo != nil {
		st.Lifo = &LifoStatus{Utilization: d.lifo.last, LIFO: d.lifo.lifo(), SlotsIn: d.lifo.meter.InUse()}
	}
	st.hists = make(map[string][2]histogram, len(d.custs))
	for name, cs := range d.custs {
		st.hists[name] = [2]histogram{cs.wait, cs.response}
	}
	st.Refunds = d.refunds
	st.Reloads, st.ReloadsFailed = d.reloads, d.reloadsFailed
	st.KernelDrops = d.kernelDrops()
	for _, v := range d.cfg.VIPs {
		st.VIPs = append(st.VIPs, v.String())
	}
	for i, n := range es.Drops {
		st.Drops[splice.DropReasonName(i)] = n
	}
	for i, n := range es.Answered {
		st.Engine.Answered[fmt.Sprint(splice.AnsweredStatuses[i])] = n
	}
	for _, bs := range d.backends {
		b := BackendStatus{
			ID: bs.id, IP: bs.ip.String(), MAC: bs.mac.String(), Alive: bs.alive, Capacity: bs.capacity,
			Active: d.disp.Active(sched.BackendID(bs.id)), Reported: bs.reported,
			Dispatched: bs.dispatched, FollowUps: bs.followUps, Reconciled: bs.reconciled, Closed: bs.closed, Served: bs.served,
			ResponseBytes: bs.responseBytes, ForwardedBytes: bs.forwardedBytes,
			InService: bs.sent, Ready: len(bs.ready), HeldHandoffs: bs.heldHandoffs, PeakReported: bs.peakReported,
		}
		if bs.served > 0 {
			b.MeanServiceMs = float64(bs.serviceTotal) / float64(bs.served) / 1e6
		}
		if bs.handoffs > 0 {
			b.MeanHandoffMs = float64(bs.handoffTotal) / float64(bs.handoffs) / 1e6
		}
		if bs.slotsTimed > 0 {
			b.MeanSlotMs = float64(bs.slotTotal) / float64(bs.slotsTimed) / 1e6
			b.MeanSlotExcessMs = float64(bs.slotExcess) / float64(bs.slotsTimed) / 1e6
		}
		st.Backends = append(st.Backends, b)
	}
	sort.Slice(st.Backends, func(i, j int) bool { return st.Backends[i].ID < st.Backends[j].ID })
	return st
}

// Snapshot asks the loop for the current status (safe from any goroutine).
func (d *Daemon) Snapshot() (Status, bool) {
	reply := make(chan Status, 1)
	select {
	case d.adminReq <- reply:
	case <-time.After(2 * time.Second):
		return Status{}, false
	}
	return <-reply, true
}

func (d *Daemon) startAdmin() (*http.Server, error) {
	ln, err := net.Listen("tcp", d.cfg.Admin)
	if err != nil {
		return nil, fmt.Errorf("frontend: admin %s: %w", d.cfg.Admin, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		st, ok := d.Snapshot()
		if !ok {
			http.Error(w, "event loop busy", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(st)
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		st, ok := d.Snapshot()
		if !ok {
			http.Error(w, "event loop busy", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		writeMetrics(w, &st)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return srv, nil
}

// writeMetrics renders Status in the Prometheus text format.
func writeMetrics(w http.ResponseWriter, st *Status) {
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
	g("qsplice_frontend_flows", "Client connections held by the engine.", "gauge")
	fmt.Fprintf(&b, "qsplice_frontend_flows %d\n", st.Engine.Flows)
	g("qsplice_frontend_queue_length", "Requests waiting for a back-end.", "gauge")
	fmt.Fprintf(&b, "qsplice_frontend_queue_length %d\n", st.Queue)
	g("qsplice_frontend_requests_total", "Request heads parsed.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_requests_total %d\n", st.Engine.Requests)
	g("qsplice_frontend_handoffs_total", "Handoffs by outcome.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_handoffs_total{outcome=\"done\"} %d\n", st.Engine.HandoffsDone)
	fmt.Fprintf(&b, "qsplice_frontend_handoffs_total{outcome=\"failed\"} %d\n", st.Engine.HandoffsFailed)
	g("qsplice_frontend_follow_ups_total", "Requests that followed on spliced keep-alive connections, by what became of them besides scheduling.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_follow_ups_total{outcome=\"seen\"} %d\n", st.Engine.FollowUps)
	fmt.Fprintf(&b, "qsplice_frontend_follow_ups_total{outcome=\"untracked\"} %d\n", st.Engine.FollowUpsUntrack)
	fmt.Fprintf(&b, "qsplice_frontend_follow_ups_total{outcome=\"refused_in_stream\"} %d\n", st.Engine.FollowUpsRefused)
	fmt.Fprintf(&b, "qsplice_frontend_follow_ups_total{outcome=\"refused_reset\"} %d\n", st.Engine.FollowUpsReset)
	g("qsplice_frontend_reply_payload_bytes_total", "Back-end reply payload bytes that reached the front-end (0 with one-way splicing).", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_reply_payload_bytes_total %d\n", st.Engine.ReplyPayloadBytes)
	g("qsplice_frontend_forwarded_bytes_total", "Client payload bytes forwarded after splicing.", "counter")
	fmt.Fprintf(&b, "qsplice_frontend_forwarded_bytes_total %d\n", st.Engine.ForwardedBytes)
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

// kernelDrops accumulates the socket's drop counter (the kernel resets it
// on every read).
func (d *Daemon) kernelDrops() uint64 {
	if kd, ok := d.rawLink.(interface{ KernelDrops() (uint64, error) }); ok {
		if n, err := kd.KernelDrops(); err == nil {
			d.drops += n
		}
	}
	return d.drops
}
