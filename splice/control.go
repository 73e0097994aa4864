package splice

import (
	"encoding/binary"
	"net/netip"

	"github.com/qsplice/qsplice/splice/wire"
)

// Control datagrams taken off a link (issue 7): what both engines check
// of a UDP datagram for their host's control port before handing it to
// their caller instead of the kernel (the shim: shim_control.go; the
// front-end: fe_control.go). The checks are those the kernel would have
// made before its socket got the datagram, so the caller sees exactly
// what the socket would have given it; the authentication, freshness and
// sender checks are the control protocol's (proto.Codec), the same for
// both paths.

// ControlDatagram is a UDP datagram for the host's control port that an
// engine took off its link instead of leaving it to the host's kernel.
type ControlDatagram struct {
	From netip.AddrPort // the datagram's source address and port
	// SrcMAC is the frame's source MAC: the sender's, or its router's,
	// the next hop back to it.
	SrcMAC wire.MAC
	// Payload is the UDP payload. It aliases the input frame: valid as
	// long as that frame is, like an output frame rewritten in place.
	Payload []byte
}

// controlVerdict is what controlDatagramOf made of a frame.
type controlVerdict uint8

const (
	controlTaken controlVerdict = iota
	// controlNot: not UDP to the host's address (and MAC, when set) and
	// control port; the kernel's, as any frame.
	controlNot
	// controlFragment: the first fragment of a datagram for the control
	// port (the only one that shows the ports); controlFragmentRest: a
	// later fragment to the host, which may be one. The kernel
	// reassembles them.
	controlFragment
	controlFragmentRest
	// controlOffloaded: a GSO super-frame (no sender of the protocol
	// makes one).
	controlOffloaded
	// controlBadLength: the UDP length is not what the IPv4 header leaves
	// for it (the kernel would trim a datagram shorter than its packet;
	// no sender makes one); controlBadChecksum: a non-zero UDP checksum
	// that does not verify. Both are dropped and counted.
	controlBadLength
	controlBadChecksum
)

// controlDatagramOf checks p, a parsed frame that passed the ingress
// checks, as the kernel would a datagram for port at ip (and, when mac is
// set, at mac: a promiscuous socket sees frames the kernel would have
// dropped for their MAC), and returns the datagram it carries when it is
// one for the control port:
//
//   - UDP to ip:port, not a fragment, one datagram (no GSO in its
//     virtio-net header);
//   - its UDP length exactly what the IPv4 header leaves for it;
//   - a non-zero UDP checksum verifies (zero: the sender computed none,
//     which IPv4 allows), unless the virtio-net header says the kernel
//     verified it (DATA_VALID) or the frame was made on this host with
//     the checksum left to the device (NEEDS_CSUM): tcpChecksumValid's
//     rule.
func controlDatagramOf(p *wire.Packet, frame []byte, vh wire.VNetHdr, ip wire.IP4, mac wire.MAC, port uint16) (ControlDatagram, controlVerdict) {
	if p.IP == nil || p.IP.Protocol() != wire.ProtoUDP || p.IP.Dst() != ip {
		return ControlDatagram{}, controlNot
	}
	if mac != (wire.MAC{}) && p.Eth.Dst() != mac {
		return ControlDatagram{}, controlNot
	}
	if p.Kind == wire.KindFragment && binary.BigEndian.Uint16(p.IP[6:])&0x1fff != 0 {
		return ControlDatagram{}, controlFragmentRest
	}
	u := frame[p.L4:p.End]
	if len(u) < 4 || binary.BigEndian.Uint16(u[2:]) != port {
		return ControlDatagram{}, controlNot
	}
	if p.Kind == wire.KindFragment {
		return ControlDatagram{}, controlFragment
	}
	if vh.GSOType != wire.GSONone {
		return ControlDatagram{}, controlOffloaded
	}
	if len(u) < wire.UDPHeaderLen || int(binary.BigEndian.Uint16(u[4:])) != len(u) {
		return ControlDatagram{}, controlBadLength
	}
	if !udpChecksumValid(p, u, vh) {
		return ControlDatagram{}, controlBadChecksum
	}
	return ControlDatagram{
		From:    netip.AddrPortFrom(netip.AddrFrom4(p.IP.Src()), binary.BigEndian.Uint16(u)),
		SrcMAC:  p.Eth.Src(),
		Payload: u[wire.UDPHeaderLen:],
	}, controlTaken
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
