package link

import (
	"fmt"
	"testing"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
	"golang.org/x/sys/unix"
)

// TestSteerByPortsSendsEachFrameToItsFanoutMember: with the steering
// program attached, every TCP segment the kernel sends on a three-queue
// TAP lands on queue FanoutShard(frame, 3), the worker that owns its
// connection, whatever the tun driver's flow table would have chosen;
// anything else lands on queue 0, as the fanout sends it to member 0.
// The SYNs come from sixteen source ports, so every queue gets some.
func TestSteerByPortsSendsEachFrameToItsFanoutMember(t *testing.T) {
	ns, taps := newOffloadTAP(t, 3)
	if err := taps[1].SteerByPorts(); err != nil { // any queue speaks for the device
		t.Fatal(err)
	}
	nstest.Run(t, "ip", "-n", ns, "neigh", "replace", peerAddr.String(), "lladdr", peerMAC.String(), "dev", tapName)
	const syns = 16
	want := make(map[uint16]int) // source port -> queue
	for i := range syns {
		sport := uint16(41000 + 7*i)
		err := nstest.Do(ns, func() error { return sendSYN(sport, 80) })
		if err != nil {
			t.Fatal(err)
		}
		// The frame as the fanout would see it on the wire, answered:
		// the queue of the reply's direction is the same.
		f := make([]byte, 14+20+20)
		f[12], f[13] = 0x08, 0x00
		f[14], f[23] = 0x45, unix.IPPROTO_TCP
		f[34], f[35], f[36], f[37] = byte(sport>>8), byte(sport), 0, 80
		want[sport] = FanoutShard(f, len(taps))
	}
	sendUDP(t, ns, []byte("not tcp"))

	perQueue := make([]int, len(taps))
	seen := map[uint16]bool{}
	udp := false
	readQueues(t, taps, func() bool { return len(seen) == syns && udp }, func(q int, f []byte) {
		if udpPayload(f) != nil {
			udp = true
			if q != 0 {
				t.Errorf("a UDP datagram on queue %d, want 0", q)
			}
			return
		}
		if len(f) < 38 || f[23] != unix.IPPROTO_TCP {
			return
		}
		sport := uint16(f[34])<<8 | uint16(f[35])
		w, ok := want[sport]
		if !ok {
			return
		}
		seen[sport] = true
		perQueue[q]++
		if q != w {
			t.Errorf("SYN from port %d on queue %d, its fanout member is %d", sport, q, w)
		}
	})
	for q, c := range perQueue {
		if c == 0 {
			t.Errorf("SYNs per queue %v: queue %d got none, so the test did not show steering to it", perQueue, q)
		}
	}
}

// sendSYN makes the kernel send a SYN from sport to peerAddr:dport: a
// non-blocking connect, closed at once (the SYN has left by then).
func sendSYN(sport, dport uint16) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(sport), Addr: tapAddr.As4()}); err != nil {
		return fmt.Errorf("bind port %d: %w", sport, err)
	}
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: int(dport), Addr: peerAddr.As4()})
	if err != nil && err != unix.EINPROGRESS {
		return fmt.Errorf("connect from port %d: %w", sport, err)
	}
	return nil
}
