package splice

// NarrowWindow is the client receive window below which a pure ACK is
// counted in FrontEndStats.NarrowAcks: a sender that can have at most
// this much in flight, held back 2 ms per ACK by the daemon's receive
// moderation (frontend/moderate.go), would be held to 512 MB/s at most,
// a client with a tiny receive buffer to a few hundred KB/s.
const NarrowWindow = 1 << 20

// noteNarrowAck counts a forwarded pure ACK of f whose window is narrow.
// win is the raw window of the segment, scaled by the client's window
// scale (none: 0).
func (e *FrontEnd) noteNarrowAck(f *flow, win uint16) {
	if uint64(win)<<max(f.syn.wscale, 0) < NarrowWindow {
		e.stats.NarrowAcks++
	}
}

// NarrowAcks is FrontEndStats.NarrowAcks, without copying the stats: a
// daemon reads it around each pass.
func (e *FrontEnd) NarrowAcks() uint64 { return e.stats.NarrowAcks }
