package backend

import (
	"bytes"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
	"github.com/qsplice/qsplice/tools/netns"
)

// TestWireFramesWaitForTheHoldButControlFramesDoNot: with the wire's
// frames sent in the holds (sendWireInHolds), the data frames of a pass a
// hold will likely follow are queued and leave with the hold (those of
// other passes at once), but a batch holding a control
// datagram is written at once, after what the pass queued before it: a
// SpliceAck is waited on, and the control frames' buffers are reused by
// the pass's next write (queued, a SpliceAck was overwritten by the
// Feedback that followed it, and short connections fell from thousands
// of requests a second to hundreds).
func TestWireFramesWaitForTheHoldButControlFramesDoNot(t *testing.T) {
	requireRoot(t)
	be, fe := newNS(t, "qsbe"), newNS(t, "qsfe")
	run(t, be, "ip", "link", "add", "wire0", "type", "veth", "peer", "name", "eth0", "netns", fe)
	run(t, be, "ip", "link", "set", "wire0", "up")
	run(t, fe, "ip", "link", "set", "eth0", "up")
	open := func(ns, dev string) *link.AFPacket {
		var a *link.AFPacket
		if err := netns.Do(ns, func() (err error) { a, err = link.OpenAFPacket(dev, link.AFPacketConfig{}); return err }); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	feMAC := wire.MAC{2, 0, 0, 0x77, 0, 1}
	d := newTestWorkers(t, 1)
	d.cfg.Frontend = feControl
	w := d.workers[0]
	w.wire = open(be, "wire0")
	w.txWire = w.wire
	peer := open(fe, "eth0")
	if err := w.poller.HoldInRing(); err != nil {
		t.Fatal(err)
	}
	w.sendWireInHolds()
	if !w.wireInHolds {
		t.Fatal("the wire's frames do not go with the holds")
	}
	w.ctlOut = newWireControlOut()
	w.ctlOut.known, w.ctlOut.feMAC, w.ctlOut.heard = true, feMAC, ms(1)

	// dataFrame is an Ethernet frame to the front-end's MAC with a marker.
	dataFrame := func(marker string) []byte {
		f := make([]byte, 14, 64)
		copy(f, feMAC[:])
		copy(f[6:], d.mac[:])
		f[12], f[13] = 0x88, 0xb5 // local experimental EtherType
		return append(f, marker...)
	}
	readAll := func(want int) [][]byte {
		t.Helper()
		var got [][]byte
		buf := make([]byte, 2048)
		for len(got) < want {
			n, err := peer.ReadFrame(buf)
			if err != nil {
				t.Fatal(err)
			}
			if f := buf[:n]; !bytes.Equal(f[0:6], feMAC[:]) {
				continue // the kernel's own frames
			}
			got = append(got, bytes.Clone(buf[:n]))
		}
		return got
	}

	// A pass after which the loop will not hold (short connections)
	// writes its frames at once, ahead of the TAP's writes.
	w.wireFrames = append(w.wireFrames, dataFrame("data 0"))
	w.wireHdrs = append(w.wireHdrs, wire.VNetHdr{})
	w.writeWire()
	if tx := w.wire.Stats().TxFrames; tx != 1 {
		t.Fatalf("%d frames written by a pass not followed by a hold, want 1", tx)
	}
	readAll(1)

	// A pass of a bulk stream (a hold will follow): its data frames are
	// queued, and the peer sees them after the hold.
	w.wireToHold = true
	w.wireFrames = append(w.wireFrames, dataFrame("data 1"), dataFrame("data 2"))
	w.wireHdrs = append(w.wireHdrs, wire.VNetHdr{}, wire.VNetHdr{})
	w.writeWire()
	if tx := w.wire.Stats().TxFrames; tx != 1 {
		t.Fatalf("%d frames written before the hold, want only the first pass's", tx-1)
	}
	// In the same pass, the agent answers on the wire: two control
	// datagrams, written at once, after the data.
	for i, payload := range []string{"ack", "feedback"} {
		if !w.queueWireControl([]byte(payload), ms(2)) {
			t.Fatalf("control datagram %d not queued for the wire", i)
		}
	}
	w.wireFrames = append(w.wireFrames, w.ctlOut.frames...)
	for range w.ctlOut.frames {
		w.wireHdrs = append(w.wireHdrs, wire.VNetHdr{})
	}
	w.ctlOut.frames = w.ctlOut.frames[:0]
	w.writeWire()
	if tx := w.wire.Stats().TxFrames - 1; tx != 4 {
		t.Fatalf("%d frames written by the pass's control write, want the 2 queued before it and its 2", tx)
	}
	got := readAll(4)
	for i, want := range []string{"data 1", "data 2", "ack", "feedback"} {
		if !bytes.HasSuffix(got[i], []byte(want)) {
			t.Fatalf("frame %d on the wire ends %q, want %q", i, got[i][max(len(got[i])-8, 0):], want)
		}
	}

	// The next pass's control buffers are free again; its data waits for
	// the hold, which sends it in its one io_uring_enter.
	w.wireFrames = append(w.wireFrames, dataFrame("data 3"))
	w.wireHdrs = append(w.wireHdrs, wire.VNetHdr{})
	w.writeWire()
	enters := w.poller.HoldEnters()
	if _, err := w.poller.Hold(time.Microsecond, make([]uint32, 4)); err != nil {
		t.Fatal(err)
	}
	if e := w.poller.HoldEnters() - enters; e != 1 || w.wire.Stats().TxFrames != 6 {
		t.Fatalf("the hold made %d io_uring_enter calls and the wire has sent %d frames; want 1 and 6", e, w.wire.Stats().TxFrames)
	}
	if got := readAll(1); !bytes.HasSuffix(got[0], []byte("data 3")) {
		t.Fatalf("after the hold: %q", got[0])
	}
}
