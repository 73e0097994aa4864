package splice

// The kernel's reply fast path (issue 7; the program: splice/link/replyfast.go).
// On when the daemon has the program (ShimConfig.KernelFastPath), with
// echoes (KernelEcho) by default.
//
// With ShimConfig.KernelFastPath the daemon runs a TC program on the
// TAP's egress that translates a reply in the middle of a response the
// way translateReply does and sends it out of the wire device itself, so
// its bytes cross no copy into and out of userspace. This engine decides
// which replies the kernel may take, and tells the daemon through
// FastPathUpdate commands (TakeFastPaths): a Put names a connection, the
// rewrite, and two bounds; a Delete takes it away.
//
// Two ways. In the middle of a response the shim has nothing to learn
// from a reply: the request acknowledged (no more header copies for the
// front-end), no request rewriting (its ACK numbers would need
// translating), a response whose head gave its length and which has
// begun, and the reply ends before the response does. Such a reply the
// kernel sends and keeps (Middle); the bytes it sent reach the accounting
// as the gap between the last reply seen here and the next (a
// retransmission the kernel sent counts once, which is what the response
// cost). Any other reply with data it can translate the kernel sends too
// (a clone), and gives the original here marked as sent with TTL 0 (an
// echo, which the kernel's own TCP never makes): this engine does with it
// everything it does with a reply but send it, so the response's head is
// read, its end and service time reported and the front-end's copy made,
// while the client has its bytes one wake-up of the shim sooner. That is
// the first reply of every response, the time to first byte (with the
// FIN, when the server closes after a short response). Echoes are
// allowed from the Splice on, until a rewrite or a reset; RST, pure ACKs,
// a bare FIN and replies with options the kernel cannot find come here as
// before.
//
// Order. A Put says AllowFrom = the end of the replies this engine has
// handled. The program records the end of every data frame it leaves to
// the TAP and takes a frame only if none of them ends after AllowFrom:
// a reply still waiting in the TAP's queue keeps the fast path shut until
// this engine has handled it and said so with another Put. The daemon
// applies the commands after it has sent the pass's wire frames, so a
// frame the kernel takes never overtakes one the shim sends; only a Put
// made before any reply was handled (Ahead) may go before them.

import "github.com/qsplice/qsplice/splice/wire"

// FastPathUpdate is one command for the kernel's reply fast path.
type FastPathUpdate struct {
	Key    wire.FastPathKey
	Entry  wire.FastPathEntry // for a Put
	Delete bool
	// Ahead: a Put for a connection none of whose replies this engine
	// has handled (the one its Splice makes), so none waits in the
	// pass's output, and with no command for its tuple before it in the
	// pass: the daemon may apply it before sending that output:
	// the kernel's first reply often follows the SYN-ACK within tens of
	// microseconds, about what the pass's wire write takes. (A reply the
	// program left to the TAP meanwhile holds the kernel back by its
	// ledger until a later Put.)
	Ahead bool
}

// TakeFastPaths moves the fast-path commands queued since the last call
// to out.FastPaths, in the order they were made. The daemon calls it once
// a pass, after everything it fed the engine, and applies them once the
// pass's wire frames are sent.
func (s *Shim) TakeFastPaths(out *Output) {
	out.FastPaths = append(out.FastPaths, s.fastQueue...)
	s.fastQueue = s.fastQueue[:0]
}

// echoCopyTTL is the TTL of the front-end's header copy of an echo,
// whose own TTL 0 marks it as sent (the kernel's default TTL).
const echoCopyTTL = 64

// offerFastPath tells the kernel what it may send of ent's replies now,
// if that changed: echoes always (while the connection's replies need
// no translation the kernel cannot make), the middle of the response
// when the shim has nothing to learn from it. punted says a reply with
// data that the kernel left to this engine was just handled: AllowFrom
// moves past it, which may reopen the kernel's path.
func (s *Shim) offerFastPath(ent *spliceEntry, punted bool) {
	if !s.cfg.KernelFastPath {
		return
	}
	// The program shifts a pooled C2's ACKs and TS echoes by constants
	// (shim_pool.go), not a rewritten target's correction point.
	shift := ent.reuse.On && ent.rw.startB == ent.rw.endB && ent.rw.before == ent.rw.after
	if ent.rw.on && !shift || ent.ended() {
		s.closeFastPath(ent)
		return
	}
	// A response head to rewrite (shim_pool.go) must cross this engine:
	// the kernel may send a response's middle, not its first reply.
	echo := s.cfg.KernelEcho && !ent.closeResp
	middle := ent.inService && ent.responding && ent.respEndKnown && ent.srvNxt.LessThan(ent.respEnd) &&
		ent.reqAcked && ent.rwAcked && !ent.srvFin
	if !middle && !echo {
		s.closeFastPath(ent) // nothing the kernel may take now
		return
	}
	if ent.fastOn && ent.srvFin && !middle {
		// The server has sent its last reply: no new one is left for the
		// kernel to take, and a reply sent again is held back by the
		// ledger of the entry as it is. A Put that only moves AllowFrom
		// would be one system call more per short connection whose FIN
		// reply the shim sent (half of them under wrk's 1K close load).
		return
	}
	if ent.fastOn && !punted && middle == ent.fastMiddle && (!middle || ent.fastEnd == ent.respEnd) {
		return
	}
	k := ent.key
	e := wire.FastPathEntry{
		VIP: ent.vip, Client: ent.client, VPort: ent.vport, CPort: ent.cport,
		ClientMAC: ent.cliMAC, SeqDelta: ent.seqDelta, TSOffset: ent.tsOffset,
		TS: ent.ts, Scaled: ent.scaled, WindowShift: ent.wsShift,
		AllowFrom: ent.sndNxt, Echo: echo, Gen: uint32(ent.requestID),
	}
	if shift {
		e.Shift, e.AckDelta, e.TSEcrDelta, e.SeqFloor = true, ent.rw.before, ent.cliTSOff, ent.epoch
	}
	if middle {
		e.Middle, e.RespEnd = true, ent.respEnd
	}
	key := wire.MakeFastPathKey(k.srcIP, k.dstIP, k.srcPort, k.dstPort)
	s.fastQueue = append(s.fastQueue, FastPathUpdate{Key: key, Entry: e,
		Ahead: ent.sndNxt == ent.isnB+1 && !s.fastQueued(key)})
	ent.fastOn, ent.fastMiddle, ent.fastEcho, ent.fastEnd = true, middle, e.Echo, ent.respEnd
	s.stats.FastPathOffers++
}

// fastQueued reports whether a command for key waits in this pass's
// queue: a Put may not go ahead of it (the Delete of the entry a new
// connection on the tuple superseded would then take the new one's).
func (s *Shim) fastQueued(key wire.FastPathKey) bool {
	for i := range s.fastQueue {
		if s.fastQueue[i].Key == key {
			return true
		}
	}
	return false
}

// endFastPath takes ent's replies back from the kernel once its
// connection is over (both FINs, or a RST). Nothing the kernel could take
// is left to come, and the entry must not outlive the connection: the
// front-end's handoff ports come round within the shim's linger at a few
// thousand connections a second, and the kernel's first reply on the
// next connection of the tuple, which often comes before the shim has
// read that connection's SYN or its Splice, would be translated with
// this one's numbers and sent to this one's client (under wrk's 1K close
// load with echoes, dozens of connections a second then waited 200 ms
// for the kernel to send their reply again).
func (s *Shim) endFastPath(ent *spliceEntry) {
	if ent.fastOn && ent.ended() {
		s.closeFastPath(ent)
	}
}

// closeFastPath takes ent's replies back from the kernel.
func (s *Shim) closeFastPath(ent *spliceEntry) {
	if !ent.fastOn {
		return
	}
	k := ent.key
	s.fastQueue = append(s.fastQueue, FastPathUpdate{
		Key: wire.MakeFastPathKey(k.srcIP, k.dstIP, k.srcPort, k.dstPort), Delete: true,
	})
	ent.fastOn = false
}

// noteFastPathGap counts the reply bytes the kernel sent since the last
// reply this engine saw, when a reply of the same response starts past
// it: they are the response's too.
func (s *Shim) noteFastPathGap(ent *spliceEntry, seq wire.Seq) {
	if !ent.fastOn || !ent.responding || !ent.srvNxt.LessThan(seq) {
		return
	}
	gap := uint64(seq - ent.srvNxt)
	ent.replyBytes += gap
	ent.srvNxt = seq
	s.stats.FastPathBytes += gap
}

// nextRequest is a request that came ahead of the echo of the response
// before it. With echoes the client may have a short response whole and
// send its next request on the connection (keep-alive) before this
// engine has read all of that response's echoes: the request then finds
// the last one still in service with none or only part of its replies
// read. Taken as part of it (none read), the way a request that comes
// before any reply is, its own response looked like the last one sent
// again; taken as the end of it (part read), the rest of the last
// response looked like a new one without a head, and its own head was
// never read: either way it was never reported, and never handed to the
// kernel's middle (an 8 MiB response after a 1 KiB one crossed the shim
// as 140 echoes). So it waits for the response it follows to end, and
// is in service from its arrival. Such a request acknowledges replies
// this engine has not read; so does one that comes while the kernel
// sends the middle of a response, which likewise waits for its end (it
// used to cut the response short).
type nextRequest struct {
	waiting bool
	at      Time
	ack     wire.Seq // the client's ACK: it had the replies before it
	head    bool     // a HEAD request (observeRequest)
}

// awaitEcho notes the request in t, which acknowledges replies this
// engine has not read while a request is in service: it waits for that
// one's response to end (nextRequest). A second one joins the first, as
// a request joins the one in service before any reply is read.
func (s *Shim) awaitEcho(ent *spliceEntry, t wire.TCP, now Time) {
	if ent.nextReq.waiting {
		return
	}
	ent.nextReq = nextRequest{waiting: true, at: now, ack: t.Ack(), head: isHeadRequest(t.Payload())}
	s.stats.RequestsAheadOfEchoes++
}

// endsResponse reports whether the response in service on ent is over
// because the request waiting behind it says so: one whose head gave no
// length ends where the client had it all when it sent the next request
// (as it ends at the next request when no echo is involved).
func (r nextRequest) endsResponse(ent *spliceEntry) bool {
	return r.waiting && ent.responding && !ent.respEndKnown && r.ack.LessEq(ent.srvNxt)
}

// startNextRequest puts the waiting request in service once the response
// before it ended (finishResponse), unless the connection was reset.
func (s *Shim) startNextRequest(ent *spliceEntry) {
	r := ent.nextReq
	ent.nextReq = nextRequest{}
	if !r.waiting || ent.reset {
		return
	}
	s.startService(ent, r.at, r.head)
}

// sentEdge is the highest sequence number the kernel may have sent on
// ent's connection, for judging the ACKs from the wire (acceptable):
// with the middle of a response the kernel's, replies this engine never
// saw may have gone up to the response's end; with echoes, replies it
// has not yet read back may have gone out ahead of it, as far as the
// kernel's send window reaches, so the edge moves up by half the largest
// window (the ACKs it takes then lie within half a window either side).
// Without an entry in the kernel, what this engine saw.
func (ent *spliceEntry) sentEdge() wire.Seq {
	edge := ent.sndNxt
	if !ent.fastOn {
		return edge
	}
	if ent.fastMiddle && edge.LessThan(ent.fastEnd) {
		edge = ent.fastEnd
	}
	if ent.fastEcho {
		edge += maxSendWindow / 2
	}
	return edge
}
