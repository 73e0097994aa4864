package link

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// UringTAP drives a queue of an OffloadTAP through io_uring, so that one
// io_uring_enter(2) per pass of the event loop serves both directions of
// the device. The plain OffloadTAP makes one readv(2) per super-frame it
// reads (and one more that finds the device empty) and one writev(2) per
// frame it writes, mostly the clients' ACKs; under bulk load that was
// about half a system call per frame on the shim (docs/results.md).
//
// Reads: one multishot read (IORING_OP_READ_MULTISHOT, Linux 6.7) stays
// armed on the device and reads every frame as it comes into a buffer of
// its choice from a ring of provided buffers (IORING_REGISTER_PBUF_RING):
// Slots slots of memory mapped for the purpose, which the Go runtime
// neither moves nor frees while the kernel may write into them. A slot
// holds the vnet header and then up to MaxFrame bytes. ReadBatch collects
// the completed reads from the completion queue without a system call and
// lends the caller their slots: after ReadBatch returned n, b.Bufs[i] for
// i < n is replaced by a slice of the slot, valid until the next
// ReadBatch (which puts the slot back in the buffer ring, again without a
// system call) or Close. That is the lifetime a Batch's frames have
// anyway; the lending saves the copy of every super-frame that handing
// them over in the caller's buffers would cost. One request, not one per
// slot: reads waiting side by side would all be woken by each frame (a
// device's wait queue wakes every waiter), and all but one would find
// nothing and wait again, which cost more CPU than the system calls it
// saved. When the buffers run out the multishot read ends (ENOBUFS) and
// is armed again once slots come back.
//
// Writes: WriteBatch queues one writev per frame, linked so that the
// kernel writes them in order and stops at the first it refuses (so its
// count means what BatchLink says), and submits them with one
// io_uring_enter that also waits for the writes to complete: nothing is
// retained when it returns. The enter also takes along the multishot read
// if it has to be armed again; a pass without TAP writes calls Submit
// for that (which makes no system call when there is nothing to submit).
//
// FD is the ring's descriptor, which a Poller sees readable while
// completions wait in the queue. The kernel runs a read that waited for
// data in the context of the thread that submitted it (task work); the
// daemon's worker is one locked thread, so that is the worker.
//
// The price: each frame's read completes, and makes FD readable, as soon
// as the frame arrives, where a readv loop takes whatever queued up by
// the time the loop comes; under light load a loop's passes get smaller.
// On a crowded machine that cost more CPU per short request than the
// saved system calls; at a moderate load the two came out even, and the
// shim uses the ring by default (its -tap-io flag, docs/results.md).
//
// Tried and not kept (eighth session): IORING_SETUP_DEFER_TASKRUN, which
// queues a completed read until the loop asks (io_uring_enter with
// GETEVENTS) instead of interrupting its thread. It needs SINGLE_ISSUER,
// under which every enter and register from another thread fails with
// EEXIST (Close included: set the ring up R_DISABLED and enable it from
// the worker's locked thread), and an eventfd registered with the ring,
// polled edge-triggered, since queueing such work wakes no poller of the
// ring's descriptor. In the lab (qsplice-bench-proxy -only qsplice,
// -backend-args '-tap-io ...', two interleaved rounds at load 5-6) it
// made 0.19-0.32 system calls per frame under bulk load against this
// ring's 0.16-0.17 (an enter per pass to run the deferred reads), and the
// shim's CPU per short request moved within the noise (81/112 us against
// 92/118 us).
//
// Open one with NewUringTAP; when the kernel has no io_uring or refuses it
// (ENOSYS, EPERM with the kernel.io_uring_disabled sysctl, a seccomp
// filter) it returns an error and the caller keeps the OffloadTAP.
type UringTAP struct {
	tap    *OffloadTAP
	mu     sync.Mutex // the ring, the slots, the write state
	ring   *uring
	closed atomic.Bool
	wake   int // eventfd: ends a waiting ReadFrame on Close

	// Read slots, in memory of their own (mem); frames[s] is slot s's
	// frame area and hdrs[s] its vnet header.
	mem    []byte
	slots  int
	hdrs   [][]byte
	frames [][]byte
	lent   []int // slots the last ReadBatch lent out
	// The provided-buffer ring (at the start of mem): bufs are its
	// entries; the kernel takes them from its head, bufTail is ours.
	bufs     []uringBuf
	bufTail  uint16
	tailWord *uint32 // the 32-bit word holding bufs[0].bid and the tail
	owned    int     // slots in the buffer ring, the kernel's to fill
	armed    bool    // a multishot read is queued or in the kernel
	done     []uringDone
	doneHead int // done[doneHead:] are completed reads not yet delivered

	// Write state, in mem after the slots: a vnet header and two iovecs
	// per write of one enter.
	whdrs [][]byte
	wiov  []unix.Iovec
	wres  []int32
	wgot  int
	wseq  uint32 // the enter the write completions belong to
	one   [1][]byte
	pkt   wire.Packet
	pfd   [2]unix.PollFd
	ctr   counters
	// emptyReads counts reads that completed with EAGAIN (woken for a
	// frame another read took), under mu.
	emptyReads uint64
	rearms     uint64 // times the multishot read was armed again, under mu
}

// uringBuf is struct io_uring_buf, an entry of a provided-buffer ring. The
// ring's tail overlays the resv field of entry 0.
type uringBuf struct {
	addr uint64
	len  uint32
	bid  uint16
	resv uint16
}

// uringDone is a completed read: its slot and its result (bytes read,
// vnet header included, or a negative errno).
type uringDone struct {
	slot int
	res  int32
}

// UringTAPConfig tunes NewUringTAP.
type UringTAPConfig struct {
	// Slots is the number of receive buffers (0: 96, at most 1024). Each
	// is MaxFrame bytes of memory plus its header. A ReadBatch delivers
	// at most a third of them, so the kernel has buffers to fill while
	// the caller holds a batch and the next waits in the queue.
	Slots int
}

// uringBufGroup is the provided-buffer group of the read slots.
const uringBufGroup = 0

// Kinds of request, in the top byte of a request's user data.
const (
	uringKindRead   = 1 << 56
	uringKindWrite  = 2 << 56
	uringKindCancel = 3 << 56
	uringKindNop    = 4 << 56
	uringKindMask   = 0xff << 56
)

const (
	// uringMaxWrites bounds the writes one enter carries; a longer
	// WriteBatch takes several.
	uringMaxWrites = 128
	// uringSlotSize is a read slot: the vnet header, a frame of up to
	// MaxFrame bytes, rounded up to a cache line.
	uringSlotSize = (wire.VNetHdrLen + MaxFrame + 63) &^ 63
)

var _ BatchLink = (*UringTAP)(nil)

// NewUringTAP takes over the queue t: from now on the UringTAP reads and
// writes it, and closing the UringTAP closes t. On error t is left as it
// was, for the caller to keep using.
func NewUringTAP(t *OffloadTAP, cfg UringTAPConfig) (*UringTAP, error) {
	slots := cfg.Slots
	if slots <= 0 {
		slots = 96
	}
	if slots < 6 {
		return nil, fmt.Errorf("tap %s: io_uring: %d read slots, at least 6", t.name, slots)
	}
	if slots > 1024 {
		return nil, fmt.Errorf("tap %s: io_uring: %d read slots, at most 1024", t.name, slots)
	}
	entries := uint32(1)
	for entries < uint32(slots+uringMaxWrites+2) {
		entries <<= 1
	}
	ring, err := newURing(entries)
	if err != nil {
		return nil, fmt.Errorf("tap %s: %w", t.name, err)
	}
	u := &UringTAP{tap: t, ring: ring, slots: slots, wake: -1}
	if err := u.allocate(); err != nil {
		u.release()
		return nil, fmt.Errorf("tap %s: io_uring: %w", t.name, err)
	}
	if !ring.supports(uringOpReadMultishot) {
		u.release()
		return nil, fmt.Errorf("tap %s: io_uring: no multishot read (Linux 6.7 or later): %w", t.name, unix.EOPNOTSUPP)
	}
	if err := ring.registerBufRing(unsafe.Pointer(&u.bufs[0]), len(u.bufs), uringBufGroup); err != nil {
		u.release()
		return nil, fmt.Errorf("tap %s: io_uring: %w", t.name, err)
	}
	ring.useFile(t.fd)
	// Blocking from now on, which only io_uring sees (the device supports
	// IOCB_NOWAIT, so no read ever blocks a thread): on a non-blocking
	// descriptor, a read that wakes for a frame another reader took ends
	// with EAGAIN instead of waiting again.
	if err := unix.SetNonblock(t.fd, false); err != nil {
		u.release()
		return nil, fmt.Errorf("tap %s: %w", t.name, err)
	}
	for s := range slots {
		u.lent = append(u.lent, s)
	}
	u.giveBack()
	// Queued, not submitted: the kernel runs a read that had to wait in
	// the thread that submitted it, and that should be the thread that
	// drives the link (see Submit).
	u.arm()
	return u, nil
}

// allocate maps the slots and the write state, and makes the bookkeeping
// slices; nothing allocates after this.
func (u *UringTAP) allocate() error {
	entries := 1
	for entries < u.slots {
		entries <<= 1
	}
	ringBytes := (entries*int(unsafe.Sizeof(uringBuf{})) + 4095) &^ 4095 // page-aligned, as the kernel wants
	slotBytes := u.slots * uringSlotSize
	whdrBytes := uringMaxWrites * 16
	iovBytes := 2 * uringMaxWrites * int(unsafe.Sizeof(unix.Iovec{}))
	mem, err := unix.Mmap(-1, 0, ringBytes+slotBytes+whdrBytes+iovBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("map buffers: %w", err)
	}
	u.mem = mem
	u.bufs = unsafe.Slice((*uringBuf)(unsafe.Pointer(&mem[0])), entries)
	u.tailWord = (*uint32)(unsafe.Pointer(&mem[12]))
	mem = mem[ringBytes:]
	u.hdrs, u.frames = make([][]byte, u.slots), make([][]byte, u.slots)
	for s := range u.slots {
		slot := mem[s*uringSlotSize : (s+1)*uringSlotSize]
		u.hdrs[s] = slot[:wire.VNetHdrLen:wire.VNetHdrLen]
		u.frames[s] = slot[wire.VNetHdrLen : wire.VNetHdrLen+MaxFrame : wire.VNetHdrLen+MaxFrame]
	}
	u.whdrs = make([][]byte, uringMaxWrites)
	for j := range u.whdrs {
		off := slotBytes + j*16
		u.whdrs[j] = mem[off : off+wire.VNetHdrLen : off+wire.VNetHdrLen]
	}
	u.wiov = unsafe.Slice((*unix.Iovec)(unsafe.Pointer(&mem[slotBytes+whdrBytes])), 2*uringMaxWrites)
	u.wres = make([]int32, uringMaxWrites)
	u.lent = make([]int, 0, u.slots)
	u.done = make([]uringDone, 0, u.slots)
	if u.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	u.pfd = [2]unix.PollFd{{Fd: int32(u.ring.fd), Events: unix.POLLIN}, {Fd: int32(u.wake), Events: unix.POLLIN}}
	return nil
}

// release frees what NewUringTAP made when it fails: t stays open.
func (u *UringTAP) release() {
	u.ring.close() // cancels the reads before their memory goes
	if u.mem != nil {
		unix.Munmap(u.mem)
	}
	if u.wake >= 0 {
		unix.Close(u.wake)
	}
}

// arm queues the multishot read, submitted with the next enter.
func (u *UringTAP) arm() {
	e := u.ring.next(uringOpReadMultishot, uringKindRead)
	e.flags |= uringSQEBufferSelect
	e.bufIndex = uringBufGroup // the union's buf_group
	u.armed = true
}

// rearm arms the multishot read again if it ended and the kernel has
// buffers to read into; it reports whether it queued the request.
func (u *UringTAP) rearm() bool {
	if u.armed || u.owned == 0 {
		return false
	}
	u.arm()
	u.rearms++
	return true
}

// reap moves every completion in the queue into the read and write
// state (ReadFrame and Close, which take everything). A write completion
// of an earlier enter is dropped.
func (u *UringTAP) reap() {
	for c := u.ring.peek(); c != nil; c = u.ring.peek() {
		u.take(c)
		u.ring.advance()
	}
}

// take records one completion: a read's in done, a write's of the
// current enter in wres. Others (a stale write, the wake-up no-op, the
// cancellation) need nothing.
func (u *UringTAP) take(c *uringCQE) {
	data := c.userData
	switch data & uringKindMask {
	case uringKindRead:
		if d, ok := u.readDone(c); ok {
			if u.doneHead == len(u.done) {
				u.done, u.doneHead = u.done[:0], 0
			}
			u.done = append(u.done, d)
		}
	case uringKindWrite:
		if u.current(data) {
			u.wres[uint32(data)] = c.res
			u.wgot++
		}
	}
}

// current tells whether a write or no-op completion belongs to the
// enter WriteBatch is waiting for.
func (u *UringTAP) current(data uint64) bool {
	return uint32(data>>32)&0xffffff == u.wseq&0xffffff
}

// readDone accounts for a completion of the multishot read: ok with the
// slot it filled (or its error), not ok for its end without a buffer
// (ENOBUFS, a cancellation), which only disarms it.
func (u *UringTAP) readDone(c *uringCQE) (uringDone, bool) {
	if c.flags&uringCQEFMore == 0 {
		u.armed = false
	}
	if c.res == -int32(unix.EAGAIN) {
		u.emptyReads++
	}
	if c.flags&uringCQEFBuffer == 0 {
		return uringDone{}, false
	}
	u.owned--
	return uringDone{slot: int(c.flags >> uringCQEBufferShift), res: c.res}, true
}

// giveBack puts the slots the last ReadBatch lent out back in the buffer
// ring, where the kernel takes them from without a system call.
func (u *UringTAP) giveBack() {
	if len(u.lent) == 0 {
		return
	}
	mask := uint16(len(u.bufs) - 1)
	for _, s := range u.lent {
		b := &u.bufs[u.bufTail&mask]
		b.addr = uint64(uintptr(unsafe.Pointer(&u.hdrs[s][0])))
		b.len = uint32(wire.VNetHdrLen + MaxFrame)
		b.bid = uint16(s)
		u.bufTail++
	}
	u.owned += len(u.lent)
	u.lent = u.lent[:0]
	// Publish the tail (the upper half of the word whose lower half is
	// bufs[0].bid, written above if at all) with a release store.
	atomic.StoreUint32(u.tailWord, uint32(u.bufs[0].bid)|uint32(u.bufTail)<<16)
}

// FD implements BatchLink: the ring's descriptor, readable while
// completions wait.
func (u *UringTAP) FD() int { return u.ring.fd }

// VNetHdr implements BatchLink.
func (u *UringTAP) VNetHdr() bool { return true }

// Queue is the queue's index (OffloadTAP.Queue).
func (u *UringTAP) Queue() int { return u.tap.queue }

// Name implements Link.
func (u *UringTAP) Name() string { return u.tap.name }

// Stats implements Link. A super-frame counts as one frame.
func (u *UringTAP) Stats() Stats { return u.ctr.snapshot() }

// ReadBatch implements BatchLink without a system call: it gives the
// kernel back the slots it lent out last time (submitted with the next
// enter: WriteBatch's or Submit's) and delivers the reads that completed,
// up to len(b.Bufs), lending their slots (see UringTAP). It submits
// itself only when fewer than half the slots are still in flight, so the
// device is never left without a read.
func (u *UringTAP) ReadBatch(b *Batch) (int, error) {
	if err := checkBatch(b); err != nil {
		return 0, fmt.Errorf("tap %s: read: %w", u.tap.name, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed.Load() {
		return 0, closedError(u.tap.name, "read")
	}
	u.giveBack()
	if u.rearm() {
		if err := u.ring.enter(0); err != nil {
			return 0, fmt.Errorf("tap %s: read: %w", u.tap.name, err)
		}
	}
	limit := min(len(b.Bufs), u.slots/3)
	n := 0
	var rerr error
	deliver := func(d uringDone) bool {
		u.lent = append(u.lent, d.slot)
		size := int(d.res) - wire.VNetHdrLen
		if d.res < 0 || size < 0 {
			if !quietReadErr(d.res) {
				// A failed read (EBADFD: the device went away) ends
				// the batch; its slot is given back like the others.
				rerr = fmt.Errorf("tap %s: read: %w", u.tap.name, errnoOrShort(d.res))
			}
			return rerr == nil
		}
		b.Bufs[n] = u.frames[d.slot]
		b.Sizes[n] = size
		b.VNet[n], _ = wire.DecodeVNetHdr(u.hdrs[d.slot])
		u.ctr.received(size)
		n++
		return true
	}
	// First what WriteBatch reaped, then the queue; completions beyond
	// the batch stay in the queue, so FD stays readable for them.
	for n < limit && u.doneHead < len(u.done) && rerr == nil {
		u.doneHead++
		deliver(u.done[u.doneHead-1])
	}
	for n < limit && rerr == nil {
		c := u.ring.peek()
		if c == nil {
			break
		}
		if c.userData&uringKindMask == uringKindRead {
			if d, ok := u.readDone(c); ok {
				deliver(d)
			}
		}
		u.ring.advance()
	}
	// The read ended (its buffers ran out) and slots are back: arm it
	// again now, since the caller may sleep on FD before its next
	// WriteBatch or Submit.
	if u.rearm() {
		if err := u.ring.enter(0); err != nil && rerr == nil {
			rerr = fmt.Errorf("tap %s: read: %w", u.tap.name, err)
		}
	}
	return n, rerr
}

// quietReadErr tells a read result that only means "read again": the
// read was cancelled, or found the queue empty (EAGAIN: several reads
// woke for one frame and another took it).
func quietReadErr(res int32) bool {
	return res == -int32(unix.ECANCELED) || res == -int32(unix.EAGAIN)
}

// errnoOrShort is the error of a read's result: its errno, or EINVAL for
// a read shorter than a vnet header (which IFF_VNET_HDR rules out).
func errnoOrShort(res int32) error {
	if res < 0 {
		return syscall.Errno(-res)
	}
	return unix.EINVAL
}

// Submit hands the kernel the multishot read if it is queued but not
// submitted: at first (NewUringTAP queues it), and after it ended for
// want of buffers, when no WriteBatch followed in the pass to take it
// along. Without a request to submit it makes no system call. A read
// that waits for data runs later in the thread that submitted it, so the
// loop that drives the link should call Submit once from its own thread
// before it first waits on FD (ReadFrame does so itself).
func (u *UringTAP) Submit() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed.Load() {
		return closedError(u.tap.name, "submit")
	}
	u.rearm()
	if u.ring.pending == 0 {
		return nil
	}
	if err := u.ring.enter(0); err != nil {
		return fmt.Errorf("tap %s: %w", u.tap.name, err)
	}
	return nil
}

// WriteBatch implements BatchLink: the frames go as linked writev
// requests, with the reads ReadBatch gave back, in one io_uring_enter per
// uringMaxWrites frames that waits for the writes. A frame the kernel
// refuses ends the call (the linked writes after it are cancelled): the
// frames before it went, the count is its index.
func (u *UringTAP) WriteBatch(frames [][]byte, hdrs []wire.VNetHdr) (int, error) {
	if hdrs != nil && len(hdrs) < len(frames) {
		u.ctr.txErrors.Add(1)
		return 0, fmt.Errorf("tap %s: write: %d headers for %d frames", u.tap.name, len(hdrs), len(frames))
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed.Load() {
		u.ctr.txErrors.Add(1)
		return 0, closedError(u.tap.name, "write")
	}
	// Only ReadBatch gives slots back: the frames written may be slices
	// of the slots it lent last.
	u.rearm()
	sent := 0
	for sent < len(frames) {
		k := min(len(frames)-sent, uringMaxWrites)
		var h []wire.VNetHdr
		if hdrs != nil {
			h = hdrs[sent : sent+k]
		}
		n, err := u.writeChunk(frames[sent:sent+k], h)
		sent += n
		if err != nil {
			u.ctr.txErrors.Add(1)
			return sent, err
		}
	}
	return sent, nil
}

// writeChunk writes up to uringMaxWrites frames with one enter (more if
// a signal interrupts the wait).
func (u *UringTAP) writeChunk(frames [][]byte, hdrs []wire.VNetHdr) (int, error) {
	valid := len(frames)
	for i, f := range frames {
		if len(f) == 0 {
			valid = i // stop before an empty frame, as OffloadTAP does
			break
		}
	}
	u.wseq++
	u.wgot = 0
	tag := uringKindWrite | uint64(u.wseq&0xffffff)<<32
	for j, f := range frames[:valid] {
		var h wire.VNetHdr
		if hdrs != nil {
			h = hdrs[j]
		}
		h.Encode(u.whdrs[j])
		iov := u.wiov[2*j : 2*j+2]
		iov[0].Base = &u.whdrs[j][0]
		iov[0].SetLen(wire.VNetHdrLen)
		iov[1].Base = &f[0]
		iov[1].SetLen(len(f))
		e := u.ring.next(uringOpWritev, tag|uint64(j))
		e.addr = uint64(uintptr(unsafe.Pointer(&iov[0])))
		e.len = 2
		if j < valid-1 {
			e.flags |= uringSQEIOLink
		}
		u.wres[j] = 0
	}
	if valid > 0 {
		// A no-op linked behind the last write completes after it. If
		// reads completed among the writes, its completion is left in
		// the queue, so FD stays readable for the reads reaped here.
		u.ring.sqes[(u.ring.tail-1)&u.ring.sqMask].flags |= uringSQEIOLink
		e := u.ring.next(uringOpNop, uringKindNop|uint64(u.wseq&0xffffff)<<32)
		e.fd = -1
		e.flags &^= uringSQEFixedFile
	}
	nopSeen := valid == 0
	for !nopSeen {
		if err := u.ring.enter(uint32(valid + 1 - u.wgot)); err != nil {
			u.clearIov(valid)
			return 0, fmt.Errorf("tap %s: write: %w", u.tap.name, err)
		}
		for c := u.ring.peek(); c != nil; c = u.ring.peek() {
			if c.userData&uringKindMask == uringKindNop && u.current(c.userData) {
				nopSeen = true
				if u.doneHead < len(u.done) {
					break // leave it: FD readable for the reads in done
				}
				u.ring.advance()
				break
			}
			u.take(c)
			u.ring.advance()
		}
	}
	u.clearIov(valid)
	for j, f := range frames[:valid] {
		if r := u.wres[j]; r < 0 || int(r) != wire.VNetHdrLen+len(f) {
			err := errnoOrShort(r)
			if r >= 0 {
				err = fmt.Errorf("short write of %d bytes", r)
			}
			return j, fmt.Errorf("tap %s: writev frame of %d bytes: %w", u.tap.name, len(f), err)
		}
		u.ctr.sent(len(f))
	}
	if valid < len(frames) {
		return valid, fmt.Errorf("tap %s: write: empty frame", u.tap.name)
	}
	return valid, nil
}

// clearIov drops the references to the caller's frames.
func (u *UringTAP) clearIov(n int) {
	for j := range n {
		u.wiov[2*j+1] = unix.Iovec{}
	}
}

// ReadFrame implements Link. It blocks until a frame arrives and returns
// it self-contained, as OffloadTAP.ReadFrame does; Close ends the wait.
func (u *UringTAP) ReadFrame(buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, fmt.Errorf("tap %s: read: %w", u.tap.name, errEmptyBuffer)
	}
	for {
		n, got, err := u.readOne(buf)
		if err != nil {
			return 0, err
		}
		if got {
			return n, nil
		}
		if err := u.waitReadable(); err != nil {
			return 0, err
		}
	}
}

// readOne copies one completed read into buf and completes its checksum,
// or reports that none had completed, after submitting the reads given
// back. Copying under the lock keeps the slot from being given back (by
// a WriteBatch of another goroutine) while it is read.
func (u *UringTAP) readOne(buf []byte) (n int, got bool, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed.Load() {
		return 0, false, closedError(u.tap.name, "read")
	}
	u.giveBack()
	u.reap()
	for u.doneHead < len(u.done) {
		d := u.done[u.doneHead]
		u.doneHead++
		u.lent = append(u.lent, d.slot)
		size := int(d.res) - wire.VNetHdrLen
		if quietReadErr(d.res) {
			continue
		}
		if d.res < 0 || size < 0 {
			return 0, false, fmt.Errorf("tap %s: read: %w", u.tap.name, errnoOrShort(d.res))
		}
		if size > len(buf) {
			u.ctr.rxTruncated.Add(1)
			continue
		}
		h, _ := wire.DecodeVNetHdr(u.hdrs[d.slot])
		copy(buf, u.frames[d.slot][:size])
		if err := completeFrame(buf[:size], h, &u.pkt); err != nil {
			return 0, false, fmt.Errorf("tap %s: read: %w", u.tap.name, err)
		}
		u.ctr.received(size)
		return size, true, nil
	}
	// Nothing completed: hand back the slots, then the caller waits.
	u.giveBack()
	u.rearm()
	if u.ring.pending > 0 {
		if err := u.ring.enter(0); err != nil {
			return 0, false, fmt.Errorf("tap %s: read: %w", u.tap.name, err)
		}
	}
	return 0, false, nil
}

// waitReadable blocks in poll(2) until a completion waits or Close began.
func (u *UringTAP) waitReadable() error {
	if u.closed.Load() {
		return closedError(u.tap.name, "read")
	}
	fds := u.pfd
	if _, err := unix.Poll(fds[:], -1); err != nil && err != unix.EINTR {
		return fmt.Errorf("tap %s: poll: %w", u.tap.name, err)
	}
	return nil
}

// WriteFrame implements Link: the frame goes with a zero vnet header.
func (u *UringTAP) WriteFrame(frame []byte) error {
	u.one[0] = frame
	_, err := u.WriteBatch(u.one[:], nil)
	u.one[0] = nil
	return err
}

// Disarm cancels the multishot read and waits, at most limit, until the
// kernel reported its end; what it read before that stays for the next
// ReadBatch, and the slots lent out stay lent. The next Submit,
// ReadBatch or WriteBatch arms the read again from the thread that calls
// it. A loop that hands the link to another thread calls Disarm first:
// the read runs as task work of the thread that submitted it (see
// UringTAP), which the kernel would otherwise wake for every frame while
// the other thread drives the link. A read queued but not yet submitted
// is left queued: the next enter submits it from its caller's thread.
func (u *UringTAP) Disarm(limit time.Duration) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed.Load() {
		return closedError(u.tap.name, "disarm")
	}
	if !u.armed || u.ring.pending > 0 {
		return nil
	}
	if u.ring.room() == 0 {
		return fmt.Errorf("tap %s: disarm: no room in the submission queue", u.tap.name)
	}
	e := u.ring.next(uringOpAsyncCancel, uringKindCancel)
	e.flags, e.fd = 0, -1
	e.addr = uringKindRead // the read's user data: the key a cancel matches
	e.opFlags = uringCancelAll
	if err := u.ring.enter(0); err != nil {
		return fmt.Errorf("tap %s: disarm: %w", u.tap.name, err)
	}
	deadline := time.Now().Add(limit)
	for {
		u.reap()
		if !u.armed {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("tap %s: disarm: the kernel did not end the read within %v", u.tap.name, limit)
		}
		// The cancelled read completes in the task work of the thread
		// that submitted it, which the kernel interrupts to run it.
		pfd := [1]unix.PollFd{{Fd: int32(u.ring.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd[:], int(max(left.Milliseconds(), 1))); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("tap %s: disarm: %w", u.tap.name, err)
		}
	}
}

// Close cancels the reads in flight, waits until the kernel reported each
// one (so it no longer writes into their slots), closes the ring and the
// TAP queue, and ends a waiting ReadFrame. It is idempotent.
func (u *UringTAP) Close() error {
	if u.closed.Swap(true) {
		return nil
	}
	var one [8]byte
	one[0] = 1
	unix.Write(u.wake, one[:])
	u.mu.Lock()
	defer u.mu.Unlock()
	drained := u.cancelReads(time.Second)
	u.ring.close()
	if drained {
		unix.Munmap(u.mem)
	} // else: a read the kernel never reported could still land there; leak it
	u.mem = nil
	unix.Close(u.wake)
	return u.tap.Close()
}

// cancelReads asks the kernel to cancel every read and waits for their
// completions, at most limit. It reports whether none is left.
func (u *UringTAP) cancelReads(limit time.Duration) bool {
	u.lent = u.lent[:0]
	if u.ring.room() == 0 {
		return false
	}
	e := u.ring.next(uringOpAsyncCancel, uringKindCancel)
	e.flags, e.fd = 0, -1 // ANY matches every request, whatever its file
	e.opFlags = uringCancelAll | uringCancelAny
	if u.ring.enter(0) != nil {
		return false
	}
	deadline := time.Now().Add(limit)
	pfd := [1]unix.PollFd{{Fd: int32(u.ring.fd), Events: unix.POLLIN}}
	for {
		u.reap()
		if !u.armed {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		// The cancelled reads complete in the task work of the thread
		// that submitted them, which the kernel interrupts to run it.
		if _, err := unix.Poll(pfd[:], int(max(left.Milliseconds(), 1))); err != nil && !errors.Is(err, unix.EINTR) {
			return false
		}
	}
}
