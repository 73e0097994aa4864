package sched

import "github.com/qsplice/qsplice/internal/queue"

// classWaiter is a request waiting in a LifoPri queue: the request, when
// it was enqueued (for Expire) and its class (SingleFIFO mixes classes in
// one queue, and its per-class counts must still be kept).
type classWaiter struct {
	r     Request
	at    int64
	class int32
}

// deque is a bounded queue of waiting requests. New requests go to the
// back; FIFO service takes from the front and LIFO service from the back,
// so the front is always the oldest request whatever the discipline has
// been, which is what Expire needs. Storage grows on demand and is then
// reused, so a steady state allocates nothing.
type deque struct {
	queue.Ring[classWaiter]
	cap int // most requests it may hold
}

func (q *deque) full() bool { return q.Len() >= q.cap }
