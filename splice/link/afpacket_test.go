package link

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestAFPacketCarriesFramesBetweenNamespaces(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
	watchdog(t, a, 20*time.Second)
	watchdog(t, b, 20*time.Second)

	frame := testFrame(w.macA, "a to b")
	if err := a.WriteFrame(frame); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	n, err := b.ReadFrame(buf)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf[:n], frame) {
		t.Fatalf("b read %x, want %x", buf[:n], frame)
	}
	if err := b.WriteFrame(testFrame(w.macB, "b to a")); err != nil {
		t.Fatal(err)
	}
	if m := readMarker(t, a); m != "b to a" {
		t.Fatalf("a read marker %q", m)
	}
	if s := a.Stats(); s.TxFrames != 1 || s.TxBytes != uint64(len(frame)) || s.RxFrames == 0 {
		t.Errorf("a stats %+v", s)
	}
	if s := b.Stats(); s.RxFrames != 1 || s.RxBytes != uint64(len(frame)) || s.TxFrames != 1 {
		t.Errorf("b stats %+v", s)
	}
	if a.Name() != vethA {
		t.Errorf("name %q", a.Name())
	}
}

// TestAFPacketIgnoresOutgoingFrames proves absence by ordering: a sender
// on A's interface sends X, b answers Y only after receiving X, so a socket
// that read the interface's outgoing frames would see X before Y. (A socket
// never reads back the frames it sent itself, with or without the option;
// the option hides everyone else's outgoing frames: the kernel's, other
// sockets'.)
func TestAFPacketIgnoresOutgoingFrames(t *testing.T) {
	w := newWire(t)
	sender := openAFPacket(t, w.nsA, vethA, AFPacketConfig{Filter: onlyTestFrames(t)})
	quiet := openAFPacket(t, w.nsA, vethA, AFPacketConfig{Filter: onlyTestFrames(t)})
	all := openAFPacket(t, w.nsA, vethA, AFPacketConfig{Filter: onlyTestFrames(t), ReadOutgoing: true})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
	for _, l := range []Link{sender, quiet, all, b} {
		watchdog(t, l, 20*time.Second)
	}

	if err := sender.WriteFrame(testFrame(w.macA, "X")); err != nil {
		t.Fatal(err)
	}
	if m := readMarker(t, b); m != "X" {
		t.Fatalf("b read %q", m)
	}
	if err := b.WriteFrame(testFrame(w.macB, "Y")); err != nil {
		t.Fatal(err)
	}
	if m := readMarker(t, quiet); m != "Y" {
		t.Errorf("default socket read %q first: it reads outgoing frames", m)
	}
	if m := readMarker(t, all); m != "X" {
		t.Errorf("ReadOutgoing socket read %q first, want the outgoing X", m)
	}
	if m := readMarker(t, sender); m != "Y" {
		t.Errorf("sender read %q first, want Y", m)
	}
}

// TestAFPacketKernelFilter checks FilterIPv4Dst in the kernel: a frame to
// another address is sent first and must never be read.
func TestAFPacketKernelFilter(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{
		Filter:      FilterIPv4Dst([]netip.Addr{netip.MustParseAddr("198.18.200.2")}),
		Promiscuous: true,
	})
	watchdog(t, b, 20*time.Second)

	src := netip.MustParseAddr("198.18.200.1")
	const proto = 253 // RFC 3692 experimental protocol number
	wrong := ipv4Frame(w.macB, w.macA, src, netip.MustParseAddr("198.18.200.99"), proto, []byte("wrong"))
	right := ipv4Frame(w.macB, w.macA, src, netip.MustParseAddr("198.18.200.2"), proto, []byte("right"))
	a.WriteFrame(testFrame(w.macA, "not IP"))
	a.WriteFrame(wrong)
	a.WriteFrame(right)

	buf := make([]byte, 2048)
	for {
		n, err := b.ReadFrame(buf)
		if err != nil {
			t.Fatal(err)
		}
		frame := buf[:n]
		if markerOf(frame) != "" {
			t.Fatal("filter let a non-IP frame through")
		}
		if n < 34 || frame[12] != 0x08 || frame[13] != 0x00 || frame[23] != proto {
			continue // ARP, which the filter keeps by design
		}
		if !bytes.Equal(frame, right) {
			t.Fatalf("first IPv4 frame read is %x, want the one to 198.18.200.2", frame)
		}
		return
	}
}

func TestAFPacketSkipsAndCountsTruncatedFrames(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
	watchdog(t, b, 20*time.Second)

	long := testFrame(w.macA, "long")
	short := ethernet(broadcastMAC, w.macA, etherTypeTest, []byte("short!"))
	a.WriteFrame(long)
	a.WriteFrame(short)
	buf := make([]byte, len(short))
	n, err := b.ReadFrame(buf)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf[:n], short) {
		t.Fatalf("read %x, want the short frame", buf[:n])
	}
	if s := b.Stats(); s.RxTruncated != 1 || s.RxFrames != 1 {
		t.Fatalf("stats %+v, want one truncated and one received", s)
	}
}

func TestAFPacketCloseUnblocksRead(t *testing.T) {
	w := newWire(t)
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
	readErr := make(chan error)
	go func() {
		_, err := b.ReadFrame(make([]byte, 2048))
		readErr <- err
	}()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read: %v, want net.ErrClosed", err)
	}
	if err := b.WriteFrame(testFrame(w.macB, "late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write: %v, want net.ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestAFPacketReceiveBuffer(t *testing.T) {
	w := newWire(t)
	for _, tc := range []struct {
		size, want int
	}{
		{0, 2 * DefaultRecvBuffer}, // the kernel doubles the request for bookkeeping
		{1 << 20, 2 << 20},
	} {
		a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{RecvBuffer: tc.size})
		var got int
		var gerr error
		if err := a.raw.Control(func(fd uintptr) {
			got, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		}); err != nil || gerr != nil {
			t.Fatal(err, gerr)
		}
		if got != tc.want {
			t.Errorf("RecvBuffer %d: SO_RCVBUF is %d, want %d", tc.size, got, tc.want)
		}
	}
}

func TestAFPacketErrorsNameTheInterface(t *testing.T) {
	_, err := OpenAFPacket("qs-nosuchif", AFPacketConfig{})
	if err == nil || !strings.Contains(err.Error(), "qs-nosuchif") {
		t.Fatalf("error %v does not name the interface", err)
	}
}

func TestAFPacketReadAndWriteDoNotAllocate(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
	watchdog(t, b, 20*time.Second)
	frame := testFrame(w.macA, "alloc")

	// AllocsPerRun calls f runs+1 times; the writes are also the frames
	// the reads below consume.
	const runs = 200
	if allocs := testing.AllocsPerRun(runs, func() {
		if err := a.WriteFrame(frame); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("WriteFrame: %v allocations per call, want 0", allocs)
	}
	buf := make([]byte, 2048)
	if allocs := testing.AllocsPerRun(runs, func() {
		if _, err := b.ReadFrame(buf); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("ReadFrame: %v allocations per call, want 0", allocs)
	}
	if drops, err := b.KernelDrops(); err != nil || drops != 0 {
		t.Errorf("kernel drops %d, %v", drops, err)
	}
}

func BenchmarkAFPacketWrite(b *testing.B) {
	w := newWire(b)
	a := openAFPacket(b, w.nsA, vethA, AFPacketConfig{})
	frame := testFrame(w.macA, "bench")
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if err := a.WriteFrame(frame); err != nil {
			b.Fatal(err)
		}
	}
}
