package replay

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

// The capture the tests replay: three clients of some OTHER front-end
// (its own ISNs, timestamp clock and MAC), as a capture on the client side
// of the VIP would hold them.

// host is one end of a captured conversation.
type host struct {
	mac  wire.MAC
	ip   wire.IP4
	port uint16
}

var (
	base     = time.Unix(1_700_000_000, 0)
	vip      = host{mac: wire.MAC{2, 0, 0xc6, 0x12, 0, 0x63}, ip: wire.IP4From(netip.MustParseAddr(DefaultVIP)), port: 80}
	client1  = host{mac: wire.MAC{2, 0, 0xc6, 0x12, 0, 10}, ip: wire.IP4{198, 18, 0, 10}, port: 40001}
	client2  = host{mac: wire.MAC{2, 0, 0xc6, 0x12, 0, 11}, ip: wire.IP4{198, 18, 0, 11}, port: 40002}
	client3  = host{mac: wire.MAC{2, 0, 0xc6, 0x12, 0, 12}, ip: wire.IP4{198, 18, 0, 12}, port: 40003}
	stranger = host{mac: wire.MAC{2, 0, 0xc6, 0x12, 0, 1}, ip: wire.IP4{198, 18, 0, 1}, port: 22}
)

// Client 1's numbers. Both ISNs sit just below 2^32 so that the request
// and the acknowledged response both wrap the sequence space (variables,
// not constants: constant arithmetic must not wrap).
var (
	isn1     uint32 = 0xffffffc0 // client 1's ISN
	origISN1 uint32 = 0xfffffc00 // the old front-end's ISN towards client 1
	origTS1  uint32 = 5_000_000  // the old front-end's TSval in its SYN-ACK
	respLen1 uint32 = 1460       // response bytes the old back-end sent client 1

	isn2     uint32 = 0x22222222
	origISN2 uint32 = 0x33333333 // not in the capture: learned from the first ACK
	isn3     uint32 = 0x33330000
	origISN3 uint32 = 0x0badf00d
	origTS3  uint32 = 7_000_000
)

var (
	req1a = []byte("GET /index.html HTTP/1.1\r\nHost: www.example.com\r\n")
	req1b = []byte("User-Agent: replay-test\r\nAccept: */*\r\n\r\n")
	req2  = []byte("GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n") // control byte in the target: 400
	req3  = []byte("GET /slow HTTP/1.1\r\nHost: www.example.com\r\n")
)

// captureBuilder writes frames into an in-memory pcap.
type captureBuilder struct {
	t   testing.TB
	buf bytes.Buffer
	w   *link.PcapWriter
}

func newCaptureBuilder(t testing.TB) *captureBuilder {
	b := &captureBuilder{t: t}
	w, err := link.NewPcapWriter(&b.buf)
	if err != nil {
		t.Fatal(err)
	}
	b.w = w
	return b
}

// seg writes one TCP segment from -> to at base+us microseconds.
func (b *captureBuilder) seg(us int, from, to host, seq, ack uint32, flags uint8, opts, payload []byte) {
	b.t.Helper()
	tf := wire.TCPFrame{
		SrcMAC: from.mac, DstMAC: to.mac, Src: from.ip, Dst: to.ip,
		SrcPort: from.port, DstPort: to.port,
		Seq: wire.Seq(seq), Ack: wire.Seq(ack), Flags: flags, Window: 502,
		Options: opts, Payload: payload,
	}
	frame := make([]byte, tf.Len())
	tf.Encode(frame)
	b.frame(us, frame)
}

func (b *captureBuilder) frame(us int, frame []byte) {
	b.t.Helper()
	if err := b.w.WriteFrame(base.Add(time.Duration(us)*time.Microsecond), frame); err != nil {
		b.t.Fatal(err)
	}
}

// arpWhoHas writes an ARP request from h for target.
func (b *captureBuilder) arpWhoHas(us int, h host, target wire.IP4) {
	frame := make([]byte, wire.ARPFrameLen)
	wire.EncodeARP(frame, wire.ARPRequest, h.mac, h.ip, wire.MAC{}, target, wire.BroadcastMAC)
	b.frame(us, frame)
}

func synOpts(mss uint16, ws int, sack, ts bool, val, ecr uint32) []byte {
	o := wire.SynOptions{MSS: mss, WScale: ws, SACKPermitted: sack, TS: ts, TSVal: val, TSEcr: ecr}
	b := make([]byte, o.Len())
	o.Encode(b)
	return b
}

func tsOpt(val, ecr uint32) []byte {
	b := make([]byte, wire.TSOptionLen)
	wire.EncodeTS(b, val, ecr)
	return b
}

// sackTSOpt is NOP NOP SACK(left, right) NOP NOP TS(val, ecr).
func sackTSOpt(left, right, val, ecr uint32) []byte {
	b := []byte{wire.OptNOP, wire.OptNOP, wire.OptSACK, 10, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[4:], left)
	binary.BigEndian.PutUint32(b[8:], right)
	return append(b, tsOpt(val, ecr)...)
}

const (
	fSYN = wire.TCPFlagSYN
	fACK = wire.TCPFlagACK
	fPSH = wire.TCPFlagPSH
	fFIN = wire.TCPFlagFIN
)

// threeClients is the capture behind the golden test (see doc.go): client
// 1 is spliced, client 2 gets 400, client 3 never finishes its head (408).
// Frames from the VIP are the old front-end's and must not be fed.
func threeClients(t testing.TB) []byte {
	b := newCaptureBuilder(t)

	// Client 1: ARP, handshake with timestamps, a GET in two segments,
	// ACKs of the response (one with a SACK block), FIN.
	b.arpWhoHas(0, client1, vip.ip)
	b.seg(10, client1, vip, isn1, 0, fSYN, synOpts(1460, 7, true, true, 1000, 0), nil)
	b.seg(110, vip, client1, origISN1, isn1+1, fSYN|fACK, synOpts(1460, 7, true, true, origTS1, 1000), nil)
	b.seg(200, client1, vip, isn1+1, origISN1+1, fACK, tsOpt(1001, origTS1), nil)
	b.seg(300, client1, vip, isn1+1, origISN1+1, fACK|fPSH, tsOpt(1001, origTS1), req1a)
	b.seg(400, client1, vip, isn1+1+uint32(len(req1a)), origISN1+1, fACK|fPSH, tsOpt(1001, origTS1), req1b)
	reqEnd1 := isn1 + 1 + uint32(len(req1a)+len(req1b))
	b.seg(450, vip, client1, origISN1+1, reqEnd1, fACK, tsOpt(origTS1, 1001), nil)
	b.seg(2000, vip, client1, origISN1+1, reqEnd1, fACK|fPSH, tsOpt(origTS1+2, 1001), bytes.Repeat([]byte("r"), int(respLen1)))
	b.seg(2500, stranger, client1, 1, 1, fACK, nil, nil) // neither to nor from the VIP
	b.seg(5000, client1, vip, reqEnd1, origISN1+1+500, fACK,
		sackTSOpt(origISN1+1+1000, origISN1+1+respLen1, 1006, origTS1+2), nil)
	b.seg(5500, client1, vip, reqEnd1, origISN1+1+respLen1, fACK, tsOpt(1006, origTS1+2), nil)
	b.seg(6000, client1, vip, reqEnd1, origISN1+1+respLen1, fFIN|fACK, tsOpt(1007, origTS1+2), nil)
	b.seg(6100, vip, client1, origISN1+1+respLen1, reqEnd1+1, fFIN|fACK, tsOpt(origTS1+3, 1007), nil)
	b.seg(7000, client1, vip, reqEnd1+1, origISN1+1+respLen1+1, fACK, tsOpt(1008, origTS1+3), nil)

	// Client 2: no timestamps, no window scale, and the old front-end's
	// SYN-ACK is missing from the capture.
	b.seg(10000, client2, vip, isn2, 0, fSYN, synOpts(1400, -1, true, false, 0, 0), nil)
	b.seg(10200, client2, vip, isn2+1, origISN2+1, fACK, nil, nil)
	b.seg(10300, client2, vip, isn2+1, origISN2+1, fACK|fPSH, nil, req2)
	reqEnd2 := isn2 + 1 + uint32(len(req2))
	b.seg(12000, client2, vip, reqEnd2, origISN2+1+180, fACK, nil, nil)
	b.seg(12100, client2, vip, reqEnd2, origISN2+1+181, fFIN|fACK, nil, nil)

	// Client 3: sends half a head and nothing more.
	b.seg(20000, client3, vip, isn3, 0, fSYN, synOpts(1460, 7, true, true, 3000, 0), nil)
	b.seg(20100, vip, client3, origISN3, isn3+1, fSYN|fACK, synOpts(1460, 7, true, true, origTS3, 3000), nil)
	b.seg(20200, client3, vip, isn3+1, origISN3+1, fACK, tsOpt(3001, origTS3), nil)
	b.seg(20300, client3, vip, isn3+1, origISN3+1, fACK|fPSH, tsOpt(3001, origTS3), req3)
	return b.buf.Bytes()
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// replay runs Run on capture with cfg and returns the output capture.
func replay(t testing.TB, cfg Config, capture []byte) ([]byte, Summary) {
	t.Helper()
	var out bytes.Buffer
	sum, err := Run(cfg, bytes.NewReader(capture), &out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return out.Bytes(), sum
}
