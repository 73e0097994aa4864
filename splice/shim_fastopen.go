package splice

// The carried request in C2's SYN: TCP Fast Open (issue 7, RFC 7413).
//
// With the request carried in its Splice (shim_carry.go) the shim still
// waited for the kernel's SYN-ACK before it wrote the request: on the
// back-end's TAP 90-130 us passed from the SYN-ACK to the request (the
// shim reading the SYN-ACK, forwarding it, writing the request), all of
// it on the first byte's path. A kernel whose server takes Fast Open
// takes the request in the SYN instead: the server accepts the connection
// and reads the request while the SYN-ACK is on its way out, and the
// SYN-ACK acknowledges the request with the SYN.
//
// The front-end asks for it in the SYN of a request whose Splice carries
// it (an empty cookie option, FrontEndConfig.FastOpen). Such a SYN, at the
// shim (ShimConfig.FastOpen):
//   - when the shim knows no cookie for its source (the front-end's
//     handoff address), passes as it came: the kernel answers a server
//     that takes Fast Open with a cookie, which the shim keeps;
//   - with a cookie and the Splice in this shard, goes to the host with
//     the cookie and the request;
//   - with a cookie but not the Splice yet (it is right behind the SYN on
//     the wire, or in another worker's mailbox), waits for it, at most
//     fastOpenHold: the Splice releases it at the next Tick with the
//     request, the end of the hold without (the carried path then runs).
//
// The SYN-ACK says what the kernel did. If it acknowledges the request,
// the handshake's ISN is the SYN's (noteHandshake), the request is in
// service from the SYN's time (an early request, shim_early.go), and the
// segment the shim sends in place of the request is the handshake's last
// ACK (sendCarried). If it acknowledges only the SYN (a cookie the kernel
// no longer takes, the server's Fast Open queue full), the request goes
// after it as before. A cookie in the SYN-ACK replaces the one kept; none
// in the answer to a SYN whose data the kernel did not take means its
// server stopped taking Fast Open, and the cookie is forgotten.
//
// With several workers the kernel's SYN-ACK may reach the shim after the
// server's first reply: the tun driver picks the queue of a flow's
// frames by the queue it last wrote them on, and it learns that only
// after the SYN it is writing has been through the kernel, SYN-ACK and
// all, so the SYN-ACK takes the queue of the flow's hash and the reply,
// sent later, the writer's. A SYN-ACK on another worker's queue comes
// over by mail (backend/worker.go) and may be read after the reply; the
// reply would then pass untranslated, to the front-end. So a reply on a
// tuple whose request went in its SYN and whose SYN-ACK has not crossed
// yet is held (holdEarlyReply, one per connection, up to 64 per shard) until the
// SYN-ACK installs the Splice, and translated then. A back-end whose TAP
// is steered by ports (link.OffloadTAP.SteerByPorts) sends the SYN-ACK
// and the reply to the same queue, in order, and holds none; the hold
// serves the tun driver's flow table, which the daemon falls back to.
//
// The front-end may put the cookie and the request in the SYN itself
// (FrontEndConfig.FastOpenInSYN: it learns the cookie from the kernel's
// SYN-ACKs as the shim does). Such a SYN needs nothing from the shim, and
// the kernel's SYN fast path on the wire's ingress (link.SYNFastPath,
// ShimConfig.KernelSYNs) hands it to the host from the wire, without the
// shim's read and write (about 60 us of the first byte on the lab host,
// a process wake-up). The shim sees its copy all the same: AF_PACKET
// taps a frame before tc ingress runs; with KernelSYNs it writes no SYN
// with data itself, as the program's rule (a SYN without ACK, RST or FIN,
// with payload, that the ingress checks pass) says it need not. The
// kernel may answer before the shim has read that copy or the Splice
// (worker 0 mails another worker's), and the shim must still end up
// where it would have been had it sent the SYN:
//   - the SYN's copy read first: requestInSYN remembers it, and a SYN-ACK
//     that acknowledges all its data makes the handshake that SYN's, as
//     if the shim had sent it (fastOpenAnswered);
//   - the SYN-ACK first, the Splice in hand: a SYN-ACK that acknowledges
//     the carried request's end had the request in its SYN;
//   - the SYN-ACK first, the Splice later: the Splice, when it comes,
//     corrects the recorded handshake the same way (requestWasInSYN),
//     and the server's reply, which can come before it, is held, not
//     dropped (requestWentInSYN: a handshake whose request never crossed
//     the shim had it in the SYN);
//   - a SYN-ACK on the tuple of a connection that ended supersedes the
//     lingering entry, as the SYN's copy would have (shim.go).
// An attacker who fills the remembered SYNs from a spoofed handoff
// address only sends the shim to the Splice for the same answer.
//
// Against an attacker on the segment: only SYNs from an address the
// kernel gave a cookie to are held, at most maxHeldSYNs per shard (others
// pass at once) and never longer than fastOpenHold; the cookies are
// learnt from the host's SYN-ACKs only. The worst a spoofer of the
// front-end's address can do is make its SYNs go without their request,
// the carried path.

import (
	"bytes"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

const (
	// maxFastOpenCookies bounds the handoff addresses a shard keeps a
	// cookie for (a front-end has one or a few).
	maxFastOpenCookies = 8
	// maxBackendCookies bounds the back-ends a front-end keeps a cookie
	// for (FrontEndConfig.FastOpenInSYN); more take turns.
	maxBackendCookies = 64
	// maxHeldSYNs bounds the SYNs a shard holds for their Splice.
	maxHeldSYNs = 16
	// maxSeenSYNs bounds the SYNs with data a shard remembers until
	// their SYN-ACK, which follows within microseconds: as many as the
	// connections opened in one pass, the oldest pushed out first;
	// fastOpenSeen bounds how long.
	maxSeenSYNs  = 64
	fastOpenSeen = time.Second
	// heldSYNSize holds a SYN with the longest TCP header and no IP
	// options (which the wire's ingress refuses).
	heldSYNSize = wire.EthernetHeaderLen + wire.IPv4MinHeaderLen + 60
	// fastOpenHold bounds how long a SYN waits for its Splice: a worker's
	// mail takes tens of microseconds; a Splice that takes longer is
	// better served by the carried path than by a SYN held for it.
	fastOpenHold = time.Millisecond
	// maxHeldReplies bounds the replies a shard holds for their SYN-ACK:
	// one per connection whose SYN-ACK is in another worker's mailbox,
	// so as many as the connections opened in one of the owner's passes
	// (with 4, sixteen concurrent short connections overran them and
	// each dropped reply waited for the server's retransmission:
	// docs/results.md, twentieth session). A slot's buffer is made when
	// it first holds a reply, of heldReplySmall bytes, or heldReplySize
	// (a super-frame and its headers) once a larger reply needs it: at
	// most 4 MiB per shard, and only on the tun driver's flow steering.
	// earlyReplyHold bounds the wait (the kernel sends a dropped reply
	// again).
	maxHeldReplies = 64
	heldReplySmall = 2048
	heldReplySize  = 65536 + wire.EthernetHeaderLen
	earlyReplyHold = 100 * time.Millisecond
)

type heldReply struct {
	inUse bool
	key   fourTuple
	at    Time
	vh    wire.VNetHdr
	n     int
	buf   []byte // heldReplySmall or heldReplySize
}

type fastOpenCookie struct {
	addr wire.IP4 // the handoff address the kernel gave it to; zero: unused
	n    int
	b    [wire.MaxFastOpenCookie]byte
}

// seenSYN is a SYN with data from the wire whose SYN-ACK is still to
// come (requestInSYN).
type seenSYN struct {
	seq  wire.Seq
	n    int // its payload
	at   Time
	head bool // a HEAD request
}

type heldSYN struct {
	inUse bool
	key   fourTuple
	at    Time
	n     int
	buf   [heldSYNSize]byte
}

// fastOpen is a shard's Fast Open state: the cookies its host's kernel
// gave, and the SYNs waiting for their Splice (release: a Splice came
// since the last Tick).
type fastOpen struct {
	cookieJar
	syns    [maxHeldSYNs]heldSYN
	nSYN    int
	release bool
	// replies waiting for their SYN-ACK; releaseReplies: a Splice was
	// installed since the last Tick.
	replies        [maxHeldReplies]heldReply
	nReply         int
	releaseReplies bool
	// seen are the SYNs with data that came from handoff addresses
	// (requestInSYN), bounded and aged as the handshakes are.
	seen tupleTable[seenSYN]
}

// cookieJar keeps the Fast Open cookies a kernel gave, one per address
// (the shim's: per handoff address its host gave one to; the front-end's:
// per back-end), the oldest slot reused when all are taken.
type cookieJar struct {
	slots []fastOpenCookie
	next  int // the slot the next new address takes when all are used
}

func newCookieJar(n int) cookieJar { return cookieJar{slots: make([]fastOpenCookie, n)} }

// cookie is the cookie kept for addr, or nil.
func (j *cookieJar) cookie(addr wire.IP4) []byte {
	for i := range j.slots {
		if c := &j.slots[i]; c.addr == addr && c.n > 0 {
			return c.b[:c.n]
		}
	}
	return nil
}

// learn keeps cookie b for addr; it reports whether that changed anything.
func (j *cookieJar) learn(addr wire.IP4, b []byte) bool {
	slot := -1
	for i := range j.slots {
		c := &j.slots[i]
		if c.addr == addr {
			if bytes.Equal(c.b[:c.n], b) {
				return false
			}
			slot = i
			break
		}
		if slot < 0 && c.n == 0 {
			slot = i
		}
	}
	if slot < 0 {
		slot = j.next
		j.next = (j.next + 1) % len(j.slots)
	}
	c := &j.slots[slot]
	c.addr, c.n = addr, copy(c.b[:], b)
	return true
}

func (j *cookieJar) forget(addr wire.IP4) {
	for i := range j.slots {
		if c := &j.slots[i]; c.addr == addr {
			*c = fastOpenCookie{}
		}
	}
}

// deadline is when Tick has held SYNs or replies to send.
func (f *fastOpen) deadline() Time {
	if f.nSYN == 0 && f.nReply == 0 {
		return Never
	}
	if f.release && f.nSYN > 0 || f.releaseReplies && f.nReply > 0 {
		return 0
	}
	next := Never
	for i := range f.syns {
		if h := &f.syns[i]; h.inUse {
			next = min(next, h.at.Add(fastOpenHold))
		}
	}
	for i := range f.replies {
		if r := &f.replies[i]; r.inUse {
			next = min(next, r.at.Add(earlyReplyHold))
		}
	}
	return next
}

// fastOpenSYN takes a SYN p from the wire on key, a tuple with no entry,
// that asks for a Fast Open cookie, when it can do better than pass it:
// it sends it with its request, or holds it for its Splice.
func (s *Shim) fastOpenSYN(key fourTuple, p *wire.Packet, frame []byte, now Time, out *Output) bool {
	t := p.TCP
	if !s.cfg.FastOpen || len(t.Payload()) != 0 || !s.isWebPort(key.srcPort) {
		return false
	}
	o := &s.opts
	if wire.ParseOptions(t, o) != nil || o.FastOpenOffset == 0 || o.CookieLen != 0 {
		return false
	}
	c := s.fo.cookie(key.dstIP)
	if c == nil {
		return false // the kernel's SYN-ACK brings one
	}
	if h := s.carriedSlot(key); h != nil {
		return s.sendInSYN(h, p, o.FastOpenOffset, c, now, out)
	}
	return s.holdSYN(key, frame, now)
}

// sendInSYN sends the host SYN p with cookie c in place of its cookie
// request (at option offset foOff) and the request carried in h; false
// when the front-end asks for a cookie of its own (h.keepsCookie), the
// request does not start right after the SYN (another connection's on
// the tuple) or the options do not fit: the SYN then passes as it came.
func (s *Shim) sendInSYN(h *heldSegment, p *wire.Packet, foOff int, c []byte, now Time, out *Output) bool {
	t := p.TCP
	if h.keepsCookie || h.reqEnd != t.Seq()+1+wire.Seq(h.reqLen) {
		return false
	}
	var ob [40]byte
	opts := append(ob[:0], t[wire.TCPMinHeaderLen:foOff]...)
	opts = append(opts, t[foOff+2:t.HeaderLen()]...)
	if len(opts)+2+len(c) > len(ob) {
		return false
	}
	opts = append(opts, wire.OptFastOpen, byte(2+len(c)))
	opts = append(opts, c...)
	for len(opts)%4 != 0 {
		opts = append(opts, wire.OptNOP)
	}
	tf := wire.TCPFrame{
		SrcMAC: p.Eth.Src(), DstMAC: p.Eth.Dst(), Src: p.IP.Src(), Dst: p.IP.Dst(),
		SrcPort: t.SrcPort(), DstPort: t.DstPort(), Seq: t.Seq(), Flags: t.Flags(), Window: t.Window(),
		TTL: p.IP.TTL(), Options: opts,
		Payload: h.buf[carriedHeaderRoom : carriedHeaderRoom+h.reqLen],
	}
	b := out.alloc(tf.Len())
	tf.Encode(b)
	out.send(PortHost, b)
	h.inSYN, h.synSeq, h.at = true, t.Seq(), now // the request reaches the kernel now
	s.stats.WireToHost++
	s.stats.FastOpenSent++
	return true
}

// requestInSYN notes a SYN t from the wire on key, a tuple with no entry,
// that brought data, when it comes from a handoff address: the kernel's
// SYN-ACK is to say whether it took the data with it (fastOpenAnswered),
// whether or not the Splice is here by then. The front-end builds such a
// SYN itself (FrontEndConfig.FastOpenInSYN); KernelSYNs or not, it
// reaches the host as it came.
func (s *Shim) requestInSYN(key fourTuple, t wire.TCP, now Time) {
	if !s.isWebPort(key.srcPort) || !s.handoffs.has(key.dstIP) {
		return
	}
	pl := t.Payload()
	head := bytes.HasPrefix(pl, []byte("HEAD "))
	if hs, err := s.handshakes.find(key, now); err == nil && !hs.inSYN && !hs.early.seen && hs.isnF == t.Seq()+wire.Seq(len(pl)) {
		// The SYN-ACK crossed first, with neither this copy nor a Splice
		// that carries the request to say what its ACK covers (the
		// Splice may be a resend, which carries none): it acknowledged
		// this SYN's request.
		s.tookRequestInSYN(key, &hs, t.Seq(), len(pl), head)
		return
	}
	s.fo.seen.note(key, seenSYN{seq: t.Seq(), n: len(pl), at: now, head: head}, now)
}

// tookRequestInSYN corrects hs, the handshake recorded on key from a
// SYN-ACK that acknowledged the n request bytes of the SYN with sequence
// number isn, which the front-end filled: the shim had not known it when
// the SYN-ACK crossed, and took its ACK for the SYN's ISN. The request
// was in service from the SYN-ACK's time at the latest.
func (s *Shim) tookRequestInSYN(key fourTuple, hs *handshake, isn wire.Seq, n int, head bool) {
	hs.isnF, hs.inSYN, hs.byFrontEnd = isn, true, true
	hs.early = earlyRequest{seen: true, at: hs.at, end: isn + 1 + wire.Seq(n), head: head}
	s.handshakes.update(key, *hs)
	s.stats.FastOpenFromFrontEnd++
}

// requestInSYNOfEntry takes the copy of the front-end's SYN t, which
// brought a request, read only after a Splice that did not carry it (a
// resend: the first was lost) had made ent from the kernel's SYN-ACK: the
// request that SYN-ACK acknowledged never crossed the shim, so ent has
// had none in service. It is put in service from the SYN-ACK's time, and
// a response already over is reported now.
func (s *Shim) requestInSYNOfEntry(ent *spliceEntry, t wire.TCP, out *Output) {
	pl := t.Payload()
	end := t.Seq() + 1 + wire.Seq(len(pl))
	if ent.served || ent.ended() || ent.reqNxt != end || !s.isWebPort(ent.key.srcPort) {
		return
	}
	s.startEarlyRequest(ent, earlyRequest{seen: true, at: ent.synAckAt, end: end, head: bytes.HasPrefix(pl, []byte("HEAD "))})
	ent.reqAcked = true // by the SYN-ACK
	s.stats.FastOpenFromFrontEnd++
	if ent.responding && ent.respEndKnown && ent.respEnd.LessEq(ent.srvNxt) {
		s.finishResponse(ent, out)
	}
}

// requestWentInSYN reports whether the request of key, a tuple with no
// entry, went in its SYN: the shim put it there, or the front-end did and
// the SYN-ACK has yet to cross, or it crossed and took it.
func (s *Shim) requestWentInSYN(key fourTuple, now Time) bool {
	if s.held.n > 0 {
		if h := s.carriedSlot(key); h != nil && h.inSYN {
			return true
		}
	}
	if _, err := s.fo.seen.find(key, now); err == nil {
		return true
	}
	// A recorded handshake whose request never crossed the shim had it
	// in the SYN too: the kernel took the SYN from the wire, and the
	// shim read neither its copy nor the Splice before the SYN-ACK.
	hs, err := s.handshakes.find(key, now)
	return err == nil && (hs.inSYN || !hs.early.seen)
}

// holdSYN keeps SYN frame of key until its Splice comes; false when no
// room is left (the SYN then passes).
func (s *Shim) holdSYN(key fourTuple, frame []byte, now Time) bool {
	if len(frame) > heldSYNSize {
		return false
	}
	f := &s.fo
	for i := range f.syns {
		h := &f.syns[i]
		if h.inUse && h.key == key {
			// The front-end's SYN again: the later copy waits instead.
			h.n, h.at = copy(h.buf[:], frame), now
			return true
		}
	}
	for i := range f.syns {
		if h := &f.syns[i]; !h.inUse {
			h.inUse, h.key, h.at, h.n = true, key, now, copy(h.buf[:], frame)
			f.nSYN++
			s.stats.FastOpenHeld++
			return true
		}
	}
	s.stats.FastOpenHeldFull++
	return false
}

// releaseSYNs sends the held SYNs whose Splice came, with their request,
// and passes those whose hold is over as they came.
func (s *Shim) releaseSYNs(now Time, out *Output) {
	f := &s.fo
	f.release = false
	for i := range f.syns {
		h := &f.syns[i]
		if !h.inUse {
			continue
		}
		c, slot := s.fo.cookie(h.key.dstIP), s.carriedSlot(h.key)
		if slot == nil && now.Sub(h.at) < fastOpenHold && c != nil {
			continue
		}
		h.inUse = false
		f.nSYN--
		b := out.alloc(h.n)
		copy(b, h.buf[:h.n])
		p := &s.pkt
		if slot != nil && c != nil && wire.Parse(b, p) == nil && wire.ParseOptions(p.TCP, &s.opts) == nil &&
			s.opts.FastOpenOffset != 0 && s.sendInSYN(slot, p, s.opts.FastOpenOffset, c, now, out) {
			continue
		}
		if slot == nil {
			s.stats.FastOpenHeldExpired++
		}
		s.stats.WireToHost++
		out.send(PortHost, b)
	}
}

// fastOpenAnswered reads the kernel's SYN-ACK t on key (its options o)
// for Fast Open: the cookie it gives, and whether it took the request the
// shim sent in the SYN, in which case hs is the handshake of that SYN.
func (s *Shim) fastOpenAnswered(key fourTuple, t wire.TCP, o *wire.TCPOptions, hs *handshake, now Time) {
	h := s.carriedSlot(key)
	sent := h != nil && h.inSYN
	syn, err := s.fo.seen.find(key, now)
	s.fo.seen.consume(key)
	fromFE := err == nil && !sent
	if !sent && !fromFE && h != nil && h.reqLen > 0 && t.Ack() == h.reqEnd {
		// The SYN-ACK came before the shim read its copy of the SYN
		// (both wait when the worker wakes; the kernel had the SYN
		// from the wire): the Splice says where the request ends.
		req := h.buf[carriedHeaderRoom : carriedHeaderRoom+h.reqLen]
		syn, fromFE = seenSYN{seq: h.reqEnd - 1 - wire.Seq(h.reqLen), n: h.reqLen, at: now, head: bytes.HasPrefix(req, []byte("HEAD "))}, true
	}
	c := o.Cookie(t)
	switch {
	case !s.cfg.FastOpen:
	case c != nil:
		if s.fo.learn(key.dstIP, c) {
			s.stats.FastOpenCookies++
		}
	case sent && t.Ack() == h.synSeq+1, fromFE && t.Ack() == syn.seq+1,
		h != nil && h.fastOpen && t.Ack() == h.reqEnd-wire.Seq(h.reqLen):
		// A SYN that asked for Fast Open (with a cookie and data, or
		// for a cookie, the shim's copy of it unread), answered for the
		// SYN alone and with no cookie: the server no longer takes it.
		s.fo.forget(key.dstIP)
	}
	if fromFE && t.Ack() == syn.seq+1+wire.Seq(syn.n) {
		// The front-end's SYN brought the request, and the kernel took
		// it (requestInSYN): the handshake is that SYN's, as if the shim
		// had sent it, and the carried request is in (sendCarried sends
		// the last ACK of the handshake in its place).
		hs.isnF, hs.inSYN, hs.byFrontEnd = syn.seq, true, true
		hs.early = earlyRequest{seen: true, at: syn.at, end: t.Ack(), head: syn.head}
		s.stats.FastOpenFromFrontEnd++
		return
	}
	if !sent || !s.cfg.FastOpen {
		return
	}
	h.inSYN = false
	if t.Ack() != h.synSeq+1+wire.Seq(h.reqLen) {
		s.stats.FastOpenRefused++
		return
	}
	req := h.buf[carriedHeaderRoom : carriedHeaderRoom+h.reqLen]
	hs.isnF, hs.inSYN = h.synSeq, true
	hs.early = earlyRequest{seen: true, at: h.at, end: t.Ack(), head: bytes.HasPrefix(req, []byte("HEAD "))}
	s.stats.FastOpenAccepted++
}

// holdEarlyReply holds the kernel's reply t (frame, with header vh) on
// key, a tuple with no entry, when its request went in the SYN and the
// Splice is not installed yet: the SYN-ACK is in another worker's
// mailbox, or, for a SYN the front-end filled (requestInSYN), the SYN-ACK
// crossed but the Splice is still in worker 0's mail. With no room the
// reply is dropped (counted), and the kernel sends it again; it must not
// pass untranslated (nor be dropped at once as replyBeforeSplice drops
// a reply of a request the shim has not sent: this one's server had the
// request with the SYN, and its reply comes within microseconds).
func (s *Shim) holdEarlyReply(key fourTuple, frame []byte, vh wire.VNetHdr, t wire.TCP, now Time) bool {
	if len(t.Payload()) == 0 && !t.Has(wire.TCPFlagFIN) || t.Flags()&(wire.TCPFlagSYN|wire.TCPFlagRST) != 0 {
		return false
	}
	if !s.requestWentInSYN(key, now) {
		return false
	}
	f := &s.fo
	for i := range f.replies {
		r := &f.replies[i]
		if r.inUse || len(frame) > heldReplySize {
			continue
		}
		if len(r.buf) < len(frame) {
			n := heldReplySmall
			if len(frame) > n {
				n = heldReplySize
			}
			r.buf = make([]byte, n) // at most twice per slot
		}
		r.inUse, r.key, r.at, r.vh, r.n = true, key, now, vh, copy(r.buf, frame)
		f.nReply++
		s.stats.FastOpenRepliesHeld++
		return true
	}
	s.stats.FastOpenRepliesDropped++
	return true
}

// releaseHeldReplies passes the held replies whose Splice is now
// installed to translation, in the order they came, and drops those
// whose SYN-ACK did not come in time.
func (s *Shim) releaseHeldReplies(now Time, out *Output) {
	f := &s.fo
	f.releaseReplies = false
	for f.nReply > 0 {
		first := -1
		for i := range f.replies {
			r := &f.replies[i]
			if !r.inUse {
				continue
			}
			if now.Sub(r.at) >= earlyReplyHold {
				r.inUse = false
				f.nReply--
				s.stats.FastOpenRepliesDropped++
				continue
			}
			if s.entries[r.key] != nil && (first < 0 || r.at < f.replies[first].at) {
				first = i
			}
		}
		if first < 0 {
			return
		}
		r := &f.replies[first]
		b := out.alloc(r.n)
		copy(b, r.buf[:r.n])
		r.inUse = false
		f.nReply--
		s.InputVNet(PortHost, b, r.vh, now, out)
	}
}
