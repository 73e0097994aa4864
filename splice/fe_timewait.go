package splice

// Handoff ports and the back-ends' TIME-WAIT (issue 7).
//
// Servers close first (Connection: close, keep-alive timeouts), so it is
// the back-end's kernel that keeps each C2 tuple in TIME-WAIT, 60 s on
// Linux. Above about 700 handoffs a second to one back-end (41,000 ports
// in 60 s, fewer per shard) the ports come round again within that time,
// and a SYN on a tuple in TIME-WAIT starts a new connection only if it
// is newer than the old one (RFC 6191; Linux's
// tcp_timewait_state_process): when both carry timestamps, a TSval
// newer than the last the old connection brought, else a sequence number
// after its last. C2 carries the client's ISN and TSvals unchanged, and
// both are random from one connection to the next (Linux draws a
// timestamp offset per connection), so half the SYNs were refused: the
// back-end answered with the old connection's ACK, the front-end reset
// that and sent the SYN again (inputBackend), one more round trip
// through the shim before the first byte. In bench-proxy's first-byte
// phase, right after its one-connection-per-request load, that was 989
// handoffs of 2,000, with a C2 handshake of 160 against 101 us at p50
// and the first byte 478 against 388 us.
//
// Everything the back-end received on C2 went through the front-end, so
// it knows what a TIME-WAIT there holds. Records are kept for a
// back-end once its ports come round fast enough to meet its TIME-WAITs
// (handoffs at a rate that walks this shard's ports in less than the
// TIME-WAIT, or a first SYN refused from one): the ports of a back-end
// served slowly never come back within 61 s and cost no memory. Then
// each flow whose C2 was established gives its port back to a record
// (portLedger); the port's record keeps
// the highest TSval the client sent and the sequence number past the last
// byte and FIN C2 can have carried. allocPortFor then takes, of the free
// ports in turn, the first whose record says the back-end will take this
// flow's SYN, passing over at most portPassLimit others; if none does, it
// takes the first free one as before, and the reset still clears the way.
// The record is conservative -- its TSval and end are at or past what the
// back-end can hold -- so a port taken by it is taken by the kernel too.
// Records are for one minute and a second past the release, longer than
// the back-end's TIME-WAIT can have started before it.

import (
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

const (
	// timeWaitSpan is how long a port's record speaks for the back-end:
	// Linux's TIME-WAIT (TCP_TIMEWAIT_LEN, 60 s) and a margin.
	timeWaitSpan = 61 * time.Second
	// portPassLimit bounds the free ports allocPortFor passes over for
	// one SYN. A free port takes a given SYN with probability about 1/2,
	// so 32 all refusing it happens about once in four billion.
	portPassLimit = 32
	// portChunk is how many ports' records are allocated together: a
	// back-end served slowly never walks far enough to need them all.
	portChunk = 1024
)

// portRecord is what the back-end's TIME-WAIT on a handoff port holds,
// as far as the front-end can know it.
type portRecord struct {
	ts    uint32   // highest TSval the old connection sent (hasTS)
	end   wire.Seq // past its last byte and FIN on C2
	at    uint32   // release time, whole seconds of the engine's clock
	flags uint8
}

const (
	portUsed uint8 = 1 << iota // the record speaks of a connection
	portTS                     // the old connection had timestamps
)

// portLedger keeps the records of one back-end's handoff ports, indexed
// from HandoffPortFirst, in chunks allocated on first use, once active.
type portLedger struct {
	chunks []*[portChunk]portRecord
	active bool
	// The rate check: ports taken since checkAt.
	taken   int
	checkAt Time
}

// record is port i's record, or nil if it never had one.
func (l *portLedger) record(i int) *portRecord {
	if c := i / portChunk; c < len(l.chunks) && l.chunks[c] != nil {
		return &l.chunks[c][i%portChunk]
	}
	return nil
}

// slot is port i's record, allocated if needed.
func (l *portLedger) slot(i int) *portRecord {
	c := i / portChunk
	if c >= len(l.chunks) {
		l.chunks = append(l.chunks, make([]*[portChunk]portRecord, c+1-len(l.chunks))...)
	}
	if l.chunks[c] == nil {
		l.chunks[c] = new([portChunk]portRecord)
	}
	return &l.chunks[c][i%portChunk]
}

// seconds is now in whole seconds, as portRecord.at keeps it.
func seconds(now Time) uint32 { return uint32(now / Time(time.Second)) }

// takesSYN reports whether a back-end whose TIME-WAIT r describes takes
// f's SYN as a new connection at now.
func (r *portRecord) takesSYN(f *flow, now Time) bool {
	if r == nil || r.flags&portUsed == 0 || seconds(now)-r.at > uint32(timeWaitSpan/time.Second) {
		return true
	}
	if r.flags&portTS != 0 && f.syn.ts {
		// A TSval not newer is refused (PAWS) or falls to the sequence
		// test; only newer is sure.
		return int32(f.tsRecent-r.ts) > 0
	}
	return r.end.LessThan(f.syn.clientISN)
}

// notePortReleased writes f's C2 into its port's record as f gives the
// port back. A C2 never established leaves the record as it was: the
// back-end may still hold the connection before it.
func (e *FrontEnd) notePortReleased(f *flow, now Time) {
	if !f.c2Up {
		return
	}
	l := e.ledgers[c2Dest{f.bIP, f.backend.Port}]
	if l == nil || !l.active {
		return // its ports do not come round within the TIME-WAIT
	}
	r := l.slot(int(f.hport - e.cfg.HandoffPortFirst))
	end := f.rw.toB(f.cliNxt).Max(f.reqNxt).Max(f.reqEnd)
	*r = portRecord{ts: f.tsMax, end: end + 1, at: seconds(now), flags: portUsed}
	if f.tsB {
		r.flags |= portTS
	}
}

// ledgerOf is dest's ledger, made on first use (inactive: no records).
func (e *FrontEnd) ledgerOf(dest c2Dest, now Time) *portLedger {
	l := e.ledgers[dest]
	if l == nil {
		l = &portLedger{checkAt: now}
		e.ledgers[dest] = l
	}
	return l
}

// notePortTaken counts a port taken towards l's back-end and starts the
// records when, at the rate of the last few, this shard's ports would
// come round within the TIME-WAIT.
func (e *FrontEnd) notePortTaken(l *portLedger, now Time) {
	if l.active {
		return
	}
	owned := (int(e.cfg.HandoffPortLast) - int(e.cfg.HandoffPortFirst) + 1) / e.shards()
	every := max(1, min(1024, owned/8))
	if l.taken++; l.taken < every {
		return
	}
	if now.Sub(l.checkAt)*time.Duration(owned) < timeWaitSpan*time.Duration(every) {
		l.active = true
	}
	l.taken, l.checkAt = 0, now
}

// timeWaitRefused notes that f's back-end answered its SYN from a
// TIME-WAIT: from now on its ports' records are kept whatever the rate.
func (e *FrontEnd) timeWaitRefused(f *flow, now Time) {
	e.stats.HandoffTimeWaitResets++
	e.ledgerOf(c2Dest{f.bIP, f.backend.Port}, now).active = true
}

// noteClientTS takes the TSval v of a client segment: TS.Recent, and the
// highest TSval C2 may have carried.
func (f *flow) noteClientTS(v uint32) {
	f.tsRecent = v
	if int32(v-f.tsMax) > 0 {
		f.tsMax = v
	}
}
