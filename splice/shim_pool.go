package splice

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/httphead"
	"github.com/qsplice/qsplice/splice/wire"
)

// Pooled handoff connections, the shim's side (docs/pooled-c2.md).
//
// A C2 whose client connection ended cleanly may serve the next client of
// the same back-end, which spares the back-end's kernel an accept and
// both machines the handshake's and the close's frames. The front-end
// moves it with a Splice that carries proto.SpliceReuse; the shim's entry
// for the C2 then translates for the new client:
//
//	                        first client            a later client
//	request seq on C2       client's (C2 began      client's + ClientDelta
//	                        at its ISN)
//	reply ACK, SACK edges   unchanged               - ClientDelta (a rewrite
//	                                                point at FrontNext)
//	reply TS echo           unchanged               - ClientTSOffset
//	reply seq, TSval        + SeqDelta, TSOffset    the same, from the Splice
//
// The client-side sequence offset is a correction point that changes no
// bytes (rewrite.go): startB = endB = FrontNext, before = after =
// ClientDelta, so every path that already maps a rewritten connection's
// request numbers maps a reused one's. The TS echo needs its own offset:
// the new client's clock has nothing to do with the last one's, and the
// server's PAWS check wants C2's TSvals to keep growing.
//
// SeqDelta and TSOffset map the server's numbers as in any Splice. The
// front-end bases TSOffset on the server's TSval as it last saw it, which
// the server's clock has since passed: the new client's TSvals run ahead
// of the front-end's own clock, never behind what it sent that client.
//
// A C2 is moved only when it is idle: no FIN or RST from either side, no
// request in service, every request byte acknowledged by the kernel, and
// the Splice's ServerNext and FrontNext are exactly where the shim saw
// the C2 stand. That the last client acknowledged every reply byte is the
// front-end's to know (it pools a C2 only then): the shim may not have
// its last ACK yet, which the front-end sent on C2 just before the
// Splice, when another worker of the back-end's daemon reads the two
// (lab, TestPooledC2sServeClientAfterClient). A reply that starts below
// ServerNext belongs to the last client (the server's retransmission,
// sent before it had that ACK) and is dropped, never translated to the
// new one; the new client's first ACK, at or past ServerNext, covers
// those bytes too if that ACK was lost. The first reply at or past
// ServerNext ends the rule, since the kernel sends its queue in order.

// ErrSpliceNotIdle refuses a Splice that would move a C2 that is not
// idle, or not where the Splice says it stands.
var ErrSpliceNotIdle = errors.New("splice: the C2 to reuse is not idle where the Splice says")

// reuseSplice installs m, a Splice with Reuse.On, on the entry of key.
func (s *Shim) reuseSplice(m *proto.Splice, key fourTuple, now Time) error {
	ent := s.entries[key]
	if ent != nil && ent.reusedBy(m) {
		return nil // a resent Splice: keep the live state
	}
	if err := s.checkReuse(m, ent); err != nil {
		s.stats.SplicesRefused++
		return err
	}
	r := m.Reuse
	s.closeFastPath(ent) // the last client's translation leaves the kernel first
	if s.byReq[ent.requestID] == ent {
		delete(s.byReq, ent.requestID)
	}
	ent.requestID = m.RequestID
	ent.client, ent.vip, ent.cport, ent.vport = m.ClientIP.As4(), m.VIP.As4(), m.ClientPort, m.VIPPort
	ent.cliMAC = m.ClientNextHopMAC
	ent.seqDelta = m.SeqDelta
	ent.tsOffset = m.TSOffset
	ent.scaled = m.Flags&proto.SpliceWindowScale != 0
	ent.wsShift = int(m.WScaleBackend) - int(m.WScaleFrontend)
	ent.reqEnd, ent.reqAcked = wire.Seq(m.RequestEnd), false
	front := wire.Seq(r.FrontNext)
	ent.rw = rewriteRec{on: true, startB: front, endB: front,
		startC: front - wire.Seq(r.ClientDelta), endC: front - wire.Seq(r.ClientDelta),
		before: r.ClientDelta, after: r.ClientDelta}
	ent.rwSplice, ent.rwAcked = ent.rw, true
	ent.cliTSOff = r.ClientTSOffset
	ent.closeResp = m.CloseResponses
	ent.respClosed, ent.finToClient = false, false
	ent.reuse = r
	ent.epoch, ent.epochOn = wire.Seq(r.ServerNext), true
	// What the entry knew of the last client's requests and responses.
	ent.responding, ent.drained = false, false
	ent.replyBytes, ent.respEndKnown, ent.headRequest = 0, false, false
	ent.nextReq = nextRequest{}
	ent.pendAck = pendingAck{idx: -1}
	ent.lastSeen = now
	ent.deadline = Never // its timers were filed under the last RequestID
	s.byReq[m.RequestID] = ent
	if s.held.n > 0 {
		s.held.release = true // its request may be waiting (holdForReuse)
	}
	s.stats.Splices++
	s.stats.SplicesReused++
	s.arm(ent, now)
	return nil
}

// checkReuse decides whether m may move ent's C2 to m's client; nil, or
// the reason, counted.
func (s *Shim) checkReuse(m *proto.Splice, ent *spliceEntry) error {
	if err := s.checkPortAndID(m, ent); err != nil {
		return err
	}
	if ent == nil {
		s.stats.RefusedNotIdle++
		return fmt.Errorf("%w: no C2 on %v:%d", ErrSpliceNotIdle, m.HandoffIP, m.HandoffPort)
	}
	r := m.Reuse
	why := ent.busy()
	switch {
	case m.Flags&(proto.SpliceAtSYN|proto.SpliceRewrite) != 0:
		why = "a reused C2 has no SYN and no rewritten target"
	case why != "": // not idle
	case wire.Seq(r.ServerNext) != ent.sndNxt || wire.Seq(r.FrontNext) != ent.reqNxt:
		why = fmt.Sprintf("it stands at server %d, request %d, not %d, %d",
			uint32(ent.sndNxt), uint32(ent.reqNxt), r.ServerNext, r.FrontNext)
	case m.RequestEnd-r.FrontNext == 0 || m.RequestEnd-r.FrontNext > s.cfg.MaxRequestAhead:
		why = fmt.Sprintf("RequestEnd %d is not within %d bytes after %d", m.RequestEnd, s.cfg.MaxRequestAhead, r.FrontNext)
	case (m.Flags&proto.SpliceTimestamps != 0) != ent.ts:
		why = "its timestamps were negotiated otherwise"
	case m.Flags&proto.SpliceWindowScale != 0 && m.WScaleBackend != ent.hostShift:
		why = fmt.Sprintf("back-end window scale %d, the kernel's is %d", m.WScaleBackend, ent.hostShift)
	default:
		return nil
	}
	s.stats.RefusedNotIdle++
	return fmt.Errorf("%w: %v:%d: %s", ErrSpliceNotIdle, m.HandoffIP, m.HandoffPort, why)
}

// reusedBy reports whether m is the reuse Splice that moved ent to its
// present client, sent again.
func (ent *spliceEntry) reusedBy(m *proto.Splice) bool {
	return ent.reuse.On && ent.reuse == m.Reuse && ent.requestID == m.RequestID &&
		ent.client == m.ClientIP.As4() && ent.cport == m.ClientPort &&
		ent.vip == m.VIP.As4() && ent.vport == m.VIPPort && ent.cliMAC == m.ClientNextHopMAC &&
		ent.seqDelta == m.SeqDelta && ent.tsOffset == m.TSOffset && ent.reqEnd == wire.Seq(m.RequestEnd) &&
		ent.scaled == (m.Flags&proto.SpliceWindowScale != 0) && ent.closeResp == m.CloseResponses &&
		ent.wsShift == int(m.WScaleBackend)-int(m.WScaleFrontend)
}

// lastClientsReply reports whether the server's segment t (n payload
// bytes) is the last client's, to be dropped: data that starts below the
// reuse's ServerNext. The first one at or past it ends the rule.
func (ent *spliceEntry) lastClientsReply(t wire.TCP, n int) bool {
	if n == 0 {
		return false
	}
	if t.Seq().LessThan(ent.epoch) {
		return true
	}
	ent.epochOn = false
	return false
}

// closeResponse writes "close" into the "Connection: keep-alive" of the
// response head at the start of t's payload, in place (the client asked
// to close, which the front-end took out of the request so that the
// server keeps C2: httphead.BlankClose). The byte count stays, so no
// number moves; a complete checksum is updated over the head, a partial
// one needs nothing (the device sums the payload).
func (s *Shim) closeResponse(ent *spliceEntry, t wire.TCP, vh wire.VNetHdr) {
	off := t.HeaderLen()
	head := t[off:min(len(t), off+responseHeadLimit)]
	var before uint16
	if !vh.NeedsCsum() {
		before = wire.Fold(wire.Sum(head, 0))
	}
	if !httphead.CloseKeepAlive(head) {
		s.stats.ResponsesNotClosed++
		return
	}
	s.stats.ResponsesClosed++
	ent.respClosed = true
	if !vh.NeedsCsum() {
		t.SetChecksum(wire.UpdateChecksumRegion(t.Checksum(), before, wire.Fold(wire.Sum(head, 0))))
	}
}

// endWithFIN sets FIN on t, the server's segment that carries the last
// byte of a response the shim told the client to close: the client
// then closes after the server, as when the server closes, not before
// it (a client that closes first keeps the TIME-WAIT, and one making a
// connection per request runs out of ports within seconds). The server
// sent no FIN and keeps C2; the client's ACK of this FIN is moved back
// onto the server's last byte (clampFinAck), and the front-end takes the
// client's side from here (Feedback.FINSent). A retransmission of that
// segment gets the FIN again.
func endWithFIN(ent *spliceEntry, t wire.TCP, vh wire.VNetHdr) {
	if t.Flags()&wire.TCPFlagFIN != 0 {
		return
	}
	old := binary.BigEndian.Uint16(t[12:])
	t[13] |= wire.TCPFlagFIN
	if !vh.NeedsCsum() {
		t.SetChecksum(wire.UpdateChecksum16(t.Checksum(), old, binary.BigEndian.Uint16(t[12:])))
	}
	ent.finToClient, ent.finAt = true, ent.respEnd
}

// clampFinAck moves a client's ACK of the FIN the shim sent (endWithFIN)
// back onto the server's last byte: the server never sent that FIN, and
// drops a segment that acknowledges more than it sent, with the ACK of
// its response in it.
func clampFinAck(ent *spliceEntry, t wire.TCP, vh wire.VNetHdr) {
	if t.Flags()&wire.TCPFlagACK == 0 || t.Ack() != ent.finAt+1 {
		return
	}
	if vh.NeedsCsum() {
		t.SetAck(ent.finAt)
		return
	}
	t.SetAckUpdate(ent.finAt)
}

// A request on a pooled C2 may come before the Splice that moves the C2
// to its client (Reuse.Early: the front-end sends it at once, and
// another worker of the back-end's daemon may read the Splice): the shim
// would take it for the last client's, serve it to that client, and
// report it under the last request. So such a request carries the reuse
// option, which names the Splice by its ClientDelta and ClientTSOffset;
// on an entry that the named Splice has not moved yet, its segments are
// held in the early requests' pool (shim_early.go) until it has, and
// dropped after the handshake window if it never does (the front-end's
// request timer sends them again).

// reuseOptLen is the length of the reuse option: kind 254, length 12,
// ExID "QS", ClientDelta, ClientTSOffset.
const reuseOptLen = 12

// holdForReuse holds frame, ent's segment t from the wire, if it carries
// a reuse option for a Splice that has not moved ent yet, and reports
// whether it did. A segment too large for the pool, or with the pool
// full, passes (and is taken for the last client's, as without the
// option).
func (s *Shim) holdForReuse(ent *spliceEntry, frame []byte, vh wire.VNetHdr, t wire.TCP, now Time) bool {
	off, n := findQSOption(t)
	if n != reuseOptLen {
		return false
	}
	id := [2]uint32{binary.BigEndian.Uint32(t[off+4:]), binary.BigEndian.Uint32(t[off+8:])}
	if ent.reuse.On && id == [2]uint32{ent.reuse.ClientDelta, ent.reuse.ClientTSOffset} {
		return false // its Splice is in
	}
	if len(frame) > heldSlotSize || vh.IsGSO() {
		s.stats.HeldFull++
		return false
	}
	h, mine := s.scanHeld(ent.key, now)
	if h == nil || mine >= heldPerTuple {
		s.stats.HeldFull++
		return false
	}
	h.inUse, h.key, h.vh, h.at, h.n = true, ent.key, vh, now, copy(h.buf, frame)
	h.forReuse, h.reuseID = true, id
	s.held.n++
	s.stats.HeldRequests++
	s.stats.HeldForReuse++
	return true
}

// heldReady reports whether held segment h may go to the host now: its
// tuple has an entry, moved by the Splice it waits for if it waits for
// one.
func (s *Shim) heldReady(h *heldSegment) bool {
	ent := s.entries[h.key]
	return ent != nil && (!h.forReuse || ent.reuse.On && h.reuseID == [2]uint32{ent.reuse.ClientDelta, ent.reuse.ClientTSOffset})
}

// idle reports whether ent's C2 rests between requests: nothing in
// service or on its way, every request byte acknowledged by the kernel,
// neither side closing. A pooled C2 rests so; so does a keep-alive
// client's between its requests.
func (ent *spliceEntry) idle() bool { return ent.busy() == "" }

// busy says why ent's C2 is not idle, or "" when it is.
func (ent *spliceEntry) busy() string {
	switch {
	case ent.reset || ent.cliFin || ent.srvFin:
		return "it is closing"
	case ent.inService || ent.responding || ent.nextReq.waiting:
		return "a response is under way"
	case !ent.reqAcked || ent.rcvAck != ent.reqNxt:
		return "the kernel has not acknowledged every request byte"
	}
	return ""
}

// ResetIdle resets every idle C2 (idle) in the kernel and forgets its
// entry, and returns how many. The back-end's agent calls it when a new
// front-end has started (another incarnation): the one before kept those
// C2s open for its next clients (fe_pool.go) or for clients of its own,
// and the new one knows nothing of them. Left open, each holds a server
// socket until the server's keep-alive timeout, and the new front-end,
// whose handoff ports come round to their tuples, would meet them with
// its SYNs: the kernel's challenge ACK to such a SYN is a reply on a live
// entry, which the shim (or the kernel's fast path) translates to the
// old client, so the new front-end never sees it and waits for its SYN's
// timer, again and again. A C2 with a response under way is left to end
// as it would. The RST goes to the kernel at its rcv_nxt (the exact
// sequence number RFC 5961 asks of a RST), as from the front-end.
//
// The entries are reset in the order of their handoff address, then the
// server's, not the map's: a replay of the same inputs writes the same
// frames. This runs once per front-end restart, so the slice it builds
// costs nothing on the packet path.
func (s *Shim) ResetIdle(now Time, out *Output) int {
	var idle []*spliceEntry
	for _, ent := range s.entries {
		if ent.idle() {
			idle = append(idle, ent)
		}
	}
	slices.SortFunc(idle, func(a, b *spliceEntry) int { return a.key.compare(b.key) })
	for _, ent := range idle {
		tf := wire.TCPFrame{
			SrcMAC: ent.cliMAC, DstMAC: s.cfg.HostMAC, // the kernel reads no source MAC
			Src: ent.key.dstIP, Dst: ent.key.srcIP, SrcPort: ent.key.dstPort, DstPort: ent.key.srcPort,
			Seq: ent.reqNxt, Flags: wire.TCPFlagRST, TTL: 64,
		}
		b := out.alloc(tf.Len())
		tf.Encode(b)
		out.send(PortHost, b)
		s.stats.WireToHost++
		s.stats.IdleResetForNewFrontEnd++
		s.remove(ent)
	}
	return len(idle)
}
