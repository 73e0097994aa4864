package link

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/qsplice/qsplice/internal/procstat"
	"github.com/qsplice/qsplice/splice/link/internal/nstest"
	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// newUringTAP opens a single-queue OffloadTAP in a fresh namespace,
// addressed like newTAP's and up, and drives it through io_uring.
func newUringTAP(t *testing.T) (string, *UringTAP) {
	t.Helper()
	ns := nstest.New(t, "shimio-uring")
	disableIPv6(t, ns)
	var taps []*OffloadTAP
	if err := nstest.Do(ns, func() error {
		var err error
		taps, err = OpenOffloadTAP(tapName, OffloadTAPConfig{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	u := uringOver(t, taps[0])
	nstest.Run(t, "ip", "-n", ns, "addr", "add", tapAddr.String()+"/24", "dev", tapName)
	nstest.Run(t, "ip", "-n", ns, "link", "set", tapName, "up")
	return ns, u
}

// uringOver wraps tap, submits the first reads and closes it at the end.
func uringOver(t testing.TB, tap *OffloadTAP) *UringTAP {
	t.Helper()
	u, err := NewUringTAP(tap, UringTAPConfig{})
	if err != nil {
		tap.Close()
		t.Fatalf("io_uring on this kernel: %v", err)
	}
	t.Cleanup(func() { u.Close() })
	if err := u.Submit(); err != nil {
		t.Fatal(err)
	}
	return u
}

// readDatagrams reads with ReadBatch until want UDP payloads came, and
// returns them in order with the largest number one call delivered.
func readDatagrams(t *testing.T, u *UringTAP, batch *Batch, want int) ([]string, int) {
	t.Helper()
	var got []string
	most := 0
	for len(got) < want {
		waitReadable(t, u)
		n, err := u.ReadBatch(batch)
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, n)
		for i := range n {
			if p := udpPayload(batch.Frame(i)); p != nil {
				got = append(got, string(p))
				if !batch.VNet[i].NeedsCsum() || batch.VNet[i].IsGSO() {
					t.Errorf("datagram %q came with header %+v, want NEEDS_CSUM", p, batch.VNet[i])
				}
			}
		}
	}
	return got, most
}

// TestUringTAPExchangesWithKernel: datagrams from the kernel come out of
// ReadBatch in order and byte for byte, several per call; frames written
// with one WriteBatch reach the kernel's socket in order and byte for
// byte, with one io_uring_enter for the whole batch; ReadBatch itself
// makes none.
func TestUringTAPExchangesWithKernel(t *testing.T) {
	ns, u := newUringTAP(t)
	if !u.VNetHdr() || u.Name() != tapName || u.Queue() != 0 || u.FD() == u.tap.FD() {
		t.Fatalf("vnet %v, name %q, queue %d, fd %d (tap's %d)", u.VNetHdr(), u.Name(), u.Queue(), u.FD(), u.tap.FD())
	}
	sent := []string{"one", "two", string(bytes.Repeat([]byte("x"), 1400)), "four"}
	payloads := make([][]byte, len(sent))
	for i, p := range sent {
		payloads[i] = []byte(p)
	}
	sendUDP(t, ns, payloads...)
	batch := NewBatch(16, 64) // ReadBatch lends its own buffers: these are never used
	enters := u.ring.enters
	got, most := readDatagrams(t, u, batch, len(sent))
	if fmt.Sprint(got) != fmt.Sprint(sent) {
		t.Fatalf("datagrams %q, want %q", got, sent)
	}
	if most < 2 {
		t.Errorf("every ReadBatch returned at most %d frame", most)
	}
	if d := u.ring.enters - enters; d != 0 {
		t.Errorf("ReadBatch made %d io_uring_enter calls, want none", d)
	}
	kernelMAC := net.HardwareAddr(bytes.Clone(batch.Frame(0)[6:12]))

	listener := listenOnTAP(t, ns)
	var frames [][]byte
	var want []string
	for i := range 5 {
		body := fmt.Sprintf("back %d %s", i, bytes.Repeat([]byte{byte('a' + i)}, 100*i))
		udp := make([]byte, 8+len(body))
		binary.BigEndian.PutUint16(udp[0:2], 9)
		binary.BigEndian.PutUint16(udp[2:4], 7777)
		binary.BigEndian.PutUint16(udp[4:6], uint16(len(udp)))
		copy(udp[8:], body)
		frames = append(frames, ipv4Frame(kernelMAC, peerMAC, peerAddr, tapAddr, 17, udp))
		want = append(want, body)
	}
	enters = u.ring.enters
	if n, err := u.WriteBatch(frames, make([]wire.VNetHdr, len(frames))); n != len(frames) || err != nil {
		t.Fatalf("WriteBatch: %d %v", n, err)
	}
	if d := u.ring.enters - enters; d != 1 {
		t.Errorf("WriteBatch of %d frames made %d io_uring_enter calls, want 1", len(frames), d)
	}
	buf := make([]byte, 2048)
	listener.SetReadDeadline(time.Now().Add(20 * time.Second)) // failsafe only
	for i, w := range want {
		n, _, err := listener.ReadFrom(buf)
		if err != nil || string(buf[:n]) != w {
			t.Fatalf("datagram %d: %q %v, want %q", i, buf[:n], err, w)
		}
	}
	if s := u.Stats(); s.RxFrames < uint64(len(sent)) || s.TxFrames != uint64(len(frames)) || s.TxErrors != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestUringTAPWriteStopsAtRefusedFrame: the kernel refuses a frame whose
// vnet header claims a checksum offset beyond it; the frames before it
// are delivered, the count is its index, and the linked frames after it
// are not written.
func TestUringTAPWriteStopsAtRefusedFrame(t *testing.T) {
	ns, u := newUringTAP(t)
	sendUDP(t, ns, []byte("mac"))
	batch := NewBatch(4, 64)
	readDatagrams(t, u, batch, 1)
	kernelMAC := net.HardwareAddr(bytes.Clone(batch.Frame(0)[6:12]))
	listener := listenOnTAP(t, ns)
	frame := func(body string) []byte {
		return udpToKernel(kernelMAC, []byte(body))
	}
	frames := [][]byte{frame("first"), frame("refused"), frame("after")}
	hdrs := make([]wire.VNetHdr, len(frames))
	hdrs[1] = wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: 5000, CsumOffset: 6}
	n, err := u.WriteBatch(frames, hdrs)
	if n != 1 || err == nil {
		t.Fatalf("WriteBatch = %d %v, want 1 and the refusal", n, err)
	}
	buf := make([]byte, 2048)
	listener.SetReadDeadline(time.Now().Add(20 * time.Second)) // failsafe only
	if k, _, err := listener.ReadFrom(buf); err != nil || string(buf[:k]) != "first" {
		t.Fatalf("got %q %v, want first", buf[:k], err)
	}
	// The link still works, and "after" was not written: the next
	// datagram the socket sees is this one.
	if n, err := u.WriteBatch([][]byte{frame("next")}, nil); n != 1 || err != nil {
		t.Fatalf("WriteBatch after the refusal: %d %v", n, err)
	}
	if k, _, err := listener.ReadFrom(buf); err != nil || string(buf[:k]) != "next" {
		t.Fatalf("got %q %v, want next (a frame after the refused one was written)", buf[:k], err)
	}
}

// newUringBumpNet is newBumpNet's topology without the client's veth, in
// namespaces of this file's own prefix.
func newUringBumpNet(t *testing.T) bumpNet {
	t.Helper()
	n := bumpNet{nsC: nstest.New(t, "shimio-c"), nsW: nstest.New(t, "shimio-w"), nsS: nstest.New(t, "shimio-s")}
	for _, ns := range []string{n.nsC, n.nsW, n.nsS} {
		disableIPv6(t, ns)
	}
	nstest.Veth(t, n.nsW, "qsb2", n.nsS, "qsb3")
	nstest.Run(t, "ip", "-n", n.nsS, "addr", "add", bumpServer+"/24", "dev", "qsb3")
	return n
}

// TestUringTAPBumpSuperFramesBothWays: kernel TCP through a UringTAP and
// an AF_PACKET socket with vnet headers, the bump's loop in the middle.
// Uploads leave the TAP as TSO super-frames with partial checksums;
// downloads go into the TAP as the veth's GRO super-frames. Both streams
// arrive intact, word for word.
func TestUringTAPBumpSuperFramesBothWays(t *testing.T) {
	n := newUringBumpNet(t)
	u := uringOver(t, n.openOffloadTAP(t))
	af := openAFPacket(t, n.nsW, "qsb2", AFPacketConfig{VNetHdr: true, Promiscuous: true})
	var up, down superFrames
	observe := func(from int, frame []byte, h wire.VNetHdr) {
		up.observe(from, frame, h)
		down.observe(1-from, frame, h)
	}
	bp := startBump(t, u, af, observe)
	transfer(t, n, bulkSize)
	download(t, n, bulkSize)
	bp.halt(t)
	if up.count == 0 || up.partial != up.count {
		t.Errorf("super-frames read from the TAP %d (with NEEDS_CSUM %d), want some, all partial", up.count, up.partial)
	}
	if down.count == 0 {
		t.Errorf("no super-frame written into the TAP")
	}
	if bp.writeErrs != 0 {
		t.Errorf("%d frames refused, first: %v", bp.writeErrs, bp.firstWriteErr)
	}
	if u.emptyReads != 0 {
		t.Errorf("%d reads completed with EAGAIN: the descriptor is non-blocking again?", u.emptyReads)
	}
	s := u.Stats()
	t.Logf("up: %d super-frames up to %d bytes; down: %d up to %d; %d frames in %d ReadBatch calls; TAP %+v; %d io_uring_enter, %d empty reads",
		up.count, up.largest, down.count, down.largest, bp.frames, bp.reads, s, u.ring.enters, u.emptyReads)
}

// download is transfer the other way: the server writes size bytes, the
// client (behind the TAP) checks them word by word.
func download(t testing.TB, n bumpNet, size int) {
	t.Helper()
	var ln net.Listener
	if err := nstest.Do(n.nsS, func() error {
		var err error
		ln, err = net.Listen("tcp4", bumpServer+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(60 * time.Second)) // failsafe only
		chunk := make([]byte, streamChunk)
		for off := 0; off < size; off += streamChunk {
			fillStream(chunk, uint64(off/8))
			if _, err := c.Write(chunk); err != nil {
				served <- fmt.Errorf("server: after %d bytes: %w", off, err)
				return
			}
		}
		served <- nil
	}()
	var conn net.Conn
	if err := nstest.Do(n.nsC, func() error {
		var err error
		conn, err = net.Dial("tcp4", ln.Addr().String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second)) // failsafe only
	got, want := make([]byte, streamChunk), make([]byte, streamChunk)
	for off := 0; off < size; off += streamChunk {
		if _, err := io.ReadFull(conn, got); err != nil {
			t.Fatalf("client: after %d of %d bytes: %v", off, size, err)
		}
		fillStream(want, uint64(off/8))
		if i := firstDifference(got, want); i >= 0 {
			t.Fatalf("client: stream corrupted at byte %d", off+i)
		}
	}
	if k, err := conn.Read(got); k != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("client: %d bytes past the end, %v", k, err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

func firstDifference(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestUringTAPCloseUnblocksRead: a ReadFrame waiting for a frame returns
// net.ErrClosed when the link is closed, and the TAP queue is closed too,
// so the device is gone when Close returns.
func TestUringTAPCloseUnblocksRead(t *testing.T) {
	ns, u := newUringTAP(t)
	readErr := make(chan error)
	go func() {
		_, err := u.ReadFrame(make([]byte, MaxFrame))
		readErr <- err
	}()
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read: %v, want net.ErrClosed", err)
	}
	// Gone at once: nothing (the ring's registered file) keeps it open
	// until the ring's deferred teardown.
	if out, err := exec.Command("ip", "-n", ns, "link", "show", tapName).CombinedOutput(); err == nil {
		t.Errorf("%s still exists after Close:\n%s", tapName, out)
	}
	if _, err := u.tap.ReadBatch(NewBatch(1, 100)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the TAP queue after Close: %v, want closed", err)
	}
	if _, err := u.ReadBatch(NewBatch(1, 100)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadBatch after Close: %v", err)
	}
	if _, err := u.WriteBatch([][]byte{make([]byte, 60)}, nil); !errors.Is(err, net.ErrClosed) {
		t.Errorf("WriteBatch after Close: %v", err)
	}
	if err := u.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestUringTAPReadFrameAndWriteFrame: the Link calls, for tools and tests.
func TestUringTAPReadFrameAndWriteFrame(t *testing.T) {
	ns, u := newUringTAP(t)
	sendUDP(t, ns, []byte("hello"))
	buf := make([]byte, MaxFrame)
	n, err := u.ReadFrame(buf)
	if err != nil || string(udpPayload(buf[:n])) != "hello" {
		t.Fatalf("ReadFrame: %x %v", buf[:n], err)
	}
	udp := buf[34:n]
	if sum := wire.Fold(wire.Sum(udp, wire.PseudoHeaderSum(wire.IP4(buf[26:30]), wire.IP4(buf[30:34]), 17, uint16(len(udp))))); sum != 0xffff {
		t.Errorf("UDP checksum not completed: sum %#x", sum)
	}
}

// TestUringTAPBatchPathDoesNotAllocate counts WriteBatch and ReadBatch
// with datagrams flowing both ways, and checks the frames really went.
func TestUringTAPBatchPathDoesNotAllocate(t *testing.T) {
	ns, u := newUringTAP(t)
	sendUDP(t, ns, []byte("mac"))
	batch := NewBatch(16, 64)
	readDatagrams(t, u, batch, 1)
	kernelMAC := net.HardwareAddr(bytes.Clone(batch.Frame(0)[6:12]))
	listenOnTAP(t, ns) // the frames land there: no ICMP
	frame := udpToKernel(kernelMAC, make([]byte, 4))
	frames := [][]byte{frame, frame, frame, frame}
	hdrs := make([]wire.VNetHdr, len(frames))
	before := u.Stats().TxFrames
	written := 0
	allocs := testing.AllocsPerRun(50, func() {
		if n, err := u.WriteBatch(frames, hdrs); n != len(frames) || err != nil {
			t.Fatalf("WriteBatch: %d %v", n, err)
		}
		written += len(frames)
	})
	if allocs != 0 {
		t.Errorf("WriteBatch: %v allocations per call", allocs)
	}
	if s := u.Stats(); s.TxFrames-before != uint64(written) || written == 0 {
		t.Errorf("stats %+v after %d frames written", s, written)
	}

	conn := dialUDP(t, ns)
	payload := []byte("ping")
	read := 0
	allocs = testing.AllocsPerRun(50, func() {
		conn.Write(payload)
		for {
			waitReadable(t, u)
			n, err := u.ReadBatch(batch)
			if err != nil || n > 1 {
				t.Fatalf("ReadBatch: %d %v", n, err)
			}
			if n == 1 {
				if string(udpPayload(batch.Frame(0))) != "ping" {
					t.Fatalf("read %x", batch.Frame(0))
				}
				break
			}
		}
		read++
		if err := u.Submit(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("ReadBatch and Submit: %v allocations per call over %d reads", allocs, read)
	}
	if read == 0 {
		t.Error("no frame read")
	}
}

// TestNewUringTAPFallsBackWhenRefused: a kernel without io_uring (ENOSYS)
// or with it disabled (EPERM) makes NewUringTAP fail with that errno and
// leaves the OffloadTAP open and working, for the caller to keep using.
func TestNewUringTAPFallsBackWhenRefused(t *testing.T) {
	for _, refusal := range []unix.Errno{unix.ENOSYS, unix.EPERM} {
		t.Run(refusal.Error(), func(t *testing.T) {
			ns := nstest.New(t, "shimio-uring")
			disableIPv6(t, ns)
			var taps []*OffloadTAP
			if err := nstest.Do(ns, func() error {
				var err error
				taps, err = OpenOffloadTAP(tapName, OffloadTAPConfig{})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			tap := taps[0]
			t.Cleanup(func() { tap.Close() })
			nstest.Run(t, "ip", "-n", ns, "addr", "add", tapAddr.String()+"/24", "dev", tapName)
			nstest.Run(t, "ip", "-n", ns, "link", "set", tapName, "up")

			real := uringSetup
			uringSetup = func(uint32, *uringParams) (int, error) { return -1, refusal }
			t.Cleanup(func() { uringSetup = real })
			u, err := NewUringTAP(tap, UringTAPConfig{})
			if u != nil || !errors.Is(err, refusal) {
				t.Fatalf("NewUringTAP = %v, %v; want nil and %v", u, err, refusal)
			}
			sendUDP(t, ns, []byte("still here"))
			buf := make([]byte, MaxFrame)
			n, err := tap.ReadFrame(buf)
			if err != nil || string(udpPayload(buf[:n])) != "still here" {
				t.Fatalf("the OffloadTAP after the refusal: %q %v", udpPayload(buf[:n]), err)
			}
		})
	}
}

// TestUringTAPReadsOnWhenBuffersRunOut: with six slots, a burst of
// datagrams fills every buffer and ends the multishot read (ENOBUFS);
// ReadBatch, which delivers two at a time, gives the slots back and arms
// the read again, and every datagram arrives, in order.
func TestUringTAPReadsOnWhenBuffersRunOut(t *testing.T) {
	ns := nstest.New(t, "shimio-uring")
	disableIPv6(t, ns)
	var taps []*OffloadTAP
	if err := nstest.Do(ns, func() error {
		var err error
		taps, err = OpenOffloadTAP(tapName, OffloadTAPConfig{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	u, err := NewUringTAP(taps[0], UringTAPConfig{Slots: 6})
	if err != nil {
		taps[0].Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	nstest.Run(t, "ip", "-n", ns, "addr", "add", tapAddr.String()+"/24", "dev", tapName)
	nstest.Run(t, "ip", "-n", ns, "link", "set", tapName, "up")
	if err := u.Submit(); err != nil {
		t.Fatal(err)
	}
	var sent []string
	var payloads [][]byte
	for i := range 40 {
		sent = append(sent, fmt.Sprintf("datagram %d", i))
		payloads = append(payloads, []byte(sent[i]))
	}
	sendUDP(t, ns, payloads...)
	got, most := readDatagrams(t, u, NewBatch(16, 64), len(sent))
	if fmt.Sprint(got) != fmt.Sprint(sent) {
		t.Fatalf("datagrams %q, want %q", got, sent)
	}
	if most > 2 {
		t.Errorf("a ReadBatch delivered %d frames with 6 slots, want at most 2", most)
	}
	if u.rearms == 0 {
		t.Error("the multishot read never ended and was armed again: the test did not run out of buffers")
	}
}

// lockedThread runs functions on a goroutine locked to an OS thread of
// its own; between them the thread sleeps (the goroutine waits on a
// channel). Its thread ends with the test.
type lockedThread struct {
	tid int
	do  chan func()
}

func newLockedThread(t *testing.T) *lockedThread {
	t.Helper()
	l := &lockedThread{do: make(chan func())}
	started := make(chan int)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		started <- unix.Gettid()
		for f := range l.do {
			f()
		}
	}()
	l.tid = <-started
	t.Cleanup(func() { close(l.do) })
	return l
}

// run runs f on the thread and waits for it.
func (l *lockedThread) run(f func()) {
	done := make(chan struct{})
	l.do <- func() { f(); close(done) }
	<-done
}

// wakeUps is how often the thread has gone to sleep and woken since it
// started (its voluntary context switches).
func (l *lockedThread) wakeUps(t *testing.T) int {
	t.Helper()
	n, err := procstat.WakeUps(0, l.tid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUringTAPDisarmMovesTheReadToAnotherThread: the multishot read runs
// in the thread that armed it, which the kernel wakes for each frame
// even while another thread reads the completions (the control); after
// Disarm on the first thread and Submit on the second, the first sleeps
// through the frames, and no frame is lost across the move, not even
// one sent while no read was armed.
func TestUringTAPDisarmMovesTheReadToAnotherThread(t *testing.T) {
	ns, u := newUringTAP(t)
	a, b := newLockedThread(t), newLockedThread(t)
	batch := NewBatch(16, 64)
	// exchange sends frames one at a time, each read on b before the
	// next goes, and reports the payloads in order.
	exchange := func(prefix string, frames int) []string {
		var got []string
		for i := range frames {
			sendUDP(t, ns, []byte(fmt.Sprintf("%s %d", prefix, i)))
			b.run(func() { got = append(got, readDatagramsQuiet(t, u, batch, 1)...) })
		}
		return got
	}
	want := func(prefix string, frames int) string {
		var w []string
		for i := range frames {
			w = append(w, fmt.Sprintf("%s %d", prefix, i))
		}
		return fmt.Sprint(w)
	}
	var err error
	a.run(func() {
		if err = u.Disarm(time.Second); err == nil {
			err = u.Submit()
		}
	})
	if err != nil || !u.armed {
		t.Fatalf("arming on the first thread: %v (armed %v)", err, u.armed)
	}
	const frames = 30
	before := a.wakeUps(t)
	if got := exchange("armed on a", frames); fmt.Sprint(got) != want("armed on a", frames) {
		t.Fatalf("read %q", got)
	}
	woke := a.wakeUps(t) - before
	t.Logf("armed on the first thread: it woke %d times for %d frames read on the second", woke, frames)
	if woke < frames/2 {
		t.Fatalf("control: the thread that armed the read woke %d times for %d frames read on another, want most", woke, frames)
	}

	a.run(func() { err = u.Disarm(time.Second) })
	if err != nil || u.armed {
		t.Fatalf("Disarm: %v (armed %v)", err, u.armed)
	}
	sendUDP(t, ns, []byte("while disarmed"))
	b.run(func() { err = u.Submit() })
	if err != nil || !u.armed {
		t.Fatalf("arming on the second thread: %v (armed %v)", err, u.armed)
	}
	var first []string
	b.run(func() { first = readDatagramsQuiet(t, u, batch, 1) })
	if fmt.Sprint(first) != "[while disarmed]" {
		t.Fatalf("the frame sent while no read was armed: read %q", first)
	}
	before = a.wakeUps(t)
	if got := exchange("armed on b", frames); fmt.Sprint(got) != want("armed on b", frames) {
		t.Fatalf("read %q", got)
	}
	woke = a.wakeUps(t) - before
	t.Logf("after the move: %d", woke)
	if woke > 2 {
		t.Errorf("after Disarm the first thread still woke %d times for %d frames", woke, frames)
	}
}

// readDatagramsQuiet is readDatagrams without the checks of the vnet
// header, callable from another goroutine (it reports with Errorf).
func readDatagramsQuiet(t *testing.T, u *UringTAP, batch *Batch, want int) []string {
	var got []string
	fds := []unix.PollFd{{Fd: int32(u.FD()), Events: unix.POLLIN}}
	for len(got) < want {
		if n, err := unix.Poll(fds, 20_000); err != nil && err != unix.EINTR || n == 0 && err == nil {
			t.Errorf("never readable: %d %v", n, err)
			return got
		}
		n, err := u.ReadBatch(batch)
		if err != nil {
			t.Errorf("ReadBatch: %v", err)
			return got
		}
		for i := range n {
			if p := udpPayload(batch.Frame(i)); p != nil {
				got = append(got, string(p))
			}
		}
	}
	return got
}
