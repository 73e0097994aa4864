package link

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring ABI, written by hand on golang.org/x/sys/unix (which has the
// system call numbers but not the structures): io_uring_setup(2) returns a
// descriptor whose submission queue (SQ), completion queue (CQ) and array
// of submission entries (SQEs) are mapped into this process. Userspace
// fills SQEs and moves the SQ tail; io_uring_enter(2) makes the kernel
// consume them and, with GETEVENTS, waits for completions; the kernel
// posts completions (CQEs) and moves the CQ tail, userspace moves the CQ
// head. The heads and tails are shared with the kernel, so they are read
// and written with atomics (Go's are sequentially consistent, at least the
// acquire/release order the ABI asks for).

// Constants of <linux/io_uring.h>.
const (
	uringOffSQRing = 0
	uringOffCQRing = 0x8000000
	uringOffSQEs   = 0x10000000

	uringFeatSingleMmap = 1 << 0

	uringOpNop           = 0
	uringOpWritev        = 2
	uringOpAsyncCancel   = 14
	uringOpReadMultishot = 49

	uringSQEFixedFile    = 1 << 0
	uringSQEIOLink       = 1 << 2
	uringSQEBufferSelect = 1 << 5

	uringCQEFBuffer     = 1 << 0
	uringCQEFMore       = 1 << 1
	uringCQEBufferShift = 16

	uringEnterGetEvents = 1 << 0

	uringCancelAll = 1 << 0
	uringCancelAny = 1 << 2

	uringRegisterFiles    = 2
	uringUnregisterFiles  = 3
	uringRegisterProbe    = 8
	uringRegisterPbufRing = 22

	uringOpSupported = 1 << 0 // io_uring_probe_op.flags
)

type uringSQOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type uringCQOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// uringParams is struct io_uring_params (120 bytes).
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  uringSQOffsets
	cqOff                                                                  uringCQOffsets
}

// uringSQE is struct io_uring_sqe (64 bytes).
type uringSQE struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFDIn  int32
	addr3       uint64
	pad         uint64
}

// uringCQE is struct io_uring_cqe (16 bytes, without the 32-byte variant).
type uringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

// Compile-time checks of the layouts the kernel expects.
var (
	_ [120 - unsafe.Sizeof(uringParams{})]byte
	_ [unsafe.Sizeof(uringParams{}) - 120]byte
	_ [64 - unsafe.Sizeof(uringSQE{})]byte
	_ [unsafe.Sizeof(uringSQE{}) - 64]byte
	_ [16 - unsafe.Sizeof(uringCQE{})]byte
	_ [unsafe.Sizeof(uringCQE{}) - 16]byte
)

// uringSetup is io_uring_setup(2); a variable so that tests can make it
// fail as a kernel without io_uring, or with it disabled, would.
var uringSetup = func(entries uint32, p *uringParams) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// uring is one io_uring instance used by one owner at a time (the caller
// serialises). SQEs are prepared with next and handed to the kernel by
// enter; CQEs are read with peek and released with advance.
type uring struct {
	fd                   int
	sqMem, cqMem, sqeMem []byte
	sqHead, sqTail       *uint32
	sqMask               uint32
	sqEntries            uint32
	sqes                 []uringSQE
	cqHead, cqTail       *uint32
	cqMask               uint32
	cqes                 []uringCQE
	// tail is the SQ tail including prepared entries; pending of them
	// have not been submitted by an enter yet.
	tail    uint32
	pending uint32
	// fixedFile: the device's descriptor is registered as file 0, which
	// saves the kernel a descriptor lookup per request.
	fixedFile bool
	target    int32  // the descriptor (or registered index) requests use
	enters    uint64 // io_uring_enter calls, for tests and statistics
}

// newURing sets up a ring of entries submission entries (a power of two)
// and maps its queues.
func newURing(entries uint32) (*uring, error) {
	var p uringParams
	fd, err := uringSetup(entries, &p)
	if err != nil {
		return nil, fmt.Errorf("io_uring_setup: %w", err)
	}
	r := &uring{fd: fd}
	if err := r.mapQueues(&p); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *uring) mapQueues(p *uringParams) error {
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(uringCQE{})))
	single := p.features&uringFeatSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	r.sqMem, err = unix.Mmap(r.fd, uringOffSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("io_uring: map SQ ring: %w", err)
	}
	if single {
		r.cqMem = r.sqMem
	} else if r.cqMem, err = unix.Mmap(r.fd, uringOffCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("io_uring: map CQ ring: %w", err)
	}
	sqeSize := int(p.sqEntries) * int(unsafe.Sizeof(uringSQE{}))
	if r.sqeMem, err = unix.Mmap(r.fd, uringOffSQEs, sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("io_uring: map SQEs: %w", err)
	}
	sq, cq := unsafe.Pointer(&r.sqMem[0]), unsafe.Pointer(&r.cqMem[0])
	r.sqHead = (*uint32)(unsafe.Add(sq, p.sqOff.head))
	r.sqTail = (*uint32)(unsafe.Add(sq, p.sqOff.tail))
	r.sqMask = *(*uint32)(unsafe.Add(sq, p.sqOff.ringMask))
	r.sqEntries = p.sqEntries
	// SQE i always sits in array slot i: entries are used in ring order.
	array := unsafe.Slice((*uint32)(unsafe.Add(sq, p.sqOff.array)), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.sqes = unsafe.Slice((*uringSQE)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqHead = (*uint32)(unsafe.Add(cq, p.cqOff.head))
	r.cqTail = (*uint32)(unsafe.Add(cq, p.cqOff.tail))
	r.cqMask = *(*uint32)(unsafe.Add(cq, p.cqOff.ringMask))
	r.cqes = unsafe.Slice((*uringCQE)(unsafe.Add(cq, p.cqOff.cqes)), p.cqEntries)
	r.tail = atomic.LoadUint32(r.sqTail)
	return nil
}

// useFile makes fd the descriptor of every request: registered as fixed
// file 0 when the kernel allows, plainly otherwise.
func (r *uring) useFile(fd int) {
	files := [1]int32{int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uringRegisterFiles,
		uintptr(unsafe.Pointer(&files[0])), 1, 0, 0)
	r.fixedFile = errno == 0
	r.target = int32(fd)
	if r.fixedFile {
		r.target = 0
	}
}

// supports asks the kernel whether it knows opcode op
// (IORING_REGISTER_PROBE).
func (r *uring) supports(op uint8) bool {
	// struct io_uring_probe: last_op, ops_len, resv, resv2[3], then
	// ops_len entries of struct io_uring_probe_op (op, resv, flags, resv2).
	var probe [16 + 256*8]byte
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uringRegisterProbe,
		uintptr(unsafe.Pointer(&probe[0])), 256, 0, 0)
	if errno != 0 || int(op) > int(probe[0]) {
		return false
	}
	entry := probe[16+int(op)*8:]
	return entry[0] == op && binary.NativeEndian.Uint16(entry[2:])&uringOpSupported != 0
}

// registerBufRing registers entries provided-buffer ring entries at ring
// (page-aligned memory) as buffer group group (IORING_REGISTER_PBUF_RING).
func (r *uring) registerBufRing(ring unsafe.Pointer, entries int, group uint16) error {
	// struct io_uring_buf_reg: ring_addr, ring_entries, bgid, flags, resv[3].
	var reg [40]byte
	binary.NativeEndian.PutUint64(reg[0:], uint64(uintptr(ring)))
	binary.NativeEndian.PutUint32(reg[8:], uint32(entries))
	binary.NativeEndian.PutUint16(reg[12:], group)
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uringRegisterPbufRing,
		uintptr(unsafe.Pointer(&reg[0])), 1, 0, 0)
	if errno != 0 {
		return fmt.Errorf("register provided-buffer ring: %w", errno)
	}
	return nil
}

// room is how many more SQEs can be prepared before an enter.
func (r *uring) room() uint32 {
	return r.sqEntries - (r.tail - atomic.LoadUint32(r.sqHead))
}

// next returns a zeroed SQE for the target file, published to the kernel
// at the next enter. The caller checked room.
func (r *uring) next(op uint8, userData uint64) *uringSQE {
	e := &r.sqes[r.tail&r.sqMask]
	*e = uringSQE{opcode: op, fd: r.target, userData: userData}
	if r.fixedFile {
		e.flags = uringSQEFixedFile
	}
	r.tail++
	r.pending++
	return e
}

// enter submits the prepared SQEs and, with wait > 0, waits until at
// least wait CQEs are in the queue (or a signal interrupts the wait:
// callers check the CQ and call again).
func (r *uring) enter(wait uint32) error {
	atomic.StoreUint32(r.sqTail, r.tail)
	flags := uintptr(0)
	if wait > 0 {
		flags = uringEnterGetEvents
	}
	for {
		r.enters++
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(r.pending), uintptr(wait), flags, 0, 0)
		switch errno {
		case 0:
			r.pending -= min(uint32(n), r.pending)
			return nil
		case unix.EINTR:
			if r.pending == 0 || wait > 0 {
				return nil // nothing lost: the caller looks at the CQ and may call again
			}
		case unix.EAGAIN, unix.EBUSY:
			// The kernel is short of memory or the CQ is full of
			// completions not yet reaped; the caller reaps and retries.
			return nil
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
}

// peek returns the oldest unreaped CQE, or nil.
func (r *uring) peek() *uringCQE {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return nil
	}
	return &r.cqes[head&r.cqMask]
}

// advance releases the CQE peek returned.
func (r *uring) advance() {
	atomic.StoreUint32(r.cqHead, atomic.LoadUint32(r.cqHead)+1)
}

// close unmaps the queues and closes the ring, which cancels whatever is
// still in flight. The registered file is unregistered first: the ring's
// teardown runs later in a kernel worker, and until then its reference
// would keep the device open (a TAP would outlive its last queue, and a
// shim restarted at once would attach to the dying device).
func (r *uring) close() error {
	if r.fixedFile {
		unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uringUnregisterFiles, 0, 0, 0, 0)
		r.fixedFile = false
	}
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
	}
	if r.cqMem != nil && (r.sqMem == nil || &r.cqMem[0] != &r.sqMem[0]) {
		unix.Munmap(r.cqMem) // not the single mapping of both rings
	}
	if r.sqMem != nil {
		unix.Munmap(r.sqMem)
	}
	r.sqeMem, r.cqMem, r.sqMem = nil, nil, nil
	return unix.Close(r.fd)
}
