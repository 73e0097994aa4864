package link

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// pollFD owns a non-blocking descriptor that is deliberately kept out of
// Go's netpoller. It implements syscall.RawConn, so the adapters run the
// same prebuilt callbacks through it as through a net.Conn's.
//
// Why not the netpoller: a daemon's loop waits for its links on its own
// Poller (one epoll_wait per pass). A descriptor that is also registered
// with Go's netpoller is watched twice, and every frame that arrives
// wakes the runtime's netpoll thread as well as the loop: in a profile of
// the front-end under bulk load, findRunnable and netpoll took about a
// third of its CPU for wake-ups that found nothing to run. Here only the
// loop's Poller watches the descriptor.
//
// The hot paths (ReadBatch, WriteBatch with room in the socket) never
// wait: their callbacks return true at EAGAIN. When a callback asks to
// wait (ReadFrame on an empty link, a write to a full socket), Read and
// Write block the thread in poll(2) on the descriptor and on an eventfd
// that Close writes, so Close ends a blocked call as closing a net.Conn
// does. That costs a thread while it waits, which only the one-frame Link
// calls of tools and tests, and a full device queue, pay.
type pollFD struct {
	fd   int
	wake int // eventfd: readable once Close began
	// ops is held shared by every Read, Write and Control and exclusively
	// by Close, which therefore closes the descriptor only once no call
	// is using it: a number the process may reuse is never touched.
	ops    sync.RWMutex
	closed atomic.Bool
	// The poll(2) arguments of a waiting Read and a waiting Write (one of
	// each can wait at once; callers serialise their reads and writes),
	// kept here so that waiting does not allocate.
	rdPoll, wrPoll [2]unix.PollFd
	// writeWait bounds each wait of a Write for room: with no room after
	// it, Write returns ErrNoRoom. Zero waits for ever.
	writeWait time.Duration
}

// ErrNoRoom: a socket had no room for a write within the link's wait
// (AFPacketConfig.WriteWait): its device is not transmitting. The frames
// not sent are dropped; TCP retransmits them.
var ErrNoRoom = errors.New("no room in the socket: the device is not transmitting")

// newPollFD takes over fd, making it non-blocking. On error fd is left
// open for the caller to close.
func newPollFD(fd int) (*pollFD, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("set non-blocking: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	p := &pollFD{fd: fd, wake: wake}
	p.rdPoll = [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
	p.wrPoll = [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}, {Fd: int32(wake), Events: unix.POLLIN}}
	return p, nil
}

// Control runs f with the descriptor, unless the pollFD is closed.
func (p *pollFD) Control(f func(fd uintptr)) error {
	p.ops.RLock()
	defer p.ops.RUnlock()
	if p.closed.Load() {
		return net.ErrClosed
	}
	f(uintptr(p.fd))
	return nil
}

// Read runs f until it returns true, waiting for readability between
// calls. It returns net.ErrClosed once Close began.
func (p *pollFD) Read(f func(fd uintptr) (done bool)) error { return p.run(f, &p.rdPoll, -1) }

// Write runs f until it returns true, waiting for room between calls,
// each time for at most writeWait (ErrNoRoom).
func (p *pollFD) Write(f func(fd uintptr) (done bool)) error {
	wait := -1
	if p.writeWait > 0 {
		wait = max(1, int(p.writeWait.Milliseconds()))
	}
	return p.run(f, &p.wrPoll, wait)
}

// run calls f until it returns true, polling fds between calls for at
// most waitMS milliseconds each (-1: no limit).
func (p *pollFD) run(f func(uintptr) bool, fds *[2]unix.PollFd, waitMS int) error {
	p.ops.RLock()
	defer p.ops.RUnlock()
	for {
		if p.closed.Load() {
			return net.ErrClosed
		}
		if f(uintptr(p.fd)) {
			return nil
		}
		// Level-triggered: a descriptor that became ready between f's
		// EAGAIN and this call is reported at once.
		n, err := unix.Poll(fds[:], waitMS)
		switch {
		case err == unix.EINTR:
		case err != nil:
			return fmt.Errorf("poll: %w", err)
		case n == 0:
			return fmt.Errorf("%w (%v)", ErrNoRoom, time.Duration(waitMS)*time.Millisecond)
		}
	}
}

// Close ends any waiting Read or Write and closes the descriptor once no
// call uses it. It is idempotent.
func (p *pollFD) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	var one [8]byte
	one[0] = 1 // any non-zero count; the eventfd only has to become readable
	unix.Write(p.wake, one[:])
	p.ops.Lock()
	defer p.ops.Unlock()
	err := unix.Close(p.fd)
	unix.Close(p.wake)
	return err
}
