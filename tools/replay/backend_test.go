package replay

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

// c2 is the handoff side of a C2 connection to back-end 1.
var c2 = host{mac: wire.MAC{2, 0, 0xc6, 0x12, 0, 2}, ip: wire.IP4{198, 18, 0, 101}, port: 20000}

func newTestBackend(t *testing.T, seed uint64) (*simBackend, *actionQueue) {
	t.Helper()
	cfg := Config{Seed: seed}
	cfg.setDefaults()
	q := &actionQueue{}
	return newSimBackend(1, &cfg, q), q
}

// popFrame takes the next scheduled action, which must be a frame at want.
func popFrame(t *testing.T, b *simBackend, q *actionQueue, want splice.Time) *wire.Packet {
	t.Helper()
	if q.next() != want {
		t.Fatalf("next action at %d, want %d", q.next(), want)
	}
	a := q.pop()
	frame := a.frame
	if a.kind == actBackendAck {
		frame = b.sendDelayedAck(a.port, a.when)
	}
	var p wire.Packet
	if err := wire.Parse(frame, &p); err != nil || p.Kind != wire.KindTCP {
		t.Fatalf("scheduled frame does not parse as TCP: %v", err)
	}
	return &p
}

func TestBackendMirrorsSynOptions(t *testing.T) {
	bk := host{mac: backendMAC(1), ip: wire.IP4{198, 18, 0, 21}, port: 80}
	for _, c := range []struct {
		name     string
		opts     []byte
		ws       bool
		sack, ts bool
	}{
		{"all options", synOpts(1400, 9, true, true, 777, 0), true, true, true},
		{"MSS only", synOpts(1400, -1, false, false, 0, 0), false, false, false},
	} {
		b, q := newTestBackend(t, 1)
		syn := segment(t, c2, bk, 5000, 0, fSYN, c.opts)
		b.receive(syn.Eth[:syn.End], 1e9)
		p := popFrame(t, b, q, splice.Time(1e9).Add(DefaultLinkDelay))
		var o wire.TCPOptions
		if err := wire.ParseOptions(p.TCP, &o); err != nil {
			t.Fatal(err)
		}
		if !isSynAck(p.TCP) || p.TCP.Ack() != 5001 || p.IP.Dst() != c2.ip || p.Eth.Dst() != c2.mac {
			t.Errorf("%s: not a SYN-ACK of the SYN back to its sender", c.name)
		}
		if o.MSS != 1460 || o.HasWScale != c.ws || o.SACKPermitted != c.sack || o.HasTS != c.ts {
			t.Errorf("%s: SYN-ACK options %+v, want MSS 1460, ws %v, sack %v, ts %v", c.name, o, c.ws, c.sack, c.ts)
		}
		if c.ws && o.WScale != 7 {
			t.Errorf("%s: window scale %d, want 7", c.name, o.WScale)
		}
		if c.ts && o.TSEcr != 777 {
			t.Errorf("%s: TSecr %d, want the SYN's TSval 777", c.name, o.TSEcr)
		}
	}
}

func TestBackendISNIsSeededPerConnection(t *testing.T) {
	bk := host{mac: backendMAC(1), ip: wire.IP4{198, 18, 0, 21}, port: 80}
	isn := func(seed uint64, port uint16) wire.Seq {
		b, q := newTestBackend(t, seed)
		from := c2
		from.port = port
		syn := segment(t, from, bk, 1, 0, fSYN, nil)
		b.receive(syn.Eth[:syn.End], 0)
		return popFrame(t, b, q, splice.Time(DefaultLinkDelay)).TCP.Seq()
	}
	if isn(1, 20000) != isn(1, 20000) {
		t.Error("same seed and tuple gave different ISNs")
	}
	if isn(1, 20000) == isn(2, 20000) || isn(1, 20000) == isn(1, 20001) {
		t.Error("the ISN does not depend on the seed and the tuple")
	}
}

// TestBackendAcksRequestThenClosesAfterClient walks a C2 connection: the
// request is acknowledged once, after the service delay, with everything
// received by then; the client's FIN is answered with a FIN.
func TestBackendAcksRequestThenClosesAfterClient(t *testing.T) {
	bk := host{mac: backendMAC(1), ip: wire.IP4{198, 18, 0, 21}, port: 80}
	b, q := newTestBackend(t, 0)
	at := func(us int) splice.Time { return splice.Time(time.Duration(us) * time.Microsecond) }
	send := func(p *wire.Packet, us int) { b.receive(p.Eth[:p.End], at(us)) }
	tcpFrame := func(seq, ack uint32, flags uint8, payload string) *wire.Packet {
		tf := wire.TCPFrame{SrcMAC: c2.mac, DstMAC: bk.mac, Src: c2.ip, Dst: bk.ip, SrcPort: c2.port, DstPort: 80,
			Seq: wire.Seq(seq), Ack: wire.Seq(ack), Flags: flags, Window: 100, Payload: []byte(payload)}
		buf := make([]byte, tf.Len())
		tf.Encode(buf)
		var p wire.Packet
		if err := wire.Parse(buf, &p); err != nil {
			t.Fatal(err)
		}
		return &p
	}

	send(segment(t, c2, bk, 99, 0, fSYN, nil), 0)
	isnB := uint32(popFrame(t, b, q, at(50)).TCP.Seq())
	send(tcpFrame(100, isnB+1, fACK, ""), 60) // handshake ACK: nothing to send
	if q.next() != splice.Never {
		t.Fatalf("a pure ACK scheduled something at %d", q.next())
	}
	send(tcpFrame(100, isnB+1, fACK, "GET / "), 100)
	send(tcpFrame(106, isnB+1, fACK|fPSH, "HTTP/1.1\r\n\r\n"), 200)
	ack := popFrame(t, b, q, at(100)+splice.Time(DefaultServiceDelay))
	if got, want := uint32(ack.TCP.Ack()), uint32(106+12); got != want || len(ack.TCP.Payload()) != 0 {
		t.Errorf("delayed ACK: ack %d payload %d, want ack %d and no payload", got, len(ack.TCP.Payload()), want)
	}
	if q.next() != splice.Never {
		t.Errorf("a second ACK was scheduled for the same burst")
	}
	send(tcpFrame(118, isnB+1, fFIN|fACK, ""), 5000)
	fin := popFrame(t, b, q, at(5050))
	if !fin.TCP.Has(wire.TCPFlagFIN) || uint32(fin.TCP.Ack()) != 119 || uint32(fin.TCP.Seq()) != isnB+1 {
		t.Errorf("FIN: flags %#x seq %d ack %d, want FIN at %d acking 119", fin.TCP.Flags(), fin.TCP.Seq(), fin.TCP.Ack(), isnB+1)
	}
	send(tcpFrame(999, 1, fACK, ""), 6000) // a stray pure ACK on a known connection: no answer
	send(tcpFrame(1, 1, wire.TCPFlagRST, ""), 7000)
	send(tcpFrame(119, isnB+2, fACK, "x"), 8000) // the connection is gone now
	if rst := popFrame(t, b, q, at(8050)); !rst.TCP.Has(wire.TCPFlagRST) {
		t.Errorf("segment for a reset connection answered with flags %#x, want RST", rst.TCP.Flags())
	}
}
