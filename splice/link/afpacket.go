package link

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// DefaultRecvBuffer is the AF_PACKET receive buffer used when
// AFPacketConfig.RecvBuffer is zero. The kernel default (about 200 KiB)
// overflows under bulk TCP (design.md section 7).
const DefaultRecvBuffer = 4 << 20

// AFPacketConfig tunes OpenAFPacket. The zero value is the usual setting:
// no filter, no promiscuous mode, a 4 MiB receive buffer, and outgoing
// frames not read back.
type AFPacketConfig struct {
	// Filter is a classic BPF program attached before the socket is bound,
	// so no unfiltered frame is ever queued. See FilterIPv4Dst.
	Filter []bpf.RawInstruction
	// Promiscuous puts the interface in promiscuous mode while the socket
	// is open (needed to see frames for MACs other than the interface's).
	Promiscuous bool
	// RecvBuffer is the socket receive buffer in bytes, set with
	// SO_RCVBUFFORCE (which ignores net.core.rmem_max but needs
	// CAP_NET_ADMIN), falling back to SO_RCVBUF. Zero means
	// DefaultRecvBuffer; negative keeps the kernel default.
	RecvBuffer int
	// ReadOutgoing makes the socket also read the frames that leave the
	// interface, including those this socket sends. By default they are
	// suppressed with PACKET_IGNORE_OUTGOING (Linux 4.20 and later); the
	// option is inverted so that the zero value is the safe default.
	ReadOutgoing bool
}

// AFPacket is a Link over a raw AF_PACKET socket bound to one interface.
//
// ReadFrame and WriteFrame do not allocate: they run prebuilt closures
// through the socket's syscall.RawConn, so a blocked read parks on the Go
// poller instead of a thread. (mdlayher/packet's WriteTo allocates about
// nine times per call.) One ReadFrame and one WriteFrame may run at once;
// concurrent calls of the same method are serialised.
//
// Frames read between bind(2) and the PACKET_IGNORE_OUTGOING setsockopt can
// include an outgoing frame; open the link before sending.
type AFPacket struct {
	name    string
	conn    *packet.Conn
	raw     syscall.RawConn
	closed  atomic.Bool
	ctr     counters
	readMu  sync.Mutex
	rx      rxState
	writeMu sync.Mutex
	tx      txState
	batch   batchState // WriteFrames, under writeMu too
}

// rxState is the argument block of the prebuilt receive closure; the
// closure is created once so that ReadFrame does not allocate one per call.
type rxState struct {
	buf   []byte
	n     int // frame length as reported with MSG_TRUNC, may exceed len(buf)
	errno syscall.Errno
	do    func(fd uintptr) bool
}

// txState is the argument block of the prebuilt send closure.
type txState struct {
	frame []byte
	errno syscall.Errno
	do    func(fd uintptr) bool
}

var _ Link = (*AFPacket)(nil)

// OpenAFPacket opens a raw AF_PACKET socket on ifname receiving every
// protocol (ETH_P_ALL). It needs CAP_NET_RAW and must run in the network
// namespace that owns the interface; the socket stays in that namespace.
func OpenAFPacket(ifname string, cfg AFPacketConfig) (*AFPacket, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("afpacket %s: %w", ifname, err)
	}
	conn, err := packet.Listen(ifi, packet.Raw, unix.ETH_P_ALL, &packet.Config{Filter: cfg.Filter})
	if err != nil {
		return nil, fmt.Errorf("afpacket %s: %w", ifname, err)
	}
	a := &AFPacket{name: ifname, conn: conn}
	if err := a.configure(cfg); err != nil {
		conn.Close()
		return nil, fmt.Errorf("afpacket %s: %w", ifname, err)
	}
	a.rx.do = a.rx.recv
	a.tx.do = a.tx.send
	a.batch.do = a.batch.sendmmsg
	return a, nil
}

func (a *AFPacket) configure(cfg AFPacketConfig) error {
	raw, err := a.conn.SyscallConn()
	if err != nil {
		return err
	}
	a.raw = raw
	if !cfg.ReadOutgoing {
		err := setsockoptInt(raw, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
		if errors.Is(err, unix.ENOPROTOOPT) {
			return fmt.Errorf("kernel lacks PACKET_IGNORE_OUTGOING (needs Linux 4.20+); set ReadOutgoing and filter own frames: %w", err)
		}
		if err != nil {
			return fmt.Errorf("set PACKET_IGNORE_OUTGOING: %w", err)
		}
	}
	size := cfg.RecvBuffer
	if size == 0 {
		size = DefaultRecvBuffer
	}
	if size > 0 {
		if err := setsockoptInt(raw, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size); err != nil {
			// Without CAP_NET_ADMIN; SO_RCVBUF is capped by rmem_max.
			if err := setsockoptInt(raw, unix.SOL_SOCKET, unix.SO_RCVBUF, size); err != nil {
				return fmt.Errorf("set receive buffer to %d bytes: %w", size, err)
			}
		}
	}
	if cfg.Promiscuous {
		if err := a.conn.SetPromiscuous(true); err != nil {
			return fmt.Errorf("set promiscuous: %w", err)
		}
	}
	return nil
}

func setsockoptInt(raw syscall.RawConn, level, opt, value int) error {
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), level, opt, value)
	}); err != nil {
		return err
	}
	return serr
}

// ReadFrame implements Link.
func (a *AFPacket) ReadFrame(buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, fmt.Errorf("afpacket %s: read: %w", a.name, errEmptyBuffer)
	}
	a.readMu.Lock()
	defer a.readMu.Unlock()
	for {
		a.rx.buf = buf
		err := a.raw.Read(a.rx.do)
		a.rx.buf = nil
		if a.closed.Load() {
			return 0, closedError(a.name, "read")
		}
		if err != nil {
			return 0, fmt.Errorf("afpacket %s: read: %w", a.name, err)
		}
		if a.rx.errno != 0 {
			return 0, fmt.Errorf("afpacket %s: recvfrom: %w", a.name, a.rx.errno)
		}
		if a.rx.n > len(buf) {
			a.ctr.rxTruncated.Add(1)
			continue
		}
		a.ctr.received(a.rx.n)
		return a.rx.n, nil
	}
}

// recv is the RawConn.Read callback. MSG_TRUNC makes the kernel report the
// whole frame length even when buf is shorter, which is how truncation is
// detected. The raw syscall avoids unix.Recvfrom's sockaddr allocation.
func (s *rxState) recv(fd uintptr) (done bool) {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd,
			uintptr(unsafe.Pointer(&s.buf[0])), uintptr(len(s.buf)),
			unix.MSG_TRUNC, 0, 0)
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // park on the poller until readable
		}
		s.n, s.errno = int(n), errno
		return true
	}
}

// WriteFrame implements Link. The socket is bound to the interface, so a
// plain write(2) sends; no destination address has to be built.
func (a *AFPacket) WriteFrame(frame []byte) error {
	if a.closed.Load() {
		a.ctr.txErrors.Add(1)
		return closedError(a.name, "write")
	}
	if len(frame) == 0 {
		a.ctr.txErrors.Add(1)
		return fmt.Errorf("afpacket %s: write: empty frame", a.name)
	}
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	a.tx.frame = frame
	err := a.raw.Write(a.tx.do)
	a.tx.frame = nil
	switch {
	case a.closed.Load():
		err = closedError(a.name, "write")
	case err != nil:
		err = fmt.Errorf("afpacket %s: write: %w", a.name, err)
	case a.tx.errno != 0:
		err = fmt.Errorf("afpacket %s: write %d bytes: %w", a.name, len(frame), a.tx.errno)
	}
	if err != nil {
		a.ctr.txErrors.Add(1)
		return err
	}
	a.ctr.sent(len(frame))
	return nil
}

// send is the RawConn.Write callback.
func (s *txState) send(fd uintptr) (done bool) {
	for {
		_, _, errno := unix.Syscall(unix.SYS_WRITE, fd,
			uintptr(unsafe.Pointer(&s.frame[0])), uintptr(len(s.frame)))
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // send buffer full: wait until writable
		}
		s.errno = errno
		return true
	}
}

// Close implements Link. It is idempotent.
func (a *AFPacket) Close() error {
	if a.closed.Swap(true) {
		return nil
	}
	if err := a.conn.Close(); err != nil {
		return fmt.Errorf("afpacket %s: close: %w", a.name, err)
	}
	return nil
}

// Name implements Link; it is the interface name.
func (a *AFPacket) Name() string { return a.name }

// Stats implements Link.
func (a *AFPacket) Stats() Stats { return a.ctr.snapshot() }

// KernelDrops returns the number of frames the kernel dropped because the
// receive buffer was full since the previous call (reading resets the
// kernel's counter).
func (a *AFPacket) KernelDrops() (uint64, error) {
	st, err := a.conn.Stats()
	if err != nil {
		return 0, fmt.Errorf("afpacket %s: stats: %w", a.name, err)
	}
	return uint64(st.Drops), nil
}
