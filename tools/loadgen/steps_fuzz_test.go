package loadgen

import (
	"testing"
	"time"
)

// ParseSteps accepts only what FormatSteps writes back the same, and a
// schedule under what it accepts never goes backwards.
func FuzzParseSteps(f *testing.F) {
	for _, s := range []string{"0.5@0,2@10s,0.5@40s", "1@1s", "0@0,1@1ms", "2@-1s", "1e3@1h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		steps, err := ParseSteps(s)
		if err != nil {
			return
		}
		back, err := ParseSteps(FormatSteps(steps))
		if err != nil || len(back) != len(steps) {
			t.Fatalf("%q -> %q: %v", s, FormatSteps(steps), err)
		}
		for i := range steps {
			if back[i] != steps[i] {
				t.Fatalf("%q: step %d %v came back %v", s, i, steps[i], back[i])
			}
		}
		sc := newSchedule(Poisson, 1000, 1, 0)
		sc.steps = steps
		var prev time.Duration
		for range 100 {
			at := sc.next()
			if at < prev {
				t.Fatalf("%q: offsets go backwards: %v after %v", s, at, prev)
			}
			prev = at
		}
	})
}

func FuzzParseSources(f *testing.F) {
	for _, s := range []string{"198.18.0.32/27", "10.0.0.1,10.0.0.2", "1.2.3.4/20"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addrs, err := ParseSources(s)
		if err != nil {
			return
		}
		if len(addrs) == 0 || len(addrs) > maxSources {
			t.Fatalf("%q: %d addresses", s, len(addrs))
		}
		for _, a := range addrs {
			if !a.Is4() {
				t.Fatalf("%q: %v", s, a)
			}
		}
	})
}
