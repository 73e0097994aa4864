package frontend

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/internal/exposition"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
)

// Status is the front-end's state as /status reports it: the
// controller's snapshot (back-ends, customers, queue, refunds) and the
// daemon's own.
type Status struct {
	Link    string   `json:"link"`
	MAC     string   `json:"mac"`
	VIPs    []string `json:"vips"`
	Handoff string   `json:"handoff"`
	Ports   []uint16 `json:"ports"`
	// Workers is the number of shards (-workers): the engine and link
	// figures are their sums.
	Workers int `json:"workers"`
	// Shards are each shard's own figures, to see how the fanout spread
	// the load.
	Shards []ShardStatus `json:"shards"`
	// Gathering (-gather, gather.go): whether worker 0 serves every
	// shard now, and how often the workers gathered and spread again.
	Gathered bool   `json:"gathered"`
	Gathers  uint64 `json:"gathers"`
	Spreads  uint64 `json:"spreads"`
	controller.Status
	Reloads       uint64            `json:"reloads"`
	ReloadsFailed uint64            `json:"reloads_failed"`
	Engine        EngineStatus      `json:"engine"`
	LinkStat      link.Stats        `json:"link_stats"`
	Drops         map[string]uint64 `json:"drops"`
	Uptime        float64           `json:"uptime_seconds"`
	// VNetRefused counts frames whose virtio-net header could not be
	// honoured (a super-frame that is not TCP/IPv4, a bad checksum
	// offset): dropped, the sender retransmits.
	VNetRefused uint64 `json:"vnet_refused"`
	BadCtl      uint64 `json:"bad_control_messages"`
	// ControlFrames counts the Splices sent as frames on the link
	// (linkcontrol.go) rather than through the control socket.
	ControlFrames uint64 `json:"control_frames_sent"`
	// KernelDrops counts frames the kernel dropped because the AF_PACKET
	// socket's buffer was full (the event loop fell behind).
	KernelDrops uint64 `json:"kernel_drops"`
	// SYNAnswer (-syn-answer, synanswer.go): "tcx: ingress" ("tc:
	// ingress" without TCX) when the kernel answers clients' SYNs, else
	// "off" and why; SYNsAnsweredByLink counts the SYN-ACKs it sent.
	SYNAnswer          string `json:"syn_answer"`
	SYNsAnsweredByLink uint64 `json:"syns_answered_by_link"`
	// SYNsHidden: the links read IPv4 after tc ingress, so the engines
	// never see the SYNs the program answered (synhide.go), nor count
	// them in syn_cookies_by_link.
	SYNsHidden bool `json:"syns_hidden"`
	// Heap (issue 9, the live adversarial tests): the daemon's Go heap,
	// read by the admin handler outside the event loop. HeapAlloc is the
	// bytes of live and not yet collected objects, HeapInuse the bytes of
	// spans holding any (runtime.ReadMemStats); HeapLive the bytes the
	// last collection found live (runtime/metrics /gc/heap/live:bytes),
	// and GCCycles how many collections have finished, so a reader can
	// wait for one that ran after a flood ended.
	HeapAlloc uint64 `json:"heap_alloc_bytes"`
	HeapInuse uint64 `json:"heap_inuse_bytes"`
	HeapLive  uint64 `json:"heap_live_bytes"`
	GCCycles  uint32 `json:"gc_cycles"`
	// Limits are the bounds on the engine's state, how full they are and
	// what they refused (metrics.go).
	Limits LimitsStatus `json:"limits"`
}

// ShardStatus is one shard's share of the engine figures.
type ShardStatus struct {
	Flows           uint64 `json:"flows"`
	RxFrames        uint64 `json:"rx_frames"`
	TxFrames        uint64 `json:"tx_frames"`
	Requests        uint64 `json:"requests"`
	HandoffsDone    uint64 `json:"handoffs_done"`
	HandoffsFailed  uint64 `json:"handoffs_failed"`
	ForwardedFrames uint64 `json:"forwarded_frames"`
	// The loop's turns, and those that began with a receive-moderation
	// hold (issue 7, moderate.go).
	Passes  uint64 `json:"passes"`
	RxHolds uint64 `json:"rx_holds"`
	// BusySeconds is the time the shard's own worker spent between the
	// end of a wait and the end of its pass (gathered, worker 0's
	// includes the other shards' passes).
	BusySeconds float64 `json:"busy_seconds"`
}

// BackendStatus, CustomerStatus and LifoStatus are the controller's.
type (
	BackendStatus  = controller.BackendStatus
	CustomerStatus = controller.CustomerStatus
	LifoStatus     = controller.LifoStatus
)

// EngineStatus is the engine's counters.
type EngineStatus struct {
	Flows uint64 `json:"flows"`
	// SpareBytes: the spare flow records and request buffers the
	// engines keep for the next connections (splice.FrontEndStats).
	SpareBytes      uint64 `json:"spare_bytes"`
	RxFrames        uint64 `json:"rx_frames"`
	TxFrames        uint64 `json:"tx_frames"`
	Accepted        uint64 `json:"accepted"`
	Requests        uint64 `json:"requests"`
	HandoffsStarted uint64 `json:"handoffs_started"`
	HandoffsDone    uint64 `json:"handoffs_done"`
	HandoffsFailed  uint64 `json:"handoffs_failed"`
	// The handoff's short cuts (issue 7): Splices sent with C2's SYN, of
	// them requests the Splice carried, and of those requests the
	// back-end's kernel took in the SYN (TCP Fast Open).
	SplicesAtSYN    uint64 `json:"splices_at_syn"`
	RequestsCarried uint64 `json:"requests_carried"`
	RequestsInSYN   uint64 `json:"requests_in_syn"`
	// Handoff connections kept alive between client connections
	// (splice/fe_pool.go): put in the pool, taken from it, reset there
	// after the pool's idle time or closed by their server; and in it now.
	C2Pooled             uint64 `json:"c2_pooled"`
	C2Reused             uint64 `json:"c2_reused"`
	C2PoolExpired        uint64 `json:"c2_pool_expired"`
	C2PoolClosedByServer uint64 `json:"c2_pool_closed_by_server"`
	C2PoolDropped        uint64 `json:"c2_pool_dropped"` // reset: their back-end restarted
	// The client's last ACK of a pooled C2's response: owed, carried by
	// the next request, sent alone after -pool-ack-delay.
	C2AcksDeferred  uint64 `json:"c2_acks_deferred"`
	C2AcksCarried   uint64 `json:"c2_acks_carried"`
	C2AcksSentAlone uint64 `json:"c2_acks_sent_alone"`
	C2AcksTakenBack uint64 `json:"c2_acks_taken_back"` // deferred though forwarded: taken back out of the pass's frames
	// Reuses the shim refused, whose flow went on a new C2 instead.
	C2ReusesRefused uint64 `json:"c2_reuses_refused"`
	// Client connections closed by the front-end for a client that asked
	// to close, and client FINs held for a Feedback that did not come in
	// time (sent to C2 after all).
	C2PoolClosedForClient uint64 `json:"c2_pool_closed_for_client"`
	C2PoolFINsReleased    uint64 `json:"c2_pool_fins_released"`
	PooledC2s             uint64 `json:"pooled_c2s"`
	Retransmits           uint64 `json:"retransmits"`
	ForwardedFrames       uint64 `json:"forwarded_frames"`
	ForwardedBytes        uint64 `json:"forwarded_bytes"`
	HandedOffBytes        uint64 `json:"handed_off_bytes"`
	// ControlFromLink counts the control datagrams the engines took off
	// the link for the control socket (splice/fe_control.go), and
	// ControlFromLinkDropped those they dropped for a bad length or
	// checksum.
	ControlFromLink        uint64 `json:"control_from_link"`
	ControlFromLinkDropped uint64 `json:"control_from_link_dropped"`
	ReplyPayloadBytes      uint64 `json:"reply_payload_bytes"`
	FollowUps              uint64 `json:"follow_ups"`
	// Follow-ups the front-end could not follow (a head that does not
	// parse or is too long, a malformed chunked body): answered 400 or
	// 431 in their stream and closed, never forwarded (issue 9).
	FollowUpsUnfollowable uint64 `json:"follow_ups_unfollowable"`
	ChunkedBodies         uint64 `json:"chunked_bodies"` // chunked request bodies followed to their end
	// Challenge ACKs sent to segments RFC 5961 does not accept, and
	// those the rate limit held back (splice/fe_validate.go).
	ChallengeAcks        uint64 `json:"challenge_acks"`
	ChallengeAcksLimited uint64 `json:"challenge_acks_limited"`
	// Handoff SYNs sent on a port the back-end still holds in TIME-WAIT
	// for an older connection, by the front-end's record, and the old
	// connections reset because a back-end answered a SYN with one's
	// ACK (splice/fe_timewait.go).
	HandoffPortsInTimeWait uint64 `json:"handoff_ports_in_time_wait"`
	HandoffTimeWaitResets  uint64 `json:"handoff_time_wait_resets"`
	FollowUpsRefused       uint64 `json:"follow_ups_refused"` // answered in their stream
	FollowUpsReset         uint64 `json:"follow_ups_reset"`   // refused, but the stream had to be reset
	AckStorms              uint64 `json:"ack_storms"`
	RSTsSuppressed         uint64 `json:"rsts_suppressed"` // over the RST rate limit (SYN cookies)
	SynCookiesSent         uint64 `json:"syn_cookies_sent"`
	SynCookiesByLink       uint64 `json:"syn_cookies_by_link"` // SYNs the link's program answered (-syn-answer)
	// A lone request head's ACK (splice/fe_ackdelay.go): sent late,
	// because no response reached the client in time, or not at all,
	// because one did and acknowledged the request.
	RequestAcksDelayed uint64 `json:"request_acks_delayed"`
	RequestAcksSaved   uint64 `json:"request_acks_saved"`
	// Client pure ACKs written over the flow's previous one in the same
	// pass instead of forwarded (splice/fe_ackcoalesce.go).
	AcksCoalesced uint64 `json:"acks_coalesced"`
	// Request rewriting (issue 10, splice/fe_rewrite.go): requests sent
	// with a content tree's path, rewrites refused while the last was
	// unacknowledged, client segments of a replaced target absorbed, and
	// rewritten targets resent from the front-end's copy.
	Rewrites        uint64            `json:"rewrites"`
	RewriteBusy     uint64            `json:"rewrite_busy"`
	RewriteAbsorbed uint64            `json:"rewrite_absorbed"`
	RewriteResent   uint64            `json:"rewrite_resent"`
	Answered        map[string]uint64 `json:"answered"`
	States          map[string]int    `json:"flow_states"`
}

func (d *Daemon) status() Status {
	// The controller first, then each shard's engine: the lock order of
	// shard.go.
	d.ctrlMu.Lock()
	now := d.ctrlStamp()
	cst := d.ctrl.Status(now)
	reloads, reloadsFailed := d.reloads, d.reloadsFailed
	ctlFrames := d.ctlFramesSent
	d.ctrlMu.Unlock()
	var es splice.FrontEndStats
	var ls link.Stats
	var vnetRefused, kernelDrops uint64
	states := map[string]int{}
	shards := make([]ShardStatus, 0, len(d.shards))
	for _, s := range d.shards {
		s.mu.Lock()
		one := s.engine.Stats()
		for k, n := range s.engine.FlowStates() {
			states[k] += n
		}
		vnetRefused += s.vnetRefused
		kernelDrops += s.kernelDrops()
		s.mu.Unlock()
		es.Add(&one)
		ls.Add(s.link.Stats())
		shards = append(shards, ShardStatus{Flows: one.Flows, RxFrames: one.RxFrames, TxFrames: one.TxFrames,
			Requests: one.Requests, HandoffsDone: one.HandoffsDone, HandoffsFailed: one.HandoffsFailed,
			ForwardedFrames: one.ForwardedFrames, Passes: s.passes.Load(), RxHolds: s.holds.Load(),
			BusySeconds: time.Duration(s.busy.Load()).Seconds()})
	}
	st := Status{
		Link: d.cfg.Link, MAC: d.cfg.MAC.String(), Handoff: d.cfg.Handoff.String(), Ports: d.cfg.Ports,
		Workers: len(d.shards), Shards: shards,
		Status:   cst,
		LinkStat: ls, Uptime: time.Duration(now).Seconds(), BadCtl: d.ctl.bad, ControlFrames: ctlFrames,
		Reloads: reloads, ReloadsFailed: reloadsFailed, VNetRefused: vnetRefused,
		Drops: map[string]uint64{},
		Engine: EngineStatus{
			Flows: es.Flows, SpareBytes: es.SpareBytes, RxFrames: es.RxFrames, TxFrames: es.TxFrames, Accepted: es.Accepted,
			Requests: es.Requests, HandoffsStarted: es.HandoffsStarted, HandoffsDone: es.HandoffsDone,
			HandoffsFailed: es.HandoffsFailed, Retransmits: es.Retransmits, ForwardedFrames: es.ForwardedFrames,
			SplicesAtSYN: es.SplicesAtSYN, RequestsCarried: es.RequestsCarried, RequestsInSYN: es.RequestsInSYN,
			C2Pooled: es.C2Pooled, C2Reused: es.C2Reused, C2PoolExpired: es.C2PoolExpired, C2PoolDropped: es.C2PoolDropped,
			C2AcksDeferred: es.C2AcksDeferred, C2AcksCarried: es.C2AcksCarried, C2AcksSentAlone: es.C2AcksSentAlone,
			C2AcksTakenBack:      es.C2AcksTakenBack,
			C2ReusesRefused:      es.C2ReusesRefused,
			C2PoolClosedByServer: es.C2PoolClosedByServer, PooledC2s: es.PooledC2s,
			C2PoolClosedForClient: es.C2PoolClosedForClient, C2PoolFINsReleased: es.C2PoolFINsReleased,
			ForwardedBytes: es.ForwardedBytes, HandedOffBytes: es.HandedOffBytes,
			ControlFromLink: es.ControlTaken, ControlFromLinkDropped: es.ControlBadLength + es.ControlBadChecksum, ReplyPayloadBytes: es.ReplyPayloadBytes,
			FollowUps: es.FollowUps, AckStorms: es.AckStorms,
			FollowUpsUnfollowable: es.FollowUpsUnfollowable, ChunkedBodies: es.ChunkedBodies,
			ChallengeAcks: es.ChallengeAcks, ChallengeAcksLimited: es.ChallengeAcksLimited,
			HandoffPortsInTimeWait: es.HandoffPortsInTimeWait, HandoffTimeWaitResets: es.HandoffTimeWaitResets,
			FollowUpsRefused: es.FollowUpsRefused, FollowUpsReset: es.FollowUpsReset,
			RSTsSuppressed: es.RSTsSuppressed, SynCookiesSent: es.SynCookiesSent, SynCookiesByLink: es.SynCookiesByLink,
			RequestAcksDelayed: es.RequestAcksDelayed, RequestAcksSaved: es.RequestAcksSaved,
			AcksCoalesced: es.AcksCoalesced,
			Rewrites:      es.Rewrites, RewriteBusy: es.RewriteBusy, RewriteAbsorbed: es.RewriteAbsorbed, RewriteResent: es.RewriteResent,
			Answered: map[string]uint64{},
			States:   states,
		},
	}
	st.KernelDrops = kernelDrops
	st.SYNAnswer = d.synaState
	if d.syna != nil {
		st.SYNAnswer, st.SYNsAnsweredByLink = d.syna.status()
	}
	st.SYNsHidden = d.shards[0].arp != nil
	if g := d.gather; g != nil {
		st.Gathered = g.Want()
		st.Gathers, st.Spreads = g.Counts()
	}
	for r, n := range d.ctl.controlRefusals() { // the Codec's, next to the controller's (issue 9)
		st.ControlRefused[r] += n
	}
	st.Limits = limitsStatus(&d.cfg, &es)
	for _, v := range d.cfg.VIPs {
		st.VIPs = append(st.VIPs, v.String())
	}
	for i, n := range es.Drops {
		st.Drops[splice.DropReasonName(i)] = n
	}
	for i, n := range es.Answered {
		st.Engine.Answered[fmt.Sprint(splice.AnsweredStatuses[i])] = n
	}
	return st
}

// Snapshot asks the loop for the current status (safe from any goroutine).
func (d *Daemon) Snapshot() (Status, bool) {
	reply := make(chan Status, 1)
	select {
	case d.adminReq <- reply:
		d.shards[0].poller.Wake()
	case <-time.After(2 * time.Second):
		return Status{}, false
	}
	select {
	case st := <-reply:
		return st, true
	case <-time.After(2 * time.Second):
		return Status{}, false
	}
}

// serveAdmin serves /status and /metrics on the admin listener until
// the returned server is closed.
func (d *Daemon) serveAdmin() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		st, ok := d.Snapshot()
		if !ok {
			http.Error(w, "event loop busy", http.StatusServiceUnavailable)
			return
		}
		readHeap(&st)
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(st)
	})
	mux.Handle("/metrics", exposition.Handler(exposition.NewRegistry(statusCollector{snapshot: d.Snapshot})))
	if d.cfg.Pprof {
		// Sample every allocation: the packet path should make none, and
		// the default rate (one per 512 KiB) would not show the few it
		// makes. Costly, so only with -pprof.
		runtime.MemProfileRate = 1
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(d.adminLn)
	return srv
}

// readHeap fills in the heap figures. ReadMemStats stops the world for a
// moment, so it runs here in the admin handler, not in the event loop.
func readHeap(st *Status) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	st.HeapAlloc, st.HeapInuse, st.GCCycles = m.HeapAlloc, m.HeapInuse, m.NumGC
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	if live[0].Value.Kind() == metrics.KindUint64 {
		st.HeapLive = live[0].Value.Uint64()
	}
}
