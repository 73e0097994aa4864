package sched

import (
	"errors"
	"net/netip"
	"time"

	"github.com/qsplice/qsplice/internal/queue"
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

	// For the Feedback policy (issue 10); the other policies ignore
	// them. The front-end's FeedbackClassifier fills the first three
	// before Enqueue; Feedback.Next sets Tree.
	//
	// Session: the request carries the session cookie of a session the
	// front-end has seen before. Transactional: that session (or this
	// request) reached a transactional stage. Client is the client's
	// address, which the content adaptor hashes. Tree is the content
	// tree to serve the request from (1..M, M full quality); 0 before
	// Next and for the other policies.
	Session       bool
	Transactional bool
	Tree          uint8
	Client        netip.Addr
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
// baseline the QoS policies are measured against. With a queue timeout
// it expires requests like the other policies (Expire, NextExpiry): a
// request nobody serves must not wait for ever, holding its client's
// connection and its place in the queue.
type FIFO struct {
	ring     queue.Ring[fifoItem]
	capacity int
	timeout  int64 // ns; 0: none
	lastNow  int64
}

type fifoItem struct {
	r  Request
	at int64 // Enqueue's now
}

var _ Policy = (*FIFO)(nil)

// NewFIFO returns an empty FIFO holding at most capacity requests, with
// no queue timeout. A capacity below 1 gives a queue that refuses
// everything.
func NewFIFO(capacity int) *FIFO { return NewFIFOWithTimeout(capacity, 0) }

// NewFIFOWithTimeout returns an empty FIFO holding at most capacity
// requests, each for at most timeout (0: no limit).
func NewFIFOWithTimeout(capacity int, timeout time.Duration) *FIFO {
	q := &FIFO{capacity: max(capacity, 0), timeout: int64(max(timeout, 0))}
	q.ring.Grow(q.capacity)
	return q
}

// Enqueue appends r; now starts its queue timeout.
func (q *FIFO) Enqueue(r Request, now int64) error {
	if q.ring.Len() >= q.capacity {
		return ErrQueueFull
	}
	q.lastNow = max(q.lastNow, now)
	q.ring.PushBack(fifoItem{r, q.lastNow})
	return nil
}

// Next removes the oldest request; now is not used.
func (q *FIFO) Next(now int64) (Request, bool) {
	if q.ring.Len() == 0 {
		return Request{}, false
	}
	return q.ring.PopFront().r, true
}

// Len returns the number of waiting requests.
func (q *FIFO) Len() int { return q.ring.Len() }

// Expire removes every request that at now has waited longer than the
// queue timeout since its Enqueue, oldest first, and calls f with each
// after it is gone. Without a timeout it does nothing.
func (q *FIFO) Expire(now int64, f func(Request)) {
	q.lastNow = max(q.lastNow, now)
	if q.timeout <= 0 {
		return
	}
	for q.ring.Len() > 0 && q.lastNow-q.ring.Front().at > q.timeout {
		f(q.ring.PopFront().r)
	}
}

// NextExpiry is the earliest time at which Expire would remove a
// request; false when none can expire. It changes nothing.
func (q *FIFO) NextExpiry() (int64, bool) {
	if q.timeout <= 0 || q.ring.Len() == 0 {
		return 0, false
	}
	return q.ring.Front().at + q.timeout + 1, true
}
