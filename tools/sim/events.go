package sim

import (
	"time"

	"github.com/qsplice/qsplice/splice"
)

type eventKind uint8

const (
	arrival     eventKind = iota // a customer's next request arrives
	handoffUp                    // a dispatched flow's handoff connection is up
	spliceAcked                  // a shim's SpliceAck reaches the front-end
	served                       // a back-end finishes a request
	feedback                     // a shim's Feedback reaches the front-end
	keepalive                    // a shim's keepalive is due
	sample                       // record the controller's state (Config.SampleEvery)
	stallEnd                     // a stall ends (Config.Stalls)
	carriedSent                  // a shim sends the request its Splice carried
	spliceTaken                  // the server's ACK of an early request on a pooled C2 reaches the front-end
)

// event is something that happens at a virtual instant; events at the
// same instant happen in the order they were scheduled (see sim.Queue).
type event struct {
	at       int64 // ns of virtual time
	kind     eventKind
	customer int32         // arrival: whose request arrives
	flow     splice.FlowID // the flow concerned
	backend  uint32        // keepalive: whose
	service  time.Duration // feedback: how long the request took
}

// eventQueue is the run's event list, ordered by (at, scheduling order).
type eventQueue struct{ q Queue[event] }

func (q *eventQueue) len() int     { return q.q.Len() }
func (q *eventQueue) push(e event) { q.q.Push(e.at, e) }
func (q *eventQueue) pop() event   { _, e := q.q.Pop(); return e }

// next is the time of the earliest event; the queue must not be empty.
func (q *eventQueue) next() int64 {
	at, _, _ := q.q.Peek()
	return at
}
