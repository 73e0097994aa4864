package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/qsplice/qsplice/splice/wire"
)

// decoded is one output frame, decoded by gopacket (an independent
// decoder, so these tests do not trust the engine's own parser).
type decoded struct {
	when time.Time
	raw  []byte
	ip   *layers.IPv4
	tcp  *layers.TCP
	arp  *layers.ARP
}

func decodeCapture(t *testing.T, capture []byte) []decoded {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(capture))
	if err != nil {
		t.Fatal(err)
	}
	var frames []decoded
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return frames
		}
		if err != nil {
			t.Fatal(err)
		}
		pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		if el := pkt.ErrorLayer(); el != nil {
			t.Fatalf("frame %d does not decode: %v", len(frames)+1, el.Error())
		}
		d := decoded{when: ci.Timestamp, raw: data}
		d.ip, _ = pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		d.tcp, _ = pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		d.arp, _ = pkt.Layer(layers.LayerTypeARP).(*layers.ARP)
		frames = append(frames, d)
	}
}

// between reports whether d is a TCP segment from a:ap to b:bp.
func (d decoded) between(a net.IP, ap uint16, b net.IP, bp uint16) bool {
	return d.tcp != nil && d.ip.SrcIP.Equal(a) && d.ip.DstIP.Equal(b) &&
		uint16(d.tcp.SrcPort) == ap && uint16(d.tcp.DstPort) == bp
}

func ipOf(a wire.IP4) net.IP { return net.IP(a[:]) }

func sum256(b []byte) [32]byte { return sha256.Sum256(b) }

func TestRunTwiceGivesIdenticalBytes(t *testing.T) {
	in := threeClients(t)
	out1, _ := replay(t, Config{}, in)
	out2, _ := replay(t, Config{}, in)
	if sum256(out1) != sum256(out2) {
		t.Fatalf("two replays of the same capture differ: %x vs %x", sum256(out1), sum256(out2))
	}
	// The seed must be what fixes the back-ends' numbers, not chance.
	out3, _ := replay(t, Config{Seed: 42}, in)
	if sum256(out3) == sum256(out1) {
		t.Fatal("a different Seed gave the same output; the back-end ISNs do not depend on it")
	}
}

func TestSummaryCountsThreeClients(t *testing.T) {
	_, s := replay(t, Config{}, threeClients(t))
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"frames in", s.FramesIn, 23},
		// 6 ignored: 5 from the old front-end, 1 between other hosts.
		{"frames ignored", s.FramesIgnored, 6},
		{"frames fed", s.FramesFed, 17},
		{"unmapped client frames", s.ClientUnmapped, 0},
		{"requests", s.Requests, 1},
		{"handoffs started", s.HandoffsStarted, 1},
		{"handoffs done", s.HandoffsDone, 1},
		{"ARP replies", s.ARPReplies, 1},
		{"400 answers", s.Answers["400"], 1},
		{"408 answers", s.Answers["408"], 1},
		// Without the rewriting every final handshake ACK fails the cookie.
		{"bad-cookie drops", s.Drops["bad-cookie"], 0},
		{"flows closed by FIN", s.Closed["fin"], 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if t.Failed() {
		var b bytes.Buffer
		s.WriteText(&b)
		t.Log("\n" + b.String())
	}
}

// TestClientOneIsSplicedOnTheWire follows client 1 through the output:
// our SYN-ACK, C2 with the client's ISN, the request bytes exactly, and
// the client's later ACKs, SACK edges and FIN moved onto the back-end's
// sequence space.
func TestClientOneIsSplicedOnTheWire(t *testing.T) {
	out, _ := replay(t, Config{}, threeClients(t))
	frames := decodeCapture(t, out)
	cIP, vIP := ipOf(client1.ip), ipOf(vip.ip)
	hIP, bIP := net.ParseIP(DefaultHandoffAddr), net.ParseIP("198.18.0.21") // first request: back-end 1

	var synAck, c2Syn, bSynAck *decoded
	var c2Data []byte
	var forwarded []decoded // client segments the engine translated onto C2
	for i := range frames {
		d := &frames[i]
		switch {
		case d.between(vIP, vip.port, cIP, client1.port) && d.tcp.SYN && d.tcp.ACK:
			synAck = d
		case d.tcp != nil && d.ip.SrcIP.Equal(hIP) && d.ip.DstIP.Equal(bIP) && d.tcp.SYN:
			c2Syn = d
		case c2Syn != nil && d.between(bIP, vip.port, hIP, uint16(c2Syn.tcp.SrcPort)) && d.tcp.SYN:
			bSynAck = d
		case c2Syn != nil && d.between(hIP, uint16(c2Syn.tcp.SrcPort), bIP, vip.port):
			if len(d.tcp.Payload) > 0 {
				c2Data = append(c2Data, d.tcp.Payload...)
			} else if bSynAck != nil && len(c2Data) > 0 {
				forwarded = append(forwarded, *d)
			}
		}
	}
	if synAck == nil || c2Syn == nil || bSynAck == nil {
		t.Fatalf("missing handshake frames: SYN-ACK %v, C2 SYN %v, back-end SYN-ACK %v", synAck != nil, c2Syn != nil, bSynAck != nil)
	}
	if synAck.tcp.Ack != isn1+1 {
		t.Errorf("SYN-ACK ack = %#x, want client ISN+1 %#x", synAck.tcp.Ack, isn1+1)
	}
	if c2Syn.tcp.Seq != isn1 {
		t.Errorf("C2 SYN seq = %#x, want the client's ISN %#x", c2Syn.tcp.Seq, isn1)
	}
	if !bytes.Equal(c2Data, append(append([]byte(nil), req1a...), req1b...)) {
		t.Errorf("request bytes on C2 = %q, want %q%q", c2Data, req1a, req1b)
	}

	// A client ACK of captured response byte n (relative to the old
	// front-end's ISN) must reach the back-end as an ACK of its byte n.
	isnB := bSynAck.tcp.Seq
	rel := func(n uint32) uint32 { return isnB + 1 + n }
	want := []struct {
		ack  uint32
		fin  bool
		sack [2]uint32 // 0,0: none
	}{
		{ack: rel(500), sack: [2]uint32{rel(1000), rel(respLen1)}},
		{ack: rel(respLen1)},
		{ack: rel(respLen1), fin: true},
		{ack: rel(respLen1 + 1)},
	}
	if len(forwarded) != len(want) {
		t.Fatalf("%d client segments forwarded after the request, want %d", len(forwarded), len(want))
	}
	for i, w := range want {
		got := forwarded[i].tcp
		if got.Ack != w.ack || got.FIN != w.fin {
			t.Errorf("forwarded segment %d: ack %#x fin %v, want ack %#x fin %v", i, got.Ack, got.FIN, w.ack, w.fin)
		}
		var sack [2]uint32
		for _, o := range got.Options {
			if o.OptionType == layers.TCPOptionKindSACK && len(o.OptionData) == 8 {
				sack = [2]uint32{binary.BigEndian.Uint32(o.OptionData), binary.BigEndian.Uint32(o.OptionData[4:])}
			}
		}
		if sack != w.sack {
			t.Errorf("forwarded segment %d: SACK block %#x, want %#x", i, sack, w.sack)
		}
	}
}

// TestOutputChecksumsAreValid recomputes every checksum in the output:
// the rewriting and the engine's translation use incremental updates,
// which must agree with a full computation.
func TestOutputChecksumsAreValid(t *testing.T) {
	out, _ := replay(t, Config{RecordInput: true}, threeClients(t))
	for i, d := range decodeCapture(t, out) {
		var p wire.Packet
		if err := wire.Parse(d.raw, &p); err != nil {
			t.Errorf("frame %d: %v", i+1, err) // includes a bad IPv4 header checksum
			continue
		}
		if p.Kind == wire.KindTCP {
			if got, want := p.TCP.Checksum(), p.TCP.ComputeChecksum(p.IP.Src(), p.IP.Dst()); got != want {
				t.Errorf("frame %d (%v -> %v): TCP checksum %#04x, want %#04x", i+1, p.IP.Src(), p.IP.Dst(), got, want)
			}
		}
	}
}

func TestRecordInputAddsTheFedFrames(t *testing.T) {
	in := threeClients(t)
	_, plain := replay(t, Config{}, in)
	out, s := replay(t, Config{RecordInput: true}, in)
	if got, want := uint64(len(decodeCapture(t, out))), s.FramesOut+s.BackendFrames+s.FramesFed; got != want {
		t.Errorf("output holds %d frames, want engine %d + back-ends %d + fed %d", got, s.FramesOut, s.BackendFrames, s.FramesFed)
	}
	if s.FramesOut != plain.FramesOut {
		t.Errorf("recording the input changed what the engine sent: %d frames vs %d", s.FramesOut, plain.FramesOut)
	}
}

func TestDrainBoundsTheRunAfterTheCapture(t *testing.T) {
	in := threeClients(t)
	_, short := replay(t, Config{Drain: time.Second}, in)
	if short.Answers["408"] != 0 {
		t.Errorf("with 1 s of drain the 10 s head timeout fired anyway")
	}
	last := base.Add(20300 * time.Microsecond)
	if end := time.Unix(0, short.EndNS); end.After(last.Add(time.Second)) {
		t.Errorf("run ended at %v, after the last frame %v + drain 1s", end, last)
	}
	_, all := replay(t, Config{Drain: -1}, in)
	if all.Answers["408"] != 1 || all.Closed["timeout"] != 2 {
		t.Errorf("running until idle: 408s %d, timeouts %d; want 1 and 2 (both answers given up)", all.Answers["408"], all.Closed["timeout"])
	}
}

func TestConfigValidation(t *testing.T) {
	bad := []Config{
		{Backends: MaxBackends + 1},
		{HandoffAddr: mustAddr(DefaultVIP)},
		{ControlDelay: -time.Millisecond},
		{VIP: mustAddr("198.18.0.21")}, // back-end 1's address
	}
	for i, c := range bad {
		if _, err := Run(c, bytes.NewReader(threeClients(t)), io.Discard); err == nil {
			t.Errorf("config %d (%+v) accepted", i, c)
		}
	}
}
