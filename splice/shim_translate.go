package splice

import (
	"bytes"
	"math"
	"time"

	"github.com/qsplice/qsplice/splice/httphead"
	"github.com/qsplice/qsplice/splice/wire"
)

// rescaleWindow converts a back-end window field to the client's view:
// win << wsB >> wsF, clamped to 16 bits, and never rounded from non-zero
// to zero, which would announce a closed window the server never meant
// (design trap 1).
func rescaleWindow(win uint16, shift int) uint16 {
	if shift == 0 || win == 0 {
		return win
	}
	var w uint32
	if shift > 0 {
		w = uint32(win) << shift
	} else {
		w = uint32(win) >> -shift
	}
	switch {
	case w > 65535:
		return 65535
	case w == 0:
		return 1
	}
	return uint16(w)
}

// replyVNetFits reports whether a reply's virtio-net header describes its
// frame the way translateReply handles it: a partial checksum, if any, in
// the TCP checksum field; a segmentation, if any, of TCPv4 into segments
// of a given size, with a partial checksum. The kernel hands over nothing
// else for TCP. Anything else is dropped (and counted), not passed: the
// reply must not leave untranslated, and translated under a header that
// means something else the device would corrupt it.
func replyVNetFits(vh wire.VNetHdr, p *wire.Packet) bool {
	if vh.NeedsCsum() && (int(vh.CsumStart) != p.L4 || vh.CsumOffset != wire.TCPChecksumOff) {
		return false
	}
	if vh.IsGSO() {
		return vh.NeedsCsum() && vh.GSOType&^wire.GSOECN == wire.GSOTCPv4 && vh.GSOSize != 0
	}
	return true
}

// translateReply rewrites a server segment on C2 into a segment from the
// VIP to the client, in place, and sends it towards the client's next
// hop. While the request is not yet acknowledged, and for FIN and RST, a
// header-only copy of the original goes to the front-end as well: it
// owns the request's retransmission and the flow's end, and it must never
// receive response payload.
//
// The segment may be a super-frame (vh.IsGSO): up to 64 KiB of payload
// that the device will cut into vh.GSOSize-byte segments, each a copy of
// the headers with the sequence number advanced. Translating its headers
// once translates every segment: the sequence number is the first byte's,
// and the accounting below sees the whole payload, as it would the
// segments one by one.
func (s *Shim) translateReply(ent *spliceEntry, p *wire.Packet, vh wire.VNetHdr, now Time, out *Output) {
	t := p.TCP
	o := &s.opts
	if !replyVNetFits(vh, p) {
		s.stats.BadVNet++
		return
	}
	if err := wire.ParseOptions(t, o); err != nil {
		s.stats.BadOptions++
		return
	}
	flags := t.Flags()
	n := len(t.Payload())
	if ent.epochOn && ent.lastClientsReply(t, n) {
		s.stats.RepliesOfLastClient++ // never to the new client (shim_pool.go)
		return
	}
	// An echo: the kernel sent this reply itself and gives it here for
	// everything else (shim_fastpath.go).
	echo := s.cfg.KernelEcho && p.IP.TTL() == 0
	// Where the bytes this engine has seen end: a reply that lies below
	// it, with no response under way, is the last one's sent again.
	seen := ent.sndNxt
	s.noteHostSegment(ent, t, flags, n)
	ent.lastSeen = now
	var copyToFE []byte // sent after the client's frame, below
	if !ent.reqAcked || !ent.rwAcked || flags&(wire.TCPFlagFIN|wire.TCPFlagRST) != 0 {
		copyToFE = s.headerCopyForFrontEnd(p, out)
		if flags&wire.TCPFlagACK != 0 && ent.reqEnd.LessEq(t.Ack()) {
			ent.reqAcked = true
		}
		if flags&wire.TCPFlagACK != 0 && ent.rw.endB.LessEq(t.Ack()) {
			ent.rwAcked = true
		}
	}
	// The server's last reply sent again (a timeout, a tail loss probe)
	// may still wait in the TAP when the next request is read and put in
	// service: with echoes the client has the reply from the kernel and
	// sends its next request while the shim is slow to wake (CI's lab
	// test, twenty-seventh session). It belongs to no response but the
	// one that ended: taken as the start of the next, it stood in for
	// that one's head, which was then never read (so never reported,
	// nor handed to the kernel's middle).
	resent := n > 0 && !ent.responding && (t.Seq() + wire.Seq(n)).LessEq(seen)
	if n > 0 && !resent {
		s.noteFastPathGap(ent, t.Seq())
		if !ent.responding {
			// The response starts at its first byte not seen before.
			from := t.Seq()
			if from.LessThan(seen) {
				from = seen
			}
			ent.responding = true
			ent.respClosed, ent.finToClient = false, false
			ent.srvNxt = from
			ent.firstReply = now
			if ent.closeResp && from == t.Seq() && !echo {
				s.closeResponse(ent, t, vh) // before the head is read or sent (shim_pool.go)
			}
			s.stats.Responses++
			if echo {
				s.stats.ResponsesFirstEchoed++
			}
			ent.respEnd, ent.respEndKnown = responseEnd(from, t.Payload()[from-t.Seq():], ent.headRequest)
		}
		ent.lastReply = now
		ent.drained = false
		ent.replyBytes += uint64(n)
		if end := t.Seq() + wire.Seq(n); ent.srvNxt.LessThan(end) {
			ent.srvNxt = end
		}
	}
	if ent.cliFin && flags&wire.TCPFlagACK != 0 && ent.cliFinEnd.LessEq(t.Ack()) {
		ent.cliFinAnswered = true
	}
	if flags&wire.TCPFlagFIN != 0 && !ent.srvFin {
		ent.srvFin = true
		if ent.cliFin && !ent.cliFinAnswered && ent.owedAcks < math.MaxUint8 {
			// The client's FIN reached the kernel before this engine
			// knew of the server's: the kernel sent its FIN itself (an
			// echo) and the client answered before the echo was read.
			// The kernel's answer to that FIN is still to come, after
			// both FINs: owed (owesAck), not an answer to a SYN never
			// seen, which would take it from the client.
			ent.owedAcks++
		}
	}
	if flags&wire.TCPFlagRST != 0 {
		ent.reset, ent.resetByWire = true, false // the kernel's own: final
	}
	// The server is done with a request once it has sent every byte its
	// head announced: that frees its slot, whatever the client's pace.
	done := n > 0 && !resent && ent.inService && (ent.respEndKnown && ent.respEnd.LessEq(ent.srvNxt) || ent.nextReq.endsResponse(ent))
	if ent.respClosed && !echo && n > 0 && ent.respEndKnown && t.Seq()+wire.Seq(n) == ent.respEnd {
		endWithFIN(ent, t, vh) // the last byte of a response that said close (shim_pool.go)
	}
	if echo {
		// The kernel sent it: everything but the sending.
		s.stats.Echoes++
		s.stats.EchoBytes += uint64(n)
	} else {
		rewriteReply(ent, p, vh, o)
		s.stats.Translated++
		s.stats.TranslatedBytes += uint64(n)
		out.sendVNet(PortWire, p.Eth[:p.End], vh)
	}
	if copyToFE != nil {
		// The client's frame goes first in the pass's batch: on a veth
		// each frame reaches its receiver inside the shim's sendmmsg, and
		// the receiver it wakes may take the shim's CPU before the next
		// frame leaves. The client is waiting for this reply; the
		// front-end learns from the copy only that the request arrived
		// or the connection ended, and takes the copy and the client's
		// answers to the reply in either order (its checks bound the
		// client's ACKs by the client's own window: fe_validate.go).
		s.stats.CopiesToFrontEnd++
		out.send(PortWire, copyToFE)
	}
	if done || ent.reset {
		s.finishResponse(ent, out)
	}
	s.offerFastPath(ent, !echo && n > 0)
	s.arm(ent, now)
}

// rewriteReply turns the server segment p on ent's connection into one
// from the VIP to the client, in place, under the virtio-net header vh.
func rewriteReply(ent *spliceEntry, p *wire.Packet, vh wire.VNetHdr, o *wire.TCPOptions) {
	t := p.TCP
	// Every rewrite is in place and keeps each field's size, so no header
	// changes length: vh's HdrLen, CsumStart, CsumOffset and GSOSize fit
	// the translated frame as they fit the original, and so does its ECN
	// bit, since CWR is not touched. The header leaves unchanged.
	ip := p.IP
	oldSrc, oldDst := ip.Src(), ip.Dst()
	ip.SetSrc(ent.vip) // the IPv4 header checksum is always complete
	ip.SetDst(ent.client)
	if vh.NeedsCsum() {
		// The field holds the pseudo-header's sum, which the device
		// completes over the header and payload as it sends them: only
		// the addresses change it, as a plain sum.
		t.UpdatePartialAddrs(oldSrc, oldDst, ent.vip, ent.client)
		t.SetSrcPort(ent.vport)
		t.SetDstPort(ent.cport)
		t.SetSeq(t.Seq() + wire.Seq(ent.seqDelta))
		if ent.ts && o.HasTS {
			t.SetUint32At(o.TSOffset, o.TSVal+ent.tsOffset)
			if ent.cliTSOff != 0 {
				t.SetUint32At(o.TSOffset+4, o.TSEcr-ent.cliTSOff)
			}
		}
		if ent.scaled {
			t.SetWindow(rescaleWindow(t.Window(), ent.wsShift))
		}
		if ent.rw.on {
			translateRequestNumbers(ent, t, o, false)
		}
	} else {
		t.UpdateAddrs(oldSrc, oldDst, ent.vip, ent.client)
		t.SetSrcPortUpdate(ent.vport)
		t.SetDstPortUpdate(ent.cport)
		t.SetSeqUpdate(t.Seq() + wire.Seq(ent.seqDelta))
		if ent.ts && o.HasTS {
			t.SetUint32AtUpdate(o.TSOffset, o.TSVal+ent.tsOffset)
			if ent.cliTSOff != 0 {
				t.SetUint32AtUpdate(o.TSOffset+4, o.TSEcr-ent.cliTSOff)
			}
		}
		if ent.scaled {
			t.SetWindowUpdate(rescaleWindow(t.Window(), ent.wsShift))
		}
		if ent.rw.on {
			translateRequestNumbers(ent, t, o, true)
		}
	}
	p.Eth.SetDst(ent.cliMAC)
}

// headerCopyForFrontEnd builds, in out's arena, the front-end's copy of
// the segment: its headers only, still addressed to the handoff address,
// with lengths and checksums made right for the shortened packet. The
// checksums are computed in full, the field not read, so a source whose
// checksum was partial or which was a super-frame gives the same copy; it
// goes with the zero vnet header. It is built before the segment is
// translated in place, and sent after it.
func (s *Shim) headerCopyForFrontEnd(p *wire.Packet, out *Output) []byte {
	hl := p.L4 + p.TCP.HeaderLen()
	b := out.alloc(max(hl, 60))
	copy(b, p.Eth[:hl])
	clear(b[hl:])
	ip := wire.IPv4(b[p.L3:hl])
	ipLen := hl - p.L3
	ip[2], ip[3] = byte(ipLen>>8), byte(ipLen)
	if ip.TTL() == 0 {
		ip[8] = echoCopyTTL // an echo's mark is not the front-end's to see
	}
	ip.SetChecksum(0)
	ip.SetChecksum(ip.ComputeChecksum())
	t := wire.TCP(b[p.L4:hl])
	t.SetChecksum(0)
	t.SetChecksum(t.ComputeChecksum(ip.Src(), ip.Dst()))
	return b
}

// observeRequest watches the client's (translated) segments going to the
// server: request arrivals start a service-time measurement; ACKs that
// cover the whole response end it; FIN and RST drive the linger. A frame
// the wire side's GRO merged counts with all its payload: the IPv4 Total
// Length of a merged frame covers every segment in it. Only segments the
// kernel would accept count; the others pass to it, which answers them,
// and change nothing here (acceptable, shim_guard.go).
func (s *Shim) observeRequest(ent *spliceEntry, p *wire.Packet, now Time, out *Output) (accepted bool) {
	t := p.TCP
	flags := t.Flags()
	if !s.acceptable(ent, t, flags) {
		return false
	}
	ent.lastSeen = now
	if off := findRewriteOption(t); off >= 0 {
		s.noteRewrite(ent, parseRewriteOption(t, off))
	}
	if flags&wire.TCPFlagRST != 0 {
		if !ent.reset {
			ent.reset, ent.resetByWire = true, true
		}
		s.finishResponse(ent, out)
		s.endFastPath(ent)
		s.arm(ent, now)
		return true
	}
	if ent.responding && !ent.respEndKnown && !ent.drained && flags&wire.TCPFlagACK != 0 && ent.srvNxt.LessEq(t.Ack()) {
		// No length in the head: the response is over once the client
		// has it all and the server stays quiet (see ResponseQuiet).
		ent.drained = true
		ent.drainedAt = now
	}
	if n := len(t.Payload()); n > 0 && ent.reqNxt.LessThan(t.Seq()+wire.Seq(n)) {
		// New request bytes. A retransmission (the front-end resending
		// the request, a client resending a segment) is neither a new
		// request nor the end of the response in progress.
		ent.reqNxt = t.Seq() + wire.Seq(n)
		if ent.inService && flags&wire.TCPFlagACK != 0 && ent.sndNxt.LessThan(t.Ack()) {
			// The client has replies this engine has not read (echoes
			// still in the TAP, or the kernel's middle): the response
			// in service is not over here yet.
			s.awaitEcho(ent, t, now)
		} else if ent.responding {
			// A pipelined or keep-alive request before the last
			// response was fully acknowledged: close that one first.
			s.finishResponse(ent, out)
		}
		if !ent.inService {
			s.startService(ent, now, isHeadRequest(t.Payload()))
		}
	}
	if flags&wire.TCPFlagFIN != 0 && !ent.cliFin {
		ent.cliFin = true
		ent.cliFinEnd = t.Seq() + wire.Seq(len(t.Payload())) + 1
	}
	s.endFastPath(ent)
	s.arm(ent, now)
	return true
}

// startService puts a request that arrived at at in service on ent:
// the one this engine saw (observeRequest), one that crossed before the
// Splice (startEarlyRequest), one that waited for the response before
// it (startNextRequest).
func (s *Shim) startService(ent *spliceEntry, at Time, head bool) {
	ent.inService, ent.served = true, true
	ent.drained = false // whatever drained before belongs to the last response
	ent.reqStart = at
	ent.headRequest = head
	s.active++
	s.stats.PeakActive = max(s.stats.PeakActive, uint64(s.active))
}

// isHeadRequest reports whether a request's first bytes are a HEAD's:
// its response has no body.
func isHeadRequest(payload []byte) bool { return bytes.HasPrefix(payload, []byte("HEAD ")) }

// finishResponse reports a served request: its service time runs from the
// request's first byte arriving to the last response byte leaving the
// server, which is what the request cost the back-end.
func (s *Shim) finishResponse(ent *spliceEntry, out *Output) {
	if !ent.inService {
		// Reply bytes with no request in service: a response that ran
		// past the length its head gave, or the new tail of a reply
		// sent again (one wholly sent before starts nothing:
		// translateReply). Forget them, drained state included.
		ent.responding = false
		ent.drained = false
		return
	}
	if ent.responding {
		service, first := responseTimes(ent.reqStart, ent.firstReply, ent.lastReply)
		out.event(Event{
			Kind:        EvResponseDone,
			RequestID:   ent.requestID,
			ServiceTime: service,
			Bytes:       ent.replyBytes,
			ResponseEnd: uint32(ent.srvNxt),
			FirstByte:   first,
			CloseSent:   ent.respClosed,
			FINSent:     ent.finToClient,
		})
	}
	ent.inService = false
	ent.responding = false
	ent.drained = false
	ent.replyBytes = 0
	s.active--
	s.startNextRequest(ent)
}

// responseHeadLimit bounds the search for the end of a response head: a
// super-frame's payload may be 64 KiB of which the head is the first
// bytes, and a body with no head in front (a retransmitted tail) need not
// be scanned to its end.
const responseHeadLimit = 8 << 10

// responseEnd reads the response head in the first reply segment (or
// super-frame) and, if it says how long the response is, returns the
// sequence number just past its last byte. Otherwise the shim falls back
// to the quiet-period rule. Heads split across segments are rare enough to
// take the fallback.
func responseEnd(seq wire.Seq, payload []byte, headRequest bool) (wire.Seq, bool) {
	var r httphead.Response
	if httphead.ParseResponse(payload, responseHeadLimit, &r) != nil {
		return 0, false
	}
	body, ok := r.BodyKnown(headRequest)
	if !ok || body > 1<<31 {
		return 0, false
	}
	return seq + wire.Seq(r.HeadLen) + wire.Seq(body), true
}

// responseTimes are a response's service time and first byte, both from
// its request's start: the first byte at least 1 ns (0 says "not
// measured" on the wire, proto.Feedback), and the service time never
// shorter than it. A request the kernel took with its SYN is in service
// from the SYN-ACK's time when the shim read neither the SYN nor its
// Splice first (shim_fastopen.go), and a reply read in the same pass has
// that same time: the response does not end before its first byte.
func responseTimes(start, first, last Time) (service, firstByte time.Duration) {
	firstByte = max(first.Sub(start), 1)
	return max(last.Sub(start), firstByte), firstByte
}
