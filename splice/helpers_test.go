package splice

// Test helpers shared by the engine tests: the addresses of a small
// imaginary network, builders for the segments clients and servers send,
// a checker that decodes what the engines emit with gopacket (an encoder
// and decoder that owe nothing to package wire) and verifies checksums by
// a naive full recompute, and harnesses that feed an engine at explicit
// times. The engines never read a clock, so every test chooses its own.

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/splice/wire"
)

// The network of the tests. Clients sit behind a router whose MAC is the
// client's next hop as the front-end sees it; back-ends and the front-end
// share a link.
var (
	vipA      = ip4("198.18.0.10")
	vipB      = ip4("198.18.0.11")
	handoffIP = ip4("198.18.0.20")
	clientIP  = ip4("198.19.7.7")
	routerIP  = ip4("198.19.0.1")
	backendIP = ip4("198.18.1.2")
	otherIP   = ip4("198.18.1.3") // an address nobody owns

	feMAC      = wire.MAC{0x02, 0, 0, 0, 0, 0xfe}
	routerMAC  = wire.MAC{0x02, 0, 0, 0, 0, 0x01}
	backendMAC = wire.MAC{0x02, 0, 0, 0, 0, 0xb1} // the back-end's NIC, where the shim sits
	hostMAC    = wire.MAC{0x02, 0, 0, 0, 0, 0xb2} // the back-end kernel's TAP side
)

const (
	ms = Time(time.Millisecond)
	s1 = Time(time.Second)

	// t0 is an ordinary start time, well inside cookie slot 15.
	t0 = 1000 * s1

	webPort = 80
)

func ip4(s string) wire.IP4 { return wire.IP4From(netip.MustParseAddr(s)) }

var testBackend = Backend{ID: 7, IP: backendIP.Addr(), MAC: backendMAC, Port: webPort}

// testFrontEndConfig is the configuration most front-end tests use; mod
// adjusts it.
func testFrontEndConfig(mod func(*FrontEndConfig)) FrontEndConfig {
	cfg := FrontEndConfig{
		MAC:         feMAC,
		VIPs:        []netip.Addr{vipA.Addr(), vipB.Addr()},
		Ports:       []uint16{webPort, 8080},
		HandoffAddr: handoffIP.Addr(),
	}
	for i := range cfg.CookieSecret {
		cfg.CookieSecret[i] = byte(i*7 + 1)
	}
	if mod != nil {
		mod(&cfg)
	}
	return cfg
}

// ---------------------------------------------------------------------
// Harnesses: an engine, its reusable Output, and the time.

type feHarness struct {
	tb  testing.TB
	fe  *FrontEnd
	cfg FrontEndConfig
	out Output
	// frames counts every frame the engine emitted, for the TxFrames check.
	frames uint64
	inputs uint64
}

func newFE(tb testing.TB, mod func(*FrontEndConfig)) *feHarness {
	tb.Helper()
	cfg := testFrontEndConfig(mod)
	fe, err := NewFrontEnd(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.setDefaults()
	return &feHarness{tb: tb, fe: fe, cfg: cfg}
}

// input feeds one frame at now and returns what came out. The frame is
// copied first: the engine rewrites frames in place, and callers often
// want to keep theirs.
func (h *feHarness) input(frame []byte, now Time) *Output {
	h.out.Reset()
	h.fe.Input(append([]byte(nil), frame...), now, &h.out)
	h.inputs++
	h.frames += uint64(len(h.out.Frames))
	return &h.out
}

func (h *feHarness) tick(now Time) *Output {
	h.out.Reset()
	h.fe.Tick(now, &h.out)
	h.frames += uint64(len(h.out.Frames))
	return &h.out
}

// call runs one of the daemon-facing methods (Dispatch, SpliceAcked, ...)
// with a fresh Output.
func (h *feHarness) call(f func(out *Output)) *Output {
	h.out.Reset()
	f(&h.out)
	h.frames += uint64(len(h.out.Frames))
	return &h.out
}

// checkCounters asserts the counters agree with what the harness saw.
func (h *feHarness) checkCounters() {
	h.tb.Helper()
	st := h.fe.Stats()
	if st.RxFrames != h.inputs {
		h.tb.Errorf("RxFrames = %d, fed %d frames", st.RxFrames, h.inputs)
	}
	if st.TxFrames != h.frames {
		h.tb.Errorf("TxFrames = %d, engine emitted %d frames", st.TxFrames, h.frames)
	}
	var drops uint64
	for _, d := range st.Drops {
		drops += d
	}
	if drops > st.RxFrames {
		h.tb.Errorf("%d drops out of %d frames received", drops, st.RxFrames)
	}
	if st.Flows != uint64(h.fe.Flows()) {
		h.tb.Errorf("Stats.Flows = %d, Flows() = %d", st.Flows, h.fe.Flows())
	}
	for k, f := range h.fe.flows {
		if h.fe.byID[f.id] != f || f.key != k {
			h.tb.Errorf("flow %d in the tuple table but not the ID table", f.id)
		}
	}
	for p, f := range h.fe.byPort {
		if h.fe.byID[f.id] != f || f.hport != p {
			h.tb.Errorf("handoff port %d names a dead flow %d", p, f.id)
		}
	}
}

// drain ticks at every deadline until none is left (or limit passes) and
// returns the time it stopped at.
func (h *feHarness) drain(from, limit Time) Time {
	now := from
	for i := 0; i < 1000; i++ {
		next := h.fe.NextDeadline()
		if next == Never || next > limit {
			return now
		}
		now = max(now, next)
		h.tick(now)
	}
	h.tb.Fatalf("timers still due after 1000 ticks")
	return now
}

type shimHarness struct {
	tb     testing.TB
	sh     *Shim
	out    Output
	frames uint64
}

func newShim(tb testing.TB, cfg ShimConfig) *shimHarness {
	tb.Helper()
	if !cfg.HostIP.IsValid() {
		cfg.HostIP = backendIP.Addr()
	}
	sh, err := NewShim(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return &shimHarness{tb: tb, sh: sh}
}

func (h *shimHarness) input(port Port, frame []byte, now Time) *Output {
	h.out.Reset()
	h.sh.Input(port, append([]byte(nil), frame...), now, &h.out)
	h.frames += uint64(len(h.out.Frames))
	return &h.out
}

func (h *shimHarness) tick(now Time) *Output {
	h.out.Reset()
	h.sh.Tick(now, &h.out)
	h.frames += uint64(len(h.out.Frames))
	return &h.out
}

// checkCounters asserts that every emitted frame is counted exactly once.
func (h *shimHarness) checkCounters() {
	h.tb.Helper()
	st := h.sh.Stats()
	if got := st.HostToWire + st.WireToHost + st.Translated + st.CopiesToFrontEnd; got != h.frames {
		h.tb.Errorf("shim counted %d frames out, emitted %d", got, h.frames)
	}
	if st.Entries != uint64(len(h.sh.byReq)) {
		h.tb.Errorf("%d entries by tuple, %d by request", st.Entries, len(h.sh.byReq))
	}
	if h.sh.active < 0 {
		h.tb.Errorf("Active() = %d", h.sh.active)
	}
}

// ---------------------------------------------------------------------
// Segment builders.

// frame encodes tf into a new buffer.
func frame(tf wire.TCPFrame) []byte {
	b := make([]byte, tf.Len())
	tf.Encode(b)
	return b
}

// synOpts encodes SYN options.
func synOpts(o wire.SynOptions) []byte {
	b := make([]byte, o.Len())
	o.Encode(b)
	return b
}

// segOpts encodes the options of a non-SYN segment: a timestamp when ts is
// non-nil, then SACK blocks.
func segOpts(ts *[2]uint32, sack ...wire.SACKBlock) []byte {
	var b []byte
	if ts != nil {
		var t [wire.TSOptionLen]byte
		wire.EncodeTS(t[:], ts[0], ts[1])
		b = append(b, t[:]...)
	}
	if len(sack) > 0 {
		b = append(b, wire.OptNOP, wire.OptNOP, wire.OptSACK, byte(2+8*len(sack)))
		for _, s := range sack {
			b = binary.BigEndian.AppendUint32(b, uint32(s.Left))
			b = binary.BigEndian.AppendUint32(b, uint32(s.Right))
		}
	}
	return b
}

// ---------------------------------------------------------------------
// The checker: decode with gopacket, recompute checksums naively, assert
// fields.

// seen is an emitted frame decoded by gopacket.
type seen struct {
	raw []byte
	eth *layers.Ethernet
	ip  *layers.IPv4
	tcp *layers.TCP
}

// naiveSum is the RFC 1071 sum, word by word, as simple as it gets.
func naiveSum(b []byte, acc uint32) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		acc += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		acc += uint32(b[len(b)-1]) << 8
	}
	return acc
}

func naiveFinish(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc&0xffff + acc>>16
	}
	return ^uint16(acc)
}

// ipChecksum recomputes an IPv4 header checksum with its field zeroed.
func ipChecksum(hdr []byte) uint16 {
	h := append([]byte(nil), hdr...)
	h[10], h[11] = 0, 0
	return naiveFinish(naiveSum(h, 0))
}

// tcpChecksum recomputes a TCP checksum over the pseudo header and seg.
func tcpChecksum(src, dst []byte, seg []byte) uint16 {
	s := append([]byte(nil), seg...)
	s[16], s[17] = 0, 0
	pseudo := make([]byte, 0, 12)
	pseudo = append(pseudo, src...)
	pseudo = append(pseudo, dst...)
	pseudo = append(pseudo, 0, wire.ProtoTCP, byte(len(s)>>8), byte(len(s)))
	return naiveFinish(naiveSum(s, naiveSum(pseudo, 0)))
}

// decodeTCP decodes an Ethernet/IPv4/TCP frame and checks that both
// checksums equal a full recompute.
func decodeTCP(tb testing.TB, b []byte) *seen {
	tb.Helper()
	pkt := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	if el := pkt.ErrorLayer(); el != nil {
		tb.Fatalf("gopacket cannot decode the frame: %v\n%x", el.Error(), b)
	}
	s := &seen{raw: b}
	var ok bool
	if s.eth, ok = pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); !ok {
		tb.Fatalf("no Ethernet layer in %x", b)
	}
	if s.ip, ok = pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4); !ok {
		tb.Fatalf("no IPv4 layer in %x", b)
	}
	if s.tcp, ok = pkt.Layer(layers.LayerTypeTCP).(*layers.TCP); !ok {
		tb.Fatalf("no TCP layer in %x", b)
	}
	ipHdr := b[14 : 14+int(s.ip.IHL)*4]
	if want := ipChecksum(ipHdr); s.ip.Checksum != want {
		tb.Errorf("IPv4 checksum %#04x, full recompute %#04x", s.ip.Checksum, want)
	}
	seg := b[14+len(ipHdr) : 14+int(s.ip.Length)]
	if want := tcpChecksum(ipHdr[12:16], ipHdr[16:20], seg); s.tcp.Checksum != want {
		tb.Errorf("TCP checksum %#04x, full recompute %#04x", s.tcp.Checksum, want)
	}
	return s
}

func (s *seen) seq() wire.Seq { return wire.Seq(s.tcp.Seq) }
func (s *seen) ack() wire.Seq { return wire.Seq(s.tcp.Ack) }

func (s *seen) flags() uint8 { return s.raw[14+int(s.ip.IHL)*4+13] }

func (s *seen) payload() []byte { return s.tcp.Payload }

func (s *seen) option(kind layers.TCPOptionKind) (layers.TCPOption, bool) {
	for _, o := range s.tcp.Options {
		if o.OptionType == kind {
			return o, true
		}
	}
	return layers.TCPOption{}, false
}

// ts returns the timestamp option's values.
func (s *seen) ts() (val, ecr uint32, ok bool) {
	o, ok := s.option(layers.TCPOptionKindTimestamps)
	if !ok || len(o.OptionData) != 8 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(o.OptionData), binary.BigEndian.Uint32(o.OptionData[4:]), true
}

func (s *seen) sackBlocks() []wire.SACKBlock {
	o, ok := s.option(layers.TCPOptionKindSACK)
	if !ok {
		return nil
	}
	var bl []wire.SACKBlock
	for i := 0; i+8 <= len(o.OptionData); i += 8 {
		bl = append(bl, wire.SACKBlock{
			Left:  wire.Seq(binary.BigEndian.Uint32(o.OptionData[i:])),
			Right: wire.Seq(binary.BigEndian.Uint32(o.OptionData[i+4:])),
		})
	}
	return bl
}

// check is one assertion about a decoded frame.
type check func(tb testing.TB, s *seen)

// expectTCP decodes b, verifies checksums and runs checks.
func expectTCP(tb testing.TB, b []byte, checks ...check) *seen {
	tb.Helper()
	s := decodeTCP(tb, b)
	for _, c := range checks {
		c(tb, s)
	}
	return s
}

func macOf(m wire.MAC) net.HardwareAddr { return net.HardwareAddr(m[:]) }

func ethFrom(m wire.MAC) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if !bytes.Equal(s.eth.SrcMAC, macOf(m)) {
			tb.Errorf("source MAC %v, want %v", s.eth.SrcMAC, m)
		}
	}
}

func ethTo(m wire.MAC) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if !bytes.Equal(s.eth.DstMAC, macOf(m)) {
			tb.Errorf("destination MAC %v, want %v", s.eth.DstMAC, m)
		}
	}
}

func from(a wire.IP4, port uint16) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if !s.ip.SrcIP.Equal(net.IP(a[:])) || uint16(s.tcp.SrcPort) != port {
			tb.Errorf("from %v:%d, want %v:%d", s.ip.SrcIP, s.tcp.SrcPort, a, port)
		}
	}
}

func to(a wire.IP4, port uint16) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if !s.ip.DstIP.Equal(net.IP(a[:])) || uint16(s.tcp.DstPort) != port {
			tb.Errorf("to %v:%d, want %v:%d", s.ip.DstIP, s.tcp.DstPort, a, port)
		}
	}
}

func seqIs(q wire.Seq) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if s.seq() != q {
			tb.Errorf("seq %#x, want %#x", uint32(s.seq()), uint32(q))
		}
	}
}

func ackIs(q wire.Seq) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if s.ack() != q {
			tb.Errorf("ack %#x, want %#x", uint32(s.ack()), uint32(q))
		}
	}
}

// flagsAre asserts the exact set of TCP flags.
func flagsAre(f uint8) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if s.flags() != f {
			tb.Errorf("flags %#02x, want %#02x", s.flags(), f)
		}
	}
}

func windowIs(w uint16) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if s.tcp.Window != w {
			tb.Errorf("window %d, want %d", s.tcp.Window, w)
		}
	}
}

func payloadIs(p []byte) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if !bytes.Equal(s.payload(), p) {
			tb.Errorf("payload %q, want %q", s.payload(), p)
		}
	}
}

func tsIs(val, ecr uint32) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		v, e, ok := s.ts()
		if !ok {
			tb.Errorf("no timestamp option, want TSval %#x TSecr %#x", val, ecr)
			return
		}
		if v != val || e != ecr {
			tb.Errorf("TSval %#x TSecr %#x, want %#x %#x", v, e, val, ecr)
		}
	}
}

func noOption(kind layers.TCPOptionKind) check {
	return func(tb testing.TB, s *seen) {
		tb.Helper()
		if _, ok := s.option(kind); ok {
			tb.Errorf("unexpected option %v", kind)
		}
	}
}

// ---------------------------------------------------------------------
// Output helpers.

// onlyFrame asserts out holds exactly one frame and returns a copy.
func onlyFrame(tb testing.TB, out *Output) []byte {
	tb.Helper()
	if len(out.Frames) != 1 {
		tb.Fatalf("%d frames out, want 1", len(out.Frames))
	}
	return append([]byte(nil), out.Frames[0].Data...)
}

// copyFrames copies every frame out of an Output (whose buffers are
// reused by the next call).
func copyFrames(out *Output) [][]byte {
	var fs [][]byte
	for _, f := range out.Frames {
		fs = append(fs, append([]byte(nil), f.Data...))
	}
	return fs
}

// eventsOf returns out's events of kind k.
func eventsOf(out *Output, k EventKind) []Event {
	var evs []Event
	for _, e := range out.Events {
		if e.Kind == k {
			evs = append(evs, e)
		}
	}
	return evs
}

// onlyEvent asserts out holds exactly one event, of kind k.
func onlyEvent(tb testing.TB, out *Output, k EventKind) Event {
	tb.Helper()
	if len(out.Events) != 1 || out.Events[0].Kind != k {
		tb.Fatalf("events %+v, want exactly one of kind %d", out.Events, k)
	}
	return out.Events[0]
}
