package splice

// The per-packet paths allocate nothing once warm: forwarding a client
// segment, translating a reply, passing a frame. Benchmarks run the same
// paths on full-size (1514-byte) frames.

import (
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

const fullFrame = 1514

// fullPayload is how much payload makes a 1514-byte frame with the
// timestamp option.
const fullPayload = fullFrame - wire.EthernetHeaderLen - wire.IPv4MinHeaderLen - wire.TCPMinHeaderLen - wire.TSOptionLen

// forwardBench is a spliced front-end and a full-size client segment.
func forwardBench(tb testing.TB) (*FrontEnd, []byte, Time) {
	sc := connectSpliced(tb, defaultSpliceParams())
	c := sc.c
	tmpl := c.seg(wire.TCPFlagACK|wire.TCPFlagPSH, c.nxt, c.isnF+1+4096, make([]byte, fullPayload))
	if len(tmpl) != fullFrame {
		tb.Fatalf("template frame of %d bytes", len(tmpl))
	}
	return sc.h.fe, tmpl, sc.now + ms
}

// shimBench is a shim with a spliced connection whose request was
// acknowledged, a full-size reply on it, and a full-size frame of another
// connection.
func shimBench(tb testing.TB) (sh *Shim, reply, other []byte) {
	sc := newShimConn(tb, ShimConfig{}, 0x1000, 0x2000, nil)
	sc.h.input(PortHost, sc.srv.seg(wire.TCPFlagACK, sc.srv.nxt, sc.srv.rcvNxt, nil), t0) // acknowledges the request
	reply = sc.srv.reply(make([]byte, fullPayload))
	o := *sc.srv
	o.peerPort++
	other = o.reply(make([]byte, fullPayload))
	if len(reply) != fullFrame || len(other) != fullFrame {
		tb.Fatalf("frames of %d and %d bytes", len(reply), len(other))
	}
	return sc.h.sh, reply, other
}

// superBench is a shim with a spliced connection whose request was
// acknowledged and a 64 KiB TSO super-frame reply on it, with its header.
func superBench(tb testing.TB) (sh *Shim, reply []byte, vh wire.VNetHdr) {
	sc := newShimConn(tb, ShimConfig{}, 0x1000, 0x2000, nil)
	sc.h.input(PortHost, sc.srv.seg(wire.TCPFlagACK, sc.srv.nxt, sc.srv.rcvNxt, nil), t0)
	reply = sc.srv.reply(superPayload(superPayloadLen))
	vh = toPartial(tb, reply, superMSS)
	if len(reply) != 65535+wire.EthernetHeaderLen {
		tb.Fatalf("super-frame of %d bytes", len(reply))
	}
	return sc.h.sh, reply, vh
}

// superPayloadLen fills a super-frame to the IPv4 maximum with the
// timestamp option.
const superPayloadLen = 65535 - wire.IPv4MinHeaderLen - wire.TCPMinHeaderLen - wire.TSOptionLen

// superHeaderLen is how much of a super-frame translation rewrites: its
// headers (the payload is read, never written).
const superHeaderLen = wire.EthernetHeaderLen + wire.IPv4MinHeaderLen + wire.TCPMinHeaderLen + wire.TSOptionLen

func TestForwardingAClientSegmentAllocatesNothing(t *testing.T) {
	fe, tmpl, now := forwardBench(t)
	frame := make([]byte, len(tmpl))
	var out Output
	before := fe.Stats().ForwardedFrames
	allocs := testing.AllocsPerRun(200, func() {
		copy(frame, tmpl)
		out.Reset()
		now += ms
		fe.Input(frame, now, &out)
	})
	if allocs != 0 {
		t.Errorf("FrontEnd.Input on a spliced client segment: %v allocations", allocs)
	}
	if fe.Stats().ForwardedFrames-before != 201 {
		t.Errorf("forwarded %d frames, want 201: the path measured is not forwarding", fe.Stats().ForwardedFrames-before)
	}
}

func TestShimTranslateAndPassAllocateNothing(t *testing.T) {
	sh, reply, other := shimBench(t)
	for _, tc := range []struct {
		name string
		tmpl []byte
	}{{"translate", reply}, {"pass", other}} {
		frame := make([]byte, len(tc.tmpl))
		var out Output
		before := sh.Stats()
		now := t0 + s1
		allocs := testing.AllocsPerRun(200, func() {
			copy(frame, tc.tmpl)
			out.Reset()
			now += ms
			sh.Input(PortHost, frame, now, &out)
		})
		if allocs != 0 {
			t.Errorf("Shim.Input, %s: %v allocations", tc.name, allocs)
		}
		after := sh.Stats()
		if tc.name == "translate" && after.Translated-before.Translated != 201 ||
			tc.name == "pass" && after.HostToWire-before.HostToWire != 201 {
			t.Errorf("%s: counters moved %+v -> %+v", tc.name, before, after)
		}
	}
}

func TestShimTranslatingASuperFrameAllocatesNothing(t *testing.T) {
	sh, tmpl, vh := superBench(t)
	frame := make([]byte, len(tmpl))
	copy(frame, tmpl)
	var out Output
	before := sh.Stats()
	now := t0 + s1
	allocs := testing.AllocsPerRun(200, func() {
		copy(frame[:superHeaderLen], tmpl) // translation rewrites the headers only
		out.Reset()
		now += ms
		sh.InputVNet(PortHost, frame, vh, now, &out)
	})
	if allocs != 0 {
		t.Errorf("Shim.InputVNet on a super-frame: %v allocations", allocs)
	}
	after := sh.Stats()
	if after.Translated-before.Translated != 201 || after.TranslatedBytes-before.TranslatedBytes != 201*superPayloadLen {
		t.Errorf("counters moved %+v -> %+v: the path measured is not super-frame translation", before, after)
	}
	if len(out.Frames) != 1 || out.Frames[0].VNet != vh || len(out.Frames[0].Data) != len(tmpl) {
		t.Errorf("last run sent %d frames, not the super-frame with its header", len(out.Frames))
	}
}

func BenchmarkFrontEndForward(b *testing.B) {
	fe, tmpl, now := forwardBench(b)
	frame := make([]byte, len(tmpl))
	var out Output
	b.ReportAllocs()
	b.SetBytes(int64(len(tmpl)))
	for b.Loop() {
		copy(frame, tmpl)
		out.Reset()
		fe.Input(frame, now, &out)
	}
	if len(out.Frames) != 1 {
		b.Fatalf("%d frames out", len(out.Frames))
	}
}

func benchmarkShim(b *testing.B, pick func(reply, other []byte) []byte) {
	sh, reply, other := shimBench(b)
	tmpl := pick(reply, other)
	frame := make([]byte, len(tmpl))
	var out Output
	b.ReportAllocs()
	b.SetBytes(int64(len(tmpl)))
	for b.Loop() {
		copy(frame, tmpl)
		out.Reset()
		sh.Input(PortHost, frame, t0+s1, &out)
	}
	if len(out.Frames) != 1 {
		b.Fatalf("%d frames out", len(out.Frames))
	}
}

func BenchmarkShimTranslate(b *testing.B) {
	benchmarkShim(b, func(reply, _ []byte) []byte { return reply })
}

func BenchmarkShimPass(b *testing.B) {
	benchmarkShim(b, func(_, other []byte) []byte { return other })
}

// BenchmarkShimTranslateSuper translates a 64 KiB TSO super-frame: what a
// back-end's bulk reply costs the shim per 45 segments' worth of bytes.
// Each round restores only the headers, which is all translation writes,
// so the time is the translation's and not a 64 KiB copy's.
func BenchmarkShimTranslateSuper(b *testing.B) {
	sh, tmpl, vh := superBench(b)
	frame := make([]byte, len(tmpl))
	copy(frame, tmpl)
	var out Output
	before := sh.Stats().Translated
	b.ReportAllocs()
	b.SetBytes(int64(len(tmpl)))
	for b.Loop() {
		copy(frame[:superHeaderLen], tmpl)
		out.Reset()
		sh.InputVNet(PortHost, frame, vh, t0+s1, &out)
	}
	if len(out.Frames) != 1 || sh.Stats().Translated == before {
		b.Fatalf("%d frames out, %d translated", len(out.Frames), sh.Stats().Translated-before)
	}
}
