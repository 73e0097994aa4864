package loadgen

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Step loads (issue 10's experiment): the offered load of every stream
// is multiplied by a factor that changes at given times, e.g. 0.5 times
// the capacity, then 2 times from 10 s to 40 s, then 0.5 again. Each
// stream's Rate is its load at factor 1; the factor in force at time t is
// that of the last step at or before t (1 before the first). The
// schedule stays open-loop: arrivals are placed by inverting the
// cumulative intensity, rate x integral of the factor, so a Poisson
// stream is an inhomogeneous Poisson process and a constant one sends
// its n-th request when the integral reaches n.

// LoadStep sets the factor from At (an offset from the run's start, the
// warm-up included) on.
type LoadStep struct {
	At     time.Duration `json:"at_ns"`
	Factor float64       `json:"factor"`
}

// maxFactor bounds a step's factor; it only catches typos.
const maxFactor = 1000

// ParseSteps reads a step load from its flag form: comma-separated
// FACTOR@TIME pairs in increasing time, e.g. "0.5@0,2@10s,0.5@40s".
func ParseSteps(s string) ([]LoadStep, error) {
	var steps []LoadStep
	for _, pair := range strings.Split(s, ",") {
		f, at, ok := strings.Cut(strings.TrimSpace(pair), "@")
		if !ok {
			return nil, fmt.Errorf("step %q: want FACTOR@TIME, e.g. 2@10s", pair)
		}
		factor, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("step %q: factor %q is not a number", pair, f)
		}
		var d time.Duration
		if at != "0" {
			if d, err = time.ParseDuration(at); err != nil {
				return nil, fmt.Errorf("step %q: %v", pair, err)
			}
		}
		steps = append(steps, LoadStep{At: d, Factor: factor})
	}
	return steps, checkSteps(steps)
}

// FormatSteps writes steps the way ParseSteps reads them.
func FormatSteps(steps []LoadStep) string {
	parts := make([]string, len(steps))
	for i, st := range steps {
		parts[i] = strconv.FormatFloat(st.Factor, 'g', -1, 64) + "@" + st.At.String()
	}
	return strings.Join(parts, ",")
}

func checkSteps(steps []LoadStep) error {
	for i, st := range steps {
		switch {
		case math.IsNaN(st.Factor) || st.Factor < 0 || st.Factor > maxFactor:
			return fmt.Errorf("step %d: factor %v must be in [0, %d]", i, st.Factor, maxFactor)
		case st.At < 0:
			return fmt.Errorf("step %d: time %v is negative", i, st.At)
		case i > 0 && st.At <= steps[i-1].At:
			return fmt.Errorf("step %d: time %v is not after the step before (%v)", i, st.At, steps[i-1].At)
		}
	}
	if len(steps) > 0 && !slices.ContainsFunc(steps, func(s LoadStep) bool { return s.Factor > 0 }) && steps[0].At == 0 {
		return errors.New("every step has factor 0: nothing would be sent")
	}
	return nil
}

// FactorAt is the factor of steps in force at offset t.
func FactorAt(steps []LoadStep, t time.Duration) float64 {
	f := 1.0
	for _, st := range steps {
		if st.At > t {
			break
		}
		f = st.Factor
	}
	return f
}

// stepTime is the offset at which the cumulative intensity of rate under
// steps reaches mass (expected arrivals), or never (a very large offset)
// when the factor stays 0 before it does.
func stepTime(steps []LoadStep, rate, mass float64) time.Duration {
	const never = time.Duration(math.MaxInt64)
	var from time.Duration // start of the current segment
	factor := 1.0
	for i := 0; ; i++ {
		end := never
		if i < len(steps) {
			end = steps[i].At
		}
		if end > from {
			r := rate * factor // arrivals per second in [from, end)
			if r > 0 {
				seg := (end - from).Seconds() * r
				if end == never || mass < seg {
					t := from.Seconds() + mass/r
					if t >= float64(never)/1e9 {
						return never
					}
					return time.Duration(t * 1e9)
				}
				mass -= seg
			}
		}
		if i >= len(steps) {
			return never
		}
		from, factor = end, steps[i].Factor
	}
}
