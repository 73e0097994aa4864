package splice

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/qsplice/qsplice/splice/wire"
)

func TestInternerSharesAndStaysBounded(t *testing.T) {
	var in interner
	host := []byte("shop.example")
	first := in.get(host)
	if first != "shop.example" {
		t.Fatalf("get = %q", first)
	}
	var again string
	if n := testing.AllocsPerRun(100, func() { again = in.get(host) }); n != 0 {
		t.Errorf("a string seen before: %v allocations", n)
	}
	if unsafe.StringData(again) != unsafe.StringData(first) {
		t.Errorf("a string seen before was copied again")
	}
	host[0] = 'S' // the caller's bytes change: the string handed out must not
	if first != "shop.example" || in.get([]byte("shop.example")) != "shop.example" {
		t.Fatalf("the interned string aliases the caller's bytes: %q", first)
	}
	if in.get(nil) != "" || in.get([]byte{}) != "" {
		t.Errorf("empty bytes are not the empty string")
	}

	long := []byte(strings.Repeat("p", internMaxLen+1))
	before := len(in.m)
	if in.get(long) != string(long) || len(in.m) != before {
		t.Errorf("a string longer than internMaxLen was kept (%d -> %d entries)", before, len(in.m))
	}
	for i := range 3 * internMax {
		in.get([]byte("/item/" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune(i))))
		if len(in.m) > internMax {
			t.Fatalf("%d strings kept, at most %d", len(in.m), internMax)
		}
	}
}

// TestRecycledFlowIsAsNew: a flow record and request buffer that served a
// connection and came back serve the next connection exactly as new ones
// would: the engine that recycles and a fresh engine hold equal flows
// after the same segments.
func TestRecycledFlowIsAsNew(t *testing.T) {
	used := newFE(t, nil)
	c := newClient(40000, 1000, fullOffer(5000))
	c.handshake(t, used, t0)
	id := c.sendRequest(t, used, []byte("GET /a HTTP/1.1\r\nHost: a.example\r\n\r\n"), t0)
	used.call(func(out *Output) { used.fe.Reject(id, 503, "busy", 0, t0, out) })
	end, _ := used.drain(t0, t0+10*60*s1)
	if used.fe.Flows() != 0 || len(used.fe.spareFlows) != 1 || len(used.fe.spareBufs) != 1 {
		t.Fatalf("after the first connection: %d flows, %d spare records, %d spare buffers; want 0, 1, 1",
			used.fe.Flows(), len(used.fe.spareFlows), len(used.fe.spareBufs))
	}
	spare := used.fe.spareFlows[0]

	fresh := newFE(t, nil)
	now := end + s1
	var flows []*flow
	for _, h := range []*feHarness{used, fresh} {
		c := newClient(40001, 7000, fullOffer(9000))
		c.handshake(t, h, now)
		id := c.sendRequest(t, h, []byte("GET /b HTTP/1.1\r\nHost: b.example\r\n\r\n"), now)
		flows = append(flows, h.fe.byID[id])
	}
	if flows[0] != spare {
		t.Fatalf("the second connection did not reuse the spare record")
	}
	got, want := *flows[0], *flows[1]
	got.id = want.id // the used engine has counted one more
	if !reflect.DeepEqual(got, want) {
		t.Errorf("recycled flow\n %+v\nnew flow\n %+v", got, want)
	}
}

// TestSparesAreBounded: a burst of connections leaves spare records and
// buffers behind, but no more than the limits say, and no buffer that
// held a long head.
func TestSparesAreBounded(t *testing.T) {
	h := newFE(t, nil)
	const n = 3 * minSpare
	small := []byte("GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
	long := []byte("GET / HTTP/1.1\r\nHost: a.example\r\nCookie: " + strings.Repeat("c", spareBufCap) + "\r\n\r\n")
	for i := range n {
		c := newClient(uint16(20000+i), wire.Seq(1000*i), fullOffer(5000))
		c.handshake(t, h, t0)
		req := small
		if i%2 == 1 {
			req = long
		}
		id := c.sendRequest(t, h, req, t0)
		h.call(func(out *Output) { h.fe.Reject(id, 503, "busy", 0, t0, out) })
	}
	h.drain(t0, t0+10*60*s1)
	e := h.fe
	if e.Flows() != 0 {
		t.Fatalf("%d flows left", e.Flows())
	}
	// Each free may keep a record while the spares are fewer than the
	// live flows (or minSpare): about half of the burst.
	if len(e.spareFlows) > n/2+1 || len(e.spareFlows) < minSpare {
		t.Errorf("%d spare records after %d connections, want %d..%d", len(e.spareFlows), n, minSpare, n/2+1)
	}
	total := 0
	for _, b := range e.spareBufs {
		if cap(b) > spareBufCap || len(b) != 0 {
			t.Errorf("a spare buffer of len %d cap %d", len(b), cap(b))
		}
		total += cap(b)
	}
	if total != e.spareBufBytes || total > maxSpareBufBytes || len(e.spareBufs) > n/2 || len(e.spareBufs) == 0 {
		t.Errorf("%d spare buffers of %d bytes (counted %d)", len(e.spareBufs), total, e.spareBufBytes)
	}
}
