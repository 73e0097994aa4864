package splice

// The kernel's reply fast path (issue 7; the program: splice/link/replyfast.go).
//
// With ShimConfig.KernelFastPath the daemon runs a TC program on the
// TAP's egress that translates a reply in the middle of a response the
// way translateReply does and sends it out of the wire device itself, so
// its bytes cross no copy into and out of userspace. This engine decides
// which replies the kernel may take, and tells the daemon through
// FastPathUpdate commands (TakeFastPaths): a Put names a connection, the
// rewrite, and two bounds; a Delete takes it away.
//
// The kernel takes a reply only while the shim has nothing left to learn
// from it: the request acknowledged (no more header copies for the
// front-end), no request rewriting (its ACK numbers would need
// translating), a response whose head gave its length and which has
// begun, and the reply ends before the response does. The reply that
// completes the response comes here, as every FIN, RST and pure ACK does,
// so the service time, the slot and the bytes are reported as before;
// the bytes the kernel sent in between are the gap between the last reply
// seen and that one (a retransmission the kernel sent counts once, which
// is what the response cost).
//
// Order. A Put says AllowFrom = the end of the replies this engine has
// handled. The program records the end of every data frame it leaves to
// the TAP and takes a frame only if none of them ends after AllowFrom:
// a reply still waiting in the TAP's queue keeps the fast path shut until
// this engine has handled it and said so with another Put. The daemon
// applies the commands after it has sent the pass's wire frames, so a
// frame the kernel takes never overtakes one the shim sends.

import "github.com/qsplice/qsplice/splice/wire"

// FastPathUpdate is one command for the kernel's reply fast path.
type FastPathUpdate struct {
	Key    wire.FastPathKey
	Entry  wire.FastPathEntry // for a Put
	Delete bool
}

// TakeFastPaths moves the fast-path commands queued since the last call
// to out.FastPaths, in the order they were made. The daemon calls it once
// a pass, after everything it fed the engine, and applies them once the
// pass's wire frames are sent.
func (s *Shim) TakeFastPaths(out *Output) {
	out.FastPaths = append(out.FastPaths, s.fastQueue...)
	s.fastQueue = s.fastQueue[:0]
}

// offerFastPath hands ent's replies to the kernel, up to the end of the
// response, if it may take them now.
func (s *Shim) offerFastPath(ent *spliceEntry) {
	if !s.cfg.KernelFastPath || !ent.inService || !ent.responding || !ent.respEndKnown ||
		!ent.srvNxt.LessThan(ent.respEnd) || !ent.reqAcked || !ent.rwAcked || ent.rw.on ||
		ent.reset || ent.srvFin {
		return
	}
	k := ent.key
	s.fastQueue = append(s.fastQueue, FastPathUpdate{
		Key: wire.MakeFastPathKey(k.srcIP, k.dstIP, k.srcPort, k.dstPort),
		Entry: wire.FastPathEntry{
			VIP: ent.vip, Client: ent.client, VPort: ent.vport, CPort: ent.cport,
			ClientMAC: ent.cliMAC, SeqDelta: ent.seqDelta, TSOffset: ent.tsOffset,
			TS: ent.ts, Scaled: ent.scaled, WindowShift: ent.wsShift,
			AllowFrom: ent.srvNxt, RespEnd: ent.respEnd,
		},
	})
	ent.fastOn, ent.fastEnd = true, ent.respEnd
	s.stats.FastPathOffers++
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

// sentEdge is the highest sequence number the kernel may have sent on
// ent's connection: with the fast path on, replies this engine never saw
// may have gone up to the response's end.
func (ent *spliceEntry) sentEdge() wire.Seq {
	if ent.fastOn && ent.sndNxt.LessThan(ent.fastEnd) {
		return ent.fastEnd
	}
	return ent.sndNxt
}
