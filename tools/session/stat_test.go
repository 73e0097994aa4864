package session

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// chiSquare001 is the chi-square critical value at p = 0.001 for 1..7
// degrees of freedom (from the inverse CDF; e.g. 13.816 for df = 2). A
// correct sampler exceeds it in one row with probability 0.1%; the seed
// is fixed, so the test is deterministic either way.
var chiSquare001 = [...]float64{1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467, 5: 20.515, 6: 22.458, 7: 24.322}

// chiSquare returns the Pearson statistic of observed counts against
// probabilities, and its degrees of freedom (cells with p > 0, minus 1).
// A count in a cell of probability 0 makes the statistic infinite.
func chiSquare(counts []int, probs []float64) (stat float64, df int) {
	total := 0
	for _, c := range counts {
		total += c
	}
	for i, p := range probs {
		if p == 0 {
			if counts[i] != 0 {
				return math.Inf(1), 0
			}
			continue
		}
		exp := p * float64(total)
		d := float64(counts[i]) - exp
		stat += d * d / exp
		df++
	}
	return stat, df - 1
}

// TestTransitionFrequencies walks 200k sessions and checks, row by row,
// that the observed next-page counts fit the matrix, and that the mean
// session length matches Stats within 4 standard errors.
func TestTransitionFrequencies(t *testing.T) {
	const sessions = 200_000
	m := DefaultModel()
	rng := rand.New(rand.NewPCG(2026, 4))
	var counts [NumPages][NumStages]int
	pages := 0
	for range sessions {
		s := NewSession(&m, rng)
		prev := Exit
		for page, ok := s.Next(); ; page, ok = s.Next() {
			if prev != Exit {
				counts[prev][page]++
			}
			if !ok {
				break
			}
			prev = page
			pages++
		}
		if s.Abandoned() || s.Pages() != s.Attempts() {
			t.Fatalf("session without timeouts: abandoned %v, pages %d, attempts %d", s.Abandoned(), s.Pages(), s.Attempts())
		}
	}
	for from := range NumPages {
		stat, df := chiSquare(counts[from][:], m.Transitions[from][:])
		t.Logf("from %-8v n=%7d chi2=%7.3f df=%d", Stage(from), sum(counts[from][:]), stat, df)
		if stat > chiSquare001[df] {
			t.Errorf("from %v: chi-square %.3f > %.3f (df %d, p=0.001); counts %v",
				Stage(from), stat, chiSquare001[df], df, counts[from])
		}
	}
	// The same counts must reject a matrix one point off in one row, or
	// the check above could not fail.
	shifted := m.Transitions[Details]
	shifted[Browse], shifted[Search] = shifted[Browse]-0.01, shifted[Search]+0.01
	if stat, df := chiSquare(counts[Details][:], shifted[:]); stat <= chiSquare001[df] {
		t.Errorf("chi-square %.3f did not reject a details row shifted by 0.01", stat)
	}
	st := m.Stats()
	mean := float64(pages) / sessions
	stdErr := math.Sqrt(st.LengthVar / sessions)
	if math.Abs(mean-st.Length) > 4*stdErr {
		t.Errorf("mean session length %.4f, Stats says %.4f (standard error %.4f)", mean, st.Length, stdErr)
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// runWithServiceTime plays a session against a server that always takes
// service to answer, retrying and abandoning as the session decides.
func runWithServiceTime(s *Session, service time.Duration) {
	for _, ok := s.Next(); ok; _, ok = s.Next() {
		if s.Patience() < service {
			s.TimedOut()
			continue
		}
		s.Think()
	}
}

// TestEveryRequestTimesOut: with a 1 ns mean patience against a 1 ms
// server every attempt times out, so every session is abandoned on its
// first page after 1 attempt (leaves at once, p = 0.5), 2 (0.25) or 3
// (0.25: both retries used).
func TestEveryRequestTimesOut(t *testing.T) {
	const sessions = 100_000
	m := DefaultModel()
	m.TimeoutMean = time.Nanosecond
	rng := rand.New(rand.NewPCG(1, 2))
	attempts := make([]int, m.Retries+2)
	for range sessions {
		s := NewSession(&m, rng)
		runWithServiceTime(s, time.Millisecond)
		if !s.Abandoned() || s.Pages() != 1 {
			t.Fatalf("session not abandoned on its first page: abandoned %v pages %d", s.Abandoned(), s.Pages())
		}
		attempts[s.Attempts()]++
	}
	stat, df := chiSquare(attempts, []float64{0, 0.5, 0.25, 0.25})
	if stat > chiSquare001[df] {
		t.Errorf("attempts per session %v: chi-square %.3f > %.3f", attempts[1:], stat, chiSquare001[df])
	}
	if s := NewSession(&m, rng); s.TimedOut() {
		t.Error("TimedOut before the first Next asked for a retry")
	}
}

// TestAbandonmentRate: patience exponential with mean 8 s against a
// 2 s server times out with q = 1 - exp(-1/4); the share of abandoned
// sessions must match Model.AbandonRate(q) within 4 standard errors.
func TestAbandonmentRate(t *testing.T) {
	const sessions = 100_000
	m := DefaultModel()
	service := 2 * time.Second
	q := 1 - math.Exp(-float64(service)/float64(m.TimeoutMean))
	want := m.AbandonRate(q)
	rng := rand.New(rand.NewPCG(3, 4))
	abandoned := 0
	for range sessions {
		s := NewSession(&m, rng)
		runWithServiceTime(s, service)
		if s.Abandoned() {
			abandoned++
		}
		if _, ok := s.Next(); ok {
			t.Fatal("Next returned a page after the session ended")
		}
	}
	got := float64(abandoned) / sessions
	stdErr := math.Sqrt(want * (1 - want) / sessions)
	t.Logf("q=%.4f abandoned %.4f, model %.4f", q, got, want)
	if math.Abs(got-want) > 4*stdErr {
		t.Errorf("abandoned share %.4f, AbandonRate(%.4f) = %.4f (standard error %.4f)", got, q, want, stdErr)
	}
}

func TestThinkAndPatienceMeans(t *testing.T) {
	const n = 100_000
	m := DefaultModel()
	s := NewSession(&m, rand.New(rand.NewPCG(5, 6)))
	var think, patience float64
	for range n {
		think += s.Think().Seconds()
		patience += s.Patience().Seconds()
	}
	// An exponential's standard deviation is its mean: 4 standard errors
	// of the mean of n draws is 4/sqrt(n) of the mean, about 1.3%.
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"think", think / n, 7}, {"patience", patience / n, 8}} {
		if math.Abs(c.got-c.want) > 4*c.want/math.Sqrt(n) {
			t.Errorf("mean %s %.4f s, want %.1f s", c.name, c.got, c.want)
		}
	}
}
