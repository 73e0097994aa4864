package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// The histogram is log-linear, in the manner of HdrHistogram: values below
// 2^subBits nanoseconds each have a bucket of their own; above that, every
// power-of-two range [2^e, 2^(e+1)) is cut into 2^subBits equal buckets.
// A bucket is therefore never wider than 1/2^subBits of its lower bound,
// and reporting its midpoint is off by at most 1/2^(subBits+1) (0.2%)
// relative. Memory is fixed whatever is recorded, and two histograms merge
// by adding their counts, which is what lets per-stream results sum into a
// total without keeping samples.
const (
	subBits    = 8
	subCount   = 1 << subBits
	topBit     = 40 // values up to 2^40 ns (about 18 minutes) are resolved
	numBuckets = (topBit - subBits + 1) * subCount
	maxTracked = 1<<topBit - 1
)

// Histogram counts durations in fixed memory. The zero value is empty and
// ready to use. It is not safe for concurrent use.
type Histogram struct {
	counts   [numBuckets]uint64
	count    uint64
	sum      float64 // nanoseconds; float so it cannot overflow
	min, max int64   // exact, in nanoseconds
}

// bucketOf maps a value in [0, maxTracked] to its bucket index.
func bucketOf(v int64) int {
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - 1 - subBits // >= 0
	return (shift+1)*subCount + int(v>>shift) - subCount
}

// bucketBounds is the inverse of bucketOf: the lowest value the bucket
// holds and its width.
func bucketBounds(i int) (low, width int64) {
	if i < subCount {
		return int64(i), 1
	}
	shift := i/subCount - 1
	return int64(subCount+i%subCount) << shift, 1 << shift
}

// Record adds one duration. Negative durations count as zero; durations
// beyond about 18 minutes land in the last bucket but still set Max.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	if h.count == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.count++
	h.sum += float64(v)
	h.counts[bucketOf(min(v, maxTracked))]++
}

// Merge adds every value recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.count == 0 {
		return
	}
	if h.count == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.count += o.count
	h.sum += o.sum
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.count }

// Min and Max are the exact extremes (0 when empty).
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Max is the largest recorded value, exactly.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is the exact arithmetic mean (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(math.Round(h.sum / float64(h.count)))
}

// Quantile returns the value below or at which a fraction q of the
// recorded values lie: the value of rank ceil(q*count) in sorted order,
// within the bucket resolution (0.2% relative), and never outside
// [Min, Max]. q is clamped to [0, 1]; an empty histogram returns 0.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.count)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			low, width := bucketBounds(i)
			mid := low + (width-1)/2
			return time.Duration(min(max(mid, h.min), h.max))
		}
	}
	return time.Duration(h.max) // unreachable: counts sum to count
}
