package link

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
)

const tapName = "qstap0"

var (
	tapAddr  = netip.MustParseAddr("198.18.201.1") // the kernel's side
	peerAddr = netip.MustParseAddr("198.18.201.2") // played by the test
	peerMAC  = net.HardwareAddr{0x02, 0x51, 0x53, 0, 0, 2}
)

// newTAP opens a TAP inside a fresh namespace, addresses it and brings it
// up, with IPv6 off so the kernel sends nothing unprompted.
func newTAP(t *testing.T) (string, *TAP) {
	t.Helper()
	ns := nstest.New(t, "qs-linktest")
	disableIPv6(t, ns)
	var tap *TAP
	err := nstest.Do(ns, func() error {
		var err error
		tap, err = OpenTAP(tapName)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tap.Close() })
	nstest.Run(t, "ip", "-n", ns, "addr", "add", tapAddr.String()+"/24", "dev", tapName)
	nstest.Run(t, "ip", "-n", ns, "link", "set", tapName, "up")
	watchdog(t, tap, 20*time.Second)
	return ns, tap
}

// TestTAPExchangesWithKernel plays a host behind the TAP (ping is not
// installed here, so UDP stands in): the kernel sends it a datagram, the
// test answers the ARP request the kernel sends first, reads the datagram,
// and sends one back that a socket in the namespace must receive.
func TestTAPExchangesWithKernel(t *testing.T) {
	ns, tap := newTAP(t)
	var listener net.PacketConn
	err := nstest.Do(ns, func() error {
		var err error
		listener, err = net.ListenPacket("udp4", net.JoinHostPort(tapAddr.String(), "7777"))
		if err != nil {
			return err
		}
		conn, err := net.Dial("udp4", net.JoinHostPort(peerAddr.String(), "9"))
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = conn.Write([]byte("hello")) // held until ARP resolves
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()

	buf := make([]byte, 2048)
	n, err := tap.ReadFrame(buf)
	if err != nil {
		t.Fatal(err)
	}
	req := buf[:n]
	if n < 42 || binary.BigEndian.Uint16(req[12:14]) != etherTypeARP || binary.BigEndian.Uint16(req[20:22]) != 1 {
		t.Fatalf("first frame is not an ARP request: %x", req)
	}
	kernelMAC := net.HardwareAddr(bytes.Clone(req[6:12]))
	if got := netip.AddrFrom4([4]byte(req[38:42])); got != peerAddr {
		t.Fatalf("ARP asks for %v, want %v", got, peerAddr)
	}
	if err := tap.WriteFrame(arpFrame(kernelMAC, peerMAC, 2, peerMAC, peerAddr, kernelMAC, tapAddr)); err != nil {
		t.Fatal(err)
	}

	n, err = tap.ReadFrame(buf)
	if err != nil {
		t.Fatal(err)
	}
	dgram := buf[:n]
	if n != 14+20+8+5 || !bytes.Equal(dgram[0:6], peerMAC) || dgram[23] != 17 || string(dgram[42:]) != "hello" {
		t.Fatalf("second frame is not the UDP datagram to the resolved MAC: %x", dgram)
	}

	udp := make([]byte, 8+4)
	binary.BigEndian.PutUint16(udp[0:2], 9)
	binary.BigEndian.PutUint16(udp[2:4], 7777)
	binary.BigEndian.PutUint16(udp[4:6], uint16(len(udp)))
	copy(udp[8:], "back") // checksum 0: none, allowed for IPv4
	if err := tap.WriteFrame(ipv4Frame(kernelMAC, peerMAC, peerAddr, tapAddr, 17, udp)); err != nil {
		t.Fatal(err)
	}
	listener.SetReadDeadline(time.Now().Add(20 * time.Second)) // failsafe only
	n, from, err := listener.ReadFrom(buf)
	if err != nil {
		t.Fatalf("datagram written to the TAP never reached the socket: %v", err)
	}
	if string(buf[:n]) != "back" || from.(*net.UDPAddr).AddrPort().Addr() != peerAddr {
		t.Fatalf("socket got %q from %v", buf[:n], from)
	}
	if s := tap.Stats(); s.RxFrames != 2 || s.TxFrames != 2 || s.TxErrors != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestTAPSkipsAndCountsTruncatedFrames makes the kernel send a long UDP
// datagram then a short one; a small buffer must yield the short one.
func TestTAPSkipsAndCountsTruncatedFrames(t *testing.T) {
	ns, tap := newTAP(t)
	nstest.Run(t, "ip", "-n", ns, "neigh", "add", peerAddr.String(), "lladdr", peerMAC.String(), "dev", tapName)
	err := nstest.Do(ns, func() error {
		conn, err := net.Dial("udp4", net.JoinHostPort(peerAddr.String(), "9"))
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.Write(make([]byte, 500)); err != nil {
			return err
		}
		_, err = conn.Write([]byte("tiny"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	n, err := tap.ReadFrame(buf)
	if err != nil {
		t.Fatal(err)
	}
	if want := 14 + 20 + 8 + 4; n != want || string(buf[n-4:n]) != "tiny" {
		t.Fatalf("read %d bytes %x, want the %d-byte datagram", n, buf[:n], want)
	}
	if s := tap.Stats(); s.RxTruncated != 1 || s.RxFrames != 1 {
		t.Fatalf("stats %+v, want one truncated and one received", s)
	}
}

// TestTAPAttachesToPersistentDeviceAndRemovesIt documents water's
// behaviour: attaching clears the persist flag, so Close deletes a TAP
// that `ip tuntap add` created.
func TestTAPAttachesToPersistentDeviceAndRemovesIt(t *testing.T) {
	ns := nstest.New(t, "qs-linktest")
	nstest.Run(t, "ip", "-n", ns, "tuntap", "add", "mode", "tap", "name", "qstap1")
	var tap *TAP
	err := nstest.Do(ns, func() error {
		var err error
		tap, err = OpenTAP("qstap1")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if tap.Name() != "qstap1" {
		t.Errorf("name %q", tap.Name())
	}
	if err := tap.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "-n", ns, "link", "show", "qstap1").CombinedOutput(); err == nil {
		t.Fatalf("qstap1 still exists after Close:\n%s", out)
	}
}

func TestTAPCloseUnblocksRead(t *testing.T) {
	_, tap := newTAP(t)
	readErr := make(chan error)
	go func() {
		_, err := tap.ReadFrame(make([]byte, 2048))
		readErr <- err
	}()
	if err := tap.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read: %v, want net.ErrClosed", err)
	}
	if err := tap.WriteFrame(make([]byte, 60)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write: %v, want net.ErrClosed", err)
	}
}
