package proto

// ReplayWindowSize is how far behind the newest sequence number a
// datagram may be and still be accepted (once): a receiver takes
// datagrams that UDP reordered by up to this many, and refuses older
// ones as replays. Senders number every datagram they send, to any
// peer, so a back-end sees gaps in the front-end's numbers; gaps cost
// nothing.
const ReplayWindowSize = 1024

// ReplayWindow is a receiver's memory of one sender (RFC 4303 3.4.3,
// a sliding bitmap): the sender's newest incarnation seen, the highest
// sequence number accepted in it, and which of the ReplayWindowSize
// numbers up to that one were accepted.
//
// The incarnation rule: a window keeps the newest incarnation it
// accepted. A datagram of an older incarnation is stale and refused
// whatever its sequence number, so a datagram recorded before the
// sender's restart stays dead after it. A newer incarnation starts a
// fresh window at its sequence number; since only an authenticated and
// decoded datagram is ever Accepted, only the key's holder can move a
// window to a new incarnation, and a replayed one never can (it is not
// newer). Incarnations grow with wall-clock time ([NewIncarnation]), so a
// sender whose clock went back across its restart is refused until its
// clock passes its last start.
//
// Check says whether a datagram would be accepted and changes nothing;
// Accept marks it. The receiver calls Check before it spends work on the
// body and Accept only once the datagram authenticated and decoded, so a
// forged or malformed datagram never moves the window. The zero value is
// an empty window, which accepts anything. Not safe for concurrent use.
type ReplayWindow struct {
	incarnation uint64
	top         uint64 // highest sequence number accepted; 0: none yet
	bits        [ReplayWindowSize / 64]uint64
}

// Check returns nil if a datagram numbered (incarnation, seq) would be
// accepted, [ErrStale] if its incarnation is older than the window's, and
// [ErrReplay] if it was accepted before, is ReplayWindowSize or more
// behind the newest, or has sequence number 0 (senders start at 1).
func (w *ReplayWindow) Check(incarnation, seq uint64) error {
	switch {
	case seq == 0:
		return ErrReplay
	case w.top == 0 || incarnation > w.incarnation:
		return nil
	case incarnation < w.incarnation:
		return ErrStale
	case seq > w.top:
		return nil
	case w.top-seq >= ReplayWindowSize:
		return ErrReplay
	case w.bits[bitIndex(seq)]&bitMask(seq) != 0:
		return ErrReplay
	}
	return nil
}

// Accept marks (incarnation, seq) as received. Call it only after Check
// returned nil for the same numbers and the datagram proved genuine.
func (w *ReplayWindow) Accept(incarnation, seq uint64) {
	if w.Check(incarnation, seq) != nil {
		return // a caller's mistake must not move the window
	}
	switch {
	case w.top == 0 || incarnation > w.incarnation:
		w.incarnation, w.top = incarnation, seq
		w.bits = [ReplayWindowSize / 64]uint64{}
	case seq > w.top:
		// Slide: the numbers between the old top and seq were not seen.
		if seq-w.top >= ReplayWindowSize {
			w.bits = [ReplayWindowSize / 64]uint64{}
		} else {
			for s := w.top + 1; s < seq; s++ {
				w.bits[bitIndex(s)] &^= bitMask(s)
			}
		}
		w.top = seq
	}
	w.bits[bitIndex(seq)] |= bitMask(seq)
}

// Incarnation and Top are the window's incarnation and highest sequence
// number accepted (0, 0 when empty).
func (w *ReplayWindow) Incarnation() uint64 { return w.incarnation }
func (w *ReplayWindow) Top() uint64         { return w.top }

func bitIndex(seq uint64) int   { return int(seq%ReplayWindowSize) / 64 }
func bitMask(seq uint64) uint64 { return 1 << (seq % 64) }
