package splice

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/qsplice/qsplice/splice/link"
	"github.com/qsplice/qsplice/splice/wire"
)

// fastPathConn is a spliced connection whose request the server has
// received and acknowledged, ready for a response of bodyLen bytes.
func fastPathConn(t *testing.T, cfg ShimConfig) (*shimConn, Time) {
	t.Helper()
	sc := newShimConn(t, cfg, 0x1000, 0x2000, nil)
	now := t0 + 100*ms
	// The request fills the Splice's RequestEnd exactly.
	req := []byte("GET /data/3000 HTTP/1.1\r\nHost: h\r\nX-Pad: ")
	req = append(req, bytes.Repeat([]byte{'p'}, int(wire.Seq(sc.sp.RequestEnd)-sc.cliSeq)-len(req)-4)...)
	req = append(req, "\r\n\r\n"...)
	sc.h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK|wire.TCPFlagPSH, sc.srv.nxt, req), now)
	sc.srv.rcvNxt = sc.cliSeq // the kernel acknowledges it
	return sc, now
}

func takeFastPaths(h *shimHarness) []FastPathUpdate {
	var out Output
	h.sh.TakeFastPaths(&out)
	return out.FastPaths
}

// TestShimHandsTheMiddleOfAResponseToTheKernel: once the request is
// acknowledged and the response's head gave its length, the first reply
// makes a Put that names the connection, its rewrite and the response's
// end; the replies the kernel then sends never reach the engine, yet the
// client's ACKs of them are taken as the kernel would take them, the
// reply that completes the response reports every byte, and the entry's
// end takes the Put back.
func TestShimHandsTheMiddleOfAResponseToTheKernel(t *testing.T) {
	sc, now := fastPathConn(t, ShimConfig{KernelFastPath: true, IdleTimeout: time.Minute})
	h, srv := sc.h, sc.srv
	head := []byte("HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n")
	start := srv.nxt
	h.input(PortHost, srv.reply(append(head, make([]byte, 1000)...)), now)
	ups := takeFastPaths(h)
	if len(ups) != 1 || ups[0].Delete {
		t.Fatalf("after the first reply: %+v, want one Put", ups)
	}
	want := wire.FastPathEntry{
		VIP: vipA.Addr().As4(), Client: clientIP.Addr().As4(), VPort: webPort, CPort: testRequestPort,
		ClientMAC: routerMAC, SeqDelta: sc.sp.SeqDelta, TSOffset: sc.sp.TSOffset,
		TS: true, Scaled: true, WindowShift: 9 - 7,
		AllowFrom: srv.nxt, RespEnd: start + wire.Seq(len(head)+3000),
	}
	if ups[0].Entry != want {
		t.Errorf("Put %+v\nwant %+v", ups[0].Entry, want)
	}
	if k := wire.MakeFastPathKey(backendIP, handoffIP, webPort, shimHandoffPort); ups[0].Key != k {
		t.Errorf("key %x, want %x", ups[0].Key, k)
	}

	// The kernel sends the next 1000 bytes itself; the client
	// acknowledges them.
	srv.reply(make([]byte, 1000))
	before := h.sh.Stats().WireOutOfWindow
	now += ms
	h.input(PortWire, sc.fromFrontEnd(wire.TCPFlagACK, srv.nxt, nil), now)
	if h.sh.Stats().WireOutOfWindow != before {
		t.Errorf("the client's ACK of what the kernel sent was taken as out of window")
	}

	now += ms
	ev := onlyEvent(t, h.input(PortHost, srv.reply(make([]byte, 1000)), now), EvResponseDone)
	if ev.Bytes != uint64(len(head)+3000) {
		t.Errorf("response reported %d bytes, want %d", ev.Bytes, len(head)+3000)
	}
	if st := h.sh.Stats(); st.FastPathBytes != 1000 || st.FastPathOffers != 1 {
		t.Errorf("FastPathBytes %d, FastPathOffers %d; want 1000, 1", st.FastPathBytes, st.FastPathOffers)
	}
	if ups := takeFastPaths(h); len(ups) != 0 {
		t.Errorf("the response's last reply made %+v", ups)
	}
	// The entry idles out: the kernel's entry goes with it.
	h.tick(now + Time(2*time.Minute))
	if ups := takeFastPaths(h); len(ups) != 1 || !ups[0].Delete || ups[0].Key != wire.MakeFastPathKey(backendIP, handoffIP, webPort, shimHandoffPort) {
		t.Errorf("after the entry expired: %+v, want its Delete", ups)
	}
}

// TestShimKeepsRepliesItMustSee: no Put without the configuration, before
// the server acknowledged the request (the front-end needs copies), for a
// response of unknown length, or for a response that fits its first reply.
func TestShimKeepsRepliesItMustSee(t *testing.T) {
	cases := []struct {
		name   string
		cfg    ShimConfig
		ackReq bool
		head   string
		first  int
	}{
		{"off", ShimConfig{}, true, "HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n", 1000},
		{"request not acknowledged", ShimConfig{KernelFastPath: true}, false, "HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n", 1000},
		{"chunked", ShimConfig{KernelFastPath: true}, true, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 1000},
		{"whole in one reply", ShimConfig{KernelFastPath: true}, true, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", 1000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc, now := fastPathConn(t, c.cfg)
			if !c.ackReq {
				sc.srv.rcvNxt = sc.cliSeq - 1
			}
			sc.h.input(PortHost, sc.srv.reply(append([]byte(c.head), make([]byte, c.first)...)), now)
			if ups := takeFastPaths(sc.h); len(ups) != 0 {
				t.Errorf("made %+v", ups)
			}
		})
	}
}

// TestShimTakesTheFastPathBackForARewrite: a request rewrite makes the
// replies' ACK numbers the shim's to translate, so the Put is taken back.
func TestShimTakesTheFastPathBackForARewrite(t *testing.T) {
	sc, now := fastPathConn(t, ShimConfig{KernelFastPath: true})
	sc.h.input(PortHost, sc.srv.reply(append([]byte("HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n"), make([]byte, 1000)...)), now)
	if ups := takeFastPaths(sc.h); len(ups) != 1 {
		t.Fatalf("%+v, want a Put", ups)
	}
	ent := sc.h.sh.entries[fourTuple{srcIP: backendIP, dstIP: handoffIP, srcPort: webPort, dstPort: shimHandoffPort}]
	if ent == nil {
		t.Fatal("no entry")
	}
	sc.h.sh.noteRewrite(ent, rewriteRec{on: true, startB: ent.reqNxt, endB: ent.reqNxt + 10})
	if ups := takeFastPaths(sc.h); len(ups) != 1 || !ups[0].Delete {
		t.Errorf("after a rewrite: %+v, want a Delete", ups)
	}
}

// TestReplyFastPathTranslatesAsTheShimDoes runs the kernel's program
// (BPF_PROG_TEST_RUN) on the replies of a spliced connection, with the
// entries this engine puts, and compares each frame it takes with what
// translateReply makes of the same frame, byte for byte, checksums
// included (the test run's frames carry complete checksums). It also
// checks what it must leave to the TAP: a reply while an earlier one
// still waits there, the reply that completes the response, FIN, a
// timestamp option not where Linux puts it, and frames of connections
// it has no entry for.
func TestReplyFastPathTranslatesAsTheShimDoes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_BPF) to load the program; run the tests as root")
	}
	fp, err := link.NewReplyFastPath(1, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	const (
		tcOK       = 0
		tcRedirect = 7
	)
	run := func(f []byte) (uint32, []byte) {
		t.Helper()
		out := make([]byte, len(f)+256)
		ret, err := fp.Program().Run(&ebpf.RunOptions{Data: f, DataOut: out})
		if err != nil {
			t.Fatal(err)
		}
		return ret, out[:len(f)]
	}
	apply := func(h *shimHarness) {
		t.Helper()
		for _, u := range takeFastPaths(h) {
			var err error
			if u.Delete {
				err = fp.Delete(u.Key)
			} else {
				err = fp.Put(u.Key, u.Entry)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// engine translates f as the shim would and returns the client's frame.
	engine := func(sc *shimConn, f []byte, now Time) []byte {
		t.Helper()
		toClient, _ := framesOn(t, sc.h.input(PortHost, f, now))
		if len(toClient) != 1 {
			t.Fatalf("the engine sent %d frames to the client", len(toClient))
		}
		return toClient[0]
	}

	sc, now := fastPathConn(t, ShimConfig{KernelFastPath: true})
	srv := sc.srv
	head := []byte("HTTP/1.1 200 OK\r\nContent-Length: 8000\r\n\r\n")
	body := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

	// The first two replies leave before any Put: the program leaves
	// both to the TAP (no entry), and the engine handles the first.
	r1 := srv.reply(append(head, body(1000, 'a')...))
	r2 := srv.reply(body(1000, 'b'))
	for i, f := range [][]byte{r1, r2} {
		if ret, out := run(f); ret != tcOK || !bytes.Equal(out, f) {
			t.Fatalf("reply %d without an entry: %d, changed %v", i+1, ret, !bytes.Equal(out, f))
		}
	}
	engine(sc, r1, now)
	apply(sc.h) // AllowFrom: the end of r1; r2 still waits in the TAP

	r3 := srv.reply(body(1000, 'c'))
	if ret, _ := run(r3); ret != tcOK {
		t.Fatalf("the program took a reply while an earlier one waited in the TAP: %d", ret)
	}
	engine(sc, r2, now)
	engine(sc, r3, now)
	apply(sc.h) // AllowFrom: the end of r3

	for i := range 3 {
		r := srv.reply(body(1000, byte('d'+i)))
		ret, got := run(r)
		if ret != tcRedirect {
			t.Fatalf("reply %d in the middle: %d, want the redirect", 4+i, ret)
		}
		// The engine's translation of the same reply (which also moves
		// its own state on, as a reply it never saw would not: fine for
		// the comparison).
		if want := engine(sc, r, now); !bytes.Equal(got, want) {
			t.Errorf("reply %d: the kernel made\n% x\nthe shim makes\n% x", 4+i, got, want)
		}
		apply(sc.h)
	}

	// A timestamp option behind a SACK block: left to the shim.
	odd := srv.frame(wire.TCPFlagACK, srv.nxt, srv.rcvNxt,
		append(segOpts(nil, wire.SACKBlock{Left: 1, Right: 2}), segOpts(&[2]uint32{srv.tsVal, srv.peerTS})...), body(500, 'x'))
	if ret, _ := run(odd); ret != tcOK {
		t.Errorf("a reply with its timestamp after a SACK block: %d, want it left to the TAP", ret)
	}
	// FIN: left to the shim.
	fin := srv.seg(wire.TCPFlagACK|wire.TCPFlagFIN, srv.nxt, srv.rcvNxt, body(100, 'y'))
	if ret, _ := run(fin); ret != tcOK {
		t.Errorf("a FIN: %d, want it left to the TAP", ret)
	}
	// The reply that completes the response: left to the shim, which
	// reports it.
	last := srv.reply(body(2000, 'z'))
	if ret, out := run(last); ret != tcOK || !bytes.Equal(out, last) {
		t.Errorf("the response's last reply: %d, want it left to the TAP unchanged", ret)
	}
	ev := onlyEvent(t, sc.h.input(PortHost, last, now), EvResponseDone)
	if ev.Bytes != uint64(len(head)+8000) {
		t.Errorf("reported %d bytes, want %d", ev.Bytes, len(head)+8000)
	}
	// Counted by the program: the three replies it took.
	st, err := fp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Frames != 3 || st.Bytes != 3000 || st.Failed != 0 {
		t.Errorf("program stats %+v, want 3 frames, 3000 bytes", st)
	}
}
