package frontend

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

// The policy's own tests are in internal/rxmod (rxmod_test.go).

func TestIsPureACKOnHandBuiltFrames(t *testing.T) {
	seg := func(flags uint8, payload string) []byte {
		f := wire.TCPFrame{Src: wire.IP4{198, 18, 0, 10}, Dst: wire.IP4{198, 18, 0, 100}, SrcPort: 40000, DstPort: 80,
			Seq: 1000, Ack: 2000, Flags: flags, Window: 512, Payload: []byte(payload)}
		b := make([]byte, f.Len())
		return b[:f.Encode(b)]
	}
	padded := append(seg(wire.TCPFlagACK, ""), make([]byte, 6)...) // Ethernet padding to 60 bytes
	cases := []struct {
		name  string
		frame []byte
		want  bool
	}{
		{"ACK", seg(wire.TCPFlagACK, ""), true},
		{"ACK with Ethernet padding", padded, true},
		{"ACK|PSH|ECE, no payload", seg(wire.TCPFlagACK|wire.TCPFlagPSH|wire.TCPFlagECE, ""), true},
		{"ACK with data", seg(wire.TCPFlagACK|wire.TCPFlagPSH, "GET / HTTP/1.1\r\n\r\n"), false},
		{"FIN|ACK", seg(wire.TCPFlagFIN|wire.TCPFlagACK, ""), false},
		{"SYN", seg(wire.TCPFlagSYN, ""), false},
		{"SYN|ACK", seg(wire.TCPFlagSYN|wire.TCPFlagACK, ""), false},
		{"RST|ACK", seg(wire.TCPFlagRST|wire.TCPFlagACK, ""), false},
		{"no ACK flag", seg(0, ""), false},
		{"truncated", seg(wire.TCPFlagACK, "")[:30], false},
	}
	var p wire.Packet
	for _, c := range cases {
		if got := isPureACK(c.frame, &p); got != c.want {
			t.Errorf("%s: isPureACK = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestModerationPathDoesNotAllocate(t *testing.T) {
	f := wire.TCPFrame{Src: wire.IP4{198, 18, 0, 10}, Dst: wire.IP4{198, 18, 0, 100}, SrcPort: 40000, DstPort: 80,
		Seq: 1000, Ack: 2000, Flags: wire.TCPFlagACK, Window: 512}
	frame := make([]byte, f.Len())
	frame = frame[:f.Encode(frame)]
	m := newRxModerator(defaultModeration)
	var p wire.Packet
	now, holds := splice.Time(0), 0
	allocs := testing.AllocsPerRun(1000, func() {
		now += splice.Time(100 * time.Microsecond)
		acks := 0
		if isPureACK(frame, &p) {
			acks++
		}
		m.Observe(now, acks, 0)
		if m.Hold(now) > 0 {
			holds++
		}
	})
	if holds == 0 || allocs != 0 {
		t.Fatalf("%v allocations per pass, %d holds; want 0 allocations and the holding path run", allocs, holds)
	}
}
