package frontend

import (
	"net/netip"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/link"
)

// controlConn is the control protocol's side of the loop: the UDP socket,
// whose descriptor waits in the loop's Poller next to the link's, and the
// Codec that encodes and decodes its datagrams. The loop alone uses it;
// reading, handling and answering a datagram allocates nothing.
type controlConn struct {
	sock  *link.ControlSocket
	codec *proto.Codec
	enc   []byte // a datagram being encoded; Queue copies it
	// bad counts datagrams that failed to decode (bad key, version,
	// truncation).
	bad uint64
}

func listenControl(addr netip.AddrPort, key []byte) (*controlConn, error) {
	s, err := link.ListenControl(addr, link.ControlConfig{MaxDatagram: proto.MaxDatagram, Batch: maxDrain})
	if err != nil {
		return nil, err
	}
	return &controlConn{sock: s, codec: proto.NewCodec(key), enc: make([]byte, 0, proto.MaxDatagram)}, nil
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
// now, into the pass's output. Each decoded message is the Codec's and is
// handled before the next is decoded.
func (d *Daemon) readControl(now splice.Time) {
	c := d.ctl
	n, err := c.sock.Recv()
	if err != nil {
		d.badControl(netip.AddrPort{}, err)
		return
	}
	for i := range n {
		b, from, err := c.sock.Datagram(i)
		var m proto.Message
		if err == nil {
			m, err = c.codec.Decode(b)
		}
		if err != nil {
			d.badControl(from, err)
			continue
		}
		d.ctrl.Control(from, m, now, &d.out)
	}
}

// badControl counts a datagram that could not be read or decoded, logging
// the first few and then every thousandth.
func (d *Daemon) badControl(from netip.AddrPort, err error) {
	d.ctl.bad++
	if d.ctl.bad < 10 || d.ctl.bad%1000 == 0 {
		d.log.Warn("bad control message", "from", from, "err", err, "count", d.ctl.bad)
	}
}
