package link

import (
	"cmp"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// BatchWriter is a Link that can send several frames with one system call.
// On these machines a syscall costs 1-1.6 us (docs/architecture.md §7), as
// much as the rest of a frame's handling; a daemon that has several frames
// ready after one pass of its event loop sends them together.
type BatchWriter interface {
	// WriteFrames sends frames in order and returns how many were sent;
	// the error says why the rest were not. The slices are not retained.
	WriteFrames(frames [][]byte) (int, error)
}

// WriteFrames sends frames on l, in batches when l is a BatchWriter and
// one by one otherwise. A frame the kernel refuses is skipped and the
// others still go, as with a loop of WriteFrame; it returns how many were
// sent and the first error.
func WriteFrames(l Link, frames [][]byte) (int, error) {
	var first error
	n := 0
	bw, ok := l.(BatchWriter)
	if !ok {
		for _, f := range frames {
			if err := l.WriteFrame(f); err != nil {
				first = cmp.Or(first, err)
				continue
			}
			n++
		}
		return n, first
	}
	for len(frames) > 0 {
		sent, err := bw.WriteFrames(frames)
		n += sent
		if err == nil {
			break
		}
		first = cmp.Or(first, err)
		frames = frames[min(sent+1, len(frames)):]
	}
	return n, first
}

// maxBatch bounds one sendmmsg(2) call; a longer list takes several.
const maxBatch = 64

// swScratchSize is the initial software-offload scratch of a link without
// vnet headers: room for a few segmented 64 KiB super-frames, so that one
// sendmmsg carries the segments of several.
const swScratchSize = 256 << 10

// mmsghdr is struct mmsghdr: Go's natural layout of these two fields is
// the C one on every Linux architecture (the trailing padding included).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// batchState is the argument block of the prebuilt sendmmsg closure and
// the messages it sends. Message m uses iov[2m] (its vnet header, on a
// socket with vnet headers) and iov[2m+1] (the frame).
type batchState struct {
	vnet  bool
	iov   [2 * maxBatch]unix.Iovec
	hdrs  [maxBatch]mmsghdr
	vh    [maxBatch][wire.VNetHdrLen]byte
	owner [maxBatch]int // the caller's frame each message carries (all or a segment of)
	count int           // messages filled
	sent  int           // of them, sent by the last call
	errno syscall.Errno
	do    func(fd uintptr) bool

	// Software offloads for a socket without vnet headers: segments and
	// completed copies are written into scratch[used:], which is reused
	// once the messages pointing into it went out.
	scratch []byte
	used    int
	segs    [][]byte
}

// add queues frame with header h (sent only with vnet headers) as the
// next message; the caller checks there is room.
func (b *batchState) add(frame []byte, h wire.VNetHdr, owner int) {
	m := b.count
	msg := &b.hdrs[m]
	*msg = mmsghdr{}
	b.iov[2*m+1].Base = &frame[0]
	b.iov[2*m+1].SetLen(len(frame))
	if b.vnet {
		h.Encode(b.vh[m][:])
		b.iov[2*m].Base = &b.vh[m][0]
		b.iov[2*m].SetLen(wire.VNetHdrLen)
		msg.hdr.Iov = &b.iov[2*m]
		msg.hdr.SetIovlen(2)
	} else {
		msg.hdr.Iov = &b.iov[2*m+1]
		msg.hdr.SetIovlen(1)
	}
	b.owner[m] = owner
	b.count++
}

// sendmmsg is the RawConn.Write callback: it sends the filled entries,
// resuming after partial sends, until all went, one failed, or the
// socket buffer is full (then the poller waits for room).
func (b *batchState) sendmmsg(fd uintptr) (done bool) {
	for b.sent < b.count {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd,
			uintptr(unsafe.Pointer(&b.hdrs[b.sent])), uintptr(b.count-b.sent), 0, 0, 0)
		switch errno {
		case 0:
			b.sent += int(n)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			b.errno = errno
			return true
		}
	}
	return true
}

// flushMsgs sends the queued messages. On failure it returns the
// caller's frame whose message was refused (every earlier frame went
// whole) and drops the messages after it.
func (a *AFPacket) flushMsgs() (failed int, err error) {
	return a.flushMsgsOf(&a.batch)
}

// flushMsgsOf is flushMsgs of b: the link's batch, or the frames queued
// for a poller's wait (sendring.go).
func (a *AFPacket) flushMsgsOf(b *batchState) (failed int, err error) {
	if b.count == 0 {
		return -1, nil
	}
	b.sent, b.errno = 0, 0
	err = a.sendFD().Write(b.do)
	for m := range b.sent {
		a.ctr.sent(int(b.iov[2*m+1].Len))
	}
	failed = -1
	if b.sent < b.count {
		failed = b.owner[b.sent]
	}
	switch {
	case a.closed.Load():
		err = closedError(a.name, "write")
	case err != nil:
		err = fmt.Errorf("afpacket %s: write: %w", a.name, err)
	case b.errno != 0:
		err = fmt.Errorf("afpacket %s: sendmmsg frame of %d bytes: %w", a.name, b.iov[2*b.sent+1].Len, b.errno)
	}
	clear(b.iov[:2*b.count]) // drop the references to the callers' frames
	b.count = 0
	return failed, err
}

var (
	_ BatchWriter = (*AFPacket)(nil)
	_ BatchLink   = (*AFPacket)(nil)
)

// WriteFrames implements BatchWriter with sendmmsg(2): WriteBatch with
// zero headers.
func (a *AFPacket) WriteFrames(frames [][]byte) (int, error) {
	return a.WriteBatch(frames, nil)
}

// WriteBatch implements BatchLink with sendmmsg(2), up to maxBatch frames
// per call. With vnet headers each frame goes behind its header and the
// kernel segments super-frames and completes checksums. Without, a
// super-frame (wire.SegmentTCP4) and a frame with a partial checksum
// (wire.CompleteChecksum) are finished in software into scratch the link
// owns; the caller's frames are only read. Stats then count the frames
// that reached the socket, segments included.
//
// A frame the kernel or the segmentation refuses ends the call: the
// frames before it are sent, the error names it, and the returned count
// is its index (WriteFrames the function skips it and goes on). Nothing
// allocates once the scratch has grown to the largest super-frames seen.
func (a *AFPacket) WriteBatch(frames [][]byte, hdrs []wire.VNetHdr) (int, error) {
	if a.closed.Load() {
		a.ctr.txErrors.Add(1)
		return 0, closedError(a.name, "write")
	}
	if hdrs != nil && len(hdrs) < len(frames) {
		a.ctr.txErrors.Add(1)
		return 0, fmt.Errorf("afpacket %s: write: %d headers for %d frames", a.name, len(hdrs), len(frames))
	}
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	if a.closed.Load() { // Close may have unmapped the transmit ring
		a.ctr.txErrors.Add(1)
		return 0, closedError(a.name, "write")
	}
	b := &a.batch
	b.count, b.used = 0, 0
	for i, f := range frames {
		var h wire.VNetHdr
		if hdrs != nil {
			h = hdrs[i]
		}
		failed, err := i, error(nil)
		switch {
		case len(f) == 0:
			err = fmt.Errorf("afpacket %s: write: empty frame", a.name)
		case b.vnet || !h.NeedsCsum() && !h.IsGSO():
			if failed, err = a.queue(f, h, i); err == nil {
				continue
			}
		default:
			if failed, err = a.addInSoftware(f, h, i); err == nil {
				continue
			}
		}
		if failed == i {
			// Refused before any of it went: the frames before it still go.
			if f2, ferr := a.flush(); ferr != nil {
				failed, err = f2, ferr
			}
		}
		a.ctr.txErrors.Add(1)
		return failed, err
	}
	if failed, err := a.flush(); err != nil {
		a.ctr.txErrors.Add(1)
		return failed, err
	}
	return len(frames), nil
}

// addInSoftware queues frame i with header h, which asks for work the
// socket cannot pass on, as complete frames: the segments of a
// super-frame, or a copy with its checksum completed.
//
// It returns the caller's frame a failure is about: i itself if it was
// refused, an earlier one if sending the queue to make room failed.
func (a *AFPacket) addInSoftware(frame []byte, h wire.VNetHdr, i int) (failed int, err error) {
	b := &a.batch
	need, segs := len(frame), 1
	if h.IsGSO() {
		if segs, need, err = wire.SegmentTCP4Len(frame, h); err != nil {
			return i, fmt.Errorf("afpacket %s: segment frame of %d bytes: %w", a.name, len(frame), err)
		}
	}
	if need > len(b.scratch)-b.used {
		// The queued messages point into the scratch: send them first.
		if failed, err := a.flush(); err != nil {
			return failed, err
		}
		b.used = 0
		if need > len(b.scratch) {
			b.scratch = make([]byte, max(need, swScratchSize))
		}
	}
	out := b.scratch[b.used : b.used+need : b.used+need]
	b.used += need
	if !h.IsGSO() {
		copy(out, frame)
		if err := wire.CompleteChecksum(out, h); err != nil {
			return i, fmt.Errorf("afpacket %s: checksum frame of %d bytes: %w", a.name, len(frame), err)
		}
		b.segs = append(b.segs[:0], out)
	} else {
		if cap(b.segs) < segs {
			b.segs = make([][]byte, 0, segs)
		}
		if b.segs, err = wire.SegmentTCP4(frame, h, out, b.segs[:0]); err != nil {
			return i, fmt.Errorf("afpacket %s: segment frame of %d bytes: %w", a.name, len(frame), err)
		}
	}
	for _, s := range b.segs {
		if failed, err := a.queue(s, wire.VNetHdr{}, i); err != nil {
			return failed, err
		}
	}
	clear(b.segs)
	return -1, nil
}

// rxBatchState is the argument block of the prebuilt recvmmsg closure.
// Message j receives its vnet header into vh[j] (iov[2j]) and its frame
// into the batch's buffer (iov[2j+1]); without vnet headers a message has
// the second iovec only. The arrays grow to the largest batch seen.
type rxBatchState struct {
	hlen      int // vnet header bytes in front of each frame: 0 or VNetHdrLen
	hdrs      []mmsghdr
	iov       []unix.Iovec
	vh        [][wire.VNetHdrLen]byte
	batch     *Batch
	count     int // frames delivered into batch
	truncated int
	errno     syscall.Errno
	do        func(fd uintptr) bool
}

func (r *rxBatchState) grow(n int) {
	if len(r.hdrs) >= n {
		return
	}
	r.hdrs = make([]mmsghdr, n)
	r.iov = make([]unix.Iovec, 2*n)
	r.vh = make([][wire.VNetHdrLen]byte, n)
	for j := range r.hdrs {
		r.iov[2*j].Base = &r.vh[j][0]
		r.iov[2*j].SetLen(wire.VNetHdrLen)
		if r.hlen > 0 {
			r.hdrs[j].hdr.Iov = &r.iov[2*j]
			r.hdrs[j].hdr.SetIovlen(2)
		} else {
			r.hdrs[j].hdr.Iov = &r.iov[2*j+1]
			r.hdrs[j].hdr.SetIovlen(1)
		}
	}
}

// recvmmsg is the RawConn.Read callback. It never parks: an empty socket
// ends the batch. MSG_TRUNC makes the kernel report each frame's whole
// length, so a frame longer than its buffer is recognised, counted and
// its slot given to the next frame (by swapping buffers, not copying).
func (r *rxBatchState) recvmmsg(fd uintptr) (done bool) {
	b := r.batch
	for r.count < len(b.Bufs) {
		k := len(b.Bufs) - r.count
		for j := range k {
			buf := b.Bufs[r.count+j]
			r.iov[2*j+1].Base = &buf[0]
			r.iov[2*j+1].SetLen(len(buf))
			r.hdrs[j].hdr.Flags, r.hdrs[j].n = 0, 0
		}
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[0])), uintptr(k),
			unix.MSG_DONTWAIT|unix.MSG_TRUNC, 0, 0)
		switch errno {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return true
		default:
			r.errno = errno
			return true
		}
		w := r.count
		for j := range int(n) {
			i := r.count + j
			size := int(r.hdrs[j].n) - r.hlen
			if size < 0 || size > len(b.Bufs[i]) {
				r.truncated++
				continue
			}
			if i != w {
				b.Bufs[w], b.Bufs[i] = b.Bufs[i], b.Bufs[w]
			}
			b.Sizes[w] = size
			b.VNet[w] = wire.VNetHdr{}
			if r.hlen > 0 {
				b.VNet[w], _ = wire.DecodeVNetHdr(r.vh[j][:])
			}
			w++
		}
		r.count = w
		if int(n) < k {
			return true // the socket is empty: save the call that would say EAGAIN
		}
	}
	return true
}

// ReadBatch implements BatchLink with recvmmsg(2): one system call for
// all the frames waiting, up to len(b.Bufs). With a receive ring it reads
// the ring instead (readRingBatch), without a system call. With vnet headers, buffers
// should hold MaxFrame bytes. A truncated frame's buffer is swapped to
// the end of b.Bufs, so the order of b.Bufs may change between calls.
func (a *AFPacket) ReadBatch(b *Batch) (int, error) {
	if err := checkBatch(b); err != nil {
		return 0, fmt.Errorf("afpacket %s: read: %w", a.name, err)
	}
	if a.ring != nil {
		return a.readRingBatch(b)
	}
	a.readMu.Lock()
	defer a.readMu.Unlock()
	r := &a.rxb
	r.grow(len(b.Bufs))
	r.batch, r.count, r.truncated, r.errno = b, 0, 0, 0
	err := a.raw.Read(r.do)
	n := r.count
	r.batch = nil
	a.ctr.rxTruncated.Add(uint64(r.truncated))
	for i := range n {
		a.ctr.received(b.Sizes[i])
	}
	switch {
	case a.closed.Load():
		return n, closedError(a.name, "read")
	case err != nil:
		return n, fmt.Errorf("afpacket %s: read: %w", a.name, err)
	case r.errno != 0:
		return n, fmt.Errorf("afpacket %s: recvmmsg: %w", a.name, r.errno)
	}
	return n, nil
}
