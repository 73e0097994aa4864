package splice

import (
	"encoding/binary"
	"net/netip"

	"github.com/qsplice/qsplice/splice/wire"
)

// Control datagrams taken off the wire (issue 7).
//
// The front-end's control datagrams for this back-end (Splice,
// RegisterAck, Keepalive) arrive on the shim's wire like any frame for
// the host. Passed to the host, each crossed the TAP, the kernel's IP
// and UDP stack and its socket before the daemon's loop read it, on a
// later pass than the one that read it off the wire; a request sent
// right behind its Splice waited for it, held (shim_early.go). So the
// shim hands a datagram for the host's control port to its caller
// instead (Output.Control), which gives it to the agent in the same pass.
//
// The shim checks what the kernel would have checked before its socket
// got the datagram, so the agent sees exactly what the socket would have
// given it:
//
//   - the frame's headers pass the ingress checks every frame for the
//     host passes (ingress.go: IPv4 header checksum, no options, no
//     martian, own or multicast source, TTL not 0);
//   - it is for the host: its IPv4 destination is HostIP and, when
//     HostMAC is set, its Ethernet destination is HostMAC (the wire
//     socket is promiscuous; a frame for another MAC the kernel would
//     have dropped, and it is passed on to be dropped there as before);
//   - it is UDP to ControlPort, not a fragment, and came as one datagram
//     (no GSO in its virtio-net header): anything else passes to the host
//     unchanged, and a fragmented datagram still reaches the kernel's
//     socket, reassembled by the kernel (counted, ControlFragments);
//   - its UDP length is exactly what the IPv4 header leaves for it (the
//     kernel would trim a datagram shorter than its packet; no sender
//     makes one, and it is dropped here);
//   - a non-zero UDP checksum verifies (zero: the sender computed none,
//     which IPv4 allows), unless the virtio-net header says the kernel
//     verified it (DATA_VALID) or the frame was made on this host with
//     the checksum left to the device (NEEDS_CSUM): tcpChecksumValid's
//     rule.
//
// A datagram that fails the last two is dropped and counted; the
// authentication, freshness and sender checks are the agent's, the same
// for both paths.

// ControlDatagram is a UDP datagram for the host's control port that the
// shim took off the wire instead of passing it to the host.
type ControlDatagram struct {
	From netip.AddrPort // the datagram's source address and port
	// SrcMAC is the frame's source MAC: the sender's, or its router's,
	// the next hop back to it.
	SrcMAC wire.MAC
	// Payload is the UDP payload. It aliases the input frame: valid as
	// long as that frame is, like an output frame rewritten in place.
	Payload []byte
}

// takeControl hands p, a parsed frame from the wire that passed the
// ingress checks, to the caller when it is a datagram for the host's
// control port, and reports whether the shim is done with the frame
// (taken, or dropped and counted).
func (s *Shim) takeControl(p *wire.Packet, frame []byte, vh wire.VNetHdr, out *Output) bool {
	if s.cfg.ControlPort == 0 || p.IP == nil || p.IP.Protocol() != wire.ProtoUDP || p.IP.Dst() != s.hostIP {
		return false
	}
	if s.cfg.HostMAC != (wire.MAC{}) && p.Eth.Dst() != s.cfg.HostMAC {
		return false
	}
	u := frame[p.L4:p.End]
	if len(u) < 4 || binary.BigEndian.Uint16(u[2:]) != s.cfg.ControlPort {
		return false
	}
	if p.Kind == wire.KindFragment {
		// The kernel reassembles the datagram for its socket. Only a
		// first fragment shows the ports; the others are not looked at.
		if binary.BigEndian.Uint16(p.IP[6:])&0x1fff == 0 {
			s.stats.ControlFragments++
		}
		return false
	}
	if vh.GSOType != wire.GSONone {
		s.stats.ControlOffloaded++
		return false
	}
	if len(u) < wire.UDPHeaderLen || int(binary.BigEndian.Uint16(u[4:])) != len(u) {
		s.stats.ControlBadLength++
		return true
	}
	if !udpChecksumValid(p, u, vh) {
		s.stats.ControlBadChecksum++
		return true
	}
	s.stats.ControlTaken++
	out.Control = append(out.Control, ControlDatagram{
		From:    netip.AddrPortFrom(netip.AddrFrom4(p.IP.Src()), binary.BigEndian.Uint16(u)),
		SrcMAC:  p.Eth.Src(),
		Payload: u[wire.UDPHeaderLen:],
	})
	return true
}

// udpChecksumValid reports whether the UDP datagram u of p verifies: no
// checksum (0), a virtio-net header that vouches for it, or pseudo-header
// and datagram summing to all ones.
func udpChecksumValid(p *wire.Packet, u []byte, vh wire.VNetHdr) bool {
	if binary.BigEndian.Uint16(u[6:]) == 0 || vh.Flags&(wire.VNetFlagDataValid|wire.VNetFlagNeedsCsum) != 0 {
		return true
	}
	pseudo := wire.Fold(wire.PseudoHeaderSum(p.IP.Src(), p.IP.Dst(), wire.ProtoUDP, uint16(len(u))))
	return onesSum(u, pseudo) == 0xffff
}

// ControlDrops is the number of control datagrams from the wire the shim
// dropped, all reasons together.
func (st ShimStats) ControlDrops() uint64 { return st.ControlBadLength + st.ControlBadChecksum }
