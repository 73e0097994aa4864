package frontend

import (
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice"
	"github.com/qsplice/qsplice/splice/wire"
)

func ms(f float64) splice.Time { return splice.Time(f * float64(time.Millisecond)) }

func TestRxModeratorHoldsOnlyForASteadyStreamOfPureACKs(t *testing.T) {
	cfg := moderation{Window: time.Millisecond, MinAcks: 4, Batch: 8, MaxHold: 500 * time.Microsecond}
	steps := []struct {
		name        string
		at          splice.Time
		acks, other int           // observed at `at` (before asking)
		want        time.Duration // Hold(at) after observing
	}{
		{"nothing counted yet", ms(0), 0, 0, 0},
		// The open window [0, 1 ms) counts, over the 1.5 ms since an
		// (empty) window before it: 8 of 20 would take 0.6 ms, capped.
		{"first window still open", ms(0.5), 20, 0, 500 * time.Microsecond},
		// Window [0, 1 ms) closed with 20 ACKs: 8 of them take 0.4 ms.
		{"20 ACKs in the last window", ms(1), 0, 0, 400 * time.Microsecond},
		// Window [1, 2 ms): 10 ACKs would take 0.8 ms for 8: capped.
		{"10 ACKs: capped at MaxHold", ms(2), 10, 0, 500 * time.Microsecond},
		// Window [2, 3 ms): 3 ACKs are too thin a stream.
		{"3 ACKs: below MinAcks", ms(3), 3, 0, 0},
		// Window [3, 4 ms): 32 ACKs and 8 others (8*4 = 32, not above): 0.25 ms.
		{"8 others in 32 ACKs", ms(4), 32, 8, 250 * time.Microsecond},
		// Window [4, 5 ms): 31 ACKs and 8 others: short connections, never held.
		{"8 others in 31 ACKs", ms(5), 31, 8, 0},
		{"40 ACKs", ms(6), 40, 0, 200 * time.Microsecond},
		// The loop slept from 6 ms to 8 ms: the window [6, 7) had no pass in it.
		{"a whole window without a pass", ms(8), 0, 0, 0},
		// The stream resumes: 30 ACKs in the open window's first 0.5 ms,
		// 1.5 ms counted: 8 of them take 0.4 ms.
		{"a stream resuming after a pause", ms(8.5), 30, 0, 400 * time.Microsecond},
	}
	m := newRxModerator(cfg)
	for _, st := range steps {
		// Counts of a pass just before st.at belong to the window open then.
		if st.acks+st.other > 0 {
			m.Observe(st.at-1, st.acks, st.other)
		}
		if got := m.Hold(st.at); got != st.want {
			t.Errorf("%s: Hold(%v) = %v, want %v", st.name, time.Duration(st.at), got, st.want)
		}
	}
}

func TestRxModeratorOffNeverHolds(t *testing.T) {
	var m rxModerator // zero value: MaxHold 0
	for i := range 10 {
		m.Observe(ms(float64(i)), 1000, 0)
	}
	if got := m.Hold(ms(10)); got != 0 {
		t.Fatalf("moderation off: Hold = %v, want 0", got)
	}
}

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
