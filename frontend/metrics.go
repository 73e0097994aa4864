package frontend

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/internal/exposition"
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

// statusCollector turns a Status snapshot into the front-end's metrics
// at scrape time. It reads the Status, never the engine or controller
// directly: the event loop builds the snapshot when the admin channel
// asks for it, so counting stays plain increments on the packet path,
// and a Status merged from several engine shards exports the same way.
type statusCollector struct {
	snapshot func() (Status, bool)
}

// Metric families of the front-end. The names, labels and meanings that
// existed when /metrics was hand-written are kept as they were: the
// experiments and tests read them by name.
var (
	isCounter, isGauge = prometheus.CounterValue, prometheus.GaugeValue
	isHistogram        = prometheus.UntypedValue // unused: MustNewConstHistogram types its metrics
	fam                = exposition.NewFamily

	feFrames        = fam("qsplice_frontend_frames_total", "Frames through the front-end link by direction.", isCounter, "dir")
	feDrops         = fam("qsplice_frontend_drops_total", "Frames dropped by the engine, by reason.", isCounter, "reason")
	feRSTsSup       = fam("qsplice_frontend_rsts_suppressed_total", "RSTs to segments without a connection not sent: over the RST rate limit.", isCounter)
	feCtlRefused    = fam("qsplice_frontend_control_refused_total", "Control datagrams refused, by reason (forged, replayed, reflected, from the wrong address, ...).", isCounter, "reason")
	feFlows         = fam("qsplice_frontend_flows", "Client connections held by the engine.", isGauge)
	feRefunds       = fam("qsplice_frontend_refunds_total", "Charged requests given back to their customers.", isCounter)
	feLateFeedback  = fam("qsplice_frontend_feedback_after_close_total", "Requests whose connection closed before their back-end reported them: the Feedback came within the wait and the request was charged what it cost (served), or it did not and it was charged as a typical request (unreported).", isCounter, "outcome")
	feQueue         = fam("qsplice_frontend_queue_length", "Requests waiting for a back-end.", isGauge)
	feRequests      = fam("qsplice_frontend_requests_total", "Request heads parsed.", isCounter)
	feHandoffs      = fam("qsplice_frontend_handoffs_total", "Handoffs by outcome.", isCounter, "outcome")
	fePool          = fam("qsplice_frontend_pooled_c2_total", "Handoff connections kept alive between client connections (-pool-c2): put in the pool when their client closed (pooled), taken by a later request (reused), reset after the pool's idle time (expired), closed by their server while pooled (closed_by_server), reset because their back-end restarted (dropped); the client's last ACK of a pooled C2's response owed to its server (ack_deferred), carried by the next request (ack_carried) or sent alone after -pool-ack-delay (ack_sent_alone), and of the deferred ones those already forwarded in the same pass and taken back out of its frames (ack_taken_back); reuses the shim refused, whose request went on a new C2 (reuse_refused); client connections the front-end closed for a client that asked to close (closed_for_client); client FINs that waited for a Feedback in vain and went to the handoff connection (fin_released).", isCounter, "what")
	fePoolNow       = fam("qsplice_frontend_pooled_c2", "Idle handoff connections in the pool now.", isGauge)
	feShortCuts     = fam("qsplice_frontend_handoff_short_cuts_total", "Handoffs that took a short cut (issue 7): the Splice sent with C2's SYN (splice_at_syn), the request carried in it (request_carried), the request taken by the back-end's kernel in C2's SYN (request_in_syn, TCP Fast Open).", isCounter, "what")
	feFollowUps     = fam("qsplice_frontend_follow_ups_total", "Requests that followed on spliced keep-alive connections, by what became of them besides scheduling.", isCounter, "outcome")
	feChunked       = fam("qsplice_frontend_chunked_bodies_total", "Chunked request bodies followed to their end.", isCounter)
	feTimeWait      = fam("qsplice_frontend_handoff_time_wait_total", "Handoff SYNs towards a back-end's TIME-WAIT: sent on a port whose record says it refuses them (in_time_wait), and old connections reset after a back-end answered a SYN with one's ACK (reset).", isCounter, "outcome")
	feChallenge     = fam("qsplice_frontend_challenge_acks_total", "Challenge ACKs (RFC 5961) to segments not accepted, sent or held back by the rate limit.", isCounter, "outcome")
	feReplyBytes    = fam("qsplice_frontend_reply_payload_bytes_total", "Back-end reply payload bytes that reached the front-end (0 with one-way splicing).", isCounter)
	feFwdBytes      = fam("qsplice_frontend_forwarded_bytes_total", "Client payload bytes forwarded after splicing.", isCounter)
	feKernelDrops   = fam("qsplice_frontend_link_kernel_drops_total", "Frames the kernel dropped because the front-end's socket buffer was full.", isCounter)
	feLimit         = fam("qsplice_frontend_limit", "Bounds on the engine's state as configured (0: off; durations in seconds).", isGauge, "limit")
	feSources       = fam("qsplice_frontend_sources", "Client addresses holding flows not handed off or handoff ports.", isGauge)
	feHandoffPorts  = fam("qsplice_frontend_handoff_ports", "Handoff connections (C2) held.", isGauge)
	feLimitRefusals = fam("qsplice_frontend_limit_refusals_total", "What the limits refused: SYNs dropped, handshake ACKs reset, dispatches answered 503.", isCounter, "limit", "what")
	feLimitCloses   = fam("qsplice_frontend_limit_closes_total", "Connections a limit ended: silent at the head deadline, past the flow lifetime, idle after the back-end's FIN, evicted without a head when the table was full.", isCounter, "limit")
	feRebuilt       = fam("qsplice_frontend_tables_rebuilt_total", "Engine tables rebuilt smaller after a peak, so a flood's memory goes back.", isCounter)

	custOffered   = fam("qsplice_customer_offered_total", "Requests that arrived.", isCounter, "customer")
	custAdmitted  = fam("qsplice_customer_admitted_total", "Requests dispatched to a back-end.", isCounter, "customer")
	custServed    = fam("qsplice_customer_served_total", "Requests the back-ends reported served.", isCounter, "customer")
	custOutside   = fam("qsplice_customer_outside_normal_size_total", "Responses whose size fell outside the normal-size range the reservations assume.", isCounter, "customer")
	custRefunded  = fam("qsplice_customer_refunded_total", "Charged requests given back: never reached a back-end, or their back-end died.", isCounter, "customer")
	custAbandoned = fam("qsplice_customer_abandoned_total", "Requests whose client left while they waited.", isCounter, "customer")
	custRejected  = fam("qsplice_customer_rejected_total", "Requests answered by the front-end instead of served, by reason.", isCounter, "customer", "reason")
	custCharged   = fam("qsplice_customer_charged_credits_total", "Credits charged, corrected by measured service time.", isCounter, "customer")
	custBalance   = fam("qsplice_customer_balance_credits", "Current credit balance.", isGauge, "customer")
	custWait      = fam("qsplice_customer_queue_wait_seconds", "Time from arrival to dispatch.", isHistogram, "customer")
	custResponse  = fam("qsplice_customer_response_seconds", "Queue wait plus the service time the back-end measured.", isHistogram, "customer")

	lifoUtil = fam("qsplice_lifo_utilization", "Cluster utilization over the last LIFO-Pri interval (busy slot time / slot time).", isGauge)
	lifoLIFO = fam("qsplice_lifo_browsing_lifo", "1 while lifo-pri serves browsing requests newest first.", isGauge)

	beAlive      = fam("qsplice_backend_alive", "1 while the back-end answers keepalives.", isGauge, "backend")
	beActive     = fam("qsplice_backend_active", "Requests dispatched to the back-end and not closed.", isGauge, "backend")
	beServed     = fam("qsplice_backend_served_total", "Responses the back-end reported.", isCounter, "backend")
	beServiceSum = fam("qsplice_backend_service_seconds_total", "Sum of the service times the back-end reported (divide by served for the mean).", isCounter, "backend")
	beReported   = fam("qsplice_backend_reported_concurrency", "Requests in service as the back-end's shim last reported.", isGauge, "backend")
	beRespBytes  = fam("qsplice_backend_response_bytes_total", "Response bytes the back-end reported sending straight to clients.", isCounter, "backend")

	// Added with client_golang (issue 12).
	feReloads    = fam("qsplice_frontend_reloads_total", "Configuration reloads (SIGHUP), by outcome.", isCounter, "outcome")
	feCtlFrames  = fam("qsplice_frontend_control_frames_sent_total", "Splices sent as frames on the link, in the batch of their pass, rather than through the control socket.", isCounter)
	feCtlLink    = fam("qsplice_frontend_control_from_link_total", "Control datagrams for the control socket taken off the link by the engines: taken, or dropped for a bad length or checksum.", isCounter, "outcome")
	feCtlBad     = fam("qsplice_frontend_control_bad_messages_total", "Control datagrams that could not be read or that the codec refused (their reasons are in qsplice_frontend_control_refused_total).", isCounter)
	feCookies    = fam("qsplice_frontend_syn_cookies_total", "SYN cookies: sent in SYN-ACKs (by the engine, or by the link's program: sent_by_link), accepted in the handshake's ACK, or failed to verify (that ACK dropped).", isCounter, "outcome")
	feAnswered   = fam("qsplice_frontend_answered_total", "Requests the front-end answered itself, by HTTP status.", isCounter, "status")
	feRetrans    = fam("qsplice_frontend_retransmits_total", "Segments the front-end retransmitted.", isCounter)
	feAckStorms  = fam("qsplice_frontend_ack_storms_total", "Flows cut because of an ACK storm.", isCounter)
	feVNet       = fam("qsplice_frontend_vnet_refused_total", "Frames whose virtio-net header could not be honoured, dropped.", isCounter)
	feLinkBytes  = fam("qsplice_frontend_link_bytes_total", "Bytes through the front-end link by direction.", isCounter, "dir")
	feLinkErrors = fam("qsplice_frontend_link_tx_errors_total", "Frame writes the link refused with an error.", isCounter)
	feLinkInWait = fam("qsplice_frontend_link_tx_in_wait_total", "Frames sent inside a receive-moderation hold's io_uring_enter, with no system call of their own.", isCounter)
	feGathered   = fam("qsplice_frontend_workers_gathered", "1 while worker 0 serves every shard (-gather): the load fits in one core.", isGauge)
	feGathers    = fam("qsplice_frontend_gather_changes_total", "Times the workers gathered onto worker 0 or spread back to one per shard (-gather).", isCounter, "to")
	feBusy       = fam("qsplice_frontend_worker_busy_seconds_total", "Time each worker spent between the end of a wait and the end of its pass; gathered, worker 0's includes every shard's.", isCounter, "worker")
	custQueued   = fam("qsplice_customer_queued", "Requests of the customer waiting now.", isGauge, "customer")
	beCapacity   = fam("qsplice_backend_capacity", "Requests the back-end registered it can serve at once.", isGauge, "backend")
	beDeaths     = fam("qsplice_backend_deaths_total", "Times the back-end stopped answering keepalives and was declared dead.", isCounter, "backend")
	beDispatched = fam("qsplice_backend_dispatched_total", "Requests dispatched to the back-end.", isCounter, "backend")
	beInService  = fam("qsplice_backend_in_service", "Requests on C2 to the back-end not yet reported done: its slots in use.", isGauge, "backend")
	beHandoff    = fam("qsplice_backend_handoff_seconds", "Time from dispatch to the shim's SpliceAck (C2 handshake and Splice round trip).", isHistogram, "backend")
	beSlot       = fam("qsplice_backend_slot_seconds", "Time served requests held a slot of the back-end (request sent on C2 to its Feedback).", isHistogram, "backend")
	beService    = fam("qsplice_backend_service_seconds", "Service times the back-end measured and reported.", isHistogram, "backend")

	// feScrapeError stands for a snapshot the event loop did not give.
	feScrapeError = fam("qsplice_frontend_scrape_error", "The event loop did not answer the snapshot request.", isGauge)

	frontendFamilies = []*exposition.Family{
		&feFrames, &feDrops, &feRSTsSup, &feCtlRefused, &feFlows, &feRefunds, &feLateFeedback, &feQueue, &feRequests,
		&feHandoffs, &fePool, &fePoolNow, &feShortCuts, &feFollowUps, &feChunked, &feChallenge, &feTimeWait, &feReplyBytes, &feFwdBytes, &feKernelDrops,
		&feLimit, &feSources, &feHandoffPorts, &feLimitRefusals, &feLimitCloses, &feRebuilt,
		&custOffered, &custAdmitted, &custServed, &custOutside, &custRefunded, &custAbandoned, &custRejected,
		&custCharged, &custBalance, &custWait, &custResponse, &lifoUtil, &lifoLIFO,
		&beAlive, &beActive, &beServed, &beServiceSum, &beReported, &beRespBytes,
		&feReloads, &feCtlBad, &feCtlFrames, &feCtlLink, &feCookies, &feAnswered, &feRetrans, &feAckStorms, &feVNet, &feLinkBytes,
		&feLinkErrors, &feLinkInWait, &feGathered, &feGathers, &feBusy, &custQueued, &beCapacity, &beDeaths, &beDispatched, &beInService,
		&beHandoff, &beSlot, &beService, &feScrapeError,
	}
)

func (sc statusCollector) Describe(ch chan<- *prometheus.Desc) {
	exposition.Describe(ch, frontendFamilies...)
	exposition.Describe(ch, feedbackFamilies...)
}

func (sc statusCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok := sc.snapshot()
	if !ok {
		ch <- prometheus.NewInvalidMetric(feScrapeError.Desc, errors.New("event loop busy: no status snapshot"))
		return
	}
	collectStatus(ch, &st)
}

// collectStatus emits every front-end family from st.
func collectStatus(ch chan<- prometheus.Metric, st *Status) {
	n := func(v uint64) float64 { return float64(v) }
	e := &st.Engine
	feFrames.Emit(ch, n(e.RxFrames), "rx")
	feFrames.Emit(ch, n(e.TxFrames), "tx")
	for r, v := range st.Drops {
		feDrops.Emit(ch, n(v), r)
	}
	feRSTsSup.Emit(ch, n(e.RSTsSuppressed))
	for r, v := range st.ControlRefused {
		feCtlRefused.Emit(ch, n(v), r)
	}
	feFlows.Emit(ch, n(e.Flows))
	feRefunds.Emit(ch, n(st.Refunds))
	feLateFeedback.Emit(ch, n(st.LateFeedbacks), "served")
	feLateFeedback.Emit(ch, n(st.LateUnreported), "unreported")
	feQueue.Emit(ch, float64(st.Queue))
	feRequests.Emit(ch, n(e.Requests))
	feHandoffs.Emit(ch, n(e.HandoffsDone), "done")
	feHandoffs.Emit(ch, n(e.HandoffsFailed), "failed")
	fePool.Emit(ch, n(e.C2Pooled), "pooled")
	fePool.Emit(ch, n(e.C2Reused), "reused")
	fePool.Emit(ch, n(e.C2PoolExpired), "expired")
	fePool.Emit(ch, n(e.C2PoolClosedByServer), "closed_by_server")
	fePool.Emit(ch, n(e.C2PoolDropped), "dropped")
	fePool.Emit(ch, n(e.C2AcksDeferred), "ack_deferred")
	fePool.Emit(ch, n(e.C2AcksCarried), "ack_carried")
	fePool.Emit(ch, n(e.C2AcksSentAlone), "ack_sent_alone")
	fePool.Emit(ch, n(e.C2AcksTakenBack), "ack_taken_back")
	fePool.Emit(ch, n(e.C2ReusesRefused), "reuse_refused")
	fePool.Emit(ch, n(e.C2PoolClosedForClient), "closed_for_client")
	fePool.Emit(ch, n(e.C2PoolFINsReleased), "fin_released")
	fePoolNow.Emit(ch, n(e.PooledC2s))
	feShortCuts.Emit(ch, n(e.SplicesAtSYN), "splice_at_syn")
	feShortCuts.Emit(ch, n(e.RequestsCarried), "request_carried")
	feShortCuts.Emit(ch, n(e.RequestsInSYN), "request_in_syn")
	feFollowUps.Emit(ch, n(e.FollowUps), "seen")
	feFollowUps.Emit(ch, n(e.FollowUpsUnfollowable), "unfollowable")
	feFollowUps.Emit(ch, n(e.FollowUpsRefused), "refused_in_stream")
	feFollowUps.Emit(ch, n(e.FollowUpsReset), "refused_reset")
	feChunked.Emit(ch, n(e.ChunkedBodies))
	feChallenge.Emit(ch, n(e.ChallengeAcks), "sent")
	feChallenge.Emit(ch, n(e.ChallengeAcksLimited), "limited")
	feTimeWait.Emit(ch, n(e.HandoffPortsInTimeWait), "in_time_wait")
	feTimeWait.Emit(ch, n(e.HandoffTimeWaitResets), "reset")
	feReplyBytes.Emit(ch, n(e.ReplyPayloadBytes))
	feFwdBytes.Emit(ch, n(e.ForwardedBytes))
	feKernelDrops.Emit(ch, n(st.KernelDrops))
	collectLimits(ch, &st.Limits)

	feReloads.Emit(ch, n(st.Reloads), "ok")
	feReloads.Emit(ch, n(st.ReloadsFailed), "failed")
	feCtlBad.Emit(ch, n(st.BadCtl))
	feCtlFrames.Emit(ch, n(st.ControlFrames))
	feCtlLink.Emit(ch, n(st.Engine.ControlFromLink), "taken")
	feCtlLink.Emit(ch, n(st.Engine.ControlFromLinkDropped), "dropped")
	feCookies.Emit(ch, n(e.SynCookiesSent), "sent")
	// The program's own count: with hidden SYNs the engines see none
	// of its SYNs (synhide.go).
	feCookies.Emit(ch, n(st.SYNsAnsweredByLink), "sent_by_link")
	feCookies.Emit(ch, n(e.Accepted), "accepted")
	feCookies.Emit(ch, n(st.Drops["bad-cookie"]), "invalid") // splice.DropReasonName of the bad-cookie drop
	for s, v := range e.Answered {
		feAnswered.Emit(ch, n(v), s)
	}
	feRetrans.Emit(ch, n(e.Retransmits))
	feAckStorms.Emit(ch, n(e.AckStorms))
	feVNet.Emit(ch, n(st.VNetRefused))
	feLinkBytes.Emit(ch, n(st.LinkStat.RxBytes), "rx")
	feLinkBytes.Emit(ch, n(st.LinkStat.TxBytes), "tx")
	feLinkErrors.Emit(ch, n(st.LinkStat.TxErrors))
	feLinkInWait.Emit(ch, n(st.LinkStat.TxInWait))
	gathered := 0.0
	if st.Gathered {
		gathered = 1
	}
	feGathered.Emit(ch, gathered)
	feGathers.Emit(ch, n(st.Gathers), "gathered")
	feGathers.Emit(ch, n(st.Spreads), "spread")
	for i, sh := range st.Shards {
		feBusy.Emit(ch, sh.BusySeconds, strconv.Itoa(i))
	}

	for i := range st.Customers {
		collectCustomer(ch, &st.Customers[i])
	}
	if st.Lifo != nil {
		lifoUtil.Emit(ch, st.Lifo.Utilization)
		lifo := 0.0
		if st.Lifo.LIFO {
			lifo = 1
		}
		lifoLIFO.Emit(ch, lifo)
	}
	for i := range st.Backends {
		collectBackend(ch, &st.Backends[i])
	}
	collectFeedback(ch, st.Feedback)
}

func collectLimits(ch chan<- prometheus.Metric, l *LimitsStatus) {
	feLimit.Emit(ch, float64(l.MaxFlows), "max_flows")
	feLimit.Emit(ch, float64(l.MaxFlowsPerSource), "max_flows_per_source")
	feLimit.Emit(ch, float64(l.MaxPortsPerSource), "max_ports_per_source")
	feLimit.Emit(ch, l.HeadTimeout, "head_timeout")
	feLimit.Emit(ch, l.FlowLifetime, "flow_lifetime")
	feLimit.Emit(ch, l.HalfCloseTimeout, "half_close_timeout")
	feSources.Emit(ch, float64(l.Sources))
	feHandoffPorts.Emit(ch, float64(l.HandoffPorts))
	feLimitRefusals.Emit(ch, float64(l.RefusedSYNFlows), "max_flows", "syn")
	feLimitRefusals.Emit(ch, float64(l.RefusedSYNSource), "max_flows_per_source", "syn")
	feLimitRefusals.Emit(ch, float64(l.RefusedAcceptFlows), "max_flows", "accept")
	feLimitRefusals.Emit(ch, float64(l.RefusedAcceptSource), "max_flows_per_source", "accept")
	feLimitRefusals.Emit(ch, float64(l.RefusedPortsSource), "max_ports_per_source", "dispatch")
	feLimitCloses.Emit(ch, float64(l.HeadDeadlineFreed), "head_timeout")
	feLimitCloses.Emit(ch, float64(l.LifetimeExpired), "flow_lifetime")
	feLimitCloses.Emit(ch, float64(l.HalfClosedReleased), "half_close_timeout")
	feLimitCloses.Emit(ch, float64(l.Evicted), "max_flows")
	feRebuilt.Emit(ch, float64(l.TablesRebuilt))
}

func collectCustomer(ch chan<- prometheus.Metric, cu *CustomerStatus) {
	name := cu.Name
	custOffered.Emit(ch, float64(cu.Offered), name)
	custAdmitted.Emit(ch, float64(cu.Admitted), name)
	custServed.Emit(ch, float64(cu.Served), name)
	custOutside.Emit(ch, float64(cu.OutsideNormal), name)
	custRefunded.Emit(ch, float64(cu.Refunded), name)
	custAbandoned.Emit(ch, float64(cu.Abandoned), name)
	for r, v := range cu.Rejected {
		custRejected.Emit(ch, float64(v), name, r)
	}
	custCharged.Emit(ch, cu.Charged, name)
	custBalance.Emit(ch, cu.Balance, name)
	custQueued.Emit(ch, float64(cu.Queued), name)
	emitHistogram(ch, &custWait, &cu.Wait, name)
	emitHistogram(ch, &custResponse, &cu.Response, name)
}

func collectBackend(ch chan<- prometheus.Metric, be *BackendStatus) {
	id := strconv.FormatUint(uint64(be.ID), 10)
	alive := 0.0
	if be.Alive {
		alive = 1
	}
	beAlive.Emit(ch, alive, id)
	beActive.Emit(ch, float64(be.Active), id)
	beServed.Emit(ch, float64(be.Served), id)
	beServiceSum.Emit(ch, be.ServiceSeconds, id)
	beReported.Emit(ch, float64(be.Reported), id)
	beRespBytes.Emit(ch, float64(be.ResponseBytes), id)
	beCapacity.Emit(ch, float64(be.Capacity), id)
	beDeaths.Emit(ch, float64(be.Deaths), id)
	beDispatched.Emit(ch, float64(be.Dispatched), id)
	beInService.Emit(ch, float64(be.InService), id)
	emitHistogram(ch, &beHandoff, &be.Handoff, id)
	emitHistogram(ch, &beSlot, &be.Slot, id)
	emitHistogram(ch, &beService, &be.Service, id)
}

// emitHistogram sends hist as a constant Prometheus histogram: the
// controller's per-bucket counts made cumulative, with its Sum and N.
func emitHistogram(ch chan<- prometheus.Metric, f *exposition.Family, hist *controller.Histogram, labels ...string) {
	buckets := make(map[float64]uint64, len(controller.HistogramBounds))
	var cum uint64
	for i, b := range controller.HistogramBounds {
		cum += hist.Counts[i]
		buckets[b] = cum
	}
	ch <- prometheus.MustNewConstHistogram(f.Desc, hist.N, hist.Sum, buckets, labels...)
}
