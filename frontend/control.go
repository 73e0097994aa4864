package frontend

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/qsplice/qsplice/proto"
)

// controlConn is the UDP socket for the control protocol.
type controlConn struct {
	conn *net.UDPConn
	key  []byte
	// bad counts datagrams that failed to decode (bad key, version,
	// truncation); touched by the loop only.
	bad uint64
}

type ctlMsg struct {
	msg  proto.Message
	from netip.AddrPort
	err  error
}

func listenControl(addr netip.AddrPort, key []byte) (*controlConn, error) {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, fmt.Errorf("control socket %v: %w", addr, err)
	}
	return &controlConn{conn: c, key: key}, nil
}

func (c *controlConn) Close() error { return c.conn.Close() }

// start reads datagrams in a goroutine and delivers decoded messages
// until the socket closes or done does, calling wake after each one (the
// loop sleeps in its poller, not on the channel).
func (c *controlConn) start(done <-chan struct{}, wake func()) <-chan ctlMsg {
	ch := make(chan ctlMsg, 256)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := c.conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			m, err := proto.Unmarshal(c.key, buf[:n])
			select {
			case ch <- ctlMsg{msg: m, from: from, err: err}:
				wake()
			case <-done:
				return
			}
		}
	}()
	return ch
}

func (c *controlConn) send(to netip.AddrPort, m proto.Message) error {
	b, err := proto.Marshal(c.key, m)
	if err != nil {
		return err
	}
	_, err = c.conn.WriteToUDPAddrPort(b, to)
	return err
}

// control is one pass of the loop for a control datagram.
func (d *Daemon) control(m ctlMsg) {
	if m.err != nil {
		d.ctl.bad++
		if d.ctl.bad < 10 || d.ctl.bad%1000 == 0 {
			d.log.Warn("bad control message", "from", m.from, "err", m.err, "count", d.ctl.bad)
		}
		return
	}
	now := d.now()
	d.out.Reset()
	d.ctrl.Control(m.from, m.msg, now, &d.out)
	d.finish(now)
}
