package link

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/songgao/water"
	"golang.org/x/sys/unix"
)

// TAP is a Link over a Linux TAP device opened with songgao/water.
//
// Lifetime: water clears the device's persist flag (TUNSETPERSIST 0) when it
// attaches. A TAP created beforehand with `ip tuntap add` is attached to,
// but it becomes non-persistent and vanishes when Close releases the last
// file descriptor, taking its addresses and routes with it. Offloads set on
// a persistent TAP outlive the process, so reset them (DisableOffloads).
//
// water cannot set IFF_VNET_HDR, so this adapter gets no TSO super-frames
// and moves one MTU-sized frame per system call; the offload-capable TAP
// on golang.org/x/sys/unix is OffloadTAP (docs/architecture.md §7).
//
// Reads and writes go through the device's *os.File on the Go poller and do
// not allocate. One ReadFrame and one WriteFrame may run at once.
type TAP struct {
	name   string
	dev    *water.Interface
	raw    syscall.RawConn
	closed atomic.Bool
	ctr    counters
	readMu sync.Mutex
	rx     tapRx
}

// tapRx is the argument block of the prebuilt receive closure.
//
// A TAP read copies what fits and returns the copied length, so truncation
// is invisible to read(2). readv(2) into the caller's buffer followed by an
// overflow buffer makes it visible: a length beyond len(buf) means the frame
// did not fit. The overflow buffer is allocated once, and the common case
// copies nothing extra.
type tapRx struct {
	iov      [2]unix.Iovec
	overflow []byte
	n        int
	errno    syscall.Errno
	do       func(fd uintptr) bool
}

// tapMaxFrame bounds what a TAP read can return: the largest MTU Linux
// allows on a TAP (65535) plus the Ethernet header and one VLAN tag.
const tapMaxFrame = 65535 + 14 + 4

var _ Link = (*TAP)(nil)

// OpenTAP creates (or attaches to) the TAP device name, in the network
// namespace of the calling thread. The device starts down; bring it up and
// address it with ip(8) or netlink. It needs CAP_NET_ADMIN.
func OpenTAP(name string) (*TAP, error) {
	dev, err := water.New(water.Config{
		DeviceType:             water.TAP,
		PlatformSpecificParams: water.PlatformSpecificParams{Name: name},
	})
	if err != nil {
		return nil, fmt.Errorf("tap %s: open: %w", name, err)
	}
	t := &TAP{name: dev.Name(), dev: dev}
	file, ok := dev.ReadWriteCloser.(*os.File)
	if !ok {
		dev.Close()
		return nil, fmt.Errorf("tap %s: water returned a %T, want *os.File", name, dev.ReadWriteCloser)
	}
	if t.raw, err = file.SyscallConn(); err != nil {
		dev.Close()
		return nil, fmt.Errorf("tap %s: %w", name, err)
	}
	t.rx.overflow = make([]byte, tapMaxFrame)
	t.rx.iov[1].Base = &t.rx.overflow[0]
	t.rx.iov[1].SetLen(len(t.rx.overflow))
	t.rx.do = t.rx.readv
	return t, nil
}

// ReadFrame implements Link.
func (t *TAP) ReadFrame(buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, fmt.Errorf("tap %s: read: %w", t.name, errEmptyBuffer)
	}
	t.readMu.Lock()
	defer t.readMu.Unlock()
	for {
		t.rx.iov[0].Base = &buf[0]
		t.rx.iov[0].SetLen(len(buf))
		err := t.raw.Read(t.rx.do)
		t.rx.iov[0].Base = nil
		if t.closed.Load() {
			return 0, closedError(t.name, "read")
		}
		if err != nil {
			return 0, fmt.Errorf("tap %s: read: %w", t.name, err)
		}
		if t.rx.errno != 0 {
			return 0, fmt.Errorf("tap %s: readv: %w", t.name, t.rx.errno)
		}
		if t.rx.n > len(buf) {
			t.ctr.rxTruncated.Add(1)
			continue
		}
		t.ctr.received(t.rx.n)
		return t.rx.n, nil
	}
}

// readv is the RawConn.Read callback.
func (r *tapRx) readv(fd uintptr) (done bool) {
	for {
		n, _, errno := unix.Syscall(unix.SYS_READV, fd,
			uintptr(unsafe.Pointer(&r.iov[0])), uintptr(len(r.iov)))
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // park on the poller until readable
		}
		r.n, r.errno = int(n), errno
		return true
	}
}

// WriteFrame implements Link. Writing to a TAP whose interface is down fails
// with EIO.
func (t *TAP) WriteFrame(frame []byte) error {
	if t.closed.Load() {
		t.ctr.txErrors.Add(1)
		return closedError(t.name, "write")
	}
	_, err := t.dev.Write(frame)
	if err != nil {
		t.ctr.txErrors.Add(1)
		if t.closed.Load() || errors.Is(err, os.ErrClosed) {
			return closedError(t.name, "write")
		}
		return fmt.Errorf("tap %s: write %d bytes: %w", t.name, len(frame), err)
	}
	t.ctr.sent(len(frame))
	return nil
}

// Close implements Link. The device disappears with it (see TAP).
func (t *TAP) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	if err := t.dev.Close(); err != nil {
		return fmt.Errorf("tap %s: close: %w", t.name, err)
	}
	return nil
}

// Name implements Link; it is the device name the kernel assigned.
func (t *TAP) Name() string { return t.name }

// Stats implements Link.
func (t *TAP) Stats() Stats { return t.ctr.snapshot() }
