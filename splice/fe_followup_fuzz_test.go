package splice

import (
	"bytes"
	"testing"

	"github.com/qsplice/qsplice/splice/httphead"
	"github.com/qsplice/qsplice/splice/wire"
)

// requestEnds walks a client's byte stream after the first request's head
// as the scheduler should see it: ends[0] is where the first request ends
// (after its chunked body, when first is chunked), ends[i] where the i-th
// follow-up ends. A request whose end is not in the stream, or that
// cannot be parsed, is the last: its end is as far as bytes may go once
// it is admitted (the stream's end, or the point of the error).
func requestEnds(stream []byte, firstChunked bool, maxHead int) []int {
	var ends []int
	pos := 0
	if firstChunked {
		var c httphead.Chunked
		n, err := c.Feed(stream)
		if err != nil || !c.Done() {
			return append(ends, n) // n: len(stream), or where the body breaks
		}
		pos = n
	}
	ends = append(ends, pos)
	for {
		var r httphead.Request
		err := httphead.Parse(stream[pos:], maxHead, &r)
		if err != nil {
			if err == httphead.ErrIncomplete && onlyEmptyLines(stream[pos:]) {
				// CRLFs before a close go on (servers ignore them); a
				// request after them would be parsed with them.
				ends[len(ends)-1] = len(stream)
			}
			return ends
		}
		bodyStart := pos + r.HeadLen
		switch {
		case r.Chunked:
			var c httphead.Chunked
			n, err := c.Feed(stream[bodyStart:])
			if err != nil || !c.Done() {
				return append(ends, bodyStart+n)
			}
			pos = bodyStart + n
		default:
			end := int64(bodyStart) + r.BodyLen
			if end >= int64(len(stream)) {
				return append(ends, len(stream))
			}
			pos = int(end)
		}
		ends = append(ends, pos)
	}
}

// FuzzFollowUpStream: any byte stream a keep-alive client sends after its
// first request (plain or chunked), cut into any segments, with every
// follow-up admitted as it is reported: every byte that reaches the
// back-end is the client's byte at that place, and none lies beyond the
// end of the last request the scheduler admitted.
func FuzzFollowUpStream(f *testing.F) {
	f.Add(false, []byte(victimReq+victimReq), []byte{7, 40}, false)
	f.Add(true, []byte(chunkedBody+victimReq), []byte{3, 1, 20}, false)
	f.Add(false, []byte(chunkedHead+chunkedBody+victimReq), []byte{80, 2}, true)
	f.Add(false, []byte("GET / HTTP/1.1\nHost: a\n\n"+victimReq), []byte{5}, false)
	f.Add(true, []byte("5\r\nhello\n\r\n0\r\n\r\n"+victimReq), []byte{9}, false)
	f.Add(false, []byte("POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc\r\n\r\n"), []byte{60}, true)
	f.Fuzz(func(t *testing.T, firstChunked bool, stream, sizes []byte, fin bool) {
		if len(stream) > 16<<10 {
			return
		}
		p := defaultSpliceParams()
		p.request = []byte("GET /first HTTP/1.1\r\nHost: www.example.test\r\n\r\n")
		if firstChunked {
			p.request = []byte(chunkedHead)
		}
		sc := connectSpliced(t, p)
		base := sc.c.nxt
		ends := requestEnds(stream, firstChunked, sc.h.cfg.MaxHead)
		admitted := 0
		check := func(out *Output) {
			t.Helper()
			for _, fr := range out.Frames {
				s := decodeTCP(t, fr.Data)
				if !s.ip.DstIP.Equal(backendIP[:]) || len(s.payload()) == 0 {
					continue
				}
				off := int(s.seq() - base)
				limit := ends[min(admitted, len(ends)-1)]
				if off < 0 || off+len(s.payload()) > limit {
					t.Fatalf("bytes [%d, %d) reached the back-end; %d follow-ups admitted, which end at %d (request ends %v)",
						off, off+len(s.payload()), admitted, limit, ends)
				}
				if !bytes.Equal(s.payload(), stream[off:off+len(s.payload())]) {
					t.Fatalf("bytes at %d on C2 are not the client's", off)
				}
			}
		}
		for off, k := 0, 0; off < len(stream) || (fin && off == len(stream)); k++ {
			size := 1
			if len(sizes) > 0 {
				size = max(1, int(sizes[k%len(sizes)]))
			}
			end := min(off+size, len(stream))
			flags := uint8(wire.TCPFlagACK | wire.TCPFlagPSH)
			last := end == len(stream) && fin
			if last {
				flags |= wire.TCPFlagFIN
			}
			sc.now += ms
			out := sc.h.input(sc.c.seg(flags, base+wire.Seq(off), sc.c.rcvNxt, stream[off:end]), sc.now)
			check(out)
			for n := len(eventsOf(out, EvRequest)); n > 0; {
				// Admit may report the next pipelined request at once.
				sc.now += ms
				admitted++
				out = sc.h.call(func(out *Output) {
					if err := sc.h.fe.Admit(sc.id, sc.now, out); err != nil {
						t.Fatalf("Admit: %v", err)
					}
				})
				check(out)
				n += len(eventsOf(out, EvRequest)) - 1
			}
			off = end
			if last {
				break
			}
		}
		if admitted > len(ends)-1 {
			t.Fatalf("%d follow-ups reported, the stream holds %d (ends %v)", admitted, len(ends)-1, ends)
		}
		// Whatever waits to be answered goes once the response is over;
		// nothing more reaches the back-end but a RST.
		sc.srv.reply(make([]byte, 10))
		sc.now += ms
		out := sc.h.call(func(out *Output) {
			sc.h.fe.ResponseEnded(sc.id, ResponseEnd{Seq: uint32(sc.srv.nxt)}, sc.now, out)
		})
		check(out)
		check(sc.clientAck(sc.srv.nxt + wire.Seq(sc.sp.SeqDelta)))
		sc.h.checkCounters()
		drainFE(t, sc.h, sc.now)
	})
}
