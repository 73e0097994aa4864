package link

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
	"golang.org/x/sys/unix"
)

// controlPair is two control sockets in a namespace of their own, on
// 198.18.97.1 and .2 (addresses on its loopback); b takes bcfg if given,
// else cfg.
func controlPair(t *testing.T, cfg ControlConfig, bcfg ...ControlConfig) (a, b *ControlSocket) {
	t.Helper()
	ns := nstest.New(t, "qs-ctltest")
	nstest.Run(t, "ip", "-n", ns, "addr", "add", "198.18.97.1/32", "dev", "lo")
	nstest.Run(t, "ip", "-n", ns, "addr", "add", "198.18.97.2/32", "dev", "lo")
	if err := nstest.Do(ns, func() error {
		var err error
		if a, err = ListenControl(netip.MustParseAddrPort("198.18.97.1:0"), cfg); err != nil {
			return err
		}
		if len(bcfg) > 0 {
			cfg = bcfg[0]
		}
		b, err = ListenControl(netip.MustParseAddrPort("198.18.97.2:7400"), cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// waitControl waits until the poller reports the control socket (token)
// readable, and nothing else.
func waitControl(t *testing.T, p *Poller, token uint32) {
	t.Helper()
	var ready [4]uint32
	n, err := p.Wait(5*time.Second, ready[:])
	if err != nil || n != 1 || ready[0] != token {
		t.Fatalf("Wait = %v %v, want the control socket's token %d", ready[:n], err, token)
	}
}

// TestControlSocketBatch: datagrams queued in one pass leave with Flush,
// the Poller reports the receiver readable, one Recv reads them all in
// order with their sender, and an empty socket reads as 0.
func TestControlSocketBatch(t *testing.T) {
	a, b := controlPair(t, ControlConfig{MaxDatagram: 64, Batch: 8})
	if got := b.LocalAddr(); got != netip.MustParseAddrPort("198.18.97.2:7400") {
		t.Fatalf("LocalAddr = %v", got)
	}
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Add(b.FD(), 3); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Recv(); n != 0 || err != nil {
		t.Fatalf("Recv on an empty socket = %d, %v; want 0, nil", n, err)
	}
	for i := range 5 {
		if err := a.Queue([]byte(fmt.Sprintf("datagram %d", i)), b.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	if a.Queued() != 5 {
		t.Fatalf("Queued = %d, want 5", a.Queued())
	}
	if failed, err := a.Flush(); failed != 0 || err != nil {
		t.Fatalf("Flush = %d, %v", failed, err)
	}
	if a.Queued() != 0 {
		t.Fatalf("Queued = %d after Flush", a.Queued())
	}
	waitControl(t, p, 3)
	n, err := b.Recv()
	if err != nil || n != 5 {
		t.Fatalf("Recv = %d, %v; want the 5 datagrams", n, err)
	}
	for i := range n {
		d, from, err := b.Datagram(i)
		if err != nil || string(d) != fmt.Sprintf("datagram %d", i) || from != a.LocalAddr() {
			t.Errorf("datagram %d = %q from %v, %v; want %q from %v", i, d, from, err, fmt.Sprintf("datagram %d", i), a.LocalAddr())
		}
	}
	if n, err := b.Recv(); n != 0 || err != nil {
		t.Fatalf("Recv after draining = %d, %v; want 0, nil", n, err)
	}
}

// TestControlSocketMoreThanABatch: Queue flushes a full batch by itself,
// and a receiver with more waiting than one Recv takes is reported
// readable again.
func TestControlSocketMoreThanABatch(t *testing.T) {
	a, b := controlPair(t, ControlConfig{MaxDatagram: 16, Batch: 4})
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Add(b.FD(), 1); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := a.Queue([]byte{byte(i)}, b.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	if a.Queued() != 2 {
		t.Fatalf("Queued = %d after 10 datagrams in batches of 4, want 2", a.Queued())
	}
	a.Flush()
	var got []byte
	for len(got) < 10 {
		waitControl(t, p, 1)
		n, err := b.Recv()
		if err != nil || n == 0 || n > 4 {
			t.Fatalf("Recv = %d, %v", n, err)
		}
		for i := range n {
			d, _, _ := b.Datagram(i)
			got = append(got, d...)
		}
	}
	if !bytes.Equal(got, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("received %v", got)
	}
}

// TestControlSocketLimits: Queue refuses what cannot be sent, and queues
// nothing of it.
func TestControlSocketLimits(t *testing.T) {
	a, b := controlPair(t, ControlConfig{MaxDatagram: 8})
	if err := b.Queue(make([]byte, 9), a.LocalAddr()); !errors.Is(err, ErrDatagramTooLong) {
		t.Errorf("a datagram over the limit: %v, want ErrDatagramTooLong", err)
	}
	if err := b.Queue(nil, a.LocalAddr()); err == nil {
		t.Errorf("Queue accepted an empty datagram")
	}
	if err := b.Queue([]byte("x"), netip.MustParseAddrPort("[2001:db8::1]:7")); err == nil {
		t.Errorf("Queue accepted an IPv6 destination")
	}
	if b.Queued() != 0 {
		t.Fatalf("refused datagrams were queued: %d", b.Queued())
	}
}

// TestControlSocketTruncated: a datagram longer than the receiver's limit
// is reported as ErrDatagramTooLong, with its sender, and the one after
// it is read normally.
func TestControlSocketTruncated(t *testing.T) {
	a, small := controlPair(t, ControlConfig{MaxDatagram: 32}, ControlConfig{MaxDatagram: 8})
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Add(small.FD(), 1); err != nil {
		t.Fatal(err)
	}
	a.Queue(bytes.Repeat([]byte{'L'}, 20), small.LocalAddr())
	a.Queue([]byte("short"), small.LocalAddr())
	a.Flush()
	var got []string
	for len(got) < 2 {
		waitControl(t, p, 1)
		n, err := small.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			d, from, err := small.Datagram(i)
			if from != a.LocalAddr() {
				t.Errorf("datagram from %v, want %v", from, a.LocalAddr())
			}
			switch {
			case errors.Is(err, ErrDatagramTooLong):
				got = append(got, "too long")
			case err != nil:
				t.Fatal(err)
			default:
				got = append(got, string(d))
			}
		}
	}
	if fmt.Sprint(got) != "[too long short]" {
		t.Fatalf("received %q, want [too long short]", got)
	}
}

// TestControlSocketAllocatesNothing: a pass's Queue, Flush and Recv
// allocate nothing, and the datagrams measured really went through.
func TestControlSocketAllocatesNothing(t *testing.T) {
	a, b := controlPair(t, ControlConfig{})
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Add(b.FD(), 1); err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte{0x51}, 60)
	to := b.LocalAddr()
	var ready [2]uint32
	received := 0
	allocs := testing.AllocsPerRun(100, func() {
		a.Queue(msg, to)
		a.Queue(msg, to)
		a.Flush()
		for got := 0; got < 2; {
			if _, err := p.Wait(5*time.Second, ready[:]); err != nil {
				panic(err)
			}
			n, err := b.Recv()
			if err != nil {
				panic(err)
			}
			for i := range n {
				if d, from, err := b.Datagram(i); err == nil && from == a.LocalAddr() && bytes.Equal(d, msg) {
					received++
				}
			}
			got += n
		}
	})
	if allocs != 0 {
		t.Errorf("Queue, Flush and Recv: %v allocations per pass", allocs)
	}
	if received != 2*101 {
		t.Errorf("received %d datagrams intact, want %d: the path measured is not the one sending", received, 2*101)
	}
}

// TestControlSocketClosed: Recv on a closed socket fails, as a loop's
// last read after Close does.
func TestControlSocketClosed(t *testing.T) {
	_, b := controlPair(t, ControlConfig{})
	b.Close()
	if _, err := b.Recv(); err == nil {
		t.Fatal("Recv on a closed socket returned no error")
	}
}

// socketDrops is the kernel's count of datagrams dropped at socket s
// (SO_MEMINFO's SK_MEMINFO_DROPS), filter drops among them.
func socketDrops(t *testing.T, s *ControlSocket) uint32 {
	t.Helper()
	var info [unix.SK_MEMINFO_VARS]uint32
	n := uint32(unsafe.Sizeof(info))
	if _, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.FD()), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&n)), 0); errno != 0 {
		t.Fatal(errno)
	}
	return info[unix.SK_MEMINFO_DROPS]
}

// RefuseFrom drops what comes in through the interface named, and only
// that: datagrams over the namespace's loopback (index 1) are dropped at
// a socket refusing index 1 and kept at one refusing another index.
func TestControlSocketRefusesWhatComesThroughTheLink(t *testing.T) {
	for _, c := range []struct {
		ifindex int
		keep    bool
	}{{1, false}, {2, true}} {
		a, b := controlPair(t, ControlConfig{})
		if err := b.RefuseFrom(c.ifindex); err != nil {
			t.Fatal(err)
		}
		p, err := NewPoller()
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Add(b.FD(), 7); err != nil {
			t.Fatal(err)
		}
		if err := a.Queue([]byte("datagram"), b.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		if failed, err := a.Flush(); failed != 0 || err != nil {
			t.Fatal(failed, err)
		}
		if c.keep {
			waitControl(t, p, 7)
			if n, err := b.Recv(); n != 1 || err != nil {
				t.Fatalf("refusing interface %d: Recv = %d, %v; want the datagram", c.ifindex, n, err)
			}
			continue
		}
		// The drop is the kernel's, in the sender's softirq: wait for
		// the count, then the socket must hold nothing.
		for deadline := time.Now().Add(5 * time.Second); socketDrops(t, b) == 0; {
			if time.Now().After(deadline) {
				t.Fatalf("refusing interface %d: no drop counted", c.ifindex)
			}
			runtime.Gosched()
		}
		if n, err := b.Recv(); n != 0 || err != nil {
			t.Fatalf("refusing interface %d: Recv = %d, %v; want nothing", c.ifindex, n, err)
		}
	}
}
