package experiment

type eventKind uint8

const (
	sessionArrives eventKind = iota // a new session starts
	pageRequested                   // a session asks for its next page
	clientGivesUp                   // an attempt's patience ran out
	serviceDone                     // a back-end slot finished an attempt
	utilTick                        // the front-end samples utilization
)

// event is something that happens at a virtual instant. Events at the
// same instant happen in the order they were scheduled (seq), so a run
// never depends on heap internals.
type event struct {
	at   int64 // ns of virtual time
	seq  uint64
	kind eventKind
	sess *simSession // pageRequested
	att  *attempt    // clientGivesUp, serviceDone
}

// eventQueue is a binary min-heap of events by (at, seq).
type eventQueue struct {
	events []event
	seq    uint64
}

func (q *eventQueue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.events = append(q.events, e)
	for i := len(q.events) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q.events[i], q.events[parent] = q.events[parent], q.events[i]
		i = parent
	}
}

// pop removes the earliest event; the queue must not be empty.
func (q *eventQueue) pop() event {
	first := q.events[0]
	last := len(q.events) - 1
	q.events[0] = q.events[last]
	q.events[last] = event{}
	q.events = q.events[:last]
	for i := 0; ; {
		smallest := i
		if l := 2*i + 1; l < last && q.less(l, smallest) {
			smallest = l
		}
		if r := 2*i + 2; r < last && q.less(r, smallest) {
			smallest = r
		}
		if smallest == i {
			break
		}
		q.events[i], q.events[smallest] = q.events[smallest], q.events[i]
		i = smallest
	}
	return first
}

func (q *eventQueue) less(i, j int) bool {
	a, b := &q.events[i], &q.events[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}
