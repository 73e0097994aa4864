package link

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// waitReadable blocks until l has a frame, so a following ReadBatch sees
// everything the kernel queued. The deadline is a failsafe.
func waitReadable(t testing.TB, l BatchLink) {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(l.FD()), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 20_000)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("%s never became readable: %d %v", l.Name(), n, err)
		}
		return
	}
}

// sendAndReadInBatches writes n test frames on a with one WriteBatch and
// reads them on b with ReadBatch into batch: they must arrive in order,
// some ReadBatch must return more than one (it batches), and a plain
// frame must come with the zero header. It returns the frames sent.
func sendAndReadInBatches(t *testing.T, w vethPair, a *AFPacket, b BatchLink, batch *Batch, n int) [][]byte {
	t.Helper()
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = testFrame(w.macA, fmt.Sprintf("frame %d", i))
	}
	if sent, err := a.WriteBatch(frames, nil); sent != n || err != nil {
		t.Fatalf("WriteBatch: %d %v", sent, err)
	}
	markers, most := readBatchMarkers(t, b, batch, n)
	for i, m := range markers {
		if want := fmt.Sprintf("frame %d", i); m != want {
			t.Fatalf("frame %d: marker %q, want %q", i, m, want)
		}
	}
	if most < 2 {
		t.Errorf("every ReadBatch returned at most %d frame", most)
	}
	if batch.VNet[0] != (wire.VNetHdr{}) {
		t.Errorf("a plain frame came with header %+v", batch.VNet[0])
	}
	return frames
}

// readBatchMarkers reads with ReadBatch until want test frames arrived and
// returns their markers in order, and the largest number one call gave.
func readBatchMarkers(t *testing.T, l BatchLink, b *Batch, want int) (markers []string, most int) {
	t.Helper()
	for len(markers) < want {
		waitReadable(t, l)
		n, err := l.ReadBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, n)
		for i := range n {
			if m := markerOf(b.Frame(i)); m != "" {
				markers = append(markers, m)
			}
		}
	}
	return markers, most
}

// TestAFPacketReadBatchReadsManyFramesPerCall: frames queued before the
// call all come back from one ReadBatch (one recvmmsg), in order.
func TestAFPacketReadBatchReadsManyFramesPerCall(t *testing.T) {
	for _, vnet := range []bool{false, true} {
		t.Run(fmt.Sprintf("vnet=%v", vnet), func(t *testing.T) {
			w := newWire(t)
			a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
			b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t), VNetHdr: vnet})
			if b.VNetHdr() != vnet {
				t.Fatalf("VNetHdr() = %v", b.VNetHdr())
			}
			const sent = 10
			batch := NewBatch(32, 2048)
			frames := sendAndReadInBatches(t, w, a, b, batch, sent)
			if s := b.Stats(); s.RxFrames != sent || s.RxBytes != uint64(sent*len(frames[0])) {
				t.Errorf("stats %+v", s)
			}
			if n, err := b.ReadBatch(batch); n != 0 || err != nil {
				t.Errorf("ReadBatch of an empty socket = %d %v, want 0 and no error", n, err)
			}
		})
	}
}

// TestAFPacketReadBatchSkipsAndCountsTruncatedFrames: long frames between
// short ones are counted and skipped, and the short ones still arrive in
// order in the first slots.
func TestAFPacketReadBatchSkipsAndCountsTruncatedFrames(t *testing.T) {
	for _, vnet := range []bool{false, true} {
		t.Run(fmt.Sprintf("vnet=%v", vnet), func(t *testing.T) {
			w := newWire(t)
			a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
			b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t), VNetHdr: vnet})
			long := func(m string) []byte { return append(testFrame(w.macA, m), make([]byte, 100)...) }
			frames := [][]byte{long("L0"), testFrame(w.macA, "s1"), long("L2"), long("L3"), testFrame(w.macA, "s4")}
			if n, err := a.WriteBatch(frames, nil); n != len(frames) || err != nil {
				t.Fatalf("WriteBatch: %d %v", n, err)
			}
			batch := NewBatch(8, 100)
			markers, _ := readBatchMarkers(t, b, batch, 2)
			if len(markers) != 2 || markers[0] != "s1" || markers[1] != "s4" {
				t.Fatalf("markers %q, want s1 then s4", markers)
			}
			if s := b.Stats(); s.RxTruncated != 3 || s.RxFrames != 2 {
				t.Fatalf("stats %+v, want 3 truncated and 2 received", s)
			}
			for i, buf := range batch.Bufs {
				if len(buf) != 100 {
					t.Fatalf("buffer %d has %d bytes after the swaps", i, len(buf))
				}
			}
		})
	}
}

// TestAFPacketBatchPathDoesNotAllocate: WriteBatch and ReadBatch in steady
// state, with every frame written also read back (so both paths ran).
func TestAFPacketBatchPathDoesNotAllocate(t *testing.T) {
	for _, vnet := range []bool{false, true} {
		t.Run(fmt.Sprintf("vnet=%v", vnet), func(t *testing.T) {
			w := newWire(t)
			a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{VNetHdr: vnet})
			b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t), VNetHdr: vnet})
			batchRoundTripAllocs(t, w, a, b, make([]wire.VNetHdr, batchPerCall))
		})
	}
}

// TestAFPacketWriteBatchChecksHeaders: fewer headers than frames is a
// caller bug, refused before anything is sent.
func TestAFPacketWriteBatchChecksHeaders(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{VNetHdr: true})
	frames := [][]byte{testFrame(w.macA, "x"), testFrame(w.macA, "y")}
	if n, err := a.WriteBatch(frames, make([]wire.VNetHdr, 1)); n != 0 || err == nil {
		t.Fatalf("WriteBatch with one header for two frames: %d %v", n, err)
	}
	if n, err := a.ReadBatch(&Batch{Bufs: make([][]byte, 2), Sizes: make([]int, 1), VNet: make([]wire.VNetHdr, 2)}); n != 0 || err == nil {
		t.Fatalf("ReadBatch of a malformed Batch: %d %v", n, err)
	}
}

// superFrame builds an Ethernet/IPv4/TCP frame of payload bytes with a
// partial checksum, as a kernel hands it out with offloads on, and its
// header: a super-frame of mss-byte segments, or (mss 0) an ordinary
// frame with NEEDS_CSUM.
func superFrame(dstMAC, srcMAC net.HardwareAddr, seq uint32, payload, mss int) ([]byte, wire.VNetHdr) {
	tcp := make([]byte, 20+payload)
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 80)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 5 << 4
	tcp[13] = 0x18 // PSH|ACK
	binary.BigEndian.PutUint16(tcp[14:], 1000)
	for i := range payload {
		tcp[20+i] = byte(i * 7)
	}
	src, dst := netip.MustParseAddr("198.18.200.1"), netip.MustParseAddr("198.18.200.2")
	binary.BigEndian.PutUint16(tcp[16:], wire.PartialChecksum(wire.IP4(src.As4()), wire.IP4(dst.As4()), len(tcp)))
	f := ipv4Frame(dstMAC, srcMAC, src, dst, 6, tcp)
	h := wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, HdrLen: 54, CsumStart: 34, CsumOffset: 16}
	if mss > 0 {
		h.GSOType, h.GSOSize = wire.GSOTCPv4, uint16(mss)
	}
	return f, h
}

// TestAFPacketWriteBatchFinishesOffloadsInSoftware: without vnet headers
// a super-frame leaves as MSS-sized segments and a partial checksum is
// completed, each frame arriving with exact checksums and the stream's
// bytes in place; a super-frame that cannot be segmented is refused
// alone; and the caller's frames are not written to.
func TestAFPacketWriteBatchFinishesOffloadsInSoftware(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: FilterIPv4Dst([]netip.Addr{netip.MustParseAddr("198.18.200.2")})})
	const payload, mss = 10000, 1448
	super, superHdr := superFrame(w.macB, w.macA, 1000, payload, mss)
	partial, partialHdr := superFrame(w.macB, w.macA, 1000+payload, 100, 0)
	bad := testFrame(w.macA, "not TCP")
	frames := [][]byte{super, partial, bad, partial}
	hdrs := []wire.VNetHdr{superHdr, partialHdr, superHdr, partialHdr}
	before := bytes.Clone(super)
	n, err := a.WriteBatch(frames, hdrs)
	if n != 2 || err == nil {
		t.Fatalf("WriteBatch = %d %v, want 2 and an error for the third", n, err)
	}
	if !bytes.Equal(super, before) {
		t.Fatal("WriteBatch wrote to the caller's frame")
	}
	segments := (payload + mss - 1) / mss
	if s := a.Stats(); s.TxFrames != uint64(segments+1) || s.TxErrors != 1 {
		t.Errorf("stats %+v, want %d frames sent and 1 error", s, segments+1)
	}

	var p wire.Packet
	batch := NewBatch(16, 2048)
	seq, got := uint32(1000), 0
	for got < segments+1 {
		waitReadable(t, b)
		k, err := b.ReadBatch(batch)
		if err != nil {
			t.Fatal(err)
		}
		for i := range k {
			f := batch.Frame(i)
			if err := wire.Parse(f, &p); err != nil || p.Kind != wire.KindTCP {
				continue // ARP
			}
			tcp := p.TCP
			if tcp.Checksum() != tcp.ComputeChecksum(p.IP.Src(), p.IP.Dst()) {
				t.Errorf("frame %d: TCP checksum %#x, want %#x", got, tcp.Checksum(), tcp.ComputeChecksum(p.IP.Src(), p.IP.Dst()))
			}
			if uint32(tcp.Seq()) != seq {
				t.Fatalf("frame %d: seq %d, want %d", got, tcp.Seq(), seq)
			}
			data := tcp.Payload()
			if got < segments && len(data) != min(mss, payload-int(seq-1000)) {
				t.Errorf("segment %d: %d bytes", got, len(data))
			}
			for j, c := range data {
				if off := int(seq-1000) + j; off < payload && c != byte(off*7) {
					t.Fatalf("segment %d: byte %d is %d", got, off, c)
				}
			}
			seq += uint32(len(data))
			got++
		}
	}

	// Steady state: the scratch has grown, nothing more is allocated.
	txBefore := a.Stats().TxFrames
	const runs = 20
	if allocs := testing.AllocsPerRun(runs, func() {
		if n, err := a.WriteBatch(frames[:2], hdrs[:2]); n != 2 || err != nil {
			t.Fatalf("WriteBatch: %d %v", n, err)
		}
	}); allocs != 0 {
		t.Errorf("software offloads: %v allocations per WriteBatch", allocs)
	}
	if sent := a.Stats().TxFrames - txBefore; sent != (runs+1)*uint64(segments+1) {
		t.Errorf("%d frames sent by the measured calls, want %d", sent, (runs+1)*(segments+1))
	}
}

// TestCompleteFrameMakesSuperFramesSelfContained: what ReadFrame does to
// a frame whose header it cannot pass on.
func TestCompleteFrameMakesSuperFramesSelfContained(t *testing.T) {
	var p wire.Packet
	for _, mss := range []int{0, 1448} {
		f, h := superFrame(peerMAC, peerMAC, 1, 5000, mss)
		if err := completeFrame(f, h, &p); err != nil {
			t.Fatal(err)
		}
		if err := wire.Parse(f, &p); err != nil {
			t.Fatal(err)
		}
		if got, want := p.TCP.Checksum(), p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()); got != want {
			t.Errorf("mss %d: checksum %#x, want %#x", mss, got, want)
		}
	}
	plain := testFrame(peerMAC, "plain")
	before := bytes.Clone(plain)
	if err := completeFrame(plain, wire.VNetHdr{}, &p); err != nil || !bytes.Equal(plain, before) {
		t.Errorf("a frame without work changed or failed: %v", err)
	}
	udp, h := superFrame(peerMAC, peerMAC, 1, 5000, 1448)
	udp[14+9] = 17
	if err := completeFrame(udp, h, &p); err == nil {
		t.Error("a TCPv4 super-frame that is not TCP was accepted")
	}
}

// TestAFPacketVNetReadFrameIsSelfContained: ReadFrame on a socket with
// vnet headers, under a kernel TCP transfer with offloads on (super-frames
// and partial checksums), returns frames whose checksums are complete.
func TestAFPacketVNetReadFrameIsSelfContained(t *testing.T) {
	w := newWire(t)
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{VNetHdr: true})
	watchdog(t, b, 20*time.Second)
	var ln net.Listener
	if err := nstest.Do(w.nsB, func() error {
		var err error
		ln, err = net.Listen("tcp4", "198.18.200.2:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	var conn net.Conn
	if err := nstest.Do(w.nsA, func() error {
		var err error
		conn, err = net.Dial("tcp4", ln.Addr().String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go conn.Write(make([]byte, 4<<20)) // ends with an error when the test closes conn

	var p wire.Packet
	buf := make([]byte, MaxFrame)
	super := 0
	for tcpFrames := 0; super == 0 || tcpFrames < 20; {
		n, err := b.ReadFrame(buf)
		if err != nil {
			t.Fatalf("after %d TCP frames, %d super-frames: %v", tcpFrames, super, err)
		}
		if wire.Parse(buf[:n], &p) != nil || p.Kind != wire.KindTCP {
			continue
		}
		tcpFrames++
		if n > 1514 {
			super++
		}
		if got, want := p.TCP.Checksum(), p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()); got != want {
			t.Fatalf("TCP frame of %d bytes: checksum %#x, want %#x", n, got, want)
		}
	}
}

// TestAFPacketQdiscBypass: the option is set and frames still go.
func TestAFPacketQdiscBypass(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{QdiscBypass: true, VNetHdr: true})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
	var got int
	var gerr error
	if err := a.raw.Control(func(fd uintptr) {
		got, gerr = unix.GetsockoptInt(int(fd), unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS)
	}); err != nil || gerr != nil || got != 1 {
		t.Fatalf("PACKET_QDISC_BYPASS = %d (%v %v)", got, err, gerr)
	}
	frames := [][]byte{testFrame(w.macA, "b0"), testFrame(w.macA, "b1")}
	if n, err := a.WriteBatch(frames, nil); n != 2 || err != nil {
		t.Fatalf("WriteBatch: %d %v", n, err)
	}
	if markers, _ := readBatchMarkers(t, b, NewBatch(4, 2048), 2); markers[0] != "b0" || markers[1] != "b1" {
		t.Fatalf("markers %q", markers)
	}
}

// batchPerCall is how many frames one round of batchRoundTripAllocs moves.
const batchPerCall = 8

// batchRoundTripAllocs writes batchPerCall frames on a with one WriteBatch
// (with hdrs, which may be nil) and reads them back on b with ReadBatch,
// again and again, and fails the test if a round allocates or if any
// frame is missing or differs: so the measured path really ran. It
// returns the frames written, for a caller that goes on with them.
// readTheseFrames reads with ReadBatch until len(frames) arrived and
// checks they are frames, in order. It does not allocate.
func readTheseFrames(t *testing.T, b BatchLink, batch *Batch, frames [][]byte) {
	t.Helper()
	for got := 0; got < len(frames); {
		waitReadable(t, b)
		n, err := b.ReadBatch(batch)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if !bytes.Equal(batch.Frame(i), frames[got+i]) {
				t.Fatalf("frame %d differs", got+i)
			}
		}
		got += n
	}
}

func batchRoundTripAllocs(t *testing.T, w vethPair, a, b *AFPacket, hdrs []wire.VNetHdr) [][]byte {
	t.Helper()
	frames := make([][]byte, batchPerCall)
	for i := range frames {
		frames[i] = testFrame(w.macA, fmt.Sprintf("alloc %d", i))
	}
	batch := NewBatch(batchPerCall, 2048)
	read := 0
	const runs = 50
	allocs := testing.AllocsPerRun(runs, func() {
		if n, err := a.WriteBatch(frames, hdrs); n != batchPerCall || err != nil {
			t.Fatalf("WriteBatch: %d %v", n, err)
		}
		readTheseFrames(t, b, batch, frames)
		read += batchPerCall
	})
	if allocs != 0 {
		t.Errorf("%v allocations per WriteBatch+ReadBatch", allocs)
	}
	if read != (runs+1)*batchPerCall || b.Stats().RxFrames != uint64(read) {
		t.Errorf("read %d frames (stats %d), want %d", read, b.Stats().RxFrames, (runs+1)*batchPerCall)
	}
	return frames
}
