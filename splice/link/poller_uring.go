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
	uringOpSendmsg   = 9
	uringEnterExtArg = 1 << 3
	uringFeatExtArg  = 1 << 8
	uringFeatCQESkip = 1 << 11
	// uringSetupCoopTaskrun is IORING_SETUP_COOP_TASKRUN.
	uringSetupCoopTaskrun = 1 << 8
	// uringSQECQESkipSuccess: a request that succeeds posts no completion.
	uringSQECQESkipSuccess = 1 << 6
	// ringHoldEntries bounds the descriptors a ring hold watches.
	ringHoldEntries = 16
	// ringEntries is the size of the poller's ring: the polls of
	// ringHoldEntries descriptors and a batch of sends (sendring.go).
	ringEntries = 128
)

// urgentFD is a descriptor Hold watches, with its token.
type urgentFD struct {
	fd    int
	token uint32
	late  bool // AddLate: a ring hold reports it when it ends
	// held: AddHeld, not watched by a hold; only a wait in the ring
	// (WaitInRing) polls it, and if that poll is still armed when a hold
	// begins, the hold treats it as late.
	held  bool
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
	// wait: Wait too sleeps in the ring (WaitInRing), polling every
	// descriptor; cqeSkip: the kernel can leave out the completions of
	// requests that succeeded (5.17), which sending in the ring needs.
	wait, cqeSkip bool
	// sends is the link whose queued frames each wait in the ring sends
	// (SendWith), sending the number of them the current wait put in
	// the ring.
	sends   *AFPacket
	sending int
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
	// Cooperative task running (5.19): a poll that completes while the
	// loop runs Go code is posted at the loop's next system call, which
	// comes within the pass, instead of interrupting it (as a signal
	// would) to post it at once; the loop looks at the ring only when it
	// enters it anyway. Older kernels refuse the flag: set up without.
	params := uringParams{flags: uringSetupCoopTaskrun}
	fd, err := uringSetup(ringEntries, &params)
	if err == unix.EINVAL {
		params = uringParams{}
		fd, err = uringSetup(ringEntries, &params)
	}
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
	h := &ringHold{r: r, cqeSkip: params.features&uringFeatCQESkip != 0}
	p.hold = h
	return nil
}

// WaitInRing makes Wait, too, sleep in io_uring_enter on the ring of
// HoldInRing (which it sets up if need be), with a one-shot poll on
// every registered descriptor, those of AddHeld included. A loop that
// waits in the ring can hand it the frames it wrote in the pass just
// ended (SendWith), so that sending them and waiting for the next pass
// is one system call where it was two (sendmmsg, then epoll_wait).
// Call it from the loop's goroutine, after the Adds.
func (p *Poller) WaitInRing() error {
	if err := p.HoldInRing(); err != nil {
		return err
	}
	p.hold.wait = true
	return nil
}

// SendWith makes every Hold (with WaitInRing, every Wait too) first send
// the frames queued on a with QueueBatch, in the same io_uring_enter(2):
// each as an IORING_OP_SENDMSG with MSG_DONTWAIT (tried once, in the
// call; a full socket fails it rather than leave it to finish later)
// whose completion is posted only if it fails. A Wait in epoll sends
// them with sendmmsg before it waits. It needs HoldInRing and a kernel
// that can skip completions (5.17); without, it fails and the caller
// writes as before.
func (p *Poller) SendWith(a *AFPacket) error {
	if p.hold == nil {
		return errors.New("poller: send with the wait: the poller does not hold in io_uring (HoldInRing)")
	}
	if !p.hold.cqeSkip {
		return errors.New("poller: send with the wait: the kernel cannot skip successful completions (Linux 5.17)")
	}
	if p.hold.sends != nil {
		return errors.New("poller: send with the wait: the poller sends with a link already")
	}
	if err := a.canQueue(); err != nil {
		return fmt.Errorf("poller: send with the wait: %w", err)
	}
	if err := a.registerSendFile(p.hold.r); err != nil {
		return err
	}
	p.hold.sends = a
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
	return p.ringWait(d, ready, true)
}

// ringWait is Wait (hold false; d < 0 waits for ever) or Hold on the
// ring. The frames queued on the SendWith link go first in the same
// io_uring_enter.
func (p *Poller) ringWait(d time.Duration, ready []uint32, hold bool) (int, error) {
	h := p.hold
	if !hold && d > 0 {
		// Wait's timeout in whole milliseconds, rounded up, as epoll's:
		// a loop's deadlines are timers that may run a little late, and
		// one wake-up then serves all those due within the millisecond.
		d = time.Duration(epollMillis(d)) * time.Millisecond
	}
	var deadline time.Time
	if d > 0 {
		deadline = time.Now().Add(d)
	}
	// Completions of polls that fired after their wait ended are stale:
	// the loop has read those descriptors since. Arm them again.
	p.reapHoldPolls(nil)
	if h.sends != nil {
		h.sending = h.sends.queueSends(h.r)
	}
	for i := range p.urgent {
		u := &p.urgent[i]
		if !u.armed && (!u.held || !hold) && h.r.room() > 0 {
			e := h.r.next(uringOpPollAdd, uint64(i)+1)
			e.fd, e.flags = int32(u.fd), 0
			e.opFlags = uint32(unix.POLLIN) // poll32_events
			u.armed = true
		}
	}
	for {
		flags, wait := uintptr(uringEnterGetEvents|uringEnterExtArg), uintptr(1)
		arg, argSize := uintptr(unsafe.Pointer(&h.arg)), unsafe.Sizeof(h.arg)
		switch {
		case d < 0:
			h.arg.ts = 0 // no timeout
		case d == 0 && !hold:
			flags, wait, arg, argSize = 0, 0, 0, 0 // submit and look, do not sleep
		default:
			h.ts = kernelTimespec{sec: int64(d / time.Second), nsec: int64(d % time.Second)}
			h.arg.ts = uint64(uintptr(unsafe.Pointer(&h.ts)))
		}
		atomic.StoreUint32(h.r.sqTail, h.r.tail)
		h.enters.Add(1)
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(h.r.fd), uintptr(h.r.pending), wait, flags, arg, argSize)
		// The kernel's SQ head says what it took, also on an error.
		h.r.pending = h.r.tail - atomic.LoadUint32(h.r.sqHead)
		if h.sending > 0 && h.r.pending > 0 {
			p.retract()
		}
		switch errno {
		case 0, unix.ETIME, unix.EINTR:
			// EINTR: a signal (task work does not end this wait).
		case unix.EAGAIN, unix.EBUSY:
			// Short of memory, or completions not yet reaped: what was
			// not taken is back out of the ring (retract); look at the
			// CQ and go on.
		default:
			p.reapHoldPolls(nil)
			p.sendsDone()
			return 0, fmt.Errorf("poller: wait: io_uring_enter: %w", errno)
		}
		if errno != unix.ETIME && p.lateOnly(hold) {
			// Only late descriptors (or a signal): wait on for the time left.
			switch {
			case d < 0:
				continue
			case d > 0:
				if d = max(time.Until(deadline), 0); d > 0 {
					continue
				}
			}
		}
		n := p.reapHoldPolls(ready)
		p.sendsDone()
		return n, nil
	}
}

// retract takes back the entries the kernel did not take (it stopped
// short: memory, a full CQ) out of the ring, which without SQPOLL reads
// entries only inside the call. Their polls are disarmed; the sends
// among them, the last ones of the batch, go with sendmmsg before the
// wait returns (sendsDone), so that the frames still leave in order.
func (p *Poller) retract() {
	h := p.hold
	first := -1
	for pos := h.r.tail - h.r.pending; pos != h.r.tail; pos++ {
		ud := h.r.sqes[pos&h.r.sqMask].userData
		if ud&sendTag != 0 {
			if m := int(ud &^ sendTag); first < 0 || m < first {
				first = m
			}
		} else if i := int(ud) - 1; i >= 0 && i < len(p.urgent) {
			p.urgent[i].armed = false
		}
	}
	h.r.tail -= h.r.pending
	h.r.pending = 0
	if first >= 0 {
		h.sends.notTaken(first)
	}
}

// sendsDone ends the sends of the wait: the kernel ran them all in its
// first io_uring_enter (MSG_DONTWAIT let none wait), and the wait has
// reaped the completions of those that failed; the link counts what went
// and empties its queue.
func (p *Poller) sendsDone() {
	if h := p.hold; h.sending > 0 {
		h.sends.sendsTaken()
		h.sending = 0
	}
}

// sendFailed hands a failed send's completion to its link.
func (p *Poller) sendFailed(c *uringCQE) {
	if a := p.hold.sends; a != nil {
		a.sendFailed(c)
	}
}

// lateOnly reaps the completions of late descriptors' polls (marking them
// fired) and of failed sends, and reports whether no other completion
// waits. In a hold, a held descriptor's poll (armed by an earlier Wait)
// counts as late.
func (p *Poller) lateOnly(hold bool) bool {
	r := p.hold.r
	for c := r.peek(); c != nil; c = r.peek() {
		if c.userData&sendTag != 0 {
			// A send failed: end the wait, so that what it held back
			// goes now (sendsDone).
			p.sendFailed(c)
			r.advance()
			return false
		}
		i := int(c.userData) - 1
		if i < 0 || i >= len(p.urgent) || !hold || !p.urgent[i].late && !p.urgent[i].held {
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
// their descriptors being still readable. A failed send's completion is
// counted by its link.
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
		if c.userData&sendTag != 0 {
			p.sendFailed(c)
		} else if i := int(c.userData) - 1; i >= 0 && i < len(p.urgent) {
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
