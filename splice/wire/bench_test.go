package wire_test

import (
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

// fullSizeFrame is a 1514-byte data segment as the shim sees it: NOP NOP TS
// and 1448 bytes of payload.
func fullSizeFrame(tb testing.TB) []byte {
	tb.Helper()
	payload := make([]byte, 1448)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	f := refTCPFrame(tb, &layers.TCP{SrcPort: 80, DstPort: 40000, Seq: 0xfffff000, Ack: 99, ACK: true, PSH: true, Window: 502,
		Options: []layers.TCPOption{{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop},
			{OptionType: layers.TCPOptionKindTimestamps, OptionData: make([]byte, 8)}}}, payload)
	if len(f) != 1514 {
		tb.Fatalf("frame is %d bytes", len(f))
	}
	return f
}

var (
	vip    = wire.IP4{198, 18, 0, 80}
	client = wire.IP4{198, 19, 0, 9}
)

// natRewriteOnce is the shim's per-reply work: parse, find the options,
// rewrite addresses, ports, seq, ack and TSval, all incrementally.
func natRewriteOnce(frame []byte, p *wire.Packet, o *wire.TCPOptions, delta int32) error {
	if err := wire.Parse(frame, p); err != nil {
		return err
	}
	if err := wire.ParseOptions(p.TCP, o); err != nil {
		return err
	}
	oldSrc, oldDst := p.IP.Src(), p.IP.Dst()
	p.IP.SetSrc(vip)
	p.IP.SetDst(client)
	p.TCP.UpdateAddrs(oldSrc, oldDst, vip, client)
	p.TCP.SetSrcPortUpdate(80)
	p.TCP.SetDstPortUpdate(40000)
	p.TCP.SetSeqUpdate(p.TCP.Seq().Add(delta))
	p.TCP.SetAckUpdate(p.TCP.Ack().Add(-delta))
	if o.HasTS {
		p.TCP.SetUint32AtUpdate(o.TSOffset, o.TSVal+uint32(delta))
	}
	return nil
}

func TestNATRewriteAllocatesNothing(t *testing.T) {
	frame := fullSizeFrame(t)
	var p wire.Packet
	var o wire.TCPOptions
	delta := int32(1)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := natRewriteOnce(frame, &p, &o, delta); err != nil {
			t.Fatal(err)
		}
		delta = -delta
	})
	if allocs != 0 {
		t.Errorf("Parse+ParseOptions+rewrite allocates %.1f times per frame", allocs)
	}
	// The work was real: the frame is still consistent after 1001 rewrites.
	if got, want := p.TCP.Checksum(), naiveTCPChecksum(p.IP); got != want {
		t.Errorf("checksum %#04x, full %#04x", got, want)
	}
	if p.IP.Src() != vip || p.IP.Dst() != client {
		t.Errorf("addresses %v -> %v", p.IP.Src(), p.IP.Dst())
	}
}

func BenchmarkParse(b *testing.B) {
	frame := fullSizeFrame(b)
	var p wire.Packet
	var o wire.TCPOptions
	b.ReportAllocs()
	for b.Loop() {
		if err := wire.Parse(frame, &p); err != nil {
			b.Fatal(err)
		}
		if err := wire.ParseOptions(p.TCP, &o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNATRewrite(b *testing.B) {
	frame := fullSizeFrame(b)
	var p wire.Packet
	var o wire.TCPOptions
	delta := int32(1000)
	b.ReportAllocs()
	for b.Loop() {
		if err := natRewriteOnce(frame, &p, &o, delta); err != nil {
			b.Fatal(err)
		}
		delta = -delta
	}
}

func BenchmarkFullChecksum1514(b *testing.B) {
	frame := fullSizeFrame(b)
	p := mustParse(b, frame)
	src, dst := p.IP.Src(), p.IP.Dst()
	b.ReportAllocs()
	b.SetBytes(int64(len(p.TCP)))
	for b.Loop() {
		p.TCP.SetChecksum(p.TCP.ComputeChecksum(src, dst))
	}
}

func BenchmarkGopacketDecode(b *testing.B) {
	frame := fullSizeFrame(b)
	var (
		eth     layers.Ethernet
		ip      layers.IPv4
		tcp     layers.TCP
		payload gopacket.Payload
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip, &tcp, &payload)
	decoded := make([]gopacket.LayerType, 0, 4)
	b.ReportAllocs()
	for b.Loop() {
		if err := parser.DecodeLayers(frame, &decoded); err != nil {
			b.Fatal(err)
		}
	}
}
