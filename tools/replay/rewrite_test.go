package replay

import (
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// segment encodes a TCP frame and parses it back, as the replay sees it.
func segment(t *testing.T, from, to host, seq, ack uint32, flags uint8, opts []byte) *wire.Packet {
	t.Helper()
	tf := wire.TCPFrame{
		SrcMAC: from.mac, DstMAC: to.mac, Src: from.ip, Dst: to.ip,
		SrcPort: from.port, DstPort: to.port,
		Seq: wire.Seq(seq), Ack: wire.Seq(ack), Flags: flags, Window: 100, Options: opts,
	}
	b := make([]byte, tf.Len())
	tf.Encode(b)
	var p wire.Packet
	if err := wire.Parse(b, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func checkTCPChecksum(t *testing.T, p *wire.Packet) {
	t.Helper()
	if got, want := p.TCP.Checksum(), p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()); got != want {
		t.Errorf("TCP checksum %#04x after rewriting, want %#04x", got, want)
	}
}

// TestRewriterMovesAckSackAndEcho checks every rewritten field against
// the formulas of the package comment, with numbers that wrap 2^32.
func TestRewriterMovesAckSackAndEcho(t *testing.T) {
	// Variables, not constants: constant arithmetic must not wrap.
	var (
		cISN   uint32 = 100
		orig   uint32 = 0xfffffff0 // captured server ISN
		ours   uint32 = 0x00000020 // our engine's ISN: shift 0x30 across the wrap
		origTS uint32 = 9000
		ourTS  uint32 = 0xfffffff0
	)
	w := newRewriter()
	if r := w.clientFrame(segment(t, client1, vip, cISN, 0, fSYN, synOpts(1460, 7, true, true, 1, 0))); r != rewroteNothing {
		t.Fatalf("SYN: result %d, want rewroteNothing", r)
	}
	w.capturedSynAck(segment(t, vip, client1, orig, cISN+1, fSYN|fACK, synOpts(1460, 7, true, true, origTS, 1)))
	w.engineSynAck(segment(t, vip, client1, ours, cISN+1, fSYN|fACK, synOpts(1460, 7, true, true, ourTS, 1)))

	p := segment(t, client1, vip, cISN+1, orig+1+40, fACK, sackTSOpt(orig+1+100, orig+1+200, 2, origTS+7))
	if r := w.clientFrame(p); r != rewroteShifted {
		t.Fatalf("ACK: result %d, want rewroteShifted", r)
	}
	var o wire.TCPOptions
	if err := wire.ParseOptions(p.TCP, &o); err != nil {
		t.Fatal(err)
	}
	if got, want := uint32(p.TCP.Ack()), ours+1+40; got != want {
		t.Errorf("ack = %#x, want %#x", got, want)
	}
	if o.NumSACK != 1 || uint32(o.SACKBlocks[0].Left) != ours+1+100 || uint32(o.SACKBlocks[0].Right) != ours+1+200 {
		t.Errorf("SACK = %d blocks, first %#x..%#x; want 1, %#x..%#x",
			o.NumSACK, o.SACKBlocks[0].Left, o.SACKBlocks[0].Right, ours+1+100, ours+1+200)
	}
	if want := ourTS + 7; o.TSEcr != want {
		t.Errorf("TSecr = %#x, want %#x", o.TSEcr, want)
	}
	if o.TSVal != 2 || uint32(p.TCP.Seq()) != cISN+1 {
		t.Errorf("client's own numbers changed: seq %#x TSval %d", p.TCP.Seq(), o.TSVal)
	}
	checkTCPChecksum(t, p)
}

// TestRewriterLearnsFromFirstAck covers a capture without the old
// front-end's SYN-ACK: its ISN and TSval come from the client's first ACK.
func TestRewriterLearnsFromFirstAck(t *testing.T) {
	const cISN, orig, ours uint32 = 7, 5000, 9000
	w := newRewriter()
	w.clientFrame(segment(t, client2, vip, cISN, 0, fSYN, synOpts(1460, -1, false, true, 1, 0)))
	w.engineSynAck(segment(t, vip, client2, ours, cISN+1, fSYN|fACK, synOpts(1460, -1, false, true, 400, 1)))
	first := segment(t, client2, vip, cISN+1, orig+1, fACK, tsOpt(2, 300))
	w.clientFrame(first)
	later := segment(t, client2, vip, cISN+1, orig+1+10, fACK, tsOpt(3, 305))
	w.clientFrame(later)
	for i, c := range []struct {
		p       *wire.Packet
		ack, ts uint32
	}{{first, ours + 1, 400}, {later, ours + 1 + 10, 405}} {
		var o wire.TCPOptions
		wire.ParseOptions(c.p.TCP, &o)
		if uint32(c.p.TCP.Ack()) != c.ack || o.TSEcr != c.ts {
			t.Errorf("segment %d: ack %d TSecr %d, want %d %d", i, c.p.TCP.Ack(), o.TSEcr, c.ack, c.ts)
		}
		checkTCPChecksum(t, c.p)
	}
}

// TestRewriterPortReuse: a SYN with a new ISN on the same tuple forgets
// the previous connection's numbers; a retransmitted SYN does not.
func TestRewriterPortReuse(t *testing.T) {
	w := newRewriter()
	w.clientFrame(segment(t, client1, vip, 10, 0, fSYN, nil))
	w.engineSynAck(segment(t, vip, client1, 1000, 11, fSYN|fACK, nil))
	w.clientFrame(segment(t, client1, vip, 10, 0, fSYN, nil)) // retransmission
	if r := w.clientFrame(segment(t, client1, vip, 11, 501, fACK, nil)); r != rewroteShifted {
		t.Fatalf("after a retransmitted SYN: result %d, want rewroteShifted", r)
	}
	w.clientFrame(segment(t, client1, vip, 99, 0, fSYN, nil)) // new connection
	if r := w.clientFrame(segment(t, client1, vip, 100, 501, fACK, nil)); r != rewroteUnmapped {
		t.Errorf("new connection before our SYN-ACK: result %d, want rewroteUnmapped", r)
	}
	// A captured SYN-ACK that answers another ISN teaches nothing.
	w.engineSynAck(segment(t, vip, client1, 3000, 11, fSYN|fACK, nil))
	if r := w.clientFrame(segment(t, client1, vip, 100, 501, fACK, nil)); r != rewroteUnmapped {
		t.Errorf("SYN-ACK for the old ISN was learned: result %d", r)
	}
}

// TestRewriterUnknownConnection: a capture that starts mid-connection is
// fed unchanged and counted.
func TestRewriterUnknownConnection(t *testing.T) {
	w := newRewriter()
	p := segment(t, client3, vip, 10, 20, fACK, nil)
	if r := w.clientFrame(p); r != rewroteUnmapped {
		t.Errorf("result %d, want rewroteUnmapped", r)
	}
	if p.TCP.Ack() != 20 {
		t.Errorf("ack changed to %d", p.TCP.Ack())
	}
}
