package splice

import (
	"encoding/binary"

	"github.com/qsplice/qsplice/splice/wire"
)

// forwardClient translates a client segment onto C2 in place (handoff
// step 7): addresses and ports become C2's, and everything that names
// reply-direction bytes -- the ACK number, SACK edges, the timestamp echo
// -- moves from client-facing to back-end numbers. Sequence numbers need
// nothing: C2 started at the client's ISN. Checksums are updated
// incrementally, so the payload is never read.
func (e *FrontEnd) forwardClient(f *flow, p *wire.Packet, now Time, out *Output) {
	t := p.TCP
	ip := p.IP
	o := &e.opts
	if err := wire.ParseOptions(t, o); err != nil {
		e.drop(dropBadOptions)
		return
	}
	flags := t.Flags()
	// Only a segment the client could have sent moves anything, the
	// storm detector included (fe_validate.go).
	if !e.validClient(f, t, now, out) || e.resetAborted(f, t, now, out) {
		return
	}
	f.tl.clientSACK(o.NumSACK, now)
	if f.state == stSpliced && f.storm.noProgress(t, o.NumSACK, now, e.cfg.StormLimit, e.cfg.StormWindow) {
		e.stats.AckStorms++
		e.Abort(f.id, now, out)
		return
	}
	if o.HasTS {
		f.noteClientTS(o.TSVal)
		f.cliTSecr = o.TSEcr
	}
	f.cliWin = t.Window()
	ackAdvanced := flags&wire.TCPFlagACK != 0 && f.cliAck.LessThan(t.Ack())
	if ackAdvanced {
		f.cliAck = t.Ack()
		f.cliAckAt = now
	}
	e.spliceProven(f, t, out)
	if flags&wire.TCPFlagFIN != 0 && e.poolsAtClientFIN(f, t) {
		e.holdFIN(f, t, o, ackAdvanced, now, out) // C2 may outlive the client (fe_pool.go)
		return
	}
	if f.finHeld && flags&wire.TCPFlagRST == 0 && t.Seq() == f.cliNxt && len(t.Payload()) == 0 {
		return // the held FIN sent again, or an ACK with nothing new for the server
	}
	if f.closeWanted {
		if len(t.Payload()) > 0 {
			f.closeWanted, f.closeBy = false, 0 // another request after all: keep-alive it is
		} else if ackAdvanced {
			e.scheduleClose(f, ResponseEnd{}, now, out) // its ACK of the last response may be what was missing
		}
	}
	if f.kaState == kaRefused && flags&wire.TCPFlagRST == 0 && e.refusalProgress(f, ackAdvanced, now, out) {
		return // the flow is ours again; the segment's ACK was all it brought
	}
	if f.state == stSpliced && !e.followUp(f, p, o, now, out) {
		if f.state == stSpliced { // not taken back to answer in the stream
			e.armSplicedTimer(f, now)
		}
		return
	}
	// Only bytes move the back-end's rcv_nxt: a pure ACK may carry a
	// sequence number past follow-up bytes that are still held.
	if f.rw.on && flags&wire.TCPFlagRST == 0 && e.sendC2Around(f, t, o, t.Seq(), t.Payload(), flags&wire.TCPFlagFIN, out) {
		// Bytes of a replaced target: what else the segment carries went
		// on in segments of its own (fe_rewrite.go).
		e.forwardedClientSegment(f, flags, now, out)
		return
	}
	if end := t.Seq() + wire.Seq(len(t.Payload())); len(t.Payload()) > 0 && f.cliNxt.LessThan(end) {
		f.cliNxt = end
	} else if len(t.Payload()) > 0 {
		f.tl.retx(RetxClientData, now) // bytes the back-end has, or will have from our copy
	}
	for off, n := findQSOption(t); off >= 0; off, n = findQSOption(t) {
		blankQSOption(t, off, n) // only the front-end sets a connection's offsets
	}
	oldSrc, oldDst := ip.Src(), ip.Dst()
	ip.SetSrc(e.handoff)
	ip.SetDst(f.bIP)
	t.UpdateAddrs(oldSrc, oldDst, e.handoff, f.bIP)
	t.SetSrcPortUpdate(f.hport)
	t.SetDstPortUpdate(f.backend.Port)
	if f.rw.on {
		t.SetSeqUpdate(f.rw.toB(t.Seq()))
	}
	delta := wire.Seq(f.seqDelta)
	if flags&wire.TCPFlagACK != 0 {
		t.SetAckUpdate(t.Ack() - delta)
	}
	for k := 0; k < o.NumSACK; k++ {
		off := o.SACKOffset + 8*k
		t.SetUint32AtUpdate(off, binary.BigEndian.Uint32(t[off:])-f.seqDelta)
		t.SetUint32AtUpdate(off+4, binary.BigEndian.Uint32(t[off+4:])-f.seqDelta)
	}
	if o.HasTS && f.tsB && o.TSEcr != 0 {
		t.SetUint32AtUpdate(o.TSOffset+4, o.TSEcr-f.tsOffset)
	}
	if o.HasTS && f.cliTSOff != 0 {
		t.SetUint32AtUpdate(o.TSOffset, o.TSVal+f.cliTSOff) // a pooled C2's clock (fe_pool.go)
	}
	eth := p.Eth
	eth.SetSrc(e.cfg.MAC)
	eth.SetDst(f.backend.MAC)
	n := len(t.Payload())
	f.forwardedBytes += uint64(n)
	e.stats.ForwardedBytes += uint64(n)
	pure := ackAdvanced && pureAck(t, n, o.NumSACK)
	if pure {
		e.noteNarrowAck(f, t.Window())
	}
	if pure && e.coalesceAck(f, eth[:p.End], f.cliAck, out) {
		// Written over the flow's previous ACK of this pass.
		if f.state == stSpliced {
			e.armSplicedTimer(f, now)
		}
		return
	}
	e.stats.ForwardedFrames++
	e.stats.TxFrames++
	out.send(PortWire, eth[:p.End])
	if pure {
		f.notePureAck(out, f.cliAck)
	} else {
		f.clearPendingAck()
	}
	e.forwardedClientSegment(f, flags, now, out)
}

// forwardedClientSegment is what follows a client segment sent on C2.
func (e *FrontEnd) forwardedClientSegment(f *flow, flags uint8, now Time, out *Output) {
	if flags&wire.TCPFlagFIN != 0 {
		f.cliFin = true
		f.tl.stamp(StepClose, now)
	}
	if flags&wire.TCPFlagRST != 0 {
		e.linger(f, now, CloseRST, out)
		return
	}
	if f.state == stSpliced {
		e.armSplicedTimer(f, now)
	}
}

// onTimer runs f's deadline.
func (e *FrontEnd) onTimer(f *flow, now Time, out *Output) {
	switch f.state {
	case stReading:
		e.answer(f, 408, "request head not received in time", now, out)
	case stQueued:
		e.answer(f, 503, "request waited too long", now, out)
	case stConnecting:
		f.retries++
		if f.retries > 3 {
			e.handoffFailed(f, "back-end did not answer", now, out)
			return
		}
		e.stats.Retransmits++
		e.sendC2SYN(f, now, out)
		e.setDeadline(f, now.Add(e.cfg.HandoffTimeout<<f.retries))
	case stSpliceWait:
		if e.ackWhileWaiting(f, now, out) {
			return // the server had the last client's ACK (fe_pool.go)
		}
		if f.spliceHeld {
			e.handoffFailed(f, "no back-end slot became free in time", now, out)
			return
		}
		e.handoffFailed(f, "back-end shim did not confirm the splice", now, out)
	case stSpliced:
		if f.kaState == kaRefused {
			if now >= f.refuseBy {
				e.refusalTimeout(f, now, out)
				return
			}
			defer func() {
				if f.state == stSpliced && f.kaState == kaRefused {
					e.deadlineBy(f, f.refuseBy)
				}
			}()
		}
		if f.finHeld {
			if now < f.finHeldBy {
				e.deadlineBy(f, f.finHeldBy)
				return
			}
			e.releaseFIN(f, now, out) // no Feedback came to pool C2 (fe_pool.go)
			return
		}
		if f.closeBy != 0 {
			if now < f.closeBy {
				e.deadlineBy(f, f.closeBy)
				return
			}
			e.closeDue(f, now, out) // the client that asked to close did not (fe_pool.go)
			return
		}
		switch {
		case f.reqUna.LessThan(f.reqEnd):
			if now < f.rto {
				e.setDeadline(f, f.rto)
				return
			}
			f.retries++
			if f.retries > e.cfg.MaxRetries {
				e.Abort(f.id, now, out)
				return
			}
			e.stats.Retransmits++
			f.tl.requestResent(now)
			e.sendRequest(f, now, out)
			e.setDeadline(f, f.rto)
		case f.cliFin && f.srvFin:
			if due := f.lastSeen.Add(e.cfg.Linger); now < due {
				e.setDeadline(f, due)
				return
			}
			e.linger(f, now, CloseFIN, out)
		default:
			if due := f.lastSeen.Add(e.cfg.IdleTimeout); now < due {
				e.setDeadline(f, due)
				return
			}
			e.Abort(f.id, now, out)
		}
	case stAnswering:
		e.answerTimeout(f, now, out)
	case stLinger:
		e.free(f, now)
	}
}

// inputICMP forwards "fragmentation needed" about a reply (which the
// client's path sent to the VIP) to the back-end that sent the reply, with
// the embedded header translated back to C2 (design trap 9). Other ICMP to
// our addresses is dropped.
func (e *FrontEnd) inputICMP(p *wire.Packet, now Time, out *Output) {
	ip := p.IP
	if !e.isVIP(ip.Dst()) {
		e.drop(dropNotOurs)
		return
	}
	icmp := ip.Payload()
	const typeDestUnreach, codeFragNeeded = 3, 4
	if icmp[0] != typeDestUnreach || icmp[1] != codeFragNeeded || len(icmp) < 8+20+8 {
		e.drop(dropNotOurs)
		return
	}
	inner := wire.IPv4(icmp[8:])
	ihl := inner.HeaderLen()
	if inner[0]>>4 != 4 || ihl < 20 || len(icmp) < 8+ihl+8 || inner.Protocol() != wire.ProtoTCP {
		e.drop(dropMalformed)
		return
	}
	innerTCP := icmp[8+ihl:]
	// The embedded packet is a reply: VIP:port -> client:port.
	key := fourTuple{
		srcIP: inner.Dst(), dstIP: inner.Src(),
		srcPort: binary.BigEndian.Uint16(innerTCP[2:]), dstPort: binary.BigEndian.Uint16(innerTCP[0:]),
	}
	f := e.flows[key]
	if f == nil || f.hport == 0 || !f.c2Up {
		e.drop(dropNoFlow)
		return
	}
	// Rewrite the embedded header back to what the back-end sent: the
	// back-end's kernel matches it against its own socket.
	copy(inner[12:16], f.bIP[:])
	copy(inner[16:20], e.handoff[:])
	binary.BigEndian.PutUint16(innerTCP[0:], f.backend.Port)
	binary.BigEndian.PutUint16(innerTCP[2:], f.hport)
	seq := binary.BigEndian.Uint32(innerTCP[4:])
	binary.BigEndian.PutUint32(innerTCP[4:], seq-f.seqDelta)
	inner.SetChecksum(0)
	inner.SetChecksum(inner.ComputeChecksum())
	// The outer packet now goes to the back-end; ICMP is small, so a full
	// checksum over it costs little.
	ip.SetDst(f.bIP)
	icmp[2], icmp[3] = 0, 0
	c := wire.Checksum(icmp)
	icmp[2], icmp[3] = byte(c>>8), byte(c)
	p.Eth.SetSrc(e.cfg.MAC)
	p.Eth.SetDst(f.backend.MAC)
	e.stats.ICMPForwarded++
	e.stats.TxFrames++
	out.send(PortWire, p.Eth[:p.End])
	f.clearPendingAck()
}
