package wire_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// completePartial does what a device does with a NEEDS_CSUM segment: sums
// the whole segment, the partial field included, and stores the
// complement.
func completePartial(t wire.TCP) {
	t.SetChecksum(^wire.Fold(wire.Sum(t, 0)))
}

// partialRewrites are the translator's rewrites as it applies them to a
// segment whose checksum is partial: plain setters, and a plain sum for
// the addresses.
var partialRewrites = []natRewrite{
	{"srcport", func(r *rand.Rand, p *wire.Packet, _ *wire.TCPOptions) bool {
		p.TCP.SetSrcPort(randSpecial16(r))
		return true
	}},
	{"dstport", func(r *rand.Rand, p *wire.Packet, _ *wire.TCPOptions) bool {
		p.TCP.SetDstPort(randSpecial16(r))
		return true
	}},
	{"seq", func(r *rand.Rand, p *wire.Packet, _ *wire.TCPOptions) bool {
		p.TCP.SetSeq(p.TCP.Seq().Add(int32(randSpecial32(r))))
		return true
	}},
	{"ack", func(r *rand.Rand, p *wire.Packet, _ *wire.TCPOptions) bool {
		p.TCP.SetAck(wire.Seq(randSpecial32(r)))
		return true
	}},
	{"window", func(r *rand.Rand, p *wire.Packet, _ *wire.TCPOptions) bool {
		p.TCP.SetWindow(randSpecial16(r))
		return true
	}},
	{"tsval", func(r *rand.Rand, p *wire.Packet, o *wire.TCPOptions) bool {
		if !o.HasTS {
			return false
		}
		p.TCP.SetUint32At(o.TSOffset, randSpecial32(r))
		return true
	}},
	{"addrs", func(r *rand.Rand, p *wire.Packet, _ *wire.TCPOptions) bool {
		oldSrc, oldDst := p.IP.Src(), p.IP.Dst()
		var src, dst wire.IP4
		binary.BigEndian.PutUint32(src[:], randSpecial32(r))
		binary.BigEndian.PutUint32(dst[:], randSpecial32(r))
		p.IP.SetSrc(src)
		p.IP.SetDst(dst)
		p.TCP.UpdatePartialAddrs(oldSrc, oldDst, src, dst)
		return true
	}},
}

// TestPartialRewriteCompletesToTheFullChecksum: random segments with a
// partial checksum field (as a kernel hands them over with NEEDS_CSUM),
// random rewrites of the translator's kind; the partial field must stay the
// pseudo-header's sum, so that the device's completion equals a full
// recomputation of the rewritten segment, and the IPv4 header checksum
// (always complete) must stay exact.
func TestPartialRewriteCompletesToTheFullChecksum(t *testing.T) {
	const trials = 50000
	r := rand.New(rand.NewPCG(21, 22))
	bases := make([][]byte, 300)
	for i := range bases {
		bases[i] = randomTCPFrame(t, r, 1460)
	}
	applied := make(map[string]int)
	frame := make([]byte, 0, 1600)
	var p wire.Packet
	var o wire.TCPOptions
	for i := range trials {
		frame = append(frame[:0], bases[r.IntN(len(bases))]...)
		if err := wire.Parse(frame, &p); err != nil {
			t.Fatalf("trial %d: Parse: %v", i, err)
		}
		if err := wire.ParseOptions(p.TCP, &o); err != nil {
			t.Fatalf("trial %d: ParseOptions: %v", i, err)
		}
		p.TCP.SetChecksum(wire.PartialChecksum(p.IP.Src(), p.IP.Dst(), len(p.TCP)))
		var did []string
		for _, k := range r.Perm(len(partialRewrites)) {
			if r.IntN(2) == 0 && partialRewrites[k].apply(r, &p, &o) {
				did = append(did, partialRewrites[k].name)
				applied[partialRewrites[k].name]++
			}
		}
		if got, want := p.TCP.Checksum(), wire.PartialChecksum(p.IP.Src(), p.IP.Dst(), len(p.TCP)); got != want {
			t.Fatalf("trial %d after %v: partial field %#04x, want the pseudo-header sum %#04x", i, did, got, want)
		}
		completePartial(p.TCP)
		if got, want := p.TCP.Checksum(), naiveTCPChecksum(p.IP); got != want {
			t.Fatalf("trial %d after %v: completed checksum %#04x, full recompute %#04x", i, did, got, want)
		}
		if got, want := p.IP.Checksum(), naiveIPChecksum(p.IP); got != want {
			t.Fatalf("trial %d after %v: IP checksum %#04x, want %#04x", i, did, got, want)
		}
	}
	for _, w := range partialRewrites {
		if applied[w.name] < trials/20 {
			t.Errorf("rewrite %s exercised only %d times", w.name, applied[w.name])
		}
	}
}

// TestRFC1624OnAPartialFieldIsWrong shows why the partial field needs its
// own update: RFC 1624's update, which treats the field as a complemented
// checksum, or an update of the field for a non-pseudo-header change, breaks
// the completed checksum. The test above would catch either mistake.
func TestRFC1624OnAPartialFieldIsWrong(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	wrongAddrs, wrongSeq := 0, 0
	for range 1000 {
		frame := randomTCPFrame(t, r, 200)
		p := mustParse(t, frame)
		p.TCP.SetChecksum(wire.PartialChecksum(p.IP.Src(), p.IP.Dst(), len(p.TCP)))
		a := append([]byte(nil), frame...)
		pa := mustParse(t, a)
		oldSrc, oldDst := pa.IP.Src(), pa.IP.Dst()
		src := wire.IP4{198, 18, 0, 10}
		pa.IP.SetSrc(src)
		pa.TCP.UpdateAddrs(oldSrc, oldDst, src, oldDst)
		completePartial(pa.TCP)
		if pa.TCP.Checksum() != naiveTCPChecksum(pa.IP) {
			wrongAddrs++
		}
		s := append([]byte(nil), frame...)
		ps := mustParse(t, s)
		ps.TCP.SetSeqUpdate(ps.TCP.Seq() + 0x80000123)
		completePartial(ps.TCP)
		if ps.TCP.Checksum() != naiveTCPChecksum(ps.IP) {
			wrongSeq++
		}
	}
	if wrongAddrs < 990 || wrongSeq < 990 {
		t.Errorf("RFC 1624 on a partial field went unnoticed: %d/1000 wrong after an address change, %d/1000 after a sequence change",
			wrongAddrs, wrongSeq)
	}
}

func TestPlainSettersLeaveTheChecksumAlone(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	frame := randomTCPFrame(t, r, 10)
	p := mustParse(t, frame)
	c := p.TCP.Checksum()
	p.TCP.SetSrcPort(0x1234)
	p.TCP.SetDstPort(0x5678)
	p.TCP.SetSeq(0xfffffff0)
	p.TCP.SetAck(0x0000000f)
	p.TCP.SetWindow(0xabcd)
	p.TCP.SetUint32At(21, 0xdeadbeef) // unaligned, inside the options or payload
	if p.TCP.Checksum() != c {
		t.Errorf("checksum changed from %#04x to %#04x", c, p.TCP.Checksum())
	}
	if p.TCP.SrcPort() != 0x1234 || p.TCP.DstPort() != 0x5678 || p.TCP.Seq() != 0xfffffff0 ||
		p.TCP.Ack() != 0xf || p.TCP.Window() != 0xabcd || binary.BigEndian.Uint32(p.TCP[21:]) != 0xdeadbeef {
		t.Errorf("fields not set: % x", []byte(p.TCP[:25]))
	}
}
