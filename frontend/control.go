package frontend

import (
	"net/netip"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
)

// controlConn is the control protocol's side of the loop: the UDP socket,
// whose descriptor waits in the loop's Poller next to the link's, and the
// front-end's Codec, which holds the master key, derives each back-end's
// key, and keeps a replay window per back-end. The loop alone uses it;
// reading, handling and answering a datagram allocates nothing, and
// neither does refusing one.
type controlConn struct {
	sock  *link.ControlSocket
	codec *proto.Codec
	enc   []byte // a datagram being encoded; Queue copies it
	// bad counts datagrams that could not be read or were refused by
	// the Codec (bad tag, version, replayed, stale, reflected, ...);
	// refused counts the latter by reason, in the order of
	// proto.RefusalReasons.
	bad     uint64
	refused []uint64
	reasons []string
}

// listenControl opens the control socket; master is the master key and
// incarnation the front-end's for this run (proto.NewIncarnation).
func listenControl(addr netip.AddrPort, master []byte, incarnation uint64) (*controlConn, error) {
	codec, err := proto.NewFrontEndCodec(master, incarnation)
	if err != nil {
		return nil, err
	}
	s, err := link.ListenControl(addr, link.ControlConfig{MaxDatagram: proto.MaxDatagram, Batch: maxDrain})
	if err != nil {
		return nil, err
	}
	reasons := proto.RefusalReasons()
	return &controlConn{sock: s, codec: codec, enc: make([]byte, 0, proto.MaxDatagram),
		reasons: reasons, refused: make([]uint64, len(reasons))}, nil
}

func (c *controlConn) Close() error { return c.sock.Close() }

// queue encodes m for to; the pass's flush sends it with the others.
func (c *controlConn) queue(to netip.AddrPort, m proto.Message) error {
	b, err := c.codec.Append(c.enc[:0], m)
	if err != nil {
		return err
	}
	return c.sock.Queue(b, to)
}

// readControl hands the controller every control datagram waiting, at
// now, into the pass's output. Each is checked (authenticated with its
// back-end's key, fresh, travelling this way) and refused right here,
// before anything is queued or handed on: a flood of forged or replayed
// datagrams costs one HMAC each and no allocation, and valid datagrams
// in the same batch are handled as if the flood were not there. Each
// decoded message is the Codec's and is handled before the next is
// decoded.
func (d *Daemon) readControl(now splice.Time, out *controller.Output) {
	c := d.ctl
	n, err := c.sock.Recv()
	if err != nil {
		d.badControl(netip.AddrPort{}, err)
		return
	}
	for i := range n {
		b, from, err := c.sock.Datagram(i)
		d.controlDatagram(b, from, err, now, out)
	}
}

// linkControl hands the controller the control datagrams the pass's
// frames carried (splice/fe_control.go), as readControl does those of
// the socket. They alias the pass's frames, read until its end.
func (d *Daemon) linkControl(now splice.Time, out *controller.Output) {
	for i := range out.Engine.Control {
		dg := &out.Engine.Control[i]
		d.controlDatagram(dg.Payload, dg.From, nil, now, out)
	}
}

// controlDatagram checks one datagram from `from` (err: it could not be
// read) and hands what passes to the controller.
func (d *Daemon) controlDatagram(b []byte, from netip.AddrPort, err error, now splice.Time, out *controller.Output) {
	var m proto.Message
	if err == nil {
		m, err = d.ctl.codec.Decode(b)
	}
	if err != nil {
		d.badControl(from, err)
		return
	}
	d.ctrl.Control(from, m, now, out)
}

// badControl counts a datagram that could not be read or was refused,
// by reason ("other": a socket error), logging the first few and then
// every thousandth.
func (d *Daemon) badControl(from netip.AddrPort, err error) {
	c := d.ctl
	c.bad++
	name := proto.RefusalReason(err)
	for i, r := range c.reasons {
		if r == name {
			c.refused[i]++
		}
	}
	if c.bad < 10 || c.bad%1000 == 0 {
		d.log.Warn("control datagram refused", "from", from, "err", err, "count", c.bad)
	}
}

// controlRefusals are the Codec's refusals by reason, for the status.
func (c *controlConn) controlRefusals() map[string]uint64 {
	m := make(map[string]uint64, len(c.reasons))
	for i, r := range c.reasons {
		if c.refused[i] > 0 {
			m[r] = c.refused[i]
		}
	}
	return m
}
