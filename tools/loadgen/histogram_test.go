package loadgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// referenceQuantile is the definition Quantile approximates: the value of
// rank ceil(q*n) in sorted order.
func referenceQuantile(sorted []time.Duration, q float64) time.Duration {
	rank := max(int(math.Ceil(q*float64(len(sorted)))), 1)
	return sorted[rank-1]
}

// randomLatencies spans six decades (1 µs to 1 s) log-uniformly, plus a
// few exact small values, which take the histogram's linear buckets.
func randomLatencies(rng *rand.Rand, n int) []time.Duration {
	v := make([]time.Duration, n)
	for i := range v {
		if i%50 == 0 {
			v[i] = time.Duration(rng.IntN(300))
			continue
		}
		v[i] = time.Duration(math.Pow(10, 3+6*rng.Float64()))
	}
	return v
}

func TestHistogramQuantilesWithinOnePercent(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	values := randomLatencies(rng, 100_000)
	var h Histogram
	for _, v := range values {
		h.Record(v)
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	for _, q := range []float64{0, 0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
		got, want := h.Quantile(q), referenceQuantile(sorted, q)
		if rel := math.Abs(float64(got-want)) / max(float64(want), 1); rel > 0.01 {
			t.Errorf("q=%v: got %v, sorted reference %v (%.3f%% off)", q, got, want, 100*rel)
		}
	}
	if h.Count() != uint64(len(values)) || h.Min() != sorted[0] || h.Max() != sorted[len(sorted)-1] {
		t.Errorf("count %d min %v max %v, want %d %v %v", h.Count(), h.Min(), h.Max(), len(values), sorted[0], sorted[len(sorted)-1])
	}
	var sum float64
	for _, v := range values {
		sum += float64(v)
	}
	if mean := time.Duration(math.Round(sum / float64(len(values)))); h.Mean() != mean {
		t.Errorf("mean %v, want %v", h.Mean(), mean)
	}
}

func TestHistogramBucketsTileTheRange(t *testing.T) {
	// Every bucket starts where the previous one ended, and bucketOf maps
	// both edges of each bucket back to it.
	next := int64(0)
	for i := range numBuckets {
		low, width := bucketBounds(i)
		if low != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, low, next)
		}
		if bucketOf(low) != i || bucketOf(low+width-1) != i {
			t.Fatalf("bucket %d [%d,+%d): bucketOf gives %d and %d", i, low, width, bucketOf(low), bucketOf(low+width-1))
		}
		if low >= subCount && float64(width)/float64(low) > 1.0/subCount {
			t.Fatalf("bucket %d is %d wide at %d: coarser than 1/%d", i, width, low, subCount)
		}
		next = low + width
	}
	if next != maxTracked+1 {
		t.Fatalf("buckets end at %d, want %d", next, int64(maxTracked+1))
	}
}

func TestHistogramMergeEqualsRecordingEverything(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	values := randomLatencies(rng, 20_000)
	var all, a, b Histogram
	for i, v := range values {
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	var merged Histogram
	merged.Merge(&a)
	merged.Merge(&b)
	merged.Merge(new(Histogram)) // an empty one changes nothing
	if merged.counts != all.counts || merged.Count() != all.Count() || merged.Min() != all.Min() || merged.Max() != all.Max() {
		t.Fatalf("merged histogram differs: count %d/%d min %v/%v max %v/%v",
			merged.Count(), all.Count(), merged.Min(), all.Min(), merged.Max(), all.Max())
	}
	if d := merged.Mean() - all.Mean(); d < -1 || d > 1 {
		t.Errorf("mean %v vs %v", merged.Mean(), all.Mean())
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		if merged.Quantile(q) != all.Quantile(q) {
			t.Errorf("q=%v: merged %v, direct %v", q, merged.Quantile(q), all.Quantile(q))
		}
	}
}

func TestHistogramEdges(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Mean() != 0 || h.Max() != 0 || h.Summary() != (LatencySummary{}) {
		t.Fatal("empty histogram reports non-zero values")
	}
	h.Record(-5 * time.Millisecond) // clock oddity: counts as 0
	h.Record(time.Hour)             // beyond the resolved range
	if h.Min() != 0 || h.Max() != time.Hour {
		t.Fatalf("min %v max %v", h.Min(), h.Max())
	}
	if got := h.Quantile(0.5); got != 0 {
		t.Fatalf("median of {0, 1h} = %v, want 0", got)
	}
	if got := h.Quantile(1); got > time.Hour || got < maxTracked/2 {
		t.Fatalf("q=1 of {0, 1h} = %v", got)
	}
	s := h.Summary()
	if s.Count != 2 || s.MaxMs != 3.6e6 {
		t.Fatalf("summary %+v", s)
	}
}
