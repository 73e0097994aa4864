package sched

import (
	"errors"

	"github.com/qsplice/qsplice/sched/queue"
)

// RequestID names one request from admission to completion.
type RequestID uint64

// Request is what the scheduler knows about a request waiting for a
// back-end. It is copied by value into queues.
type Request struct {
	ID       RequestID
	Customer string // the customer the request is charged to
	Host     string
	Path     string
	Port     uint16 // the VIP port the client connected to
	Arrival  int64  // ns on the caller's clock, when the head was complete
}

// ErrQueueFull is returned by Enqueue when the policy holds as many
// requests as it can; the front-end refuses the request (503).
var ErrQueueFull = errors.New("sched: queue full")

// Policy orders admitted requests. now is the caller's clock in ns; a
// policy may use it (ageing, rates) or ignore it.
type Policy interface {
	// Enqueue admits r, or returns ErrQueueFull.
	Enqueue(r Request, now int64) error
	// Next removes and returns the request to dispatch next; false when
	// none is waiting.
	Next(now int64) (Request, bool)
	// Len is how many requests are waiting.
	Len() int
}

// FIFO serves requests in arrival order from a ring sized for its
// capacity up front, so Enqueue and Next never allocate. It is the
// baseline the QoS policies are measured against.
type FIFO struct {
	ring     queue.Ring[Request]
	capacity int
}

var _ Policy = (*FIFO)(nil)

// NewFIFO returns an empty FIFO holding at most capacity requests. A
// capacity below 1 gives a queue that refuses everything.
func NewFIFO(capacity int) *FIFO {
	q := &FIFO{capacity: max(capacity, 0)}
	q.ring.Grow(q.capacity)
	return q
}

// Enqueue appends r; now is not used.
func (q *FIFO) Enqueue(r Request, now int64) error {
	if q.ring.Len() >= q.capacity {
		return ErrQueueFull
	}
	q.ring.PushBack(r)
	return nil
}

// Next removes the oldest request; now is not used.
func (q *FIFO) Next(now int64) (Request, bool) {
	if q.ring.Len() == 0 {
		return Request{}, false
	}
	return q.ring.PopFront(), true
}

// Len returns the number of waiting requests.
func (q *FIFO) Len() int { return q.ring.Len() }
