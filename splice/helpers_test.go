package splice

// Test helpers shared by the engine tests: the addresses of a small
// imaginary network, harnesses that feed an engine at explicit times (the
// engines never read a clock, so every test chooses its own), builders for
// option areas, and helpers to pick frames and events out of an Output.
// The checker for emitted frames is in checker_test.go, the scripted
// client and server in peers_test.go.

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

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
		// The request head's ACK at once, as most tests expect one frame
		// per client segment; fe_ackdelay_test.go tests the delay.
		RequestAckDelay: -1,
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

// liveFrames counts out's frames, less those taken back (no Data).
func liveFrames(out *Output) uint64 {
	var n uint64
	for _, f := range out.Frames {
		if f.Data != nil {
			n++
		}
	}
	return n
}

// input feeds one frame at now and returns what came out. The frame is
// copied first: the engine rewrites frames in place, and callers often
// want to keep theirs.
func (h *feHarness) input(frame []byte, now Time) *Output {
	h.out.Reset()
	h.fe.Input(append([]byte(nil), frame...), now, &h.out)
	h.inputs++
	h.frames += liveFrames(&h.out)
	return &h.out
}

func (h *feHarness) tick(now Time) *Output {
	h.out.Reset()
	h.fe.Tick(now, &h.out)
	h.frames += liveFrames(&h.out)
	return &h.out
}

// call runs one of the daemon-facing methods (Dispatch, SpliceAcked, ...)
// with a fresh Output.
func (h *feHarness) call(f func(out *Output)) *Output {
	h.out.Reset()
	f(&h.out)
	h.frames += liveFrames(&h.out)
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
	h.checkTables()
}

// checkTables asserts the engine's tables agree with each other.
func (h *feHarness) checkTables() {
	h.tb.Helper()
	for k, f := range h.fe.flows {
		if h.fe.byID[f.id] != f || f.key != k {
			h.tb.Errorf("flow %d in the tuple table but not the ID table", f.id)
		}
	}
	for k, f := range h.fe.byC2 {
		if h.fe.byID[f.id] != f || f.c2Key() != k {
			h.tb.Errorf("handoff connection %v names a dead flow %d", k, f.id)
		}
	}
	// Each source counts exactly the flows that say they are in it.
	counted := map[wire.IP4]srcUse{}
	for _, f := range h.fe.byID {
		u := counted[f.key.srcIP]
		switch f.srcHold {
		case holdPre:
			u.pre++
		case holdPort:
			u.ports++
		}
		if u != (srcUse{}) {
			counted[f.key.srcIP] = u
		}
	}
	if len(counted) != len(h.fe.sources) {
		h.tb.Errorf("%d sources counted, %d hold flows", len(h.fe.sources), len(counted))
	}
	for src, u := range h.fe.sources {
		if counted[src] != u {
			h.tb.Errorf("source %v counted %+v, its flows hold %+v", src, u, counted[src])
		}
	}
}

// drain ticks at every deadline until none is left at or before limit; it
// returns the time it stopped at and the events of all those ticks.
func (h *feHarness) drain(from, limit Time) (Time, []Event) {
	now := from
	var evs []Event
	for i := 0; i < 1000; i++ {
		next := h.fe.NextDeadline()
		if next == Never || next > limit {
			return now, evs
		}
		now = max(now, next)
		evs = append(evs, h.tick(now).Events...)
	}
	h.tb.Fatalf("timers still due after 1000 ticks")
	return now, evs
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
	if cfg.WebPorts == nil {
		cfg.WebPorts = []uint16{webPort}
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

// inputVNet feeds a frame that came with a virtio-net header.
func (h *shimHarness) inputVNet(port Port, frame []byte, vh wire.VNetHdr, now Time) *Output {
	h.out.Reset()
	h.sh.InputVNet(port, append([]byte(nil), frame...), vh, now, &h.out)
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
		if f.Data != nil { // nil: taken back
			fs = append(fs, append([]byte(nil), f.Data...))
		}
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
