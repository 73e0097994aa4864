package frontend

import (
	"net"
	"net/netip"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// The control protocol in the link's batches (issue 7).
//
// Out. Every handed-off request sends its back-end's shim one Splice.
// Through the control socket that was a sendmmsg(2) of its own in each
// pass that had one, next to the pass's sendmmsg of frames, and a trip
// through the kernel's UDP and IP output; and the order of the two calls
// had to be chosen per message (a classic Splice before the pass's
// frames, one sent with its SYN after them, Daemon.sendDatagrams). The
// shim takes datagrams for its control port off its wire already
// (splice/shim_control.go), and the front-end sends C2's frames to the
// back-end's MAC itself. So a shard builds a Splice into a frame of its
// own, as the kernel would have sent it from the control socket (the
// link's MAC, the socket's address and port, both checksums, don't
// fragment), and sends it in the pass's batch, at its place: a classic
// Splice ahead of the pass's frames, one sent with its SYN behind them
// (unless the SYN asks for Fast Open: Daemon.sendDatagrams says why).
// The shim sees the same datagram from the same address; nothing else
// changes for it. Only Splices: the others (RegisterAck, keepalive
// echoes) are a few a second and go through the socket.
//
// In. The shims' datagrams (Register, SpliceAck, Feedback, Keepalive)
// came through the kernel's UDP input and the socket, a recvmmsg(2) and
// often a wake-up of their own per request: a SpliceAck and the SYN-ACK
// it goes with arrived on two descriptors. The link's filter now keeps
// UDP to the control address too (link.FilterIPv4DstAndUDP; the fanout
// sends what is not TCP to shard 0), the engine hands such a datagram
// over after the kernel's checks (splice/fe_control.go), and the pass
// gives it to the controller exactly as one from the socket
// (Daemon.linkControl). The kernel still receives every frame (AF_PACKET
// is a tap): the socket refuses what came through the link's interface
// (link.ControlSocket.RefuseFrom), and keeps reading what comes another
// way.
//
// Both only when all of this holds, else the socket as before: the link
// is an AF_PACKET socket on an interface that carries the control
// socket's address (so the frame's source is what the kernel would have
// used, and the shim's answers, sent to the frame's source MAC, reach
// the front-end); no -capture (which records the control datagrams apart
// from the link's frames, from the socket); not -control-socket-only.
// A Splice goes as a frame when the controller knows the back-end's MAC
// (from its Register, the one C2 goes to) and the pass has a frame
// buffer left.

// linkControlFrames bounds the Splices one pass sends as frames; more go
// through the socket.
const linkControlFrames = 64

// linkControlFrameLen is a control frame's largest size.
const linkControlFrameLen = wire.EthernetHeaderLen + wire.IPv4MinHeaderLen + wire.UDPHeaderLen + proto.MaxDatagram

// linkControlSource is where Splices sent as frames come from; zero: none
// are (linkControlFrom says why).
type linkControlSource struct {
	mac     wire.MAC
	src     netip.AddrPort
	ifindex int // the link's interface
}

func (s linkControlSource) on() bool { return s.src.IsValid() }

// linkControlOf is linkControlFrom; the daemon's tests, whose links are
// in memory, replace it.
var linkControlOf = linkControlFrom

// linkControlFrom is the source of Splices sent as frames on cfg's link:
// the interface's MAC and the control socket's address, if the link is
// an AF_PACKET socket on an interface that has that address; else zero
// and why not, for the log.
func linkControlFrom(cfg *Config) (linkControlSource, string) {
	switch {
	case cfg.ControlSocketOnly:
		return linkControlSource{}, "-control-socket-only"
	case cfg.LinkType != "afpacket":
		return linkControlSource{}, "the link is a TAP"
	case cfg.Capture != "":
		// The capture records control datagrams on an interface of
		// their own, from the socket; as frames they would be recorded
		// among the link's.
		return linkControlSource{}, "-capture records the control socket's datagrams"
	case !cfg.Control.Addr().Is4() || cfg.Control.Addr().IsUnspecified():
		return linkControlSource{}, "the control address is not one IPv4 address"
	}
	ifi, err := net.InterfaceByName(cfg.Link)
	if err != nil {
		return linkControlSource{}, err.Error()
	}
	if len(ifi.HardwareAddr) != len(wire.MAC{}) {
		return linkControlSource{}, "the link's interface has no Ethernet address"
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return linkControlSource{}, err.Error()
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == cfg.Control.Addr() {
				return linkControlSource{mac: wire.MAC(ifi.HardwareAddr), src: cfg.Control, ifindex: ifi.Index}, ""
			}
		}
	}
	return linkControlSource{}, "the control address is not on the link's interface"
}

// linkControl is a shard's Splices of one pass as frames: the frames
// that go ahead of the pass's engine frames, and those that go behind
// them. The buffers are the shard's; the frames live until the pass's
// frames are sent (in the next wait's io_uring_enter, when the pass
// queues them there).
type linkControl struct {
	bufs         [][]byte
	used         int
	ahead, after [][]byte
	ipID         uint16
}

func newLinkControl() linkControl {
	c := linkControl{bufs: make([][]byte, linkControlFrames),
		ahead: make([][]byte, 0, linkControlFrames), after: make([][]byte, 0, linkControlFrames)}
	for i := range c.bufs {
		c.bufs[i] = make([]byte, linkControlFrameLen)
	}
	return c
}

// reset forgets the pass's frames once they are sent.
func (c *linkControl) reset() {
	clear(c.ahead)
	clear(c.after)
	c.ahead, c.after, c.used = c.ahead[:0], c.after[:0], 0
}

// queueSplice seals dg's Splice with codec into a frame from src, to go
// after the pass's frames if withSYN, else ahead of them, and reports
// whether it did; false: send it through the socket. An encoding error
// is the caller's to count, like the socket's.
func (c *linkControl) queueSplice(src linkControlSource, codec *proto.Codec, dg *controller.Datagram, withSYN bool) (bool, error) {
	if !src.on() || dg.MAC == (wire.MAC{}) || !dg.To.Addr().Is4() || c.used == len(c.bufs) {
		return false, nil
	}
	buf := c.bufs[c.used]
	const hdr = wire.EthernetHeaderLen + wire.IPv4MinHeaderLen + wire.UDPHeaderLen
	payload, err := codec.Append(buf[hdr:hdr], dg.Msg)
	if err != nil {
		return false, err
	}
	c.used++
	c.ipID++
	f := wire.UDPFrame{SrcMAC: src.mac, DstMAC: dg.MAC, Src: src.src.Addr().As4(), Dst: dg.To.Addr().As4(),
		SrcPort: src.src.Port(), DstPort: dg.To.Port(), IPID: c.ipID, Payload: payload}
	frame := buf[:f.Encode(buf)]
	if withSYN {
		c.after = append(c.after, frame)
	} else {
		c.ahead = append(c.ahead, frame)
	}
	return true, nil
}
