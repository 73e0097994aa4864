package splice

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"github.com/qsplice/qsplice/splice/httphead"
	"github.com/qsplice/qsplice/splice/wire"
)

// Follow-up requests on a spliced connection.
//
// Keep-alive clients send more requests on a connection that is already
// spliced. They must be scheduled like the first one, or a customer could
// bypass its reservation by reusing connections. The request direction
// still crosses the front-end, so it watches the byte stream for request
// boundaries: nextReq is where the next head starts (client and C2
// sequence numbers are the same). Bytes before it belong to the admitted
// request and are forwarded as they come; bytes from it on are held in
// kaBuf until the head is complete (EvRequest with FollowUp set) and the
// daemon admits it (Admit). Held segments are not acknowledged by anyone,
// so the client keeps them until the back-end acknowledges them: the
// front-end sends them once on admission and the client's own
// retransmissions cover any loss. The ACK, SACK and window a held segment
// carries are forwarded at once in a header-only copy, so the response in
// flight keeps flowing.
//
// Limits: a request with a chunked body ends tracking for the connection
// (its end is unknown without decoding chunks), as does a follow-up head
// that does not parse (the server answers it); both are counted.

type kaState uint8

const (
	kaOff     kaState = iota // not tracking: forward everything
	kaForward                // inside an admitted request; next head at nextReq
	kaCollect                // collecting the next head in kaBuf
	kaWaiting                // head complete, EvRequest sent, waiting for Admit
)

// ErrNotWaiting: Admit for a flow with no follow-up waiting.
var ErrNotWaiting = errors.New("splice: no follow-up request is waiting on that flow")

// waitingFollowUp returns flow id if a follow-up request waits on it.
func (e *FrontEnd) waitingFollowUp(id FlowID) (*flow, error) {
	f := e.byID[id]
	switch {
	case f == nil:
		return nil, ErrNoFlow
	case f.state != stSpliced || f.kaState != kaWaiting:
		return nil, ErrNotWaiting
	}
	return f, nil
}

// requestSpan is the sequence space of a parsed request: head plus body,
// or -1 when the body's length is unknown (chunked).
func requestSpan(r *httphead.Request) int64 {
	if r.Chunked || r.BodyLen < 0 {
		return -1
	}
	return int64(r.HeadLen) + r.BodyLen
}

// followUp decides what happens to a client segment on a spliced flow.
// It returns true when the caller should forward the segment unchanged
// (translated), false when followUp consumed it.
func (e *FrontEnd) followUp(f *flow, p *wire.Packet, o *wire.TCPOptions, now Time, out *Output) bool {
	t := p.TCP
	payload := t.Payload()
	fin := t.Has(wire.TCPFlagFIN)
	if f.kaState == kaOff || (len(payload) == 0 && !fin) || t.Has(wire.TCPFlagRST) {
		return true
	}
	s := t.Seq()
	end := s + wire.Seq(len(payload))
	if end.LessEq(f.nextReq) && !(fin && end == f.nextReq && f.kaState != kaForward) {
		return true // old bytes of the current request, or its retransmission
	}
	if f.kaState == kaForward && s.LessThan(f.nextReq) {
		// The segment straddles the boundary: the part before it goes on
		// now, the rest starts the next request.
		cut := int(f.nextReq - s)
		e.sendC2(f, t, o, s, payload[:cut], 0, out)
		payload, s = payload[cut:], f.nextReq
	} else {
		// Keep the ACK, SACK and window information flowing. At the
		// back-end's rcv_nxt, which the held bytes have not passed.
		e.sendC2(f, t, o, f.nextReq, nil, 0, out)
	}
	if f.kaState == kaForward {
		f.kaState = kaCollect
		f.kaBuf = f.kaBuf[:0]
	}
	expected := f.nextReq + wire.Seq(len(f.kaBuf))
	switch {
	case expected.LessThan(s):
		e.drop(dropOutOfWindow) // a gap: the client will resend
		return false
	case s.LessThan(expected):
		skip := int(expected - s)
		if skip >= len(payload) {
			payload = nil
		} else {
			payload = payload[skip:]
		}
	}
	if room := e.cfg.RecvBuffer - len(f.kaBuf); len(payload) > room {
		e.drop(dropHoldFull)
		payload, fin = payload[:room], false
	}
	f.kaBuf = append(f.kaBuf, payload...)
	if fin {
		f.kaFin = true
	}
	if f.kaState == kaCollect {
		e.parseFollowUp(f, now, out)
	}
	return false
}

// parseFollowUp looks for a complete head at the start of kaBuf.
func (e *FrontEnd) parseFollowUp(f *flow, now Time, out *Output) {
	req := &e.head
	err := httphead.Parse(f.kaBuf, e.cfg.MaxHead, req)
	switch {
	case err == nil:
		f.kaState = kaWaiting
		f.kaSpan = requestSpan(req)
		e.stats.Requests++
		e.stats.FollowUps++
		out.event(Event{Kind: EvRequest, Flow: f.id, Backend: f.backend.ID, FollowUp: true,
			Request: e.requestInfo(f, req, out)})
	case errors.Is(err, httphead.ErrIncomplete):
		if f.kaFin {
			e.stopFollowUps(f, out) // the client closed mid-head
		}
	default:
		// Too large or malformed: let the server answer it; we cannot
		// speak HTTP on a spliced stream.
		e.stats.FollowUpsUntracked++
		e.stopFollowUps(f, out)
	}
}

// stopFollowUps sends whatever is held and forwards everything from now on.
func (e *FrontEnd) stopFollowUps(f *flow, out *Output) {
	e.flushHeld(f, len(f.kaBuf), f.kaFin, out)
	f.kaState = kaOff
}

// Admit releases the follow-up request waiting on a spliced flow.
func (e *FrontEnd) Admit(id FlowID, now Time, out *Output) error {
	f, err := e.waitingFollowUp(id)
	if err != nil {
		return err
	}
	if f.kaSpan < 0 {
		e.stats.FollowUpsUntracked++
		e.stopFollowUps(f, out)
		return nil
	}
	n := int(min(f.kaSpan, int64(len(f.kaBuf))))
	fin := f.kaFin && n == len(f.kaBuf)
	f.respPending++
	e.flushHeld(f, n, fin, out)
	rest := int64(n) - f.kaSpan // <= 0: body bytes still to come
	f.kaState = kaForward
	if rest < 0 {
		f.nextReq += wire.Seq(-rest)
		return nil
	}
	if len(f.kaBuf) > 0 {
		f.kaState = kaCollect // pipelined: the next head is already here
		e.parseFollowUp(f, now, out)
	}
	return nil
}

// flushHeld sends the first n held bytes (and the FIN if asked) on C2,
// advancing nextReq past them.
func (e *FrontEnd) flushHeld(f *flow, n int, fin bool, out *Output) {
	mss := f.c2MSS() - wire.TSOptionLen
	for off := 0; off < n || (fin && off == n); {
		k := min(mss, n-off)
		var flags uint8
		if fin && off+k == n {
			flags = wire.TCPFlagFIN
		}
		e.sendC2(f, nil, nil, f.nextReq+wire.Seq(off), f.kaBuf[off:off+k], flags, out)
		off += k
		if flags != 0 {
			break
		}
	}
	f.nextReq += wire.Seq(n)
	if fin {
		f.nextReq++
		f.kaFin = false
	}
	f.kaBuf = append(f.kaBuf[:0], f.kaBuf[n:]...)
}

// sendC2 builds a client-direction segment on C2 from scratch: seq and
// payload as given, ACK, window, timestamps and SACK translated from t
// (the client segment being handled) or, when t is nil, from what the
// client said last.
func (e *FrontEnd) sendC2(f *flow, t wire.TCP, o *wire.TCPOptions, seq wire.Seq, payload []byte, extra uint8, out *Output) {
	ack, win := f.cliAck, f.cliWin
	if t != nil {
		ack, win = t.Ack(), t.Window()
	}
	var ob [40]byte
	n := 0
	if f.tsB {
		ecr := f.cliTSecr
		if o != nil && o.HasTS {
			ecr = o.TSEcr
		}
		n += wire.EncodeTS(ob[n:], f.tsRecent, ecr-f.tsOffset)
	}
	if o != nil && o.NumSACK > 0 {
		k := min(o.NumSACK, (len(ob)-n-4)/8)
		ob[n], ob[n+1], ob[n+2], ob[n+3] = wire.OptNOP, wire.OptNOP, wire.OptSACK, byte(2+8*k)
		n += 4
		for i := 0; i < k; i++ {
			binary.BigEndian.PutUint32(ob[n:], uint32(o.SACKBlocks[i].Left)-f.seqDelta)
			binary.BigEndian.PutUint32(ob[n+4:], uint32(o.SACKBlocks[i].Right)-f.seqDelta)
			n += 8
		}
	}
	flags := wire.TCPFlagACK | extra
	if len(payload) > 0 {
		flags |= wire.TCPFlagPSH
	}
	tf := wire.TCPFrame{
		SrcMAC: e.cfg.MAC, DstMAC: f.backend.MAC,
		Src: e.handoff, Dst: f.bIP, SrcPort: f.hport, DstPort: f.backend.Port,
		Seq: seq, Ack: ack - wire.Seq(f.seqDelta), Flags: flags, Window: win,
		Options: ob[:n], Payload: payload,
	}
	b := out.alloc(tf.Len())
	tf.Encode(b)
	out.send(PortWire, b)
	if end := seq + wire.Seq(len(payload)); f.cliNxt.LessThan(end) {
		f.cliNxt = end
	}
	if extra&wire.TCPFlagFIN != 0 {
		f.cliFin = true
	}
	f.forwardedBytes += uint64(len(payload))
	e.stats.ForwardedBytes += uint64(len(payload))
	e.stats.ForwardedFrames++
	e.stats.TxFrames++
}

// requestInfo gives the daemon what it needs of a parsed head, in out.
// Method, Host and Path repeat from request to request and are interned;
// a Cookie is usually the client's own and is copied.
func (e *FrontEnd) requestInfo(f *flow, req *httphead.Request, out *Output) *RequestInfo {
	return out.request(RequestInfo{
		Method:    e.strs.get(req.Method),
		Host:      e.strs.get(req.Host),
		Path:      e.strs.get(req.Path),
		Cookie:    string(req.Cookie),
		Port:      f.key.dstPort,
		Client:    netip.AddrPortFrom(f.key.srcIP.Addr(), f.key.srcPort),
		HeadLen:   req.HeadLen,
		KeepAlive: req.KeepAlive,
	})
}
