package link

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// OffloadTAP is a queue of a TAP device opened with virtio-net headers
// and offloads: the kernel hands it TCP super-frames of up to 64 KiB with
// partial checksums, and accepts them back, so a bulk transfer costs one
// read or write per super-frame instead of one per MTU-sized frame
// (docs/architecture.md §7: about 6 Gbit/s instead of 0.55-0.8 through the
// water-based TAP). It is opened with golang.org/x/sys/unix, since water
// cannot set IFF_VNET_HDR; TAP remains the portable adapter.
//
// Device set-up: IFF_TAP|IFF_NO_PI|IFF_VNET_HDR (plus IFF_MULTI_QUEUE
// for several queues), TUNSETVNETHDRSZ 10 (struct virtio_net_hdr, no
// num_buffers), and TUNSETOFFLOAD with TUN_F_CSUM|TUN_F_TSO4|TUN_F_TSO6|
// TUN_F_TSO_ECN: the device then advertises checksum offload and TSO, so
// the kernel's TCP builds super-frames towards it.
//
// Lifetime: like water, OpenOffloadTAP clears the persist flag
// (TUNSETPERSIST 0), so the device, with its addresses and routes,
// disappears when the last queue is closed, even one that `ip tuntap add`
// created. The vnet-header flag and the offloads are properties of the
// device, not of the descriptor: a persistent device keeps them after the
// process exits, and a later reader without vnet headers (water) would be
// handed super-frames it cannot tell from frames. Clearing persistence
// makes that impossible for devices this package opened.
//
// Each queue is its own BatchLink with its own non-blocking descriptor:
// one worker per queue. The kernel picks the queue of a frame it sends by
// flow (and steers a flow to the queue its frames were last written on),
// so a flow stays with one worker. ReadBatch and WriteBatch never block
// on an empty device (ReadBatch returns 0); ReadFrame and WriteFrame
// block in poll(2), as the descriptor is kept out of Go's netpoller
// (pollFD). Nothing allocates per frame.
type OffloadTAP struct {
	name    string
	queue   int
	raw     *pollFD
	fd      int
	closed  atomic.Bool
	ctr     counters
	readMu  sync.Mutex
	rx      tapVnetRx
	pkt     wire.Packet // ReadFrame's parse, under readMu
	writeMu sync.Mutex
	tx      tapVnetTx
}

// OffloadTAPConfig tunes OpenOffloadTAP.
type OffloadTAPConfig struct {
	// Queues is the number of queues to attach, one per worker. Zero or
	// one opens a single-queue device; more opens an IFF_MULTI_QUEUE
	// device (which an existing single-queue device of that name cannot
	// become: TUNSETIFF then fails with EINVAL).
	Queues int
}

// Constants of <linux/if_tun.h> that golang.org/x/sys/unix lacks.
const (
	tunFCsum   = 0x01 // TUN_F_CSUM: frames may carry partial checksums
	tunFTSO4   = 0x02 // TUN_F_TSO4
	tunFTSO6   = 0x04 // TUN_F_TSO6
	tunFTSOECN = 0x08 // TUN_F_TSO_ECN: super-frames may carry CWR
)

var _ BatchLink = (*OffloadTAP)(nil)

// OpenOffloadTAP creates (or attaches to) the TAP device name in the
// network namespace of the calling thread and returns one OffloadTAP per
// queue, all with the kernel-assigned name. The device starts down;
// bring it up and address it with ip(8) or netlink. It needs
// CAP_NET_ADMIN. Closing every queue removes the device (see OffloadTAP).
func OpenOffloadTAP(name string, cfg OffloadTAPConfig) ([]*OffloadTAP, error) {
	queues := max(cfg.Queues, 1)
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if queues > 1 {
		flags |= unix.IFF_MULTI_QUEUE
	}
	taps := make([]*OffloadTAP, 0, queues)
	fail := func(err error) ([]*OffloadTAP, error) {
		for _, t := range taps {
			t.Close()
		}
		return nil, fmt.Errorf("offload tap %s: %w", name, err)
	}
	for q := range queues {
		t, err := openTAPQueue(name, flags, q == 0)
		if err != nil {
			return fail(fmt.Errorf("queue %d: %w", q, err))
		}
		t.queue = q
		name = t.name // a template such as "qs%d" is now resolved
		taps = append(taps, t)
	}
	return taps, nil
}

// openTAPQueue opens /dev/net/tun and attaches it to the device; first
// also configures the device (vnet header size, offloads, persistence),
// which every queue shares.
func openTAPQueue(name string, flags uint16, first bool) (*OffloadTAP, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("name %q: %w", name, err)
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF: %w", err)
	}
	if first {
		if err := configureTAP(fd); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	// Kept out of Go's netpoller (see pollFD): the event loop's Poller
	// is the one watching the descriptor.
	raw, err := newPollFD(fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	t := &OffloadTAP{name: ifr.Name(), raw: raw, fd: fd}
	t.rx.overflow = make([]byte, MaxFrame)
	t.rx.iov[0].Base = &t.rx.hdr[0]
	t.rx.iov[0].SetLen(len(t.rx.hdr))
	t.rx.iov[2].Base = &t.rx.overflow[0]
	t.rx.iov[2].SetLen(len(t.rx.overflow))
	t.rx.do = t.rx.read
	t.tx.iov[0].Base = &t.tx.hdr[0]
	t.tx.iov[0].SetLen(len(t.tx.hdr))
	t.tx.do = t.tx.writev
	return t, nil
}

func configureTAP(fd int) error {
	if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, wire.VNetHdrLen); err != nil {
		return fmt.Errorf("TUNSETVNETHDRSZ: %w", err)
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunFCsum|tunFTSO4|tunFTSO6|tunFTSOECN); err != nil {
		return fmt.Errorf("TUNSETOFFLOAD: %w", err)
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 0); err != nil {
		return fmt.Errorf("TUNSETPERSIST: %w", err)
	}
	return nil
}

// tapVnetRx is the argument block of the prebuilt receive closure.
//
// Each read(2) on the device returns one frame behind its vnet header.
// readv(2) puts the header in hdr, the frame in the caller's buffer, and
// whatever does not fit there in overflow: a length beyond the caller's
// buffer means the frame did not fit (a TAP read gives no other sign of
// truncation; see tapRx).
type tapVnetRx struct {
	hdr      [wire.VNetHdrLen]byte
	iov      [3]unix.Iovec // header, caller's buffer, overflow
	overflow []byte
	// ReadBatch fills batch from count on and returns on EAGAIN; with a
	// nil batch (ReadFrame) one frame is read, waiting on EAGAIN.
	batch     *Batch
	count     int
	truncated int
	n         int // ReadFrame: frame length (may exceed the buffer)
	errno     syscall.Errno
	do        func(fd uintptr) bool
}

// readv reads one frame into iov[1]: its length, or a negative errno.
func (r *tapVnetRx) readv(fd uintptr) (int, syscall.Errno) {
	for {
		n, _, errno := unix.Syscall(unix.SYS_READV, fd, uintptr(unsafe.Pointer(&r.iov[0])), uintptr(len(r.iov)))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		if int(n) < wire.VNetHdrLen {
			return 0, unix.EINVAL // cannot happen with IFF_VNET_HDR set
		}
		return int(n) - wire.VNetHdrLen, 0
	}
}

// read is the RawConn.Read callback.
func (r *tapVnetRx) read(fd uintptr) (done bool) {
	if r.batch == nil {
		n, errno := r.readv(fd)
		if errno == unix.EAGAIN {
			return false // wait (pollFD: poll(2)) until readable
		}
		r.n, r.errno = n, errno
		return true
	}
	b := r.batch
	for r.count < len(b.Bufs) {
		buf := b.Bufs[r.count]
		r.iov[1].Base = &buf[0]
		r.iov[1].SetLen(len(buf))
		n, errno := r.readv(fd)
		if errno == unix.EAGAIN {
			break
		}
		if errno != 0 {
			r.errno = errno
			break
		}
		if n > len(buf) {
			r.truncated++ // the slot is reused for the next frame
			continue
		}
		b.Sizes[r.count] = n
		b.VNet[r.count], _ = wire.DecodeVNetHdr(r.hdr[:])
		r.count++
	}
	return true
}

// FD implements BatchLink.
func (t *OffloadTAP) FD() int { return t.fd }

// VNetHdr implements BatchLink: an OffloadTAP always carries vnet headers.
func (t *OffloadTAP) VNetHdr() bool { return true }

// Queue returns the index of this queue among those OpenOffloadTAP
// returned.
func (t *OffloadTAP) Queue() int { return t.queue }

// ReadBatch implements BatchLink: one read(2) per frame (a TAP has no
// recvmmsg), until the device is empty or the batch full. Each buffer
// should hold MaxFrame bytes, as super-frames reach 64 KiB.
func (t *OffloadTAP) ReadBatch(b *Batch) (int, error) {
	if err := checkBatch(b); err != nil {
		return 0, fmt.Errorf("tap %s: read: %w", t.name, err)
	}
	t.readMu.Lock()
	defer t.readMu.Unlock()
	r := &t.rx
	r.batch, r.count, r.truncated, r.errno = b, 0, 0, 0
	err := t.raw.Read(r.do)
	n := r.count
	r.batch, r.iov[1].Base = nil, nil
	t.ctr.rxTruncated.Add(uint64(r.truncated))
	for i := range n {
		t.ctr.received(b.Sizes[i])
	}
	switch {
	case t.closed.Load():
		return n, closedError(t.name, "read")
	case err != nil:
		return n, fmt.Errorf("tap %s: read: %w", t.name, err)
	case r.errno != 0:
		return n, fmt.Errorf("tap %s: readv: %w", t.name, r.errno)
	}
	return n, nil
}

// checkBatch rejects a Batch ReadBatch could not fill safely.
func checkBatch(b *Batch) error {
	if len(b.Sizes) < len(b.Bufs) || len(b.VNet) < len(b.Bufs) {
		return errors.New("batch has fewer Sizes or VNet entries than Bufs")
	}
	for _, buf := range b.Bufs {
		if len(buf) == 0 {
			return errEmptyBuffer
		}
	}
	return nil
}

// ReadFrame implements Link. It blocks until a frame arrives and returns
// it self-contained: a partial checksum is completed, and a super-frame
// (up to MaxFrame bytes, so size buf accordingly) is returned whole with
// its TCP checksum computed over all of it, a valid if oversized IPv4
// packet. The event loop's ReadBatch is the fast path; this one serves
// tools and tests that speak Link.
func (t *OffloadTAP) ReadFrame(buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, fmt.Errorf("tap %s: read: %w", t.name, errEmptyBuffer)
	}
	t.readMu.Lock()
	defer t.readMu.Unlock()
	for {
		t.rx.iov[1].Base = &buf[0]
		t.rx.iov[1].SetLen(len(buf))
		t.rx.errno = 0
		err := t.raw.Read(t.rx.do)
		t.rx.iov[1].Base = nil
		if t.closed.Load() {
			return 0, closedError(t.name, "read")
		}
		if err != nil {
			return 0, fmt.Errorf("tap %s: read: %w", t.name, err)
		}
		if t.rx.errno != 0 {
			return 0, fmt.Errorf("tap %s: readv: %w", t.name, t.rx.errno)
		}
		n := t.rx.n
		if n > len(buf) {
			t.ctr.rxTruncated.Add(1)
			continue
		}
		h, _ := wire.DecodeVNetHdr(t.rx.hdr[:])
		if err := completeFrame(buf[:n], h, &t.pkt); err != nil {
			return 0, fmt.Errorf("tap %s: read: %w", t.name, err)
		}
		t.ctr.received(n)
		return n, nil
	}
}

// tapVnetTx is the argument block of the prebuilt send closure: writev(2)
// of the header and the frame, one frame per call.
type tapVnetTx struct {
	hdr    [wire.VNetHdrLen]byte
	iov    [2]unix.Iovec
	frames [][]byte
	hdrs   []wire.VNetHdr // nil: all zero
	one    [1][]byte      // WriteFrame's list
	sent   int
	errno  syscall.Errno
	do     func(fd uintptr) bool
}

// writev is the RawConn.Write callback.
func (w *tapVnetTx) writev(fd uintptr) (done bool) {
	for w.sent < len(w.frames) {
		f := w.frames[w.sent]
		var h wire.VNetHdr
		if w.hdrs != nil {
			h = w.hdrs[w.sent]
		}
		h.Encode(w.hdr[:])
		w.iov[1].Base = &f[0]
		w.iov[1].SetLen(len(f))
		_, _, errno := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&w.iov[0])), uintptr(len(w.iov)))
		switch errno {
		case 0:
			w.sent++
		case unix.EINTR:
		case unix.EAGAIN:
			return false // the socket's send buffer is full: wait for room
		default:
			w.errno = errno
			return true
		}
	}
	return true
}

// WriteBatch implements BatchLink with one writev(2) per frame. The
// kernel takes super-frames and partial checksums as they are. A write
// fails with EIO while the device is down and with EINVAL for a header
// that does not match its frame.
func (t *OffloadTAP) WriteBatch(frames [][]byte, hdrs []wire.VNetHdr) (int, error) {
	if t.closed.Load() {
		t.ctr.txErrors.Add(1)
		return 0, closedError(t.name, "write")
	}
	if hdrs != nil && len(hdrs) < len(frames) {
		t.ctr.txErrors.Add(1)
		return 0, fmt.Errorf("tap %s: write: %d headers for %d frames", t.name, len(hdrs), len(frames))
	}
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	return t.write(frames, hdrs)
}

// write is WriteBatch under writeMu.
func (t *OffloadTAP) write(frames [][]byte, hdrs []wire.VNetHdr) (int, error) {
	// Stop before an empty frame, so the callback need not check.
	valid := len(frames)
	for i, f := range frames {
		if len(f) == 0 {
			valid = i
			break
		}
	}
	w := &t.tx
	w.frames, w.sent, w.errno = frames[:valid], 0, 0
	if hdrs != nil {
		w.hdrs = hdrs[:valid]
	}
	err := t.raw.Write(w.do)
	sent := w.sent
	w.frames, w.hdrs, w.iov[1].Base = nil, nil, nil
	for _, f := range frames[:sent] {
		t.ctr.sent(len(f))
	}
	switch {
	case t.closed.Load():
		err = closedError(t.name, "write")
	case err != nil:
		err = fmt.Errorf("tap %s: write: %w", t.name, err)
	case w.errno != 0:
		err = fmt.Errorf("tap %s: writev frame of %d bytes: %w", t.name, len(frames[sent]), w.errno)
	case sent < len(frames):
		err = fmt.Errorf("tap %s: write: empty frame", t.name)
	}
	if err != nil {
		t.ctr.txErrors.Add(1)
	}
	return sent, err
}

// WriteFrame implements Link: the frame goes with a zero vnet header, so
// it must be complete (checksummed, at most the MTU).
func (t *OffloadTAP) WriteFrame(frame []byte) error {
	if t.closed.Load() {
		t.ctr.txErrors.Add(1)
		return closedError(t.name, "write")
	}
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.tx.one[0] = frame
	_, err := t.write(t.tx.one[:], nil)
	t.tx.one[0] = nil
	return err
}

// Close implements Link. It is idempotent. Closing the last queue removes
// the device.
func (t *OffloadTAP) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	if err := t.raw.Close(); err != nil {
		return fmt.Errorf("tap %s: close: %w", t.name, err)
	}
	return nil
}

// Name implements Link; it is the device name the kernel assigned.
func (t *OffloadTAP) Name() string { return t.name }

// Stats implements Link. A super-frame counts as one frame.
func (t *OffloadTAP) Stats() Stats { return t.ctr.snapshot() }
