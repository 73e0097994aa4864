package link

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
)

// tcpFrame builds an Ethernet/IPv4/TCP frame with the given ports; the
// checksums do not matter to FanoutShard.
func tcpFrame(sport, dport uint16, fragField uint16) []byte {
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	tcp[12] = 5 << 4
	f := ipv4Frame(broadcastMAC, peerMAC, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), 6, tcp)
	binary.BigEndian.PutUint16(f[14+6:], fragField)
	return f
}

func TestFanoutShard(t *testing.T) {
	f := tcpFrame(40001, 80, 0x4000) // DF set: not a fragment
	// 40001 ^ 80 = 0x9c11; 0x9c11 * 0x9e3779b1 = 0x6074_4fd6_f0c1, whose
	// low 32 bits shifted right 16 are 0x4fd6 = 20438, and 20438 % 7 = 5.
	if got, want := FanoutShard(f, 7), 5; got != want {
		t.Errorf("shard %d, want %d", got, want)
	}
	if FanoutShard(tcpFrame(80, 40001, 0), 7) != FanoutShard(f, 7) {
		t.Error("the two directions of a connection land on different members")
	}
	if got := FanoutShard(f, 1); got != 0 {
		t.Errorf("one member: shard %d", got)
	}
	for name, frame := range map[string][]byte{
		"first fragment": tcpFrame(40001, 80, 0x2000),
		"later fragment": tcpFrame(40001, 80, 0x0010),
		"udp":            ipv4Frame(broadcastMAC, peerMAC, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), 17, make([]byte, 8)),
		"not ip":         testFrame(peerMAC, "x"),
		"cut short":      tcpFrame(40001, 80, 0)[:14+20+3],
	} {
		if got := FanoutShard(frame, 7); got != 0 {
			t.Errorf("%s: shard %d, want 0", name, got)
		}
	}
}

// TestFanoutShardSpreadsEvenPorts: Linux gives connect(2) even ports
// first, so the connections of Linux clients to port 80 differ only in
// bits above the lowest. They must still spread over two or three
// members about evenly (plain sport ^ dport put every one on member 0
// of two).
func TestFanoutShardSpreadsEvenPorts(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		count := make([]int, n)
		const conns = 2000
		for i := range conns {
			count[FanoutShard(tcpFrame(uint16(32768+2*i), 80, 0), n)]++
		}
		for m, c := range count {
			if share := float64(c) / conns; share < 0.8/float64(n) || share > 1.2/float64(n) {
				t.Errorf("%d members: member %d got %d of %d even-port connections", n, m, c, conns)
			}
		}
	}
}

func FuzzFanoutShard(f *testing.F) {
	f.Add(tcpFrame(40001, 80, 0), 3)
	f.Add(tcpFrame(1, 2, 0)[:40], 2)
	f.Fuzz(func(t *testing.T, frame []byte, n int) {
		got := FanoutShard(frame, n)
		if got < 0 || got >= max(n, 1) {
			t.Fatalf("shard %d outside [0, %d)", got, n)
		}
	})
}

// TestFanoutPortsAgreesWithFanoutShard runs kernel TCP connections into a
// namespace whose interface has a FanoutPorts group of three sockets that
// also read outgoing frames: every TCP frame, in either direction, must
// reach the member FanoutShard names, so both directions of a connection
// share a member.
func TestFanoutPortsAgreesWithFanoutShard(t *testing.T) {
	w := newWire(t)
	const members = 3
	fanout := &Fanout{Group: 7, Mode: FanoutPorts}
	var links []*AFPacket
	for range members {
		links = append(links, openAFPacket(t, w.nsB, vethB, AFPacketConfig{Fanout: fanout, ReadOutgoing: true}))
	}
	for _, l := range links {
		watchdog(t, l, 20*time.Second)
	}

	var ln net.Listener
	if err := nstest.Do(w.nsB, func() error {
		var err error
		ln, err = net.Listen("tcp4", "198.18.200.2:5001")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()

	// Fixed client ports spread the connections over every member.
	const conns = 6
	ports := make(map[uint16]bool)
	for i := range conns {
		port := uint16(41000 + i)
		ports[port] = true
		err := nstest.Do(w.nsA, func() error {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(198, 18, 200, 1), Port: int(port)}}
			c, err := d.Dial("tcp4", "198.18.200.2:5001")
			if err != nil {
				return err
			}
			defer c.Close()
			msg := []byte(fmt.Sprintf("hello from %d", port))
			if _, err := c.Write(msg); err != nil {
				return err
			}
			_, err = io.ReadFull(c, msg) // the echo: frames both ways
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	// Read until every connection was seen in both directions.
	p := newPoller(t)
	for i, l := range links {
		if err := p.Add(l.FD(), uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	type dir struct {
		clientPort uint16
		toServer   bool
	}
	seen := map[dir]bool{}
	perMember := make([]int, members)
	batch := NewBatch(16, 2048)
	ready := make([]uint32, members)
	for len(seen) < 2*conns {
		n, err := p.Wait(20*time.Second, ready)
		if err != nil || n == 0 {
			t.Fatalf("Wait: %d %v after seeing %v", n, err, seen)
		}
		for _, token := range ready[:n] {
			got, err := links[token].ReadBatch(batch)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				f := batch.Frame(i)
				if len(f) < 14+20+20 || f[14+9] != 6 {
					continue
				}
				if want := FanoutShard(f, members); int(token) != want {
					t.Fatalf("member %d got a frame FanoutShard gives to %d: %x", token, want, f[:54])
				}
				perMember[token]++
				sport := binary.BigEndian.Uint16(f[34:])
				dport := binary.BigEndian.Uint16(f[36:])
				switch {
				case ports[sport]:
					seen[dir{sport, true}] = true
				case ports[dport]:
					seen[dir{dport, false}] = true
				}
			}
		}
	}
	busy := 0
	for _, c := range perMember {
		if c > 0 {
			busy++
		}
	}
	t.Logf("TCP frames per member: %v", perMember)
	if busy < 2 {
		t.Errorf("frames per member %v: the test did not spread the connections", perMember)
	}
}

// TestFanoutMemberIgnoresOutgoingFrames: a group receives through its own
// hook, so the member's PACKET_IGNORE_OUTGOING must be carried over as
// the group's flag. Proved by ordering, as in
// TestAFPacketIgnoresOutgoingFrames: X leaves B before Y arrives.
func TestFanoutMemberIgnoresOutgoingFrames(t *testing.T) {
	w := newWire(t)
	sender := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t)})
	member := openAFPacket(t, w.nsB, vethB, AFPacketConfig{Filter: onlyTestFrames(t), Fanout: &Fanout{Group: 9}})
	a := openAFPacket(t, w.nsA, vethA, AFPacketConfig{Filter: onlyTestFrames(t)})
	for _, l := range []Link{sender, member, a} {
		watchdog(t, l, 20*time.Second)
	}
	if err := sender.WriteFrame(testFrame(w.macB, "X")); err != nil {
		t.Fatal(err)
	}
	if m := readMarker(t, a); m != "X" {
		t.Fatalf("a read %q", m)
	}
	if err := a.WriteFrame(testFrame(w.macA, "Y")); err != nil {
		t.Fatal(err)
	}
	if m := readMarker(t, member); m != "Y" {
		t.Fatalf("fanout member read %q first: it reads outgoing frames", m)
	}
}
