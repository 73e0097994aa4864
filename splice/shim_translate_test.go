package splice

import (
	"testing"
	"time"
)

// TestResponseTimesNeverEndBeforeTheFirstByte: a response whose request
// start, first and last reply fall in one pass (a request the kernel took
// with its SYN, in service from the SYN-ACK's time, and its reply read in
// the same pass) reports a first byte of 1 ns, "measured", and a service
// time no shorter: the front-end's timeline puts last_byte before
// first_byte otherwise (found by TestFrontendStopWritesTheConnectionsItStillHolds).
func TestResponseTimesNeverEndBeforeTheFirstByte(t *testing.T) {
	for _, c := range []struct {
		start, first, last Time
		service, firstByte time.Duration
	}{
		{t0, t0, t0, 1, 1},
		{t0, t0, t0 + 5*ms, 5 * time.Millisecond, 1},
		{t0, t0 + ms, t0 + 3*ms, 3 * time.Millisecond, time.Millisecond},
		{t0, t0 + ms, t0 + ms, time.Millisecond, time.Millisecond},
	} {
		service, first := responseTimes(c.start, c.first, c.last)
		if service != c.service || first != c.firstByte {
			t.Errorf("start %v, first %v, last %v: service %v, first byte %v; want %v, %v",
				c.start, c.first, c.last, service, first, c.service, c.firstByte)
		}
	}
}
