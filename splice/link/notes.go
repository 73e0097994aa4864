package link

import (
	"bytes"
	"net/netip"
	"slices"

	"github.com/qsplice/qsplice/splice/wire"
)

// FrameNotes returns a comment for a frame of a capture ("" for none):
// what the daemon did with it. A pcapng capture writes it as the frame's
// opt_comment, which Wireshark shows above the frame's tree and filters
// as frame.comment.
type FrameNotes func(frame []byte, inbound bool) string

// FrontEndNotes comments the frames a front-end wrote on its link (every
// one of them is its engine's doing), by what they are: the SYN-ACK of a
// SYN cookie, an answer or a reset of its own to a client, the SYN that
// hands a connection off on C2, the request and the client's segments
// translated onto C2, an ICMP error passed on to a back-end. A pure ACK
// the front-end sends on C2 itself differs from a translated one only by
// what came before, so that comment names both. It reads the frame
// only, so it cannot comment a frame the engine dropped (read and not
// answered): those show in /status's drop counters. vips are the
// front-end's service addresses, handoff its C2 address.
func FrontEndNotes(vips []netip.Addr, handoff netip.Addr) FrameNotes {
	vips = slices.Clone(vips)
	return func(frame []byte, inbound bool) string {
		var p wire.Packet // per call: the shards' recorders call at once
		if inbound || wire.Parse(frame, &p) != nil {
			return ""
		}
		if p.Kind != wire.KindTCP && p.Kind != wire.KindICMP {
			return "" // ARP and the rest: no IPv4 header to read
		}
		src := p.IP.Src().Addr()
		switch {
		case p.Kind == wire.KindICMP:
			// The only ICMP a front-end writes: a "fragmentation
			// needed" about a reply, passed on to its back-end.
			return "qsplice: ICMP about a reply forwarded to the back-end, its embedded header translated to C2"
		case slices.Contains(vips, src):
			return vipNote(p.TCP.Flags(), frame[p.L4+p.TCP.HeaderLen():p.End])
		case src == handoff:
			return handoffNote(p.TCP.Flags(), frame[p.L4+p.TCP.HeaderLen():p.End])
		}
		return ""
	}
}

func vipNote(flags uint8, payload []byte) string {
	switch {
	case flags&wire.TCPFlagSYN != 0:
		return "qsplice: SYN-ACK with a SYN cookie (no state kept)"
	case flags&wire.TCPFlagRST != 0:
		return "qsplice: reset to the client"
	case bytes.HasPrefix(payload, []byte("HTTP/1.")):
		line := payload
		if i := bytes.IndexByte(line, '\r'); i >= 0 {
			line = line[:i]
		}
		return "qsplice: answered by the front-end: " + string(line[:min(len(line), 64)])
	}
	return ""
}

func handoffNote(flags uint8, payload []byte) string {
	switch {
	case flags&wire.TCPFlagSYN != 0:
		return "qsplice: handed off: C2 SYN to the back-end (the client's ISN and options)"
	case flags&wire.TCPFlagRST != 0:
		return "qsplice: reset on C2"
	case len(payload) > 0:
		return "qsplice: request bytes on C2 (buffered by the front-end, or a client segment translated)"
	}
	// The front-end's own ACK completing C2's handshake looks the same.
	return "qsplice: on C2: a client segment translated (or the front-end's own ACK)"
}
