package link

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
	"github.com/qsplice/qsplice/splice/wire"
)

// newOffloadTAP opens an OffloadTAP with the given number of queues inside
// a fresh namespace, addressed like newTAP's and up.
func newOffloadTAP(t *testing.T, queues int) (string, []*OffloadTAP) {
	t.Helper()
	ns := nstest.New(t, "qs-linktest")
	disableIPv6(t, ns)
	var taps []*OffloadTAP
	err := nstest.Do(ns, func() error {
		var err error
		taps, err = OpenOffloadTAP(tapName, OffloadTAPConfig{Queues: queues})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tap := range taps {
		t.Cleanup(func() { tap.Close() })
		watchdog(t, tap, 20*time.Second)
	}
	nstest.Run(t, "ip", "-n", ns, "addr", "add", tapAddr.String()+"/24", "dev", tapName)
	nstest.Run(t, "ip", "-n", ns, "link", "set", tapName, "up")
	return ns, taps
}

// sendUDP sends each payload as a datagram from the namespace to peerAddr,
// whose MAC is set statically so no ARP precedes them.
func sendUDP(t *testing.T, ns string, payloads ...[]byte) {
	t.Helper()
	nstest.Run(t, "ip", "-n", ns, "neigh", "replace", peerAddr.String(), "lladdr", peerMAC.String(), "dev", tapName)
	err := nstest.Do(ns, func() error {
		conn, err := net.Dial("udp4", net.JoinHostPort(peerAddr.String(), "9"))
		if err != nil {
			return err
		}
		defer conn.Close()
		for _, p := range payloads {
			if _, err := conn.Write(p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// udpPayload returns the payload of an Ethernet/IPv4/UDP frame, or nil.
func udpPayload(f []byte) []byte {
	if len(f) < 42 || binary.BigEndian.Uint16(f[12:]) != etherTypeIP4 || f[23] != 17 {
		return nil
	}
	return f[42:]
}

// TestOffloadTAPExchangesWithKernel: a datagram each way through
// ReadFrame/WriteFrame, the kernel's partial checksum completed on the way
// out of ReadFrame, and the device set up as promised.
func TestOffloadTAPExchangesWithKernel(t *testing.T) {
	ns, taps := newOffloadTAP(t, 1)
	tap := taps[0]
	if len(taps) != 1 || tap.Name() != tapName || !tap.VNetHdr() || tap.Queue() != 0 {
		t.Fatalf("%d queues, name %q, vnet %v", len(taps), tap.Name(), tap.VNetHdr())
	}
	features := offloadState(t, ns, tapName)
	for _, f := range []string{"tx-checksumming", "tcp-segmentation-offload"} {
		if features[f] != "on" {
			t.Errorf("%s is %q on the offload TAP, want on", f, features[f])
		}
	}
	listener := listenOnTAP(t, ns)
	sendUDP(t, ns, []byte("hello"))

	buf := make([]byte, MaxFrame)
	n, err := tap.ReadFrame(buf)
	if err != nil {
		t.Fatal(err)
	}
	dgram := buf[:n]
	if string(udpPayload(dgram)) != "hello" {
		t.Fatalf("read %x, want the datagram", dgram)
	}
	udp := dgram[34:]
	if sum := wire.Fold(wire.Sum(udp, wire.PseudoHeaderSum(wire.IP4(dgram[26:30]), wire.IP4(dgram[30:34]), 17, uint16(len(udp))))); sum != 0xffff {
		t.Errorf("UDP checksum not complete: sum %#x", sum)
	}
	kernelMAC := net.HardwareAddr(bytes.Clone(dgram[6:12]))

	back := make([]byte, 8+4)
	binary.BigEndian.PutUint16(back[0:2], 9)
	binary.BigEndian.PutUint16(back[2:4], 7777)
	binary.BigEndian.PutUint16(back[4:6], uint16(len(back)))
	copy(back[8:], "back")
	if err := tap.WriteFrame(ipv4Frame(kernelMAC, peerMAC, peerAddr, tapAddr, 17, back)); err != nil {
		t.Fatal(err)
	}
	listener.SetReadDeadline(time.Now().Add(20 * time.Second)) // failsafe only
	n, _, err = listener.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "back" {
		t.Fatalf("socket got %q, %v", buf[:n], err)
	}
	if s := tap.Stats(); s.RxFrames != 1 || s.TxFrames != 1 || s.TxErrors != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestOffloadTAPReadBatch: datagrams queued before the call come back
// from one ReadBatch with their headers; a long one is skipped and
// counted; an empty device gives 0.
func TestOffloadTAPReadBatch(t *testing.T) {
	ns, taps := newOffloadTAP(t, 1)
	tap := taps[0]
	sendUDP(t, ns, []byte("one"), make([]byte, 500), []byte("two"), []byte("three"))
	batch := NewBatch(8, 200)
	var got []string
	most := 0
	for len(got) < 3 {
		waitReadable(t, tap)
		n, err := tap.ReadBatch(batch)
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
	if fmt.Sprint(got) != "[one two three]" {
		t.Fatalf("datagrams %q", got)
	}
	if most < 2 {
		t.Errorf("every ReadBatch returned at most %d frame", most)
	}
	if s := tap.Stats(); s.RxTruncated != 1 || s.RxFrames != 3 {
		t.Errorf("stats %+v, want 1 truncated and 3 received", s)
	}
	if n, err := tap.ReadBatch(batch); n != 0 || err != nil {
		t.Errorf("ReadBatch of an empty device = %d %v", n, err)
	}
}

// TestOffloadTAPMultiQueue: several queues on one device, each its own
// descriptor, and the device gone once all are closed, even though `ip
// tuntap` created it persistent.
func TestOffloadTAPMultiQueue(t *testing.T) {
	ns := nstest.New(t, "qs-linktest")
	nstest.Run(t, "ip", "-n", ns, "tuntap", "add", "mode", "tap", "name", "qsmq0", "multi_queue")
	var taps []*OffloadTAP
	err := nstest.Do(ns, func() error {
		var err error
		taps, err = OpenOffloadTAP("qsmq0", OffloadTAPConfig{Queues: 3})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(taps) != 3 {
		t.Fatalf("%d queues", len(taps))
	}
	fds := map[int]bool{}
	for i, tap := range taps {
		if tap.Name() != "qsmq0" || tap.Queue() != i {
			t.Errorf("queue %d: name %q, index %d", i, tap.Name(), tap.Queue())
		}
		fds[tap.FD()] = true
	}
	if len(fds) != 3 {
		t.Errorf("descriptors %v, want three", fds)
	}
	if out := nstest.Run(t, "ip", "-n", ns, "-d", "link", "show", "qsmq0"); !bytes.Contains([]byte(out), []byte("multi_queue")) || !bytes.Contains([]byte(out), []byte("vnet_hdr")) {
		t.Errorf("device details lack multi_queue or vnet_hdr:\n%s", out)
	}
	for _, tap := range taps[:2] {
		tap.Close()
	}
	if out, err := exec.Command("ip", "-n", ns, "link", "show", "qsmq0").CombinedOutput(); err != nil {
		t.Fatalf("device gone with one queue still open: %v %s", err, out)
	}
	taps[2].Close()
	if out, err := exec.Command("ip", "-n", ns, "link", "show", "qsmq0").CombinedOutput(); err == nil {
		t.Fatalf("qsmq0 still exists after closing every queue:\n%s", out)
	}
	if _, err := taps[0].ReadBatch(NewBatch(1, 100)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadBatch after Close: %v", err)
	}
	if _, err := taps[0].WriteBatch([][]byte{make([]byte, 60)}, nil); !errors.Is(err, net.ErrClosed) {
		t.Errorf("WriteBatch after Close: %v", err)
	}
}

func TestOffloadTAPCloseUnblocksRead(t *testing.T) {
	_, taps := newOffloadTAP(t, 1)
	readErr := make(chan error)
	go func() {
		_, err := taps[0].ReadFrame(make([]byte, MaxFrame))
		readErr <- err
	}()
	if err := taps[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read: %v, want net.ErrClosed", err)
	}
}

// TestOffloadTAPBatchPathDoesNotAllocate writes datagrams into the
// kernel's socket with WriteBatch and reads the kernel's datagrams with
// ReadBatch, counting both.
func TestOffloadTAPBatchPathDoesNotAllocate(t *testing.T) {
	ns, taps := newOffloadTAP(t, 1)
	tap := taps[0]
	// Learn the kernel's MAC from one datagram, then keep the device fed.
	sendUDP(t, ns, []byte("mac"))
	batch := NewBatch(16, 2048)
	waitReadable(t, tap)
	if n, err := tap.ReadBatch(batch); n != 1 || err != nil {
		t.Fatalf("ReadBatch: %d %v", n, err)
	}
	kernelMAC := net.HardwareAddr(bytes.Clone(batch.Frame(0)[6:12]))

	listenOnTAP(t, ns) // the frames land there: no ICMP
	frame := udpToKernel(kernelMAC, make([]byte, 4))
	frames := [][]byte{frame, frame, frame, frame}
	hdrs := make([]wire.VNetHdr, len(frames))
	written := 0
	allocs := testing.AllocsPerRun(50, func() {
		if n, err := tap.WriteBatch(frames, hdrs); n != len(frames) || err != nil {
			t.Fatalf("WriteBatch: %d %v", n, err)
		}
		written += len(frames)
	})
	if allocs != 0 {
		t.Errorf("WriteBatch: %v allocations per call", allocs)
	}
	if s := tap.Stats(); s.TxFrames != uint64(written) {
		t.Errorf("stats %+v after %d frames written", s, written)
	}

	conn := dialUDP(t, ns)
	payload := []byte("ping")
	read := 0
	allocs = testing.AllocsPerRun(50, func() {
		conn.Write(payload)
		waitReadable(t, tap)
		n, err := tap.ReadBatch(batch)
		if err != nil || n != 1 || string(udpPayload(batch.Frame(0))) != "ping" {
			t.Fatalf("ReadBatch: %d %v", n, err)
		}
		read++
	})
	if allocs != 0 {
		t.Errorf("ReadBatch: %v allocations per call over %d reads", allocs, read)
	}
}

// dialUDP returns a UDP socket in ns connected to peerAddr:9.
func dialUDP(t *testing.T, ns string) net.Conn {
	t.Helper()
	var conn net.Conn
	if err := nstest.Do(ns, func() error {
		var err error
		conn, err = net.Dial("udp4", net.JoinHostPort(peerAddr.String(), "9"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestOffloadTAPQueuesShareTheTraffic: the kernel spreads flows over the
// queues, and a loop watching every queue's descriptor gets them all.
func TestOffloadTAPQueuesShareTheTraffic(t *testing.T) {
	ns, taps := newOffloadTAP(t, 3)
	nstest.Run(t, "ip", "-n", ns, "neigh", "replace", peerAddr.String(), "lladdr", peerMAC.String(), "dev", tapName)
	const flows = 12
	for i := range flows {
		err := nstest.Do(ns, func() error {
			conn, err := net.Dial("udp4", net.JoinHostPort(peerAddr.String(), fmt.Sprint(9000+i)))
			if err != nil {
				return err
			}
			defer conn.Close()
			_, err = conn.Write([]byte(fmt.Sprintf("flow %d", i)))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	perQueue := make([]int, len(taps))
	got := map[string]bool{}
	readQueues(t, taps, func() bool { return len(got) == flows }, func(q int, f []byte) {
		if payload := udpPayload(f); payload != nil {
			got[string(payload)] = true
			perQueue[q]++
		}
	})
	busy := 0
	for _, c := range perQueue {
		if c > 0 {
			busy++
		}
	}
	if busy < 2 {
		t.Errorf("datagrams per queue %v: the kernel used one queue for %d flows", perQueue, flows)
	}
}

// readQueues reads every queue of taps as a loop watching all their
// descriptors does, handing each frame to each with its queue's index,
// until done says the test has what it waited for.
func readQueues(t *testing.T, taps []*OffloadTAP, done func() bool, each func(q int, f []byte)) {
	t.Helper()
	p := newPoller(t)
	for i, tap := range taps {
		if err := p.Add(tap.FD(), uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	batch := NewBatch(16, 2048)
	ready := make([]uint32, len(taps))
	for !done() {
		n, err := p.Wait(20*time.Second, ready)
		if err != nil || n == 0 {
			t.Fatalf("Wait: %d %v before the test had what it waited for", n, err)
		}
		for _, q := range ready[:n] {
			k, err := taps[q].ReadBatch(batch)
			if err != nil {
				t.Fatal(err)
			}
			for i := range k {
				each(int(q), batch.Frame(i))
			}
		}
	}
}
