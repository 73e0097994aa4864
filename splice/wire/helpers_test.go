package wire_test

// Shared test helpers: reference frames built by gopacket (an encoder that
// owes nothing to package wire), a deliberately naive checksum to compare
// the fast one against, and random segment generators.

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

var (
	macA = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x0a}
	macB = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x0b}
	ipA  = net.IP{198, 18, 0, 1}
	ipB  = net.IP{198, 19, 255, 254}
)

// serialize builds a frame from gopacket layers with lengths and checksums
// filled in by gopacket.
func serialize(tb testing.TB, ls ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	for _, l := range ls {
		if tcp, ok := l.(*layers.TCP); ok {
			for _, m := range ls {
				if ip, ok := m.(*layers.IPv4); ok {
					if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
						tb.Fatal(err)
					}
				}
			}
		}
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		tb.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func ethLayer(t layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: t}
}

func ipLayer(proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Id: 0x1234, Flags: layers.IPv4DontFragment,
		Protocol: proto, SrcIP: ipA, DstIP: ipB}
}

// refTCPFrame is a gopacket-built Ethernet/IPv4/TCP frame.
func refTCPFrame(tb testing.TB, tcp *layers.TCP, payload []byte) []byte {
	tb.Helper()
	return serialize(tb, ethLayer(layers.EthernetTypeIPv4), ipLayer(layers.IPProtocolTCP), tcp, gopacket.Payload(payload))
}

// naiveSum is the RFC 1071 sum written the slow, obvious way: byte pairs,
// one carry fold per step.
func naiveSum(b []byte) uint16 {
	var s uint32
	for i := 0; i < len(b); i += 2 {
		w := uint32(b[i]) << 8
		if i+1 < len(b) {
			w |= uint32(b[i+1])
		}
		s += w
		s = (s & 0xffff) + (s >> 16)
	}
	return uint16(s)
}

func naiveChecksum(b []byte) uint16 { return ^naiveSum(b) }

// naiveIPChecksum recomputes the header checksum of the IPv4 packet ip
// from scratch, the field taken as zero.
func naiveIPChecksum(ip []byte) uint16 {
	h := append([]byte(nil), ip[:int(ip[0]&0xf)*4]...)
	h[10], h[11] = 0, 0
	return naiveChecksum(h)
}

// naiveTCPChecksum recomputes the TCP checksum of the IPv4 packet ip
// (header and segment) from scratch.
func naiveTCPChecksum(ip []byte) uint16 {
	hl := int(ip[0]&0xf) * 4
	tl := int(binary.BigEndian.Uint16(ip[2:]))
	seg := ip[hl:tl]
	b := make([]byte, 0, 12+len(seg))
	b = append(b, ip[12:20]...)
	b = append(b, 0, byte(ip[9]))
	b = binary.BigEndian.AppendUint16(b, uint16(len(seg)))
	b = append(b, seg...)
	b[12+16], b[12+17] = 0, 0
	return naiveChecksum(b)
}

// randomOptions returns a random, valid, gopacket-encodable option list of
// at most 40 bytes mixing the options qsplice rewrites with NOP padding
// (so timestamps land at odd offsets too) and an unknown option.
func randomOptions(r *rand.Rand) []layers.TCPOption {
	var opts []layers.TCPOption
	room := 40
	add := func(o layers.TCPOption, n int) {
		if n <= room {
			opts = append(opts, o)
			room -= n
		}
	}
	for _, k := range r.Perm(6) {
		if r.IntN(3) == 0 {
			continue
		}
		if r.IntN(2) == 0 {
			add(layers.TCPOption{OptionType: layers.TCPOptionKindNop}, 1)
		}
		switch k {
		case 0:
			add(layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionData: binary.BigEndian.AppendUint16(nil, uint16(r.Uint32()))}, 4)
		case 1:
			add(layers.TCPOption{OptionType: layers.TCPOptionKindWindowScale, OptionData: []byte{byte(r.IntN(15))}}, 3)
		case 2:
			add(layers.TCPOption{OptionType: layers.TCPOptionKindSACKPermitted}, 2)
		case 3:
			d := binary.BigEndian.AppendUint32(nil, randSpecial32(r))
			d = binary.BigEndian.AppendUint32(d, randSpecial32(r))
			add(layers.TCPOption{OptionType: layers.TCPOptionKindTimestamps, OptionData: d}, 10)
		case 4:
			n := 1 + r.IntN(wire.MaxSACKBlocks)
			for 2+8*n > room && n > 1 {
				n--
			}
			var d []byte
			for range 2 * n {
				d = binary.BigEndian.AppendUint32(d, randSpecial32(r))
			}
			add(layers.TCPOption{OptionType: layers.TCPOptionKindSACK, OptionData: d}, 2+8*n)
		case 5:
			add(layers.TCPOption{OptionType: 253, OptionData: []byte{0xbe, 0xef}}, 4)
		}
	}
	return opts
}

// special32 are the 32-bit values where carries, wraps and the two
// one's-complement zeros live.
var special32 = []uint32{0, 1, 0xffff, 0x10000, 0xffff0000, 0x0000ffff, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff}

func randSpecial32(r *rand.Rand) uint32 {
	if r.IntN(3) == 0 {
		return special32[r.IntN(len(special32))]
	}
	return r.Uint32()
}

func randSpecial16(r *rand.Rand) uint16 {
	if r.IntN(3) == 0 {
		return []uint16{0, 1, 0x7fff, 0x8000, 0xfffe, 0xffff}[r.IntN(6)]
	}
	return uint16(r.Uint32())
}

// randomTCPFrame builds a random, valid TCP frame with gopacket: random
// ports, numbers (often special values), flags, options and a payload of
// random (odd or even) length up to maxPayload.
func randomTCPFrame(tb testing.TB, r *rand.Rand, maxPayload int) []byte {
	tb.Helper()
	flags := r.Uint32()
	tcp := &layers.TCP{
		SrcPort: layers.TCPPort(randSpecial16(r)), DstPort: layers.TCPPort(randSpecial16(r)),
		Seq: randSpecial32(r), Ack: randSpecial32(r), Window: randSpecial16(r),
		SYN: flags&1 != 0, ACK: flags&2 != 0, FIN: flags&4 != 0, PSH: flags&8 != 0,
		Options: randomOptions(r),
	}
	payload := make([]byte, r.IntN(maxPayload+1))
	for i := range payload {
		payload[i] = byte(r.Uint32())
	}
	eth := ethLayer(layers.EthernetTypeIPv4)
	ip := ipLayer(layers.IPProtocolTCP)
	ip.SrcIP = net.IP(binary.BigEndian.AppendUint32(nil, randSpecial32(r)))
	ip.DstIP = net.IP(binary.BigEndian.AppendUint32(nil, randSpecial32(r)))
	return serialize(tb, eth, ip, tcp, gopacket.Payload(payload))
}

// forceTCPChecksum makes the stored TCP checksum of a parsed frame take one
// of the two forms of zero by tuning the urgent pointer (the word after the
// checksum, which nothing here rewrites): 0x0000 is what a full computation
// stores, 0xffff is the other zero a sender may legally emit.
func forceTCPChecksum(p *wire.Packet, negZero bool) {
	t := p.TCP
	c := t.ComputeChecksum(p.IP.Src(), p.IP.Dst())
	urg := binary.BigEndian.Uint16(t[18:])
	// New sum = old sum - urg + urg'; it must become zero (mod 0xffff), and
	// old sum == ^c, so urg' = urg + c in one's-complement arithmetic.
	s := uint32(urg) + uint32(c)
	s = (s & 0xffff) + (s >> 16)
	binary.BigEndian.PutUint16(t[18:], uint16(s))
	if negZero {
		t.SetChecksum(0xffff)
	} else {
		t.SetChecksum(0)
	}
}

func mustParse(tb testing.TB, frame []byte) *wire.Packet {
	tb.Helper()
	var p wire.Packet
	if err := wire.Parse(frame, &p); err != nil {
		tb.Fatalf("Parse: %v\n% x", err, frame)
	}
	return &p
}

func ip4(b net.IP) wire.IP4 { return wire.IP4(b.To4()) }
