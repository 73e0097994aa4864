package link

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestAFPacketWriteFramesSendsInOrder: a batch longer than one sendmmsg
// call arrives whole and in order, the counters agree, and the batch
// path does not allocate.
func TestAFPacketWriteFramesSendsInOrder(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
	watchdog(t, b, 20*time.Second)
	const n = maxBatch*2 + 5
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = testFrame(w.macA, fmt.Sprintf("batch %d", i))
	}
	sent, err := WriteFrames(a, frames)
	if err != nil || sent != n {
		t.Fatalf("WriteFrames: sent %d of %d, %v", sent, n, err)
	}
	for i := range frames {
		if m, want := readMarker(t, b), fmt.Sprintf("batch %d", i); m != want {
			t.Fatalf("frame %d: marker %q, want %q", i, m, want)
		}
	}
	if s := a.Stats(); s.TxFrames != n || s.TxBytes != uint64(n*len(frames[0])) {
		t.Errorf("stats %+v after %d frames", s, n)
	}
	if allocs := testing.AllocsPerRun(20, func() {
		if _, err := a.WriteFrames(frames[:8]); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("WriteFrames: %v allocations per call, want 0", allocs)
	}
}

// TestAFPacketWriteFramesSkipsARefusedFrame: a frame the kernel refuses
// (larger than the MTU) fails alone; the frames around it are sent and
// the error names the link.
func TestAFPacketWriteFramesSkipsARefusedFrame(t *testing.T) {
	w := newWire(t)
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{})
	b := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
	watchdog(t, b, 20*time.Second)
	huge := append(testFrame(w.macA, "huge"), make([]byte, 9000)...)
	frames := [][]byte{testFrame(w.macA, "first"), huge, testFrame(w.macA, "last")}
	sent, err := WriteFrames(a, frames)
	if sent != 2 || err == nil {
		t.Fatalf("sent %d, err %v: want 2 and an error", sent, err)
	}
	if m := readMarker(t, b); m != "first" {
		t.Fatalf("first marker %q", m)
	}
	if m := readMarker(t, b); m != "last" {
		t.Fatalf("second marker %q", m)
	}
	if _, err := a.WriteFrames([][]byte{{}}); err == nil {
		t.Error("an empty frame was accepted")
	}
}

// TestWriteFramesFallsBackToWriteFrame: a link without batching gets the
// frames one by one, and a failing one does not stop the others.
func TestWriteFramesFallsBackToWriteFrame(t *testing.T) {
	l := &failingLink{failAt: 1}
	sent, err := WriteFrames(l, [][]byte{{1}, {2}, {3}})
	if sent != 2 || !errors.Is(err, errRefused) || len(l.got) != 2 || l.got[1][0] != 3 {
		t.Fatalf("sent %d, err %v, got %v", sent, err, l.got)
	}
}

var errRefused = errors.New("refused")

type failingLink struct {
	Link
	failAt int
	calls  int
	got    [][]byte
}

func (l *failingLink) WriteFrame(f []byte) error {
	defer func() { l.calls++ }()
	if l.calls == l.failAt {
		return errRefused
	}
	l.got = append(l.got, f)
	return nil
}
