package calibrate

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The progress lines count the steps up to MaxRate of every size still to
// climb, drop a size's untried rates when its climb fails, and estimate
// the time left from the steps so far ("at most": the climbs may end
// sooner). The model cluster saturates 1K at its 6th rate of 7 (1600
// req/s) and 1M at its 2nd (100 req/s); each step takes 4 s.
func TestProgressLinesCountTheClimb(t *testing.T) {
	clock := time.Unix(1000, 0)
	probe := modelProbe(0.0008, 1e-8)
	var log bytes.Buffer
	_, err := Run(context.Background(), Config{Sizes: []int64{1 << 10, 1 << 20}, Start: 50, Factor: 2, MaxRate: 3200,
		Pause: time.Nanosecond, Log: &log, now: func() time.Time { return clock },
		Probe: func(ctx context.Context, size int64, rate float64, d time.Duration) (Step, error) {
			clock = clock.Add(4 * time.Second)
			return probe(ctx, size, rate, d)
		}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.HasPrefix(l, "calibration") {
			got = append(got, l)
		}
	}
	want := []string{"calibration [1/14] size 1K at 50.0 req/s"}
	for k, rate := 2, 100; rate <= 1600; k, rate = k+1, rate*2 {
		want = append(want, fmt.Sprintf("calibration [%d/14] size 1K at %d.0 req/s, %ds in, at most about %ds left", k, rate, 4*(k-1), 4*(14-(k-1))))
	}
	want = append(want,
		"calibration [7/13] size 1M at 50.0 req/s, 24s in, at most about 28s left",
		"calibration [8/13] size 1M at 100.0 req/s, 28s in, at most about 24s left",
		"calibration: 8 steps in 32s")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("progress lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
