package link

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// The transmit ring: AF_PACKET's PACKET_TX_RING (TPACKET_V2,
// Documentation/networking/packet_mmap.rst), an alternative to sendmmsg
// behind the same WriteBatch.
//
// The ring is memory shared with the kernel, cut into slots. WriteBatch
// copies each frame (behind its virtio-net header, on a socket with vnet
// headers) into the next free slot and marks it TP_STATUS_SEND_REQUEST;
// one send(2) with no data then hands every marked slot to the kernel,
// which builds each skb around the slot's pages instead of copying from
// an iovec, marks the slot TP_STATUS_SENDING, and TP_STATUS_AVAILABLE
// again once the skb is freed. So a batch costs one system call, as with
// sendmmsg, and the kernel skips the per-message msghdr and iovec work
// and the copy; the copy into the slot is made in userspace instead.
//
// Where the pages go matters: a NIC sends them by DMA and nothing is
// copied again, but a veth (the lab's wire) forwards the skb into another
// namespace and must copy its pages first (skb_orphan_frags), because the
// slot is handed back to userspace while the frame may still sit in a
// receiver's queue. On a veth the ring therefore copies once in userspace
// and once in the kernel, where sendmmsg copies once; BenchmarkTxRingBump
// measures which is cheaper, and the daemons' -tx-ring flag picks.
//
// A slot holds one frame of up to TxRingConfig.FrameSize bytes (a
// super-frame of MaxFrame with vnet headers). A frame that does not fit,
// or that finds the next slot still in flight (the ring is full: the
// device has not released enough of what was sent), goes out with
// sendmmsg after what the ring holds, so a full ring neither drops nor
// spins. Not on the ring's own socket, though: once it has a transmit
// ring, sendmsg(2) on it only flushes the ring and ignores the data it
// is given. A second socket, bound to the same interface but receiving
// nothing, carries those frames and WriteFrame's; the kernel queues its
// frames behind the ring's, which were handed over first. Nothing tells
// a writer when a slot comes back except POLLOUT, which the socket also
// reports whenever its send buffer has room, so waiting for a slot could
// only spin; sending the overflow elsewhere avoids the wait. A slot's layout: struct tpacket2_hdr (tp_status, tp_len), then at
// txDataOff the vnet header (if any) and the frame; tp_len counts both.
//
// Errors keep WriteBatch's contract: the kernel stops at a slot it
// refuses (TP_STATUS_WRONG_FORMAT, send returns the error) and leaves its
// ring head there; WriteBatch hands that slot and the ones after it back
// (they were not sent), reports the refused frame's index, and the next
// frame written goes into the refused slot, where the kernel looks next.

// TxRingConfig asks OpenAFPacket for a transmit ring
// (AFPacketConfig.TxRing). The zero value takes the defaults.
type TxRingConfig struct {
	// Frames is the number of slots: how many frames can be queued or in
	// flight at once before WriteBatch falls back to sendmmsg. Zero:
	// DefaultTxRingFrames.
	Frames int
	// FrameSize is the largest frame a slot holds itself (a longer one
	// is sent with sendmmsg). Zero: MaxFrame on a socket with vnet
	// headers, the interface's MTU plus its headers without.
	FrameSize int
}

// DefaultTxRingFrames is 64 slots: two of the daemons' 32-frame batches,
// 4.4 MiB of ring for super-frames.
const DefaultTxRingFrames = 64

// txDataOff is where a TPACKET_V2 transmit slot's data starts when
// PACKET_TX_HAS_OFF is off: TPACKET2_HDRLEN - sizeof(struct sockaddr_ll).
const txDataOff = 32

// statusBusy are the tp_status bits that keep a slot from the writer: not
// yet sent, in flight, or refused. The others are timestamp flags.
const statusBusy = unix.TP_STATUS_SEND_REQUEST | unix.TP_STATUS_SENDING | unix.TP_STATUS_WRONG_FORMAT

// txRing is the writer's side of a mapped transmit ring; it belongs to
// WriteBatch (under AFPacket.writeMu).
type txRing struct {
	mem       []byte
	cfg       TxRingConfig
	slotSize  int
	perBlock  int
	blockSize int
	slots     int
	hlen      int // vnet header bytes before each frame: 0 or VNetHdrLen
	// cur is the next slot to fill; the pending slots before it (the
	// oldest is first) are marked SEND_REQUEST and not yet handed to
	// the kernel by a send.
	cur, first, pending int
	owner               []int // per slot: the caller's frame it carries
	length              []int // per slot: the frame's length
	kicks               atomic.Uint64
	overflow            atomic.Uint64 // frames sent with sendmmsg instead
	errno               syscall.Errno
	do                  func(fd uintptr) bool
}

// TxRingStats counts what a transmit ring did.
type TxRingStats struct {
	// Kicks is the number of send(2) calls that handed slots over.
	Kicks uint64
	// Overflow counts the frames that went out with sendmmsg because
	// they did not fit a slot or the next slot was still in flight.
	Overflow uint64
}

// resolveTxRing fills in cfg's defaults and checks them.
func resolveTxRing(cfg TxRingConfig, vnet bool, mtuFrame int) (TxRingConfig, error) {
	if cfg.FrameSize == 0 {
		cfg.FrameSize = mtuFrame
		if vnet {
			cfg.FrameSize = MaxFrame
		}
	}
	if cfg.FrameSize < 64 || cfg.FrameSize > MaxFrame {
		return cfg, fmt.Errorf("transmit ring slots for frames of %d bytes: want 64 to %d", cfg.FrameSize, MaxFrame)
	}
	if cfg.Frames == 0 {
		cfg.Frames = DefaultTxRingFrames
	}
	if cfg.Frames < 1 || cfg.Frames > 1<<16 {
		return cfg, fmt.Errorf("transmit ring of %d slots: want 1 to 65536", cfg.Frames)
	}
	return cfg, nil
}

// openTxRing sets up and maps a transmit ring of cfg (resolved) on the
// bound socket fd. PACKET_VNET_HDR must already be set, if at all. An
// error means the kernel cannot give this socket the ring; the socket
// still sends with sendmmsg.
func openTxRing(fd int, cfg TxRingConfig, vnet bool) (*txRing, error) {
	hlen := 0
	if vnet {
		hlen = wire.VNetHdrLen
		if !kernelAtLeast(4, 11) {
			// Older kernels send a transmit slot's bytes as they are:
			// the vnet header would go out as the frame's first bytes.
			return nil, errors.New("the kernel's transmit ring takes no virtio-net headers (needs Linux 4.11+)")
		}
	}
	page := os.Getpagesize()
	slot := (txDataOff + hlen + cfg.FrameSize + 15) &^ 15
	// A block is the smallest number of pages holding a slot; small
	// slots are packed into blocks of at least 64 KiB.
	block := (slot + page - 1) / page * page
	if block < 64<<10 {
		block = 64 << 10
	}
	perBlock := block / slot
	blocks := (cfg.Frames + perBlock - 1) / perBlock
	t := &txRing{cfg: cfg, slotSize: slot, perBlock: perBlock, blockSize: block, slots: blocks * perBlock, hlen: hlen}
	t.cfg.Frames = t.slots
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return nil, fmt.Errorf("set PACKET_VERSION to TPACKET_V2: %w", err)
	}
	req := unix.TpacketReq{Block_size: uint32(block), Block_nr: uint32(blocks), Frame_size: uint32(slot), Frame_nr: uint32(t.slots)}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
		return nil, fmt.Errorf("set PACKET_TX_RING (%d slots of %d bytes): %w", t.slots, slot, err)
	}
	mem, err := unix.Mmap(fd, 0, block*blocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map the transmit ring: %w", err)
	}
	t.mem = mem
	t.owner = make([]int, t.slots)
	t.length = make([]int, t.slots)
	t.do = t.kick
	return t, nil
}

// kernelAtLeast reports whether the running kernel's release is at
// least major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var ma, mi int
	if _, err := fmt.Sscanf(strings.TrimRight(string(u.Release[:]), "\x00"), "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

func (t *txRing) unmap() error {
	if t.mem == nil {
		return nil
	}
	err := unix.Munmap(t.mem)
	t.mem = nil
	return err
}

func (t *txRing) slotOffset(i int) int { return i/t.perBlock*t.blockSize + i%t.perBlock*t.slotSize }

func (t *txRing) status(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&t.mem[t.slotOffset(i)]))
}

func (t *txRing) next(i int) int {
	if i++; i == t.slots {
		return 0
	}
	return i
}

// put copies frame, behind h on a socket with vnet headers, into the
// next slot and marks it for sending. It returns false, leaving the ring
// as it was, when the frame does not fit a slot or the slot is busy.
func (t *txRing) put(frame []byte, h wire.VNetHdr, owner int) bool {
	if len(frame) > t.cfg.FrameSize || t.pending == t.slots {
		return false
	}
	st := t.status(t.cur)
	if atomic.LoadUint32(st)&statusBusy != 0 {
		return false
	}
	off := t.slotOffset(t.cur)
	data := t.mem[off+txDataOff : off+t.slotSize]
	if t.hlen > 0 {
		h.Encode(data)
	}
	copy(data[t.hlen:], frame)
	// tp_len, then the status: the atomic store orders the bytes before
	// it, and the kernel reads them only after seeing SEND_REQUEST.
	*(*uint32)(unsafe.Pointer(&t.mem[off+slotLenOff])) = uint32(t.hlen + len(frame))
	t.owner[t.cur], t.length[t.cur] = owner, len(frame)
	atomic.StoreUint32(st, unix.TP_STATUS_SEND_REQUEST)
	if t.pending == 0 {
		t.first = t.cur
	}
	t.pending++
	t.cur = t.next(t.cur)
	return true
}

// taken moves first past the pending slots the kernel took (now in
// flight or already done), returning how many, and their bytes in n.
func (t *txRing) taken(sent func(n int)) {
	for t.pending > 0 && atomic.LoadUint32(t.status(t.first))&(unix.TP_STATUS_SEND_REQUEST|unix.TP_STATUS_WRONG_FORMAT) == 0 {
		sent(t.length[t.first])
		t.first = t.next(t.first)
		t.pending--
	}
}

// kick is the RawConn.Write callback: send(2) with no data hands every
// marked slot to the kernel, which goes through them in order. When its
// socket buffer is full it takes none (EAGAIN) or stops after some
// without an error; kick then asks to wait for room. An error leaves the
// refused slot first in line.
func (t *txRing) kick(fd uintptr) (done bool) {
	for {
		_, _, errno := unix.Syscall6(unix.SYS_SENDTO, fd, 0, 0, unix.MSG_DONTWAIT, 0, 0)
		t.kicks.Add(1)
		switch errno {
		case 0:
			return !t.lastWaiting()
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			t.errno = errno
			return true
		}
	}
}

// lastWaiting reports whether the last slot filled is still marked for
// sending: if any slot is, that one is, as the kernel goes in order.
func (t *txRing) lastWaiting() bool {
	if t.pending == 0 {
		return false
	}
	last := t.cur - 1
	if last < 0 {
		last = t.slots - 1
	}
	return atomic.LoadUint32(t.status(last))&unix.TP_STATUS_SEND_REQUEST != 0
}

// revoke hands the pending slots back unsent (after a refusal) and
// rewinds cur to the oldest, the slot the kernel's head points at.
func (t *txRing) revoke() {
	t.cur = t.first
	for i := t.first; t.pending > 0; i = t.next(i) {
		atomic.StoreUint32(t.status(i), unix.TP_STATUS_AVAILABLE)
		t.pending--
	}
}

// flushRing hands the ring's marked slots to the kernel. On a refusal it
// returns the caller's frame refused (every earlier one went) and takes
// the later ones back unsent.
func (a *AFPacket) flushRing() (failed int, err error) {
	t := a.txr
	if t.pending == 0 {
		return -1, nil
	}
	t.errno = 0
	err = a.raw.Write(t.do)
	t.taken(a.ctr.sent)
	failed = -1
	if t.pending > 0 {
		failed = t.owner[t.first]
	}
	switch {
	case a.closed.Load():
		err = closedError(a.name, "write")
	case err != nil:
		err = fmt.Errorf("afpacket %s: write: %w", a.name, err)
	case t.errno != 0:
		err = fmt.Errorf("afpacket %s: transmit ring frame of %d bytes: %w", a.name, t.length[t.first], t.errno)
	case t.pending > 0:
		err = fmt.Errorf("afpacket %s: transmit ring: the kernel left %d frames unsent", a.name, t.pending)
	}
	if t.pending > 0 {
		t.revoke()
	}
	return failed, err
}

// TxRing reports the transmit ring's configuration with the defaults
// filled in, and false when the link sends with sendmmsg.
func (a *AFPacket) TxRing() (TxRingConfig, bool) {
	if a.txr == nil {
		return TxRingConfig{}, false
	}
	return a.txr.cfg, true
}

// TxRingStats reports what the transmit ring did; zero without one.
func (a *AFPacket) TxRingStats() TxRingStats {
	if a.txr == nil {
		return TxRingStats{}
	}
	return TxRingStats{Kicks: a.txr.kicks.Load(), Overflow: a.txr.overflow.Load()}
}

// TxRingFlagUsage describes ParseTxRingFlag's syntax for a daemon's
// -tx-ring.
const TxRingFlagUsage = `send on the wire with: "off" (sendmmsg) or "on" (a TPACKET_V2 transmit ring: frames copied into shared memory, one send(2) per batch)`

// ParseTxRingFlag parses a daemon's -tx-ring value: nil for "off" or "",
// else the ring to ask for.
func ParseTxRingFlag(s string) (*TxRingConfig, error) {
	switch s {
	case "", "off":
		return nil, nil
	case "on":
		return &TxRingConfig{}, nil
	}
	return nil, fmt.Errorf("tx-ring %q: want on or off", s)
}

// openSideSocket opens the socket that sends what the transmit ring
// cannot take: bound to the interface with protocol 0, it receives
// nothing; it sends with the same vnet headers and qdisc setting.
func openSideSocket(ifindex int, cfg AFPacketConfig) (*pollFD, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("side socket: %w", err)
	}
	fail := func(what string, err error) (*pollFD, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("side socket: %s: %w", what, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifindex}); err != nil {
		return fail("bind", err)
	}
	if cfg.VNetHdr {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
			return fail("set PACKET_VNET_HDR", err)
		}
	}
	if cfg.QdiscBypass {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			return fail("set PACKET_QDISC_BYPASS", err)
		}
	}
	p, err := newPollFD(fd)
	if err != nil {
		return fail("open", err)
	}
	return p, nil
}

// sendFD is the socket sendmmsg and WriteFrame send on.
func (a *AFPacket) sendFD() *pollFD {
	if a.side != nil {
		return a.side
	}
	return a.raw
}

// TxRingError says why the transmit ring AFPacketConfig.TxRing asked for
// is not in use (the kernel refused it; the link sends with sendmmsg),
// or nil.
func (a *AFPacket) TxRingError() error { return a.txrErr }

// queue adds frame (the caller's frame owner, or a segment of it) to
// what the next flush sends: into the transmit ring when the link has
// one and a slot is free, else as a sendmmsg message. Frames leave in
// the order queued: a frame of one kind is queued only once everything
// of the other kind went.
func (a *AFPacket) queue(frame []byte, h wire.VNetHdr, owner int) (failed int, err error) {
	b := &a.batch
	if t := a.txr; t != nil {
		if b.count > 0 {
			if failed, err := a.flushMsgs(); err != nil {
				return failed, err
			}
		}
		if t.put(frame, h, owner) {
			return -1, nil
		}
		if t.pending > 0 {
			// The ring is full of frames not handed over yet, or this
			// frame does not fit a slot: either way they go first.
			if failed, err := a.flushRing(); err != nil {
				return failed, err
			}
			if t.put(frame, h, owner) {
				return -1, nil
			}
		}
		t.overflow.Add(1) // in flight all round, or too long for a slot
	}
	if b.count == maxBatch {
		if failed, err := a.flushMsgs(); err != nil {
			return failed, err
		}
	}
	b.add(frame, h, owner)
	return -1, nil
}

// flush sends what queue queued (of one kind only, see queue).
func (a *AFPacket) flush() (failed int, err error) {
	if a.txr != nil && a.txr.pending > 0 {
		return a.flushRing()
	}
	return a.flushMsgs()
}
