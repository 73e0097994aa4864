package splice

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
	"github.com/qsplice/qsplice/tools/netns"
)

// synWithData is the front-end's C2 SYN carrying its cookie and request,
// as the wire brings it to the shim, changed by edit.
func synWithData(edit func(tf *wire.TCPFrame)) []byte {
	tf := wire.TCPFrame{
		SrcMAC: feMAC, DstMAC: backendMAC, Src: handoffIP, Dst: backendIP,
		SrcPort: 40100, DstPort: webPort, Seq: 0x51000000, Flags: wire.TCPFlagSYN, Window: 64240,
		Options: synOpts(wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 7,
			FastOpen: true, Cookie: testCookie}),
		Payload: []byte(shortRequest),
	}
	if edit != nil {
		edit(&tf)
	}
	return frame(tf)
}

// withIPChecksum recomputes frame b's IPv4 header checksum and returns b.
func withIPChecksum(b []byte) []byte {
	fixIPChecksum(b)
	return b
}

// TestSYNFastPathTakesWhatTheShimLeavesToIt runs the SYN fast path's
// program under BPF_PROG_TEST_RUN and the shim's engine with KernelSYNs
// on the same frames: the program hands a frame to the TAP exactly when
// the engine counts it as the kernel's and writes nothing, so the kernel
// gets every SYN once. Each of the program's rules has a frame that
// breaks it alone. Frames with a wrong checksum the program hands over
// and the kernel drops, as the engine drops them.
func TestSYNFastPathTakesWhatTheShimLeavesToIt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_BPF, a network namespace); run the tests as root")
	}
	ns := fmt.Sprintf("qs-synfp-%d-%x", os.Getpid(), rand.Uint32())
	if err := netns.Add(ns); err != nil {
		t.Fatal(err)
	}
	defer netns.Delete(ns)
	if err := netns.Run(ns, "ip", "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	fp, err := link.NewSYNFastPath(backendIP, 1) // the namespace's loopback
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	// The program attaches to a device's ingress, and detaches on Close.
	if err := netns.Run(ns, "ip", "link", "add", "w0", "type", "veth", "peer", "name", "w1"); err != nil {
		t.Fatal(err)
	}
	err = netns.Do(ns, func() error {
		other, err := link.NewSYNFastPath(backendIP, 1)
		if err != nil {
			return err
		}
		ifi, err := net.InterfaceByName("w0")
		if err != nil {
			other.Close()
			return err
		}
		if err := other.AttachIngress(ifi.Index); err != nil {
			other.Close()
			return err
		}
		return other.Close()
	})
	if err != nil {
		t.Fatal(err)
	}

	const (
		tcOK       = 0
		tcRedirect = 7
	)
	type verdict int
	const (
		passes    verdict = iota // the shim writes it to the host, if it passes anything
		kernel                   // the program hands it over, the shim writes nothing
		csumDrops                // the program hands it over; the kernel and the shim drop it
	)
	ipOptions := func() []byte {
		b := synWithData(nil)
		ip := wire.EthernetHeaderLen
		out := append(append(append([]byte(nil), b[:ip+20]...), wire.OptNOP, wire.OptNOP, wire.OptNOP, 0), b[ip+20:]...)
		out[ip] = 0x46
		binary.BigEndian.PutUint16(out[ip+2:], binary.BigEndian.Uint16(out[ip+2:])+4)
		return withIPChecksum(out)
	}
	patch := func(off int, v byte) []byte {
		b := synWithData(nil)
		b[off] = v
		return withIPChecksum(b)
	}
	ip := wire.EthernetHeaderLen
	cases := []struct {
		name  string
		frame []byte
		want  verdict
	}{
		{"the front-end's SYN with cookie and request", synWithData(nil), kernel},
		{"with PSH", synWithData(func(tf *wire.TCPFrame) { tf.Flags |= wire.TCPFlagPSH }), kernel},
		{"with ECE and CWR", synWithData(func(tf *wire.TCPFrame) { tf.Flags |= 0x40 | 0x80 }), kernel},
		{"without a cookie", synWithData(func(tf *wire.TCPFrame) {
			tf.Options = synOpts(wire.SynOptions{MSS: 1460, WScale: 7})
		}), kernel},
		{"a SYN-ACK with data", synWithData(func(tf *wire.TCPFrame) { tf.Flags |= wire.TCPFlagACK }), passes},
		{"SYN and RST", synWithData(func(tf *wire.TCPFrame) { tf.Flags |= wire.TCPFlagRST }), passes},
		{"SYN and FIN", synWithData(func(tf *wire.TCPFrame) { tf.Flags |= wire.TCPFlagFIN }), passes},
		{"no data", synWithData(func(tf *wire.TCPFrame) { tf.Payload = nil }), passes},
		{"data without SYN", synWithData(func(tf *wire.TCPFrame) { tf.Flags = wire.TCPFlagACK }), passes},
		{"to another address", synWithData(func(tf *wire.TCPFrame) { tf.Dst = ip4("198.18.1.3") }), passes},
		{"IPv4 options", ipOptions(), passes},
		{"more fragments", patch(ip+6, 0x20), passes},
		{"a fragment offset", patch(ip+7, 0x01), passes},
		{"TTL 0", patch(ip+8, 0), passes},
		{"from 0/8", synWithData(func(tf *wire.TCPFrame) { tf.Src = ip4("0.1.2.3") }), passes},
		{"from loopback", synWithData(func(tf *wire.TCPFrame) { tf.Src = ip4("127.0.0.1") }), passes},
		{"from multicast", synWithData(func(tf *wire.TCPFrame) { tf.Src = ip4("224.0.0.1") }), passes},
		{"from 240/4", synWithData(func(tf *wire.TCPFrame) { tf.Src = ip4("250.1.1.1") }), passes},
		{"from the host itself", synWithData(func(tf *wire.TCPFrame) { tf.Src = backendIP }), passes},
		{"from a multicast MAC", synWithData(func(tf *wire.TCPFrame) { tf.SrcMAC = wire.MAC{0x01, 0, 0x5e, 0, 0, 1} }), passes},
		{"an IPv4 length past the frame", func() []byte {
			b := synWithData(nil)
			binary.BigEndian.PutUint16(b[ip+2:], binary.BigEndian.Uint16(b[ip+2:])+100)
			return withIPChecksum(b)
		}(), passes},
		{"cut short", synWithData(nil)[:ip+20+10], passes},
		{"ARP", func() []byte { b := synWithData(nil); b[12], b[13] = 0x08, 0x06; return b }(), passes},
		{"UDP", patch(ip+9, 17), passes},
		{"a wrong TCP checksum", func() []byte { b := synWithData(nil); b[len(b)-1] ^= 0xff; return b }(), csumDrops},
		{"a wrong IPv4 checksum", func() []byte { b := synWithData(nil); b[ip+10] ^= 0xff; return b }(), csumDrops},
	}
	var redirected, bytes uint64
	for _, c := range cases {
		var ret uint32
		err := netns.Do(ns, func() error {
			var err error
			ret, err = fp.Program().Run(&ebpf.RunOptions{Data: append([]byte(nil), c.frame...)})
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		h := newShim(t, ShimConfig{FastOpen: true, KernelSYNs: true})
		out := h.input(PortWire, c.frame, t0)
		st := h.sh.Stats()
		dropped := st.IngressBadTCPChecksum + st.IngressBadIPChecksum
		switch c.want {
		case kernel:
			if ret != tcRedirect || len(out.Frames) != 0 || st.SYNsByKernel != 1 {
				t.Errorf("%s: program %d, shim wrote %d frames, counted %d for the kernel; want %d, 0, 1",
					c.name, ret, len(out.Frames), st.SYNsByKernel, tcRedirect)
			}
		case passes:
			if ret != tcOK || st.SYNsByKernel != 0 {
				t.Errorf("%s: program %d, shim counted %d for the kernel; want %d, 0", c.name, ret, st.SYNsByKernel, tcOK)
			}
		case csumDrops:
			if ret != tcRedirect || len(out.Frames) != 0 || dropped != 1 {
				t.Errorf("%s: program %d, shim wrote %d frames and dropped %d; want %d, 0, 1", c.name, ret, len(out.Frames), dropped, tcRedirect)
			}
		}
		if ret == tcRedirect {
			redirected++
			bytes += uint64(len(shortRequest))
		}
	}
	st, err := fp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Frames != redirected || st.Bytes != bytes {
		t.Errorf("program counted %+v, want %d frames and %d bytes", st, redirected, bytes)
	}
}
