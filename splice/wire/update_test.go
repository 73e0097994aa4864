package wire_test

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

// forceIPChecksum tunes the IPv4 ID so the header checksum computes to zero
// and stores it as 0x0000 or as 0xffff (the other zero).
func forceIPChecksum(ip []byte, negZero bool) {
	c := naiveIPChecksum(ip)
	s := uint32(binary.BigEndian.Uint16(ip[4:])) + uint32(c)
	binary.BigEndian.PutUint16(ip[4:], uint16(s+s>>16))
	stored := uint16(0)
	if negZero {
		stored = 0xffff
	}
	binary.BigEndian.PutUint16(ip[10:], stored)
}

func TestParseAcceptsBothZeroFormsOfIPChecksum(t *testing.T) {
	for _, negZero := range []bool{false, true} {
		frame := refTCPFrame(t, &layers.TCP{SrcPort: 1, DstPort: 2, ACK: true}, []byte("abc"))
		forceIPChecksum(frame[14:], negZero)
		if naiveIPChecksum(frame[14:]) != 0 {
			t.Fatal("forceIPChecksum did not reach a zero checksum")
		}
		var p wire.Packet
		if err := wire.Parse(frame, &p); err != nil {
			t.Errorf("stored %#04x: %v", p.IP.Checksum(), err)
		}
	}
}

// natRewrite is one field rewrite a translator performs.
type natRewrite struct {
	name  string
	apply func(r *rand.Rand, p *wire.Packet, o *wire.TCPOptions) bool // false: not applicable
}

var natRewrites = []natRewrite{
	{"srcport", func(r *rand.Rand, p *wire.Packet, _ *wire.TCPOptions) bool {
		p.TCP.SetSrcPortUpdate(randSpecial16(r))
		return true
	}},
	{"dstport", func(r *rand.Rand, p *wire.Packet, _ *wire.TCPOptions) bool {
		p.TCP.SetDstPortUpdate(randSpecial16(r))
		return true
	}},
	{"seq", func(r *rand.Rand, p *wire.Packet, _ *wire.TCPOptions) bool {
		p.TCP.SetSeqUpdate(p.TCP.Seq().Add(int32(randSpecial32(r)))) // a delta, as the shim applies
		return true
	}},
	{"ack", func(r *rand.Rand, p *wire.Packet, _ *wire.TCPOptions) bool {
		p.TCP.SetAckUpdate(wire.Seq(randSpecial32(r)))
		return true
	}},
	{"window", func(r *rand.Rand, p *wire.Packet, _ *wire.TCPOptions) bool {
		p.TCP.SetWindowUpdate(randSpecial16(r))
		return true
	}},
	{"tsval", func(r *rand.Rand, p *wire.Packet, o *wire.TCPOptions) bool {
		if !o.HasTS {
			return false
		}
		p.TCP.SetUint32AtUpdate(o.TSOffset, randSpecial32(r))
		return true
	}},
	{"tsecr", func(r *rand.Rand, p *wire.Packet, o *wire.TCPOptions) bool {
		if !o.HasTS {
			return false
		}
		p.TCP.SetUint32AtUpdate(o.TSOffset+4, randSpecial32(r))
		return true
	}},
	{"sack", func(r *rand.Rand, p *wire.Packet, o *wire.TCPOptions) bool {
		if o.NumSACK == 0 {
			return false
		}
		for k := range 2 * o.NumSACK {
			p.TCP.SetUint32AtUpdate(o.SACKOffset+4*k, randSpecial32(r))
		}
		return true
	}},
	{"addrs", func(r *rand.Rand, p *wire.Packet, _ *wire.TCPOptions) bool {
		oldSrc, oldDst := p.IP.Src(), p.IP.Dst()
		var src, dst wire.IP4
		binary.BigEndian.PutUint32(src[:], randSpecial32(r))
		binary.BigEndian.PutUint32(dst[:], randSpecial32(r))
		p.IP.SetSrc(src)
		p.IP.SetDst(dst)
		p.TCP.UpdateAddrs(oldSrc, oldDst, src, dst)
		return true
	}},
}

// TestIncrementalRewriteEqualsFullRecompute applies random subsets of the
// translator's rewrites to random gopacket-built segments (timestamps at
// even and odd offsets, numbers near 2^32, stored checksums in both zero
// forms) and requires both checksums to equal a full recomputation exactly.
func TestIncrementalRewriteEqualsFullRecompute(t *testing.T) {
	const trials = 100000
	r := rand.New(rand.NewPCG(11, 12))
	bases := make([][]byte, 400)
	for i := range bases {
		maxPayload := 64
		if i%20 == 0 {
			maxPayload = 1460
		}
		bases[i] = randomTCPFrame(t, r, maxPayload)
	}
	applied := make(map[string]int)
	oddTS, zeroForms := 0, 0
	frame := make([]byte, 0, 1600)
	var p wire.Packet
	var o wire.TCPOptions
	for i := range trials {
		frame = append(frame[:0], bases[r.IntN(len(bases))]...)
		if r.IntN(8) == 0 {
			forceIPChecksum(frame[14:], r.IntN(2) == 0)
		}
		if err := wire.Parse(frame, &p); err != nil {
			t.Fatalf("trial %d: Parse: %v", i, err)
		}
		if r.IntN(4) == 0 {
			forceTCPChecksum(&p, r.IntN(2) == 0)
			zeroForms++
		}
		if err := wire.ParseOptions(p.TCP, &o); err != nil {
			t.Fatalf("trial %d: ParseOptions: %v", i, err)
		}
		if o.HasTS && o.TSOffset&1 == 1 {
			oddTS++
		}
		// An untouched header keeps its stored form, which may be 0xffff;
		// a rewritten one must match the full computation exactly.
		wantIP, wantTCP := p.IP.Checksum(), p.TCP.Checksum()
		var did []string
		for _, k := range r.Perm(len(natRewrites)) {
			if r.IntN(2) == 0 && natRewrites[k].apply(r, &p, &o) {
				did = append(did, natRewrites[k].name)
				applied[natRewrites[k].name]++
			}
		}
		if len(did) > 0 {
			wantTCP = naiveTCPChecksum(p.IP)
		}
		if slices.Contains(did, "addrs") {
			wantIP = naiveIPChecksum(p.IP)
		}
		if got := p.TCP.Checksum(); got != wantTCP {
			t.Fatalf("trial %d after %v: TCP checksum %#04x, want %#04x\n% x", i, did, got, wantTCP, frame)
		}
		if got := p.IP.Checksum(); got != wantIP {
			t.Fatalf("trial %d after %v: IP checksum %#04x, want %#04x", i, did, got, wantIP)
		}
	}
	for _, w := range natRewrites {
		if applied[w.name] < trials/20 {
			t.Errorf("rewrite %s exercised only %d times", w.name, applied[w.name])
		}
	}
	if oddTS < trials/20 || zeroForms < trials/8 {
		t.Errorf("coverage: %d odd-offset timestamps, %d zero-form checksums", oddTS, zeroForms)
	}
}
