package link

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newPoller(t *testing.T) *Poller {
	t.Helper()
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// inEachWaitMode runs test with a poller that waits in epoll_wait and
// with one that waits in io_uring (WaitInRing, set up by ringWait after
// the test's Adds): Wait must behave the same.
func inEachWaitMode(t *testing.T, test func(t *testing.T, p *Poller, ringWait func())) {
	t.Run("epoll", func(t *testing.T) { test(t, newPoller(t), func() {}) })
	t.Run("ring", func(t *testing.T) {
		p := newPoller(t)
		test(t, p, func() {
			if err := p.WaitInRing(); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// pipe returns a non-blocking pipe, closed when the test ends.
func pipe(t *testing.T) (r, w int) {
	t.Helper()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds[0], fds[1]
}

func TestPollerReportsReadableDescriptors(t *testing.T) {
	inEachWaitMode(t, testPollerReportsReadableDescriptors)
}

// testPollerReportsReadableDescriptors registers one pipe with Add and
// one with AddHeld: a Wait reports both alike.
func testPollerReportsReadableDescriptors(t *testing.T, p *Poller, ringWait func()) {
	r1, w1 := pipe(t)
	r2, w2 := pipe(t)
	if err := p.Add(r1, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.AddHeld(r2, 2); err != nil {
		t.Fatal(err)
	}
	ringWait()
	ready := make([]uint32, 8)
	if n, err := p.Wait(0, ready); n != 0 || err != nil {
		t.Fatalf("nothing written yet: Wait = %d %v", n, err)
	}
	unix.Write(w2, []byte("x"))
	n, err := p.Wait(-1, ready)
	if err != nil || n != 1 || ready[0] != 2 {
		t.Fatalf("after writing to pipe 2: Wait = %d %v, tokens %v", n, err, ready[:n])
	}
	unix.Write(w1, []byte("x"))
	// Level-triggered: pipe 2 was not drained, so both are ready now.
	n, err = p.Wait(-1, ready)
	if err != nil || n != 2 || ready[0]+ready[1] != 3 {
		t.Fatalf("both written: Wait = %d %v, tokens %v", n, err, ready[:n])
	}
	// Room for one token: one is reported, the other waits for the next call.
	if n, err := p.Wait(-1, ready[:1]); n != 1 || err != nil {
		t.Fatalf("one slot: Wait = %d %v", n, err)
	}
	var buf [8]byte
	unix.Read(r1, buf[:])
	unix.Read(r2, buf[:])
	if n, err := p.Wait(0, ready); n != 0 || err != nil {
		t.Fatalf("after draining: Wait = %d %v, tokens %v", n, err, ready[:n])
	}
}

func TestPollerTimeout(t *testing.T) {
	inEachWaitMode(t, testPollerTimeout)
}

func testPollerTimeout(t *testing.T, p *Poller, ringWait func()) {
	r, _ := pipe(t)
	if err := p.Add(r, 7); err != nil {
		t.Fatal(err)
	}
	ringWait()
	const timeout = 30 * time.Millisecond
	start := time.Now()
	n, err := p.Wait(timeout, make([]uint32, 4))
	if elapsed := time.Since(start); n != 0 || err != nil || elapsed < timeout {
		t.Fatalf("Wait = %d %v after %v, want 0 after at least %v", n, err, elapsed, timeout)
	}
}

func TestPollerWakeFromAnotherGoroutine(t *testing.T) {
	inEachWaitMode(t, testPollerWakeFromAnotherGoroutine)
}

func testPollerWakeFromAnotherGoroutine(t *testing.T, p *Poller, ringWait func()) {
	r, _ := pipe(t)
	if err := p.Add(r, 1); err != nil {
		t.Fatal(err)
	}
	ringWait()
	woken := make(chan struct{})
	go func() {
		defer close(woken)
		if err := p.Wake(); err != nil {
			t.Error(err)
		}
	}()
	ready := make([]uint32, 4)
	n, err := p.Wait(-1, ready)
	if err != nil || n != 1 || ready[0] != WakeToken {
		t.Fatalf("Wait = %d %v, tokens %v, want only WakeToken", n, err, ready[:n])
	}
	<-woken
	// Two wakes before a Wait make one report, and the eventfd is drained.
	p.Wake()
	p.Wake()
	if n, _ := p.Wait(0, ready); n != 1 || ready[0] != WakeToken {
		t.Fatalf("after two wakes: tokens %v", ready[:n])
	}
	if n, _ := p.Wait(0, ready); n != 0 {
		t.Fatalf("wake reported twice: tokens %v", ready[:n])
	}
}

func TestPollerRefusesWakeToken(t *testing.T) {
	p := newPoller(t)
	r, _ := pipe(t)
	if err := p.Add(r, WakeToken); err == nil {
		t.Fatal("Add accepted WakeToken")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Wake(); err == nil {
		t.Fatal("Wake on a closed poller succeeded")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestPollerWaitDoesNotAllocate waits on a pipe left readable, so every
// call really reports it.
func TestPollerWaitDoesNotAllocate(t *testing.T) {
	inEachWaitMode(t, testPollerWaitDoesNotAllocate)
}

func testPollerWaitDoesNotAllocate(t *testing.T, p *Poller, ringWait func()) {
	r, w := pipe(t)
	if err := p.Add(r, 3); err != nil {
		t.Fatal(err)
	}
	ringWait()
	unix.Write(w, []byte("x"))
	ready := make([]uint32, 4)
	reported := 0
	allocs := testing.AllocsPerRun(100, func() {
		n, err := p.Wait(time.Second, ready)
		if err != nil || n != 1 || ready[0] != 3 {
			t.Fatalf("Wait = %d %v", n, err)
		}
		reported++
	})
	if allocs != 0 || reported != 101 {
		t.Fatalf("%v allocations per Wait over %d reports", allocs, reported)
	}
}

func TestPollerHoldIgnoresHeldDescriptorsButNotWakeOrUrgentOnes(t *testing.T) {
	p := newPoller(t)
	checkHoldEndsOnlyForUrgentOrWake(t, p, func(ready []uint32) {
		// Wait sees the held descriptor at once.
		if n, err := p.Wait(-1, ready); err != nil || n != 1 || ready[0] != 1 {
			t.Fatalf("Wait with the held pipe readable = %d %v, tokens %v", n, err, ready[:n])
		}
	})
}

// checkHoldEndsOnlyForUrgentOrWake registers a held descriptor (token 1)
// and an urgent one (token 2) with p and checks its Hold: it sleeps its
// whole time although the held one stays readable, ends at once for the
// urgent one and for Wake (consuming the wake-up). first runs with the
// held descriptor readable, before the holds.
func checkHoldEndsOnlyForUrgentOrWake(t *testing.T, p *Poller, first func(ready []uint32)) {
	t.Helper()
	held, heldW := pipe(t)
	urgent, urgentW := pipe(t)
	if err := p.AddHeld(held, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(urgent, 2); err != nil {
		t.Fatal(err)
	}
	unix.Write(heldW, []byte("x"))
	ready := make([]uint32, 8)
	if first != nil {
		first(ready)
	}
	const hold = 3 * time.Millisecond
	start := time.Now()
	n, err := p.Hold(hold, ready)
	if took := time.Since(start); err != nil || n != 0 || took < hold {
		t.Fatalf("Hold(%v) with only the held pipe readable = %d %v after %v; want 0 tokens after the whole hold", hold, n, err, took)
	}
	// A descriptor registered with Add ends a hold.
	unix.Write(urgentW, []byte("x"))
	if n, err := p.Hold(time.Hour, ready); err != nil || n != 1 || ready[0] != 2 {
		t.Fatalf("Hold with the urgent pipe readable = %d %v, tokens %v", n, err, ready[:n])
	}
	var buf [8]byte
	unix.Read(urgent, buf[:])
	// So does Wake, and the wake-up is consumed.
	p.Wake()
	if n, err := p.Hold(time.Hour, ready); err != nil || n != 1 || ready[0] != WakeToken {
		t.Fatalf("Hold after Wake = %d %v, tokens %v", n, err, ready[:n])
	}
	if n, err := p.Hold(0, ready); err != nil || n != 0 {
		t.Fatalf("Hold(0) after the wake-up was consumed = %d %v, tokens %v", n, err, ready[:n])
	}
}

func TestPollerHoldDoesNotAllocate(t *testing.T) {
	p := newPoller(t)
	ready := make([]uint32, 4)
	calls := 0
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := p.Hold(time.Microsecond, ready); err == nil {
			calls++
		}
	})
	if calls == 0 || allocs != 0 {
		t.Fatalf("Hold: %v allocations per call over %d successful calls; want 0", allocs, calls)
	}
}
