package replay

import (
	"bytes"
	"strings"
	"testing"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/sched"
	"github.com/qsplice/qsplice/splice/wire"
)

// keepAliveClient is a capture of one keep-alive connection with three
// GETs, each sent after the old system's response to the one before.
func keepAliveClient(t testing.TB) (capture []byte, gets [][]byte) {
	b := newCaptureBuilder(t)
	const isn, orig = uint32(0x10000000), uint32(0x50000000)
	resp := bytes.Repeat([]byte("r"), 100)
	b.seg(10, client1, vip, isn, 0, fSYN, synOpts(1460, 7, true, false, 0, 0), nil)
	b.seg(110, vip, client1, orig, isn+1, fSYN|fACK, synOpts(1460, 7, true, false, 0, 0), nil)
	b.seg(200, client1, vip, isn+1, orig+1, fACK, nil, nil)
	seq, ack := isn+1, orig+1
	for i, path := range []string{"/one", "/two", "/three"} {
		get := []byte("GET " + path + " HTTP/1.1\r\nHost: www.example.com\r\n\r\n")
		gets = append(gets, get)
		at := 300 + 3000*i
		b.seg(at, client1, vip, seq, ack, fACK|fPSH, nil, get)
		seq += uint32(len(get))
		b.seg(at+1500, vip, client1, ack, seq, fACK|fPSH, nil, resp) // the old back-end's answer
		ack += uint32(len(resp))
		b.seg(at+2000, client1, vip, seq, ack, fACK, nil, nil)
	}
	b.seg(9500, client1, vip, seq, ack, fFIN|fACK, nil, nil)
	b.seg(9600, vip, client1, ack, seq+1, fFIN|fACK, nil, nil)
	b.seg(9700, client1, vip, seq+1, ack+1, fACK, nil, nil)
	return b.buf.Bytes(), gets
}

// customerWWW is a credit scheduler with one customer for the capture's
// host.
func customerWWW(spec sched.CustomerSpec) controller.Config {
	spec.Name = "www"
	return controller.Config{
		Listeners: []controller.Listener{{Port: 80, Policy: "credit"}},
		Credit:    sched.CreditConfig{Customers: []sched.CustomerSpec{spec}, Default: "www"},
		Classify:  func(host string) string { return strings.TrimSuffix(host, ".example.com") },
	}
}

// c2Payload concatenates the request bytes the engine sent on C2.
func c2Payload(t *testing.T, out []byte) []byte {
	var got []byte
	for _, d := range decodeCapture(t, out) {
		var p wire.Packet
		if wire.Parse(d.raw, &p) == nil && p.Kind == wire.KindTCP && p.IP.Src().Addr().String() == DefaultHandoffAddr {
			got = append(got, p.TCP.Payload()...)
		}
	}
	return got
}

// Every request of a keep-alive connection is scheduled and handed to
// the back-end: the follow-ups are admitted as the daemon admits them.
func TestKeepAliveFollowUpsAreHandedOver(t *testing.T) {
	in, gets := keepAliveClient(t)
	cfg := Config{Scheduler: customerWWW(sched.CustomerSpec{Reservation: 100})}
	out, s := replay(t, cfg, in)
	if s.Requests != 3 || s.FollowUps != 2 || s.HandedOver != 3 || s.NotHandedOver != 0 || s.HandoffsDone != 1 {
		var b bytes.Buffer
		s.WriteText(&b)
		t.Fatalf("want 3 requests, 2 of them follow-ups, all handed over on one handoff; got\n%s", b.String())
	}
	if c := s.Customers["www"]; c.Offered != 3 || c.Admitted != 3 || c.Served != 3 {
		t.Errorf("customer www: %+v", c)
	}
	if got, want := c2Payload(t, out), bytes.Join(gets, nil); !bytes.Equal(got, want) {
		t.Errorf("requests on C2:\n%q\nwant\n%q", got, want)
	}
	again, _ := replay(t, cfg, in)
	if sum256(out) != sum256(again) {
		t.Error("two replays of the keep-alive capture differ")
	}
}

// A follow-up the scheduler refuses (the customer is over its cap) is
// answered in its stream, as live: 429 after the first response.
func TestKeepAliveFollowUpRefusedInStream(t *testing.T) {
	in, gets := keepAliveClient(t)
	cfg := Config{Scheduler: customerWWW(sched.CustomerSpec{Cap: 1})}
	out, s := replay(t, cfg, in)
	if s.HandedOver != 1 || s.Answers["429"] != 1 || s.Customers["www"].Rejected["over-cap"] != 1 {
		var b bytes.Buffer
		s.WriteText(&b)
		t.Fatalf("want the first request handed over and the second refused with 429; got\n%s", b.String())
	}
	if got := c2Payload(t, out); !bytes.Equal(got, gets[0]) {
		t.Errorf("requests on C2: %q, want only the first", got)
	}
}
