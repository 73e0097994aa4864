package gather

import (
	"strings"
	"testing"
	"time"

	"github.com/qsplice/qsplice/splice"
)

// The gathering policy, window by window: it gathers only after a whole
// window under Below, spreads only after one over Above, and between
// the two keeps what it has (hysteresis), so a load near one threshold
// does not make the loops trade shards every window.
func TestGatherPolicyGathersBelowAndSpreadsAboveWithHysteresis(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	p := NewPolicy(Config{Below: 0.5, Above: 0.8, Window: 100 * time.Millisecond}, 0)
	var busy time.Duration
	at := splice.Time(0)
	steps := []struct {
		name    string
		advance time.Duration // time since the last step
		busy    time.Duration // busy time the loops added meanwhile
		want    bool
	}{
		{"window not over: no decision yet, even idle", ms(50), 0, false},
		{"first window closes at 30% busy: gather", ms(50), ms(30), true},
		{"gathered at 70% (between the thresholds): stay", ms(100), ms(70), true},
		{"half a window at 100%: the window is not over", ms(50), ms(50), true},
		{"window closes at 90% busy: spread", ms(50), ms(40), false},
		{"spread at 60% (between the thresholds): stay", ms(100), ms(60), false},
		{"spread at 49%: gather", ms(100), ms(49), true},
		{"a long idle stretch counts as one window", ms(5000), ms(1), true},
		{"a window of exactly Above does not spread", ms(100), ms(80), true},
		{"just over Above spreads", ms(100), ms(81), false},
		{"exactly Below does not gather", ms(100), ms(50), false},
	}
	for _, s := range steps {
		at = at.Add(s.advance)
		busy += s.busy
		if got := p.Observe(at, busy); got != s.want {
			t.Fatalf("%s: gathered %v, want %v", s.name, got, s.want)
		}
	}
}

func TestParse(t *testing.T) {
	good := []struct {
		in   string
		want Config
		back string // String of the result
	}{
		{"off", Config{}, "off"},
		{"0.5,0.8", Default, "0.5,0.8"},
		{"0.3,0.9,250ms", Config{Below: 0.3, Above: 0.9, Window: 250 * time.Millisecond}, "0.3,0.9,250ms"},
		{"2,0,5ms", Config{Below: 2, Above: 0, Window: 5 * time.Millisecond}, "2,0,5ms"},
	}
	for _, g := range good {
		c, err := Parse(g.in)
		if err != nil || c != g.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", g.in, c, err, g.want)
			continue
		}
		if c.String() != g.back {
			t.Errorf("Parse(%q).String() = %q, want %q", g.in, c.String(), g.back)
		}
	}
	if Default.String() != "0.5,0.8" || !Default.On() {
		t.Errorf("the default reads %q (on %v)", Default, Default.On())
	}
	bad := []struct{ in, says string }{
		{"0.5", "BELOW,ABOVE"},
		{"a,0.8", "BELOW"},
		{"0.5,b", "ABOVE"},
		{"0.5,0.8,fast", "WINDOW"},
		{"0.5,0.8,0s", "window must be positive"},
		{"0.5,-1", "ABOVE must not be negative"},
		{"NaN,0.8", "must be numbers"},
		{"1,2,3ms,4", "BELOW,ABOVE"},
	}
	for _, b := range bad {
		if _, err := Parse(b.in); err == nil || !strings.Contains(err.Error(), b.says) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", b.in, err, b.says)
		}
	}
}

// A Handover publishes the policy's decisions, says "gathering" only on
// the change to gathered (when the other loops must be woken), counts
// both changes, and hands shards over in order without blocking the
// taker.
func TestHandoverPublishesDecisionsAndHandsShardsOver(t *testing.T) {
	h := NewHandover[int](Config{Below: 0.5, Above: 0.8, Window: time.Millisecond}, 0, 2)
	ms := splice.Time(time.Millisecond)
	if want, gathering := h.Decide(ms, 0); !want || !gathering || !h.Want() {
		t.Fatalf("idle window: want %v, gathering %v, published %v; want all true", want, gathering, h.Want())
	}
	if want, gathering := h.Decide(2*ms, 0); !want || gathering {
		t.Fatalf("still idle: want %v, gathering %v; want true, false (no new wake-up)", want, gathering)
	}
	if want, gathering := h.Decide(3*ms, time.Millisecond); want || gathering || h.Want() {
		t.Fatalf("busy window: want %v, gathering %v, published %v; want all false", want, gathering, h.Want())
	}
	if g, s := h.Counts(); g != 1 || s != 1 {
		t.Errorf("counts %d gathers, %d spreads; want 1 and 1", g, s)
	}
	if _, ok := h.Take(); ok {
		t.Fatal("Take with nothing handed returned a shard")
	}
	h.Hand(1)
	h.Hand(2)
	for _, want := range []int{1, 2} {
		if got, ok := h.Take(); !ok || got != want {
			t.Fatalf("Take = %d, %v; want %d", got, ok, want)
		}
	}
}
