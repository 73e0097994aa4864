package link

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A poller that waits in the ring polls its held descriptor in Wait; a
// hold that begins while that poll is still armed does not end when the
// descriptor becomes readable (the hold lets it fill), but reports it
// when it ends, and a hold does not arm it again.
func TestPollerRingWaitKeepsHoldsBlindToTheHeldDescriptor(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	p := newPoller(t)
	held, heldW := pipe(t)
	if err := p.AddHeld(held, 4); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitInRing(); err != nil {
		t.Fatal(err)
	}
	ready := make([]uint32, 8)
	if n, err := p.Wait(time.Millisecond, ready); n != 0 || err != nil { // arms the held poll
		t.Fatalf("Wait with nothing readable = %d %v", n, err)
	}
	const hold = 20 * time.Millisecond
	go func() { inSyscall(t, tid, unix.SYS_IO_URING_ENTER); unix.Write(heldW, []byte("x")) }()
	start := time.Now()
	n, err := p.Hold(hold, ready)
	if took := time.Since(start); err != nil || n != 1 || ready[0] != 4 || took < hold {
		t.Fatalf("Hold(%v) with the held pipe written during it = %d %v, tokens %v after %v; want it after the whole hold",
			hold, n, err, ready[:n], took)
	}
	// Still readable: a hold neither arms its poll nor ends for it...
	start = time.Now()
	if n, err := p.Hold(hold, ready); err != nil || n != 0 || time.Since(start) < hold {
		t.Fatalf("Hold with the held pipe readable = %d %v, tokens %v after %v", n, err, ready[:n], time.Since(start))
	}
	// ...and a Wait reports it at once.
	if n, err := p.Wait(time.Hour, ready); err != nil || n != 1 || ready[0] != 4 {
		t.Fatalf("Wait with the held pipe readable = %d %v, tokens %v", n, err, ready[:n])
	}
}

// sendPoller is a poller holding (all: and waiting) in the ring and
// sending a's queued frames.
func sendPoller(t *testing.T, a *AFPacket, all bool) *Poller {
	t.Helper()
	p := newPoller(t)
	if err := p.Add(a.FD(), 1); err != nil {
		t.Fatal(err)
	}
	setup := p.HoldInRing
	if all {
		setup = p.WaitInRing
	}
	if err := setup(); err != nil {
		t.Fatal(err)
	}
	if err := p.SendWith(a); err != nil {
		t.Fatal(err)
	}
	return p
}

// The frames QueueBatch takes leave with the poller's next Wait or Hold,
// in order, and the link counts them then: in the hold's single
// io_uring_enter, and in a Wait's too when the poller waits in the ring
// (all); a Wait in epoll sends them with sendmmsg first.
func TestQueuedFramesLeaveWithTheNextWait(t *testing.T) {
	for _, c := range []struct{ vnet, all bool }{{false, true}, {true, true}, {true, false}} {
		t.Run(fmt.Sprintf("vnet=%v/wait-in-ring=%v", c.vnet, c.all), func(t *testing.T) {
			vnet := c.vnet
			w := newWire(t)
			a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{VNetHdr: vnet})
			b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
			p := sendPoller(t, a, c.all)
			batch := NewBatch(32, 2048)
			ready := make([]uint32, 4)
			for round, wait := range []func() (int, error){
				func() (int, error) { return p.Wait(0, ready) },
				func() (int, error) { return p.Hold(time.Microsecond, ready) },
			} {
				frames := make([][]byte, 10)
				for i := range frames {
					frames[i] = testFrame(w.macA, fmt.Sprintf("round %d frame %d", round, i))
				}
				before := a.Stats()
				if n, err := a.QueueBatch(frames, nil); n != len(frames) || err != nil {
					t.Fatalf("QueueBatch: %d %v", n, err)
				}
				if s := a.Stats(); s.TxFrames != before.TxFrames {
					t.Fatalf("frames counted as sent before the wait: %+v", s)
				}
				enters := p.HoldEnters()
				if _, err := wait(); err != nil {
					t.Fatal(err)
				}
				want := uint64(1)
				if round == 0 && !c.all {
					want = 0 // the Wait is epoll's
				}
				if e := p.HoldEnters() - enters; e != want {
					t.Fatalf("the wait made %d io_uring_enter calls, want %d", e, want)
				}
				if s := a.Stats(); s.TxFrames-before.TxFrames != uint64(len(frames)) || s.TxErrors != 0 ||
					s.TxInWait-before.TxInWait != uint64(len(frames))*want {
					t.Fatalf("after the wait: stats %+v, before %+v", s, before)
				}
				markers, _ := readBatchMarkers(t, b, batch, len(frames))
				for i, m := range markers {
					if want := fmt.Sprintf("round %d frame %d", round, i); m != want {
						t.Fatalf("frame %d: marker %q, want %q", i, m, want)
					}
				}
			}
		})
	}
}

// A frame the kernel refuses in the wait is counted and reported by
// TakeSendError; the frames around it still go, in order; and frames
// QueueBatch cannot queue (more than a batch) go at once after what was
// queued.
func TestQueuedFrameRefusedInTheWaitIsCountedAndTheOthersGo(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
	p := sendPoller(t, a, true)
	oversize := testFrame(w.macA, "too long")
	oversize = append(oversize, make([]byte, 9000)...) // beyond the veth's MTU: EMSGSIZE
	frames := [][]byte{testFrame(w.macA, "first"), oversize, testFrame(w.macA, "third")}
	if n, err := a.QueueBatch(frames, nil); n != 3 || err != nil {
		t.Fatalf("QueueBatch: %d %v", n, err)
	}
	if _, err := p.Wait(0, make([]uint32, 4)); err != nil {
		t.Fatal(err)
	}
	err, failed := a.TakeSendError()
	if failed != 1 || !errors.Is(err, unix.EMSGSIZE) {
		t.Fatalf("TakeSendError = %v, %d; want EMSGSIZE for one frame", err, failed)
	}
	if s := a.Stats(); s.TxFrames != 2 || s.TxErrors != 1 {
		t.Fatalf("stats %+v, want 2 sent and 1 error", s)
	}
	if err, n := a.TakeSendError(); err != nil || n != 0 {
		t.Fatalf("second TakeSendError = %v, %d", err, n)
	}
	markers, _ := readBatchMarkers(t, b, NewBatch(8, 2048), 2)
	if markers[0] != "first" || markers[1] != "third" {
		t.Fatalf("arrived %q", markers)
	}

	// One frame queued, then more than a batch: all go at once, in order.
	if n, err := a.QueueBatch([][]byte{testFrame(w.macA, "queued")}, nil); n != 1 || err != nil {
		t.Fatalf("QueueBatch: %d %v", n, err)
	}
	many := make([][]byte, maxBatch)
	for i := range many {
		many[i] = testFrame(w.macA, fmt.Sprintf("many %d", i))
	}
	if n, err := a.QueueBatch(many, nil); n != len(many) || err != nil {
		t.Fatalf("QueueBatch of %d: %d %v", len(many), n, err)
	}
	markers, _ = readBatchMarkers(t, b, NewBatch(128, 2048), len(many)+1)
	if markers[0] != "queued" || markers[1] != "many 0" || markers[len(many)] != fmt.Sprintf("many %d", len(many)-1) {
		t.Fatalf("arrived %q ... %q", markers[:2], markers[len(markers)-1])
	}
}

// SendWith needs a poller that holds in the ring, and one link.
func TestSendWithNeedsTheRingHold(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	p := newPoller(t)
	if err := p.SendWith(a); err == nil {
		t.Fatal("SendWith on an epoll poller succeeded")
	}
	if err := p.HoldInRing(); err != nil {
		t.Fatal(err)
	}
	if err := p.SendWith(a); err != nil {
		t.Fatal(err)
	}
	if err := p.SendWith(a); err == nil {
		t.Fatal("a second SendWith succeeded")
	}
	// Without a poller, QueueBatch writes at once.
	other := openAFPacket(t, w.nsB, vethB, AFPacketConfig{})
	if n, err := other.QueueBatch([][]byte{testFrame(w.macB, "now")}, nil); n != 1 || err != nil || other.Stats().TxFrames != 1 {
		t.Fatalf("QueueBatch on a link no poller sends with: %d %v, stats %+v", n, err, other.Stats())
	}
}

// Queueing and sending in the wait allocate nothing.
func TestQueuedSendsDoNotAllocate(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{VNetHdr: true})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
	p := sendPoller(t, a, false)
	frames := make([][]byte, 8)
	for i := range frames {
		frames[i] = testFrame(w.macA, fmt.Sprintf("alloc %d", i))
	}
	batch := NewBatch(len(frames), 2048)
	ready := make([]uint32, 4)
	read := 0
	allocs := testing.AllocsPerRun(50, func() {
		if n, err := a.QueueBatch(frames, nil); n != len(frames) || err != nil {
			t.Fatalf("QueueBatch: %d %v", n, err)
		}
		if _, err := p.Hold(0, ready); err != nil {
			t.Fatal(err)
		}
		readTheseFrames(t, b, batch, frames)
		read += len(frames)
	})
	if allocs != 0 || read != 51*len(frames) {
		t.Fatalf("%v allocations per queue and wait, %d frames read", allocs, read)
	}
}

// What follows a failed send in the ring: the linked sends after it were
// cancelled, so the rest go with sendmmsg, in order: from the failed one
// when the socket was out of room (EAGAIN: it waits for room there), from
// the one after it when the frame itself was refused (counted). The
// ring's completions are made up here: a full socket is hard to make on
// a veth, whose frames leave the sender's account at once.
func TestFramesAfterAFailedSendInTheRingGoInOrder(t *testing.T) {
	for _, c := range []struct {
		errno      unix.Errno
		sent, errs uint64
		arrive     []string
	}{
		{unix.EAGAIN, 3, 0, []string{"second", "third"}},
		{unix.EMSGSIZE, 2, 1, []string{"third"}},
	} {
		t.Run(c.errno.Error(), func(t *testing.T) {
			w := newWire(t)
			a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
			b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
			sendPoller(t, a, false)
			frames := [][]byte{testFrame(w.macA, "first"), testFrame(w.macA, "second"), testFrame(w.macA, "third")}
			if n, err := a.QueueBatch(frames, nil); n != 3 || err != nil {
				t.Fatalf("QueueBatch: %d %v", n, err)
			}
			a.later.first = -1
			// The ring ran the first, failed the second, cancelled the third.
			a.sendFailed(&uringCQE{userData: sendTag | 2, res: -int32(unix.ECANCELED)})
			a.sendFailed(&uringCQE{userData: sendTag | 1, res: -int32(c.errno)})
			a.sendsTaken()
			if s := a.Stats(); s.TxFrames != c.sent || s.TxErrors != c.errs || s.TxInWait != 1 {
				t.Fatalf("stats %+v, want %d sent (1 in the wait) and %d errors", s, c.sent, c.errs)
			}
			if err, n := a.TakeSendError(); uint64(n) != c.errs || (n > 0) != errors.Is(err, c.errno) {
				t.Fatalf("TakeSendError = %v, %d", err, n)
			}
			markers, _ := readBatchMarkers(t, b, NewBatch(8, 2048), len(c.arrive))
			for i, want := range c.arrive {
				if markers[i] != want {
					t.Fatalf("arrived %q, want %q", markers, c.arrive)
				}
			}
		})
	}
}
