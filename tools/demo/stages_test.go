package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The demo's progress lines: the lab, the downloads, the load's warm-up
// and a line per 10 s of its measured window, the teardown; with each
// stage taking its expected time, the time left is exact.
func TestStagesOfTheDefaultRun(t *testing.T) {
	g := GuaranteeConfig{Scale: 1, BeforeLabel: "byte-exact downloads through the VIP"}
	g.defaults()
	clock := time.Unix(1000, 0)
	var b bytes.Buffer
	st := g.stages("t", true, 2300, false)
	p := st.progress(&b, func() time.Time { return clock })
	all := append(append([]stage{st.lab, st.before}, st.load...), st.end)
	for _, s := range all {
		p.Step(s.label, s.weight)
		clock = clock.Add(time.Duration(s.weight * float64(time.Second)))
	}
	p.Done()
	want := `demo [1/7] building lab "t": 5 back-ends x 5 concurrent, 20ms service time, credit scheduler
demo [2/7] byte-exact downloads through the VIP, 3s in, about 35s left
demo [3/7] offering 2300 req/s (2.0x each reservation) for 30s after a 2s warm-up, 5s in, about 33s left
demo [4/7] load: 0s of 30s measured, 7s in, about 31s left
demo [5/7] load: 10s of 30s measured, 17s in, about 21s left
demo [6/7] load: 20s of 30s measured, 27s in, about 11s left
demo [7/7] tearing the lab down, 37s in, about 1s left
demo: 7 steps in 38s
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	for i, l := range st.load {
		if want := g.Warmup + time.Duration(max(i-1, 0))*10*time.Second; i > 0 && l.at != want {
			t.Errorf("load stage %d starts at %v, want %v", i, l.at, want)
		}
	}
}

// A long window has ten slices; one not a multiple of the slice ends with
// a shorter one, so the weights add up to the window.
func TestLoadSlices(t *testing.T) {
	for _, c := range []struct {
		d      time.Duration
		slices int
	}{{5 * time.Minute, 10}, {25 * time.Second, 3}, {5 * time.Second, 1}} {
		g := GuaranteeConfig{Scale: 1, Duration: c.d}
		g.defaults()
		st := g.stages("t", false, 1, true)
		var sum float64
		for _, l := range st.load[1:] {
			sum += l.weight
		}
		if len(st.load)-1 != c.slices || sum != c.d.Seconds() {
			t.Errorf("%v: %d slices of %v s in all, want %d of %v", c.d, len(st.load)-1, sum, c.slices, c.d.Seconds())
		}
		if st.end.weight != 0 || st.end.label != "leaving the lab up" {
			t.Errorf("a kept lab ends with %+v", st.end)
		}
	}
}

// lineWriter hands each progress line to a channel.
type lineWriter chan string

func (w lineWriter) Write(b []byte) (int, error) {
	w <- string(b)
	return len(b), nil
}

// stepLoad prints the load's stages in order as their times come and
// stops at once when the load ends, leaving out the stages not reached.
func TestStepLoadStopsWithTheLoad(t *testing.T) {
	lines := make(lineWriter, 8)
	st := runStages{load: []stage{{label: "warm-up", at: 0}, {label: "a", at: 20 * time.Millisecond},
		{label: "b", at: 40 * time.Millisecond}, {label: "never", at: time.Hour}}}
	p := st.progress(lines, nil)
	stop := make(chan struct{})
	returned := make(chan struct{})
	go func() { defer close(returned); stepLoad(p, st.load, stop) }()
	for _, want := range []string{"warm-up", "a", "b"} {
		if got := <-lines; !strings.HasPrefix(got, "demo [") || !strings.Contains(got, "] "+want) {
			t.Errorf("line %q, want the stage %q", got, want)
		}
	}
	close(stop)
	<-returned
	select {
	case l := <-lines:
		t.Errorf("a line after the load ended: %q", l)
	default:
	}
}
