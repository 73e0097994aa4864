package sched

// classWaiter is a request waiting in a LifoPri queue: the request, when
// it was enqueued (for Expire) and its class (SingleFIFO mixes classes in
// one queue, and its per-class counts must still be kept).
type classWaiter struct {
	r     Request
	at    int64
	class int32
}

// deque is a bounded double-ended ring of waiting requests. New requests
// go to the back; FIFO service takes from the front and LIFO service from
// the back, so the front is always the oldest request whatever the
// discipline has been, which is what Expire needs. Storage grows by
// doubling up to the capacity on demand and is then reused, so a steady
// state allocates nothing.
type deque struct {
	buf  []classWaiter
	head int // index of the front (oldest) element
	n    int
	cap  int // most elements it may hold
}

func (q *deque) full() bool { return q.n >= q.cap }

// pushBack appends x; the deque must not be full.
func (q *deque) pushBack(x classWaiter) {
	if q.n == len(q.buf) {
		grown := make([]classWaiter, min(max(8, 2*len(q.buf)), q.cap))
		for i := range q.n {
			grown[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = x
	q.n++
}

// front is the oldest element; the deque must not be empty.
func (q *deque) front() *classWaiter { return &q.buf[q.head] }

// popFront removes the oldest element; the deque must not be empty.
func (q *deque) popFront() classWaiter {
	x := q.buf[q.head]
	q.buf[q.head] = classWaiter{} // drop the strings so they can be collected
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return x
}

// popBack removes the newest element; the deque must not be empty.
func (q *deque) popBack() classWaiter {
	i := (q.head + q.n - 1) % len(q.buf)
	x := q.buf[i]
	q.buf[i] = classWaiter{}
	q.n--
	return x
}
