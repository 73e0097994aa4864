package link

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	ebpflink "github.com/cilium/ebpf/link"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
	"github.com/qsplice/qsplice/splice/wire"
)

// The SYN fast path's frames: the front-end's Fast Open SYN, carrying its
// cookie and its request, on its way to the back-end's kernel.
var (
	synHost    = [4]byte{198, 18, 0, 21}
	synClient  = wire.IP4{198, 18, 0, 101}
	synRequest = "GET / HTTP/1.1\r\nHost: 198.18.0.21\r\nAccept: */*\r\nX: 12\r\n\r\n"
)

// fastOpenSYN is the SYN as the wire brings it to the shim: SYN only,
// Linux's options with a Fast Open cookie (kind 34, length 10), and the
// request, with both checksums right.
func fastOpenSYN() []byte {
	opts := wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 7,
		FastOpen: true, Cookie: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
	o := make([]byte, opts.Len())
	opts.Encode(o)
	tf := wire.TCPFrame{
		SrcMAC: wire.MAC{0x02, 0, 0xc6, 0x12, 0, 0x02}, DstMAC: wire.MAC{0x02, 0, 0xc6, 0x12, 0, 0x15},
		Src: synClient, Dst: synHost, SrcPort: 40000, DstPort: 80,
		Seq: 0x51000000, Flags: wire.TCPFlagSYN, Window: 64240, TTL: 64,
		Options: o, Payload: []byte(synRequest),
	}
	b := make([]byte, tf.Len())
	return b[:tf.Encode(b)]
}

// synEdit returns the base SYN changed by edit. The program checks no
// checksum (the kernel does), so the edits leave them as they are.
func synEdit(edit func(f []byte) []byte) []byte { return edit(fastOpenSYN()) }

// setFlags replaces the TCP flags of f.
func setFlags(flags byte) func([]byte) []byte {
	return func(f []byte) []byte { f[fpFlags] = flags; return f }
}

// TestSYNFastPathRedirectsOnlyWhatTheShimWouldTake runs the program under
// BPF_PROG_TEST_RUN, which returns its verdict without redirecting: the
// Fast Open SYN goes to the TAP's ingress (TC_ACT_REDIRECT, what
// bpf_redirect returns), and a frame that breaks any one of the rules the
// shim's engine applies to what it takes from the wire goes on
// (TC_ACT_OK). The counters add up the redirected frames alone.
func TestSYNFastPathRedirectsOnlyWhatTheShimWouldTake(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_BPF to load the program, a network namespace); run the tests as root")
	}
	if len(synRequest) != 57 {
		t.Fatalf("the request is %d bytes, the cases below count 57", len(synRequest))
	}
	ns := nstest.New(t, "qs-synfast")
	const (
		redirect = 7 // TC_ACT_REDIRECT
		pass     = tcActOK
		payload  = 57
	)
	base := fastOpenSYN()
	if doff := int(base[fpDataOff]>>4) * 4; doff != 52 || base[fpTCP+40] != wire.OptFastOpen || base[fpTCP+41] != 10 {
		t.Fatalf("the base SYN's TCP header is %d bytes with options % x: want 52 with the Fast Open cookie 20 bytes into the options", doff, base[fpTCP+20:fpTCP+doff])
	}
	cases := []struct {
		name  string
		frame []byte
		want  uint32
		bytes int // payload counted when redirected
	}{
		{"fast open SYN with its request", base, redirect, payload},
		{"PSH|SYN", synEdit(setFlags(wire.TCPFlagSYN | wire.TCPFlagPSH)), redirect, payload},
		{"ECE|CWR|SYN", synEdit(setFlags(wire.TCPFlagSYN | wire.TCPFlagECE | wire.TCPFlagCWR)), redirect, payload},
		{"URG|SYN", synEdit(setFlags(wire.TCPFlagSYN | wire.TCPFlagURG)), redirect, payload},
		{"Ethernet padding after the datagram: the IPv4 length counts", synEdit(func(f []byte) []byte {
			return append(f, 0, 0, 0, 0, 0, 0)
		}), redirect, payload},
		{"a datagram one byte short of the frame's end", synEdit(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[fpIPLen:], binary.BigEndian.Uint16(f[fpIPLen:])-1)
			return f
		}), redirect, payload - 1},
		{"wrong TCP checksum: the kernel's to drop", synEdit(func(f []byte) []byte {
			f[fpTCP+16] ^= 0xff
			return f
		}), redirect, payload},
		{"without DF (the base has it)", synEdit(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[fpIPFrag:], 0)
			return f
		}), redirect, payload},
		{"one byte of payload", synEdit(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[fpIPLen:], 20+52+1)
			return f[:fpTCP+52+1]
		}), redirect, 1},

		{"SYN-ACK", synEdit(setFlags(wire.TCPFlagSYN | wire.TCPFlagACK)), pass, 0},
		{"SYN with RST", synEdit(setFlags(wire.TCPFlagSYN | wire.TCPFlagRST)), pass, 0},
		{"SYN with FIN", synEdit(setFlags(wire.TCPFlagSYN | wire.TCPFlagFIN)), pass, 0},
		{"ACK with data, no SYN", synEdit(setFlags(wire.TCPFlagACK | wire.TCPFlagPSH)), pass, 0},
		{"no flags", synEdit(setFlags(0)), pass, 0},
		{"SYN without payload", synEdit(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[fpIPLen:], 20+52)
			return f[:fpTCP+52]
		}), pass, 0},
		{"SYN whose data offset reaches past the datagram", synEdit(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[fpIPLen:], 20+40)
			return f[:fpTCP+40]
		}), pass, 0},
		{"TCP data offset below 5", synEdit(func(f []byte) []byte {
			f[fpDataOff] = 4 << 4
			return f
		}), pass, 0},
		{"other destination", synEdit(func(f []byte) []byte {
			f[fpIPDst+3] = 22
			return f
		}), pass, 0},
		{"IP options (IHL 6, NOPs)", synEdit(func(f []byte) []byte {
			g := slices.Insert(f, fpTCP, 1, 1, 1, 1)
			g[fpIP] = 0x46
			binary.BigEndian.PutUint16(g[fpIPLen:], binary.BigEndian.Uint16(g[fpIPLen:])+4)
			return g
		}), pass, 0},
		{"IPv6 version nibble", synEdit(func(f []byte) []byte {
			f[fpIP] = 0x65
			return f
		}), pass, 0},
		{"more fragments", synEdit(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[fpIPFrag:], 0x2000)
			return f
		}), pass, 0},
		{"fragment offset", synEdit(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[fpIPFrag:], 0x0001)
			return f
		}), pass, 0},
		{"TTL 0", synEdit(func(f []byte) []byte {
			f[fpIP+8] = 0
			return f
		}), pass, 0},
		{"source 0.1.2.3", synEdit(func(f []byte) []byte {
			copy(f[fpIPSrc:], []byte{0, 1, 2, 3})
			return f
		}), pass, 0},
		{"source 127.0.0.1", synEdit(func(f []byte) []byte {
			copy(f[fpIPSrc:], []byte{127, 0, 0, 1})
			return f
		}), pass, 0},
		{"source 224.0.0.1", synEdit(func(f []byte) []byte {
			copy(f[fpIPSrc:], []byte{224, 0, 0, 1})
			return f
		}), pass, 0},
		{"source 240.0.0.1", synEdit(func(f []byte) []byte {
			copy(f[fpIPSrc:], []byte{240, 0, 0, 1})
			return f
		}), pass, 0},
		{"source 255.255.255.255", synEdit(func(f []byte) []byte {
			copy(f[fpIPSrc:], []byte{255, 255, 255, 255})
			return f
		}), pass, 0},
		{"source is the host", synEdit(func(f []byte) []byte {
			copy(f[fpIPSrc:], synHost[:])
			return f
		}), pass, 0},
		{"multicast source MAC", synEdit(func(f []byte) []byte {
			copy(f[6:], []byte{0x01, 0x00, 0x5e, 0, 0, 1})
			return f
		}), pass, 0},
		{"broadcast source MAC", synEdit(func(f []byte) []byte {
			copy(f[6:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
			return f
		}), pass, 0},
		{"EtherType ARP", synEdit(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[12:], 0x0806)
			return f
		}), pass, 0},
		{"EtherType IPv6", synEdit(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[12:], 0x86dd)
			return f
		}), pass, 0},
		{"IPv4 length one byte past the frame", synEdit(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[fpIPLen:], binary.BigEndian.Uint16(f[fpIPLen:])+1)
			return f
		}), pass, 0},
		{"IPv4 length 65535", synEdit(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[fpIPLen:], 0xffff)
			return f
		}), pass, 0},
		{"truncated to 53 bytes", synEdit(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[fpIPLen:], 53-14)
			return f[:53]
		}), pass, 0},
		{"UDP", synEdit(func(f []byte) []byte {
			f[fpIPProto] = 17
			return f
		}), pass, 0},
	}

	var fp *SYNFastPath
	err := nstest.Do(ns, func() error {
		var err error
		fp, err = NewSYNFastPath(synHost, 1) // the namespace's loopback stands for the TAP
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	var want SYNFastStats
	for _, c := range cases {
		var ret uint32
		err := nstest.Do(ns, func() error {
			var err error
			ret, err = fp.Program().Run(&ebpf.RunOptions{Data: slices.Clone(c.frame)})
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ret != c.want {
			t.Errorf("%s: the program returned %d, want %d", c.name, ret, c.want)
		}
		if ret == redirect {
			want.Frames++
			want.Bytes += uint64(c.bytes)
		}
	}
	// BPF_PROG_TEST_RUN runs on the calling CPU: the sum over CPUs is
	// the count of the runs.
	got, err := fp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// TestSYNFastPathAttachesToIngress attaches the program to a veth's
// ingress through TCX and checks that Close detaches it. (A veth, not a
// dummy device: the test kernel may lack the dummy module.) The test
// kernel has TCX (6.6 or later): a failure to attach is a failure, not a
// skip.
func TestSYNFastPathAttachesToIngress(t *testing.T) {
	onVeth(t, "qs-synfast", func(ifi *net.Interface) error {
		fp, err := NewSYNFastPath(synHost, 1)
		if err != nil {
			return err
		}
		closed := false
		defer func() {
			if !closed {
				fp.Close()
			}
		}()
		if err := fp.AttachIngress(ifi.Index); err != nil {
			t.Errorf("attach: %v", err)
			return nil
		}
		info, err := fp.Program().Info()
		if err != nil {
			return err
		}
		id, _ := info.ID()
		ids, err := tcxIngress(ifi.Index)
		if err != nil {
			return err
		}
		if !slices.Contains(ids, id) {
			t.Errorf("w0's TCX ingress runs programs %v, not the SYN fast path's (%d)", ids, id)
		}
		closed = true
		if err := fp.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if ids, err = tcxIngress(ifi.Index); err != nil {
			return err
		}
		if len(ids) != 0 {
			t.Errorf("after Close, w0's TCX ingress still runs programs %v", ids)
		}
		return nil
	})
}

// onVeth runs f in a new network namespace named after prefix, on the
// veth w0 (its peer w1), up: a device to attach programs to. (A veth,
// not a dummy device: the test kernel may lack the dummy module.) f
// runs on nstest.Do's goroutine: it reports with t.Errorf or its error.
func onVeth(t *testing.T, prefix string, f func(ifi *net.Interface) error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_BPF and CAP_NET_ADMIN, a network namespace); run the tests as root")
	}
	ns := nstest.New(t, prefix)
	nstest.Run(t, "ip", "-n", ns, "link", "add", "w0", "type", "veth", "peer", "name", "w1")
	nstest.Run(t, "ip", "-n", ns, "link", "set", "w0", "up")
	err := nstest.Do(ns, func() error {
		ifi, err := net.InterfaceByName("w0")
		if err != nil {
			return err
		}
		return f(ifi)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// tcxIngress lists the programs on the TCX ingress of the device with
// index ifindex, in the caller's namespace. It returns an error rather
// than failing the test: it runs on nstest.Do's goroutine.
func tcxIngress(ifindex int) ([]ebpf.ProgramID, error) {
	r, err := ebpflink.QueryPrograms(ebpflink.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return nil, fmt.Errorf("query the TCX ingress of device %d: %w", ifindex, err)
	}
	var ids []ebpf.ProgramID
	for _, p := range r.Programs {
		ids = append(ids, p.ID)
	}
	return ids, nil
}
