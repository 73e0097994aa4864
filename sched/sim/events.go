package sim

import "github.com/qsplice/qsplice/sched"

type eventKind uint8

const (
	arrival    eventKind = iota // customer's next request arrives
	completion                  // a back-end finishes a request
)

// event is something that happens at a virtual instant; events at the
// same instant happen in the order they were scheduled (see sim.Queue).
type event struct {
	at       int64 // ns of virtual time
	kind     eventKind
	customer int32           // arrival: whose request arrives
	backend  sched.BackendID // completion: who served it
	request  sched.Request   // completion: what was served
	service  int64           // completion: how long it took, ns
}

// eventQueue is the run's event list, ordered by (at, scheduling order).
type eventQueue struct{ q Queue[event] }

func (q *eventQueue) len() int     { return q.q.Len() }
func (q *eventQueue) push(e event) { q.q.Push(e.at, e) }
func (q *eventQueue) pop() event   { _, e := q.q.Pop(); return e }
