package link

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"
)

// Hand-built frames for the tests. Deliberately independent of the project's
// header package, so these tests check the adapters against plain bytes.

var broadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// etherTypeTest is the IEEE "local experimental" EtherType; no stack in the
// test namespaces answers or emits it, so such frames are ours.
const etherTypeTest = 0x88B5

func ethernet(dst, src net.HardwareAddr, etherType uint16, payload []byte) []byte {
	f := make([]byte, 14+len(payload))
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:14], etherType)
	copy(f[14:], payload)
	return f
}

// testFrame is an experimental-EtherType broadcast frame carrying marker,
// padded to the Ethernet minimum.
func testFrame(src net.HardwareAddr, marker string) []byte {
	payload := make([]byte, 46)
	copy(payload, marker)
	return ethernet(broadcastMAC, src, etherTypeTest, payload)
}

// markerOf returns the marker of a testFrame, or "" for any other frame.
func markerOf(frame []byte) string {
	if len(frame) < 14+46 || binary.BigEndian.Uint16(frame[12:14]) != etherTypeTest {
		return ""
	}
	m := frame[14:60]
	for i, b := range m {
		if b == 0 {
			return string(m[:i])
		}
	}
	return string(m)
}

// ipv4Frame builds an Ethernet+IPv4 frame with protocol proto and a valid
// header checksum.
func ipv4Frame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, proto byte, payload []byte) []byte {
	ip := make([]byte, 20+len(payload))
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:4], uint16(len(ip)))
	ip[8] = 64
	ip[9] = proto
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:12], internetChecksum(ip[:20]))
	copy(ip[20:], payload)
	return ethernet(dstMAC, srcMAC, etherTypeIP4, ip)
}

// arpFrame builds an Ethernet/IPv4 ARP message (op 1 request, 2 reply).
func arpFrame(dstMAC, srcMAC net.HardwareAddr, op uint16, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	a := make([]byte, 28)
	binary.BigEndian.PutUint16(a[0:2], 1)      // Ethernet
	binary.BigEndian.PutUint16(a[2:4], 0x0800) // IPv4
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:8], op)
	copy(a[8:14], sha)
	s4, t4 := spa.As4(), tpa.As4()
	copy(a[14:18], s4[:])
	copy(a[18:24], tha)
	copy(a[24:28], t4[:])
	return ethernet(dstMAC, srcMAC, etherTypeARP, a)
}

func internetChecksum(b []byte) uint16 {
	var sum uint32
	for ; len(b) >= 2; b = b[2:] {
		sum += uint32(binary.BigEndian.Uint16(b))
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// watchdog closes l if the test is still running after d, turning a hang
// (a frame that never comes) into a ReadFrame error. It is a failsafe, not
// synchronisation: passing runs never reach it.
func watchdog(t *testing.T, l Link, d time.Duration) {
	t.Helper()
	timer := time.AfterFunc(d, func() {
		t.Errorf("watchdog: closing %s after %v without the expected frames", l.Name(), d)
		l.Close()
	})
	t.Cleanup(func() { timer.Stop() })
}
