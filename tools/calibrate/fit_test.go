package calibrate

import (
	"math"
	"testing"
)

// pointAt is the saturation point of size on a cluster whose utilization
// is a*R + b*W exactly: R = 1 / (a + b*size).
func pointAt(a, b float64, size int64) Point {
	r := 1 / (a + b*float64(size))
	return Point{Size: size, RMax: r, WMax: r * float64(size)}
}

func near(x, want, rel float64) bool { return math.Abs(x-want) <= rel*math.Abs(want) }

// Seed numbers: the lab's 1250 req/s of small objects (a = 0.0008) and
// 100 MB/s (b = 1e-8): 1 KiB saturates at 1234.2 req/s, 64 KiB at
// 687.1 req/s (45.0 MB/s), 1 MiB at 88.6 req/s (92.9 MB/s).
func TestFitRecoversSeedNumbers(t *testing.T) {
	const a, b = 0.0008, 1e-8
	points := []Point{pointAt(a, b, 1<<10), pointAt(a, b, 64<<10), pointAt(a, b, 1<<20)}
	if !near(points[0].RMax, 1234.2, 1e-4) || !near(points[1].RMax, 687.1, 1e-4) || !near(points[2].RMax, 88.6, 1e-3) {
		t.Fatalf("seed points %+v", points)
	}
	ga, gb, err := Fit(points)
	if err != nil || !near(ga, a, 1e-9) || !near(gb, b, 1e-9) {
		t.Fatalf("Fit = %g, %g, %v; want %g, %g", ga, gb, err, a, b)
	}
	// Two sizes are enough; 5% noise on Rmax moves a and b by a few %.
	noisy := []Point{points[0], points[2]}
	noisy[0].RMax *= 1.05
	noisy[0].WMax *= 1.05
	ga, gb, err = Fit(noisy)
	if err != nil || !near(ga, a, 0.1) || !near(gb, b, 0.1) {
		t.Errorf("noisy Fit = %g, %g, %v", ga, gb, err)
	}
}

// A cluster limited by requests only gives b = 0, not a negative b; one
// limited by bytes only gives a = 0.
func TestFitStaysNonNegative(t *testing.T) {
	// Rmax the same at every size, plus noise that would pull b below 0.
	points := []Point{{Size: 1 << 10, RMax: 1000, WMax: 1000 << 10}, {Size: 64 << 10, RMax: 1010, WMax: 1010 * 64 << 10}}
	a, b, err := Fit(points)
	if err != nil || b != 0 || !near(a, 1/1005.0, 0.01) {
		t.Errorf("requests-bound Fit = %g, %g, %v", a, b, err)
	}
	points = []Point{{Size: 1 << 20, RMax: 100, WMax: 100 << 20}, {Size: 2 << 20, RMax: 49, WMax: 49 * 2 << 20}}
	a, b, err = Fit(points)
	if err != nil || a != 0 || b <= 0 {
		t.Errorf("bytes-bound Fit = %g, %g, %v", a, b, err)
	}
}

func TestFitRefusesWhatCannotBeFitted(t *testing.T) {
	for name, pts := range map[string][]Point{
		"one size":     {pointAt(0.001, 1e-8, 1024)},
		"proportional": {{Size: 1, RMax: 100, WMax: 1000}, {Size: 1, RMax: 200, WMax: 2000}},
		"no bytes":     {{Size: 0, RMax: 100}, {Size: 0, RMax: 120}},
		"zero rate":    {{Size: 1, RMax: 0, WMax: 0}, pointAt(0.001, 1e-8, 1024)},
		"NaN":          {{Size: 1, RMax: math.NaN(), WMax: 1}, pointAt(0.001, 1e-8, 1024)},
	} {
		if a, b, err := Fit(pts); err == nil {
			t.Errorf("%s: Fit = %g, %g without an error", name, a, b)
		}
	}
}
