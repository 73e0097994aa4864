package splice

import (
	"reflect"
	"testing"
	"time"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// The shim keeps removed entries for the next Splices (issue 7: an entry
// per request was the back-end's last allocation per request). A reused
// entry must start as a new one would.

// turnover is a connection to splice and reset, its frames built ahead.
type turnover struct {
	sp          proto.Splice
	synAck, rst []byte
}

func newTurnover(sp proto.Splice) turnover {
	return turnover{sp: sp, synAck: kernelSynAck(&sp, 0x500, wire.Seq(sp.RequestEnd)-1),
		rst: c2FromHost(&sp, wire.TCPFlagRST|wire.TCPFlagACK, 0x501, wire.Seq(sp.RequestEnd), nil)}
}

// run installs c's Splice on h's shim (after its kernel SYN-ACK) and
// resets the connection from the host, which starts its linger.
func (c *turnover) run(tb testing.TB, h *shimHarness, frame []byte, now Time) {
	feed := func(f []byte) {
		n := copy(frame, f)
		h.out.Reset()
		h.sh.Input(PortHost, frame[:n], now, &h.out)
	}
	feed(c.synAck)
	if err := h.sh.AddSplice(&c.sp, now); err != nil {
		tb.Fatal(err)
	}
	feed(c.rst)
}

func TestShimReusedEntryStartsAfresh(t *testing.T) {
	cfg := ShimConfig{Linger: 10 * time.Millisecond}
	used, fresh := newShim(t, cfg), newShim(t, cfg)
	frame := make([]byte, 2048)

	old := guardSplice(1, 30001, 0x100)
	old.Flags |= proto.SpliceWindowScale
	old.WScaleBackend, old.WScaleFrontend = 7, 2
	c := newTurnover(old)
	c.run(t, used, frame, t0)
	used.tick(t0 + s1)
	if used.sh.Entries() != 0 || len(used.sh.spareEntries) != 1 {
		t.Fatalf("%d entries, %d spare after the linger; want 0 and 1", used.sh.Entries(), len(used.sh.spareEntries))
	}
	spare := used.sh.spareEntries[0]

	// The same new connection on both shims: the one with a spare entry
	// must end up with the same entry as the one without.
	sp := guardSplice(2, 30002, 0x200)
	for _, h := range []*shimHarness{used, fresh} {
		h.input(PortHost, kernelSynAck(&sp, 0x900, 0x200), t0+2*s1)
		if err := h.sh.AddSplice(&sp, t0+2*s1); err != nil {
			t.Fatal(err)
		}
	}
	got, want := used.sh.byReq[2], fresh.sh.byReq[2]
	if got != spare || len(used.sh.spareEntries) != 0 {
		t.Fatal("the spare entry was not reused")
	}
	if !reflect.DeepEqual(*got, *want) {
		t.Fatalf("reused entry\n%+v\nwant\n%+v", *got, *want)
	}
}

func TestShimSpliceTurnoverAllocatesNothing(t *testing.T) {
	const n = 512
	h := newShim(t, ShimConfig{Linger: 10 * time.Millisecond, MaxHandshakes: 64})
	cs := make([]turnover, n)
	for i := range cs {
		cs[i] = newTurnover(guardSplice(uint64(100+i), uint16(30000+i), wire.Seq(0x1000*i)))
	}
	frame := make([]byte, 2048)
	now, i := t0, 0
	turn := func() {
		now += 100 * ms
		cs[i%n].run(t, h, frame, now)
		i++
		h.out.Reset()
		h.sh.Tick(now+50*ms, &h.out)
	}
	for range n { // maps and heaps reach their working size
		turn()
	}
	before := h.sh.Stats()
	allocs := testing.AllocsPerRun(200, turn)
	after := h.sh.Stats()
	if after.Splices-before.Splices != 201 || after.Expired-before.Expired != 201 || h.sh.Entries() != 0 {
		t.Fatalf("stats %+v -> %+v, %d entries: want 201 splices installed and expired", before, after, h.sh.Entries())
	}
	if allocs != 0 {
		t.Errorf("a Splice installed and expired: %v allocations", allocs)
	}
}

// TestNewSYNOnALingeringTupleReachesTheFrontEndsAnswer: the front-end's
// handoff ports come round again within the shim's linger under load. A
// new SYN on the tuple of a connection that ended makes the shim forget
// the lingering entry, so the kernel's answer to that SYN (here a
// challenge ACK, the old connection being in TIME_WAIT) goes to the
// front-end untouched, not translated to the old client; on a live
// connection a SYN changes nothing (RFC 5961).
func TestNewSYNOnALingeringTupleReachesTheFrontEndsAnswer(t *testing.T) {
	for _, ended := range []bool{true, false} {
		h := newShim(t, ShimConfig{Linger: 5 * time.Second})
		sp := guardSplice(1, 30003, 0x100)
		c := newTurnover(sp)
		h.input(PortHost, c.synAck, t0)
		if err := h.sh.AddSplice(&sp, t0); err != nil {
			t.Fatal(err)
		}
		if ended {
			h.input(PortHost, c.rst, t0+ms) // the kernel's RST: the entry lingers
		}
		syn := c2FromWire(&sp, wire.TCPFlagSYN, 0x7000, 0, nil)
		passedToHost(t, h.input(PortWire, syn, t0+2*ms), syn, "the new SYN")
		challenge := c2FromHost(&sp, wire.TCPFlagACK, 0x501, wire.Seq(sp.RequestEnd), nil)
		fs := copyFrames(h.input(PortHost, challenge, t0+2*ms))
		untouched := len(fs) == 1 && string(fs[0]) == string(challenge)
		if untouched != ended || (h.sh.Entries() == 0) != ended || (h.sh.Stats().EntriesSuperseded == 1) != ended {
			t.Errorf("connection ended %v: answer passed untouched %v, %d entries, %d superseded",
				ended, untouched, h.sh.Entries(), h.sh.Stats().EntriesSuperseded)
		}
		h.checkCounters()
	}
}

// TestSynAckOnALingeringTupleSupersedesIt: with the SYN fast path the
// kernel takes a new SYN from the wire, and its SYN-ACK may reach the
// shim before the shim reads its copy of the SYN. A SYN-ACK on the tuple
// of a connection that ended makes the shim forget the lingering entry
// then, so the new connection's first reply is not translated towards
// the old client (it waits for its own Splice); on a live connection a
// SYN-ACK (sent again) changes nothing.
func TestSynAckOnALingeringTupleSupersedesIt(t *testing.T) {
	for _, ended := range []bool{true, false} {
		h := newShim(t, ShimConfig{Linger: 5 * time.Second, KernelSYNs: true})
		sp := guardSplice(1, 30004, 0x100)
		c := newTurnover(sp)
		h.input(PortHost, c.synAck, t0)
		if err := h.sh.AddSplice(&sp, t0); err != nil {
			t.Fatal(err)
		}
		if ended {
			h.input(PortHost, c.rst, t0+ms) // the kernel's RST: the entry lingers
		}
		// The new connection's SYN-ACK, and its server's reply, before
		// the shim read the SYN.
		synAck := c2FromHost(&sp, wire.TCPFlagSYN|wire.TCPFlagACK, 0x9000, 0x7001+wire.Seq(len(shortRequest)), nil)
		h.input(PortHost, synAck, t0+2*ms)
		reply := c2FromHost(&sp, wire.TCPFlagACK|wire.TCPFlagPSH, 0x9001, 0x7001+wire.Seq(len(shortRequest)), []byte("HTTP/1.1 200 OK\r\n\r\n"))
		toOldClient := 0
		for _, f := range copyFrames(h.input(PortHost, reply, t0+2*ms)) {
			if s := decodeTCP(t, f); s.ip.DstIP.Equal(sp.ClientIP.AsSlice()) {
				toOldClient++
			}
		}
		if ended && (toOldClient != 0 || h.sh.Entries() != 0 || h.sh.Stats().EntriesSuperseded != 1) {
			t.Errorf("connection ended: the new reply went to the old client %d times, %d entries, %d superseded",
				toOldClient, h.sh.Entries(), h.sh.Stats().EntriesSuperseded)
		}
		if !ended && (h.sh.Entries() != 1 || h.sh.Stats().EntriesSuperseded != 0) {
			t.Errorf("live connection: %d entries, %d superseded after a SYN-ACK", h.sh.Entries(), h.sh.Stats().EntriesSuperseded)
		}
		h.checkCounters()
	}
}

// TestKernelsAnswerToAnUnseenSYNReachesTheFrontEnd: with the SYN fast
// path the kernel takes a new SYN from the wire, and when the tuple's
// last connection is in its TIME-WAIT it answers with that connection's
// ACK, which may reach the shim before the shim reads the SYN's copy.
// After both FINs the kernel answers only what it receives, and all but
// such a SYN crosses the shim first: an ACK beyond the segments that
// came since is the front-end's, passed untouched, the entry forgotten.
// An ACK for the client's FIN sent again stays the old client's.
func TestKernelsAnswerToAnUnseenSYNReachesTheFrontEnd(t *testing.T) {
	for _, finAgain := range []bool{false, true} {
		h, sp, reqEnd, finSeq, last := closingConn(t, ShimConfig{Linger: 5 * time.Second, KernelSYNs: true})
		h.input(PortHost, last, t0+ms)
		clientFIN := c2FromWire(&sp, wire.TCPFlagACK|wire.TCPFlagFIN, reqEnd, finSeq+1, nil)
		h.input(PortWire, clientFIN, t0+2*ms)
		lastAck := c2FromHost(&sp, wire.TCPFlagACK, finSeq+1, reqEnd+1, nil)
		toClient := func(out *Output) bool {
			fs := copyFrames(out)
			return len(fs) == 1 && decodeTCP(t, fs[0]).ip.DstIP.Equal(sp.ClientIP.AsSlice())
		}
		if !toClient(h.input(PortHost, lastAck, t0+3*ms)) {
			t.Fatalf("the kernel's ACK of the client's FIN did not go to the client")
		}
		// The client's last ACK, once more, after the kernel's: no answer
		// from a TIME-WAIT.
		clientLastAck := c2FromWire(&sp, wire.TCPFlagACK, reqEnd+1, finSeq+1, nil)
		h.input(PortWire, clientLastAck, t0+3*ms)
		h.input(PortWire, clientLastAck, t0+3*ms)
		if finAgain {
			// The client did not get that ACK and sends its FIN again:
			// the kernel's answer from its TIME-WAIT is the client's.
			h.input(PortWire, clientFIN, t0+200*ms)
			if !toClient(h.input(PortHost, lastAck, t0+201*ms)) || h.sh.Entries() != 1 {
				t.Errorf("FIN again: the kernel's ACK did not go to the client (%d entries)", h.sh.Entries())
			}
			h.checkCounters()
			continue
		}
		// A new SYN with its request took the fast path; its answer
		// comes before the shim reads its copy.
		fs := copyFrames(h.input(PortHost, lastAck, t0+300*ms))
		untouched := len(fs) == 1 && string(fs[0]) == string(lastAck)
		if !untouched || h.sh.Entries() != 0 || h.sh.Stats().EntriesSuperseded != 1 {
			t.Errorf("answer to an unseen SYN: passed untouched %v, %d entries, %d superseded; want true, 0, 1",
				untouched, h.sh.Entries(), h.sh.Stats().EntriesSuperseded)
		}
		h.checkCounters()
	}
}

// TestKernelsAnswerToAClientFINThatBeatTheEchoReachesTheClient: with
// echoes the kernel sends its last reply and FIN itself, and the client
// may answer with its own FIN before the shim reads the echo. The
// kernel's ACK of that FIN then comes after both FINs; it is the
// client's answer, owed, not the answer to a SYN the shim never saw
// (which took it from the client, who sent its FIN again until it gave
// up: in the lab, one connection in ten under wrk's 1K close load).
func TestKernelsAnswerToAClientFINThatBeatTheEchoReachesTheClient(t *testing.T) {
	h, sp, reqEnd, finSeq, last := closingConn(t, ShimConfig{Linger: 5 * time.Second, KernelSYNs: true, KernelFastPath: true, KernelEcho: true})
	// The kernel sent it; the client answered it, FIN and all.
	h.input(PortWire, c2FromWire(&sp, wire.TCPFlagACK|wire.TCPFlagFIN, reqEnd, finSeq+1, nil), t0+2*ms)
	if toClient, _ := framesOn(t, h.input(PortHost, markEcho(last), t0+2*ms)); len(toClient) != 0 {
		t.Fatalf("the echo went to the client again (%d frames)", len(toClient))
	}
	lastAck := c2FromHost(&sp, wire.TCPFlagACK, finSeq+1, reqEnd+1, nil)
	toClient, toFE := framesOn(t, h.input(PortHost, lastAck, t0+3*ms))
	if len(toClient) != 1 || len(toFE) != 0 || h.sh.Entries() != 1 {
		t.Fatalf("the kernel's ACK of the client's FIN: %d frames to the client, %d to the front-end, %d entries; want 1, 0, 1",
			len(toClient), len(toFE), h.sh.Entries())
	}
	h.checkCounters()
}

// closingConn is a connection spliced on a shim made with cfg, about to
// close: the end of its request, and the kernel's only reply, an empty
// response with the FIN, whose sequence number is finSeq.
func closingConn(t *testing.T, cfg ShimConfig) (h *shimHarness, sp proto.Splice, reqEnd, finSeq wire.Seq, last []byte) {
	t.Helper()
	h = newShim(t, cfg)
	sp = guardSplice(1, 30005, 0x100)
	h.input(PortHost, newTurnover(sp).synAck, t0)
	if err := h.sh.AddSplice(&sp, t0); err != nil {
		t.Fatal(err)
	}
	reqEnd = wire.Seq(sp.RequestEnd)
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	finSeq = 0x501 + wire.Seq(len(resp))
	return h, sp, reqEnd, finSeq, c2FromHost(&sp, wire.TCPFlagACK|wire.TCPFlagPSH|wire.TCPFlagFIN, 0x501, reqEnd, resp)
}
