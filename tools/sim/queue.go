package sim

import "github.com/qsplice/qsplice/internal/queue"

// Queue is the event list of a discrete-event simulation: a min-heap of
// values by virtual time (nanoseconds). Values due at the same instant
// come out in the order they were pushed, so a run never depends on heap
// internals and stays deterministic. Other simulators (tools/experiment)
// use it too.
type Queue[T any] = queue.Heap[int64, T]
