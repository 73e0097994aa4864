package loadgen

import (
	"math"
	"testing"
	"time"
)

func TestConstantScheduleIsExact(t *testing.T) {
	for _, rate := range []float64{1000, 3, 7.5} {
		s := newSchedule(Constant, rate, 1, 0)
		for n := range 10_000 {
			want := time.Duration(float64(n) * 1e9 / rate)
			if got := s.next(); got != want {
				t.Fatalf("rate %v: arrival %d at %v, want %v", rate, n, got, want)
			}
		}
	}
	// At 1000/s the spacing is exactly 1 ms however far the schedule runs:
	// offsets are recomputed, never accumulated.
	s := newSchedule(Constant, 1000, 1, 0)
	prev := s.next()
	for range 100_000 {
		cur := s.next()
		if cur-prev != time.Millisecond {
			t.Fatalf("gap %v after %v", cur-prev, prev)
		}
		prev = cur
	}
}

func TestPoissonScheduleRateAndGaps(t *testing.T) {
	const rate, n = 500.0, 50_000
	s := newSchedule(Poisson, rate, 42, 0)
	var prev time.Duration
	var sumSq float64
	for range n {
		cur := s.next()
		if cur < prev {
			t.Fatalf("offsets go backwards: %v after %v", cur, prev)
		}
		gap := (cur - prev).Seconds()
		sumSq += gap * gap
		prev = cur
	}
	// n exponential gaps of mean 1/rate sum to mean n/rate with standard
	// deviation sqrt(n)/rate: allow 5 standard deviations (0.022 = 2.2%).
	observed := float64(n) / prev.Seconds()
	if tol := 5 / math.Sqrt(n); math.Abs(observed/rate-1) > tol {
		t.Errorf("observed rate %.1f/s, want %v within %.1f%%", observed, rate, 100*tol)
	}
	// An exponential law has E[gap^2] = 2/rate^2 (a constant one: 1/rate^2).
	if m2 := sumSq / n * rate * rate; m2 < 1.8 || m2 > 2.2 {
		t.Errorf("second moment of the gaps x rate^2 = %.2f, want about 2 (exponential)", m2)
	}
}

func TestPoissonScheduleIsSeeded(t *testing.T) {
	first := func(seed uint64, index int) []time.Duration {
		s := newSchedule(Poisson, 100, seed, index)
		out := make([]time.Duration, 20)
		for i := range out {
			out[i] = s.next()
		}
		return out
	}
	a, b := first(9, 0), first(9, 0)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different schedules at %d: %v vs %v", i, a[i], b[i])
		}
	}
	same := func(x, y []time.Duration) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if same(a, first(10, 0)) || same(a, first(9, 1)) {
		t.Fatal("another seed or another stream gave the same schedule")
	}
}
