package flood

import (
	"net/netip"
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

var (
	attackerMAC = wire.MAC{2, 0, 0, 0, 0, 0xaa}
	frontMAC    = wire.MAC{2, 0, 0, 0, 0, 0xfe}
	headsSource = netip.MustParseAddr("198.18.0.200")
	headsVIP    = netip.MustParseAddr("198.18.0.100")
)

func newTestHeads(t *testing.T) *Heads {
	t.Helper()
	h, err := NewHeads(HeadsConfig{SrcMAC: attackerMAC, DstMAC: frontMAC, Source: headsSource,
		Target: headsVIP, Ports: []uint16{80, 8080}, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// fromFront builds a segment the front-end would send to the attacker.
func fromFront(sport, dport uint16, seq, ack uint32, flags uint8, payload string) []byte {
	f := wire.TCPFrame{SrcMAC: frontMAC, DstMAC: attackerMAC, Src: wire.IP4From(headsVIP), Dst: wire.IP4From(headsSource),
		SrcPort: sport, DstPort: dport, Seq: wire.Seq(seq), Ack: wire.Seq(ack), Flags: flags, Window: 65535,
		Payload: []byte(payload)}
	b := make([]byte, f.Len())
	return b[:f.Encode(b)]
}

func parse(t *testing.T, frame []byte) wire.Packet {
	t.Helper()
	var p wire.Packet
	if err := wire.Parse(frame, &p); err != nil || p.Kind != wire.KindTCP {
		t.Fatalf("frame does not parse as TCP: %v", err)
	}
	if got, want := p.TCP.Checksum(), p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()); got != want {
		t.Fatalf("TCP checksum %#x, want %#x", got, want)
	}
	return p
}

// TestHeadsHandshakeAndSilence walks one flow: SYN, SYN-ACK answered by
// the final ACK carrying the partial head at the right numbers, the
// head's ACK, a retransmitted SYN-ACK answered again, a 408 counted once,
// a RST counted once; frames for other flows or addresses are ignored.
func TestHeadsHandshakeAndSilence(t *testing.T) {
	h := newTestHeads(t)
	b := make([]byte, MaxFrameLen)
	syn := parse(t, b[:h.NextSYN(b)])
	if syn.TCP.Flags() != wire.TCPFlagSYN || syn.IP.Src() != wire.IP4From(headsSource) || syn.TCP.DstPort() != 80 || syn.TCP.SrcPort() != FirstPort {
		t.Fatalf("first SYN: flags %#x from %v:%d to port %d", syn.TCP.Flags(), syn.IP.Src(), syn.TCP.SrcPort(), syn.TCP.DstPort())
	}
	isn := uint32(syn.TCP.Seq())
	second := parse(t, b[:h.NextSYN(b)])
	if second.TCP.DstPort() != 8080 || second.TCP.SrcPort() != FirstPort {
		t.Fatalf("second SYN to %d from %d: flows should go round the ports", second.TCP.DstPort(), second.TCP.SrcPort())
	}

	reply := make([]byte, MaxFrameLen)
	var cookie uint32 = 0xfffffff0 // the final ACK's number wraps
	n, ev := h.Input(fromFront(80, FirstPort, cookie, isn+1, wire.TCPFlagSYN|wire.TCPFlagACK, ""), reply)
	if ev != EvSynAck || n == 0 {
		t.Fatalf("SYN-ACK: event %v, reply %d bytes", ev, n)
	}
	ack := parse(t, reply[:n])
	if ack.TCP.Flags()&(wire.TCPFlagSYN|wire.TCPFlagRST|wire.TCPFlagFIN) != 0 || !ack.TCP.Has(wire.TCPFlagACK) ||
		uint32(ack.TCP.Seq()) != isn+1 || uint32(ack.TCP.Ack()) != cookie+1 || string(ack.TCP.Payload()) != DefaultHead {
		t.Fatalf("final ACK: flags %#x seq %d ack %d payload %q", ack.TCP.Flags(), ack.TCP.Seq(), ack.TCP.Ack(), ack.TCP.Payload())
	}
	if ack.Eth.Dst() != frontMAC || ack.TCP.DstPort() != 80 || ack.TCP.SrcPort() != FirstPort {
		t.Fatalf("final ACK to %v port %d from %d", ack.Eth.Dst(), ack.TCP.DstPort(), ack.TCP.SrcPort())
	}

	headEnd := isn + 1 + uint32(len(DefaultHead))
	steps := []struct {
		name  string
		frame []byte
		ev    Event
		reply bool
	}{
		{"a SYN-ACK with the wrong ack", fromFront(80, FirstPort, 5, isn+2, wire.TCPFlagSYN|wire.TCPFlagACK, ""), EvNone, false},
		{"the head's ACK", fromFront(80, FirstPort, cookie+1, headEnd, wire.TCPFlagACK, ""), EvHeadAcked, false},
		{"the head's ACK again", fromFront(80, FirstPort, cookie+1, headEnd, wire.TCPFlagACK, ""), EvNone, false},
		{"a retransmitted SYN-ACK", fromFront(80, FirstPort, cookie, isn+1, wire.TCPFlagSYN|wire.TCPFlagACK, ""), EvSynAckAgain, true},
		{"a 408", fromFront(80, FirstPort, cookie+1, headEnd, wire.TCPFlagACK|wire.TCPFlagFIN, "HTTP/1.1 408 Request Timeout\r\n\r\n"), EvServerData, false},
		{"its retransmission", fromFront(80, FirstPort, cookie+1, headEnd, wire.TCPFlagACK|wire.TCPFlagFIN, "HTTP/1.1 408 Request Timeout\r\n\r\n"), EvNone, false},
		{"a RST", fromFront(80, FirstPort, cookie+40, 0, wire.TCPFlagRST, ""), EvReset, false},
		{"a second RST", fromFront(80, FirstPort, cookie+40, 0, wire.TCPFlagRST, ""), EvNone, false},
		{"a SYN-ACK after the RST", fromFront(80, FirstPort, cookie, isn+1, wire.TCPFlagSYN|wire.TCPFlagACK, ""), EvNone, false},
		{"a flow never opened", fromFront(80, FirstPort+5, 1, 1, wire.TCPFlagSYN|wire.TCPFlagACK, ""), EvNone, false},
		{"a port not attacked", fromFront(443, FirstPort, 1, isn+1, wire.TCPFlagSYN|wire.TCPFlagACK, ""), EvNone, false},
		{"the other port's RST", fromFront(8080, FirstPort, 1, 0, wire.TCPFlagRST, ""), EvReset, false},
	}
	for _, s := range steps {
		n, ev := h.Input(s.frame, reply)
		if ev != s.ev || (n > 0) != s.reply {
			t.Errorf("%s: event %v, reply %d bytes; want %v, reply %v", s.name, ev, n, s.ev, s.reply)
		}
	}
}

func TestHeadsAnswersARPForItsSource(t *testing.T) {
	h := newTestHeads(t)
	req := make([]byte, wire.ARPFrameLen)
	wire.EncodeARP(req, wire.ARPRequest, frontMAC, wire.IP4From(headsVIP), wire.MAC{}, wire.IP4From(headsSource), wire.BroadcastMAC)
	reply := make([]byte, MaxFrameLen)
	n, ev := h.Input(req, reply)
	var p wire.Packet
	if ev != EvARP || wire.Parse(reply[:n], &p) != nil || p.Kind != wire.KindARP ||
		p.ARP.Op() != wire.ARPReply || p.ARP.SenderIP() != wire.IP4From(headsSource) || p.ARP.SenderMAC() != attackerMAC || p.Eth.Dst() != frontMAC {
		t.Fatalf("ARP request for the source: event %v, reply %x", ev, reply[:n])
	}
	wire.EncodeARP(req, wire.ARPRequest, frontMAC, wire.IP4From(headsVIP), wire.MAC{}, wire.IP4From(netip.MustParseAddr("198.18.0.201")), wire.BroadcastMAC)
	if n, ev := h.Input(req, reply); n != 0 || ev != EvNone {
		t.Fatalf("ARP request for another address answered: %v, %d bytes", ev, n)
	}
}

// TestHeadsCapacity: 100,000 flows from one source need two target
// ports; every flow is a distinct 4-tuple and NextSYN stops at the end.
func TestHeadsCapacity(t *testing.T) {
	h := newTestHeads(t)
	if h.Capacity() < 100_000 {
		t.Fatalf("capacity %d with two ports, want at least 100,000", h.Capacity())
	}
	b := make([]byte, MaxFrameLen)
	seen := make(map[[2]uint16]bool, h.Capacity())
	for {
		n := h.NextSYN(b)
		if n == 0 {
			break
		}
		var p wire.Packet
		wire.Parse(b[:n], &p)
		k := [2]uint16{p.TCP.SrcPort(), p.TCP.DstPort()}
		if seen[k] {
			t.Fatalf("flow %v opened twice", k)
		}
		seen[k] = true
	}
	if len(seen) != h.Capacity() {
		t.Fatalf("%d flows opened, capacity %d", len(seen), h.Capacity())
	}
}
