package link

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cilium/ebpf"
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
		// The member the wire's fanout gives the connection (the ports
		// are XORed, so either direction's frame names it).
		want[sport] = FanoutShard(tcpFrame(sport, 80, 0), len(taps))
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

// TestSteerProgramAgreesWithFanoutShard runs the steering program in the
// kernel (BPF_PROG_TEST_RUN) on frames of every shape the wire's fanout
// tells apart and checks that its queue, modulo n, is FanoutShard's
// member: TCP with random ports and IPv4 headers of every length (so
// the ports' offset moves), fragments, a segment cut after its source port,
// UDP, ARP and IPv6. The SYN test above shows the kernel uses the value.
func TestSteerProgramAgreesWithFanoutShard(t *testing.T) {
	prog, err := loadSteerProgram()
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	rng := rand.New(rand.NewPCG(7, 7))
	frame := func(etherType uint16, proto byte, ihl int, frag uint16, sport, dport uint16, cut int) []byte {
		f := make([]byte, 14+ihl*4+20)
		binary.BigEndian.PutUint16(f[12:], etherType)
		ip := f[14:]
		ip[0] = 0x40 | byte(ihl)
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		binary.BigEndian.PutUint16(ip[6:], frag)
		ip[8], ip[9] = 64, proto
		binary.BigEndian.PutUint16(ip[ihl*4:], sport)
		binary.BigEndian.PutUint16(ip[ihl*4+2:], dport)
		return f[:len(f)-cut]
	}
	type shape struct {
		name  string
		frame []byte
	}
	var shapes []shape
	for i := range 200 {
		ihl := 5 + i%11
		shapes = append(shapes, shape{fmt.Sprintf("tcp ihl %d", ihl),
			frame(etherTypeIP4, unix.IPPROTO_TCP, ihl, 0, uint16(rng.Uint32()), uint16(rng.Uint32()), 0)})
	}
	sp, dp := uint16(40001), uint16(80)
	shapes = append(shapes,
		shape{"tcp, don't fragment", frame(etherTypeIP4, unix.IPPROTO_TCP, 5, 0x4000, sp, dp, 0)},
		shape{"first fragment", frame(etherTypeIP4, unix.IPPROTO_TCP, 5, 0x2000, sp, dp, 0)},
		shape{"later fragment", frame(etherTypeIP4, unix.IPPROTO_TCP, 5, 0x0010, sp, dp, 0)},
		shape{"cut after the source port", frame(etherTypeIP4, unix.IPPROTO_TCP, 5, 0, sp, dp, 20-2)},
		shape{"udp", frame(etherTypeIP4, unix.IPPROTO_UDP, 5, 0, sp, dp, 0)},
		shape{"arp", frame(0x0806, 0, 5, 0, sp, dp, 0)},
		shape{"ipv6", frame(0x86dd, unix.IPPROTO_TCP, 5, 0, sp, dp, 0)},
	)
	spread := map[int]bool{}
	for _, s := range shapes {
		ret, err := prog.Run(&ebpf.RunOptions{Data: s.frame})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		for _, n := range []int{2, 3, 4} {
			if got, want := int(ret%uint32(n)), FanoutShard(s.frame, n); got != want {
				t.Errorf("%s, %d queues: queue %d, FanoutShard says %d (program returned %d)", s.name, n, got, want, ret)
			}
		}
		spread[int(ret%4)] = true
	}
	if len(spread) != 4 {
		t.Errorf("the program's values modulo 4 cover %v: the frames did not reach every member", spread)
	}
}
