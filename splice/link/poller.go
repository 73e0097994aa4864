package link

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Poller waits for several descriptors at once for a single-threaded
// event loop: the daemon's loop registers its links' FDs, waits until one
// is readable or the engine's next deadline passes, then drains every
// ready link with ReadBatch. It is a thin epoll(7) wrapper; Wait does not
// allocate.
//
// Registrations are level-triggered: a link the loop did not drain (its
// Batch was full) is reported again by the next Wait, so no frame waits
// for the next one to arrive.
//
// Wait and Add belong to the loop's goroutine; Wake may be called from any
// goroutine (a control connection, a signal handler) to make a pending or
// the next Wait return early.
//
// Hold is the loop's way to let a busy link fill up (receive moderation):
// it sleeps for a given time, ended early only by Wake or by a descriptor
// registered with Add, not by one registered with AddHeld. With
// HoldInRing it sleeps in io_uring_enter instead of epoll_pwait2
// (poller_uring.go), and a descriptor registered with AddLate is reported
// when the hold ends without ending it.
type Poller struct {
	epfd    int
	eventfd int
	// urgentfd is a second epoll instance watching the eventfd and the
	// descriptors of Add, not those of AddHeld: Hold waits on it.
	urgentfd int
	holdTS   unix.Timespec // Hold's timeout, here so that it does not escape
	// hold, when set (HoldInRing), makes Hold wait in io_uring_enter
	// (poller_uring.go), on urgent: every registered descriptor, those
	// of AddHeld marked held (not in urgentfd); with WaitInRing, Wait too.
	hold   *ringHold
	urgent []urgentFD
	events []unix.EpollEvent
	drain  [8]byte
	// one is the eventfd increment Wake writes, filled once by NewPoller
	// and only read after: a local array would escape to the heap through
	// the write syscall under the race detector, one allocation per Wake.
	one [8]byte
	// closeMu makes Close wait for a running Wake, so Wake never writes
	// to a descriptor number that Close released and the process reused.
	closeMu sync.RWMutex
	closed  bool
}

// WakeToken is the token Wait reports after Wake. Add refuses it.
const WakeToken = math.MaxUint32

// pollerEvents bounds the events one Wait collects; ready descriptors
// beyond it are reported by the next Wait (level-triggered).
const pollerEvents = 64

// NewPoller creates an epoll instance with its wake-up eventfd registered.
func NewPoller() (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("poller: epoll_create1: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("poller: eventfd: %w", err)
	}
	ufd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		unix.Close(efd)
		return nil, fmt.Errorf("poller: epoll_create1: %w", err)
	}
	p := &Poller{epfd: epfd, eventfd: efd, urgentfd: ufd, events: make([]unix.EpollEvent, pollerEvents)}
	binary.NativeEndian.PutUint64(p.one[:], 1)
	if err := p.add(efd, WakeToken, true); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Add registers fd for readability; Wait and Hold report it with token.
// The caller keeps ownership of fd and must not close it before the
// Poller (epoll forgets a closed descriptor only once no copy of it is
// open).
func (p *Poller) Add(fd int, token uint32) error { return p.addChecked(fd, token, true, false) }

// AddHeld registers fd as Add does, except that Hold does not watch it:
// the link whose frames a hold lets accumulate.
func (p *Poller) AddHeld(fd int, token uint32) error { return p.addChecked(fd, token, false, false) }

// AddLate registers fd as Add does, except that a hold in io_uring
// (HoldInRing) does not end when fd becomes readable but reports it when
// it ends: a link whose frames may wait for the hold but should not need
// a system call to find out whether they came. Without HoldInRing, fd
// ends a hold as Add's do.
func (p *Poller) AddLate(fd int, token uint32) error { return p.addChecked(fd, token, true, true) }

func (p *Poller) addChecked(fd int, token uint32, urgent, late bool) error {
	if token == WakeToken {
		return fmt.Errorf("poller: add fd %d: token %d is reserved for Wake", fd, token)
	}
	if err := p.add(fd, token, urgent); err != nil {
		return err
	}
	if late {
		p.urgent[len(p.urgent)-1].late = true
	}
	return nil
}

func (p *Poller) add(fd int, token uint32, urgent bool) error {
	// The token rides in epoll_data; the kernel hands it back untouched.
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(token)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("poller: add fd %d: %w", fd, err)
	}
	if urgent {
		if err := unix.EpollCtl(p.urgentfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
			return fmt.Errorf("poller: add fd %d: %w", fd, err)
		}
	}
	// The ring polls each descriptor itself (poller_uring.go).
	p.urgent = append(p.urgent, urgentFD{fd: fd, token: token, held: !urgent})
	return nil
}

// Wait blocks until at least one registered descriptor is readable, Wake
// was called, or timeout passed (timeout < 0 waits forever, 0 only
// polls), and writes the tokens of the ready descriptors into ready,
// returning how many. It returns at most len(ready) tokens; the rest stay
// ready for the next call. A wake-up is reported as WakeToken and
// consumed: several Wakes before one Wait make one WakeToken.
//
// A signal interrupting the wait (EINTR, frequent under the Go runtime's
// preemption signals) restarts it with the time that is left.
func (p *Poller) Wait(timeout time.Duration, ready []uint32) (int, error) {
	if len(ready) == 0 {
		return 0, errors.New("poller: wait: no room for ready tokens")
	}
	if p.hold != nil && p.hold.wait {
		return p.ringWait(timeout, ready, false)
	}
	if p.hold != nil && p.hold.sends != nil {
		// Holds send in the ring; this wait is in epoll: send first.
		if err := p.hold.sends.FlushQueued(); err != nil {
			p.hold.sends.keepSendError(err)
		}
	}
	events := p.events[:min(len(ready), len(p.events))]
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		n, err := unix.EpollWait(p.epfd, events, epollMillis(timeout))
		if err == unix.EINTR {
			if timeout > 0 {
				timeout = max(time.Until(deadline), 0)
			}
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("poller: epoll_wait: %w", err)
		}
		return p.tokens(events[:n], ready), nil
	}
}

// tokens copies the tokens of events into ready, consuming a wake-up.
func (p *Poller) tokens(events []unix.EpollEvent, ready []uint32) int {
	for i, ev := range events {
		token := uint32(ev.Fd)
		if token == WakeToken {
			// Non-blocking: a racing second reader (there is none)
			// or a spurious report would just get EAGAIN.
			unix.Read(p.eventfd, p.drain[:])
		}
		ready[i] = token
	}
	return len(events)
}

// Hold sleeps for d, or until Wake is called or a descriptor registered
// with Add (not AddHeld) is readable, and reports the ready tokens as
// Wait does; 0 when d passed. It waits with epoll_pwait2(2), whose
// timeout has nanoseconds; a kernel older than 5.11 without it gets
// epoll_wait's milliseconds, rounded up.
func (p *Poller) Hold(d time.Duration, ready []uint32) (int, error) {
	if len(ready) == 0 {
		return 0, errors.New("poller: hold: no room for ready tokens")
	}
	d = max(d, 0)
	if p.hold != nil {
		return p.holdInRing(d, ready)
	}
	events := p.events[:min(len(ready), len(p.events))]
	deadline := time.Now().Add(d)
	for {
		p.holdTS = unix.NsecToTimespec(int64(d))
		r, _, errno := unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(p.urgentfd),
			uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(unsafe.Pointer(&p.holdTS)), 0, 0)
		n, err := int(r), error(nil)
		if errno == unix.ENOSYS {
			n, err = unix.EpollWait(p.urgentfd, events, epollMillis(d))
		} else if errno != 0 {
			err = errno
		}
		if err == unix.EINTR {
			d = max(time.Until(deadline), 0)
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("poller: epoll_pwait2: %w", err)
		}
		return p.tokens(events[:n], ready), nil
	}
}

// epollMillis converts a timeout to epoll_wait's milliseconds, rounding
// up so that a wait for a deadline 0.3 ms away does not spin at 0 ms.
func epollMillis(d time.Duration) int {
	switch {
	case d < 0:
		return -1
	case d == 0:
		return 0
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return int(min(ms, math.MaxInt32))
}

// Wake makes the current or the next Wait return with WakeToken. It is
// safe from any goroutine and does not block.
func (p *Poller) Wake() error {
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	if p.closed {
		return errors.New("poller: wake: closed")
	}
	_, err := unix.Write(p.eventfd, p.one[:])
	if err != nil && err != unix.EAGAIN { // EAGAIN: the counter is saturated, a wake is pending anyway
		return fmt.Errorf("poller: wake: %w", err)
	}
	return nil
}

// Close releases the epoll instance and the eventfd. The registered
// descriptors are not closed.
func (p *Poller) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var ringErr error
	if p.hold != nil {
		ringErr = p.hold.r.close()
	}
	return errors.Join(unix.Close(p.eventfd), unix.Close(p.epfd), unix.Close(p.urgentfd), ringErr)
}
