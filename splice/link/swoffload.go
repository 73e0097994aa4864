package link

import (
	"errors"

	"github.com/qsplice/qsplice/splice/wire"
)

// Software offloads at the edge of the links: what a link does when a
// frame carries work (a partial checksum, a super-frame) that its other
// side cannot take.

// completeFrame makes a frame read with header h self-contained for a
// caller of ReadFrame, who never sees the header: a partial checksum is
// completed, and an IPv4 TCP super-frame gets its checksum computed over
// the whole of it (it stays one oversized but valid IPv4 packet; only a
// caller with the header can cut it, see ReadBatch). Other super-frames
// (IPv6, UDP) are returned as they are.
func completeFrame(frame []byte, h wire.VNetHdr, p *wire.Packet) error {
	if !h.IsGSO() {
		return wire.CompleteChecksum(frame, h)
	}
	if h.GSOType&^wire.GSOECN != wire.GSOTCPv4 {
		return nil
	}
	if err := wire.Parse(frame, p); err != nil {
		return err
	}
	if p.Kind != wire.KindTCP {
		return errors.New("TCPv4 super-frame is not an IPv4 TCP packet")
	}
	p.TCP.SetChecksum(p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()))
	return nil
}
