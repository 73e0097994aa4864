package replay

import (
	"encoding/binary"

	"github.com/qsplice/qsplice/splice/wire"
)

// The client in the capture talked to another front-end; this file moves
// the numbers in its frames that name that front-end's bytes (ACK, SACK
// edges, TS echo) onto our engine's numbering. See the package comment.

// connKey names a client connection as the client sent it: client -> VIP.
type connKey struct {
	client, vip  wire.IP4
	cport, vport uint16
}

// connShift is what is known about one client connection's two server
// sides: the captured one (orig) and ours.
type connShift struct {
	clientISN           wire.Seq
	origISN, ourISN     wire.Seq
	origTS, ourTS       uint32
	hasOrigISN, hasOur  bool
	hasOrigTS, hasOurTS bool
}

// rewriter holds a connShift per client connection. Entries are never
// removed: a replay's captures are finite and a tuple reused with a new
// ISN resets its entry.
type rewriter struct {
	conns map[connKey]*connShift
	opts  wire.TCPOptions
}

func newRewriter() *rewriter { return &rewriter{conns: make(map[connKey]*connShift)} }

// clientKey is the key of a client -> VIP segment.
func clientKey(p *wire.Packet) connKey {
	return connKey{client: p.IP.Src(), vip: p.IP.Dst(), cport: p.TCP.SrcPort(), vport: p.TCP.DstPort()}
}

// replyKey is the key of the connection a VIP -> client segment belongs to.
func replyKey(p *wire.Packet) connKey {
	return connKey{client: p.IP.Dst(), vip: p.IP.Src(), cport: p.TCP.DstPort(), vport: p.TCP.SrcPort()}
}

func isSynAck(t wire.TCP) bool {
	return t.Flags()&(wire.TCPFlagSYN|wire.TCPFlagACK|wire.TCPFlagRST) == wire.TCPFlagSYN|wire.TCPFlagACK
}

// synAckTS returns the TSval of a SYN-ACK, if it carries timestamps.
func (w *rewriter) synAckTS(t wire.TCP) (uint32, bool) {
	if wire.ParseOptions(t, &w.opts) != nil || !w.opts.HasTS {
		return 0, false
	}
	return w.opts.TSVal, true
}

// capturedSynAck learns origISN (and origTS) from a SYN-ACK the captured
// front-end sent.
func (w *rewriter) capturedSynAck(p *wire.Packet) {
	c := w.conns[replyKey(p)]
	if c == nil || !isSynAck(p.TCP) || p.TCP.Ack() != c.clientISN+1 {
		return // not an answer to the SYN we know of
	}
	c.origISN, c.hasOrigISN = p.TCP.Seq(), true
	c.origTS, c.hasOrigTS = w.synAckTS(p.TCP)
}

// engineSynAck learns ourISN (and ourTS) from a SYN-ACK our engine sent.
func (w *rewriter) engineSynAck(p *wire.Packet) {
	c := w.conns[replyKey(p)]
	if c == nil || !isSynAck(p.TCP) || p.TCP.Ack() != c.clientISN+1 {
		return
	}
	c.ourISN, c.hasOur = p.TCP.Seq(), true
	c.ourTS, c.hasOurTS = w.synAckTS(p.TCP)
}

// rewriteResult says what clientFrame did.
type rewriteResult uint8

const (
	rewroteNothing  rewriteResult = iota // a SYN, or nothing to move
	rewroteShifted                       // numbers moved onto our engine's
	rewroteUnmapped                      // our engine's ISN is unknown: fed as captured
)

// clientFrame rewrites a client -> VIP TCP segment in place before it is
// fed to the engine.
func (w *rewriter) clientFrame(p *wire.Packet) rewriteResult {
	t := p.TCP
	k := clientKey(p)
	flags := t.Flags()
	c := w.conns[k]
	if flags&(wire.TCPFlagSYN|wire.TCPFlagACK) == wire.TCPFlagSYN {
		if c == nil || c.clientISN != t.Seq() {
			// A new connection, or the tuple reused: forget both sides.
			w.conns[k] = &connShift{clientISN: t.Seq()}
		}
		return rewroteNothing
	}
	if c == nil || flags&wire.TCPFlagACK == 0 {
		// No SYN seen (the capture starts mid-connection), or a segment
		// without an ACK (a bare RST): nothing names the server's bytes
		// that we could move.
		if c == nil && flags&wire.TCPFlagACK != 0 {
			return rewroteUnmapped
		}
		return rewroteNothing
	}
	if wire.ParseOptions(t, &w.opts) != nil {
		return rewroteUnmapped // the engine drops it as bad options anyway
	}
	o := &w.opts
	if !c.hasOrigISN {
		c.origISN, c.hasOrigISN = t.Ack()-1, true
	}
	if !c.hasOrigTS && o.HasTS && o.TSEcr != 0 {
		c.origTS, c.hasOrigTS = o.TSEcr, true
	}
	if !c.hasOur {
		return rewroteUnmapped
	}
	shift := uint32(c.ourISN - c.origISN)
	if shift != 0 {
		t.SetAckUpdate(t.Ack() + wire.Seq(shift))
		for i := 0; i < o.NumSACK; i++ {
			off := o.SACKOffset + 8*i
			t.SetUint32AtUpdate(off, binary.BigEndian.Uint32(t[off:])+shift)
			t.SetUint32AtUpdate(off+4, binary.BigEndian.Uint32(t[off+4:])+shift)
		}
	}
	if o.HasTS && o.TSEcr != 0 && c.hasOrigTS && c.hasOurTS {
		t.SetUint32AtUpdate(o.TSOffset+4, o.TSEcr+c.ourTS-c.origTS)
	}
	return rewroteShifted
}

// recomputeChecksums replaces both checksums of an IPv4/TCP frame with
// full computations (for captures with offloaded, partial checksums).
func recomputeChecksums(p *wire.Packet) {
	p.IP.SetChecksum(0)
	p.IP.SetChecksum(p.IP.ComputeChecksum())
	if p.Kind == wire.KindTCP {
		p.TCP.SetChecksum(p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()))
	}
}
