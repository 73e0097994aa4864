package link

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
)

// listenOnTAP listens for UDP on the TAP's kernel address, port 7777, in
// ns, until the test ends: the datagrams a test writes into a TAP towards
// the kernel land there (rather than drawing ICMP port unreachables).
func listenOnTAP(t *testing.T, ns string) net.PacketConn {
	t.Helper()
	var l net.PacketConn
	if err := nstest.Do(ns, func() error {
		var err error
		l, err = net.ListenPacket("udp4", net.JoinHostPort(tapAddr.String(), "7777"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// udpToKernel is the Ethernet frame the peer behind a TAP sends the
// kernel (at kernelMAC): a UDP datagram of body from port 9 to 7777.
func udpToKernel(kernelMAC net.HardwareAddr, body []byte) []byte {
	udp := make([]byte, 8+len(body))
	binary.BigEndian.PutUint16(udp[0:2], 9)
	binary.BigEndian.PutUint16(udp[2:4], 7777)
	binary.BigEndian.PutUint16(udp[4:6], uint16(len(udp)))
	copy(udp[8:], body)
	return ipv4Frame(kernelMAC, peerMAC, peerAddr, tapAddr, 17, udp)
}
