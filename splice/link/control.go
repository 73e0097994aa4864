package link

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// ControlSocket is the UDP socket a daemon's control protocol (package
// proto) runs over, driven from the daemon's event loop like its links:
// its descriptor waits in the loop's Poller next to theirs, Recv reads
// every datagram waiting with one recvmmsg(2), and the datagrams a pass
// produces go out together with one sendmmsg(2) at its end (Queue,
// Flush). Nothing on either path allocates.
//
// The alternative, a reader goroutine that hands each datagram to the
// loop over a channel and wakes it, costs a goroutine switch, a trip
// through Go's netpoller and an eventfd write per datagram, several per
// request on the front-end; here a SpliceAck is read, handled and the
// request it releases written in the same pass that saw it readable.
//
// IPv4 only, as the control protocol is. Not safe for concurrent use,
// except Close.
type ControlSocket struct {
	raw   *pollFD
	fd    int
	local netip.AddrPort
	max   int // longest datagram read or queued
	rx    controlRx
	tx    controlTx
	rec   ControlRecorder // nil unless recording (controlrecord.go)
}

// ControlConfig sizes a ControlSocket. Zero values take the defaults.
type ControlConfig struct {
	// MaxDatagram is the longest datagram Recv delivers and Queue takes
	// (2048). A longer one received is reported by Datagram as
	// ErrDatagramTooLong.
	MaxDatagram int
	// Batch is how many datagrams one Recv reads and one sendmmsg
	// sends at most (64). More waiting are read by the next Recv (the
	// Poller reports the socket again); Queue flushes a full batch.
	Batch int
}

// ErrDatagramTooLong: a datagram longer than ControlConfig.MaxDatagram.
var ErrDatagramTooLong = errors.New("datagram longer than the control socket's limit")

// controlRx is the argument block of the prebuilt recvmmsg closure.
type controlRx struct {
	bufs  [][]byte
	names []unix.RawSockaddrInet4
	iov   []unix.Iovec
	hdrs  []mmsghdr
	count int // datagrams of the last Recv
	errno syscall.Errno
	do    func(fd uintptr) bool
}

// controlTx holds the queued datagrams, copied into slots of MaxDatagram
// bytes each, and the prebuilt sendmmsg closure's state.
type controlTx struct {
	slots []byte
	names []unix.RawSockaddrInet4
	iov   []unix.Iovec
	hdrs  []mmsghdr
	count int // queued
	sent  int // of them, sent or given up on
	// failed counts the datagrams of this Flush the kernel refused;
	// errno is the first refusal.
	failed int
	errno  syscall.Errno
	do     func(fd uintptr) bool
	// rec, when set, is told of each datagram sent (controlrecord.go).
	rec   ControlRecorder
	local netip.AddrPort
	max   int
}

// ListenControl opens a UDP socket on addr (IPv4; port 0 picks one).
func ListenControl(addr netip.AddrPort, cfg ControlConfig) (*ControlSocket, error) {
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, fmt.Errorf("control socket %v: %w", addr, err)
	}
	s, err := NewControlSocket(conn, cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

// NewControlSocket drives an open IPv4 UDP socket. The ControlSocket takes
// it over: it keeps a duplicate of the descriptor and closes conn, which
// takes the socket out of Go's netpoller (see pollFD: only the loop's
// Poller should wake for a datagram). Use only the ControlSocket from now
// on, and its Close; closing conn again is harmless.
func NewControlSocket(conn *net.UDPConn, cfg ControlConfig) (*ControlSocket, error) {
	if cfg.MaxDatagram <= 0 {
		cfg.MaxDatagram = 2048
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 64
	}
	local := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	if !local.Addr().Unmap().Is4() {
		return nil, fmt.Errorf("control socket %v: not an IPv4 socket", local)
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("control socket %v: %w", local, err)
	}
	dup := -1
	var derr error
	if err := rc.Control(func(fd uintptr) {
		dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		derr = err
	}
	if derr != nil {
		return nil, fmt.Errorf("control socket %v: dup: %w", local, derr)
	}
	// Closing conn deregisters the socket from the netpoller (epoll
	// watches the open file, which the duplicate keeps open).
	conn.Close()
	raw, err := newPollFD(dup)
	if err != nil {
		unix.Close(dup)
		return nil, fmt.Errorf("control socket %v: %w", local, err)
	}
	s := &ControlSocket{raw: raw, fd: dup, local: netip.AddrPortFrom(local.Addr().Unmap(), local.Port()), max: cfg.MaxDatagram}
	n := cfg.Batch
	r := &s.rx
	r.bufs, r.names = make([][]byte, n), make([]unix.RawSockaddrInet4, n)
	r.iov, r.hdrs = make([]unix.Iovec, n), make([]mmsghdr, n)
	for i := range n {
		r.bufs[i] = make([]byte, cfg.MaxDatagram)
		r.iov[i].Base = &r.bufs[i][0]
		r.iov[i].SetLen(cfg.MaxDatagram)
	}
	r.do = r.recvmmsg
	t := &s.tx
	t.slots, t.names = make([]byte, n*cfg.MaxDatagram), make([]unix.RawSockaddrInet4, n)
	t.iov, t.hdrs = make([]unix.Iovec, n), make([]mmsghdr, n)
	t.do = t.sendmmsg
	return s, nil
}

// FD is the descriptor to register with a Poller. The socket keeps
// ownership.
func (s *ControlSocket) FD() int { return s.fd }

// LocalAddr is the address the socket is bound to.
func (s *ControlSocket) LocalAddr() netip.AddrPort { return s.local }

// RefuseFrom makes the socket keep no datagram that came in through the
// interface with index ifindex: a daemon that takes the datagrams for
// this socket off that interface itself (splice/fe_control.go) would
// otherwise read each twice. Datagrams through other interfaces (the
// loopback, a second NIC) still come. A socket filter (SO_ATTACH_FILTER
// on the datagram's receiving device, SKF_AD_IFINDEX): the kernel still
// runs its IP and UDP input, then drops the datagram before the queue.
func (s *ControlSocket) RefuseFrom(ifindex int) error {
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtInterfaceIndex},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(ifindex), SkipTrue: 1},
		bpf.RetConstant{Val: 0},
		bpf.RetConstant{Val: keepWholeFrame},
	})
	if err != nil {
		return err
	}
	if err := attachFilter(s.fd, prog); err != nil {
		return fmt.Errorf("control socket %v: attach filter: %w", s.local, err)
	}
	return nil
}

// Close closes the socket.
func (s *ControlSocket) Close() error { return s.raw.Close() }

// Recv reads the datagrams waiting now, up to the batch size, with one
// recvmmsg(2), without blocking, and returns how many it read: 0 when
// none is waiting. Datagram(i) returns each; they stay valid until the
// next Recv.
func (s *ControlSocket) Recv() (int, error) {
	r := &s.rx
	r.count, r.errno = 0, 0
	if err := s.raw.Read(r.do); err != nil {
		return 0, fmt.Errorf("control socket %v: read: %w", s.local, err)
	}
	if r.errno != 0 {
		return 0, fmt.Errorf("control socket %v: recvmmsg: %w", s.local, r.errno)
	}
	if s.rec != nil {
		s.recordReceived()
	}
	return r.count, nil
}

// recvmmsg is the RawConn.Read callback. It never parks: the caller's
// Poller said readable, and an empty socket just ends the batch.
// MSG_TRUNC makes the kernel report a datagram's whole length, so one
// longer than its buffer is recognised.
func (r *controlRx) recvmmsg(fd uintptr) bool {
	for i := range r.hdrs {
		h := &r.hdrs[i]
		h.hdr = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&r.names[i])), Namelen: unix.SizeofSockaddrInet4, Iov: &r.iov[i]}
		h.hdr.SetIovlen(1)
		h.n = 0
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[0])), uintptr(len(r.hdrs)),
			unix.MSG_DONTWAIT|unix.MSG_TRUNC, 0, 0)
		switch errno {
		case 0:
			r.count = int(n)
		case unix.EINTR:
			continue
		case unix.EAGAIN:
		default:
			r.errno = errno
		}
		return true
	}
}

// Datagram returns datagram i of the last Recv and its sender; err is
// ErrDatagramTooLong (wrapped, with the length) for one longer than the
// limit, whose bytes were cut.
func (s *ControlSocket) Datagram(i int) (b []byte, from netip.AddrPort, err error) {
	r := &s.rx
	sa := &r.names[i]
	from = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), portOf(sa))
	n := int(r.hdrs[i].n)
	if n > s.max || r.hdrs[i].hdr.Flags&unix.MSG_TRUNC != 0 {
		return r.bufs[i], from, fmt.Errorf("%w: %d bytes, at most %d", ErrDatagramTooLong, n, s.max)
	}
	return r.bufs[i][:n], from, nil
}

// Queue copies b to be sent to to by the next Flush. With a full batch
// queued it flushes first.
func (s *ControlSocket) Queue(b []byte, to netip.AddrPort) error {
	a := to.Addr().Unmap()
	switch {
	case !a.Is4():
		return fmt.Errorf("control socket %v: send to %v: not an IPv4 address", s.local, to)
	case len(b) > s.max:
		return fmt.Errorf("control socket %v: send to %v: %w: %d bytes, at most %d", s.local, to, ErrDatagramTooLong, len(b), s.max)
	case len(b) == 0:
		return fmt.Errorf("control socket %v: send to %v: empty datagram", s.local, to)
	}
	t := &s.tx
	if t.count == len(t.hdrs) {
		if _, err := s.Flush(); err != nil {
			return err
		}
	}
	m := t.count
	slot := t.slots[m*s.max : m*s.max+len(b)]
	copy(slot, b)
	t.names[m] = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.As4()}
	setPort(&t.names[m], to.Port())
	t.iov[m].Base = &slot[0]
	t.iov[m].SetLen(len(slot))
	t.hdrs[m] = mmsghdr{hdr: unix.Msghdr{Name: (*byte)(unsafe.Pointer(&t.names[m])), Namelen: unix.SizeofSockaddrInet4, Iov: &t.iov[m]}}
	t.hdrs[m].hdr.SetIovlen(1)
	t.count++
	return nil
}

// Queued is the number of datagrams waiting for Flush.
func (s *ControlSocket) Queued() int { return s.tx.count }

// Flush sends the queued datagrams with sendmmsg(2) and empties the
// queue. A datagram the kernel refuses (no route, say) is counted in
// failed and the others still go; err describes the first refusal. A full
// socket buffer waits for room: datagrams are small and the kernel drains
// them quickly.
func (s *ControlSocket) Flush() (failed int, err error) {
	t := &s.tx
	if t.count == 0 {
		return 0, nil
	}
	t.sent, t.failed, t.errno = 0, 0, 0
	rerr := s.raw.Write(t.do)
	failed = t.failed + t.count - t.sent
	switch {
	case rerr != nil:
		err = fmt.Errorf("control socket %v: write: %w", s.local, rerr)
	case t.errno != 0:
		err = fmt.Errorf("control socket %v: sendmmsg: %w", s.local, t.errno)
	}
	t.count = 0
	return failed, err
}

// sendmmsg is the RawConn.Write callback. sendmmsg(2) reports a refused
// datagram only when it is the first of the call, so a refusal skips
// that one datagram and the call resumes after it.
func (t *controlTx) sendmmsg(fd uintptr) bool {
	for t.sent < t.count {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd,
			uintptr(unsafe.Pointer(&t.hdrs[t.sent])), uintptr(t.count-t.sent), 0, 0, 0)
		switch errno {
		case 0:
			if t.rec != nil {
				t.recordSent(t.sent, int(n))
			}
			t.sent += int(n)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			if t.errno == 0 {
				t.errno = errno
			}
			t.failed++
			t.sent++
		}
	}
	return true
}

// A sockaddr's port is in network byte order in memory.

func portOf(sa *unix.RawSockaddrInet4) uint16 {
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	return uint16(p[0])<<8 | uint16(p[1])
}

func setPort(sa *unix.RawSockaddrInet4, port uint16) {
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	p[0], p[1] = byte(port>>8), byte(port)
}
