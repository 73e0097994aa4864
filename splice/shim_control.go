package splice

import (
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

// takeControl hands p, a parsed frame from the wire that passed the
// ingress checks, to the caller when it is a datagram for the host's
// control port, and reports whether the shim is done with the frame
// (taken, or dropped and counted).
func (s *Shim) takeControl(p *wire.Packet, frame []byte, vh wire.VNetHdr, out *Output) bool {
	if s.cfg.ControlPort == 0 {
		return false
	}
	dg, v := controlDatagramOf(p, frame, vh, s.hostIP, s.cfg.HostMAC, s.cfg.ControlPort)
	switch v {
	case controlNot:
		return false
	case controlFragment:
		// The kernel reassembles the datagram for its socket.
		s.stats.ControlFragments++
		return false
	case controlFragmentRest:
		return false
	case controlOffloaded:
		s.stats.ControlOffloaded++
		return false
	case controlBadLength:
		s.stats.ControlBadLength++
		return true
	case controlBadChecksum:
		s.stats.ControlBadChecksum++
		return true
	}
	s.stats.ControlTaken++
	out.Control = append(out.Control, dg)
	return true
}

// ControlDrops is the number of control datagrams from the wire the shim
// dropped, all reasons together.
func (st ShimStats) ControlDrops() uint64 { return st.ControlBadLength + st.ControlBadChecksum }
