package replay

import (
	"container/heap"

	"github.com/qsplice/qsplice/proto"
	"github.com/qsplice/qsplice/splice"
)

// actionKind says what a scheduled action does.
type actionKind uint8

const (
	// actBackendFrame: a simulated back-end sends frame to the engine.
	actBackendFrame actionKind = iota + 1
	// actBackendAck: back-end's delayed ACK of request bytes on the C2
	// connection from port; built when it runs, so it acknowledges
	// everything received by then.
	actBackendAck
	// actControl: a simulated shim's control message reaches the
	// front-end.
	actControl
	// actFeedback: flow's shim reports its oldest request served.
	actFeedback
)

// action is something the replay does at a given engine time, in place
// of the daemon or a back-end host.
type action struct {
	when    splice.Time
	order   uint64 // scheduling order: breaks ties between equal times
	kind    actionKind
	frame   []byte
	msg     proto.Message
	flow    splice.FlowID
	backend int    // 1-based back-end index
	port    uint16 // C2 source port
}

// actionQueue orders actions by time, then by the order they were pushed,
// so equal times never depend on heap internals.
type actionQueue struct {
	h     actionHeap
	order uint64
}

func (q *actionQueue) push(a action) {
	q.order++
	a.order = q.order
	heap.Push(&q.h, a)
}

// next is the earliest action's time, or splice.Never.
func (q *actionQueue) next() splice.Time {
	if len(q.h) == 0 {
		return splice.Never
	}
	return q.h[0].when
}

func (q *actionQueue) pop() action { return heap.Pop(&q.h).(action) }

type actionHeap []action

func (h actionHeap) Len() int { return len(h) }
func (h actionHeap) Less(i, j int) bool {
	if h[i].when != h[j].when {
		return h[i].when < h[j].when
	}
	return h[i].order < h[j].order
}
func (h actionHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *actionHeap) Push(x any)   { *h = append(*h, x.(action)) }
func (h *actionHeap) Pop() any {
	old := *h
	a := old[len(old)-1]
	*h = old[:len(old)-1]
	return a
}
