package wire_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestChecksumAgainstReferences(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	lengths := []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 1499, 1500, 65535, 200001}
	for range 3000 {
		lengths = append(lengths, r.IntN(2000))
	}
	for _, n := range lengths {
		b := randomBytes(r, n)
		if r.IntN(10) == 0 {
			for i := range b {
				b[i] = 0xff // maximal carries
			}
		}
		want := naiveChecksum(b)
		if got := wire.Checksum(b); got != want {
			t.Fatalf("len %d: Checksum %#04x, naive %#04x", n, got, want)
		}
		if g := gopacket.FoldChecksum(gopacket.ComputeChecksum(b, 0)); g != want {
			t.Fatalf("len %d: gopacket %#04x, naive %#04x", n, g, want)
		}
		if got := ^wire.Fold(wire.Sum(b, 0)); got != want {
			t.Fatalf("len %d: ^Fold(Sum) %#04x, naive %#04x", n, got, want)
		}
	}
}

func TestSumChainsOverEvenPieces(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		b := randomBytes(r, r.IntN(1600))
		want := wire.Fold(wire.Sum(b, 0))
		var acc uint32
		rest := b
		for len(rest) > 0 {
			n := 2 * r.IntN(len(rest)/2+1) // even piece, possibly empty
			if n == 0 && r.IntN(2) == 0 {
				n = len(rest) // the last piece may be odd
			}
			acc = wire.Sum(rest[:n], acc)
			rest = rest[n:]
		}
		if got := wire.Fold(acc); got != want {
			t.Fatalf("chained %#04x, whole %#04x (len %d)", got, want, len(b))
		}
	}
	// A large starting accumulator must carry, not overflow.
	b := []byte{0xff, 0xff, 0xff, 0xff}
	if got, want := wire.Fold(wire.Sum(b, 0xffffffff)), wire.Fold(wire.Sum(b, 0)+0xffff); got != want {
		t.Errorf("Sum with full accumulator: %#04x, want %#04x", got, want)
	}
}

func TestFold(t *testing.T) {
	for _, tc := range []struct {
		in   uint32
		want uint16
	}{{0, 0}, {0xffff, 0xffff}, {0x10000, 1}, {0x1fffe, 0xffff}, {0xffffffff, 0xffff}, {0x12345678, 0x68ac}, {0xfffe0001, 0xffff}} {
		if got := wire.Fold(tc.in); got != tc.want {
			t.Errorf("Fold(%#x) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
}

func TestPseudoHeaderSumMatchesTCPChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 500 {
		frame := randomTCPFrame(t, r, 300)
		p := mustParse(t, frame)
		if got, want := p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()), naiveTCPChecksum(p.IP); got != want {
			t.Fatalf("TCP.ComputeChecksum %#04x, naive %#04x", got, want)
		}
		if got := p.TCP.Checksum(); got != naiveTCPChecksum(p.IP) {
			t.Fatalf("gopacket stored %#04x, naive %#04x", got, naiveTCPChecksum(p.IP))
		}
		if got, want := p.IP.ComputeChecksum(), naiveIPChecksum(p.IP); got != want {
			t.Fatalf("IPv4.ComputeChecksum %#04x, naive %#04x", got, want)
		}
	}
}

// TestUpdateChecksumOnRandomData rewrites 16- and 32-bit fields at every
// alignment of random data and compares the incrementally updated checksum
// with a full recomputation, bit for bit.
func TestUpdateChecksumOnRandomData(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for i := range 100000 {
		kind := i % 3 // 0: UpdateChecksumAt, any offset; 1: UpdateChecksum32; 2: UpdateChecksum16
		b := randomBytes(r, 6+r.IntN(64))
		width := 4
		if kind == 2 {
			width = 2
		}
		off := r.IntN(len(b) - width + 1)
		if kind != 0 {
			off &^= 1
		}
		// A real header is never all zeros (version, protocol): keep one
		// byte outside the field non-zero; see TestChecksumZeroForms.
		keep := (off + width + r.IntN(len(b)-width)) % len(b)
		b[keep] |= 0x40
		if r.IntN(8) == 0 { // the RFC 1624 trap: all ones
			for k := off; k < off+width; k++ {
				b[k] = 0xff
			}
		}
		if r.IntN(4) == 0 {
			forceZeroChecksum(b, off, width)
		}
		before := wire.Checksum(b)
		if before == 0 && r.IntN(2) == 0 {
			before = 0xffff // the other zero: a valid stored form
		}
		nw := randSpecial32(r)
		if r.IntN(8) == 0 {
			nw = 0
		}
		var got uint16
		switch kind {
		case 0:
			old := binary.BigEndian.Uint32(b[off:])
			binary.BigEndian.PutUint32(b[off:], nw)
			got = wire.UpdateChecksumAt(before, off, old, nw)
		case 1:
			old := binary.BigEndian.Uint32(b[off:])
			binary.BigEndian.PutUint32(b[off:], nw)
			got = wire.UpdateChecksum32(before, old, nw)
		case 2:
			old := binary.BigEndian.Uint16(b[off:])
			binary.BigEndian.PutUint16(b[off:], uint16(nw))
			got = wire.UpdateChecksum16(before, old, uint16(nw))
		}
		if want := naiveChecksum(b); got != want {
			t.Fatalf("trial %d kind %d off %d: incremental %#04x, full %#04x\n% x", i, kind, off, got, want, b)
		}
	}
}

// forceZeroChecksum tunes one aligned word of b outside [off, off+width)
// so that the checksum of b becomes 0x0000, the case where the stored form
// may also be 0xffff.
func forceZeroChecksum(b []byte, off, width int) {
	for w := 0; w+2 <= len(b); w += 2 {
		if w+2 <= off || w >= off+width {
			c := wire.Checksum(b)
			s := uint32(binary.BigEndian.Uint16(b[w:])) + uint32(c)
			binary.BigEndian.PutUint16(b[w:], uint16(s+s>>16))
			return
		}
	}
}

// TestChecksumZeroForms pins the negative-zero trap of RFC 1624 on real
// headers: a stored 0xffff (the other one's-complement zero, which a sender
// may emit and every receiver accepts) meeting a field that goes from all
// ones to all zeros. Equation 3 alone then yields 0xffff where a full
// computation stores 0x0000.
func TestChecksumZeroForms(t *testing.T) {
	for _, negZero := range []bool{false, true} {
		frame := refTCPFrame(t, &layers.TCP{Seq: 0xffffffff, SrcPort: 80, DstPort: 40000, ACK: true, Window: 1}, []byte("x"))
		p := mustParse(t, frame)
		forceTCPChecksum(p, negZero)
		if got := p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()); got != 0 {
			t.Fatalf("forceTCPChecksum: full computation %#04x, want 0", got)
		}
		p.TCP.SetSeqUpdate(0)
		if got, want := p.TCP.Checksum(), naiveTCPChecksum(p.IP); got != want {
			t.Errorf("stored %v: seq 0xffffffff->0 gives %#04x, full %#04x", negZero, got, want)
		}
		p.TCP.SetSeqUpdate(0xffffffff)
		if got, want := p.TCP.Checksum(), naiveTCPChecksum(p.IP); got != want {
			t.Errorf("stored %v: seq 0->0xffffffff gives %#04x, full %#04x", negZero, got, want)
		}
	}
	// The same trap through the 16-bit update, on bare numbers: data
	// 0xffff 0x0001 sums to 0x0001 (checksum 0xfffe); with the stored
	// form 0xffff of a zero sum and the word 0xffff -> 0x0000 the sum
	// stays zero and the result must be 0x0000.
	if got := wire.UpdateChecksum16(0xffff, 0xffff, 0); got != 0 {
		t.Errorf("UpdateChecksum16(0xffff, 0xffff, 0) = %#04x, want 0", got)
	}
	if got := wire.UpdateChecksum32(0xffff, 0xffffffff, 0); got != 0 {
		t.Errorf("UpdateChecksum32(0xffff, 0xffffffff, 0) = %#04x, want 0", got)
	}
}
