package link

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// openTxRingLink opens vethA's sender with a transmit ring of the given
// slots and checks that the ring, not the sendmmsg fallback, is in use.
func openTxRingLink(t *testing.T, w vethPair, vnet bool, slots int) *AFPacket {
	t.Helper()
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{VNetHdr: vnet, TxRing: &TxRingConfig{Frames: slots}})
	rc, ok := a.TxRing()
	if !ok {
		t.Fatalf("no transmit ring: %v", a.TxRingError())
	}
	if rc.Frames < slots || rc.FrameSize == 0 {
		t.Fatalf("ring config %+v", rc)
	}
	return a
}

// sizedTestFrame is a testFrame padded to size bytes with a pattern
// that depends on the marker, so a frame overwritten by a later one in
// its slot would not compare equal.
func sizedTestFrame(w vethPair, marker string, size int) []byte {
	f := testFrame(w.macA, marker)
	for len(f) < size {
		f = append(f, byte(len(f))^marker[len(marker)-1])
	}
	return f
}

// readTestFrames reads want test frames on b and returns them in order.
func readTestFrames(t *testing.T, b BatchLink, want int) [][]byte {
	t.Helper()
	batch := NewBatch(64, 2048)
	var got [][]byte
	for len(got) < want {
		waitReadable(t, b)
		n, err := b.ReadBatch(batch)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if markerOf(batch.Frame(i)) != "" {
				got = append(got, bytes.Clone(batch.Frame(i)))
			}
		}
	}
	return got
}

// TestTxRingFramesArriveIntact: frames of many sizes written through a
// transmit ring of a few slots, several batches in a row (so every slot
// is reused while earlier frames may still be on their way), arrive on
// the veth peer complete, unchanged and in order; a link with vnet
// headers sends plain frames behind the zero header; a WriteFrame after
// them arrives after them. One send(2) per
// ring's worth at most: the ring is kicked, not spun.
func TestTxRingFramesArriveIntact(t *testing.T) {
	for _, vnet := range []bool{false, true} {
		t.Run(fmt.Sprintf("vnet=%v", vnet), func(t *testing.T) {
			w := newWire(t)
			const slots = 4
			a := openTxRingLink(t, w, vnet, slots)
			b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
			watchdog(t, b, 20e9)
			var sent [][]byte
			const batches, perBatch = 5, 23
			for k := range batches {
				frames := make([][]byte, perBatch)
				for i := range frames {
					frames[i] = sizedTestFrame(w, fmt.Sprintf("b%d f%d", k, i), 60+(k*perBatch+i)*61%1440)
				}
				if n, err := a.WriteBatch(frames, nil); n != perBatch || err != nil {
					t.Fatalf("WriteBatch %d: %d %v", k, n, err)
				}
				sent = append(sent, frames...)
			}
			// WriteFrame too: sendmsg on the ring's socket would only
			// flush the ring, so it must go elsewhere.
			one := sizedTestFrame(w, "one", 700)
			if err := a.WriteFrame(one); err != nil {
				t.Fatal(err)
			}
			sent = append(sent, one)
			got := readTestFrames(t, b, len(sent))
			for i := range sent {
				if !bytes.Equal(got[i], sent[i]) {
					t.Fatalf("frame %d: got %q (%d bytes), want %q (%d bytes)", i, markerOf(got[i]), len(got[i]), markerOf(sent[i]), len(sent[i]))
				}
			}
			st, rs := a.Stats(), a.TxRingStats()
			if st.TxFrames != uint64(len(sent)) || st.TxErrors != 0 {
				t.Errorf("stats %+v, want %d frames sent and no error", st, len(sent))
			}
			if rs.Kicks == 0 || rs.Overflow == uint64(len(sent)) {
				t.Errorf("ring stats %+v: the ring did not carry the frames", rs)
			}
			// Each kick hands over up to a ring's worth; one per frame
			// would mean the writer loops instead of filling the ring.
			if maxKicks := uint64(len(sent)); rs.Kicks >= maxKicks {
				t.Errorf("%d kicks for %d frames", rs.Kicks, len(sent))
			}
		})
	}
}

// TestTxRingSuperFramesSegmentedByKernel: a TCP super-frame with a
// partial checksum goes through the ring whole behind its vnet header;
// with TSO and checksum offload off on the sending veth, the kernel
// segments it and completes every checksum, and the peer reads MSS-sized
// segments carrying the stream's bytes in order.
func TestTxRingSuperFramesSegmentedByKernel(t *testing.T) {
	w := newWire(t)
	nstest.Run(t, "ip", "netns", "exec", w.nsA, "ethtool", "-K", vethA, "tso", "off", "tx", "off")
	a := openTxRingLink(t, w, true, 8)
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: FilterIPv4Dst([]netip.Addr{netip.MustParseAddr("198.18.200.2")})})
	watchdog(t, b, 20e9)
	const payload, mss = 20000, 1448
	super, hdr := superFrame(w.macB, w.macA, 5000, payload, mss)
	small, smallHdr := superFrame(w.macB, w.macA, 5000+payload, 300, 0)
	if n, err := a.WriteBatch([][]byte{super, small}, []wire.VNetHdr{hdr, smallHdr}); n != 2 || err != nil {
		t.Fatalf("WriteBatch: %d %v", n, err)
	}
	segments := (payload+mss-1)/mss + 1
	var p wire.Packet
	batch := NewBatch(32, 2048)
	seq, got := uint32(5000), 0
	for got < segments {
		waitReadable(t, b)
		k, err := b.ReadBatch(batch)
		if err != nil {
			t.Fatal(err)
		}
		for i := range k {
			if err := wire.Parse(batch.Frame(i), &p); err != nil || p.Kind != wire.KindTCP {
				continue
			}
			tcp := p.TCP
			if c, want := tcp.Checksum(), tcp.ComputeChecksum(p.IP.Src(), p.IP.Dst()); c != want {
				t.Errorf("segment %d: TCP checksum %#x, want %#x", got, c, want)
			}
			if uint32(tcp.Seq()) != seq {
				t.Fatalf("segment %d: seq %d, want %d", got, tcp.Seq(), seq)
			}
			data := tcp.Payload()
			if got < segments-1 && len(data) != min(mss, payload-int(seq-5000)) {
				t.Errorf("segment %d: %d bytes", got, len(data))
			}
			for j, c := range data {
				if off := int(seq-5000) + j; off < payload && c != byte(off*7) {
					t.Fatalf("segment %d: byte %d is %d", got, off, c)
				}
			}
			seq += uint32(len(data))
			got++
		}
	}
	if seq != 5000+payload+300 {
		t.Errorf("stream ends at %d, want %d", seq, 5000+payload+300)
	}
}

// TestTxRingRefusedFrameEndsTheBatch: a frame whose vnet header the
// kernel refuses (GSO on a frame that is not TCP) ends WriteBatch with
// its index; the frames before it arrive, the ones after it are not
// sent, and the ring keeps working: the caller's retry of the rest, and
// later batches, arrive in order.
func TestTxRingRefusedFrameEndsTheBatch(t *testing.T) {
	w := newWire(t)
	a := openTxRingLink(t, w, true, 8)
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
	watchdog(t, b, 20e9)
	frames := [][]byte{testFrame(w.macA, "r0"), testFrame(w.macA, "r1"), testFrame(w.macA, "bad"), testFrame(w.macA, "r3")}
	hdrs := make([]wire.VNetHdr, len(frames))
	hdrs[2] = wire.VNetHdr{GSOType: wire.GSOTCPv4, GSOSize: 1000, HdrLen: 54}
	n, err := a.WriteBatch(frames, hdrs)
	if n != 2 || err == nil {
		t.Fatalf("WriteBatch = %d %v, want 2 and the refusal of frame 2", n, err)
	}
	if n, err := a.WriteBatch(frames[3:], hdrs[3:]); n != 1 || err != nil {
		t.Fatalf("WriteBatch of the rest: %d %v", n, err)
	}
	more := make([][]byte, 20)
	for i := range more {
		more[i] = testFrame(w.macA, fmt.Sprintf("m%d", i))
	}
	if n, err := a.WriteBatch(more, nil); n != len(more) || err != nil {
		t.Fatalf("WriteBatch after the refusal: %d %v", n, err)
	}
	want := []string{"r0", "r1", "r3"}
	for i := range more {
		want = append(want, fmt.Sprintf("m%d", i))
	}
	got := readTestFrames(t, b, len(want))
	for i, f := range got {
		if m := markerOf(f); m != want[i] {
			t.Fatalf("frame %d: %q, want %q (all: %d frames)", i, m, want[i], len(got))
		}
	}
	if s := a.Stats(); s.TxErrors != 1 || s.TxFrames != uint64(len(want)) {
		t.Errorf("stats %+v, want 1 error and %d frames", s, len(want))
	}
}

// TestTxRingFullOverflowsWithoutLoss: a ring of two slots on a link
// whose queue drains slowly (tbf at 20 Mbit/s), so slots stay in flight
// and the ring is full for most of a 200-frame batch: what it cannot take
// goes out with sendmmsg after it, waiting for room in the socket
// buffer; every frame arrives once, in order, and the writer waits
// instead of spinning (few kicks, and the call takes about as long as
// the queue needs to drain).
func TestTxRingFullOverflowsWithoutLoss(t *testing.T) {
	w := newWire(t)
	nstest.Run(t, "tc", "-n", w.nsA, "qdisc", "add", "dev", vethA, "root", "tbf", "rate", "20mbit", "burst", "16kb", "limit", "4mb")
	a := openTxRingLink(t, w, true, 2)
	if rc, _ := a.TxRing(); rc.Frames != 2 {
		t.Fatalf("ring of %d slots, want 2", rc.Frames)
	}
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
	watchdog(t, b, 20e9)
	frames := make([][]byte, 200)
	for i := range frames {
		frames[i] = sizedTestFrame(w, fmt.Sprintf("full %d", i), 1500)
	}
	before := threadCPU(t)
	if n, err := a.WriteBatch(frames, nil); n != len(frames) || err != nil {
		t.Fatalf("WriteBatch: %d %v", n, err)
	}
	got := readTestFrames(t, b, len(frames))
	cpu := threadCPU(t) - before
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d: got %q, want %q", i, markerOf(got[i]), markerOf(frames[i]))
		}
	}
	rs := a.TxRingStats()
	t.Logf("ring of 2 slots, %d frames: %d kicks, %d sent with sendmmsg, %v CPU", len(frames), rs.Kicks, rs.Overflow, cpu)
	if rs.Overflow == 0 {
		t.Error("the ring never overflowed: the test did not fill it")
	}
	if rs.Kicks > uint64(len(frames)) {
		t.Errorf("%d kicks for %d frames: the writer spins", rs.Kicks, len(frames))
	}
	// 300 kB at 20 Mbit/s take 120 ms; a spinning writer would burn
	// most of that in CPU.
	if cpu > 60*time.Millisecond {
		t.Errorf("%v of CPU while the queue drained: the writer spins", cpu)
	}
}

// threadCPU is the CPU time the process used so far (user and system).
func threadCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestTxRingBatchPathDoesNotAllocate: WriteBatch through the ring and
// ReadBatch on the peer in steady state, every frame read back.
func TestTxRingBatchPathDoesNotAllocate(t *testing.T) {
	for _, vnet := range []bool{false, true} {
		t.Run(fmt.Sprintf("vnet=%v", vnet), func(t *testing.T) {
			w := newWire(t)
			a := openTxRingLink(t, w, vnet, 16)
			b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t), VNetHdr: vnet})
			batchRoundTripAllocs(t, w, a, b, make([]wire.VNetHdr, batchPerCall))
			if a.TxRingStats().Kicks == 0 {
				t.Error("the ring was not used")
			}
		})
	}
}

// TestTxRingConfig: the ring is refused with a receive ring and with
// impossible sizes; the flag parses.
func TestTxRingConfig(t *testing.T) {
	w := newWire(t)
	for _, cfg := range []AFPacketConfig{
		{TxRing: &TxRingConfig{}, RxRing: &RingConfig{Kind: RingSlots}},
		{TxRing: &TxRingConfig{FrameSize: 10}},
		{TxRing: &TxRingConfig{Frames: -1}},
	} {
		err := nstest.Do(w.nsA, func() error {
			a, err := OpenAFPacket(vethA, cfg)
			if err == nil {
				a.Close()
			}
			return err
		})
		if err == nil {
			t.Errorf("OpenAFPacket(%+v) succeeded", cfg)
		}
	}
	for s, want := range map[string]bool{"on": true, "off": false, "": false} {
		rc, err := ParseTxRingFlag(s)
		if err != nil || (rc != nil) != want {
			t.Errorf("ParseTxRingFlag(%q) = %v %v", s, rc, err)
		}
	}
	if _, err := ParseTxRingFlag("yes"); err == nil {
		t.Error(`ParseTxRingFlag("yes") succeeded`)
	}
	if !kernelAtLeast(2, 6) || kernelAtLeast(999, 0) {
		t.Error("kernelAtLeast disagrees with the running kernel")
	}
}
