package backend

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qsplice/qsplice/internal/exposition"
	"github.com/qsplice/qsplice/splice/link"
)

// shimCollector turns the shim's Status, which every worker answers
// from its own loop (collectStatus), into metrics at scrape time: the
// packet path keeps counting in plain fields and pays nothing for them.
type shimCollector struct {
	status func() (Status, error)
}

var (
	isCounter, isGauge = prometheus.CounterValue, prometheus.GaugeValue
	fam                = exposition.NewFamily

	shimRegistered = fam("qsplice_shim_registered", "1 while the front-end has acknowledged this back-end's registration.", isGauge)
	shimEntries    = fam("qsplice_shim_entries", "Spliced connections the shim translates now.", isGauge)
	shimActive     = fam("qsplice_shim_active", "Requests in service now.", isGauge)
	shimPeak       = fam("qsplice_shim_peak_active", "The most requests ever in service at once.", isGauge)
	shimPassed     = fam("qsplice_shim_passed_frames_total", "Frames passed unchanged, by direction.", isCounter, "dir")
	shimTranslated = fam("qsplice_shim_translated_frames_total", "Replies rewritten towards a client.", isCounter)
	shimTransBytes = fam("qsplice_shim_translated_bytes_total", "Payload bytes of the replies rewritten towards a client.", isCounter)
	shimCopies     = fam("qsplice_shim_frontend_copies_total", "Header-only copies of replies sent to the front-end.", isCounter)
	shimMalformed  = fam("qsplice_shim_malformed_frames_total", "Frames that failed parsing (passed unchanged).", isCounter)
	shimDrops      = fam("qsplice_shim_drops_total", "Frames dropped, by reason: spliced replies the shim cannot translate, frames from the wire refused for their headers, echoes of replies the kernel sent for a connection the shim no longer has (echo-orphaned), and replies on a reused handoff connection from before it was moved to its client (last-client).", isCounter, "reason")
	shimSplices    = fam("qsplice_shim_splices_total", "Splices installed.", isCounter)
	shimRefused    = fam("qsplice_shim_splices_refused_total", "Splices refused, by reason.", isCounter, "reason")
	shimReplaced   = fam("qsplice_shim_splices_replaced_total", "Entries replaced by a Splice for a new handshake on their tuple.", isCounter)
	shimReused     = fam("qsplice_shim_splices_reused_total", "Idle handoff connections moved to a later client by a Splice with Reuse (also in qsplice_shim_splices_total).", isCounter)
	shimExpired    = fam("qsplice_shim_expired_total", "Entries expired (idle, after the close, or at their lifetime).", isCounter)
	shimExpiredLt  = fam("qsplice_shim_expired_lifetime_total", "Entries ended by their maximum lifetime (also in qsplice_shim_expired_total).", isCounter)
	shimHandshakes = fam("qsplice_shim_handshakes_total", "Kernel SYN-ACKs on web ports recorded as handoff handshakes, those pushed out by newer ones (evicted), and those to an address that is not a handoff one, not recorded (not_handoff: a client of the host's own address).", isCounter, "outcome")
	shimWireGuard  = fam("qsplice_shim_wire_guard_total", "Wire segments the shim judged as the kernel would: RSTs not at the exact sequence, segments outside the window, RSTs after which the kernel kept sending.", isCounter, "what")
	shimEarly      = fam("qsplice_shim_early_total", "Requests that came with their Splice and reached the shim first: segments held until the Splice (held, released; expired when it never came; full: no room, passed), those passed and noted (request_before_splice), and server replies that came before the Splice (reply_dropped; the kernel sends them again).", isCounter, "what")
	shimFastOpen   = fam("qsplice_shim_fast_open_total", "Carried requests in the handoff connection's SYN (TCP Fast Open): SYNs sent with their request (sent), whose SYN-ACK took it (accepted) or did not (refused: the request followed it); cookies the kernel gave (cookies); SYNs held for their Splice (held) and those that passed without it (held_expired) or were not held for want of room (held_full); replies that overtook their SYN-ACK, held (reply_held) or dropped (reply_dropped).", isCounter, "what")
	shimLinkFrames = fam("qsplice_shim_link_frames_total", "Frames through the shim's devices, by device and direction.", isCounter, "link", "dir")
	shimLinkBytes  = fam("qsplice_shim_link_bytes_total", "Bytes through the shim's devices, by device and direction.", isCounter, "link", "dir")
	shimLinkErrors = fam("qsplice_shim_link_tx_errors_total", "Frame writes a device refused with an error.", isCounter, "link")
	shimLinkDrops  = fam("qsplice_shim_link_tx_dropped_total", "Frames a device accepted and then discarded.", isCounter, "link")
	shimLinkInWait = fam("qsplice_shim_link_tx_in_wait_total", "Frames sent inside a receive-moderation hold's io_uring_enter, with no system call of their own.", isCounter, "link")
	shimFastPath   = fam("qsplice_shim_reply_fastpath_on", "1 while the kernel's reply fast path is attached to the TAP (reply_fastpath in /status says why not).", isGauge)
	shimFastFrames = fam("qsplice_shim_reply_fastpath_frames_total", "Replies the kernel translated and sent itself: in the middle of responses, never seen by the shim (sent); the others, whose originals went on to the shim marked as sent (echoed); and those it translated but dropped because a helper failed (failed).", isCounter, "what")
	shimFastBytes  = fam("qsplice_shim_reply_fastpath_bytes_total", "Payload bytes of the replies the kernel translated and sent itself.", isCounter)
	shimSYNFast    = fam("qsplice_shim_syn_fastpath_on", "1 while the kernel's SYN fast path is attached to the wire's ingress (syn_fastpath in /status says why not).", isGauge)
	shimSYNFrames  = fam("qsplice_shim_syn_fastpath_frames_total", "SYNs with data (the front-end's, carrying their request) the kernel took from the wire into the TAP itself.", isCounter)
	shimFastOffers = fam("qsplice_shim_reply_fastpath_offers_total", "Fast-path entries the shim's engine put (one or more per large response), and map updates that failed (failed).", isCounter, "what")
	shimResponses  = fam("qsplice_shim_responses_total", "Responses whose first reply the shim read, by who sent that reply to the client: the kernel, as an echo (echoed: the connection's fast-path entry reached the kernel before the server's first reply, and the first byte did not wait for the shim to wake), or the shim (shim).", isCounter, "first_reply")
	shimKernDrops  = fam("qsplice_shim_kernel_drops_total", "Frames the kernel dropped because a wire socket's buffer was full.", isCounter)

	shimCtlSent     = fam("qsplice_shim_control_sent_total", "Control messages sent to the front-end, by type.", isCounter, "message")
	shimAcksImplied = fam("qsplice_shim_splice_acks_implied_total", "Splices sent with a Fast Open SYN whose kernel SYN-ACK took the request in the SYN: that SYN-ACK acknowledges the Splice to the front-end, and no SpliceAck was sent.", isCounter)
	shimCtlReceived = fam("qsplice_shim_control_received_total", "Control messages received and handled, by type.", isCounter, "message")
	shimCtlWire     = fam("qsplice_shim_control_wire_total", "Control datagrams from the wire: taken off it for the agent (taken), dropped for a UDP length that does not fit the packet (bad_length) or a wrong UDP checksum (bad_checksum), passed to the kernel's socket as IP fragments (fragment, first fragments) or GSO frames (offloaded).", isCounter, "what")
	shimCtlSentPath = fam("qsplice_shim_control_sent_path_total", "Control datagrams sent to the front-end, by the way they left: built and sent straight on the wire, or through the kernel's socket (Register, before the front-end's MAC is known, or when a pass's frame buffers ran out).", isCounter, "path")
	shimCtlRefused  = fam("qsplice_shim_control_refused_total", "Control datagrams refused, by reason (forged, replayed, reflected, ...).", isCounter, "reason")
	shimCtlBad      = fam("qsplice_shim_control_bad_messages_total", "Control datagrams that failed to decode or were refused.", isCounter)
	shimCtlIgnored  = fam("qsplice_shim_control_ignored_total", "Control messages not acted on: for another back-end or incarnation (stale), or of a type a back-end does not handle.", isCounter, "why")
	shimRegs        = fam("qsplice_shim_registrations_total", "Times a RegisterAck made this back-end registered.", isCounter)
	shimReregs      = fam("qsplice_shim_reregistrations_total", "Times keepalive echoes stopped and the shim registered again.", isCounter)

	shimWorkerFrames  = fam("qsplice_shim_worker_wire_frames_total", "Wire frames by worker and direction.", isCounter, "worker", "dir")
	shimWorkerEntries = fam("qsplice_shim_worker_entries", "Spliced connections on each worker's shard.", isGauge, "worker")
	shimWorkerPassed  = fam("qsplice_shim_worker_tap_handovers_total", "TAP frames a worker read for a flow another worker owns: passed on, or lost.", isCounter, "worker", "outcome")

	shimGathered = fam("qsplice_shim_workers_gathered", "1 while worker 0 serves every shard (-gather): the load fits in one core.", isGauge)
	shimGathers  = fam("qsplice_shim_gather_changes_total", "Times the workers gathered onto worker 0 or spread back to one per shard (-gather).", isCounter, "to")
	shimBusy     = fam("qsplice_shim_worker_cpu_seconds_total", "CPU time each worker's thread used, as last read for gathering (-gather); gathered, worker 0's includes every shard's passes.", isCounter, "worker")

	shimScrapeError = fam("qsplice_shim_scrape_error", "A worker did not answer the status request.", isGauge)

	shimFamilies = []*exposition.Family{
		&shimRegistered, &shimEntries, &shimActive, &shimPeak, &shimPassed, &shimTranslated, &shimTransBytes,
		&shimCopies, &shimMalformed, &shimDrops, &shimSplices, &shimRefused, &shimReplaced, &shimReused, &shimExpired,
		&shimExpiredLt, &shimHandshakes, &shimWireGuard, &shimEarly, &shimFastOpen, &shimLinkFrames, &shimLinkBytes, &shimLinkErrors,
		&shimLinkDrops, &shimLinkInWait, &shimGathered, &shimGathers, &shimBusy, &shimKernDrops, &shimFastPath, &shimFastFrames, &shimFastBytes, &shimFastOffers, &shimResponses, &shimSYNFast, &shimSYNFrames, &shimCtlSent, &shimCtlReceived, &shimAcksImplied, &shimCtlWire, &shimCtlSentPath, &shimCtlRefused, &shimCtlBad,
		&shimCtlIgnored, &shimRegs, &shimReregs, &shimWorkerFrames, &shimWorkerEntries, &shimWorkerPassed, &shimScrapeError,
	}
)

func (sc shimCollector) Describe(ch chan<- *prometheus.Desc) {
	exposition.Describe(ch, shimFamilies...)
}

func (sc shimCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := sc.status()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(shimScrapeError.Desc, err)
		return
	}
	collectShim(ch, &st)
}

// collectShim emits every family from st.
func collectShim(ch chan<- prometheus.Metric, st *Status) {
	n := func(v uint64) float64 { return float64(v) }
	registered := 0.0
	if st.Registered {
		registered = 1
	}
	shimRegistered.Emit(ch, registered)
	shimEntries.Emit(ch, float64(st.Entries))
	shimActive.Emit(ch, float64(st.Active))
	s := &st.Shim
	shimPeak.Emit(ch, n(s.PeakActive))
	shimPassed.Emit(ch, n(s.HostToWire), "host_to_wire")
	shimPassed.Emit(ch, n(s.WireToHost), "wire_to_host")
	shimTranslated.Emit(ch, n(s.Translated))
	shimTransBytes.Emit(ch, n(s.TranslatedBytes))
	shimCopies.Emit(ch, n(s.CopiesToFrontEnd))
	shimMalformed.Emit(ch, n(s.Malformed))
	// The ingress reasons are named as the front-end's drops of the same
	// kind (splice.DropReasonName).
	for _, d := range []struct {
		reason string
		v      uint64
	}{
		{"bad-options", s.BadOptions}, {"bad-vnet", s.BadVNet},
		{"bad-ip-checksum", s.IngressBadIPChecksum}, {"bad-tcp-checksum", s.IngressBadTCPChecksum},
		{"martian-source", s.IngressMartianSource}, {"own-source", s.IngressOwnSource},
		{"multicast-source-mac", s.IngressMulticastMAC}, {"ttl-zero", s.IngressTTLZero},
		{"ip-options", s.IngressIPOptions},
		{"echo-orphaned", s.EchoesOrphaned}, {"last-client", s.RepliesOfLastClient},
	} {
		shimDrops.Emit(ch, n(d.v), d.reason)
	}
	shimSplices.Emit(ch, n(s.Splices))
	for _, r := range []struct {
		reason string
		v      uint64
	}{
		{"not-web-port", s.RefusedNotWebPort}, {"no-handshake", s.RefusedNoHandshake},
		{"inconsistent", s.RefusedInconsistent}, {"request-in-use", s.RefusedRequestInUse}, {"full", s.RefusedFull},
		{"not-idle", s.RefusedNotIdle},
	} {
		shimRefused.Emit(ch, n(r.v), r.reason)
	}
	shimReplaced.Emit(ch, n(s.SplicesReplaced))
	shimReused.Emit(ch, n(s.SplicesReused))
	shimExpired.Emit(ch, n(s.Expired))
	shimExpiredLt.Emit(ch, n(s.ExpiredLifetime))
	shimHandshakes.Emit(ch, n(s.Handshakes), "recorded")
	shimHandshakes.Emit(ch, n(s.HandshakesEvicted), "evicted")
	shimHandshakes.Emit(ch, n(s.HandshakesNotHandoff), "not_handoff")
	shimEarly.Emit(ch, n(s.EarlyRequests), "request_before_splice")
	shimEarly.Emit(ch, n(s.RepliesBeforeSplice), "reply_dropped")
	shimEarly.Emit(ch, n(s.HeldRequests), "held")
	shimEarly.Emit(ch, n(s.HeldReleased), "released")
	shimEarly.Emit(ch, n(s.HeldExpired), "expired")
	shimEarly.Emit(ch, n(s.HeldFull), "full")
	for _, f := range []struct {
		what string
		v    uint64
	}{
		{"sent", s.FastOpenSent}, {"accepted", s.FastOpenAccepted}, {"refused", s.FastOpenRefused},
		{"cookies", s.FastOpenCookies}, {"held", s.FastOpenHeld}, {"held_expired", s.FastOpenHeldExpired},
		{"held_full", s.FastOpenHeldFull}, {"reply_held", s.FastOpenRepliesHeld}, {"reply_dropped", s.FastOpenRepliesDropped},
	} {
		shimFastOpen.Emit(ch, n(f.v), f.what)
	}
	shimWireGuard.Emit(ch, n(s.WireRSTRefused), "rst_refused")
	shimWireGuard.Emit(ch, n(s.WireOutOfWindow), "out_of_window")
	shimWireGuard.Emit(ch, n(s.ResetsCancelled), "reset_cancelled")
	for _, l := range []struct {
		name string
		s    *link.Stats
	}{{"wire", &st.Wire}, {"tap", &st.TAP}} {
		shimLinkFrames.Emit(ch, n(l.s.RxFrames), l.name, "rx")
		shimLinkFrames.Emit(ch, n(l.s.TxFrames), l.name, "tx")
		shimLinkBytes.Emit(ch, n(l.s.RxBytes), l.name, "rx")
		shimLinkBytes.Emit(ch, n(l.s.TxBytes), l.name, "tx")
		shimLinkErrors.Emit(ch, n(l.s.TxErrors), l.name)
		shimLinkDrops.Emit(ch, n(l.s.TxDropped), l.name)
		shimLinkInWait.Emit(ch, n(l.s.TxInWait), l.name)
	}
	shimKernDrops.Emit(ch, n(st.KernelDrops))
	on := 0.0
	if strings.HasPrefix(st.ReplyFastPath, "tcx") {
		on = 1
	}
	shimFastPath.Emit(ch, on)
	shimFastFrames.Emit(ch, n(st.FastPath.Frames), "sent")
	shimFastFrames.Emit(ch, n(st.FastPath.Echoed), "echoed")
	shimFastFrames.Emit(ch, n(st.FastPath.Failed), "failed")
	shimFastBytes.Emit(ch, n(st.FastPath.Bytes))
	on = 0
	if strings.HasPrefix(st.SYNFastPath, "tcx") {
		on = 1
	}
	shimSYNFast.Emit(ch, on)
	shimSYNFrames.Emit(ch, n(st.SYNFast.Frames))
	shimFastOffers.Emit(ch, n(s.FastPathOffers), "put")
	shimFastOffers.Emit(ch, n(st.FastPathErrors), "failed")
	shimResponses.Emit(ch, n(s.ResponsesFirstEchoed), "echoed")
	shimResponses.Emit(ch, n(s.Responses-s.ResponsesFirstEchoed), "shim")

	c := &st.Control
	shimCtlSent.Emit(ch, n(c.Registers), "register")
	shimCtlSent.Emit(ch, n(c.Keepalives), "keepalive")
	shimCtlSent.Emit(ch, n(c.Feedbacks), "feedback")
	shimCtlReceived.Emit(ch, n(c.Echoes), "keepalive")
	shimCtlReceived.Emit(ch, n(c.Splices), "splice")
	shimAcksImplied.Emit(ch, n(c.SpliceAcksImplied))
	shimCtlSentPath.Emit(ch, n(st.ControlSent.Wire), "wire")
	shimCtlSentPath.Emit(ch, n(st.ControlSent.Socket), "socket")
	shimCtlWire.Emit(ch, n(s.ControlTaken), "taken")
	shimCtlWire.Emit(ch, n(s.ControlBadLength), "bad_length")
	shimCtlWire.Emit(ch, n(s.ControlBadChecksum), "bad_checksum")
	shimCtlWire.Emit(ch, n(s.ControlFragments), "fragment")
	shimCtlWire.Emit(ch, n(s.ControlOffloaded), "offloaded")
	for r, v := range c.Refused {
		shimCtlRefused.Emit(ch, n(v), r)
	}
	shimCtlBad.Emit(ch, n(c.BadMessages))
	shimCtlIgnored.Emit(ch, n(c.Stale), "stale")
	shimCtlIgnored.Emit(ch, n(c.Unexpected), "unexpected")
	shimRegs.Emit(ch, n(c.Registrations))
	shimReregs.Emit(ch, n(c.Reregistrations))

	for i := range st.Workers {
		w, id := &st.Workers[i], strconv.Itoa(i)
		shimWorkerFrames.Emit(ch, n(w.Wire.RxFrames), id, "rx")
		shimWorkerFrames.Emit(ch, n(w.Wire.TxFrames), id, "tx")
		shimWorkerEntries.Emit(ch, float64(w.Entries), id)
		shimWorkerPassed.Emit(ch, n(w.HandedOver), id, "passed")
		shimWorkerPassed.Emit(ch, n(w.HandoffsLost), id, "lost")
		shimBusy.Emit(ch, w.CPUSeconds, id)
	}
	gathered := 0.0
	if st.Gathered {
		gathered = 1
	}
	shimGathered.Emit(ch, gathered)
	shimGathers.Emit(ch, n(st.Gathers), "gathered")
	shimGathers.Emit(ch, n(st.Spreads), "spread")
}
