package progress

import (
	"bytes"
	"testing"
	"time"
)

// TestStepsAndETA: the time left is the time so far scaled by the weight
// still to come over the weight done.
func TestStepsAndETA(t *testing.T) {
	var b bytes.Buffer
	p := New(&b, "sweep", 3, 4)
	clock := p.start
	p.now = func() time.Time { return clock }
	p.Step("fifo at 0.5", 1)
	clock = clock.Add(10 * time.Second)
	p.Step("fifo at 1.4", 2) // 1 of 4 done in 10 s: 30 s left
	clock = clock.Add(20 * time.Second)
	p.Step("lifo at 0.5", 1) // 3 of 4 done in 30 s: 10 s left
	clock = clock.Add(10 * time.Second)
	p.Done()
	want := "sweep [1/3] fifo at 0.5\n" +
		"sweep [2/3] fifo at 1.4, 10s in, about 30s left\n" +
		"sweep [3/3] lifo at 0.5, 30s in, about 10s left\n" +
		"sweep: 3 steps in 40s\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestQuietAndNilAreSafe: a nil writer (-quiet) and a nil Progress take
// steps without printing or failing, and still count.
func TestQuietAndNilAreSafe(t *testing.T) {
	p := New(nil, "x", 2, 2)
	p.Step("a", 1)
	p.Done()
	if p.k != 1 || p.done != 1 {
		t.Errorf("counted %d steps, weight %v", p.k, p.done)
	}
	var q *Progress
	q.Step("b", 1)
	q.Done()
}

// TestUpToDropsWhatWillNotRun: a bounded run says "at most", and the
// steps it drops leave N and the time left; Done counts the steps taken.
func TestUpToDropsWhatWillNotRun(t *testing.T) {
	var b bytes.Buffer
	clock := time.Unix(1000, 0)
	p := UpTo(&b, "calibration", 6, 6).WithClock(func() time.Time { return clock })
	p.Step("size 1K at 50 req/s", 1)
	clock = clock.Add(4 * time.Second)
	p.Step("size 1K at 75 req/s", 1) // 1 of 6 done in 4 s: at most 20 s left
	clock = clock.Add(4 * time.Second)
	p.Drop(1, 1)                     // the 75 req/s step failed: the 1K climb ends a step early
	p.Step("size 1M at 50 req/s", 1) // 2 of 5 done in 8 s: at most 12 s left
	clock = clock.Add(4 * time.Second)
	p.Done()
	want := "calibration [1/6] size 1K at 50 req/s\n" +
		"calibration [2/6] size 1K at 75 req/s, 4s in, at most about 20s left\n" +
		"calibration [3/5] size 1M at 50 req/s, 8s in, at most about 12s left\n" +
		"calibration: 3 steps in 12s\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestDropNeverBelowWhatRan: dropping more than is left cannot make N
// smaller than the steps already taken, nor the weight left negative.
func TestDropNeverBelowWhatRan(t *testing.T) {
	p := UpTo(nil, "x", 4, 4)
	p.Step("a", 1)
	p.Step("b", 1)
	p.Drop(10, 10)
	if p.n != 2 || p.total != 2 {
		t.Errorf("after dropping too much: n %d, total %v; want 2, 2", p.n, p.total)
	}
}
