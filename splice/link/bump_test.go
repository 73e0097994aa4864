package link

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// A bump in the wire: kernel TCP between a client namespace and a server
// namespace, with the test's Go loop forwarding every frame between two
// links in the middle, as the shim's data path does (without the
// splicing): the measure of what the device boundary costs.
//
//	nsC: client 198.18.203.1 ── link[0] ┐
//	                                     bump (one goroutine, a Poller)
//	nsS: server 198.18.203.2 ── veth ── link[1] (AF_PACKET in nsW)
//
// link[0] is an OffloadTAP or water TAP in nsC, or an AF_PACKET socket on
// a veth whose other end is the client's.

var (
	bumpClient = "198.18.203.1"
	bumpServer = "198.18.203.2"
)

type bumpNet struct {
	nsC, nsW, nsS string
}

// newBumpNet creates the three namespaces and the server's veth (qsb2 in
// nsW, qsb3 in nsS); with clientVeth also the client's (qsb0 in nsC, qsb1
// in nsW). Offloads stay at the veth default (on) unless offloadsOff.
func newBumpNet(t testing.TB, clientVeth, offloadsOff bool) bumpNet {
	t.Helper()
	n := bumpNet{
		nsC: nstest.New(t, "qs-bumptest"),
		nsW: nstest.New(t, "qs-bumptest"),
		nsS: nstest.New(t, "qs-bumptest"),
	}
	for _, ns := range []string{n.nsC, n.nsW, n.nsS} {
		disableIPv6(t, ns)
	}
	nstest.Veth(t, n.nsW, "qsb2", n.nsS, "qsb3")
	nstest.Run(t, "ip", "-n", n.nsS, "addr", "add", bumpServer+"/24", "dev", "qsb3")
	if clientVeth {
		nstest.Veth(t, n.nsC, "qsb0", n.nsW, "qsb1")
		nstest.Run(t, "ip", "-n", n.nsC, "addr", "add", bumpClient+"/24", "dev", "qsb0")
	}
	if offloadsOff {
		for _, dev := range [][2]string{{n.nsW, "qsb2"}, {n.nsS, "qsb3"}} {
			if err := nstest.Do(dev[0], func() error { return DisableOffloads(dev[1]) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	return n
}

// openOffloadTAPIn opens a single-queue OffloadTAP in ns as the client's
// interface, addressed and up.
func (n bumpNet) openOffloadTAP(t testing.TB) *OffloadTAP {
	t.Helper()
	var taps []*OffloadTAP
	if err := nstest.Do(n.nsC, func() error {
		var err error
		taps, err = OpenOffloadTAP("qsbt0", OffloadTAPConfig{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taps[0].Close() })
	nstest.Run(t, "ip", "-n", n.nsC, "addr", "add", bumpClient+"/24", "dev", "qsbt0")
	nstest.Run(t, "ip", "-n", n.nsC, "link", "set", "qsbt0", "up")
	return taps[0]
}

// bump forwards frames between two BatchLinks on one goroutine: wait on
// the Poller, drain each ready link with ReadBatch, write what it gave to
// the other link with WriteBatch, headers and all.
type bump struct {
	links   [2]BatchLink
	poller  *Poller
	observe func(from int, frame []byte, h wire.VNetHdr)
	stop    atomic.Bool
	done    chan error
	// Counted on the loop's goroutine, read after stop.
	reads, frames int
	writeErrs     int
	firstWriteErr error
	// tid is the thread the loop is locked to, for counting its
	// system calls (BenchmarkRingBump).
	tid atomic.Int32
}

func startBump(t testing.TB, a, b BatchLink, observe func(from int, frame []byte, h wire.VNetHdr)) *bump {
	t.Helper()
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	bp := &bump{links: [2]BatchLink{a, b}, poller: p, observe: observe, done: make(chan error, 1)}
	for i, l := range bp.links {
		if err := p.Add(l.FD(), uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	go func() { bp.done <- bp.run() }()
	t.Cleanup(func() { bp.halt(t) })
	return bp
}

func (bp *bump) run() error {
	runtime.LockOSThread()
	bp.tid.Store(int32(unix.Gettid()))
	var batches [2]*Batch
	for i := range batches {
		batches[i] = NewBatch(64, MaxFrame)
	}
	frames := make([][]byte, 0, 64)
	ready := make([]uint32, 3)
	for {
		n, err := bp.poller.Wait(-1, ready)
		if err != nil {
			return err
		}
		for _, token := range ready[:n] {
			if token == WakeToken {
				if bp.stop.Load() {
					return nil
				}
				continue
			}
			src, dst, b := bp.links[token], bp.links[1-token], batches[token]
			got, err := src.ReadBatch(b)
			if err != nil {
				return err
			}
			bp.reads++
			bp.frames += got
			frames = frames[:0]
			for i := range got {
				frames = append(frames, b.Frame(i))
				if bp.observe != nil {
					bp.observe(int(token), b.Frame(i), b.VNet[i])
				}
			}
			if sent, err := dst.WriteBatch(frames, b.VNet[:got]); err != nil {
				// A refused frame is lost, as on a wire; TCP resends it.
				bp.writeErrs += got - sent
				if bp.firstWriteErr == nil {
					bp.firstWriteErr = err
				}
			}
		}
	}
}

// halt stops the loop and returns its error; idempotent.
func (bp *bump) halt(t testing.TB) {
	if bp.stop.Swap(true) {
		return
	}
	bp.poller.Wake()
	if err := <-bp.done; err != nil {
		t.Errorf("bump: %v", err)
	}
	bp.poller.Close()
}

// legacyBump is the old path: one goroutine per direction, one frame per
// system call through Link.
func startLegacyBump(t testing.TB, a, b Link) {
	t.Helper()
	var wg sync.WaitGroup
	var stopped atomic.Bool
	forward := func(src, dst Link) {
		defer wg.Done()
		buf := make([]byte, 2048)
		for {
			n, err := src.ReadFrame(buf)
			if err != nil {
				if !stopped.Load() {
					t.Errorf("legacy bump: %v", err)
				}
				return
			}
			dst.WriteFrame(buf[:n]) // a refused frame is lost, as on a wire
		}
	}
	wg.Add(2)
	go forward(a, b)
	go forward(b, a)
	t.Cleanup(func() {
		stopped.Store(true)
		a.Close()
		b.Close()
		wg.Wait()
	})
}

// The stream: 8-byte little-endian word i holds i, so a lost, duplicated,
// reordered or corrupted segment shows at the first word it touches.
const streamChunk = 64 << 10

func fillStream(chunk []byte, word uint64) {
	for i := 0; i < len(chunk); i += 8 {
		binary.LittleEndian.PutUint64(chunk[i:], word)
		word++
	}
}

// transfer sends size bytes (a multiple of streamChunk) over kernel TCP
// from the client namespace to the server namespace and checks them word
// by word on arrival. It returns how long the transfer took.
func transfer(t testing.TB, n bumpNet, size int) time.Duration {
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
	received := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			received <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(60 * time.Second)) // failsafe only
		got, want := make([]byte, streamChunk), make([]byte, streamChunk)
		for off := 0; off < size; off += streamChunk {
			if _, err := io.ReadFull(c, got); err != nil {
				received <- fmt.Errorf("server: after %d of %d bytes: %w", off, size, err)
				return
			}
			fillStream(want, uint64(off/8))
			for i := 0; i < streamChunk; i += 8 {
				if g, w := binary.LittleEndian.Uint64(got[i:]), binary.LittleEndian.Uint64(want[i:]); g != w {
					received <- fmt.Errorf("server: stream corrupted at byte %d: word %d, want %d", off+i, g, w)
					return
				}
			}
		}
		if k, err := c.Read(got); k != 0 || !errors.Is(err, io.EOF) {
			received <- fmt.Errorf("server: %d bytes past the end, %v", k, err)
			return
		}
		received <- nil
	}()

	start := time.Now()
	var conn net.Conn
	if err := nstest.Do(n.nsC, func() error {
		var err error
		conn, err = net.Dial("tcp4", ln.Addr().String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(60 * time.Second)) // failsafe only
	chunk := make([]byte, streamChunk)
	for off := 0; off < size; off += streamChunk {
		fillStream(chunk, uint64(off/8))
		if _, err := conn.Write(chunk); err != nil {
			conn.Close()
			t.Fatalf("client: after %d bytes: %v", off, err)
		}
	}
	conn.Close()
	if err := <-received; err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// superFrames counts the TCP super-frames a bump saw leave link 0.
type superFrames struct {
	count, partial int
	largest        int
}

func (s *superFrames) observe(from int, frame []byte, h wire.VNetHdr) {
	if from != 0 {
		return
	}
	if h.GSOType&^wire.GSOECN == wire.GSOTCPv4 && len(frame) > 1514 {
		s.count++
		s.largest = max(s.largest, len(frame))
		if h.NeedsCsum() {
			s.partial++
		}
	}
}

const bulkSize = 32 << 20

// TestBumpPassesVethSuperFramesWhole: with offloads on (the veth default)
// AF_PACKET sockets with vnet headers on both sides of the bump read the
// client's TSO super-frames and hand them on whole, and the stream
// arrives intact.
func TestBumpPassesVethSuperFramesWhole(t *testing.T) {
	n := newBumpNet(t, true, false)
	if on := offloadState(t, n.nsC, "qsb0")["tcp-segmentation-offload"]; on != "on" {
		t.Fatalf("TSO is %q on the client's veth, want the default on", on)
	}
	cfg := AFPacketConfig{VNetHdr: true, Promiscuous: true}
	a := openAFPacket(t, n.nsW, "qsb1", cfg)
	b := openAFPacket(t, n.nsW, "qsb2", cfg)
	var seen superFrames
	bp := startBump(t, a, b, seen.observe)
	transfer(t, n, bulkSize)
	bp.halt(t)
	if seen.count == 0 || seen.partial != seen.count {
		t.Fatalf("super-frames seen %d (with NEEDS_CSUM %d), want some, all partial", seen.count, seen.partial)
	}
	if bp.writeErrs != 0 {
		t.Errorf("%d frames refused, first: %v", bp.writeErrs, bp.firstWriteErr)
	}
	t.Logf("%d super-frames up to %d bytes; %d frames in %d ReadBatch calls", seen.count, seen.largest, bp.frames, bp.reads)
}

// TestBumpOffloadTAPToAFPacket: the client's kernel sends through an
// OffloadTAP; the bump reads super-frames with partial checksums and
// writes them to an AF_PACKET socket, with vnet headers (the kernel
// segments) or without (WriteBatch segments in software; the server's
// veth then has offloads off, so its ACKs come complete into the TAP).
func TestBumpOffloadTAPToAFPacket(t *testing.T) {
	for _, vnet := range []bool{true, false} {
		t.Run(fmt.Sprintf("vnet=%v", vnet), func(t *testing.T) {
			n := newBumpNet(t, false, !vnet)
			tap := n.openOffloadTAP(t)
			af := openAFPacket(t, n.nsW, "qsb2", AFPacketConfig{VNetHdr: vnet, Promiscuous: true})
			var seen superFrames
			bp := startBump(t, tap, af, seen.observe)
			transfer(t, n, bulkSize)
			bp.halt(t)
			if seen.count == 0 || seen.partial != seen.count {
				t.Fatalf("super-frames seen %d (with NEEDS_CSUM %d), want some, all partial", seen.count, seen.partial)
			}
			if bp.writeErrs != 0 {
				t.Errorf("%d frames refused, first: %v", bp.writeErrs, bp.firstWriteErr)
			}
			s := af.Stats()
			if !vnet && s.TxFrames <= uint64(bp.frames) {
				t.Errorf("software segmentation: %d frames sent for %d read", s.TxFrames, bp.frames)
			}
			t.Logf("%d super-frames up to %d bytes; %d frames in %d ReadBatch calls; AF_PACKET sent %d frames",
				seen.count, seen.largest, bp.frames, bp.reads, s.TxFrames)
		})
	}
}

// BenchmarkOffloadBump measures kernel TCP bulk through the bump: the fast
// path (OffloadTAP and AF_PACKET with vnet headers, one goroutine on a
// Poller) against the old one (water TAP and AF_PACKET, one frame per
// system call, offloads off). Each iteration moves bulkSize bytes; B/frame
// is the mean size of what the TAP handed the bump.
//
//	go test -run '^$' -bench OffloadBump -benchtime 20x ./splice/link/
func BenchmarkOffloadBump(b *testing.B) {
	b.Run("offload", func(b *testing.B) {
		n := newBumpNet(b, false, false)
		tap := n.openOffloadTAP(b)
		af := openAFPacket(b, n.nsW, "qsb2", AFPacketConfig{VNetHdr: true, Promiscuous: true})
		startBump(b, tap, af, nil)
		benchTransfer(b, n)
		s := tap.Stats()
		b.ReportMetric(float64(s.RxBytes)/float64(s.RxFrames), "B/frame")
	})
	b.Run("legacy", func(b *testing.B) {
		n := newBumpNet(b, false, true)
		var tap *TAP
		if err := nstest.Do(n.nsC, func() error {
			var err error
			tap, err = OpenTAP("qsbt0")
			return err
		}); err != nil {
			b.Fatal(err)
		}
		nstest.Run(b, "ip", "-n", n.nsC, "addr", "add", bumpClient+"/24", "dev", "qsbt0")
		nstest.Run(b, "ip", "-n", n.nsC, "link", "set", "qsbt0", "up")
		af := openAFPacket(b, n.nsW, "qsb2", AFPacketConfig{Promiscuous: true})
		startLegacyBump(b, tap, af)
		benchTransfer(b, n)
		s := tap.Stats()
		b.ReportMetric(float64(s.RxBytes)/float64(s.RxFrames), "B/frame")
	})
}

func benchTransfer(b *testing.B, n bumpNet) {
	transfer(b, n, streamChunk) // connection set-up and ARP out of the measure
	b.SetBytes(bulkSize)
	var total time.Duration
	for b.Loop() {
		total += transfer(b, n, bulkSize)
	}
	b.ReportMetric(float64(b.N)*bulkSize*8/total.Seconds()/1e9, "Gbit/s")
}
