package flood

import (
	"testing"

	"github.com/qsplice/qsplice/splice/wire"
)

// FuzzHeadsInput: whatever frame arrives, Input does not panic, and any
// answer it writes is a frame that parses with exact checksums: the
// final ACK of one of its own flows, or an ARP reply.
func FuzzHeadsInput(f *testing.F) {
	f.Add(fromFront(80, FirstPort, 1000, 0, wire.TCPFlagSYN|wire.TCPFlagACK, ""), uint16(3))
	f.Add(fromFront(8080, FirstPort, 1, 0, wire.TCPFlagRST, ""), uint16(2))
	f.Add(fromFront(80, FirstPort, 1, 0, wire.TCPFlagACK|wire.TCPFlagFIN, "HTTP/1.1 408"), uint16(1))
	arp := make([]byte, wire.ARPFrameLen)
	wire.EncodeARP(arp, wire.ARPRequest, frontMAC, wire.IP4From(headsVIP), wire.MAC{}, wire.IP4From(headsSource), wire.BroadcastMAC)
	f.Add(arp, uint16(0))
	f.Fuzz(func(t *testing.T, frame []byte, opened uint16) {
		h, err := NewHeads(HeadsConfig{SrcMAC: attackerMAC, DstMAC: frontMAC, Source: headsSource,
			Target: headsVIP, Ports: []uint16{80, 8080}, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, MaxFrameLen)
		for range opened % 8 {
			h.NextSYN(b)
		}
		reply := make([]byte, MaxFrameLen)
		n, ev := h.Input(frame, reply)
		if n == 0 {
			return
		}
		var p wire.Packet
		if err := wire.Parse(reply[:n], &p); err != nil {
			t.Fatalf("event %v: reply does not parse: %v", ev, err)
		}
		switch ev {
		case EvARP:
			if p.Kind != wire.KindARP || p.ARP.Op() != wire.ARPReply {
				t.Fatalf("ARP answer is not an ARP reply")
			}
		case EvSynAck, EvSynAckAgain:
			if p.Kind != wire.KindTCP || p.TCP.Checksum() != p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()) ||
				p.IP.Src() != wire.IP4From(headsSource) || string(p.TCP.Payload()) != DefaultHead {
				t.Fatalf("final ACK is wrong: %x", reply[:n])
			}
		default:
			t.Fatalf("event %v came with a %d-byte reply", ev, n)
		}
	})
}
