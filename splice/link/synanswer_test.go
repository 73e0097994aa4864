package link

import (
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/qsplice/qsplice/splice/link/internal/nstest"
	"github.com/qsplice/qsplice/splice/wire"
)

// The SYN answer's own checks: that the kernel loads the program, that it
// turns a SYN into a SYN-ACK whose headers and checksums are right, and
// that it leaves alone what it must not answer. That the SYN-ACK is the
// one the engine would send, byte for byte, is tested in package splice
// (fe_linksyn_link_test.go), which has the engine.

var (
	answerVIP     = [4]byte{198, 18, 0, 100}
	answerHandoff = [4]byte{198, 18, 0, 101}
	answerClient  = wire.IP4{198, 18, 0, 2}
	answerMAC     = [6]byte{0x02, 0, 0xc6, 0x12, 0, 0x64}
)

func answerConfig(ifindex int) SYNAnswerConfig {
	return SYNAnswerConfig{
		Ifindex: ifindex, MAC: answerMAC, MSS: 1460, WScale: 9, Window: 65535,
		MSSTable: [8]uint16{64, 216, 536, 1220, 1380, 1440, 1460, 8960}, DefaultMSS: 536,
	}
}

// linuxSYN is a client SYN as Linux sends it: MSS, SACK-permitted,
// timestamps, NOP, window scale.
func linuxSYN() []byte {
	opts := wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 0x01020304}
	o := make([]byte, opts.Len())
	opts.Encode(o)
	tf := wire.TCPFrame{
		SrcMAC: wire.MAC{0x02, 0, 0xc6, 0x12, 0, 0x02}, DstMAC: wire.MAC(answerMAC),
		Src: answerClient, Dst: answerVIP, SrcPort: 40000, DstPort: 80,
		Seq: 0x51000000, Flags: wire.TCPFlagSYN, Window: 64240, TTL: 64, Options: o,
	}
	b := make([]byte, tf.Len())
	return b[:tf.Encode(b)]
}

// loadAnswer loads the program in a namespace of its own, with epoch 7's
// key current and port 80 of answerVIP listening; it is closed when the
// test ends.
func loadAnswer(t *testing.T) (string, *SYNAnswer) {
	t.Helper()
	ns := nstest.New(t, "qs-synans")
	var a *SYNAnswer
	err := nstest.Do(ns, func() error {
		var err error
		if a, err = NewSYNAnswer(answerConfig(1)); err != nil {
			return err
		}
		if err := a.SetKey(7, 0x0706050403020100, 0x0f0e0d0c0b0a0908); err != nil {
			return err
		}
		if err := a.SetCurrent(7, 0); err != nil {
			return err
		}
		return a.SetListeners([][4]byte{answerVIP}, []uint16{80}, [][4]byte{answerVIP, answerHandoff})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return ns, a
}

// TestSYNAnswerTurnsASYNIntoItsSYNACK: a Linux SYN comes out of the
// program (BPF_PROG_TEST_RUN) as a SYN-ACK back to its sender, with the
// headers, checksums and options the engine's has, the cookie's option
// bits in the TSval and the epoch's parity in the ISN.
func TestSYNAnswerTurnsASYNIntoItsSYNACK(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_BPF)")
	}
	ns, a := loadAnswer(t)
	syn := linuxSYN()
	out := make([]byte, 256)
	opts := &ebpf.RunOptions{Data: slices.Clone(syn), DataOut: out}
	var ret uint32
	if err := nstest.Do(ns, func() error {
		var err error
		ret, err = a.Program().Run(opts)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if ret != tcActRedirect {
		t.Fatalf("the program returned %d, want %d (redirect)", ret, tcActRedirect)
	}
	got := out[:len(syn)]
	var p wire.Packet
	if err := wire.Parse(got, &p); err != nil {
		t.Fatalf("the SYN-ACK does not parse: %v\n% x", err, got)
	}
	tcp := p.TCP
	if tcp.Flags() != wire.TCPFlagSYN|wire.TCPFlagACK || tcp.Ack() != 0x51000001 || tcp.SrcPort() != 80 || tcp.DstPort() != 40000 {
		t.Errorf("flags %#x ack %#x ports %d>%d", tcp.Flags(), tcp.Ack(), tcp.SrcPort(), tcp.DstPort())
	}
	if p.IP.Src() != wire.IP4(answerVIP) || p.IP.Dst() != answerClient || p.IP.TTL() != 64 {
		t.Errorf("IP %v > %v ttl %d", p.IP.Src(), p.IP.Dst(), p.IP.TTL())
	}
	if [6]byte(got[0:6]) != [6]byte(syn[6:12]) || [6]byte(got[6:12]) != answerMAC {
		t.Errorf("MACs % x", got[:12])
	}
	if sum := tcp.ComputeChecksum(p.IP.Src(), p.IP.Dst()); sum != tcp.Checksum() {
		t.Errorf("TCP checksum %#04x, want %#04x", tcp.Checksum(), sum)
	}
	var o wire.TCPOptions
	if err := wire.ParseOptions(tcp, &o); err != nil {
		t.Fatal(err)
	}
	if !o.HasMSS || o.MSS != 1460 || !o.HasWScale || o.WScale != 9 || !o.SACKPermitted || !o.HasTS || o.TSEcr != 0x01020304 {
		t.Errorf("options %+v", o)
	}
	// The option bits in the TSval's low byte: MSS 1460 is index 6,
	// window scale 7 + 1, SACK.
	if want := uint32(6<<5 | 8<<1 | 1); o.TSVal&0xff != want {
		t.Errorf("TSval %#x: option bits %#x, want %#x", o.TSVal, o.TSVal&0xff, want)
	}
	if tcp.Seq()>>31 != 1 {
		t.Errorf("ISN %#x: parity bit of epoch 7 not set", uint32(tcp.Seq()))
	}
}

// answerEdit returns the Linux SYN changed by edit, its IP checksum made
// right again, so that each case breaks one rule only.
func answerEdit(edit func(f []byte) []byte) []byte {
	f := edit(linuxSYN())
	ip := wire.IPv4(f[fpIP:])
	ip.SetChecksum(0)
	ip.SetChecksum(ip.ComputeChecksum())
	return f
}

// withOptions is a SYN with the options opts (padded by the caller).
func withOptions(opts ...byte) []byte {
	tf := wire.TCPFrame{
		SrcMAC: wire.MAC{0x02, 0, 0xc6, 0x12, 0, 0x02}, DstMAC: wire.MAC(answerMAC),
		Src: answerClient, Dst: answerVIP, SrcPort: 40000, DstPort: 80,
		Seq: 0x51000000, Flags: wire.TCPFlagSYN, Window: 64240, TTL: 64, Options: opts,
	}
	b := make([]byte, tf.Len())
	return b[:tf.Encode(b)]
}

// TestSYNAnswerLeavesWhatItMustNotAnswer: each frame breaks one rule of
// the program's (synanswer.go) and goes on to the engine untouched; the
// counter counts only what was answered; a listener removed and a key
// missing are no answer either.
func TestSYNAnswerLeavesWhatItMustNotAnswer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_BPF)")
	}
	cases := []struct {
		name  string
		frame []byte
	}{
		{"ACK", answerEdit(func(f []byte) []byte { f[fpFlags] |= wire.TCPFlagACK; return f })},
		{"RST", answerEdit(func(f []byte) []byte { f[fpFlags] |= wire.TCPFlagRST; return f })},
		{"FIN", answerEdit(func(f []byte) []byte { f[fpFlags] |= wire.TCPFlagFIN; return f })},
		{"port that does not listen", answerEdit(func(f []byte) []byte { f[saDPort+1] = 81; return f })},
		{"port 0", answerEdit(func(f []byte) []byte { f[saDPort], f[saDPort+1] = 0, 0; return f })},
		{"address that does not listen", answerEdit(func(f []byte) []byte { f[fpIPDst+3] = 99; return f })},
		{"from the VIP", answerEdit(func(f []byte) []byte { copy(f[fpIPSrc:], answerVIP[:]); return f })},
		{"from the handoff address", answerEdit(func(f []byte) []byte { copy(f[fpIPSrc:], answerHandoff[:]); return f })},
		{"from 127/8", answerEdit(func(f []byte) []byte { f[fpIPSrc] = 127; return f })},
		{"from 224/4", answerEdit(func(f []byte) []byte { f[fpIPSrc] = 230; return f })},
		{"from 0/8", answerEdit(func(f []byte) []byte { f[fpIPSrc] = 0; return f })},
		{"multicast source MAC", answerEdit(func(f []byte) []byte { f[saSrcMAC] |= 1; return f })},
		{"TTL 0", answerEdit(func(f []byte) []byte { f[saIPTTL] = 0; return f })},
		{"fragment", answerEdit(func(f []byte) []byte { f[fpIPFrag] |= 0x20; return f })},
		{"bad IP checksum", func() []byte { f := linuxSYN(); f[fpIP+10] ^= 1; return f }()},
		{"not TCP", answerEdit(func(f []byte) []byte { f[fpIPProto] = 17; return f })},
		{"trailing byte", append(linuxSYN(), 0)},
		{"payload", answerEdit(func(f []byte) []byte {
			f = append(f, 'x')
			binary.BigEndian.PutUint16(f[fpIPLen:], binary.BigEndian.Uint16(f[fpIPLen:])+1)
			return f
		})},
		{"Fast Open cookie request", withOptions(2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 34, 2)},
		{"options longer than the answer's (MSS, NOP padding)", withOptions(2, 4, 5, 0xb4, 1, 1, 1, 1)},
		{"duplicate MSS", withOptions(2, 4, 5, 0xb4, 2, 4, 5, 0xb4)},
		{"option past the header", withOptions(2, 4, 5, 0xb4, 1, 1, 8, 10)},
		{"option length 1", withOptions(2, 4, 5, 0xb4, 1, 1, 3, 1)},
	}
	ns, a := loadAnswer(t)
	run := func(frame []byte) uint32 {
		var ret uint32
		if err := nstest.Do(ns, func() error {
			var err error
			ret, err = a.Program().Run(&ebpf.RunOptions{Data: slices.Clone(frame)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ret
	}
	// Each case is the Linux SYN, which is answered, but for one thing.
	if ret := run(linuxSYN()); ret != tcActRedirect {
		t.Fatalf("the Linux SYN: the program returned %d, want %d", ret, tcActRedirect)
	}
	for _, c := range cases {
		if ret := run(c.frame); ret != tcActOK {
			t.Errorf("%s: the program returned %d, want %d (pass)", c.name, ret, tcActOK)
		}
	}
	st, err := a.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Answered != 1 {
		t.Errorf("answered %d, want 1", st.Answered)
	}
	// A reload that moves the listener to port 81 leaves port 80 to the
	// engine; and a program without a key answers nothing.
	if err := nstest.Do(ns, func() error {
		return a.SetListeners([][4]byte{answerVIP}, []uint16{81}, [][4]byte{answerVIP, answerHandoff})
	}); err != nil {
		t.Fatal(err)
	}
	if ret := run(linuxSYN()); ret != tcActOK {
		t.Errorf("after the listener moved to 81: the program returned %d, want %d (pass)", ret, tcActOK)
	}
	if err := nstest.Do(ns, func() error {
		return errors.Join(a.SetListeners([][4]byte{answerVIP}, []uint16{80}, nil), a.SetKey(7, 0, 0))
	}); err != nil {
		t.Fatal(err)
	}
	if ret := run(linuxSYN()); ret != tcActOK {
		t.Errorf("without a key: the program returned %d, want %d (pass)", ret, tcActOK)
	}
}
