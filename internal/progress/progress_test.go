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
