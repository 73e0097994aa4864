package link

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// ringCfg is a small ring of kind k; a ring of blocks has the shortest
// timeout, so that tests do not wait for blocks to fill.
func ringCfg(k RingKind) *RingConfig { return &RingConfig{Kind: k, Blocks: 4} }

// eachRing runs f for each kind of ring.
func eachRing(t *testing.T, f func(t *testing.T, k RingKind)) {
	for _, k := range []RingKind{RingBlocks, RingSlots} {
		t.Run(k.String(), func(t *testing.T) { f(t, k) })
	}
}

// TestRingReadBatchReadsFramesInOrder: frames sent together come back
// from one ReadBatch, in order, with no system call (the block retired as
// a whole), and an empty ring reads 0 without error.
func TestRingReadBatchReadsFramesInOrder(t *testing.T) {
	eachRing(t, func(t *testing.T, k RingKind) {
		for _, vnet := range []bool{false, true} {
			t.Run(fmt.Sprintf("vnet=%v", vnet), func(t *testing.T) { testRingReadsInOrder(t, k, vnet) })
		}
	})
}

func testRingReadsInOrder(t *testing.T, k RingKind, vnet bool) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t), VNetHdr: vnet, RxRing: ringCfg(k)})
	want := RingConfig{Kind: k, BlockSize: DefaultRingBlockSize, Blocks: 4, RetireTimeout: time.Millisecond}
	if k == RingSlots {
		want.BlockSize, want.RetireTimeout, want.FrameSize = DefaultRingSlotBlockSize, 0, 1518
	}
	if rc, ok := b.RxRing(); !ok || rc != want {
		t.Fatalf("RxRing() = %+v %v, want %+v", rc, ok, want)
	}
	const sent = 40
	batch := NewBatch(64, 2048)
	frames := sendAndReadInBatches(t, w, a, b, batch, sent)
	if s := b.Stats(); s.RxFrames != sent || s.RxBytes != uint64(sent*len(frames[0])) || s.RxTruncated != 0 {
		t.Errorf("stats %+v", s)
	}
	if n, err := b.ReadBatch(batch); n != 0 || err != nil {
		t.Errorf("ReadBatch of an empty ring = %d %v, want 0 and no error", n, err)
	}
	if b.ring.left != 0 || b.ring.waiting() {
		t.Errorf("drained ring still holds a block: left %d", b.ring.left)
	}
}

// TestRingReadBatchStopsAtFullBatch: a batch smaller than what is waiting
// takes what fits; the rest stays in the ring, the socket stays readable
// (so a level-triggered loop comes back) and the next call continues in
// order.
func TestRingReadBatchStopsAtFullBatch(t *testing.T) { eachRing(t, testRingStopsAtFullBatch) }

func testRingStopsAtFullBatch(t *testing.T, k RingKind) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t), RxRing: ringCfg(k)})
	const sent = 10
	frames := make([][]byte, sent)
	for i := range frames {
		frames[i] = testFrame(w.macA, fmt.Sprintf("f%d", i))
	}
	if n, err := a.WriteBatch(frames, nil); n != sent || err != nil {
		t.Fatalf("WriteBatch: %d %v", n, err)
	}
	batch := NewBatch(3, 2048)
	var got []string
	for len(got) < sent {
		waitReadable(t, b)
		n, err := b.ReadBatch(batch)
		if err != nil {
			t.Fatal(err)
		}
		if n > 3 {
			t.Fatalf("ReadBatch returned %d frames into 3 buffers", n)
		}
		for i := range n {
			got = append(got, markerOf(batch.Frame(i)))
		}
	}
	for i, m := range got {
		if want := fmt.Sprintf("f%d", i); m != want {
			t.Fatalf("frame %d: %q, want %q (all: %q)", i, m, want, got)
		}
	}
}

// TestRingSkipsAndCountsTruncatedFrames: frames longer than the caller's
// buffer, and frames the kernel cut because they are longer than a block
// (the interface's MTU raised after the ring was sized for it), are
// skipped and counted; the frames around them arrive in order.
func TestRingSkipsAndCountsTruncatedFrames(t *testing.T) { eachRing(t, testRingTruncation) }

func testRingTruncation(t *testing.T, k RingKind) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t), RxRing: &RingConfig{Kind: k, BlockSize: 4096, Blocks: 8}})
	for _, ns := range []string{w.nsA, w.nsB} {
		dev := map[string]string{w.nsA: vethA, w.nsB: vethB}[ns]
		nstest.Run(t, "ip", "-n", ns, "link", "set", dev, "mtu", "9000")
	}
	long := func(m string, extra int) []byte { return append(testFrame(w.macA, m), make([]byte, extra)...) }
	frames := [][]byte{
		long("L0", 100), testFrame(w.macA, "s1"), long("cut2", 5000),
		long("L3", 100), testFrame(w.macA, "s4"), long("cut5", 6000), testFrame(w.macA, "s6"),
	}
	if n, err := a.WriteBatch(frames, nil); n != len(frames) || err != nil {
		t.Fatalf("WriteBatch: %d %v", n, err)
	}
	batch := NewBatch(8, 100)
	markers, _ := readBatchMarkers(t, b, batch, 3)
	if strings.Join(markers, " ") != "s1 s4 s6" {
		t.Fatalf("markers %q, want s1 s4 s6", markers)
	}
	if s := b.Stats(); s.RxTruncated != 4 || s.RxFrames != 3 {
		t.Fatalf("stats %+v, want 4 truncated and 3 received", s)
	}

	// ReadFrame counts the same way.
	if n, err := a.WriteBatch([][]byte{long("cut", 5000), testFrame(w.macA, "s7")}, nil); n != 2 || err != nil {
		t.Fatalf("WriteBatch: %d %v", n, err)
	}
	watchdog(t, b, 20*time.Second)
	if m := readMarker(t, b); m != "s7" {
		t.Fatalf("ReadFrame: %q, want s7", m)
	}
	if s := b.Stats(); s.RxTruncated != 5 {
		t.Fatalf("stats %+v, want 5 truncated", s)
	}

	// With room in the caller's buffer, a frame longer than its slot
	// arrives whole (queued on the socket); one longer than a block
	// cannot.
	big := long("big", 6000)
	if n, err := a.WriteBatch([][]byte{big, testFrame(w.macA, "s8")}, nil); n != 2 || err != nil {
		t.Fatalf("WriteBatch: %d %v", n, err)
	}
	batch = NewBatch(8, 9018)
	markers, _ = readBatchMarkers(t, b, batch, 1)
	want := "s8"
	if k == RingSlots {
		want = "big"
		if !bytes.Equal(batch.Frame(0), big) {
			t.Fatalf("the long frame arrived as %d bytes, or changed", batch.Sizes[0])
		}
	}
	if markers[0] != want {
		t.Fatalf("markers %q, want %s first", markers, want)
	}
}

// TestRingVNetHeaderSitsBeforeTheFrame checks on the running kernel where
// tpacket_rcv puts the virtio-net header of a ring frame: a super-frame
// sent through a vnet socket on A crosses the veth whole, and B's ring
// must deliver it byte for byte with the header the sender gave (GSO type
// and size, checksum start and offset) decoded from the VNetHdrLen bytes
// before tp_mac.
func TestRingVNetHeaderSitsBeforeTheFrame(t *testing.T) {
	eachRing(t, func(t *testing.T, k RingKind) { testRingVNetHeader(t, ringCfg(k)) })
	t.Run("slots-of-super-frames", func(t *testing.T) {
		testRingVNetHeader(t, &RingConfig{Kind: RingSlots, FrameSize: MaxFrame})
	})
}

func testRingVNetHeader(t *testing.T, rc *RingConfig) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{VNetHdr: true})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{VNetHdr: true, RxRing: rc,
		Filter: FilterIPv4Dst([]netip.Addr{netip.MustParseAddr("198.18.200.2")})})
	const payload, mss = 20000, 1448
	super, h := superFrame(w.macB, w.macA, 5000, payload, mss)
	small, hs := superFrame(w.macB, w.macA, 5000+payload, 100, 0)
	if n, err := a.WriteBatch([][]byte{super, small}, []wire.VNetHdr{h, hs}); n != 2 || err != nil {
		t.Fatalf("WriteBatch: %d %v", n, err)
	}
	batch := NewBatch(8, MaxFrame)
	var got [][]byte
	var hdrs []wire.VNetHdr
	for len(got) < 2 {
		waitReadable(t, b)
		n, err := b.ReadBatch(batch)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if f := batch.Frame(i); len(f) > 34 && f[12] == 0x08 && f[13] == 0x00 {
				got = append(got, bytes.Clone(f))
				hdrs = append(hdrs, batch.VNet[i])
			}
		}
	}
	if !bytes.Equal(got[0], super) {
		t.Fatalf("super-frame of %d bytes arrived as %d bytes, or changed", len(super), len(got[0]))
	}
	g := hdrs[0]
	if g.GSOType&^wire.GSOECN != wire.GSOTCPv4 || g.GSOSize != mss || !g.NeedsCsum() || g.CsumStart != h.CsumStart || g.CsumOffset != h.CsumOffset {
		t.Fatalf("super-frame header %+v, want TCPv4 GSO of %d, NEEDS_CSUM at %d+%d", g, mss, h.CsumStart, h.CsumOffset)
	}
	if !bytes.Equal(got[1], small) || hdrs[1].IsGSO() || !hdrs[1].NeedsCsum() || hdrs[1].CsumStart != hs.CsumStart {
		t.Fatalf("small frame: header %+v, bytes equal %v", hdrs[1], bytes.Equal(got[1], small))
	}
	wantQueued := uint64(0)
	if rc.Kind == RingSlots && rc.FrameSize == 0 {
		wantQueued = 1 // the super-frame does not fit an MTU-sized slot
	}
	if b.ring.queued != wantQueued {
		t.Errorf("%d frames fetched from the socket's queue, want %d", b.ring.queued, wantQueued)
	}
}

// TestRingQueuedFramesDoNotAllocate: super-frames through a ring of
// slots (each fetched from the socket's queue with recvmsg), read back
// byte for byte, allocation-free.
func TestRingQueuedFramesDoNotAllocate(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{VNetHdr: true})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{VNetHdr: true, RxRing: ringCfg(RingSlots),
		Filter: FilterIPv4Dst([]netip.Addr{netip.MustParseAddr("198.18.200.2")})})
	super, h := superFrame(w.macB, w.macA, 5000, 30000, 1448)
	frames, hdrs := [][]byte{super}, []wire.VNetHdr{h}
	batch := NewBatch(4, MaxFrame)
	const runs = 30
	read := 0
	allocs := testing.AllocsPerRun(runs, func() {
		if n, err := a.WriteBatch(frames, hdrs); n != 1 || err != nil {
			t.Fatalf("WriteBatch: %d %v", n, err)
		}
		for {
			waitReadable(t, b)
			n, err := b.ReadBatch(batch)
			if err != nil {
				t.Fatal(err)
			}
			for i := range n { // the super-frame, or ARP (which the filter keeps)
				if f := batch.Frame(i); len(f) > 1514 {
					if !bytes.Equal(f, super) || batch.VNet[i].GSOSize != 1448 {
						t.Fatalf("a super-frame of %d bytes with header %+v", len(f), batch.VNet[i])
					}
					read++
					return
				}
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per super-frame", allocs)
	}
	if read != runs+1 || b.ring.queued != uint64(read) {
		t.Errorf("read %d super-frames, %d from the queue, want %d", read, b.ring.queued, runs+1)
	}
}

// TestRingCarriesKernelSuperFrames: a kernel TCP transfer with offloads
// on reaches a ring with vnet headers as super-frames, through ReadBatch
// (headers passed on) and ReadFrame (frames completed).
func TestRingCarriesKernelSuperFrames(t *testing.T) { eachRing(t, testRingKernelSuperFrames) }

func testRingKernelSuperFrames(t *testing.T, k RingKind) {
	w := newWire(t)
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{VNetHdr: true, RxRing: ringCfg(k)})
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
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.Read(buf); err != nil {
					break
				}
			}
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
	go func() {
		chunk := make([]byte, 256<<10)
		for {
			if _, err := conn.Write(chunk); err != nil {
				return // the test closed conn
			}
		}
	}()

	var p wire.Packet
	batch := NewBatch(64, MaxFrame)
	batchSupers := 0
	for batchSupers < 5 {
		waitReadable(t, b)
		n, err := b.ReadBatch(batch)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			f, h := batch.Frame(i), batch.VNet[i]
			if wire.Parse(f, &p) != nil || p.Kind != wire.KindTCP || len(f) <= 1514 {
				continue
			}
			if h.GSOType&^wire.GSOECN != wire.GSOTCPv4 || h.GSOSize == 0 || !h.NeedsCsum() {
				t.Fatalf("super-frame of %d bytes with header %+v", len(f), h)
			}
			batchSupers++
		}
	}
	watchdog(t, b, 20*time.Second)
	buf := make([]byte, MaxFrame)
	for frameSupers := 0; frameSupers < 5; {
		n, err := b.ReadFrame(buf)
		if err != nil {
			t.Fatal(err)
		}
		if wire.Parse(buf[:n], &p) != nil || p.Kind != wire.KindTCP {
			continue
		}
		if got, want := p.TCP.Checksum(), p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()); got != want {
			t.Fatalf("ReadFrame: TCP frame of %d bytes with checksum %#x, want %#x", n, got, want)
		}
		if n > 1514 {
			frameSupers++
		}
	}
	if s := b.Stats(); s.RxTruncated != 0 {
		t.Errorf("%d frames truncated", s.RxTruncated)
	}
	if k == RingSlots && b.ring.queued < 10 {
		t.Errorf("%d frames fetched from the socket's queue, want the super-frames", b.ring.queued)
	}
}

// TestRingWithFanout: a FanoutPorts group whose members read through
// rings; every TCP frame reaches exactly the member FanoutShard names.
func TestRingWithFanout(t *testing.T) { eachRing(t, testRingWithFanout) }

func testRingWithFanout(t *testing.T, k RingKind) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	const members = 3
	fanout := &Fanout{Group: 11, Mode: FanoutPorts}
	var links []*AFPacket
	for range members {
		links = append(links, openAFPacket(t, w.nsB, vethB, AFPacketConfig{Fanout: fanout, RxRing: ringCfg(k),
			Filter: FilterIPv4Dst([]netip.Addr{netip.MustParseAddr("198.18.0.2")})}))
	}
	const sent = 60
	frames := make([][]byte, sent)
	for i := range frames {
		f := tcpFrame(uint16(40000+i), 80, 0)
		copy(f[0:6], w.macB)
		frames[i] = f
	}
	if n, err := a.WriteBatch(frames, nil); n != sent || err != nil {
		t.Fatalf("WriteBatch: %d %v", n, err)
	}
	p := newPoller(t)
	for i, l := range links {
		if err := p.Add(l.FD(), uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint16]int{}
	perMember := make([]int, members)
	batch := NewBatch(16, 2048)
	ready := make([]uint32, members)
	for got := 0; got < sent; {
		n, err := p.Wait(20*time.Second, ready)
		if err != nil || n == 0 {
			t.Fatalf("Wait: %d %v after %d of %d frames", n, err, got, sent)
		}
		for _, token := range ready[:n] {
			k, err := links[token].ReadBatch(batch)
			if err != nil {
				t.Fatal(err)
			}
			for i := range k {
				f := batch.Frame(i)
				if want := FanoutShard(f, members); int(token) != want {
					t.Fatalf("member %d got a frame FanoutShard gives to %d", token, want)
				}
				seen[uint16(f[34])<<8|uint16(f[35])]++
				perMember[token]++
				got++
			}
		}
	}
	for i := range sent {
		if c := seen[uint16(40000+i)]; c != 1 {
			t.Errorf("frame from port %d arrived %d times", 40000+i, c)
		}
	}
	for m, c := range perMember {
		if c == 0 {
			t.Errorf("member %d received nothing: %v", m, perMember)
		}
	}
}

// TestRingBatchPathDoesNotAllocate: WriteBatch on A and ReadBatch through
// B's ring in steady state, every frame written also read back and
// compared (so the measured path ran).
func TestRingBatchPathDoesNotAllocate(t *testing.T) {
	eachRing(t, func(t *testing.T, k RingKind) {
		for _, vnet := range []bool{false, true} {
			t.Run(fmt.Sprintf("vnet=%v", vnet), func(t *testing.T) { testRingAllocs(t, k, vnet) })
		}
	})
}

func testRingAllocs(t *testing.T, k RingKind, vnet bool) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{VNetHdr: vnet})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t), VNetHdr: vnet, RxRing: ringCfg(k)})
	frames := batchRoundTripAllocs(t, w, a, b, nil)
	const runs = 50
	buf := make([]byte, 2048)
	if allocs := testing.AllocsPerRun(runs, func() {
		if err := a.WriteFrame(frames[0]); err != nil {
			t.Fatal(err)
		}
		if n, err := b.ReadFrame(buf); err != nil || !bytes.Equal(buf[:n], frames[0]) {
			t.Fatalf("ReadFrame: %d %v", n, err)
		}
	}); allocs != 0 {
		t.Errorf("%v allocations per WriteFrame+ReadFrame", allocs)
	}
}

// TestRingCloseUnblocksReadFrame: a ReadFrame parked on an empty ring
// returns net.ErrClosed, and ReadBatch after Close does too.
func TestRingCloseUnblocksReadFrame(t *testing.T) { eachRing(t, testRingClose) }

func testRingClose(t *testing.T, k RingKind) {
	w := newWire(t)
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t), RxRing: ringCfg(k)})
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
	if _, err := b.ReadBatch(NewBatch(2, 2048)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("ReadBatch after Close: %v, want net.ErrClosed", err)
	}
	if b.ring.mem != nil {
		t.Error("the ring is still mapped after Close")
	}
}

// TestRingClosedSocketLeavesFanoutGroup: closing a ring link unmaps the
// ring, and with it the socket; a socket that lived on would keep taking
// its share of the group and the remaining member would miss frames.
func TestRingClosedSocketLeavesFanoutGroup(t *testing.T) { eachRing(t, testRingLeavesFanoutGroup) }

func testRingLeavesFanoutGroup(t *testing.T, k RingKind) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	fanout := &Fanout{Group: 12, Mode: FanoutPorts}
	filter := FilterIPv4Dst([]netip.Addr{netip.MustParseAddr("198.18.0.2")})
	gone := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Fanout: fanout, RxRing: ringCfg(k), Filter: filter})
	stays := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Fanout: fanout, RxRing: ringCfg(k), Filter: filter})
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	const sent = 20
	frames := make([][]byte, sent)
	for i := range frames {
		f := tcpFrame(uint16(41000+i), 80, 0)
		copy(f[0:6], w.macB)
		frames[i] = f
	}
	if n, err := a.WriteBatch(frames, nil); n != sent || err != nil {
		t.Fatalf("WriteBatch: %d %v", n, err)
	}
	batch := NewBatch(32, 2048)
	for got := 0; got < sent; {
		waitReadable(t, stays)
		n, err := stays.ReadBatch(batch)
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
}

// TestRingConfigRefusals: geometry the kernel would refuse or that cannot
// hold the socket's largest frame is refused with an error that says so.
func TestRingConfigRefusals(t *testing.T) {
	w := newWire(t)
	for _, tc := range []struct {
		cfg  AFPacketConfig
		want string
	}{
		{AFPacketConfig{RxRing: &RingConfig{BlockSize: 5000}}, "page size"},
		{AFPacketConfig{VNetHdr: true, RxRing: &RingConfig{BlockSize: 64 << 10}}, "cannot hold a frame of 65553"},
		{AFPacketConfig{RxRing: &RingConfig{BlockSize: 4096, Blocks: -1}}, "blocks"},
		{AFPacketConfig{RxRing: &RingConfig{RetireTimeout: -time.Millisecond}}, "retire timeout"},
		{AFPacketConfig{RxRing: &RingConfig{Kind: RingSlots, RetireTimeout: time.Millisecond}}, "no retire timeout"},
		{AFPacketConfig{RxRing: &RingConfig{Kind: 7}}, "unknown ring kind"},
		{AFPacketConfig{RxRing: &RingConfig{FrameSize: 2048}}, "no frame size"},
		{AFPacketConfig{RxRing: &RingConfig{Kind: RingSlots, FrameSize: 100 << 10}}, "ring slots for frames"},
	} {
		err := nstest.Do(w.nsB, func() error {
			a, err := OpenAFPacket(vethB, tc.cfg)
			if err == nil {
				a.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), vethB) {
			t.Errorf("%+v: error %v, want one naming %s and mentioning %q", *tc.cfg.RxRing, err, vethB, tc.want)
		}
	}
}

func TestResolveRing(t *testing.T) {
	// With vnet headers a block must hold a super-frame; a slot need not.
	if got, err := resolveRing(RingConfig{}, true, 1518); err != nil || got.BlockSize != DefaultRingBlockSize {
		t.Errorf("blocks with vnet headers: %+v %v", got, err)
	}
	if got, err := resolveRing(RingConfig{BlockSize: 64 << 10}, true, 1518); err == nil {
		t.Errorf("a 64 KiB block for super-frames: %+v accepted", got)
	}
	if got, err := resolveRing(RingConfig{Kind: RingSlots}, true, 1518); err != nil || got.BlockSize != DefaultRingSlotBlockSize || got.FrameSize != 1518 {
		t.Errorf("slots with vnet headers: %+v %v", got, err)
	}
	for _, tc := range []struct {
		in      RingConfig
		largest int
		want    RingConfig
	}{
		{RingConfig{}, 1518, RingConfig{BlockSize: DefaultRingBlockSize, Blocks: 32, RetireTimeout: time.Millisecond}},
		{RingConfig{}, 200 << 10, RingConfig{BlockSize: 256 << 10, Blocks: 16, RetireTimeout: time.Millisecond}},
		{RingConfig{BlockSize: 8192, Blocks: 3, RetireTimeout: 1500 * time.Microsecond}, 1518,
			RingConfig{BlockSize: 8192, Blocks: 3, RetireTimeout: 2 * time.Millisecond}},
		{RingConfig{RetireTimeout: 10 * time.Millisecond}, 1518, RingConfig{BlockSize: DefaultRingBlockSize, Blocks: 32, RetireTimeout: 10 * time.Millisecond}},
		// Slots are for MTU-sized frames, vnet headers or not: 40 of
		// 1616 bytes per 64 KiB, 64 blocks for 4 MiB.
		{RingConfig{Kind: RingSlots}, 1518, RingConfig{Kind: RingSlots, BlockSize: 64 << 10, Blocks: 64, FrameSize: 1518}},
		{RingConfig{Kind: RingSlots}, 9018, RingConfig{Kind: RingSlots, BlockSize: 64 << 10, Blocks: 64, FrameSize: 9018}},
		{RingConfig{Kind: RingSlots, FrameSize: MaxFrame}, 1518, RingConfig{Kind: RingSlots, BlockSize: 1 << 20, Blocks: 8, FrameSize: MaxFrame}},
	} {
		got, err := resolveRing(tc.in, false, tc.largest)
		if err != nil || got != tc.want {
			t.Errorf("resolveRing(%+v, %d) = %+v %v, want %+v", tc.in, tc.largest, got, err, tc.want)
		}
	}
}

// TestRingLoneFrameWaitsForTheRetireTimeout measures what a ring costs an
// interactive frame on this kernel: a frame alone in its block becomes
// readable only when the block times out; a slot is handed over at once.
// It must arrive, the median within a generous bound of the timeout (the
// longest wait also counts the test's own scheduling: 72 ms once at load
// 17 on 2 cores); the log says how long it took.
func TestRingLoneFrameWaitsForTheRetireTimeout(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	for _, rc := range []RingConfig{
		{Blocks: 4, RetireTimeout: time.Millisecond},
		{Blocks: 4, RetireTimeout: 4 * time.Millisecond},
		{Kind: RingSlots, Blocks: 4},
	} {
		b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t), RxRing: &rc})
		plain := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
		batch := NewBatch(4, 2048)
		var ringWait, plainWait []time.Duration
		for i := range 20 {
			start := time.Now()
			if err := a.WriteFrame(testFrame(w.macA, fmt.Sprintf("lone %d", i))); err != nil {
				t.Fatal(err)
			}
			waitReadable(t, plain)
			plainWait = append(plainWait, time.Since(start))
			waitReadable(t, b)
			ringWait = append(ringWait, time.Since(start))
			for _, l := range []*AFPacket{b, plain} {
				if n, err := l.ReadBatch(batch); n != 1 || err != nil {
					t.Fatalf("ReadBatch: %d %v", n, err)
				}
			}
		}
		slices.Sort(ringWait)
		slices.Sort(plainWait)
		longest := ringWait[len(ringWait)-1]
		t.Logf("%v ring, timeout %v: lone frame readable after median %v, max %v; median %v with recvmmsg",
			rc.Kind, rc.RetireTimeout, ringWait[len(ringWait)/2], longest, plainWait[len(plainWait)/2])
		if median := ringWait[len(ringWait)/2]; median > rc.RetireTimeout+50*time.Millisecond {
			t.Errorf("%+v: lone frames waited %v (median), longest %v", rc, median, longest)
		}
	}
}

func TestParseRingFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *RingConfig
	}{
		{"", nil},
		{"off", nil},
		{"slots", &RingConfig{Kind: RingSlots}},
		{"blocks", &RingConfig{Kind: RingBlocks}},
		{"blocks:4ms", &RingConfig{Kind: RingBlocks, RetireTimeout: 4 * time.Millisecond}},
	} {
		got, err := ParseRingFlag(tc.in)
		if err != nil || (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("ParseRingFlag(%q) = %+v %v, want %+v", tc.in, got, err, tc.want)
			continue
		}
		if back, _ := ParseRingFlag(RingFlag(got)); (back == nil) != (got == nil) || back != nil && *back != *got {
			t.Errorf("%q: RingFlag gives %q, which parses as %+v", tc.in, RingFlag(got), back)
		}
	}
	for _, bad := range []string{"on", "slots:1ms", "blocks:", "blocks:500us", "blocks:x", "off:1ms"} {
		if got, err := ParseRingFlag(bad); err == nil {
			t.Errorf("ParseRingFlag(%q) = %+v, want an error", bad, got)
		}
	}
}

// handRing builds a ring in ordinary memory, laid out as the kernel lays
// out its rings, for the walker's unit tests and fuzzer.
func handRing(kind RingKind, mem []byte, blockSize, blocks, slotSize int, vnet bool) *rxRing {
	r := &rxRing{mem: mem, blockSize: blockSize, blocks: blocks, vnet: vnet}
	if kind == RingSlots {
		r.slotSize, r.perBlock = slotSize, blockSize/slotSize
		r.slots = r.perBlock * blocks
	}
	return r
}

// putBlockFrame writes a tpacket3_hdr at off with the frame (and its vnet
// header before it) at tp_mac, and returns the offset of the next one.
func putBlockFrame(mem []byte, off int, frame, vnet []byte, last bool) int {
	const mac = 92 // what Linux 6 uses with vnet headers
	ne := binary.NativeEndian
	size := (mac + len(frame) + 7) &^ 7
	if !last {
		ne.PutUint32(mem[off+frameNextOff:], uint32(size))
	}
	ne.PutUint32(mem[off+frameSnaplenOff:], uint32(len(frame)))
	ne.PutUint32(mem[off+frameLenOff:], uint32(len(frame)))
	ne.PutUint16(mem[off+frameMacOff:], mac)
	copy(mem[off+mac:], frame)
	copy(mem[off+mac-len(vnet):], vnet)
	return off + size
}

// TestRingWalkHandBuiltBlocks: the walker reads a retired block's frames
// with their vnet headers, skips a cut frame, hands the block back
// (block_status 0) once its last frame is passed, and stops at a block
// the kernel still owns.
func TestRingWalkHandBuiltBlocks(t *testing.T) {
	const blockSize = 4096
	mem := make([]byte, 2*blockSize)
	ne := binary.NativeEndian
	ne.PutUint32(mem[blockStatusOff:], unix.TP_STATUS_USER|unix.TP_STATUS_BLK_TMO)
	ne.PutUint32(mem[blockNumPktsOff:], 3)
	ne.PutUint32(mem[blockFirstPktOff:], blockDescLen)
	h := wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, CsumStart: 34, CsumOffset: 16}
	vh := make([]byte, wire.VNetHdrLen)
	h.Encode(vh)
	one, two, cut := testFrame(peerMAC, "one"), testFrame(peerMAC, "two"), testFrame(peerMAC, "cut")
	off := putBlockFrame(mem, blockDescLen, one, vh, false)
	second := off
	off = putBlockFrame(mem, off, cut, vh, false)
	ne.PutUint32(mem[second+frameLenOff:], 9000) // the kernel cut it
	putBlockFrame(mem, off, two, vh, true)

	r := handRing(RingBlocks, mem, blockSize, 2, 0, true)
	var got []string
	for {
		f, ok, err := r.peek()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if f.whole {
			if dh, _ := wire.DecodeVNetHdr(f.vnet); dh != h {
				t.Errorf("frame %q: header %+v, want %+v", markerOf(f.data), dh, h)
			}
			got = append(got, markerOf(f.data))
		} else {
			got = append(got, "(cut)")
		}
		r.advance()
	}
	if strings.Join(got, " ") != "one (cut) two" {
		t.Fatalf("walked %q", got)
	}
	if s := ne.Uint32(mem[blockStatusOff:]); s != unix.TP_STATUS_KERNEL || r.cur != 1 {
		t.Fatalf("block 0 status %#x after its last frame, reader at block %d", s, r.cur)
	}
}

// TestRingWalkHandBuiltSlots: slots are read in order, one marked
// TP_STATUS_COPY is reported as queued, and each goes back on advance.
func TestRingWalkHandBuiltSlots(t *testing.T) {
	const blockSize, slot = 4096, 2048
	mem := make([]byte, 2*blockSize)
	ne := binary.NativeEndian
	put := func(i int, status uint32, frame []byte) {
		off := i/2*blockSize + i%2*slot
		ne.PutUint32(mem[off:], status)
		ne.PutUint32(mem[off+slotLenOff:], uint32(len(frame)))
		ne.PutUint32(mem[off+slotSnaplenOff:], uint32(len(frame)))
		ne.PutUint16(mem[off+slotMacOff:], 66)
		copy(mem[off+66:], frame)
	}
	put(0, unix.TP_STATUS_USER, testFrame(peerMAC, "s0"))
	put(1, unix.TP_STATUS_USER|unix.TP_STATUS_COPY, nil)
	put(2, unix.TP_STATUS_USER, testFrame(peerMAC, "s2"))
	r := handRing(RingSlots, mem, blockSize, 2, slot, false)
	var got []string
	for {
		f, ok, err := r.peek()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if f.queued {
			got = append(got, "(queued)")
		} else {
			got = append(got, markerOf(f.data))
		}
		r.advance()
	}
	if strings.Join(got, " ") != "s0 (queued) s2" || r.cur != 3 {
		t.Fatalf("walked %q, reader at slot %d", got, r.cur)
	}
	for i := range 3 {
		if s := ne.Uint32(mem[i/2*blockSize+i%2*slot:]); s != unix.TP_STATUS_KERNEL {
			t.Errorf("slot %d status %#x after it was read", i, s)
		}
	}
}

// FuzzRingWalk: whatever a ring's memory says, the walker returns only
// frames inside the mapping, reports inconsistencies as errors, and
// hands everything back in bounded time.
func FuzzRingWalk(f *testing.F) {
	f.Add(false, []byte{1, 0, 0, 0, 2, 0, 0, 0, 48, 0, 0, 0})
	f.Add(true, []byte{1, 0, 0, 0, 200, 0, 0, 0, 100, 0, 0, 0, 66, 0})
	f.Fuzz(func(t *testing.T, slots bool, seed []byte) {
		const blockSize, blocks, slot = 4096, 2, 1024
		mem := make([]byte, blockSize*blocks)
		for i := 0; len(seed) > 0 && i < len(mem); i += len(seed) {
			copy(mem[i:], seed)
		}
		kind := RingBlocks
		if slots {
			kind = RingSlots
		}
		r := handRing(kind, mem, blockSize, blocks, slot, true)
		for i := range blocks {
			binary.NativeEndian.PutUint32(mem[i*blockSize+blockStatusOff:], unix.TP_STATUS_USER)
		}
		for steps := 0; ; steps++ {
			if steps > blockSize*blocks {
				t.Fatal("the walk does not end")
			}
			fr, ok, err := r.peek()
			if err != nil {
				if !errors.Is(err, ErrRingCorrupt) {
					t.Fatalf("error %v is not ErrRingCorrupt", err)
				}
				continue
			}
			if !ok {
				break
			}
			for _, b := range [][]byte{fr.data, fr.vnet} {
				if len(b) > 0 {
					start := int(uintptr(unsafe.Pointer(&b[0])) - uintptr(unsafe.Pointer(&mem[0])))
					if start < 0 || start+len(b) > len(mem) {
						t.Fatalf("a frame at %d of %d bytes outside the ring", start, len(b))
					}
				}
			}
			r.advance()
		}
	})
}
