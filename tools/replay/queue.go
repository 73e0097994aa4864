package replay

import (
	"github.com/qsplice/qsplice/internal/queue"
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
	h queue.Heap[splice.Time, action]
}

func (q *actionQueue) push(a action) { q.h.Push(a.when, a) }

// next is the earliest action's time, or splice.Never.
func (q *actionQueue) next() splice.Time {
	if when, _, ok := q.h.Peek(); ok {
		return when
	}
	return splice.Never
}

// pop removes the earliest action; the queue must not be empty.
func (q *actionQueue) pop() action {
	_, a := q.h.Pop()
	return a
}
