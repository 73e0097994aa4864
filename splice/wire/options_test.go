package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

// segment builds a parsed frame whose TCP header carries exactly opts
// (a multiple of 4 bytes) and returns the packet.
func segment(tb testing.TB, opts []byte) *wire.Packet {
	tb.Helper()
	if len(opts)%4 != 0 || len(opts) > 40 {
		tb.Fatalf("test bug: %d option bytes", len(opts))
	}
	f := wire.TCPFrame{Src: ip4(ipA), Dst: ip4(ipB), SrcPort: 80, DstPort: 40000, Seq: 1, Ack: 2,
		Flags: wire.TCPFlagACK, Window: 100, Options: opts, Payload: []byte("payload")}
	b := make([]byte, f.Len())
	f.Encode(b)
	return mustParse(tb, b)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
func u32(v uint32) []byte        { return binary.BigEndian.AppendUint32(nil, v) }

func TestParseOptions(t *testing.T) {
	ts := cat([]byte{8, 10}, u32(0xfffffffe), u32(7))
	sack := func(n int) []byte {
		b := []byte{5, byte(2 + 8*n)}
		for k := range n {
			b = append(b, u32(0xfffffff0+uint32(k))...)
			b = append(b, u32(0x10+uint32(k))...)
		}
		return b
	}
	tests := []struct {
		name string
		opts []byte
		want wire.TCPOptions
	}{
		{"none", nil, wire.TCPOptions{}},
		{"linux syn", cat([]byte{2, 4, 5, 0xb4, 4, 2}, ts, []byte{1, 3, 3, 7}),
			wire.TCPOptions{HasMSS: true, MSS: 1460, SACKPermitted: true, HasTS: true, TSVal: 0xfffffffe, TSEcr: 7, TSOffset: 28, HasWScale: true, WScale: 7}},
		{"aligned ts", cat([]byte{1, 1}, ts), wire.TCPOptions{HasTS: true, TSVal: 0xfffffffe, TSEcr: 7, TSOffset: 24}},
		{"ts behind one nop", cat([]byte{1}, ts, []byte{0}), wire.TCPOptions{HasTS: true, TSVal: 0xfffffffe, TSEcr: 7, TSOffset: 23}},
		{"ts at the very end", cat([]byte{1, 1, 1, 1, 1, 1}, ts), wire.TCPOptions{HasTS: true, TSVal: 0xfffffffe, TSEcr: 7, TSOffset: 28}},
		{"one sack block", cat([]byte{1, 1}, sack(1)), wire.TCPOptions{NumSACK: 1, SACKOffset: 24,
			SACKBlocks: [4]wire.SACKBlock{{0xfffffff0, 0x10}}}},
		{"four sack blocks", cat([]byte{1, 1}, sack(4)), wire.TCPOptions{NumSACK: 4, SACKOffset: 24,
			SACKBlocks: [4]wire.SACKBlock{{0xfffffff0, 0x10}, {0xfffffff1, 0x11}, {0xfffffff2, 0x12}, {0xfffffff3, 0x13}}}},
		{"ts and three sack blocks", cat([]byte{1, 1}, ts, []byte{1, 1}, sack(3)), wire.TCPOptions{HasTS: true, TSVal: 0xfffffffe, TSEcr: 7, TSOffset: 24,
			NumSACK: 3, SACKOffset: 36, SACKBlocks: [4]wire.SACKBlock{{0xfffffff0, 0x10}, {0xfffffff1, 0x11}, {0xfffffff2, 0x12}}}},
		{"unknown skipped", []byte{253, 4, 0xbe, 0xef, 30, 3, 0, 2, 4, 0x05, 0xb4, 1}, wire.TCPOptions{HasMSS: true, MSS: 0x5b4}},
		{"eol stops", []byte{2, 4, 0, 9, 0, 8, 1, 2}, wire.TCPOptions{HasMSS: true, MSS: 9}},
		{"eol first", cat([]byte{0, 1, 1, 1}, ts, []byte{1, 1}), wire.TCPOptions{}},
		{"wscale 14", []byte{1, 3, 3, 14}, wire.TCPOptions{HasWScale: true, WScale: 14}},
		{"wscale 15 clamped", []byte{1, 3, 3, 15}, wire.TCPOptions{HasWScale: true, WScale: 14}},
		{"wscale 255 clamped", []byte{1, 3, 3, 255}, wire.TCPOptions{HasWScale: true, WScale: 14}},
		{"sack-permitted twice", []byte{4, 2, 4, 2}, wire.TCPOptions{SACKPermitted: true}},
		{"fast open cookie request", []byte{1, 1, 34, 2}, wire.TCPOptions{FastOpenOffset: 22}},
		{"fast open cookie", []byte{34, 10, 1, 2, 3, 4, 5, 6, 7, 8, 1, 1}, wire.TCPOptions{FastOpenOffset: 20, CookieLen: 8}},
		{"fast open twice: the first counts", []byte{34, 6, 1, 2, 3, 4, 34, 2}, wire.TCPOptions{FastOpenOffset: 20, CookieLen: 4}},
		{"fast open cookie too short: ignored", []byte{34, 5, 1, 2, 3, 1, 1, 1}, wire.TCPOptions{}},
		{"fast open cookie too long: ignored", cat([]byte{34, 19}, make([]byte, 17), []byte{1}), wire.TCPOptions{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := segment(t, tc.opts)
			var o wire.TCPOptions
			o.HasMSS, o.NumSACK = true, 3 // stale values must be cleared
			if err := wire.ParseOptions(p.TCP, &o); err != nil {
				t.Fatal(err)
			}
			if o != tc.want {
				t.Fatalf("got  %+v\nwant %+v", o, tc.want)
			}
			checkOptionOffsets(t, p.TCP, &o)
		})
	}
}

// checkOptionOffsets reads the values back at the offsets ParseOptions
// reported.
func checkOptionOffsets(t *testing.T, seg wire.TCP, o *wire.TCPOptions) {
	t.Helper()
	if o.HasTS {
		if seg[o.TSOffset-2] != wire.OptTimestamps || seg[o.TSOffset-1] != 10 ||
			binary.BigEndian.Uint32(seg[o.TSOffset:]) != o.TSVal || binary.BigEndian.Uint32(seg[o.TSOffset+4:]) != o.TSEcr {
			t.Errorf("timestamps not found at offset %d", o.TSOffset)
		}
	}
	if o.FastOpenOffset != 0 {
		if seg[o.FastOpenOffset] != wire.OptFastOpen || int(seg[o.FastOpenOffset+1]) != 2+o.CookieLen ||
			len(o.Cookie(seg)) != o.CookieLen {
			t.Errorf("Fast Open option not found at offset %d", o.FastOpenOffset)
		}
	}
	for k := range o.NumSACK {
		at := o.SACKOffset + 8*k
		if wire.Seq(binary.BigEndian.Uint32(seg[at:])) != o.SACKBlocks[k].Left || wire.Seq(binary.BigEndian.Uint32(seg[at+4:])) != o.SACKBlocks[k].Right {
			t.Errorf("SACK block %d not found at offset %d", k, at)
		}
	}
}

func TestParseOptionsErrors(t *testing.T) {
	ts := cat([]byte{8, 10}, u32(1), u32(2))
	tests := []struct {
		name string
		opts []byte
		want error
	}{
		{"duplicate ts", cat([]byte{1, 1}, ts, []byte{1, 1}, ts), wire.ErrOptionDuplicate},
		{"duplicate unaligned ts", cat([]byte{1}, ts, ts, []byte{0, 0, 0}), wire.ErrOptionDuplicate},
		{"duplicate mss", []byte{2, 4, 5, 0xb4, 2, 4, 5, 0xb4}, wire.ErrOptionDuplicate},
		{"duplicate wscale", []byte{3, 3, 7, 3, 3, 7, 1, 1}, wire.ErrOptionDuplicate},
		{"duplicate sack", cat([]byte{1, 1, 5, 10}, u32(1), u32(2), []byte{1, 1, 5, 10}, u32(3), u32(4)), wire.ErrOptionDuplicate},
		{"ts past header", cat([]byte{1, 1, 1, 1, 1, 1, 1}, ts[:9]), wire.ErrOptionLength},
		{"unknown past header", []byte{1, 1, 253, 3}, wire.ErrOptionLength},
		{"kind in last byte", []byte{1, 1, 1, 2}, wire.ErrOptionLength},
		{"huge length", []byte{253, 255, 0, 0}, wire.ErrOptionLength},
		{"length 0", []byte{253, 0, 1, 1}, wire.ErrOptionMalformed},
		{"length 1", []byte{253, 1, 1, 1}, wire.ErrOptionMalformed},
		{"ts length 0", []byte{8, 0, 1, 1}, wire.ErrOptionMalformed},
		{"mss length 3", []byte{2, 3, 5, 1}, wire.ErrOptionMalformed},
		{"mss length 5", []byte{2, 5, 5, 0xb4, 1, 1, 1, 1}, wire.ErrOptionMalformed},
		{"wscale length 4", []byte{3, 4, 7, 0}, wire.ErrOptionMalformed},
		{"sack-permitted length 3", []byte{4, 3, 0, 1}, wire.ErrOptionMalformed},
		{"ts length 8", cat([]byte{8, 8}, u32(1), []byte{0, 0}), wire.ErrOptionMalformed},
		{"ts length 12", cat([]byte{8, 12}, u32(1), u32(2), []byte{0, 0}), wire.ErrOptionMalformed},
		{"empty sack", []byte{5, 2, 1, 1}, wire.ErrOptionMalformed},
		{"sack length 11", cat([]byte{5, 11}, u32(1), u32(2), []byte{0, 1}), wire.ErrOptionMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := segment(t, tc.opts)
			var o wire.TCPOptions
			if err := wire.ParseOptions(p.TCP, &o); !errors.Is(err, tc.want) {
				t.Fatalf("ParseOptions = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestOptionRewriteInPlace rewrites timestamps and SACK edges at the
// offsets ParseOptions reported, aligned and not, and checks the values
// read back and the checksum equals a full recomputation.
func TestOptionRewriteInPlace(t *testing.T) {
	sack3 := []byte{5, 26}
	for k := range 6 {
		sack3 = append(sack3, u32(uint32(k))...)
	}
	for _, tc := range []struct {
		opts        []byte
		tsOff, sOff int
	}{
		{cat([]byte{1, 1, 8, 10}, u32(0xffffffff), u32(0), []byte{1, 1}, sack3), 24, 36},
		{cat([]byte{1, 8, 10}, u32(0xffffffff), u32(0), sack3, []byte{0, 0, 0}), 23, 33},
		{cat([]byte{1, 1, 1, 8, 10}, u32(0xffffffff), u32(0), []byte{5, 10}, u32(9), u32(99), []byte{0}), 25, 35},
	} {
		p := segment(t, tc.opts)
		var o wire.TCPOptions
		if err := wire.ParseOptions(p.TCP, &o); err != nil {
			t.Fatal(err)
		}
		if o.TSOffset != tc.tsOff || o.SACKOffset != tc.sOff {
			t.Fatalf("TS at %d, SACK at %d; want %d, %d", o.TSOffset, o.SACKOffset, tc.tsOff, tc.sOff)
		}
		p.TCP.SetUint32AtUpdate(o.TSOffset, 0)            // wraps past 2^32
		p.TCP.SetUint32AtUpdate(o.TSOffset+4, 0xfffffffe) // and back
		want := make([]wire.SACKBlock, o.NumSACK)
		for k := range o.NumSACK {
			want[k] = wire.SACKBlock{Left: o.SACKBlocks[k].Left - 0x10, Right: o.SACKBlocks[k].Right + 0xfffffff0}
			p.TCP.SetUint32AtUpdate(o.SACKOffset+8*k, uint32(want[k].Left))
			p.TCP.SetUint32AtUpdate(o.SACKOffset+8*k+4, uint32(want[k].Right))
		}
		if got, full := p.TCP.Checksum(), naiveTCPChecksum(p.IP); got != full {
			t.Errorf("TS at %d, SACK at %d: checksum %#04x, full %#04x", o.TSOffset, o.SACKOffset, got, full)
		}
		var again wire.TCPOptions
		if err := wire.ParseOptions(p.TCP, &again); err != nil {
			t.Fatal(err)
		}
		if again.TSVal != 0 || again.TSEcr != 0xfffffffe || again.TSOffset != o.TSOffset || again.NumSACK != o.NumSACK ||
			!bytes.Equal(sackBytes(again.SACKBlocks[:again.NumSACK]), sackBytes(want)) {
			t.Errorf("re-parsed %+v, want TS 0/0xfffffffe and SACK %v", again, want)
		}
	}
}

func sackBytes(bs []wire.SACKBlock) []byte {
	var b []byte
	for _, s := range bs {
		b = append(b, u32(uint32(s.Left))...)
		b = append(b, u32(uint32(s.Right))...)
	}
	return b
}

// TestParseOptionsAgreesWithGopacket decodes random valid option lists
// with both parsers.
func TestParseOptionsAgreesWithGopacket(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for range 3000 {
		frame := randomTCPFrame(t, r, 10)
		p := mustParse(t, frame)
		var o wire.TCPOptions
		if err := wire.ParseOptions(p.TCP, &o); err != nil {
			t.Fatalf("ParseOptions: %v on % x", err, p.TCP.Options())
		}
		d := gopacketDecode(t, frame)
		compareWithGopacketOptions(t, &o, d.tcp.Options)
		checkOptionOffsets(t, p.TCP, &o)
	}
}

func compareWithGopacketOptions(t *testing.T, o *wire.TCPOptions, gopts []layers.TCPOption) {
	t.Helper()
	var want wire.TCPOptions
	want.TSOffset, want.SACKOffset = o.TSOffset, o.SACKOffset // offsets are checked by checkOptionOffsets
	want.FastOpenOffset = o.FastOpenOffset
	fastOpenSeen := false
	for _, g := range gopts {
		d := g.OptionData
		switch g.OptionType {
		case layers.TCPOptionKindMSS:
			want.HasMSS, want.MSS = true, binary.BigEndian.Uint16(d)
		case layers.TCPOptionKindWindowScale:
			want.HasWScale, want.WScale = true, min(d[0], wire.MaxWScale)
		case layers.TCPOptionKindSACKPermitted:
			want.SACKPermitted = true
		case layers.TCPOptionKindTimestamps:
			want.HasTS, want.TSVal, want.TSEcr = true, binary.BigEndian.Uint32(d), binary.BigEndian.Uint32(d[4:])
		case layers.TCPOptionKind(wire.OptFastOpen):
			// The first good one counts, a cookie request (no cookie)
			// included: a later cookie does not replace it.
			if n := len(d); !fastOpenSeen && (n == 0 || n >= wire.MinFastOpenCookie && n <= wire.MaxFastOpenCookie) {
				fastOpenSeen, want.CookieLen = true, n
			}
		case layers.TCPOptionKindSACK:
			want.NumSACK = len(d) / 8
			for k := range want.NumSACK {
				want.SACKBlocks[k] = wire.SACKBlock{Left: wire.Seq(binary.BigEndian.Uint32(d[8*k:])), Right: wire.Seq(binary.BigEndian.Uint32(d[8*k+4:]))}
			}
		}
	}
	if *o != want {
		t.Fatalf("ParseOptions %+v\ngopacket     %+v", *o, want)
	}
}
