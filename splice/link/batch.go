package link

import (
	"cmp"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BatchWriter is a Link that can send several frames with one system call.
// On these machines a syscall costs 1-1.6 us (design.md section 7), as
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

// mmsghdr is struct mmsghdr: Go's natural layout of these two fields is
// the C one on every Linux architecture (the trailing padding included).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// batchState is the argument block of the prebuilt sendmmsg closure.
type batchState struct {
	iov   [maxBatch]unix.Iovec
	hdrs  [maxBatch]mmsghdr
	count int // entries filled
	sent  int // of them, sent by the last call
	errno syscall.Errno
	do    func(fd uintptr) bool
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

var _ BatchWriter = (*AFPacket)(nil)

// WriteFrames implements BatchWriter with sendmmsg(2); like WriteFrame it
// does not allocate.
func (a *AFPacket) WriteFrames(frames [][]byte) (int, error) {
	if a.closed.Load() {
		a.ctr.txErrors.Add(1)
		return 0, closedError(a.name, "write")
	}
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	b := &a.batch
	total := 0
	for len(frames) > 0 {
		k := min(len(frames), maxBatch)
		for i, f := range frames[:k] {
			if len(f) == 0 {
				a.ctr.txErrors.Add(1)
				return total, fmt.Errorf("afpacket %s: write: empty frame", a.name)
			}
			b.iov[i].Base = &f[0]
			b.iov[i].SetLen(len(f))
			b.hdrs[i] = mmsghdr{}
			b.hdrs[i].hdr.Iov = &b.iov[i]
			b.hdrs[i].hdr.SetIovlen(1)
		}
		b.count, b.sent, b.errno = k, 0, 0
		err := a.raw.Write(b.do)
		for i := range frames[:b.sent] {
			a.ctr.sent(len(frames[i]))
		}
		total += b.sent
		clear(b.iov[:k]) // drop the references to the callers' frames
		switch {
		case a.closed.Load():
			err = closedError(a.name, "write")
		case err != nil:
			err = fmt.Errorf("afpacket %s: write: %w", a.name, err)
		case b.errno != 0:
			err = fmt.Errorf("afpacket %s: sendmmsg frame of %d bytes: %w", a.name, len(frames[b.sent]), b.errno)
		}
		if err != nil {
			a.ctr.txErrors.Add(1)
			return total, err
		}
		frames = frames[k:]
	}
	return total, nil
}
