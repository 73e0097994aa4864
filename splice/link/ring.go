package link

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// The receive ring: AF_PACKET's memory-mapped rings
// (Documentation/networking/packet_mmap.rst), an alternative to recvmmsg.
// The kernel copies each frame it hands the socket into memory shared
// with this process and marks it as the reader's; ReadBatch copies the
// frames out into the caller's Batch and hands their memory back: frames
// that are waiting cost no system call. Two kinds:
//
// RingBlocks (TPACKET_V3) packs frames one after the other into blocks
// and gives a block to userspace ("retires" it) when the next frame does
// not fit or when the block has been open for the retire timeout,
// whichever comes first. The socket becomes readable (poll, epoll) only
// then: one wake-up per block. The price is latency: a frame that does
// not fill its block waits for the retire timeout, at least a
// millisecond, before anyone can see it. Under a steady stream of large
// frames blocks fill and retire on their own; a lone frame (a SYN, the
// request, the last ACK of a burst) waits the whole timeout.
//
// RingSlots (TPACKET_V2) gives each frame a slot of its own and hands it
// over as soon as it is filled, waking the reader as recvmmsg does: no
// added latency, and one system call less per wake-up than recvmmsg (the
// read itself). Slots are sized for the interface's MTU, so that a ring
// of a few MiB holds thousands of frames, as a socket buffer does; a
// larger frame (a super-frame, with vnet headers) is marked
// TP_STATUS_COPY in its slot and also queued whole on the socket
// (PACKET_COPY_THRESH), where the reader fetches it with one recvmsg.
//
// Which is better depends on the traffic; BenchmarkRingBump and the
// daemons' -rx-ring flags measure them against recvmmsg.
//
// Layout, from <linux/if_packet.h>. A RingBlocks block begins with struct
// tpacket_block_desc, whose tpacket_hdr_v1 says whose block it is
// (block_status: TP_STATUS_USER once retired, TP_STATUS_KERNEL once handed
// back), how many frames it holds and where the first one starts. Each
// frame begins with struct tpacket3_hdr: the offset of the next frame,
// the captured and the original length, and where the Ethernet header
// starts (tp_mac, from the frame's own header). On a socket with
// PACKET_VNET_HDR the kernel writes the frame's virtio-net header in the
// VNetHdrLen bytes just before tp_mac (tpacket_rcv reserves them when it
// computes the offsets); TestRingVNetHeaderSitsBeforeTheFrame checks that
// on the running kernel. A RingSlots slot begins with struct tpacket2_hdr,
// whose tp_status says whose slot it is, and is otherwise laid out the
// same way.

// RingKind says how a receive ring hands frames over.
type RingKind uint8

const (
	// RingBlocks is TPACKET_V3: frames packed into blocks, a block handed
	// over when full or after the retire timeout.
	RingBlocks RingKind = iota
	// RingSlots is TPACKET_V2: a slot per frame, handed over at once.
	RingSlots
)

func (k RingKind) String() string {
	switch k {
	case RingBlocks:
		return "blocks"
	case RingSlots:
		return "slots"
	}
	return fmt.Sprintf("RingKind(%d)", uint8(k))
}

// RingConfig asks OpenAFPacket for a receive ring (AFPacketConfig.RxRing).
// The zero value is a RingBlocks ring with the defaults.
type RingConfig struct {
	Kind RingKind
	// BlockSize is the size of one block in bytes, a multiple of the
	// page size. A RingBlocks block must hold the largest frame the
	// socket can receive (MaxFrame with vnet headers, the interface's MTU
	// plus its headers without) plus ringBlockOverhead; RingSlots blocks
	// are cut into slots of FrameSize plus ringSlotOverhead bytes, as
	// many as fit. Zero picks DefaultRingBlockSize (RingBlocks) or
	// DefaultRingSlotBlockSize (RingSlots), or the smallest power of two
	// above that holds a frame (1 MiB for slots of super-frames: two do
	// not fit in 128 KiB, and the kernel allocates blocks in powers of
	// two).
	BlockSize int
	// FrameSize (RingSlots only) is the largest frame a slot holds
	// itself; a longer one is queued whole on the socket and fetched with
	// recvmsg. Zero: the interface's MTU plus its headers. MaxFrame puts
	// super-frames in the ring too, at 64 KiB of ring per frame whatever
	// its size.
	FrameSize int
	// Blocks is the number of blocks. Zero picks enough for
	// DefaultRecvBuffer bytes, at least 8.
	Blocks int
	// RetireTimeout (RingBlocks only) is how long the kernel keeps a
	// block that is not full before handing it over anyway: the longest
	// a frame can wait in the ring. The kernel counts whole milliseconds,
	// so it is rounded up; zero means DefaultRingRetireTimeout.
	RetireTimeout time.Duration
}

const (
	// DefaultRingBlockSize holds one super-frame of MaxFrame bytes with
	// its headers, or many MTU-sized frames.
	DefaultRingBlockSize = 128 << 10
	// DefaultRingRetireTimeout is the shortest timeout the kernel takes.
	DefaultRingRetireTimeout = time.Millisecond
	// DefaultRingSlotBlockSize is cut into 40 slots for a 1500-byte MTU.
	DefaultRingSlotBlockSize = 64 << 10
)

// Offsets into the kernel's structures (<linux/if_packet.h>).
const (
	blockStatusOff   = 8  // tpacket_block_desc.hdr.bh1.block_status
	blockNumPktsOff  = 12 // ... .num_pkts
	blockFirstPktOff = 16 // ... .offset_to_first_pkt
	blockDescLen     = 48 // sizeof(struct tpacket_block_desc)

	slotLenOff     = 4  // tpacket2_hdr.tp_len (tp_status is at 0)
	slotSnaplenOff = 8  // tp_snaplen
	slotMacOff     = 12 // tp_mac
	slotHdrLen     = 32 // sizeof(struct tpacket2_hdr)

	frameNextOff    = 0  // tpacket3_hdr.tp_next_offset
	frameSnaplenOff = 12 // tp_snaplen
	frameLenOff     = 16 // tp_len
	frameMacOff     = 24 // tp_mac
	frameHdrLen     = 48 // sizeof(struct tpacket3_hdr)

	// ringFrameOverhead bounds what a frame costs in a block besides its
	// own bytes: tpacket3_hdr, sockaddr_ll, the virtio-net header and
	// alignment (92 bytes on Linux 6 with vnet headers).
	ringFrameOverhead = 128
	// ringBlockOverhead is what a block needs besides one frame's bytes.
	ringBlockOverhead = blockDescLen + ringFrameOverhead
	// ringSlotOverhead bounds what a slot needs besides its frame's
	// bytes: tpacket2_hdr, sockaddr_ll, the virtio-net header and
	// alignment (76 bytes on Linux 6 with vnet headers).
	ringSlotOverhead = 96
)

// ErrRingCorrupt is returned when a block or slot the kernel handed over
// does not describe its frames consistently. It never happens with a
// kernel that keeps the layout this file reads, so it is reported rather
// than counted: the block (slot) is handed back, its frames lost, and the
// next read goes on with the next one.
var ErrRingCorrupt = errors.New("receive ring block is inconsistent")

// rxRing is the reader's side of a mapped ring. The reader takes blocks
// (RingBlocks) or slots (RingSlots) in the order the kernel fills them,
// starting at the first.
type rxRing struct {
	mem       []byte // the mapping; nil once unmapped
	cfg       RingConfig
	blockSize int
	blocks    int
	vnet      bool
	// RingSlots: slotSize bytes per slot, perBlock slots per block,
	// slots in all; zero for RingBlocks.
	slotSize, perBlock, slots int
	cur                       int // the block (slot) read next
	// copied receives a frame the kernel queued whole because it did not
	// fit its slot (TP_STATUS_COPY): recvmsg into hdr (its vnet header)
	// and the caller's buffer. queued counts them.
	copied ringCopy
	queued uint64
	// left counts the frames of block cur not yet passed; it is nonzero
	// exactly while block cur belongs to the reader, and then next is
	// the offset in mem of the next frame's tpacket3_hdr. With slots it
	// is 1 from peek to advance.
	left int
	next int
	// wait is ReadFrame's RawConn.Read callback, built once: it reports
	// whether a frame is waiting (else the caller parks on the poller
	// until the kernel retires a block).
	wait func(fd uintptr) bool
}

// ringFrame is a frame still in the ring's memory, valid until advance.
type ringFrame struct {
	data  []byte // the bytes captured, capacity capped at their length
	vnet  []byte // the virtio-net header before them, nil without
	whole bool   // nothing was cut: tp_snaplen == tp_len
	// queued: the slot holds the start of a frame that did not fit; the
	// whole frame waits on the socket's queue (ringCopy).
	queued bool
}

// ringCopy is the argument block of the prebuilt recvmsg closure that
// fetches a frame queued whole (TP_STATUS_COPY). It never parks: the
// frame was queued before its slot was handed over.
type ringCopy struct {
	hdr   [wire.VNetHdrLen]byte
	iov   [2]unix.Iovec
	msg   unix.Msghdr
	hlen  int
	n     int // the frame's whole length (MSG_TRUNC)
	errno syscall.Errno
	do    func(fd uintptr) bool
}

func (c *ringCopy) init(vnet bool) {
	first := 1
	if vnet {
		c.hlen, first = wire.VNetHdrLen, 0
	}
	c.iov[0].Base = &c.hdr[0]
	c.iov[0].SetLen(len(c.hdr))
	c.msg.Iov = &c.iov[first]
	c.msg.SetIovlen(len(c.iov) - first)
	c.do = c.recv
}

func (c *ringCopy) recv(fd uintptr) bool {
	for {
		n, _, errno := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&c.msg)), unix.MSG_TRUNC|unix.MSG_DONTWAIT)
		if errno == unix.EINTR {
			continue
		}
		c.n, c.errno = int(n)-c.hlen, errno
		return true
	}
}

// fetchQueued receives the frame queued whole for the current slot into
// buf. It returns the frame's length, which exceeds len(buf) when the
// frame did not fit (it is then dropped), and its vnet header.
func (a *AFPacket) fetchQueued(buf []byte) (int, wire.VNetHdr, error) {
	c := &a.ring.copied
	c.iov[1].Base = &buf[0]
	c.iov[1].SetLen(len(buf))
	err := a.raw.Read(c.do)
	c.iov[1].Base = nil
	switch {
	case a.closed.Load():
		return 0, wire.VNetHdr{}, closedError(a.name, "read")
	case err != nil:
		return 0, wire.VNetHdr{}, err
	case c.errno == unix.EAGAIN:
		return 0, wire.VNetHdr{}, fmt.Errorf("%w: a slot says its frame was queued whole, and none is", ErrRingCorrupt)
	case c.errno != 0:
		return 0, wire.VNetHdr{}, fmt.Errorf("recvmsg: %w", c.errno)
	}
	var h wire.VNetHdr
	if c.hlen > 0 {
		h, _ = wire.DecodeVNetHdr(c.hdr[:])
	}
	a.ring.queued++
	return c.n, h, nil
}

// slotSize is the size of a RingSlots slot for frames of up to largest
// bytes, a multiple of TPACKET_ALIGNMENT.
func slotSize(largest int) int { return (largest + ringSlotOverhead + 15) &^ 15 }

// resolveRing fills in cfg's defaults and checks it against the frames
// the socket may receive: mtuFrame bytes, or MaxFrame with vnet headers.
func resolveRing(cfg RingConfig, vnet bool, mtuFrame int) (RingConfig, error) {
	page := os.Getpagesize()
	largest := mtuFrame
	if vnet {
		largest = MaxFrame
	}
	need, size := largest+ringBlockOverhead, DefaultRingBlockSize
	switch cfg.Kind {
	case RingBlocks:
		if cfg.FrameSize != 0 {
			return cfg, errors.New("a ring of blocks packs frames of any size: it has no frame size")
		}
	case RingSlots:
		if cfg.FrameSize == 0 {
			cfg.FrameSize = mtuFrame // a larger one is queued whole
		}
		if cfg.FrameSize < 64 || cfg.FrameSize > MaxFrame {
			return cfg, fmt.Errorf("ring slots for frames of %d bytes: want 64 to %d", cfg.FrameSize, MaxFrame)
		}
		largest = cfg.FrameSize
		need, size = slotSize(largest), DefaultRingSlotBlockSize
		if need > 64<<10 {
			size = 1 << 20
		}
		if cfg.RetireTimeout != 0 {
			return cfg, errors.New("a ring of slots hands each frame over at once: it has no retire timeout")
		}
	default:
		return cfg, fmt.Errorf("unknown ring kind %d", cfg.Kind)
	}
	if cfg.BlockSize == 0 {
		cfg.BlockSize = size
		for cfg.BlockSize < need {
			cfg.BlockSize *= 2
		}
	}
	if cfg.BlockSize <= 0 || cfg.BlockSize%page != 0 {
		return cfg, fmt.Errorf("ring block size %d is not a multiple of the page size %d", cfg.BlockSize, page)
	}
	if cfg.BlockSize < need {
		return cfg, fmt.Errorf("ring block size %d cannot hold a frame of %d bytes (needs %d)", cfg.BlockSize, largest, need)
	}
	if cfg.Blocks == 0 {
		cfg.Blocks = max(8, DefaultRecvBuffer/cfg.BlockSize)
	}
	if cfg.Kind == RingSlots {
		return cfg, nil
	}
	if cfg.Blocks < 1 || cfg.Blocks > 1<<16 {
		return cfg, fmt.Errorf("ring of %d blocks: want 1 to 65536", cfg.Blocks)
	}
	if cfg.RetireTimeout == 0 {
		cfg.RetireTimeout = DefaultRingRetireTimeout
	}
	if cfg.RetireTimeout < 0 || cfg.RetireTimeout > time.Minute {
		return cfg, fmt.Errorf("ring retire timeout %v: want up to a minute", cfg.RetireTimeout)
	}
	if ms := cfg.RetireTimeout / time.Millisecond; cfg.RetireTimeout%time.Millisecond != 0 {
		cfg.RetireTimeout = (ms + 1) * time.Millisecond
	}
	return cfg, nil
}

// openRing turns the bound socket fd into a ring reader:
// version, ring, mapping, and then the frames that were queued the
// ordinary way before the ring existed are discarded. Without that they
// would keep the socket readable forever (poll reports the ordinary
// queue too) while ReadBatch, which reads only the ring, finds nothing.
// PACKET_VNET_HDR must be set before, if at all: the kernel refuses it
// once a ring exists.
func openRing(fd int, cfg RingConfig, vnet bool, mtuFrame int) (*rxRing, error) {
	cfg, err := resolveRing(cfg, vnet, mtuFrame)
	if err != nil {
		return nil, err
	}
	r := &rxRing{cfg: cfg, blockSize: cfg.BlockSize, blocks: cfg.Blocks, vnet: vnet}
	r.copied.init(vnet)
	if cfg.Kind == RingSlots {
		r.slotSize = slotSize(cfg.FrameSize)
		r.perBlock = cfg.BlockSize / r.slotSize
		r.slots = r.perBlock * cfg.Blocks
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
			return nil, fmt.Errorf("set PACKET_VERSION to TPACKET_V2: %w", err)
		}
		req := unix.TpacketReq{
			Block_size: uint32(cfg.BlockSize),
			Block_nr:   uint32(cfg.Blocks),
			Frame_size: uint32(r.slotSize),
			Frame_nr:   uint32(r.slots),
		}
		if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return nil, fmt.Errorf("set PACKET_RX_RING (%d slots of %d bytes): %w", r.slots, r.slotSize, err)
		}
	} else {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
			return nil, fmt.Errorf("set PACKET_VERSION to TPACKET_V3: %w", err)
		}
		req := unix.TpacketReq3{
			Block_size: uint32(cfg.BlockSize),
			Block_nr:   uint32(cfg.Blocks),
			// TPACKET_V3 frames have no fixed size; the kernel only
			// checks that frames_per_block * Block_nr == Frame_nr.
			Frame_size:     uint32(cfg.BlockSize),
			Frame_nr:       uint32(cfg.Blocks),
			Retire_blk_tov: uint32(cfg.RetireTimeout / time.Millisecond),
		}
		if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return nil, fmt.Errorf("set PACKET_RX_RING (%d blocks of %d bytes): %w", cfg.Blocks, cfg.BlockSize, err)
		}
	}
	mem, err := unix.Mmap(fd, 0, cfg.BlockSize*cfg.Blocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map the receive ring: %w", err)
	}
	r.mem = mem
	r.wait = func(uintptr) bool { return r.waiting() }
	for {
		// A zero-length read with MSG_TRUNC drops one queued frame.
		_, _, errno := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), 0, 0, unix.MSG_DONTWAIT|unix.MSG_TRUNC, 0, 0)
		if errno == unix.EAGAIN {
			break
		}
		if errno != 0 && errno != unix.EINTR {
			r.unmap()
			return nil, fmt.Errorf("drain the frames queued before the ring: %w", errno)
		}
	}
	if r.slots > 0 {
		// From now on a frame longer than its slot is also queued whole
		// (the option is a switch, not a size); not before the queue was
		// drained, which would have dropped the whole copy of a slot.
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_COPY_THRESH, 1); err != nil {
			r.unmap()
			return nil, fmt.Errorf("set PACKET_COPY_THRESH: %w", err)
		}
	}
	return r, nil
}

// unmap releases the mapping. The mapping holds a reference to the
// socket: until it is gone the socket lives on after close(2), filling
// the ring and taking its share of a fanout group.
func (r *rxRing) unmap() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	r.left = 0
	return err
}

func (r *rxRing) u32(off int) uint32 { return binary.NativeEndian.Uint32(r.mem[off:]) }

// status is the status word of block (slot) cur, which the kernel and
// the reader hand back and forth: block_status (RingBlocks) or tp_status
// (RingSlots). Loads and stores of it are atomic so that the frames are
// read after the kernel's store that gave them away and before the
// reader's store that gives them back.
func (r *rxRing) status() *uint32 {
	if r.slots > 0 {
		return (*uint32)(unsafe.Pointer(&r.mem[r.slotOffset()]))
	}
	return (*uint32)(unsafe.Pointer(&r.mem[r.cur*r.blockSize+blockStatusOff]))
}

func (r *rxRing) slotOffset() int {
	return r.cur/r.perBlock*r.blockSize + r.cur%r.perBlock*r.slotSize
}

// waiting reports whether a frame can be read now.
func (r *rxRing) waiting() bool {
	return r.left > 0 || r.mem != nil && atomic.LoadUint32(r.status())&unix.TP_STATUS_USER != 0
}

// peek returns the next frame without passing it, or false when the
// ring holds none for the reader. An inconsistent block (slot) is handed
// back whole and reported.
func (r *rxRing) peek() (ringFrame, bool, error) {
	if r.mem == nil {
		return ringFrame{}, false, nil
	}
	if r.slots > 0 {
		return r.peekSlot()
	}
	base := r.cur * r.blockSize
	end := base + r.blockSize
	for r.left == 0 {
		if atomic.LoadUint32(r.status())&unix.TP_STATUS_USER == 0 {
			return ringFrame{}, false, nil
		}
		n, first := int(r.u32(base+blockNumPktsOff)), int(r.u32(base+blockFirstPktOff))
		if first < blockDescLen || first > r.blockSize-frameHdrLen {
			r.release()
			return ringFrame{}, false, fmt.Errorf("%w: first frame at %d", ErrRingCorrupt, first)
		}
		if n == 0 {
			r.release() // the kernel does not retire empty blocks, but if it did
			base, end = r.cur*r.blockSize, r.cur*r.blockSize+r.blockSize
			continue
		}
		r.left, r.next = n, base+first
	}
	h := r.next
	if h < base+blockDescLen || h+frameHdrLen > end {
		r.release()
		return ringFrame{}, false, fmt.Errorf("%w: frame header at %d", ErrRingCorrupt, h-base)
	}
	snap, orig := int(r.u32(h+frameSnaplenOff)), int(r.u32(h+frameLenOff))
	start := h + int(binary.NativeEndian.Uint16(r.mem[h+frameMacOff:]))
	hlen := 0
	if r.vnet {
		hlen = wire.VNetHdrLen
	}
	if start-hlen < h+frameHdrLen || start+snap > end {
		r.release()
		return ringFrame{}, false, fmt.Errorf("%w: frame of %d bytes at %d", ErrRingCorrupt, snap, start-base)
	}
	return r.frame(start, snap, orig), true, nil
}

func (r *rxRing) frame(start, snap, orig int) ringFrame {
	f := ringFrame{data: r.mem[start : start+snap : start+snap], whole: snap == orig}
	if r.vnet {
		f.vnet = r.mem[start-wire.VNetHdrLen : start]
	}
	return f
}

// peekSlot is peek on a ring of slots.
func (r *rxRing) peekSlot() (ringFrame, bool, error) {
	status := atomic.LoadUint32(r.status())
	if status&unix.TP_STATUS_USER == 0 {
		return ringFrame{}, false, nil
	}
	r.left = 1
	if status&unix.TP_STATUS_COPY != 0 {
		return ringFrame{queued: true}, true, nil
	}
	h := r.slotOffset()
	snap, orig := int(r.u32(h+slotSnaplenOff)), int(r.u32(h+slotLenOff))
	start := h + int(binary.NativeEndian.Uint16(r.mem[h+slotMacOff:]))
	hlen := 0
	if r.vnet {
		hlen = wire.VNetHdrLen
	}
	if start-hlen < h+slotHdrLen || start+snap > h+r.slotSize {
		r.release()
		return ringFrame{}, false, fmt.Errorf("%w: frame of %d bytes at %d in slot %d", ErrRingCorrupt, snap, start-h, h)
	}
	return r.frame(start, snap, orig), true, nil
}

// advance passes the frame peek returned; after a block's last frame the
// block goes back to the kernel at once, so a drained ring leaves the
// socket unreadable and the loop sleeps until the kernel retires another.
func (r *rxRing) advance() {
	if r.left == 0 {
		return
	}
	r.left--
	if r.left == 0 {
		r.release()
		return
	}
	step := int(r.u32(r.next + frameNextOff))
	if step < frameHdrLen {
		r.next = -1 // peek reports the block
		return
	}
	r.next += step // peek checks it against the block's end
}

// release hands block (slot) cur back to the kernel and moves on to the
// next.
func (r *rxRing) release() {
	atomic.StoreUint32(r.status(), unix.TP_STATUS_KERNEL)
	r.left = 0
	r.cur++
	if r.cur == r.blocks && r.slots == 0 || r.cur == r.slots {
		r.cur = 0
	}
}

// readRingBatch is ReadBatch on a ring: it copies the frames of the
// blocks the kernel retired into b, up to len(b.Bufs), handing each block
// back once read, and makes no system call. Frames the kernel cut (longer
// than a block can hold) or longer than their buffer are skipped and
// counted in RxTruncated; b.Bufs keeps its order.
func (a *AFPacket) readRingBatch(b *Batch) (int, error) {
	a.readMu.Lock()
	defer a.readMu.Unlock()
	if a.closed.Load() {
		return 0, closedError(a.name, "read")
	}
	r := a.ring
	n, truncated := 0, uint64(0)
	var err error
	for n < len(b.Bufs) {
		f, ok, perr := r.peek()
		if perr != nil {
			err = fmt.Errorf("afpacket %s: read: %w", a.name, perr)
			break
		}
		if !ok {
			break
		}
		if f.queued {
			size, h, qerr := a.fetchQueued(b.Bufs[n])
			r.advance()
			if qerr != nil {
				err = fmt.Errorf("afpacket %s: read: %w", a.name, qerr)
				break
			}
			if size > len(b.Bufs[n]) {
				truncated++
				continue
			}
			b.Sizes[n], b.VNet[n] = size, h
			a.ctr.received(size)
			n++
			continue
		}
		if !f.whole || len(f.data) > len(b.Bufs[n]) {
			truncated++
			r.advance()
			continue
		}
		b.Sizes[n] = copy(b.Bufs[n], f.data)
		b.VNet[n] = wire.VNetHdr{}
		if f.vnet != nil {
			b.VNet[n], _ = wire.DecodeVNetHdr(f.vnet)
		}
		r.advance()
		a.ctr.received(b.Sizes[n])
		n++
	}
	a.ctr.rxTruncated.Add(truncated)
	return n, err
}

// readRingFrame is ReadFrame on a ring: it waits in poll(2) (pollFD) until
// the kernel retires a block, then copies one frame.
func (a *AFPacket) readRingFrame(buf []byte) (int, error) {
	a.readMu.Lock()
	defer a.readMu.Unlock()
	r := a.ring
	for {
		if a.closed.Load() {
			return 0, closedError(a.name, "read")
		}
		f, ok, err := r.peek()
		if err != nil {
			return 0, fmt.Errorf("afpacket %s: read: %w", a.name, err)
		}
		if !ok {
			if err := a.raw.Read(r.wait); err != nil {
				if a.closed.Load() {
					return 0, closedError(a.name, "read")
				}
				return 0, fmt.Errorf("afpacket %s: read: %w", a.name, err)
			}
			continue
		}
		var n int
		var h wire.VNetHdr
		switch {
		case f.queued:
			n, h, err = a.fetchQueued(buf)
			r.advance()
			if err != nil {
				return 0, fmt.Errorf("afpacket %s: read: %w", a.name, err)
			}
		case f.whole:
			n = len(f.data)
			if n <= len(buf) {
				copy(buf, f.data)
				if f.vnet != nil {
					h, _ = wire.DecodeVNetHdr(f.vnet)
				}
			}
			r.advance()
		default:
			n = len(buf) + 1 // cut by the kernel
			r.advance()
		}
		if n > len(buf) {
			a.ctr.rxTruncated.Add(1)
			continue
		}
		if a.vnet {
			if err := completeFrame(buf[:n], h, &a.pkt); err != nil {
				return 0, fmt.Errorf("afpacket %s: read: %w", a.name, err)
			}
		}
		a.ctr.received(n)
		return n, nil
	}
}

// RxRing reports the receive ring's configuration with the defaults
// filled in, and false when the link receives with recvmmsg.
func (a *AFPacket) RxRing() (RingConfig, bool) {
	if a.ring == nil {
		return RingConfig{}, false
	}
	return a.ring.cfg, true
}

// RingFlagUsage describes ParseRingFlag's syntax for a daemon's -rx-ring.
const RingFlagUsage = `receive on the wire with: "off" (recvmmsg), "slots" (a TPACKET_V2 ring: no syscall per read, no added latency) or "blocks[:TIMEOUT]" (a TPACKET_V3 ring: fewer wake-ups, frames wait up to TIMEOUT, default 1ms)`

// ParseRingFlag parses a daemon's -rx-ring value (RingFlagUsage): nil for
// "off" or "", else the ring to ask for.
func ParseRingFlag(s string) (*RingConfig, error) {
	kind, timeout, hasTimeout := strings.Cut(s, ":")
	switch {
	case (kind == "" || kind == "off") && !hasTimeout:
		return nil, nil
	case kind == "slots" && !hasTimeout:
		return &RingConfig{Kind: RingSlots}, nil
	case kind == "blocks":
		rc := &RingConfig{Kind: RingBlocks}
		if hasTimeout {
			d, err := time.ParseDuration(timeout)
			if err != nil || d < time.Millisecond {
				return nil, fmt.Errorf("rx-ring %q: the retire timeout must be a duration of at least 1ms", s)
			}
			rc.RetireTimeout = d
		}
		return rc, nil
	}
	return nil, fmt.Errorf("rx-ring %q: want off, slots, blocks or blocks:TIMEOUT", s)
}

// RingFlag formats rc the way ParseRingFlag reads it.
func RingFlag(rc *RingConfig) string {
	switch {
	case rc == nil:
		return "off"
	case rc.Kind == RingSlots:
		return "slots"
	case rc.RetireTimeout == 0:
		return "blocks"
	}
	return "blocks:" + rc.RetireTimeout.String()
}
