package splice

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice/wire"
)

// twConn is one client connection of the TIME-WAIT tests: its own port,
// ISN and first TSval (0: no timestamps), as Linux clients draw them.
type twConn struct {
	port uint16
	isn  wire.Seq
	ts   uint32
}

const twRequest = "GET / HTTP/1.1\r\nHost: www.example.test\r\n\r\n"

// twOptions are a client segment's options: the TSval ts+k echoing ecr,
// or none.
func (c twConn) options(k int, ecr uint32) []byte {
	if c.ts == 0 {
		return nil
	}
	b := make([]byte, 12)
	return b[:wire.EncodeTS(b, c.ts+uint32(k), ecr)]
}

// twHandoff takes c through the handshake, the request and Dispatch and
// returns the C2 SYN the front-end sent.
func twHandoff(t *testing.T, p *rawPeer, c twConn, now Time) (syn wire.Packet, cookie wire.Seq, feTS uint32) {
	t.Helper()
	so := wire.SynOptions{MSS: 1460, TS: c.ts != 0, TSVal: c.ts}
	var ob [40]byte
	out := p.send(wire.TCPFrame{SrcMAC: routerMAC, DstMAC: feMAC, Src: p.src, Dst: vipA, SrcPort: c.port, DstPort: webPort,
		Seq: c.isn, Flags: wire.TCPFlagSYN, Window: 65535, Options: ob[:so.Encode(ob[:])]}, now)
	if len(out.Frames) != 1 || wire.Parse(out.Frames[0].Data, &p.pkt) != nil {
		t.Fatalf("port %d: SYN answered with %d frames", c.port, len(out.Frames))
	}
	cookie = p.pkt.TCP.Seq()
	var o wire.TCPOptions
	if err := wire.ParseOptions(p.pkt.TCP, &o); err != nil {
		t.Fatal(err)
	}
	feTS = o.TSVal
	out = p.send(wire.TCPFrame{SrcMAC: routerMAC, DstMAC: feMAC, Src: p.src, Dst: vipA, SrcPort: c.port, DstPort: webPort,
		Seq: c.isn + 1, Ack: cookie + 1, Flags: wire.TCPFlagACK | wire.TCPFlagPSH, Window: 502,
		Options: c.options(1, feTS), Payload: []byte(twRequest)}, now)
	var id FlowID
	for _, ev := range out.Events {
		if ev.Kind == EvRequest {
			id = ev.Flow
		}
	}
	if id == 0 {
		t.Fatalf("port %d: no request", c.port)
	}
	p.out.Reset()
	if err := p.fe.Dispatch(id, testBackend, now, &p.out); err != nil {
		t.Fatalf("port %d: Dispatch: %v", c.port, err)
	}
	if len(p.out.Frames) != 1 || wire.Parse(append([]byte(nil), p.out.Frames[0].Data...), &syn) != nil || syn.TCP.Flags() != wire.TCPFlagSYN {
		t.Fatalf("port %d: Dispatch sent %d frames, want the C2 SYN", c.port, len(p.out.Frames))
	}
	if syn.TCP.Seq() != c.isn {
		t.Fatalf("C2 SYN at %d, want the client's ISN %d", syn.TCP.Seq(), c.isn)
	}
	return syn, cookie, feTS
}

// twSpliceAndClose completes c's handoff on the port of syn, serves a
// 100-byte response, closes both ways (the back-end first, which leaves
// its TIME-WAIT on the tuple) and runs the timers until the port is free.
func twSpliceAndClose(t *testing.T, p *rawPeer, c twConn, syn wire.Packet, cookie wire.Seq, feTS uint32, now Time) Time {
	t.Helper()
	hport := syn.TCP.SrcPort()
	bISN := wire.Seq(0x7000_0000 + uint32(c.port))
	bIP := wire.IP4From(testBackend.IP)
	srv := func(flags uint8, seq, ack wire.Seq, ts uint32) *Output {
		so := wire.SynOptions{TS: c.ts != 0, TSVal: ts}
		if flags&wire.TCPFlagSYN != 0 {
			so.MSS = 1460
		}
		so.TSEcr = c.ts
		var ob [40]byte
		return p.send(wire.TCPFrame{SrcMAC: testBackend.MAC, DstMAC: feMAC, Src: bIP, Dst: handoffIP,
			SrcPort: testBackend.Port, DstPort: hport, Seq: seq, Ack: ack, Flags: flags, Window: 1000,
			Options: ob[:so.Encode(ob[:])]}, now)
	}
	srv(wire.TCPFlagSYN|wire.TCPFlagACK, bISN, c.isn+1, 777)
	flow := p.fe.byC2[c2Key{bIP, testBackend.Port, hport}]
	if flow == nil || !flow.c2Up {
		t.Fatalf("port %d: C2 not established by its SYN-ACK", hport)
	}
	p.out.Reset()
	if err := p.fe.SpliceAcked(flow.id, now, &p.out); err != nil {
		t.Fatal(err)
	}
	end := c.isn + 1 + wire.Seq(len(twRequest))
	srv(wire.TCPFlagACK, bISN+1, end, 778)
	srv(wire.TCPFlagACK|wire.TCPFlagFIN, bISN+101, end, 779)
	p.send(wire.TCPFrame{SrcMAC: routerMAC, DstMAC: feMAC, Src: p.src, Dst: vipA, SrcPort: c.port, DstPort: webPort,
		Seq: end, Ack: cookie + 1 + 101 + 1, Flags: wire.TCPFlagACK | wire.TCPFlagFIN, Window: 502,
		Options: c.options(2, feTS)}, now)
	now += Time(10 * time.Second) // past the linger
	quietTicks(p.fe, now)
	if p.fe.byC2[c2Key{bIP, testBackend.Port, hport}] != nil {
		t.Fatalf("port %d still held after the close and the linger", hport)
	}
	return now
}

// twPorts is a front-end with two handoff ports, so they come round at
// once, and one client address; its back-end has refused a SYN from a
// TIME-WAIT already, so records are kept
// (TestHandoffPortRecordsStartWithTheFirstTimeWait).
func twPorts(t *testing.T) (*feHarness, *rawPeer) {
	h := newFE(t, func(c *FrontEndConfig) {
		c.HandoffPortFirst, c.HandoffPortLast = 20000, 20001
		c.MaxPortsPerSource = -1
		c.SpliceAtSYN = false
	})
	h.fe.timeWaitRefused(&flow{bIP: wire.IP4From(testBackend.IP), backend: testBackend}, t0)
	return h, newRawPeer(t, h.fe, clientIP)
}

// Records cost memory only where they help: a back-end whose ports come
// back after its TIME-WAIT has none, and the first SYN it answers from
// a TIME-WAIT (the old connection's ACK, which the front-end resets)
// starts them.
func TestHandoffPortRecordsStartWithTheFirstTimeWait(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.SpliceAtSYN = false })
	p := newRawPeer(t, h.fe, clientIP)
	a := twConn{port: 41000, isn: 0x1000_0000, ts: 5_000_000}
	syn, cookie, feTS := twHandoff(t, p, a, t0)
	twSpliceAndClose(t, p, a, syn, cookie, feTS, t0)
	dest := c2Dest{wire.IP4From(testBackend.IP), testBackend.Port}
	if l := h.fe.ledgers[dest]; l != nil && (l.active || len(l.chunks) != 0) {
		t.Fatal("records kept before any TIME-WAIT refused a SYN")
	}
	c := twConn{port: 41001, isn: 0x2000_0000, ts: 6_000_000}
	synC, _, _ := twHandoff(t, p, c, t0+s1)
	old := newServer(0x12345, wire.SynOptions{})
	old.peerPort = synC.TCP.SrcPort()
	h.input(old.frame(wire.TCPFlagACK, 0x12345, 0x99999999, nil, nil), t0+s1)
	if l := h.fe.ledgers[dest]; h.fe.Stats().HandoffTimeWaitResets != 1 || l == nil || !l.active {
		t.Fatalf("after the back-end answered from a TIME-WAIT: %d resets, ledger %+v", h.fe.Stats().HandoffTimeWaitResets, l)
	}
}

// Records also start, before any SYN is refused, when handoffs to a
// back-end come fast enough to walk the shard's ports within the
// TIME-WAIT: with 64 ports, 8 taken in less than 61 s x 8/64 (7.6 s);
// 8 taken more slowly start nothing.
func TestHandoffPortRecordsStartAtARateThatMeetsTheTimeWait(t *testing.T) {
	for _, c := range []struct {
		gap    Time
		active bool
	}{{ms, true}, {2 * Time(time.Second), false}} {
		h := newFE(t, func(cfg *FrontEndConfig) {
			cfg.HandoffPortFirst, cfg.HandoffPortLast = 20000, 20063
			cfg.MaxPortsPerSource = -1
			cfg.SpliceAtSYN = false
		})
		p := newRawPeer(t, h.fe, clientIP)
		now := t0
		for i := range 9 {
			twHandoff(t, p, twConn{port: 41000 + uint16(i), isn: wire.Seq(0x1000_0000 * (i + 1)), ts: 1000}, now)
			now += c.gap
		}
		l := h.fe.ledgers[c2Dest{wire.IP4From(testBackend.IP), testBackend.Port}]
		if l == nil || l.active != c.active {
			t.Errorf("9 handoffs %v apart over 64 ports: records kept %v, want %v", time.Duration(c.gap), l != nil && l.active, c.active)
		}
	}
}

// A client's SYN goes on C2 unchanged, so whether a back-end still in
// TIME-WAIT on a handoff port takes it depends on the client's random
// TSval: the front-end passes over a port that would refuse it (Linux:
// a TSval not newer than the old connection's last) for one that takes
// it, and when none does, sends it where it would have and counts it.
func TestHandoffPortPassedOverWhenTheBackendsTimeWaitRefusesTheSYN(t *testing.T) {
	h, p := twPorts(t)
	now := t0
	a := twConn{port: 41000, isn: 0x1000_0000, ts: 5_000_000}
	syn, cookie, feTS := twHandoff(t, p, a, now)
	portA := syn.TCP.SrcPort()
	b := twConn{port: 41001, isn: 0x2000_0000, ts: 1_000_000}
	synB, cookieB, feTSB := twHandoff(t, p, b, now)
	portB := synB.TCP.SrcPort()
	if portA == portB {
		t.Fatalf("two connections on port %d", portA)
	}
	now = twSpliceAndClose(t, p, a, syn, cookie, feTS, now)
	now = twSpliceAndClose(t, p, b, synB, cookieB, feTSB, now)

	// Next in turn is A's port, whose back-end last saw TSval 5,000,002:
	// a SYN with 3,000,000 would be refused there, and B's takes it.
	c := twConn{port: 41002, isn: 0x3000_0000, ts: 3_000_000}
	synC, _, _ := twHandoff(t, p, c, now)
	if got := synC.TCP.SrcPort(); got != portB {
		t.Errorf("SYN with TSval 3,000,000 on port %d, want %d (port %d's TIME-WAIT holds TSval 5,000,002)", got, portB, portA)
	}
	if st := h.fe.Stats(); st.HandoffPortsInTimeWait != 0 {
		t.Errorf("HandoffPortsInTimeWait %d, want 0", st.HandoffPortsInTimeWait)
	}
	// Only A's port is free, and it refuses an older TSval too: the SYN
	// goes there all the same, counted.
	d := twConn{port: 41003, isn: 0x4000_0000, ts: 2_000_000}
	synD, _, _ := twHandoff(t, p, d, now)
	if got := synD.TCP.SrcPort(); got != portA {
		t.Errorf("SYN on port %d, want %d, the only one free", got, portA)
	}
	if st := h.fe.Stats(); st.HandoffPortsInTimeWait != 1 {
		t.Errorf("HandoffPortsInTimeWait %d, want 1", st.HandoffPortsInTimeWait)
	}
	h.checkTables()
}

// Without timestamps on either connection the kernel takes a SYN whose
// sequence number is after the old connection's last (past its FIN).
func TestHandoffPortChosenBySequenceWithoutTimestamps(t *testing.T) {
	h, p := twPorts(t)
	now := t0
	a := twConn{port: 41000, isn: 0x8000_0000}
	syn, cookie, feTS := twHandoff(t, p, a, now)
	portA := syn.TCP.SrcPort()
	b := twConn{port: 41001, isn: 0x1000_0000}
	synB, cookieB, feTSB := twHandoff(t, p, b, now)
	now = twSpliceAndClose(t, p, a, syn, cookie, feTS, now)
	now = twSpliceAndClose(t, p, b, synB, cookieB, feTSB, now)

	// A's port's old connection ended past 0x8000_0000 + the request and
	// FIN; an ISN just past that is not after it, B's end is.
	endA := a.isn + 1 + wire.Seq(len(twRequest)) + 1
	c := twConn{port: 41002, isn: endA - 1}
	synC, _, _ := twHandoff(t, p, c, now)
	if got := synC.TCP.SrcPort(); got != synB.TCP.SrcPort() {
		t.Errorf("SYN at %#x on port %d, want %d (port %d's TIME-WAIT ends at %#x)", c.isn, got, synB.TCP.SrcPort(), portA, endA)
	}
	d := twConn{port: 41003, isn: endA + 1}
	synD, _, _ := twHandoff(t, p, d, now)
	if got := synD.TCP.SrcPort(); got != portA {
		t.Errorf("SYN at %#x on port %d, want %d", d.isn, got, portA)
	}
	if st := h.fe.Stats(); st.HandoffPortsInTimeWait != 0 {
		t.Errorf("HandoffPortsInTimeWait %d, want 0", st.HandoffPortsInTimeWait)
	}
}

// A record speaks for the back-end only as long as its TIME-WAIT can
// last: a minute and a second after the release any SYN takes the port.
func TestHandoffPortRecordExpiresWithTheTimeWait(t *testing.T) {
	h, p := twPorts(t)
	now := t0
	a := twConn{port: 41000, isn: 0x1000_0000, ts: 5_000_000}
	syn, cookie, feTS := twHandoff(t, p, a, now)
	b := twConn{port: 41001, isn: 0x2000_0000, ts: 6_000_000}
	synB, cookieB, feTSB := twHandoff(t, p, b, now)
	now = twSpliceAndClose(t, p, a, syn, cookie, feTS, now)
	now = twSpliceAndClose(t, p, b, synB, cookieB, feTSB, now)
	old := twConn{port: 41002, isn: 0x3000_0000, ts: 1_000}
	r := h.fe.ledgers[c2Dest{wire.IP4From(testBackend.IP), testBackend.Port}].record(int(syn.TCP.SrcPort() - 20000))
	f := &flow{syn: synInfo{ts: true, clientISN: old.isn}, tsRecent: old.ts}
	if r.takesSYN(f, now) {
		t.Fatal("the record takes an older TSval within the TIME-WAIT")
	}
	if !r.takesSYN(f, now+Time(timeWaitSpan)) {
		t.Fatal("the record still refuses a SYN after the TIME-WAIT")
	}
	now += Time(timeWaitSpan)
	synOld, _, _ := twHandoff(t, p, old, now)
	if got := synOld.TCP.SrcPort(); got != syn.TCP.SrcPort() {
		t.Errorf("SYN on port %d after the TIME-WAIT, want %d, next in turn", got, syn.TCP.SrcPort())
	}
	if st := h.fe.Stats(); st.HandoffPortsInTimeWait != 0 {
		t.Errorf("HandoffPortsInTimeWait %d, want 0", st.HandoffPortsInTimeWait)
	}
}

// The TSval kept is the highest the client sent, serial arithmetic: a
// late segment with an older one does not lower it.
func TestNoteClientTSKeepsTheHighest(t *testing.T) {
	f := &flow{tsRecent: 0xffff_fff0, tsMax: 0xffff_fff0}
	for _, v := range []uint32{0xffff_fff8, 5, 0xffff_fffa, 3} {
		f.noteClientTS(v)
	}
	if f.tsMax != 5 || f.tsRecent != 3 {
		t.Errorf("tsMax %d tsRecent %d, want 5 and 3", f.tsMax, f.tsRecent)
	}
}
