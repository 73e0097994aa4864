package experiment

import "github.com/qsplice/qsplice/tools/sim"

type eventKind uint8

const (
	sessionArrives eventKind = iota // a new session starts
	pageRequested                   // a session asks for its next page
	clientGivesUp                   // an attempt's patience ran out
	serviceDone                     // a back-end slot finished an attempt
	utilTick                        // the front-end samples utilization
)

// event is something that happens at a virtual instant; events at the
// same instant happen in the order they were scheduled (see sim.Queue).
type event struct {
	at   int64 // ns of virtual time
	kind eventKind
	sess *simSession // pageRequested
	att  *attempt    // clientGivesUp, serviceDone
}

// eventQueue is the run's event list, ordered by (at, scheduling order).
type eventQueue struct{ q sim.Queue[event] }

func (q *eventQueue) len() int     { return q.q.Len() }
func (q *eventQueue) push(e event) { q.q.Push(e.at, e) }
func (q *eventQueue) pop() event   { _, e := q.q.Pop(); return e }
