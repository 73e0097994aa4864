package sim

import (
	"math"
	"testing"
	"time"

	"github.com/qsplice/qsplice/frontend/controller"
	"github.com/qsplice/qsplice/sched"
)

// sampleEvery is the feedback policy's default period: one sample per
// period.
const sampleEvery = sched.DefaultFeedbackPeriod

// feedbackStepConfig is the lab cluster (5 back-ends x 5 slots, 20 ms
// exponential service: 1250 req/s) behind a feedback listener with the
// classes gold 3, silver 2 and bronze 1 chosen by Host, each offering
// its share of half the capacity, then of twice the capacity from up to
// down, then half again.
func feedbackStepConfig(trees int, b float64, up, down, end time.Duration) Config {
	const capacity = 1250.0
	shares := []float64{3.0 / 6, 2.0 / 6, 1.0 / 6}
	var customers []Customer
	for i, name := range []string{"gold", "silver", "bronze"} {
		customers = append(customers, Customer{
			Name: name, Host: name + ".example", Service: 20 * time.Millisecond, Bytes: 64 << 10,
			Rate:  0.5 * capacity * shares[i],
			Steps: []RateStep{{At: up, Rate: 2 * capacity * shares[i]}, {At: down, Rate: 0.5 * capacity * shares[i]}},
		})
	}
	classes := sched.DefaultFeedbackClasses()
	for i := range classes {
		classes[i].Hosts = []string{classes[i].Name + ".example"}
	}
	return Config{
		Seed: 1, Duration: end, Backends: 5, Capacity: 5, Customers: customers, Trees: trees,
		SampleEvery: sampleEvery,
		Scheduler: controller.Config{
			Listeners: []controller.Listener{{Port: Port, Policy: "feedback"}},
			Feedback: controller.FeedbackConfig{Policy: sched.FeedbackConfig{
				Classes: classes, Trees: max(trees, 1), B: b,
			}},
		},
	}
}

// The feedback policy in the simulated cluster, without content
// adaptation, under a step from half to twice the capacity and back:
// during the overload the classes' proQoS keeps 3:2:1 within 10%, no
// class starves, each queue stays within 20% of target_q in most
// periods; the refusals are 503s (none time out), and they stop once the
// load is back at half.
func TestSimFeedbackStepLoad(t *testing.T) {
	up, down, end := 10*time.Second, 40*time.Second, 55*time.Second
	res, err := Run(feedbackStepConfig(0, 0, up, down, end))
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) *controller.FeedbackStatus { return res.Samples[int(d/sampleEvery)-1].Feedback }
	start, stop := at(up+10*time.Second), at(down)
	var frac [3]float64
	within, periods := [3]int{}, 0
	for _, s := range res.Samples {
		if s.At <= up+10*time.Second || s.At > down {
			continue
		}
		periods++
		for i, c := range s.Feedback.Classes {
			if math.Abs(float64(c.Queued-c.TargetQueue)) <= 0.2*float64(c.TargetQueue) {
				within[i]++
			}
		}
	}
	for i := range frac {
		a, b := start.Classes[i], stop.Classes[i]
		d := float64(b.Dispatched - a.Dispatched)
		frac[i] = d / (d + float64(b.Refused+b.Overload-a.Refused-a.Overload))
		if d == 0 {
			t.Errorf("%s starved", b.Name)
		}
	}
	t.Logf("2x overload, 20-40 s: served fractions %.3f %.3f %.3f, ratios %.2f : %.2f : 1; proQoS at 40 s %.3f %.3f %.3f; "+
		"periods within 20%% of target_q: %d %d %d of %d",
		frac[0], frac[1], frac[2], frac[0]/frac[2], frac[1]/frac[2],
		stop.Classes[0].ProQoS, stop.Classes[1].ProQoS, stop.Classes[2].ProQoS, within[0], within[1], within[2], periods)
	if r := frac[0] / frac[2]; math.Abs(r-3)/3 > 0.1 {
		t.Errorf("gold/bronze %.2f, want 3 +/- 10%%", r)
	}
	if r := frac[1] / frac[2]; math.Abs(r-2)/2 > 0.1 {
		t.Errorf("silver/bronze %.2f, want 2 +/- 10%%", r)
	}
	for i, n := range within {
		if n < periods*80/100 {
			t.Errorf("%s: %d of %d periods within 20%% of target_q, want 80%%", stop.Classes[i].Name, n, periods)
		}
	}
	var timeouts, refused int
	for _, c := range res.Customers {
		timeouts += c.Rejected.Timeout
		refused += c.Rejected.Overload
	}
	if timeouts != 0 || refused == 0 {
		t.Errorf("%d queue timeouts and %d overload refusals, want none and some", timeouts, refused)
	}
	settled := at(down + time.Second)
	for i, c := range at(end).Classes {
		if c.Refused != settled.Classes[i].Refused {
			t.Errorf("%s: %d refusals more than 1 s after the step down", c.Name, c.Refused-settled.Classes[i].Refused)
		}
	}
}

// With three content trees and the utilization calibrated on bandwidth
// (b = 1 / (capacity x full-quality bytes)), the step to twice the
// capacity is absorbed by cheaper trees: U, averaged over each second,
// settles at 0.85 +/- 0.05 within 10 s and stays there; after the step
// down G is back at M within 10 s. (One period's U, over 50 ms and some
// 50 completions, is too noisy to hold to 0.05 by itself.)
func TestSimFeedbackContentAdaptation(t *testing.T) {
	up, down, end := 10*time.Second, 40*time.Second, 55*time.Second
	b := 1 / (1250.0 * (64 << 10))
	res, err := Run(feedbackStepConfig(3, b, up, down, end))
	if err != nil {
		t.Fatal(err)
	}
	// perSecond[k] is the mean U of the periods ending in (k, k+1] s.
	perSecond := make([]float64, int(end/time.Second))
	for _, s := range res.Samples {
		if k := int((s.At - 1) / time.Second); k < len(perSecond) {
			perSecond[k] += s.Feedback.U / float64(time.Second/sampleEvery)
		}
	}
	first, last := int(up/time.Second), int(down/time.Second)
	settled := last // the first second from which every second is in the band
	for k := last - 1; k >= first && math.Abs(perSecond[k]-0.85) <= 0.05; k-- {
		settled = k
	}
	full := time.Duration(-1)
	for _, s := range res.Samples {
		if s.At > down && s.Feedback.G == 3 {
			full = s.At - down
			break
		}
	}
	g := res.Samples[int(down/sampleEvery)-1].Feedback.G
	t.Logf("U per second from the step up: %.3f; in 0.85 +/- 0.05 from second %d after the step; G %.2f before the step down, back at 3 %v after it",
		perSecond[first:last], settled-first, g, full)
	if settled-first >= 10 {
		t.Errorf("U settled %d s after the step, want within 10 s", settled-first)
	}
	if full < 0 || full > 10*time.Second {
		t.Errorf("G back at M %v after the step down, want within 10 s", full)
	}
	var timeouts int
	for _, c := range res.Customers {
		timeouts += c.Rejected.Timeout
	}
	if timeouts != 0 {
		t.Errorf("%d queue timeouts", timeouts)
	}
}
