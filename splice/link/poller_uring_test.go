package link

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func newRingHoldPoller(t *testing.T) *Poller {
	t.Helper()
	p := newPoller(t)
	if err := p.HoldInRing(); err != nil {
		t.Fatal(err) // io_uring is there on the machines the shim runs on
	}
	return p
}

// inSyscall blocks until thread tid of this process is asleep in system
// call nr (/proc/self/task/TID/syscall), so that what the test does next
// happens during that call.
func inSyscall(t *testing.T, tid, nr int) {
	t.Helper()
	path := fmt.Sprintf("/proc/self/task/%d/syscall", tid)
	want := []byte(strconv.Itoa(nr) + " ")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); runtime.Gosched() {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
			return
		}
		if bytes.HasPrefix(b, want) {
			return
		}
	}
	t.Errorf("thread %d never entered system call %d", tid, nr)
}

// The ring's hold behaves as the epoll one does: only Wake and the
// descriptors of Add end it, level-triggered.
func TestPollerRingHoldIgnoresHeldDescriptorsButNotWakeOrUrgentOnes(t *testing.T) {
	checkHoldEndsOnlyForUrgentOrWake(t, newRingHoldPoller(t), nil)
}

// A descriptor or a Wake that becomes ready during the hold ends it, and
// a poll left armed by a hold that timed out, or completed after its hold
// ended, does not confuse the next.
func TestPollerRingHoldEndsAtOnceForWhatComesDuringIt(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	p := newRingHoldPoller(t)
	urgent, urgentW := pipe(t)
	if err := p.Add(urgent, 2); err != nil {
		t.Fatal(err)
	}
	ready := make([]uint32, 8)
	if n, err := p.Hold(time.Millisecond, ready); n != 0 || err != nil { // leaves the polls armed
		t.Fatalf("Hold with nothing readable = %d %v", n, err)
	}
	go func() { inSyscall(t, tid, unix.SYS_IO_URING_ENTER); unix.Write(urgentW, []byte("x")) }()
	if n, err := p.Hold(time.Hour, ready); err != nil || n != 1 || ready[0] != 2 {
		t.Fatalf("Hold with the pipe written during it = %d %v, tokens %v", n, err, ready[:n])
	}
	var buf [8]byte
	unix.Read(urgent, buf[:])
	go func() { inSyscall(t, tid, unix.SYS_IO_URING_ENTER); p.Wake() }()
	if n, err := p.Hold(time.Hour, ready); err != nil || n != 1 || ready[0] != WakeToken {
		t.Fatalf("Hold with Wake during it = %d %v, tokens %v", n, err, ready[:n])
	}
	// The pipe's poll completed during the hold above and was reaped;
	// written and read between holds, it must not end the next one.
	if n, err := p.Hold(time.Millisecond, ready); err != nil || n != 0 {
		t.Fatalf("Hold after everything was read = %d %v, tokens %v", n, err, ready[:n])
	}
	unix.Write(urgentW, []byte("x"))
	unix.Read(urgent, buf[:]) // fires the armed poll after its hold ended
	if n, err := p.Hold(time.Millisecond, ready); err != nil || n != 0 {
		t.Fatalf("Hold after a stale completion = %d %v, tokens %v", n, err, ready[:n])
	}
}

// A late descriptor does not end the hold, but is reported when it ends.
func TestPollerRingHoldReportsLateDescriptorsAtItsEnd(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	p := newRingHoldPoller(t)
	late, lateW := pipe(t)
	if err := p.AddLate(late, 3); err != nil {
		t.Fatal(err)
	}
	ready := make([]uint32, 8)
	const hold = 20 * time.Millisecond
	go func() { inSyscall(t, tid, unix.SYS_IO_URING_ENTER); unix.Write(lateW, []byte("x")) }()
	start := time.Now()
	n, err := p.Hold(hold, ready)
	if took := time.Since(start); err != nil || n != 1 || ready[0] != 3 || took < hold {
		t.Fatalf("Hold(%v) with the late pipe written during it = %d %v, tokens %v after %v; want it after the whole hold",
			hold, n, err, ready[:n], took)
	}
	// Wait sees it as any other.
	if n, err := p.Wait(0, ready); err != nil || n != 1 || ready[0] != 3 {
		t.Fatalf("Wait = %d %v, tokens %v", n, err, ready[:n])
	}
}

// The point of the ring's hold: io_uring reads this thread submitted,
// which complete as task work of the thread, do not interrupt the hold
// (in epoll_pwait2 each would: EINTR, and one more system call).
//
// Anything else that interrupts the thread's system call costs one enter
// more too: a signal (the Go runtime's preemption SIGURG, say), or task
// work of a ring an earlier test submitted on this OS thread. One run of
// the whole module's tests met a hold with two enters. Task work of the
// hold's own reads would interrupt every hold, so the test makes up to
// three and asks for one with a single enter.
func TestPollerRingHoldIsNotInterruptedByTaskWork(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var enters []uint64
	for range 3 {
		n := ringHoldWithTaskWork(t)
		if n == 1 {
			return
		}
		enters = append(enters, n)
	}
	t.Fatalf("the holds made %v io_uring_enter calls, want 1: the read's task work interrupted them", enters)
}

// ringHoldWithTaskWork holds on a fresh ring-hold Poller while an io_uring
// read this (locked) thread submitted completes, and returns the enters
// the hold made.
func ringHoldWithTaskWork(t *testing.T) uint64 {
	t.Helper()
	tid := unix.Gettid()
	p := newRingHoldPoller(t)
	r, w := pipe(t)
	reads, err := newURing(4)
	if err != nil {
		t.Fatal(err)
	}
	defer reads.close()
	buf := make([]byte, 16) // on the heap, which does not move
	defer runtime.KeepAlive(buf)
	const uringOpRead = 22
	e := reads.next(uringOpRead, 7)
	e.fd, e.flags = int32(r), 0
	e.addr, e.len = uint64(uintptr(unsafe.Pointer(&buf[0]))), uint32(len(buf))
	if err := reads.enter(0); err != nil {
		t.Fatal(err)
	}
	if reads.peek() != nil {
		t.Fatal("the read completed before anything was written")
	}
	go func() { inSyscall(t, tid, unix.SYS_IO_URING_ENTER); unix.Write(w, []byte("frame")) }()
	const hold = 20 * time.Millisecond
	before := p.HoldEnters()
	start := time.Now()
	n, err := p.Hold(hold, make([]uint32, 4))
	took := time.Since(start)
	if err != nil || n != 0 || took < hold {
		t.Fatalf("Hold(%v) = %d %v after %v; want 0 tokens after the whole hold", hold, n, err, took)
	}
	c := reads.peek()
	if c == nil || c.userData != 7 || c.res != 5 {
		t.Fatalf("the read's completion: %+v, want 5 bytes read during the hold", c)
	}
	return p.HoldEnters() - before
}

func TestPollerRingHoldDoesNotAllocate(t *testing.T) {
	p := newRingHoldPoller(t)
	r, _ := pipe(t)
	if err := p.AddLate(r, 1); err != nil {
		t.Fatal(err)
	}
	ready := make([]uint32, 4)
	calls := 0
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := p.Hold(time.Microsecond, ready); err == nil {
			calls++
		}
	})
	if calls == 0 || allocs != 0 || p.HoldEnters() == 0 {
		t.Fatalf("Hold: %v allocations per call over %d successful calls, %d enters; want 0 and the ring used", allocs, calls, p.HoldEnters())
	}
}
