package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// The byte layout of struct virtio_net_hdr: flags, gso_type, then four
// little-endian 16-bit fields. The bytes are written out by hand so the
// test does not share the decoder's idea of the layout.
func TestVNetHdrLayout(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		h    wire.VNetHdr
	}{
		{"zero", make([]byte, 10), wire.VNetHdr{}},
		{"kernel TSO super-frame",
			[]byte{0x01, 0x01, 0x42, 0x00, 0xa8, 0x05, 0x22, 0x00, 0x10, 0x00},
			wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, GSOType: wire.GSOTCPv4, HdrLen: 66, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}},
		{"ECN super-frame, UDP checksum offset",
			[]byte{0x01, 0x81, 0x36, 0x00, 0x00, 0x02, 0x22, 0x00, 0x06, 0x00},
			wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, GSOType: wire.GSOTCPv4 | wire.GSOECN, HdrLen: 54, GSOSize: 512, CsumStart: 34, CsumOffset: 6}},
		{"received, checksum verified",
			[]byte{0x02, 0x00, 0, 0, 0, 0, 0, 0, 0, 0},
			wire.VNetHdr{Flags: wire.VNetFlagDataValid}},
		{"every byte distinct",
			[]byte{0xf1, 0xf2, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0xfa},
			wire.VNetHdr{Flags: 0xf1, GSOType: 0xf2, HdrLen: 0x0403, GSOSize: 0x0605, CsumStart: 0x0807, CsumOffset: 0xfa09}},
		{"all ones",
			bytes.Repeat([]byte{0xff}, 10),
			wire.VNetHdr{Flags: 0xff, GSOType: 0xff, HdrLen: 0xffff, GSOSize: 0xffff, CsumStart: 0xffff, CsumOffset: 0xffff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Trailing bytes (the frame) must be ignored on decode and left
			// alone on encode.
			in := append(append([]byte(nil), tt.b...), 0xaa, 0xbb)
			got, err := wire.DecodeVNetHdr(in)
			if err != nil || got != tt.h {
				t.Fatalf("DecodeVNetHdr(% x) = %+v, %v; want %+v", tt.b, got, err, tt.h)
			}
			out := bytes.Repeat([]byte{0x5c}, wire.VNetHdrLen+2)
			tt.h.Encode(out)
			if !bytes.Equal(out[:wire.VNetHdrLen], tt.b) || out[10] != 0x5c || out[11] != 0x5c {
				t.Fatalf("Encode(%+v) = % x, want % x then untouched bytes", tt.h, out, tt.b)
			}
		})
	}
}

func TestVNetHdrPredicates(t *testing.T) {
	tests := []struct {
		h              wire.VNetHdr
		needsCsum, gso bool
	}{
		{wire.VNetHdr{}, false, false},
		{wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum}, true, false},
		{wire.VNetHdr{Flags: wire.VNetFlagDataValid}, false, false},
		{wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum | wire.VNetFlagDataValid}, true, false},
		{wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, GSOType: wire.GSOTCPv4}, true, true},
		{wire.VNetHdr{Flags: wire.VNetFlagNeedsCsum, GSOType: wire.GSOTCPv4 | wire.GSOECN}, true, true},
		{wire.VNetHdr{GSOType: wire.GSOTCPv6}, false, true},
		{wire.VNetHdr{GSOType: wire.GSOUDPL4}, false, true},
		// ECN alone says something about a super-frame but is not one.
		{wire.VNetHdr{GSOType: wire.GSOECN}, false, false},
	}
	for _, tt := range tests {
		if tt.h.NeedsCsum() != tt.needsCsum || tt.h.IsGSO() != tt.gso {
			t.Errorf("%+v: NeedsCsum %v IsGSO %v, want %v %v", tt.h, tt.h.NeedsCsum(), tt.h.IsGSO(), tt.needsCsum, tt.gso)
		}
	}
}

func TestDecodeVNetHdrShort(t *testing.T) {
	for n := range wire.VNetHdrLen {
		if h, err := wire.DecodeVNetHdr(make([]byte, n)); !errors.Is(err, wire.ErrShortVNetHdr) || h != (wire.VNetHdr{}) {
			t.Errorf("%d bytes: %+v, %v", n, h, err)
		}
	}
}

func TestVNetHdrRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	b := make([]byte, wire.VNetHdrLen)
	for range 10000 {
		h := wire.VNetHdr{Flags: uint8(r.Uint32()), GSOType: uint8(r.Uint32()), HdrLen: randSpecial16(r),
			GSOSize: randSpecial16(r), CsumStart: randSpecial16(r), CsumOffset: randSpecial16(r)}
		h.Encode(b)
		if got, err := wire.DecodeVNetHdr(b); err != nil || got != h {
			t.Fatalf("%+v -> % x -> %+v, %v", h, b, got, err)
		}
	}
}

// AdjustPartialChecksum must give exactly the partial sum a stack would
// have built for the new address: Fold(PseudoHeaderSum) over it.
func TestAdjustPartialChecksumMatchesRebuiltPartial(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for range 100000 {
		var src, dst, nsrc wire.IP4
		binary.BigEndian.PutUint32(src[:], randSpecial32(r))
		binary.BigEndian.PutUint32(dst[:], randSpecial32(r))
		binary.BigEndian.PutUint32(nsrc[:], randSpecial32(r))
		length := randSpecial16(r)
		partial := wire.Fold(wire.PseudoHeaderSum(src, dst, wire.ProtoTCP, length))
		got := wire.AdjustPartialChecksum(partial, binary.BigEndian.Uint32(src[:]), binary.BigEndian.Uint32(nsrc[:]))
		want := wire.Fold(wire.PseudoHeaderSum(nsrc, dst, wire.ProtoTCP, length))
		// Both are folded non-zero sums, so one's-complement equality is
		// bit equality: 0x0000 cannot occur, only 0xffff.
		if got != want {
			t.Fatalf("%v->%v (dst %v len %d): partial %#04x adjusted to %#04x, rebuilt %#04x", src, nsrc, dst, length, partial, got, want)
		}
	}
}

// FuzzVNetHdr: any bytes decode without panicking; ten or more decode to
// the fields read by hand and encode back to the same ten bytes.
func FuzzVNetHdr(f *testing.F) {
	f.Add([]byte{0x01, 0x01, 0x42, 0x00, 0xa8, 0x05, 0x22, 0x00, 0x10, 0x00})
	f.Add([]byte{0x01, 0x81, 0x36, 0x00, 0x00, 0x02, 0x22, 0x00, 0x06, 0x00, 0xff})
	f.Add([]byte{0x02, 0x80, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := wire.DecodeVNetHdr(b)
		if len(b) < wire.VNetHdrLen {
			if !errors.Is(err, wire.ErrShortVNetHdr) || h != (wire.VNetHdr{}) {
				t.Fatalf("%d bytes: %+v, %v", len(b), h, err)
			}
			return
		}
		le := func(i int) uint16 { return uint16(b[i]) | uint16(b[i+1])<<8 }
		want := wire.VNetHdr{Flags: b[0], GSOType: b[1], HdrLen: le(2), GSOSize: le(4), CsumStart: le(6), CsumOffset: le(8)}
		if err != nil || h != want {
			t.Fatalf("% x: %+v, %v; want %+v", b, h, err, want)
		}
		if h.NeedsCsum() != (b[0]&1 != 0) || h.IsGSO() != (b[1]&0x7f != 0) {
			t.Fatalf("%+v: NeedsCsum %v IsGSO %v", h, h.NeedsCsum(), h.IsGSO())
		}
		out := make([]byte, wire.VNetHdrLen)
		h.Encode(out)
		if !bytes.Equal(out, b[:wire.VNetHdrLen]) {
			t.Fatalf("% x encodes back as % x", b[:wire.VNetHdrLen], out)
		}
	})
}
