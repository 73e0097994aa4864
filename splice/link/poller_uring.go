package link

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A hold in io_uring_enter(2) instead of epoll_pwait2(2), for a loop whose
// thread also drives a UringTAP (the shim's workers).
//
// The UringTAP's multishot read runs as task work of the thread that
// submitted it: each frame the device gets queues work on that thread and
// wakes it. A thread asleep in epoll_pwait2 then returns EINTR (pending
// task work counts as a signal), runs the read on its way out of the
// kernel and must sleep again: one system call per frame that arrives
// during a hold, about what the hold was to save. (Measured under bulk
// load: a quarter of the shim's epoll_pwait calls ended in EINTR, with no
// signal sent to the process.) A thread asleep in io_uring_enter's wait
// for completions runs pending task work, any ring's, inside the kernel
// and goes back to sleep without returning, so the frames that arrive
// during such a hold cost no system call.
//
// The hold waits for one completion on a small ring of its own: a
// one-shot poll (IORING_OP_POLL_ADD) on each descriptor Hold watches (the
// eventfd and those of Add, not those of AddHeld), with the hold's time
// as the wait's timeout (IORING_ENTER_EXT_ARG). Each completion names its
// descriptor, so the hold reports tokens without asking epoll. A poll
// armed when its descriptor is already readable completes at once, so
// the hold ends at once for what is waiting, as with epoll. A poll still
// armed when a hold times out stays armed for the next hold; one that
// completed after its hold ended (the loop then read its descriptor
// after a Wait) is dropped by the next hold, which arms it again and so
// looks at the descriptor as it is then.
//
// A descriptor registered with AddLate is polled too, but its completion
// does not end the hold: the hold waits again for the time left (one more
// io_uring_enter) and reports it when it ends. For the shim's wire socket
// that is one system call per burst of client ACKs during a hold, where
// ending the hold cost a pass (a recvmmsg, the TAP write's enter, the
// next hold's enter) and leaving the wire out of the hold would cost a
// recvmmsg after every hold to find out whether anything came.

// Constants of <linux/io_uring.h> the hold needs besides those of
// tapuring_ring.go.
const (
	uringOpPollAdd   = 6
	uringEnterExtArg = 1 << 3
	uringFeatExtArg  = 1 << 8
	// ringHoldEntries bounds the descriptors a ring hold watches.
	ringHoldEntries = 16
)

// urgentFD is a descriptor Hold watches, with its token.
type urgentFD struct {
	fd    int
	token uint32
	late  bool // AddLate: a ring hold reports it when it ends
	armed bool // its poll is in the ring's kernel side (ring hold)
	fired bool // late: its poll completed during the current hold
}

// uringGetEventsArg is struct io_uring_getevents_arg.
type uringGetEventsArg struct {
	sigmask     uint64
	sigmaskSize uint32
	minWaitUsec uint32
	ts          uint64
}

// kernelTimespec is struct __kernel_timespec.
type kernelTimespec struct {
	sec, nsec int64
}

// ringHold is the state of the io_uring hold.
type ringHold struct {
	r      *uring
	arg    uringGetEventsArg
	ts     kernelTimespec
	enters atomic.Uint64 // for tests and statistics
}

// errNoExtArg: the kernel (before 5.11) cannot bound a wait of
// io_uring_enter with a timeout.
var errNoExtArg = errors.New("io_uring_enter has no timeout argument (Linux 5.11)")

// HoldInRing makes Hold wait in io_uring_enter(2) on a ring of its own
// instead of in epoll_pwait2(2) (see above): for a loop whose thread
// submits io_uring reads that complete as task work (a UringTAP's). It
// fails, and Hold stays as it was, where io_uring is unavailable or
// more than 16 descriptors are registered with Add. Call it from the
// loop's goroutine, after the Adds and before the first Hold.
func (p *Poller) HoldInRing() error {
	if p.hold != nil {
		return nil
	}
	if len(p.urgent) > ringHoldEntries {
		return fmt.Errorf("poller: hold in io_uring: %d descriptors, at most %d", len(p.urgent), ringHoldEntries)
	}
	var params uringParams
	fd, err := uringSetup(ringHoldEntries, &params)
	if err != nil {
		return fmt.Errorf("poller: io_uring_setup: %w", err)
	}
	r := &uring{fd: fd}
	if err := r.mapQueues(&params); err != nil {
		r.close()
		return fmt.Errorf("poller: %w", err)
	}
	if params.features&uringFeatExtArg == 0 {
		r.close()
		return fmt.Errorf("poller: %w", errNoExtArg)
	}
	h := &ringHold{r: r}
	h.arg.ts = uint64(uintptr(unsafe.Pointer(&h.ts)))
	p.hold = h
	return nil
}

// HoldEnters is how many io_uring_enter calls the ring's holds made (0
// without HoldInRing).
func (p *Poller) HoldEnters() uint64 {
	if p.hold == nil {
		return 0
	}
	return p.hold.enters.Load()
}

// holdInRing is Hold on the ring.
func (p *Poller) holdInRing(d time.Duration, ready []uint32) (int, error) {
	h := p.hold
	deadline := time.Now().Add(d)
	// Completions of polls that fired after their hold ended are stale:
	// the loop has read those descriptors since. Arm them again.
	p.reapHoldPolls(nil)
	for i := range p.urgent {
		u := &p.urgent[i]
		if !u.armed && h.r.room() > 0 {
			e := h.r.next(uringOpPollAdd, uint64(i)+1)
			e.fd, e.flags = int32(u.fd), 0
			e.opFlags = uint32(unix.POLLIN) // poll32_events
			u.armed = true
		}
	}
	for {
		h.ts = kernelTimespec{sec: int64(d / time.Second), nsec: int64(d % time.Second)}
		atomic.StoreUint32(h.r.sqTail, h.r.tail)
		h.enters.Add(1)
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(h.r.fd), uintptr(h.r.pending), 1,
			uringEnterGetEvents|uringEnterExtArg, uintptr(unsafe.Pointer(&h.arg)), unsafe.Sizeof(h.arg))
		// The kernel's SQ head says what it took, also on an error.
		h.r.pending = h.r.tail - atomic.LoadUint32(h.r.sqHead)
		switch errno {
		case 0, unix.ETIME, unix.EINTR:
			// EINTR: a signal (task work does not end this wait).
		default:
			return 0, fmt.Errorf("poller: hold: io_uring_enter: %w", errno)
		}
		if p.lateOnly() && errno != unix.ETIME {
			// Only late descriptors (or a signal): hold on for the time left.
			if d = max(time.Until(deadline), 0); d > 0 {
				continue
			}
		}
		return p.reapHoldPolls(ready), nil
	}
}

// lateOnly reaps the completions of late descriptors' polls (marking them
// fired) and reports whether no other completion waits.
func (p *Poller) lateOnly() bool {
	r := p.hold.r
	for c := r.peek(); c != nil; c = r.peek() {
		i := int(c.userData) - 1
		if i < 0 || i >= len(p.urgent) || !p.urgent[i].late {
			return false
		}
		p.urgent[i].armed, p.urgent[i].fired = false, true
		r.advance()
	}
	return true
}

// reapHoldPolls takes the ring's completions: each disarms its poll and,
// with ready not nil, reports its descriptor's token (consuming a
// wake-up), as many as fit, after the late descriptors that fired during
// the hold; those that do not fit are reported by the next Wait or Hold,
// their descriptors being still readable.
func (p *Poller) reapHoldPolls(ready []uint32) int {
	n := 0
	for i := range p.urgent {
		if u := &p.urgent[i]; u.fired {
			u.fired = false
			if n < len(ready) {
				ready[n] = u.token
				n++
			}
		}
	}
	for c := p.hold.r.peek(); c != nil; c = p.hold.r.peek() {
		if i := int(c.userData) - 1; i >= 0 && i < len(p.urgent) {
			p.urgent[i].armed = false
			if token := p.urgent[i].token; n < len(ready) {
				if token == WakeToken {
					unix.Read(p.eventfd, p.drain[:])
				}
				ready[n] = token
				n++
			}
		}
		p.hold.r.advance()
	}
	return n
}
