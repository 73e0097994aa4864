package splice

import (
	"encoding/binary"
	"errors"

	"github.com/qsplice/qsplice/splice/wire"
)

// Bounded state (issue 9).
//
// Anyone on the client side can make the front-end keep state: a cookie
// ACK makes a flow, a request head makes it wait, a dispatched request
// holds a handoff port. Every kind of that state has a bound here, each
// counted when it bites (FrontEndStats) and configurable (FrontEndConfig):
//
//   - MaxFlows, all flows. When the table is full, the flow that has had
//     the longest time to send its head and still has not (the oldest in
//     state reading) is evicted, reset, to make room for a new
//     connection: honest clients send their head at once, so under a
//     flood of handshakes it is the flood's flows that go. With nothing
//     to evict (every flow has its request queued or handed off), a SYN
//     gets no SYN-ACK, and a cookie ACK (whose SYN was answered before)
//     gets a RST.
//   - MaxFlowsPerSource, flows from one client address still reading
//     their head or being answered by the front-end (before any handoff):
//     the same two refusals, without eviction. A queued request does not
//     count: the scheduler's queues bound those (capacity, timeout), and
//     a busy client (a NAT, a load generator) may have many waiting.
//     Neither does a lingering flow, whose client acknowledged everything.
//   - MaxPortsPerSource, handoff ports held for one client address by
//     connections still open: Dispatch fails with ErrSourcePorts and the
//     controller answers 503. A connection both ends closed (or a reset
//     one) keeps its port through its linger but no longer counts: a
//     client opening connections one after the other holds about one port
//     per connection it has open, not per connection of the last ten
//     seconds, and the connections that linger are bounded by what the
//     back-ends serve.
//   - The head deadline (HeadTimeout): a client that has sent nothing by
//     then is reset and forgotten at once; one with a partial head gets
//     its 408.
//   - FlowLifetime, the whole life of a flow not handed off, its answer and
//     linger included: then it is reset and forgotten, whatever its state.
//   - HalfCloseTimeout: once the back-end closed (its FIN, seen in the
//     shim's copy) a client quiet this long is reset on both sides and
//     the handoff port freed, instead of after IdleTimeout. A client
//     still downloading keeps acknowledging, so only one that has
//     everything (or stopped answering) is quiet; 30 s leaves room for
//     the back-end's retransmissions to a lossy client.
//
// Why a SYN is dropped silently but a cookie ACK is reset. A SYN costs us
// nothing to ignore: a real client retransmits it with backoff, as it
// would against a full listen queue, and by then a flow may have ended;
// a RST would tell a spoofing flooder nothing new but would cost a frame
// per SYN, sent to whoever the source address names. A cookie ACK comes
// from a client that believes it is connected (its SYN was answered
// before the limit was reached): silence would leave it retransmitting
// its request for minutes, a RST ends that at once.
//
// Go maps and slices never give memory back by themselves. The tables
// below are rebuilt, and the timer heap and the spare pools reallocated,
// once they hold less than 1/shrinkSlack of their peak (and the peak was
// at least shrinkMinCap): a flood's memory goes back to the collector
// when the flood is over, at an amortised O(1) per deletion.

// ErrSourcePorts is Dispatch's refusal when the client's address already
// holds MaxPortsPerSource handoff ports.
var ErrSourcePorts = errors.New("splice: the client's address holds its limit of handoff ports")

// Defaults, sized for the 2-core, 24 GiB front-end: a flow costs about
// 600 bytes with a short head and 10 KiB near the head limit, so
// 200,000 flows stay within 2 GiB in the worst case.
const (
	defaultMaxFlows          = 200_000
	defaultMaxFlowsPerSource = 2_000
	defaultMaxPortsPerSource = 4_096
)

// c2Key names a handoff connection by what its segments from the
// back-end carry: the back-end's address and port and our handoff port.
// The same handoff port may serve connections to different back-ends
// (or ports) at once, so a port wraps only after a whole range of
// connections to the same back-end.
type c2Key struct {
	bIP          wire.IP4
	bPort, hport uint16
}

// c2Dest is a back-end's web server: one range of handoff ports each.
type c2Dest struct {
	ip   wire.IP4
	port uint16
}

func (f *flow) c2Key() c2Key { return c2Key{f.bIP, f.backend.Port, f.hport} }

// srcUse is what one client address holds.
type srcUse struct {
	pre   int32 // flows not handed off
	ports int32 // handoff ports
}

// srcHold says which of its source's counts a flow is in.
type srcHold uint8

const (
	holdNone srcHold = iota
	holdPre
	holdPort
)

// peaks are the largest sizes the tables reached since they were last
// rebuilt.
type peaks struct{ flows, byID, byC2, sources int }

// limitOn: a positive limit applies; a negative one turns it off (0 has
// been replaced by the default).
func limitOn(n int) bool { return n > 0 }

// synOverLimits reports, and counts, a SYN that may not start a flow.
func (e *FrontEnd) synOverLimits(p *wire.Packet) bool {
	switch {
	case limitOn(e.cfg.MaxFlowsPerSource) && int(e.sources[p.IP.Src()].pre) >= e.cfg.MaxFlowsPerSource:
		e.stats.RefusedSYNSource++
	case limitOn(e.cfg.MaxFlows) && len(e.byID) >= e.cfg.MaxFlows && e.oldestReading() == nil:
		e.stats.RefusedSYNFlows++
	default:
		return false
	}
	e.drop(dropOverLimit)
	return true
}

// acceptOverLimits reports a valid cookie ACK that may not make a flow,
// and answers it with a RST; when the table is full it makes room by
// evicting the oldest flow still reading its head, if there is one.
func (e *FrontEnd) acceptOverLimits(p *wire.Packet, key fourTuple, now Time, out *Output) bool {
	switch {
	case limitOn(e.cfg.MaxFlowsPerSource) && int(e.sources[key.srcIP].pre) >= e.cfg.MaxFlowsPerSource:
		e.stats.RefusedAcceptSource++
	case limitOn(e.cfg.MaxFlows) && len(e.byID) >= e.cfg.MaxFlows:
		if f := e.oldestReading(); f != nil {
			e.stats.Evicted++
			e.resetAndFree(f, now, out)
			return false
		}
		e.stats.RefusedAcceptFlows++
	default:
		return false
	}
	e.drop(dropOverLimit)
	e.sendRST(p, out)
	return true
}

// The flows in state reading, oldest first, for eviction: flow IDs in
// accept order (so in order of their start), kept lazily. An entry whose
// flow has left the state (or gone) is dropped when it reaches the front,
// which every accept and every free looks at, so the ring holds at most
// the accepts of about one HeadTimeout (a flow leaves reading by then).

// noteReading records a new flow, reading its head.
func (e *FrontEnd) noteReading(f *flow) {
	e.pruneReading()
	e.reading.PushBack(f.id)
}

// pruneReading drops the entries at the front whose flow no longer reads
// its head, and gives a past peak's memory back.
func (e *FrontEnd) pruneReading() {
	for e.reading.Len() > 0 {
		if f := e.byID[*e.reading.Front()]; f != nil && f.state == stReading {
			break
		}
		e.reading.PopFront()
	}
	if e.reading.Cap() >= shrinkMinCap && e.reading.Len() < e.reading.Cap()/shrinkSlack {
		e.reading.Compact()
	}
}

// oldestReading is the flow that has been reading its head the longest,
// or nil.
func (e *FrontEnd) oldestReading() *flow {
	e.pruneReading()
	if e.reading.Len() == 0 {
		return nil
	}
	return e.byID[*e.reading.Front()]
}

// holdSource counts f in its source's count of kind h (holdNone: in none).
func (e *FrontEnd) holdSource(f *flow, h srcHold) {
	if f.srcHold == h {
		return
	}
	src := f.key.srcIP
	u := e.sources[src]
	switch f.srcHold {
	case holdPre:
		u.pre--
	case holdPort:
		u.ports--
	}
	switch h {
	case holdPre:
		u.pre++
	case holdPort:
		u.ports++
	}
	f.srcHold = h
	if u == (srcUse{}) {
		delete(e.sources, src)
		e.sources = shrinkMap(e.sources, &e.peak.sources, &e.stats.TablesRebuilt)
		return
	}
	e.sources[src] = u
	e.peak.sources = max(e.peak.sources, len(e.sources))
}

// recount puts f in the count of its source its state calls for: flows
// reading their head or answered before any handoff count against
// MaxFlowsPerSource, open handed-off connections against
// MaxPortsPerSource, the rest (queued, closed, lingering) in neither. A
// closed connection keeps its port until it is freed, but no longer
// counts.
func (e *FrontEnd) recount(f *flow) {
	h := holdNone
	switch {
	case f.state == stReading, f.state == stAnswering && !f.handedOff():
		h = holdPre
	case f.handedOff() && !f.closed() && e.byC2[f.c2Key()] == f:
		h = holdPort
	}
	e.holdSource(f, h)
}

// sourcePortsFull: f's client address holds its limit of handoff ports.
func (e *FrontEnd) sourcePortsFull(f *flow) bool {
	return limitOn(e.cfg.MaxPortsPerSource) && int(e.sources[f.key.srcIP].ports) >= e.cfg.MaxPortsPerSource
}

// takePort records f's handoff connection under its key.
func (e *FrontEnd) takePort(f *flow) {
	e.byC2[f.c2Key()] = f
	e.peak.byC2 = max(e.peak.byC2, len(e.byC2))
	e.holdSource(f, holdPort)
}

// releasePort frees f's handoff port, if it still holds it. f.hport is
// left set: the flow was dispatched, and its close is reported so.
func (e *FrontEnd) releasePort(f *flow, now Time) {
	if f.hport == 0 {
		return
	}
	if k := f.c2Key(); e.byC2[k] == f {
		e.notePortReleased(f, now)
		delete(e.byC2, k)
		e.byC2 = shrinkMap(e.byC2, &e.peak.byC2, &e.stats.TablesRebuilt)
	}
	if f.srcHold == holdPort {
		e.holdSource(f, holdNone)
	}
}

// c2Flow is the flow whose handoff connection a back-end's segment
// belongs to, or nil.
func (e *FrontEnd) c2Flow(p *wire.Packet) *flow {
	return e.byC2[c2Key{p.IP.Src(), p.TCP.SrcPort(), p.TCP.DstPort()}]
}

// portStart is where the handoff ports towards dest begin: derived from
// the cookie secret, so a restarted front-end does not walk straight into
// the tuples its predecessor left open on the back-ends, and from dest,
// so back-ends do not move in step.
func (e *FrontEnd) portStart(dest c2Dest) uint16 {
	span := uint32(e.cfg.HandoffPortLast-e.cfg.HandoffPortFirst) + 1
	h := binary.BigEndian.Uint32(e.cfg.CookieSecret[28:])
	h ^= (binary.BigEndian.Uint32(dest.ip[:]) ^ uint32(dest.port)<<16) * 2654435761
	return e.cfg.HandoffPortFirst + uint16(h%span)
}

// handedOff: f holds, or held, a handoff connection. Flows that never
// did are the cheap ones anybody can make, and FlowLifetime bounds them.
func (f *flow) handedOff() bool { return f.hport != 0 }

// limitDeadline moves a deadline earlier when a limit ends the flow
// sooner: FlowLifetime for flows not handed off, HalfCloseTimeout after
// the back-end's FIN.
func (e *FrontEnd) limitDeadline(f *flow, when Time) Time {
	if !f.handedOff() && e.cfg.FlowLifetime > 0 {
		when = min(when, f.started.Add(e.cfg.FlowLifetime))
	}
	if e.halfClosed(f) {
		when = min(when, f.lastSeen.Add(e.cfg.HalfCloseTimeout))
	}
	return when
}

// halfClosed: the back-end closed a spliced connection whose client has
// not, and the front-end owes it nothing (no request to retransmit, no
// refusal waiting). A client whose last window was zero is not idle but
// stalled: the back-end's window probes, which back off to two minutes,
// keep it, and its silence does not count.
func (e *FrontEnd) halfClosed(f *flow) bool {
	return e.cfg.HalfCloseTimeout > 0 && f.state == stSpliced && f.srvFin && !f.cliFin && !f.srvRST &&
		f.kaState != kaRefused && !f.reqUna.LessThan(f.reqEnd) && f.cliWin != 0
}

// serverClosed runs when the shim's copy shows the back-end's FIN.
func (e *FrontEnd) serverClosed(f *flow) {
	if e.halfClosed(f) {
		e.deadlineBy(f, f.lastSeen.Add(e.cfg.HalfCloseTimeout))
	}
}

// limitTimer runs a due deadline that a limit set; it reports whether it
// did (else the state's own timer runs).
func (e *FrontEnd) limitTimer(f *flow, now Time, out *Output) bool {
	switch {
	case f.state == stLinger:
		return false // it is freed now anyway
	case !f.handedOff() && e.cfg.FlowLifetime > 0 && now >= f.started.Add(e.cfg.FlowLifetime):
		e.stats.LifetimeExpired++
		e.resetAndFree(f, now, out)
	case f.state == stReading && len(f.buf) == 0 && !f.cliFin && now >= f.started.Add(e.cfg.HeadTimeout):
		// Nothing to answer: a client silent since its handshake is
		// reset and forgotten, rather than sent a 408 it will not read
		// and kept for the answer's retransmissions and linger.
		e.stats.HeadDeadlineFreed++
		e.resetAndFree(f, now, out)
	case e.halfClosed(f) && now >= f.lastSeen.Add(e.cfg.HalfCloseTimeout):
		e.releaseHalfClosed(f, now, out)
	default:
		return false
	}
	return true
}

// resetAndFree ends a flow that was never handed off: a RST at the
// client's rcv_nxt (the last sequence it acknowledged), the close
// reported, and nothing kept.
func (e *FrontEnd) resetAndFree(f *flow, now Time, out *Output) {
	e.toClient(f, now, f.sndUna, f.rcvNxt, wire.TCPFlagRST|wire.TCPFlagACK, nil, out)
	e.linger(f, now, CloseTimeout, out)
	e.free(f, now)
}

// releaseHalfClosed ends a connection the back-end closed and the client
// left idle: C2 is reset (the back-end's socket, in FIN-WAIT-2, goes
// without a TIME-WAIT, so the tuple is free at once), the client is reset
// at its last ACK, and the handoff port is freed now rather than after
// the linger. The flow lingers without C2: a late segment from the
// client is answered by the front-end, never forwarded to a port that
// may already serve another connection.
func (e *FrontEnd) releaseHalfClosed(f *flow, now Time, out *Output) {
	e.stats.HalfClosedReleased++
	e.Abort(f.id, now, out)
	e.releasePort(f, now)
	f.c2Up = false
	f.rcvNxt, f.sndNxt, f.sndUna = f.cliNxt, f.cliAck, f.cliAck
}

// shrinkMap returns m, or a copy of it sized for its contents when it
// holds less than 1/shrinkSlack of its peak: deleting never frees a Go
// map's buckets. The copy costs O(len), after at least
// peak*(1-1/shrinkSlack) deletions.
func shrinkMap[K comparable, V any](m map[K]V, peak *int, rebuilt *uint64) map[K]V {
	if *peak < shrinkMinCap || len(m) >= *peak/shrinkSlack {
		return m
	}
	nm := make(map[K]V, len(m))
	for k, v := range m {
		nm[k] = v
	}
	*peak = len(m)
	*rebuilt++
	return nm
}

// shrinkTables rebuilds the flow tables after a flood (shrinkMap).
func (e *FrontEnd) shrinkTables() {
	e.flows = shrinkMap(e.flows, &e.peak.flows, &e.stats.TablesRebuilt)
	e.byID = shrinkMap(e.byID, &e.peak.byID, &e.stats.TablesRebuilt)
}

// trimSpares gives back spare records and buffers beyond what the live
// flows justify, once they are twice that: the pools follow a flood down.
func (e *FrontEnd) trimSpares() {
	lim := e.spareLimit()
	if n := len(e.spareFlows); n > 2*lim {
		e.spareFlows = append([]*flow(nil), e.spareFlows[:lim]...)
	}
	if n := len(e.spareBufs); n > 2*lim {
		for _, b := range e.spareBufs[lim:] {
			e.spareBufBytes -= cap(b)
		}
		e.spareBufs = append([][]byte(nil), e.spareBufs[:lim]...)
	}
}

// allocPortFor finds a free handoff port towards dest for f's SYN, from
// the one after the last handed out there: ports come back in roughly the
// order they went, so the one chosen is about the least recently used.
// Of the free ports it takes the first whose back-end TIME-WAIT, if any,
// takes f's SYN (fe_timewait.go), passing over at most portPassLimit that
// would not; past that, the first free one. Each back-end has the whole
// range: at R new connections a second spread over N back-ends a port
// returns to the same back-end after 41,000*N/R seconds.
func (e *FrontEnd) allocPortFor(dest c2Dest, f *flow, now Time) (uint16, bool) {
	first, last := e.cfg.HandoffPortFirst, e.cfg.HandoffPortLast
	span := int(last) - int(first) + 1
	next, ok := e.nextPort[dest]
	if !ok {
		next = e.portStart(dest)
	}
	ledger := e.ledgerOf(dest, now)
	e.notePortTaken(ledger, now)
	if !ledger.active {
		ledger = nil
	}
	var fallback, fallbackNext uint16
	passed := 0
	for i := 0; i < span; i++ {
		p := next
		if next == last {
			next = first
		} else {
			next++
		}
		if !e.ownsPort(dest.port, p) {
			continue // another shard's (shard.go)
		}
		if _, used := e.byC2[c2Key{dest.ip, dest.port, p}]; used {
			continue
		}
		if _, pooled := e.pool.byKey[c2Key{dest.ip, dest.port, p}]; pooled {
			continue
		}
		if ledger == nil || ledger.record(int(p-first)).takesSYN(f, now) {
			e.nextPort[dest] = next
			return p, true
		}
		if passed == 0 {
			fallback, fallbackNext = p, next
		}
		if passed++; passed > portPassLimit {
			break
		}
	}
	if passed > 0 {
		e.stats.HandoffPortsInTimeWait++
		e.nextPort[dest] = fallbackNext
		return fallback, true
	}
	e.nextPort[dest] = next
	return 0, false
}
