package splice

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

// TestTheLinksSYNAnswerIsTheEngines runs the SYN answer's TC program
// (splice/link/synanswer.go) under BPF_PROG_TEST_RUN beside two engines
// on the same SYNs: one that answers every SYN itself, one told that the
// link answers (FrontEndConfig.LinkAnswersSYNs). For each SYN:
//
//   - the program answers it exactly when the second engine sends
//     nothing (and counts it as the link's), so every SYN gets one
//     SYN-ACK;
//   - the program's SYN-ACK is the first engine's byte for byte, but for
//     the timestamp's clock (read in the kernel) and so the TCP checksum,
//     which must verify; the TSval carries the same option bits;
//   - the client's final ACK to the program's SYN-ACK makes a flow in the
//     second engine: the cookie checks.
//
// The SYNs cover every combination of timestamps, SACK and window
// scaling in Linux's layouts, other MSS values, and one frame for each
// rule that leaves a SYN to the engine, other layouts among them.
func TestTheLinksSYNAnswerIsTheEngines(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_BPF); run the tests as root")
	}
	// An engine time in the middle of an epoch, the program's clock set
	// to it.
	const now = 100*CookieEpoch + CookieEpoch/2
	epoch := CookieEpochOf(now)
	ecfg := testFrontEndConfig(nil)
	ecfg.setDefaults()
	table, def := CookieMSSTable()
	prog, err := link.NewSYNAnswer(link.SYNAnswerConfig{
		Ifindex: 1, MAC: ecfg.MAC, MSS: ecfg.MSS, WScale: uint8(ecfg.WScale),
		Window: uint16(min(ecfg.RecvBuffer, 65535)), MSSTable: table, DefaultMSS: def,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	k0, k1 := CookieKeyOf(&ecfg.CookieSecret, epoch)
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	var vips [][4]byte
	for _, v := range ecfg.VIPs {
		vips = append(vips, v.As4())
	}
	for _, e := range []error{
		prog.SetKey(epoch, k0, k1),
		prog.SetCurrent(epoch, uint64(ts.Nano())-uint64(now)),
		prog.SetListeners(vips, ecfg.Ports, append(vips, ecfg.HandoffAddr.As4())),
	} {
		if e != nil {
			t.Fatal(e)
		}
	}

	linux := func(o wire.SynOptions) []byte { return newClient(40000, 0x51000000, o).syn() }
	withOpts := func(opts ...byte) []byte {
		c := newClient(40001, 0x61000000, wire.SynOptions{})
		return c.frame(wire.TCPFlagSYN, c.isn, 0, opts, nil)
	}
	// edit changes a SYN and makes both its checksums right again, so
	// that it breaks one rule only.
	edit := func(b []byte, f func(b []byte)) []byte {
		f(b)
		fixIPChecksum(b)
		tcp := wire.TCP(b[34:])
		tcp.SetChecksum(0)
		tcp.SetChecksum(tcp.ComputeChecksum(wire.IP4(b[26:30]), wire.IP4(b[30:34])))
		return b
	}
	const (
		pIPSrc, pIPDst, pTTL, pFlags, pDPort = 14 + 12, 14 + 16, 14 + 8, 34 + 13, 34 + 2
	)
	cases := []struct {
		name     string
		frame    []byte
		answered bool
	}{
		{"timestamps, SACK, window scale", linux(fullOffer(7)), true},
		{"timestamps, SACK", linux(wire.SynOptions{MSS: 1460, WScale: -1, SACKPermitted: true, TS: true, TSVal: 9}), true},
		{"timestamps, window scale", linux(wire.SynOptions{MSS: 1460, WScale: 7, TS: true, TSVal: 9}), true},
		{"timestamps", linux(wire.SynOptions{MSS: 1460, WScale: -1, TS: true, TSVal: 0xfffffff0}), true},
		{"SACK, window scale", linux(wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true}), true},
		{"SACK", linux(wire.SynOptions{MSS: 1460, WScale: -1, SACKPermitted: true}), true},
		{"window scale", linux(wire.SynOptions{MSS: 1460, WScale: 0}), true},
		{"MSS alone", linux(wire.SynOptions{MSS: 1460, WScale: -1}), true},
		{"MSS 1400", linux(wire.SynOptions{MSS: 1400, WScale: 14, SACKPermitted: true, TS: true, TSVal: 3}), true},
		{"MSS 9000", linux(wire.SynOptions{MSS: 9000, WScale: 2, TS: true, TSVal: 3}), true},
		{"MSS 40", linux(wire.SynOptions{MSS: 40, WScale: -1, SACKPermitted: true}), true},
		{"window scale 15, taken as 14", withOpts(2, 4, 5, 0xb4, 1, 3, 3, 15), true},
		{"MSS 0", withOpts(2, 4, 0, 0, 1, 3, 3, 7), true},
		{"ECN setup (SYN, ECE, CWR)", newClient(40003, 0x71000000, fullOffer(7)).frame(
			wire.TCPFlagSYN|wire.TCPFlagECE|wire.TCPFlagCWR, 0x71000000, 0, synOpts(fullOffer(7)), nil), true},

		{"window scale before MSS", withOpts(1, 3, 3, 5, 2, 4, 5, 0xb4), false},
		{"SACK-permitted twice", withOpts(2, 4, 5, 0xb4, 4, 2, 4, 2), false},
		{"timestamps before MSS", withOpts(1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 0, 2, 4, 5, 0xb4), false},
		{"SACK-permitted after the timestamps", withOpts(2, 4, 5, 0xb4, 1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 0, 4, 2, 1, 1), false},
		{"window scale without its NOP", withOpts(2, 4, 5, 0xb4, 3, 3, 7, 1), false},
		{"port 8080 on the second VIP", edit(linux(fullOffer(7)), func(b []byte) {
			copy(b[pIPDst:], vipB[:])
			binary.BigEndian.PutUint16(b[pDPort:], 8080)
		}), true},

		{"no MSS option", withOpts(1, 1, 4, 2), false},
		{"MSS and EOL", withOpts(2, 4, 5, 0xb4, 0, 0, 0, 0), false},
		{"MSS and NOPs", withOpts(2, 4, 5, 0xb4, 1, 1, 1, 1), false},
		{"Fast Open cookie request", withOpts(2, 4, 5, 0xb4, 1, 1, 34, 2), false},
		{"an unknown option", withOpts(2, 4, 5, 0xb4, 254, 2, 1, 1), false},
		{"duplicate MSS", withOpts(2, 4, 5, 0xb4, 2, 4, 5, 0xb4), false},
		{"bad option length", withOpts(2, 4, 5, 0xb4, 1, 1, 3, 1), false},
		{"option past the header", withOpts(2, 4, 5, 0xb4, 1, 1, 8, 10), false},
		{"payload", newClient(40002, 7, fullOffer(7)).frame(wire.TCPFlagSYN, 7, 0, synOpts(fullOffer(7)), []byte("GET")), false},
		{"trailing byte", append(linux(fullOffer(7)), 0), false},
		{"SYN+FIN", edit(linux(fullOffer(7)), func(b []byte) { b[pFlags] |= wire.TCPFlagFIN }), false},
		{"port that does not listen", edit(linux(fullOffer(7)), func(b []byte) { binary.BigEndian.PutUint16(b[pDPort:], 81) }), false},
		{"from the handoff address", edit(linux(fullOffer(7)), func(b []byte) { copy(b[pIPSrc:], handoffIP[:]) }), false},
		{"from a VIP", edit(linux(fullOffer(7)), func(b []byte) { copy(b[pIPSrc:], vipB[:]) }), false},
		{"from 127/8", edit(linux(fullOffer(7)), func(b []byte) { b[pIPSrc] = 127 }), false},
		{"TTL 0", edit(linux(fullOffer(7)), func(b []byte) { b[pTTL] = 0 }), false},
		{"multicast source MAC", edit(linux(fullOffer(7)), func(b []byte) { b[6] |= 1 }), false},
		{"to an address nobody owns", edit(linux(fullOffer(7)), func(b []byte) { copy(b[pIPDst:], otherIP[:]) }), false},
	}
	// The one deliberate difference (fe_linksyn.go): a SYN with a wrong
	// TCP checksum the program answers, with the same error, and the
	// engines drop.
	t.Run("wrong TCP checksum", func(t *testing.T) {
		b := linux(fullOffer(7))
		b[50] ^= 0x40
		out := make([]byte, 256)
		ret, err := prog.Program().Run(&ebpf.RunOptions{Data: bytes.Clone(b), DataOut: out})
		if err != nil || ret != 7 {
			t.Fatalf("the program returned %d, %v; want 7 (redirect)", ret, err)
		}
		var p wire.Packet
		if err := wire.Parse(out[:len(b)], &p); err != nil {
			t.Fatal(err)
		}
		if p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()) == p.TCP.Checksum() {
			t.Error("the SYN-ACK of a wrongly summed SYN has a right checksum")
		}
		for _, link := range []bool{false, true} {
			h := newFE(t, func(cfg *FrontEndConfig) { cfg.LinkAnswersSYNs = link })
			if n := len(h.input(b, now).Frames); n != 0 {
				t.Errorf("LinkAnswersSYNs %v: the engine sent %d frames", link, n)
			}
		}
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			own := newFE(t, nil)
			byLink := newFE(t, func(cfg *FrontEndConfig) { cfg.LinkAnswersSYNs = true })
			want := copyFrames(own.input(c.frame, now))
			left := copyFrames(byLink.input(c.frame, now))
			out := make([]byte, 256)
			ret, err := prog.Program().Run(&ebpf.RunOptions{Data: bytes.Clone(c.frame), DataOut: out})
			if err != nil {
				t.Fatal(err)
			}
			const redirect, pass = 7, 0
			if answered := ret == redirect; answered != c.answered || ret != redirect && ret != pass {
				t.Fatalf("the program returned %d; want it to answer: %v", ret, c.answered)
			}
			if !c.answered {
				if len(left) != len(want) || len(want) == 1 && !bytes.Equal(left[0], want[0]) {
					t.Errorf("the engine told the link answers sent %d frames, the engine alone %d: they must be the same", len(left), len(want))
				}
				if byLink.fe.Stats().SynCookiesByLink != 0 {
					t.Errorf("the engine counts %d SYNs answered by the link", byLink.fe.Stats().SynCookiesByLink)
				}
				return
			}
			if len(left) != 0 || byLink.fe.Stats().SynCookiesByLink != 1 {
				t.Fatalf("the engine told the link answers sent %d frames, counted %d by the link; want none and 1", len(left), byLink.fe.Stats().SynCookiesByLink)
			}
			if len(want) != 1 {
				t.Fatalf("the engine alone sent %d frames to a SYN the link answers", len(want))
			}
			got := out[:len(c.frame)]
			sa := expectTCP(t, bytes.Clone(got), flagsAre(wire.TCPFlagSYN|wire.TCPFlagACK))
			checksumsVerify(t, got)
			// The same bytes, but for the TSval and the checksum.
			g, w := bytes.Clone(got), bytes.Clone(want[0])
			if len(g) != len(w) {
				t.Fatalf("SYN-ACK of %d bytes, the engine's %d", len(g), len(w))
			}
			g[50], g[51], w[50], w[51] = 0, 0, 0, 0
			if off := tsValOffset(g); off > 0 {
				gv, wv := binary.BigEndian.Uint32(g[off:]), binary.BigEndian.Uint32(w[off:])
				if gv&0xff != wv&0xff || int32(gv-wv) < -256 || int32(gv-wv) > 256 {
					t.Errorf("TSval %#x, the engine's %#x: want the same option bits and about the same clock", gv, wv)
				}
				copy(g[off:off+4], w[off:off+4])
			}
			if !bytes.Equal(g, w) {
				t.Errorf("the program's SYN-ACK\n% x\nthe engine's\n% x", got, want[0])
			}
			// The client's final ACK to the program's SYN-ACK.
			cl := &testClient{ip: wire.IP4(got[pIPDst : pIPDst+4]), port: binary.BigEndian.Uint16(got[36:]),
				vip: wire.IP4(got[pIPSrc : pIPSrc+4]), vport: binary.BigEndian.Uint16(got[34:])}
			cl.nxt = sa.ack()
			cl.rcvNxt = sa.seq() + 1
			cl.peerTS, _, cl.ts = sa.ts()
			cl.tsVal = 1000
			byLink.input(cl.seg(wire.TCPFlagACK, cl.nxt, cl.rcvNxt, nil), now+ms)
			if byLink.fe.Flows() != 1 {
				t.Errorf("the client's ACK to the program's SYN-ACK made %d flows, want 1 (a cookie the engine takes)", byLink.fe.Flows())
			}
		})
	}
}

// checksumsVerify fails t unless frame's IPv4 and TCP checksums verify.
func checksumsVerify(t *testing.T, frame []byte) {
	t.Helper()
	var p wire.Packet
	if err := wire.Parse(frame, &p); err != nil {
		t.Fatalf("the SYN-ACK does not parse: %v", err)
	}
	if sum := p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()); sum != p.TCP.Checksum() {
		t.Fatalf("TCP checksum %#04x, want %#04x", p.TCP.Checksum(), sum)
	}
}

// tsValOffset is where the TSval of an untagged TCP/IPv4 frame's
// timestamp option is, or 0.
func tsValOffset(frame []byte) int {
	var o wire.TCPOptions
	t := wire.TCP(frame[34:])
	if wire.ParseOptions(t, &o) != nil || !o.HasTS {
		return 0
	}
	return 34 + o.TSOffset
}
