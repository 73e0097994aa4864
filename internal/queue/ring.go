package queue

// Ring is a double-ended queue on a ring buffer: values go in at the back
// and come out at the front (FIFO) or the back (LIFO), so the front is
// always the oldest value whatever mix of the two was used. Its storage
// grows by doubling when it is full and is then reused; a bound on the
// length, if any, is the caller's to check. The zero Ring is empty and
// allocates nothing until the first push.
//
// PopFront and PopBack return a copy; a caller queueing large values
// reads them in place (Front, Back) and then pops, which copies less.
type Ring[T any] struct {
	buf  []T // len(buf) is 0 or a power of two
	head int // index of the front value
	n    int
}

// minRing is the smallest storage a Ring allocates.
const minRing = 4

// Len is the number of values in the ring.
func (r *Ring[T]) Len() int { return r.n }

// Grow makes room for n more values, so that the next n pushes do not
// allocate.
func (r *Ring[T]) Grow(n int) {
	need := r.n + n
	if need <= len(r.buf) {
		return
	}
	size := max(minRing, len(r.buf))
	for size < need {
		size *= 2
	}
	r.resize(size)
}

// resize moves the values to new storage of size, a power of two that
// holds them all, front first.
func (r *Ring[T]) resize(size int) {
	grown := make([]T, size)
	for i := range r.n {
		grown[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf, r.head = grown, 0
}

// PushBack adds x at the back. It is small enough to be inlined, growth
// included: the schedulers push on every Enqueue.
func (r *Ring[T]) PushBack(x T) {
	if r.n == len(r.buf) {
		r.resize(max(minRing, 2*len(r.buf)))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = x
	r.n++
}

// Front is the oldest value, in place. The ring must not be empty.
func (r *Ring[T]) Front() *T {
	if r.n == 0 {
		panic("queue: Front of an empty Ring")
	}
	return &r.buf[r.head]
}

// Back is the newest value, in place. The ring must not be empty.
func (r *Ring[T]) Back() *T {
	if r.n == 0 {
		panic("queue: Back of an empty Ring")
	}
	return &r.buf[(r.head+r.n-1)&(len(r.buf)-1)]
}

// PopFront removes and returns the oldest value. The ring must not be
// empty.
func (r *Ring[T]) PopFront() T {
	if r.n == 0 {
		panic("queue: PopFront of an empty Ring")
	}
	x := r.buf[r.head]
	var zero T
	r.buf[r.head] = zero // let what the value points to be collected
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return x
}

// PopBack removes and returns the newest value. The ring must not be
// empty.
func (r *Ring[T]) PopBack() T {
	if r.n == 0 {
		panic("queue: PopBack of an empty Ring")
	}
	i := (r.head + r.n - 1) & (len(r.buf) - 1)
	x := r.buf[i]
	var zero T
	r.buf[i] = zero
	r.n--
	return x
}

// Cap is the number of values the ring holds without growing.
func (r *Ring[T]) Cap() int { return len(r.buf) }

// Compact moves the values into the smallest storage that holds them, so
// the memory of a past peak goes back to the garbage collector.
func (r *Ring[T]) Compact() {
	size := minRing
	for size < r.n {
		size *= 2
	}
	if size < len(r.buf) {
		r.resize(size)
	}
}
