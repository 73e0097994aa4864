package splice

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice/wire"
)

// TestRequestInTheFrontEndsSYN runs handoffs of carried requests through
// a front-end with FastOpenInSYN and a shim, to a kernel that takes Fast
// Open, for each way the shim may meet them: with or without the kernel's
// SYN fast path (KernelSYNs), with the Splice before the SYN or only
// after the kernel's SYN-ACK (another worker's mail), and, with the fast
// path, with the shim's copy of the SYN read before the SYN-ACK, after it
// (both wait when the worker wakes), after a late Splice too, or even
// after the kernel's first reply. The first SYN asks
// for a cookie; once the SYN-ACK gave one, the front-end's SYNs carry it
// and the request, byte for byte the request its Splice carries. Such a
// SYN reaches the kernel as it came (written by the shim, or taken by the
// kernel from the wire and never written); the SYN-ACK that acknowledges
// the request completes the Splice with the SYN's ISN; the front-end, not
// the shim, sends the handshake's last ACK (the Splice may come late or
// be lost, and a Fast Open socket sends nothing again before its
// handshake completes); the shim does not send the request again; and
// the kernel's first reply reaches the client translated. A kernel
// that no longer takes the cookie (a SYN-ACK of the SYN alone, without a
// new cookie) gets the request after its SYN-ACK; the front-end's next
// SYN asks for a cookie again, and the shim, which forgot its own, lets
// it. With the Splice after the SYN-ACK, also when that Splice is a
// resend without the request (the first was lost) for the SYN that took
// it: nothing is sent twice and the reply is translated. In every case
// the shim learns that the SYN brought the request, and reports its
// response once.
func TestRequestInTheFrontEndsSYN(t *testing.T) {
	for _, kernelSYNs := range []bool{false, true} {
		for _, late := range []bool{false, true} {
			for _, copyAt := range []synCopyAt{synCopyFirst, synCopyAfterSynAck, synCopyAfterSplice, synCopyAfterReply} {
				if copyAt != synCopyFirst && !kernelSYNs {
					continue // the shim writes the SYN the kernel answers
				}
				if copyAt == synCopyAfterSplice && !late {
					continue // the Splice came first
				}
				for _, resent := range []bool{false, true} {
					if resent && !late {
						continue
					}
					t.Run(fmt.Sprintf("kernelSYNs=%v,spliceAfterSynAck=%v,synCopy=%v,resentWithoutRequest=%v", kernelSYNs, late, copyAt, resent), func(t *testing.T) {
						requestInTheFrontEndsSYN(t, kernelSYNs, late, copyAt, resent)
					})
				}
			}
		}
	}
}

// synCopyAt is when the shim reads its copy of a SYN the kernel took
// from the wire.
type synCopyAt int

const (
	synCopyFirst       synCopyAt = iota // before the kernel's SYN-ACK
	synCopyAfterSynAck                  // after it, before a late Splice
	synCopyAfterSplice                  // after the late Splice too
	synCopyAfterReply                   // after the kernel's reply passed too
)

func (c synCopyAt) String() string {
	return [...]string{"first", "afterSynAck", "afterSplice", "afterReply"}[c]
}

func requestInTheFrontEndsSYN(t *testing.T, kernelSYNs, late bool, synCopy synCopyAt, resent bool) {
	sh := newShim(t, ShimConfig{FastOpen: true, KernelSYNs: kernelSYNs})
	h := newFE(t, func(c *FrontEndConfig) { c.SpliceAtSYN, c.FastOpen, c.FastOpenInSYN = true, true, true })
	const (
		ask     = iota // the SYN asks for a cookie
		inSYN          // the SYN carries cookie and request; the kernel takes them
		refused        // it carries them; the kernel took Fast Open off
	)
	steps := []int{ask, inSYN, refused, ask}
	if kernelSYNs && late && synCopy != synCopyFirst {
		// A SYN-ACK that refuses the cookie before the shim read either
		// the SYN's copy or the Splice leaves the shim its own cookie:
		// the next SYN it fills with it is refused the same way, and it
		// forgets it then (TestShimSendsTheRequestAfterASynAckThatDidNotTakeIt).
		steps = steps[:3]
	}
	var done []Event // the shim's reports of responses
	count := func(o *Output) *Output {
		for _, e := range o.Events {
			if e.Kind == EvResponseDone {
				done = append(done, e)
			}
		}
		return o
	}
	for i, step := range steps {
		done = done[:0]
		now := t0 + Time(i)*10*ms
		isnC := wire.Seq(0x30000000 + i*0x1000000)
		c := newClient(40040+uint16(i), isnC, fullOffer(9))
		id, out := dispatchCarrying(t, h, c, now)
		synFrame := onlyFrame(t, out)
		syn := decodeTCP(t, synFrame)
		o, ok := syn.option(layers.TCPOptionKind(wire.OptFastOpen))
		switch {
		case !ok:
			t.Fatalf("handoff %d: the SYN of a carried request has no Fast Open option", i)
		case step == ask && (len(o.OptionData) != 0 || len(syn.payload()) != 0):
			t.Fatalf("handoff %d: the SYN carries cookie % x and %d bytes; want a cookie request", i, o.OptionData, len(syn.payload()))
		case step != ask && (!bytes.Equal(o.OptionData, testCookie) || !bytes.Equal(syn.payload(), []byte(shortRequest))):
			t.Fatalf("handoff %d: the SYN carries cookie % x and %q; want % x and the request", i, o.OptionData, syn.payload(), testCookie)
		}
		m := onlyEvent(t, out, EvSplice).Splice
		m.Request = append([]byte(nil), m.Request...)
		h.call(func(out *Output) {
			if err := h.fe.SpliceAcked(id, now, out); err != nil {
				t.Fatal(err)
			}
		})
		// The handoff address is known from the first Splice: the late
		// case starts with the second.
		spliceLate := late && i > 0
		if !spliceLate {
			if err := sh.sh.AddSplice(&m, now); !errors.Is(err, ErrSpliceAwaitsSynAck) {
				t.Fatalf("handoff %d: AddSplice: %v", i, err)
			}
		}
		// With the SYN fast path the kernel has the SYN from the wire;
		// the shim may read its copy only after the SYN-ACK.
		copyLate := synCopy != synCopyFirst && step != ask
		var toHost []byte
		if !copyLate {
			out = sh.input(PortWire, synFrame, now)
		}
		switch {
		case copyLate:
			toHost = synFrame
		case step != ask && kernelSYNs:
			if len(out.Frames) != 0 {
				t.Fatalf("handoff %d: the shim wrote %d frames for a SYN the kernel took from the wire", i, len(out.Frames))
			}
			toHost = synFrame
		default:
			if len(out.Frames) != 1 {
				t.Fatalf("handoff %d: %d frames to the host for the SYN", i, len(out.Frames))
			}
			toHost = onlyFrame(t, out)
			if step != ask && !bytes.Equal(toHost, synFrame) {
				t.Fatalf("handoff %d: the front-end's SYN with its request changed on its way to the host", i)
			}
		}
		k := &fastOpenKernel{newServer(0x0badf00d+wire.Seq(i), wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})}
		var synAck []byte
		if step == refused {
			sa := decodeTCP(t, k.srv.synAck(decodeTCP(t, toHost)))
			synAck = k.srv.frame(wire.TCPFlagSYN|wire.TCPFlagACK, k.srv.isn, isnC+1, sa.tcp.Contents[wire.TCPMinHeaderLen:], nil)
		} else {
			synAck = k.answer(t, toHost)
		}
		taken := step == inSYN
		reply := k.srv.seg(wire.TCPFlagACK|wire.TCPFlagPSH, k.srv.isn+1, isnC+1+wire.Seq(len(shortRequest)), []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
		crossed := copyFrames(count(sh.input(PortHost, synAck, now+ms)))
		// The copy itself makes no frame; what waited for the Splice
		// installed before it leaves ahead of it (releaseWaiting), as
		// the next Tick would have sent it.
		var released [][]byte
		readCopy := func() {
			waiting := sh.sh.fo.releaseReplies && sh.sh.fo.nReply > 0 || sh.sh.held.release && sh.sh.held.n > 0
			out := copyFrames(count(sh.input(PortWire, synFrame, now+ms)))
			if !waiting && len(out) != 0 {
				t.Fatalf("handoff %d: the shim wrote %d frames for the SYN's copy it read after the SYN-ACK", i, len(out))
			}
			released = append(released, out...)
		}
		if copyLate && synCopy == synCopyAfterSynAck {
			readCopy()
		}
		var afterSplice [][]byte
		replyHeld := false
		if spliceLate {
			if taken {
				// The server had the request with the SYN: its reply may
				// come before the Splice, and must wait for it.
				if out := count(sh.input(PortHost, reply, now+ms)); len(out.Frames) != 0 {
					t.Fatalf("handoff %d: a reply before its Splice went out (%d frames)", i, len(out.Frames))
				}
				replyHeld = true
			}
			if resent && step == inSYN {
				// The first Splice was lost; its resend carries no request.
				m.Flags &^= proto.SpliceRequest
				m.Request = nil
			}
			if err := sh.sh.AddSplice(&m, now+ms); err != nil {
				t.Fatalf("handoff %d: AddSplice after the SYN-ACK: %v", i, err)
			}
		}
		if copyLate && synCopy == synCopyAfterSplice {
			readCopy()
		}
		if len(crossed) != 1 {
			t.Fatalf("handoff %d: %d frames for the SYN-ACK at the shim", i, len(crossed))
		}
		// The handshake's last ACK: the front-end's when its own SYN
		// brought the request (the Splice may be late or lost, and its
		// resends carry no request), else the shim sends the request.
		feOut := copyFrames(h.input(crossed[0], now+ms))
		switch {
		case taken && len(feOut) != 1:
			t.Fatalf("handoff %d: the front-end answered the SYN-ACK that took its SYN's request with %d frames, want its last ACK", i, len(feOut))
		case taken:
			ack := expectTCP(t, feOut[0], seqIs(isnC+1+wire.Seq(len(shortRequest))), ackIs(k.srv.isn+1))
			if len(ack.payload()) != 0 || ack.tcp.SYN || !ack.tcp.ACK {
				t.Fatalf("handoff %d: the front-end's answer to the SYN-ACK is not a pure ACK", i)
			}
		case len(feOut) != 0:
			t.Fatalf("handoff %d: the front-end answered the SYN-ACK with %d frames", i, len(feOut))
		}
		var afterSynAck [][]byte
		for _, f := range append(released, copyFrames(count(sh.tick(now+ms)))...) {
			if s := decodeTCP(t, f); s.ip.DstIP.Equal(backendIP[:]) {
				afterSynAck = append(afterSynAck, f)
			} else {
				afterSplice = append(afterSplice, f)
			}
		}
		switch {
		case taken && len(afterSynAck) != 0:
			t.Fatalf("handoff %d: the shim sent %d segments to the host after a SYN-ACK that took the front-end's request", i, len(afterSynAck))
		case !taken && len(afterSynAck) != 1:
			t.Fatalf("handoff %d: %d segments to the host after the SYN-ACK, want the request", i, len(afterSynAck))
		case !taken:
			expectTCP(t, afterSynAck[0], seqIs(isnC+1), payloadIs([]byte(shortRequest)))
		}
		if !taken {
			h.input(k.srv.seg(wire.TCPFlagACK, k.srv.isn+1, isnC+1+wire.Seq(len(shortRequest)), nil), now+ms)
		}
		// The kernel's first reply reaches the client, translated.
		if !replyHeld {
			afterSplice = copyFrames(count(sh.input(PortHost, reply, now+2*ms)))
		}
		if copyLate && synCopy == synCopyAfterReply {
			readCopy()
		}
		toClient := 0
		for _, f := range afterSplice {
			if s := decodeTCP(t, f); s.ip.DstIP.Equal(c.ip[:]) && uint16(s.tcp.DstPort) == c.port && len(s.payload()) > 0 {
				toClient++
			}
		}
		if toClient != 1 {
			t.Fatalf("handoff %d: the kernel's first reply reached the client %d times", i, toClient)
		}
		// The response is reported once. When the SYN took the request,
		// its service runs from the SYN's copy, or from the SYN-ACK
		// when the shim read that copy only after it.
		start, replied := now, now+2*ms
		if copyLate {
			start = now + ms
		}
		if replyHeld {
			replied = now + ms // passed at the Tick after its Splice
		}
		switch {
		case len(done) != 1:
			t.Fatalf("handoff %d: the shim reported %d responses, want 1", i, len(done))
		case done[0].RequestID != m.RequestID:
			t.Fatalf("handoff %d: the response reported is request %d's, want %d's", i, done[0].RequestID, m.RequestID)
		case taken && done[0].ServiceTime != max(time.Duration(replied-start), 1):
			t.Fatalf("handoff %d: service time %v, want %v", i, done[0].ServiceTime, max(time.Duration(replied-start), 1))
		}
	}
	fe, st := h.fe.Stats(), sh.sh.Stats()
	if fe.RequestsSentInSYN != 2 || fe.RequestsInSYN != 1 {
		t.Errorf("front-end: %d requests sent in the SYN, %d taken; want 2, 1", fe.RequestsSentInSYN, fe.RequestsInSYN)
	}
	wantByKernel := uint64(0)
	if kernelSYNs {
		wantByKernel = 2
	}
	wantFromFE := uint64(1)
	if st.FastOpenFromFrontEnd != wantFromFE || st.SYNsByKernel != wantByKernel || st.FastOpenSent != 0 {
		t.Errorf("shim: %d taken from the front-end's SYN, %d SYNs by the kernel, %d SYNs it filled; want %d, %d, 0",
			st.FastOpenFromFrontEnd, st.SYNsByKernel, st.FastOpenSent, wantFromFE, wantByKernel)
	}
}

// TestTheSYNAfterAResetOfATimeWaitCarriesNoRequest: when the back-end
// answers C2's SYN from an old connection's TIME-WAIT, the front-end
// resets that connection and sends the SYN again. With the SYN fast path
// a SYN that carries the request reaches the kernel from the wire, the
// RST through the shim, so it would overtake the RST and meet the
// TIME-WAIT again, whose ACKs are rate-limited: no answer until the SYN's
// timer. So the SYN sent after the RST, and those after it, carry
// neither cookie nor request but ask for a cookie, for the shim to fill
// as it passes; the front-end then leaves the handshake's last ACK to the
// shim.
func TestTheSYNAfterAResetOfATimeWaitCarriesNoRequest(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.SpliceAtSYN, c.FastOpen, c.FastOpenInSYN = true, true, true })
	handoff := func(i int, now Time) (*testClient, FlowID, *seen) {
		c := newClient(40060+uint16(i), wire.Seq(0x30000000+i*0x1000000), fullOffer(9))
		id, out := dispatchCarrying(t, h, c, now)
		syn := decodeTCP(t, onlyFrame(t, out))
		h.call(func(out *Output) {
			if err := h.fe.SpliceAcked(id, now, out); err != nil {
				t.Fatal(err)
			}
		})
		return c, id, syn
	}
	bare := func(what string, s *seen) {
		t.Helper()
		o, ok := s.option(layers.TCPOptionKind(wire.OptFastOpen))
		if !s.tcp.SYN || !ok || len(o.OptionData) != 0 || len(s.payload()) != 0 {
			t.Fatalf("%s: SYN %v, Fast Open option %v with cookie % x, %d bytes; want a SYN asking for a cookie, no data",
				what, s.tcp.SYN, ok, o.OptionData, len(s.payload()))
		}
	}
	// The first handoff learns the cookie.
	_, _, syn := handoff(0, t0)
	k := &fastOpenKernel{newServer(0x1000, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})}
	h.input(k.answer(t, syn.raw), t0+ms)

	c, _, syn := handoff(1, t0+10*ms)
	if !bytes.Equal(syn.payload(), []byte(shortRequest)) {
		t.Fatalf("the second handoff's SYN carries %q, want the request", syn.payload())
	}
	old := newServer(0x12345, wire.SynOptions{})
	old.peerPort = uint16(syn.tcp.SrcPort)
	fs := copyFrames(h.input(old.frame(wire.TCPFlagACK, 0x12345, 0x99999999, nil, nil), t0+11*ms))
	if len(fs) != 2 {
		t.Fatalf("%d frames for the TIME-WAIT's ACK, want a RST and the SYN again", len(fs))
	}
	expectTCP(t, fs[0], flagsAre(wire.TCPFlagRST), seqIs(0x99999999))
	bare("the SYN after the RST", expectTCP(t, fs[1], flagsAre(wire.TCPFlagSYN), seqIs(c.isn)))
	// (The first handoff's request goes again at its own timer too.)
	var again []*seen
	for _, f := range copyFrames(h.tick(t0 + 11*ms + Time(h.cfg.HandoffTimeout))) {
		if s := decodeTCP(t, f); s.tcp.SrcPort == syn.tcp.SrcPort {
			again = append(again, s)
		}
	}
	if len(again) != 1 {
		t.Fatalf("%d frames on C2 at the SYN's timer, want the SYN", len(again))
	}
	bare("the SYN sent again at its timer", again[0])

	// The shim filled it with its own cookie and the request; the kernel
	// took both. The handshake's last ACK is the shim's.
	k2 := &fastOpenKernel{newServer(0x2000, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})}
	filled := syn.raw // cookie and request, as the shim sends it
	if out := h.input(k2.answer(t, filled), t0+12*ms+Time(h.cfg.HandoffTimeout)); len(out.Frames) != 0 {
		t.Errorf("the front-end answered the SYN-ACK of the SYN the shim filled with %d frames, want none", len(out.Frames))
	}
	if st := h.fe.Stats(); st.RequestsInSYN != 1 || st.HandoffTimeWaitResets != 1 {
		t.Errorf("%d requests taken in the SYN, %d TIME-WAIT resets; want 1, 1", st.RequestsInSYN, st.HandoffTimeWaitResets)
	}
}

// TestAFrontEndWithoutACookieGetsItsOwn: a front-end that has no cookie
// for a back-end (it just started; the shim there may hold one from the
// front-end before) asks for one in its SYN, and its Splice says it keeps
// it (proto.SpliceKeepsCookie): the shim passes that SYN as it came, not
// filled with its own cookie and the request, whose SYN-ACK would bring
// the front-end no cookie, and then none of its SYNs would ever carry a
// request. The kernel's SYN-ACK brings the cookie, the shim sends the
// request after it, and the front-end's next SYN carries cookie and
// request.
func TestAFrontEndWithoutACookieGetsItsOwn(t *testing.T) {
	sh := newShim(t, ShimConfig{FastOpen: true, KernelSYNs: true})
	sh.sh.fo.learn(handoffIP, testCookie) // from the front-end before
	h := newFE(t, func(c *FrontEndConfig) { c.SpliceAtSYN, c.FastOpen, c.FastOpenInSYN = true, true, true })
	for i := range 2 {
		now := t0 + Time(i)*10*ms
		isnC := wire.Seq(0x30000000 + i*0x1000000)
		_, out := dispatchCarrying(t, h, newClient(40080+uint16(i), isnC, fullOffer(9)), now)
		synFrame := onlyFrame(t, out)
		syn := decodeTCP(t, synFrame)
		m := onlyEvent(t, out, EvSplice).Splice
		o, _ := syn.option(layers.TCPOptionKind(wire.OptFastOpen))
		if i == 1 {
			if !bytes.Equal(o.OptionData, testCookie) || !bytes.Equal(syn.payload(), []byte(shortRequest)) || m.Flags&proto.SpliceKeepsCookie != 0 {
				t.Fatalf("second SYN: cookie % x, %d bytes, Splice flags %#x; want the kernel's cookie, the request, no bit 7", o.OptionData, len(syn.payload()), m.Flags)
			}
			return
		}
		if len(o.OptionData) != 0 || len(syn.payload()) != 0 || m.Flags&proto.SpliceKeepsCookie == 0 {
			t.Fatalf("first SYN: cookie % x, %d bytes, Splice flags %#x; want a cookie request and bit 7", o.OptionData, len(syn.payload()), m.Flags)
		}
		m.Request = append([]byte(nil), m.Request...)
		if err := sh.sh.AddSplice(&m, now); !errors.Is(err, ErrSpliceAwaitsSynAck) {
			t.Fatalf("AddSplice: %v", err)
		}
		passedToHost(t, sh.input(PortWire, synFrame, now), synFrame, "the SYN asking for the front-end's cookie")
		k := &fastOpenKernel{newServer(0x0badf00d, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})}
		crossed := copyFrames(sh.input(PortHost, k.answer(t, synFrame), now+ms))
		if len(crossed) != 1 {
			t.Fatalf("%d frames for the SYN-ACK at the shim", len(crossed))
		}
		h.input(crossed[0], now+ms)
		req := copyFrames(sh.tick(now + ms))
		if len(req) != 1 {
			t.Fatalf("%d frames from the shim after the SYN-ACK, want the request", len(req))
		}
		expectTCP(t, req[0], seqIs(isnC+1), payloadIs([]byte(shortRequest)))
	}
}

// TestASYNACKOfTheFrontEndsOwnSYNIsNoSpliceAck: a SYN-ACK that takes the
// request the shim put in the SYN stands for the Splice's ack (the shim
// had the Splice to put it there). When the front-end's own SYN brought
// the request, the kernel may have taken it from the wire past the shim,
// and the Splice may be lost: the SYN-ACK is no ack then, and the
// daemon's resend timer keeps running until the client acknowledges a
// response byte, which only the shim's translation brings it; the event
// then says when the SYN-ACK came.
func TestASYNACKOfTheFrontEndsOwnSYNIsNoSpliceAck(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.SpliceAtSYN, c.FastOpen, c.FastOpenInSYN = true, true, true })
	k := &fastOpenKernel{newServer(0x1000, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})}
	_, out := dispatchCarrying(t, h, newClient(40090, 0x30000000, fullOffer(9)), t0)
	h.input(k.answer(t, onlyFrame(t, out)), t0+ms) // the cookie

	c := newClient(40091, 0x31000000, fullOffer(9))
	id, out := dispatchCarrying(t, h, c, t0+10*ms)
	synFrame := onlyFrame(t, out)
	if !bytes.Equal(decodeTCP(t, synFrame).payload(), []byte(shortRequest)) {
		t.Fatal("the second SYN does not carry the request")
	}
	h.call(func(out *Output) { // an early request: the daemon calls it at once
		if err := h.fe.SpliceAcked(id, t0+10*ms, out); err != nil {
			t.Fatal(err)
		}
	})
	k2 := &fastOpenKernel{newServer(0x2000, wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5})}
	synAckAt := t0 + 11*ms
	if evs := eventsOf(h.input(k2.answer(t, synFrame), synAckAt), EvSpliceTaken); len(evs) != 0 {
		t.Fatalf("the SYN-ACK of the front-end's own SYN gave %d EvSpliceTaken, want none", len(evs))
	}
	if h.fe.Stats().RequestsInSYN != 1 {
		t.Fatal("the SYN-ACK did not take the request")
	}
	// The client's ACK of nothing new, then of the response's first bytes.
	if evs := eventsOf(h.input(c.seg(wire.TCPFlagACK, c.nxt, c.isnF+1, nil), t0+12*ms), EvSpliceTaken); len(evs) != 0 {
		t.Fatalf("a client ACK of no response byte gave %d EvSpliceTaken", len(evs))
	}
	evs := eventsOf(h.input(c.seg(wire.TCPFlagACK, c.nxt, c.isnF+1+100, nil), t0+13*ms), EvSpliceTaken)
	if len(evs) != 1 || evs[0].At != synAckAt {
		t.Fatalf("the client's ACK of a response byte gave %+v, want one EvSpliceTaken at the SYN-ACK's time %v", evs, synAckAt)
	}
	if evs := eventsOf(h.input(c.seg(wire.TCPFlagACK, c.nxt, c.isnF+1+200, nil), t0+14*ms), EvSpliceTaken); len(evs) != 0 {
		t.Fatalf("a second ACK gave %d more EvSpliceTaken", len(evs))
	}
}

// TestClientsAnswerBeforeC2sSynAckWaitsForIt: the kernel took the request
// in the front-end's SYN, and the shim, with the Splice installed, let the
// kernel send its reply straight to the client (an echo). The client's
// ACK of it and its FIN can then reach the front-end before C2's SYN-ACK,
// which crosses the shim. They acknowledge bytes the front-end never
// sent; refused, the client's answer was lost and its FIN resent until
// the kernel's timer sent the reply again, 200 ms later. They are held,
// and go on C2 in the back-end's numbers after the handshake's last ACK.
func TestClientsAnswerBeforeC2sSynAckWaitsForIt(t *testing.T) {
	h := newFE(t, func(c *FrontEndConfig) { c.SpliceAtSYN, c.FastOpen, c.FastOpenInSYN = true, true, true })
	opts := wire.SynOptions{MSS: 1460, WScale: 7, SACKPermitted: true, TS: true, TSVal: 5}
	// The first handoff learns the kernel's cookie.
	_, out := dispatchCarrying(t, h, newClient(40100, 0x30000000, fullOffer(9)), t0)
	h.input((&fastOpenKernel{newServer(0x1000, opts)}).answer(t, onlyFrame(t, out)), t0+ms)

	c := newClient(40101, 0x40000000, fullOffer(9))
	now := t0 + 10*ms
	id, out := dispatchCarrying(t, h, c, now)
	synFrame := onlyFrame(t, out)
	if !bytes.Equal(decodeTCP(t, synFrame).payload(), []byte(shortRequest)) {
		t.Fatal("the second handoff's SYN does not carry the request")
	}
	h.call(func(out *Output) {
		if err := h.fe.SpliceAcked(id, now, out); err != nil {
			t.Fatal(err)
		}
	})
	const replyLen = 1290 // and the FIN
	ack := c.seg(wire.TCPFlagACK, c.nxt, c.rcvNxt+replyLen+1, nil)
	fin := c.seg(wire.TCPFlagACK|wire.TCPFlagFIN, c.nxt, c.rcvNxt+replyLen+1, nil)
	for i, f := range [][]byte{ack, fin} {
		if out := h.input(f, now+ms/10); len(out.Frames) != 0 {
			t.Fatalf("the client's answer %d before C2's SYN-ACK: %d frames, want it held", i, len(out.Frames))
		}
	}
	k := &fastOpenKernel{newServer(0x2000, opts)}
	fs := copyFrames(h.input(k.answer(t, synFrame), now+ms))
	if len(fs) != 3 {
		t.Fatalf("%d frames for the SYN-ACK, want the handshake's last ACK and the client's two segments", len(fs))
	}
	reqEnd := c.isn + 1 + wire.Seq(len(shortRequest))
	expectTCP(t, fs[0], flagsAre(wire.TCPFlagACK), seqIs(reqEnd), ackIs(k.srv.isn+1))
	expectTCP(t, fs[1], flagsAre(wire.TCPFlagACK), seqIs(reqEnd), ackIs(k.srv.isn+1+replyLen+1))
	expectTCP(t, fs[2], flagsAre(wire.TCPFlagACK|wire.TCPFlagFIN), seqIs(reqEnd), ackIs(k.srv.isn+1+replyLen+1))
	if st := h.fe.Stats(); st.Drops[dropAckOutOfRange] != 0 {
		t.Errorf("%d client segments dropped as acknowledging what was not sent", st.Drops[dropAckOutOfRange])
	}
}
