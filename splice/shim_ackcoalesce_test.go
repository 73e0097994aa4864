package splice

import (
	"bytes"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// shimAckConn is a spliced C2 whose server has the request and has sent
// 7000 reply bytes, so that the front-end's ACKs up to there are ones
// the kernel accepts.
func shimAckConn(t *testing.T) *shimConn {
	t.Helper()
	sc := newShimConn(t, ShimConfig{}, 0x1000, 0x5000, nil)
	sc.cliSeq = sc.srv.rcvNxt // past the request the kernel has
	for i := range 10 {
		sc.h.input(PortHost, sc.srv.reply(bytes.Repeat([]byte{'r'}, 700)), t0+Time(i+1)*ms)
	}
	return sc
}

// shimPass feeds the frames from the wire as one worker pass does: one
// Output. It returns the Output and copies of the frames as sent.
func shimPass(t *testing.T, sc *shimConn, frames ...[]byte) *Output {
	t.Helper()
	sc.h.out.Reset()
	for _, f := range frames {
		sc.h.sh.Input(PortWire, append([]byte(nil), f...), t0+20*ms, &sc.h.out)
	}
	sc.h.frames += uint64(len(sc.h.out.Frames))
	return &sc.h.out
}

// TestShimCoalescesThePassesACKs: the front-end's pure ACKs of one pass
// reach the kernel as one frame, the latest, byte for byte as it came;
// duplicate ACKs, ACKs with SACK blocks, and ACKs with the flow's data
// between them all go.
func TestShimCoalescesThePassesACKs(t *testing.T) {
	sc := shimAckConn(t)
	isnB := wire.Seq(0x1000)
	a1 := sc.fromFrontEnd(wire.TCPFlagACK, isnB+1+1400, nil)
	a2 := sc.fromFrontEnd(wire.TCPFlagACK, isnB+1+4200, nil)
	out := shimPass(t, sc, a1, a2)
	if got := onlyFrame(t, out); !bytes.Equal(got, a2) || out.Frames[0].Port != PortHost {
		t.Fatalf("passed %x to the %v port, want the second ACK to the host", got[:54], out.Frames[0].Port)
	}
	if n := sc.h.sh.Stats().AcksCoalesced; n != 1 {
		t.Errorf("AcksCoalesced = %d, want 1", n)
	}

	for _, tc := range []struct {
		name   string
		frames func() [][]byte
	}{
		{"duplicate ACKs", func() [][]byte {
			d := sc.fromFrontEnd(wire.TCPFlagACK, isnB+1+4200, nil)
			return [][]byte{d, d, sc.fromFrontEnd(wire.TCPFlagACK, isnB+1+4900, nil)}
		}},
		{"SACK", func() [][]byte {
			b := frame(wire.TCPFrame{
				SrcMAC: feMAC, DstMAC: backendMAC,
				Src: handoffIP, Dst: backendIP, SrcPort: shimHandoffPort, DstPort: webPort,
				Seq: sc.cliSeq, Ack: isnB + 1 + 5600, Flags: wire.TCPFlagACK, Window: 300,
				Options: segOpts(&[2]uint32{sc.cliTS, sc.srv.tsVal}, wire.SACKBlock{Left: isnB + 6301, Right: isnB + 7001}),
			})
			return [][]byte{sc.fromFrontEnd(wire.TCPFlagACK, isnB+1+5000, nil), b}
		}},
		{"data between", func() [][]byte {
			return [][]byte{sc.fromFrontEnd(wire.TCPFlagACK, isnB+1+6000, nil),
				sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, isnB+1+6000, []byte("more")),
				sc.fromFrontEnd(wire.TCPFlagACK, isnB+1+6300, nil)}
		}},
	} {
		before := sc.h.sh.Stats().AcksCoalesced
		in := tc.frames()
		out := shimPass(t, sc, in...)
		if len(out.Frames) != len(in) {
			t.Fatalf("%s: %d frames to the host for %d", tc.name, len(out.Frames), len(in))
		}
		for i := range in {
			if !bytes.Equal(out.Frames[i].Data, in[i]) {
				t.Errorf("%s: frame %d changed", tc.name, i)
			}
		}
		if n := sc.h.sh.Stats().AcksCoalesced - before; n != 0 {
			t.Errorf("%s: %d coalesced", tc.name, n)
		}
	}
}

// TestShimNeverCoalescesAnUnacceptableACK: an ACK for bytes the kernel
// never sent (a forger's) passes, as everything the shim does not judge,
// but replaces nothing: the real ACK before it stays.
func TestShimNeverCoalescesAnUnacceptableACK(t *testing.T) {
	sc := shimAckConn(t)
	isnB := wire.Seq(0x1000)
	real := sc.fromFrontEnd(wire.TCPFlagACK, isnB+1+1400, nil)
	forged := sc.fromFrontEnd(wire.TCPFlagACK, isnB+1+0x40000000, nil)
	out := shimPass(t, sc, real, forged)
	if len(out.Frames) != 2 || !bytes.Equal(out.Frames[0].Data, real) {
		t.Fatalf("%d frames; the real ACK first: %v", len(out.Frames), len(out.Frames) > 0 && bytes.Equal(out.Frames[0].Data, real))
	}
}
