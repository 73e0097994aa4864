package link

import (
	"bufio"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
	"golang.org/x/sys/unix"
)

// epollWatched returns the descriptors registered with any epoll instance
// of this process, from /proc/self/fdinfo (a "tfd:" line per watched
// descriptor). Go's netpoller is one of those instances.
func epollWatched(t *testing.T) map[int]bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	watched := make(map[int]bool)
	for _, e := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || target != "anon_inode:[eventpoll]" {
			continue
		}
		f, err := os.Open(filepath.Join("/proc/self/fdinfo", e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == "tfd:" {
				if fd, err := strconv.Atoi(fields[1]); err == nil {
					watched[fd] = true
				}
			}
		}
		f.Close()
	}
	return watched
}

// TestLinkDescriptorsStayOutOfGoNetpoller: the descriptors a daemon's
// Poller waits on (AF_PACKET socket, TAP queue, control socket) must not
// also be in Go's netpoller, or every frame wakes both the loop and the
// runtime's netpoll thread (the double wake-up of issue 7). No Poller
// exists in this test, so any epoll instance watching them is Go's.
func TestLinkDescriptorsStayOutOfGoNetpoller(t *testing.T) {
	// A pipe is in the netpoller: proof that the scan sees it.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	r.SetReadDeadline(time.Now().Add(time.Hour)) // pollable: registered

	wire := newWire(t)
	a := openAFPacket(t, wire.nsA, vethA, AFPacketConfig{VNetHdr: true})
	_, taps := newOffloadTAP(t, 2)
	var ctl *ControlSocket
	ns := nstest.New(t, "qs-ctltest")
	nstest.Run(t, "ip", "-n", ns, "addr", "add", "198.18.97.1/32", "dev", "lo")
	if err := nstest.Do(ns, func() error {
		var err error
		ctl, err = ListenControl(netip.MustParseAddrPort("198.18.97.1:0"), ControlConfig{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()

	watched := epollWatched(t)
	if !watched[int(r.Fd())] {
		t.Fatalf("the scan does not see the pipe %d in the netpoller (watched: %v)", r.Fd(), watched)
	}
	check := map[string]int{"afpacket": a.FD(), "tap queue 0": taps[0].FD(), "tap queue 1": taps[1].FD(), "control": ctl.FD()}
	for name, fd := range check {
		if watched[fd] {
			t.Errorf("%s descriptor %d is registered with an epoll instance (Go's netpoller)", name, fd)
		}
	}
}

// TestPollFDCloseEndsAWaitingRead: a Read whose callback keeps asking
// to wait (nothing to read) blocks without spinning and returns
// net.ErrClosed once Close runs.
func TestPollFDCloseEndsAWaitingRead(t *testing.T) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC) // never written: never readable
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPollFD(efd)
	if err != nil {
		unix.Close(efd)
		t.Fatal(err)
	}
	var calls atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- p.Read(func(uintptr) bool { calls.Add(1); return false })
	}()
	select {
	case err := <-done:
		t.Fatalf("Read returned %v with nothing to read", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Close takes the lock Read holds while it waits, so the descriptor
	// is closed only once Read has let go of it; Read's goroutine then
	// still has to deliver its result, so the test waits for it (reading
	// the channel at once, as it did, failed now and then under load).
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a Read waiting when Close ran did not end")
	}
	if n := calls.Load(); n > 2 {
		t.Errorf("the callback ran %d times: the wait spins", n)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// A write to a socket with no room waits at most writeWait and then
// returns ErrNoRoom: a daemon's loop is not held by a device that stopped
// transmitting (a TCG guest's NIC once held a shim's loop in poll(2) for
// good). The peer of a datagram socketpair that nobody reads stands for
// that device. Once the peer reads, the same pollFD writes again.
func TestWriteGivesUpWhenNoRoomComes(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	p, err := newPollFD(fds[0])
	if err != nil {
		unix.Close(fds[0])
		t.Fatal(err)
	}
	defer p.Close()
	p.writeWait = 50 * time.Millisecond
	msg := make([]byte, 1024)
	sent := 0
	send := func(fd uintptr) bool {
		for {
			switch _, err := unix.Write(int(fd), msg); err {
			case nil:
				sent++
			case unix.EAGAIN:
				return false
			default:
				t.Errorf("write: %v", err)
				return true
			}
		}
	}
	start := time.Now()
	err = p.Write(send)
	if !errors.Is(err, ErrNoRoom) {
		t.Fatalf("Write to a full socket: %v, want ErrNoRoom", err)
	}
	if waited := time.Since(start); waited < p.writeWait {
		t.Errorf("gave up after %v, before the %v wait", waited, p.writeWait)
	}
	if sent == 0 {
		t.Fatal("nothing was sent before the socket filled")
	}
	// Room again: one read on the peer, and one more datagram goes.
	if _, err := unix.Read(fds[1], make([]byte, len(msg))); err != nil {
		t.Fatal(err)
	}
	before := sent
	once := func(fd uintptr) bool {
		_, err := unix.Write(int(fd), msg)
		if err == unix.EAGAIN {
			return false
		}
		if err == nil {
			sent++
		}
		return true
	}
	if err := p.Write(once); err != nil || sent != before+1 {
		t.Errorf("Write after the peer read: %v, %d sent, want nil and 1", err, sent-before)
	}
}
