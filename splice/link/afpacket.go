package link

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// DefaultRecvBuffer is the AF_PACKET receive buffer used when
// AFPacketConfig.RecvBuffer is zero. The kernel default (about 200 KiB)
// overflows under bulk TCP (docs/architecture.md §7).
const DefaultRecvBuffer = 4 << 20

// DefaultWriteWait is AFPacketConfig.WriteWait when it is zero: far
// longer than a busy device takes to make room, short enough that a
// daemon's keepalives (every second by default) still go out once the
// device transmits again.
const DefaultWriteWait = 100 * time.Millisecond

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
	// VNetHdr puts a virtio-net header (PACKET_VNET_HDR) in front of
	// every frame in both directions: the socket then reads the
	// interface's super-frames and partial checksums whole, with the
	// header saying so, and sends super-frames the kernel (or the NIC)
	// segments at the last moment. Receive buffers must then hold
	// MaxFrame bytes. Without it, frames read are what the interface
	// carries, so offloads should be off there (DisableOffloads), and
	// WriteBatch segments and checksums in software.
	VNetHdr bool
	// QdiscBypass sends straight to the driver (PACKET_QDISC_BYPASS),
	// skipping the interface's queueing discipline and its lock: a full
	// device queue then drops the frame instead of queueing it.
	QdiscBypass bool
	// Fanout makes the socket a member of a fanout group, one socket per
	// worker (see Fanout). Nil: the socket receives every frame.
	Fanout *Fanout
	// RxRing receives through a memory-mapped ring instead of recvmmsg
	// (see RingConfig): no system call while frames are waiting; a ring
	// of blocks also wakes the reader less often, but a frame can wait up
	// to its retire timeout before the socket becomes readable. Nil:
	// recvmmsg. RecvBuffer then bounds only the frames too long for a
	// ring's slot, which are queued whole.
	RxRing *RingConfig
	// WriteWait bounds how long a write waits for room in a full socket:
	// after it the frames not sent are dropped and the write returns
	// ErrNoRoom. A daemon's loop waits in its own Poller, never for ever
	// on one device: a guest NIC that stopped transmitting once held a
	// shim's loop in poll(2) for good, keepalives and all. Zero means
	// DefaultWriteWait; negative waits for ever.
	WriteWait time.Duration
	// TxRing sends through a memory-mapped transmit ring instead of
	// sendmmsg (see TxRingConfig). Nil: sendmmsg. It cannot be combined
	// with RxRing. If the kernel refuses the ring (TxRingError says why),
	// the socket sends with sendmmsg.
	TxRing *TxRingConfig
	// Protocol binds the socket to one EtherType (unix.ETH_P_IP,
	// unix.ETH_P_ARP) instead of every protocol (zero: ETH_P_ALL). Linux
	// hands a received frame to the sockets of every protocol (taps)
	// before the interface's tc ingress runs, and to those of one
	// protocol after it: such a socket does not read what a tc ingress
	// program redirected or dropped (the front-end's answered SYNs,
	// synanswer.go), nor, on an interface enslaved to a bridge or a
	// bond, anything at all (their handler takes the frame before the
	// protocols' turn).
	Protocol uint16
}

// AFPacket is a Link over a raw AF_PACKET socket bound to one interface.
// It is also a BatchLink: ReadBatch receives with recvmmsg(2), or from a
// memory-mapped ring with no system call at all (AFPacketConfig.RxRing),
// and WriteBatch sends with sendmmsg(2), one system call for many frames.
//
// ReadFrame and WriteFrame do not allocate: they run prebuilt closures
// on the raw descriptor. (mdlayher/packet's WriteTo allocates about nine
// times per call.) The descriptor is not registered with Go's netpoller
// (pollFD says why): only the loop's Poller watches it, and a ReadFrame
// that finds nothing blocks its thread in poll(2) until a frame arrives
// or Close. One ReadFrame and one WriteFrame may run at once; concurrent
// calls of the same method are serialised.
//
// Frames read between bind(2) and the PACKET_IGNORE_OUTGOING setsockopt can
// include an outgoing frame; open the link before sending.
//
// The socket is created with protocol 0, which receives nothing, gets its
// filter, and only then is bound to the interface and its protocol, so no
// unfiltered frame is ever queued. Every option set afterwards
// (PACKET_VNET_HDR, PACKET_QDISC_BYPASS, PACKET_FANOUT) is accepted on a
// bound socket, and the vnet header is built when a frame is read, not
// when it is queued, so no frame can arrive without one.
type AFPacket struct {
	name    string
	raw     *pollFD
	fd      int
	ifindex int
	vnet    bool
	closed  atomic.Bool
	ctr     counters
	readMu  sync.Mutex
	rx      rxState
	rxb     rxBatchState // ReadBatch, under readMu too
	pkt     wire.Packet  // ReadFrame's parse, under readMu
	writeMu sync.Mutex
	tx      txState
	batch   batchState // WriteFrames and WriteBatch, under writeMu too
	ring    *rxRing    // the receive ring, nil with recvmmsg; under readMu
	txr     *txRing    // the transmit ring, nil with sendmmsg; under writeMu
	txrErr  error      // why a transmit ring asked for is not in use
	// side sends what the transmit ring cannot take (see txring.go):
	// with a ring, sendmsg on the socket itself only flushes the ring.
	side *pollFD
	// later holds the frames queued for a poller's next wait
	// (sendring.go); nil until a poller sends with the link.
	later *ringSends
}

// rxState is the argument block of the prebuilt receive closure; the
// closure is created once so that ReadFrame does not allocate one per call.
// With vnet headers the header lands in hdr and the frame in the caller's
// buffer (two iovecs); without, msg points at the second iovec only.
type rxState struct {
	hdr   [wire.VNetHdrLen]byte
	iov   [2]unix.Iovec
	msg   unix.Msghdr
	hlen  int // vnet header bytes in front of each frame: 0 or VNetHdrLen
	n     int // frame length as reported with MSG_TRUNC, may exceed the buffer
	errno syscall.Errno
	do    func(fd uintptr) bool
}

// txState is the argument block of the prebuilt send closure, set up like
// rxState: a zero vnet header (a complete frame) in front when needed.
type txState struct {
	hdr   [wire.VNetHdrLen]byte
	iov   [2]unix.Iovec
	first int // index of the first iovec sent: 0 with vnet headers, else 1
	errno syscall.Errno
	do    func(fd uintptr) bool
}

var _ BatchLink = (*AFPacket)(nil)

// OpenAFPacket opens a raw AF_PACKET socket on ifname receiving every
// protocol (ETH_P_ALL), or one protocol after tc ingress
// (AFPacketConfig.Protocol). It needs CAP_NET_RAW and must run in the network
// namespace that owns the interface; the socket stays in that namespace.
func OpenAFPacket(ifname string, cfg AFPacketConfig) (*AFPacket, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("afpacket %s: %w", ifname, err)
	}
	proto := cfg.Protocol
	if proto == 0 {
		proto = unix.ETH_P_ALL
	}
	raw, err := openPacketSocket(ifi.Index, proto, cfg.Filter)
	if err != nil {
		return nil, fmt.Errorf("afpacket %s: %w", ifname, err)
	}
	a := &AFPacket{name: ifname, raw: raw, fd: raw.fd, ifindex: ifi.Index, vnet: cfg.VNetHdr}
	// A frame of the interface's MTU, behind an Ethernet header and a
	// VLAN tag: what a receive ring must hold (super-frames aside).
	mtuFrame := ifi.MTU + 18
	if err := a.configure(cfg, mtuFrame); err != nil {
		raw.Close()
		if a.ring != nil {
			a.ring.unmap() // the mapping keeps the socket alive
		}
		if a.txr != nil {
			a.txr.unmap()
		}
		if a.side != nil {
			a.side.Close()
		}
		return nil, fmt.Errorf("afpacket %s: %w", ifname, err)
	}
	wait := cfg.WriteWait
	if wait == 0 {
		wait = DefaultWriteWait
	}
	raw.writeWait = max(wait, 0)
	if a.side != nil {
		a.side.writeWait = raw.writeWait
	}
	first := 1
	if a.vnet {
		a.rx.hlen, first = wire.VNetHdrLen, 0
	}
	a.rx.iov[0].Base = &a.rx.hdr[0]
	a.rx.iov[0].SetLen(len(a.rx.hdr))
	a.rx.msg.Iov = &a.rx.iov[first]
	a.rx.msg.SetIovlen(len(a.rx.iov) - first)
	a.rx.do = a.rx.recv
	a.tx.iov[0].Base = &a.tx.hdr[0]
	a.tx.iov[0].SetLen(len(a.tx.hdr))
	a.tx.first = first
	a.tx.do = a.tx.send
	a.rxb.hlen = a.rx.hlen
	a.rxb.do = a.rxb.recvmmsg
	a.batch.vnet = a.vnet
	a.batch.do = a.batch.sendmmsg
	return a, nil
}

// openPacketSocket opens a raw AF_PACKET socket bound to the interface
// with index ifindex and protocol proto, with filter attached before the
// bind.
func openPacketSocket(ifindex int, proto uint16, filter []bpf.RawInstruction) (*pollFD, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	fail := func(what string, err error) (*pollFD, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(filter) > 0 {
		if err := attachFilter(fd, filter); err != nil {
			return fail("attach filter", err)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(proto), Ifindex: ifindex}); err != nil {
		return fail("bind", err)
	}
	p, err := newPollFD(fd)
	if err != nil {
		return fail("open", err)
	}
	return p, nil
}

// htons converts a 16-bit value to network byte order in memory, as
// sockaddr_ll's protocol field wants it.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (a *AFPacket) configure(cfg AFPacketConfig, mtuFrame int) error {
	raw := a.raw
	if cfg.VNetHdr {
		if err := setsockoptInt(raw, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
			return fmt.Errorf("set PACKET_VNET_HDR: %w", err)
		}
	}
	if cfg.QdiscBypass {
		if err := setsockoptInt(raw, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			return fmt.Errorf("set PACKET_QDISC_BYPASS: %w", err)
		}
	}
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
		mreq := unix.PacketMreq{Ifindex: int32(a.ifindex), Type: unix.PACKET_MR_PROMISC}
		var perr error
		if err := raw.Control(func(fd uintptr) {
			perr = unix.SetsockoptPacketMreq(int(fd), unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq)
		}); err != nil {
			return err
		}
		if err := perr; err != nil {
			return fmt.Errorf("set promiscuous: %w", err)
		}
	}
	if cfg.RxRing != nil {
		// After PACKET_VNET_HDR, which the kernel refuses once a ring
		// exists; before the fanout group, so no share of it is queued
		// outside the ring.
		var rerr error
		if err := raw.Control(func(fd uintptr) {
			a.ring, rerr = openRing(int(fd), *cfg.RxRing, cfg.VNetHdr, mtuFrame)
		}); err != nil {
			return err
		}
		if rerr != nil {
			return rerr
		}
	}
	if cfg.TxRing != nil {
		if cfg.RxRing != nil {
			return errors.New("a transmit ring cannot be combined with a receive ring")
		}
		tc, err := resolveTxRing(*cfg.TxRing, cfg.VNetHdr, mtuFrame)
		if err != nil {
			return err
		}
		if err := raw.Control(func(fd uintptr) {
			a.txr, a.txrErr = openTxRing(int(fd), tc, cfg.VNetHdr)
		}); err != nil {
			return err
		}
		if a.txr != nil {
			if a.side, err = openSideSocket(a.ifindex, cfg); err != nil {
				return fmt.Errorf("transmit ring: %w", err)
			}
		}
	}
	if cfg.Fanout != nil {
		// Last: once in the group the socket receives its share.
		var ferr error
		if err := raw.Control(func(fd uintptr) {
			ferr = joinFanout(int(fd), cfg.Fanout, !cfg.ReadOutgoing)
		}); err != nil {
			return err
		}
		return ferr
	}
	return nil
}

func setsockoptInt(raw *pollFD, level, opt, value int) error {
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
	if a.ring != nil {
		return a.readRingFrame(buf)
	}
	a.readMu.Lock()
	defer a.readMu.Unlock()
	for {
		a.rx.iov[1].Base = &buf[0]
		a.rx.iov[1].SetLen(len(buf))
		err := a.raw.Read(a.rx.do)
		a.rx.iov[1].Base = nil
		if a.closed.Load() {
			return 0, closedError(a.name, "read")
		}
		if err != nil {
			return 0, fmt.Errorf("afpacket %s: read: %w", a.name, err)
		}
		if a.rx.errno != 0 {
			return 0, fmt.Errorf("afpacket %s: recvmsg: %w", a.name, a.rx.errno)
		}
		n := a.rx.n
		if n > len(buf) {
			a.ctr.rxTruncated.Add(1)
			continue
		}
		if a.vnet {
			h, _ := wire.DecodeVNetHdr(a.rx.hdr[:])
			if err := completeFrame(buf[:n], h, &a.pkt); err != nil {
				return 0, fmt.Errorf("afpacket %s: read: %w", a.name, err)
			}
		}
		a.ctr.received(n)
		return n, nil
	}
}

// recv is the RawConn.Read callback. MSG_TRUNC makes the kernel report the
// whole frame length even when the buffer is shorter, which is how
// truncation is detected. The raw syscall avoids the allocations of
// unix.Recvfrom and unix.RecvmsgBuffers.
func (s *rxState) recv(fd uintptr) (done bool) {
	for {
		n, _, errno := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&s.msg)), unix.MSG_TRUNC)
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // wait (pollFD: poll(2)) until readable
		}
		s.n, s.errno = int(n)-s.hlen, errno
		return true
	}
}

// WriteFrame implements Link. The socket is bound to the interface, so a
// plain write(2) sends; no destination address has to be built. On a
// socket with vnet headers the frame goes behind a zero header, so it
// must be complete: no super-frame, no partial checksum (WriteBatch takes
// those).
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
	a.tx.iov[1].Base = &frame[0]
	a.tx.iov[1].SetLen(len(frame))
	err := a.sendFD().Write(a.tx.do)
	a.tx.iov[1].Base = nil
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
		_, _, errno := unix.Syscall(unix.SYS_WRITEV, fd,
			uintptr(unsafe.Pointer(&s.iov[s.first])), uintptr(len(s.iov)-s.first))
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
	err := a.raw.Close()
	if a.ring != nil {
		// After the close, which wakes a ReadFrame parked with readMu
		// held; the socket itself goes away with its mapping.
		a.readMu.Lock()
		if uerr := a.ring.unmap(); err == nil {
			err = uerr
		}
		a.readMu.Unlock()
	}
	if a.side != nil {
		if cerr := a.side.Close(); err == nil {
			err = cerr
		}
	}
	if a.txr != nil {
		a.writeMu.Lock()
		if uerr := a.txr.unmap(); err == nil {
			err = uerr
		}
		a.writeMu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("afpacket %s: close: %w", a.name, err)
	}
	return nil
}

// FD implements BatchLink.
func (a *AFPacket) FD() int { return a.fd }

// VNetHdr implements BatchLink.
func (a *AFPacket) VNetHdr() bool { return a.vnet }

// Name implements Link; it is the interface name.
func (a *AFPacket) Name() string { return a.name }

// Stats implements Link.
func (a *AFPacket) Stats() Stats { return a.ctr.snapshot() }

// KernelDrops returns the number of frames the kernel dropped because the
// receive buffer was full since the previous call (reading resets the
// kernel's counter).
func (a *AFPacket) KernelDrops() (uint64, error) {
	var st *unix.TpacketStats
	var serr error
	if err := a.raw.Control(func(fd uintptr) {
		st, serr = unix.GetsockoptTpacketStats(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS)
	}); err != nil {
		serr = err
	}
	if serr != nil {
		return 0, fmt.Errorf("afpacket %s: stats: %w", a.name, serr)
	}
	return uint64(st.Drops), nil
}

// attachFilter attaches the classic BPF program filter to socket fd.
func attachFilter(fd int, filter []bpf.RawInstruction) error {
	prog := make([]unix.SockFilter, len(filter))
	for i, ins := range filter {
		prog[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog)
}
