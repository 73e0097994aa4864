package link

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"testing"
)

func TestMemPairCarriesCopiesBothWays(t *testing.T) {
	a, b := NewMemPair(4)
	defer a.Close()
	defer b.Close()

	frame := []byte("hello from a")
	if err := a.WriteFrame(frame); err != nil {
		t.Fatal(err)
	}
	frame[0] = 'X' // the link must have copied it
	buf := make([]byte, 64)
	n, err := b.ReadFrame(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:n]); got != "hello from a" {
		t.Fatalf("b read %q", got)
	}

	if err := b.WriteFrame([]byte("reply")); err != nil {
		t.Fatal(err)
	}
	n, err = a.ReadFrame(buf)
	if err != nil || string(buf[:n]) != "reply" {
		t.Fatalf("a read %q, %v", buf[:n], err)
	}

	want := Stats{TxFrames: 1, TxBytes: 12, RxFrames: 1, RxBytes: 5}
	if got := a.Stats(); got != want {
		t.Errorf("a stats %+v, want %+v", got, want)
	}
	if a.Name() == b.Name() {
		t.Errorf("both ends named %q", a.Name())
	}
}

func TestMemPairDropsWhenFullAndKeepsOrder(t *testing.T) {
	const depth = 3
	a, b := NewMemPair(depth)
	defer a.Close()
	defer b.Close()

	for i := range 5 {
		if err := a.WriteFrame([]byte{byte(i)}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if s := a.Stats(); s.TxFrames != depth || s.TxDropped != 2 {
		t.Fatalf("stats %+v, want %d sent and 2 dropped", s, depth)
	}
	buf := make([]byte, 8)
	for i := range depth {
		n, err := b.ReadFrame(buf)
		if err != nil || n != 1 || buf[0] != byte(i) {
			t.Fatalf("read %d: %v %v", i, buf[:n], err)
		}
	}
}

func TestMemPairSkipsAndCountsTruncatedFrames(t *testing.T) {
	a, b := NewMemPair(4)
	defer a.Close()
	defer b.Close()

	a.WriteFrame(bytes.Repeat([]byte{1}, 100))
	a.WriteFrame([]byte{2, 2})
	buf := make([]byte, 10)
	n, err := b.ReadFrame(buf)
	if err != nil || !bytes.Equal(buf[:n], []byte{2, 2}) {
		t.Fatalf("read %v, %v; want the short frame", buf[:n], err)
	}
	if s := b.Stats(); s.RxTruncated != 1 || s.RxFrames != 1 {
		t.Fatalf("stats %+v, want 1 truncated and 1 received", s)
	}
	if _, err := b.ReadFrame(nil); err == nil {
		t.Fatal("ReadFrame with an empty buffer succeeded")
	}
}

func TestMemCloseUnblocksReaderAndFailsWrites(t *testing.T) {
	a, b := NewMemPair(4)
	defer a.Close()

	readErr := make(chan error)
	go func() {
		_, err := b.ReadFrame(make([]byte, 64))
		readErr <- err
	}()
	// Whether the reader is already blocked or not, Close must make it
	// return net.ErrClosed.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v, want net.ErrClosed", err)
	}
	if err := b.WriteFrame([]byte{1}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write on closed end: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}

	// The peer's cable is out: writes succeed and are counted as dropped.
	if err := a.WriteFrame([]byte{1}); err != nil {
		t.Fatalf("write towards closed peer: %v", err)
	}
	if s := a.Stats(); s.TxDropped != 1 || s.TxFrames != 0 {
		t.Fatalf("stats %+v, want one drop", s)
	}
}

func TestMemPairSteadyStateDoesNotAllocate(t *testing.T) {
	a, b := NewMemPair(8)
	defer a.Close()
	defer b.Close()
	frame := make([]byte, 1514)
	buf := make([]byte, 2048)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := a.WriteFrame(frame); err != nil {
			t.Fatal(err)
		}
		if _, err := b.ReadFrame(buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per frame, want 0", allocs)
	}
}

func TestNewMemPairRejectsZeroDepth(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewMemPair(0) did not panic")
		}
	}()
	NewMemPair(0)
}

func BenchmarkMemPair(b *testing.B) {
	for _, size := range []int{64, 1514} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			x, y := NewMemPair(64)
			defer x.Close()
			defer y.Close()
			frame := make([]byte, size)
			buf := make([]byte, 2048)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				x.WriteFrame(frame)
				if _, err := y.ReadFrame(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
