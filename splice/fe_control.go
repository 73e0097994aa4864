package splice

import (
	"github.com/qsplice/qsplice/splice/wire"
)

// Control datagrams taken off the front-end's link (issue 7).
//
// The shims' datagrams for the front-end (Register, SpliceAck, Feedback,
// Keepalive) arrive on the front-end's link like any frame for its host,
// addressed to the kernel's control socket. Through the kernel each
// crossed its IP and UDP stack and the socket, and woke the daemon's loop
// on a descriptor of its own: a recvmmsg(2) more, and often a pass more,
// per request, since a SpliceAck and the SYN-ACK it goes with came on
// two descriptors. With FrontEndConfig.ControlAddr set, the engine hands
// such a datagram to its caller instead (Output.Control), in the pass
// that read it, after the checks the kernel would have made
// (controlDatagramOf, control.go) and the ingress checks every frame
// passes (ingress.go: a control datagram from one of our own addresses
// is forged). The caller decodes it exactly as one from the socket. The
// kernel still receives the frame too (the AF_PACKET socket is a tap):
// the daemon's control socket then keeps nothing it is given
// (frontend/linkcontrol.go).
//
// A fragment of one is not taken: no sender of the protocol fragments
// (its datagrams are far below any MTU and sent with don't-fragment), so
// it is counted and left to the kernel.

// takeControl hands p to the caller when it is a datagram for the control
// socket, and reports whether the engine is done with the frame (taken,
// or dropped and counted).
func (e *FrontEnd) takeControl(p *wire.Packet, frame []byte, vh wire.VNetHdr, out *Output) bool {
	a := e.cfg.ControlAddr
	dg, v := controlDatagramOf(p, frame, vh, a.Addr().As4(), e.cfg.ControlMAC, a.Port())
	switch v {
	case controlNot, controlFragmentRest:
		return false
	case controlFragment:
		e.stats.ControlFragments++
		return false
	case controlOffloaded:
		e.stats.ControlOffloaded++
		return false
	}
	if f := e.checkIngress(p, vh); f != ingressOK {
		e.drop(ingressDrop[f])
		return true
	}
	switch v {
	case controlBadLength:
		e.stats.ControlBadLength++
		return true
	case controlBadChecksum:
		e.stats.ControlBadChecksum++
		return true
	}
	e.stats.ControlTaken++
	out.Control = append(out.Control, dg)
	return true
}
