package loadgen

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Arrival is the law of a stream's inter-arrival gaps.
type Arrival string

const (
	// Poisson arrivals: independent exponential gaps of mean 1/rate, the
	// usual model of many independent users.
	Poisson Arrival = "poisson"
	// Constant arrivals: exactly 1/rate apart, starting at the stream's t0.
	Constant Arrival = "constant"
)

func (a Arrival) valid() error {
	switch a {
	case Poisson, Constant:
		return nil
	}
	return fmt.Errorf("unknown arrival %q (want %s or %s)", string(a), Poisson, Constant)
}

// schedule yields a stream's intended send times as offsets from the run's
// start. Each offset is computed from the start, never from when the
// previous request actually went out, so a late scheduler or a slow server
// cannot stretch the schedule: that is what makes the load open-loop.
type schedule struct {
	arrival Arrival
	rate    float64 // requests per second, > 0
	rng     *rand.Rand
	n       int64   // arrivals yielded so far (constant)
	elapsed float64 // seconds, sum of the gaps so far (poisson)
	// steps, when set, modulate the rate (steps.go); mass is then the
	// cumulative intensity reached so far.
	steps []LoadStep
	mass  float64
}

// newSchedule returns the schedule for one stream. Streams of one run get
// different index values so that their Poisson gaps are independent yet
// reproducible from the run's seed.
func newSchedule(a Arrival, rate float64, seed uint64, index int) *schedule {
	return &schedule{
		arrival: a,
		rate:    rate,
		rng:     rand.New(rand.NewPCG(seed, uint64(index)+0x9e3779b97f4a7c15)),
	}
}

// next returns the intended offset of the following request. Constant
// offsets are n/rate computed afresh each time, so rounding never
// accumulates; Poisson offsets add exponential gaps in float seconds.
func (s *schedule) next() time.Duration {
	if s.steps != nil {
		if s.arrival == Constant {
			s.mass = float64(s.n)
			s.n++
		} else {
			s.mass += s.rng.ExpFloat64()
		}
		return stepTime(s.steps, s.rate, s.mass)
	}
	if s.arrival == Constant {
		d := time.Duration(float64(s.n) * 1e9 / s.rate)
		s.n++
		return d
	}
	s.elapsed += s.rng.ExpFloat64() / s.rate
	return time.Duration(s.elapsed * 1e9)
}
